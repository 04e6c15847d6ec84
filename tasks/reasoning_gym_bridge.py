"""Any reasoning-gym dataset as a task: ``--task rg:<dataset>`` (e.g. rg:basic_arithmetic, rg:leg_counting).

Problems are reasoning-gym's own items, scored by the dataset's own ``score_answer(answer, entry)``. Options:
  pool_size (500), pool_seed, eval_fraction (0.2)  the pool: ONE generation with one seed, deduplicated by question
                                                   and split by a content hash (tasks/splits.py says why)
  anything else                                    a field of the dataset's config dataclass, e.g.
                                                   ``--set task.max_terms=3 --set task.operators=+,-``; strings are
                                                   converted to the field's annotated type (int, bool, lists, ...)
                                                   by the shared converter (harness/plugins/options.py);
                                                   ``harness options task rg:<dataset>`` lists them

Answer extraction: reasoning-gym expects ``<answer>...</answer>`` (the prompt asks for it; its content is passed
as is, stripped, since reasoning-gym's scorers compare strings); a chat model that forgets the tags is read from
its last ``\\boxed{}``, then "the answer is X" / "Answer: X", then a short last line, each lightly cleaned
(markdown, a trailing period, units after a number; worked arithmetic "2 + 3 = 5" is cut to its result).
Rewards: correct (primary: the score is 1), score (reasoning-gym's own, partial credit included), format (the
answer tags were used).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import importlib.metadata
import math
import re
from typing import Annotated, Any

from harness.plugins.option_help import Bounds, Option, describe_dataclass
from harness.plugins.options import make_config
from harness.plugins.size_bounds import POOL, SEED
from harness.tasks.math_answers import boxed_contents, clean_answer
from harness.tasks.splits import POOL_SEED, digest, eval_split, split_by_content, take
from harness.types import Messages, Problem, Score, Split, TaskCapabilities

INSTRUCTION = (
    "Reason briefly, then write your final answer between <answer> and </answer> tags, with nothing else inside them."
)
MANAGED = {"seed": "pool_seed", "size": "pool_size"}  # config fields the task sets: the pool's
MAX_LAST_LINE_CHARS = 100  # a longer last line is prose, not an answer: reported as unparsed

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_OPEN_TAG = re.compile(r"<answer>(.*)$", re.IGNORECASE | re.DOTALL)  # cut off at max_new_tokens
# "The answer is X", "Answer: X", "The answer to this problem is X" (a few words may sit between).
_PHRASE = re.compile(r"\b(?:answer|result)\b\**(?:[^\n.:]{0,40}?\s+is\b|\s*:)[*\s:]*([^\n]*)", re.IGNORECASE)
# Numbers and operators, then "= result" at the very end ("A=1,B=2" is an answer made of equations, left alone).
_WORKED_ARITHMETIC = re.compile(r"(?<![\w.])-?\d[-\d\s+*/×÷().=]*=\s*(-?\d+(?:\.\d+)?)$")
_SENTENCE_END = re.compile(r"\.(?:\s|$)")


class ReasoningGymTask:
    """``ReasoningGymTask("leg_counting", max_animals=4)``: a reasoning-gym dataset scored by its own scorer."""

    version = "rg-bridge-v1"  # bump on any change of prompt, extraction, scoring or pool handling
    capabilities = TaskCapabilities(max_new_tokens=256)

    def __init__(
        self,
        dataset: str = "",  # the reasoning-gym dataset (rg:<dataset>)
        *,
        # items generated once, then deduplicated and split into train and eval
        pool_size: Annotated[int, Bounds(1, POOL)] = 500,
        pool_seed: Annotated[int, SEED] = POOL_SEED,  # the seed of that one generation
        eval_fraction: float = 0.2,  # the pool's share that is eval problems (by content hash)
        **config: Any,  # fields of the dataset's config dataclass (`harness options task rg:<dataset>`)
    ) -> None:
        from reasoning_gym.factory import DATASETS  # lazy: importing reasoning-gym takes a second or more

        if dataset not in DATASETS:
            raise ValueError(_unknown_dataset(dataset, sorted(DATASETS)))
        self.dataset, self.name = dataset, f"rg:{dataset}"
        self.pool_size, self.pool_seed, self.eval_fraction = int(pool_size), int(pool_seed), float(eval_fraction)
        if self.pool_size < 1 or not 0.0 < self.eval_fraction <= 1.0:
            raise ValueError(f"{self.name}: need pool_size >= 1 and 0 < eval_fraction <= 1")
        dataset_cls, config_cls = DATASETS[dataset]
        managed = sorted(set(config) & set(MANAGED))
        if managed:
            raise ValueError(f"{self.name}: {', '.join(managed)} is set by the task: use {MANAGED[managed[0]]}")
        self.config = make_config(config_cls, config, self.name, exclude=tuple(MANAGED))
        self.config.seed, self.config.size = self.pool_seed, self.pool_size
        try:
            self._generator = dataset_cls(config=self.config)  # validates the config (with asserts)
        except (AssertionError, ValueError, TypeError) as exc:
            raise ValueError(f"{self.name}: invalid options: {_one_line(exc)}") from None
        self.reward_weights = {"correct": 1.0, "format": 0.5}  # "score" (partial credit) is reported
        self._splits: dict[str, list[Problem]] | None = None
        self._duplicates = 0

    @staticmethod
    def options_for(dataset: str) -> list[Option]:
        """The dataset's own options: its config dataclass's fields, less those the task sets (seed, size)."""
        from reasoning_gym.factory import DATASETS

        return describe_dataclass(DATASETS[dataset][1], exclude=tuple(MANAGED)) if dataset in DATASETS else []

    # ------------------------------------------------------------------------------------------------------------
    # Task protocol
    # ------------------------------------------------------------------------------------------------------------

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        if split not in ("train", "eval"):
            raise ValueError(f"{self.name}: split must be 'train' or 'eval', got {split!r}")
        if self._splits is None:
            pool = [self._problem(i, self._generator[i]) for i in range(self.pool_size)]
            self._splits = split_by_content(pool, self.eval_fraction)
            self._duplicates = len(pool) - sum(map(len, self._splits.values()))
        return take(self._splits[split], limit, seed)

    def messages(self, problem: Problem) -> Messages:
        return [{"role": "user", "content": f"{problem.prompt}\n\n{INSTRUCTION}"}]

    def score(self, problem: Problem, completion: str) -> Score:
        answer, tagged = extract_answer(completion)
        reference = problem.meta.get("rg_answer", problem.answer)
        if answer is not None and not tagged and _is_number(reference) and not _is_number(answer):
            # An untagged "Answer: There are 36 legs in total ..." for a numeric dataset: the number the phrase
            # introduces is the answer (the first one), not the sentence reasoning-gym would compare as a string.
            first = _NUMBER.search(answer)
            answer = first.group(0) if first else answer
        value = 0.0
        if answer is not None:
            entry = {
                "question": problem.prompt,
                "answer": problem.meta.get("rg_answer", problem.answer),
                "metadata": problem.meta.get("metadata", {}),
            }
            try:
                value = float(self._generator.score_answer(answer, entry))
            except Exception:  # a scorer that chokes on a strange answer has not been given a right one
                value = 0.0
            value = min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0
        return Score(
            rewards={"correct": float(value >= 1.0), "score": value, "format": float(tagged)},
            primary="correct",
            extracted=answer,
            unparsed=answer is None,
        )

    def data_card(self) -> dict[str, Any]:
        """The data in three fields (harness.types.DataCard): the generator, the eval split, its rows."""
        self.problems("eval", limit=0)  # generates the pool
        return {
            "name": f"reasoning-gym {self.dataset} (generated, pool of {self.pool_size})",
            "split": eval_split(None, self.eval_fraction),
            "size": len((self._splits or {}).get("eval", [])),
        }

    def data_source(self) -> dict[str, Any]:
        try:
            version = importlib.metadata.version("reasoning-gym")
        except importlib.metadata.PackageNotFoundError:
            version = None
        config = {k: _plain(v) for k, v in dataclasses.asdict(self.config).items()}
        info: dict[str, Any] = {
            "source": "reasoning-gym",
            "version": version,
            "dataset": self.dataset,
            "config": config,
            "pool_seed": self.pool_seed,
            "pool_size": self.pool_size,
            "eval_fraction": self.eval_fraction,
            "split": "content-hash",
        }
        if self._splits is not None:
            info |= {
                "n_train": len(self._splits["train"]),
                "n_eval": len(self._splits["eval"]),
                "duplicates_dropped": self._duplicates,
            }
        return info

    def _problem(self, index: int, entry: dict[str, Any]) -> Problem:
        question, answer = str(entry["question"]), entry.get("answer")
        meta: dict[str, Any] = {"metadata": entry.get("metadata", {}), "source_index": index}
        if answer is not None and not isinstance(answer, str):
            meta["rg_answer"] = answer  # the scorer gets the reference in its own type
        # Some datasets have no single reference (their scorer checks the answer): answer None.
        return Problem(
            id=f"rg-{self.dataset}-{digest(question)[:12]}",
            prompt=question,
            answer=None if answer is None else str(answer),
            meta=meta,
        )


# ----------------------------------------------------------------------------------------------------------------
# Answer extraction
# ----------------------------------------------------------------------------------------------------------------


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value.strip()) is not None)


def extract_answer(text: str) -> tuple[str | None, bool]:
    """(final answer, whether it sat in <answer> tags); (None, False) when none is found. Never raises.
    No length cap: the generation budget bounds a completion, and a long reference (a grid) must fit."""
    if not isinstance(text, str):
        return None, False
    tags = _ANSWER_TAG.findall(text)
    if tags:  # the last pair, even empty, as reasoning-gym reads it (some references are the empty string)
        return tags[-1].strip(), True
    for candidate in _fallbacks(text):
        answer = clean_answer(candidate)
        worked = _WORKED_ARITHMETIC.search(answer) if len(answer) <= 200 else None  # the regex can backtrack
        if worked:  # "17 + 60 = 77": the result, not the working (reasoning-gym compares strings)
            answer = worked.group(1)
        if answer:
            return answer, False
    return None, False


def _fallbacks(text: str):
    """Candidates in order of trust, for a model that did not close (or write) the answer tags."""
    opened = _OPEN_TAG.search(text)
    if opened:
        yield opened.group(1)
    yield from reversed(boxed_contents(text))
    for m in reversed(list(_PHRASE.finditer(text))):
        yield _SENTENCE_END.split(m.group(1), maxsplit=1)[0]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if lines and len(lines[-1]) <= MAX_LAST_LINE_CHARS:
        yield lines[-1]


# ----------------------------------------------------------------------------------------------------------------
# Options -> the dataset's config dataclass (through the shared converter, harness/plugins/options.py)
# ----------------------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A config value as JSON (enums by value, dates as text) for the manifest."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _unknown_dataset(name: str, known: list[str]) -> str:
    if not name:
        return f"rg: needs a dataset name: --task rg:<name>, e.g. rg:{', rg:'.join(known[:5])} ({len(known)} in all)"
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    examples = close or [n for n in ("basic_arithmetic", "chain_sum", "leg_counting", "maze") if n in known]
    return (
        f"unknown reasoning-gym dataset {name!r}; did you mean {', '.join(examples)}? "
        f"({len(known)} in all: {', '.join(known[:8])}, ...)"
    )
