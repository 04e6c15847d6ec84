"""The "math" task: a maths problem, a request for a boxed final answer, and a reward vector
(correct, boxed, strict, length, lenient_correct).

Sources (option ``source``):
  gym-arithmetic  reasoning-gym ``basic_arithmetic``, generated offline (the default: easy enough for SmolLM2-135M)
  champ           the CHAMP competition problems shipped in the ``champ-dataset`` package
  jsonl           a local file of {"id"?, "problem", "answer"} rows
  hub             a Hugging Face dataset in MATH's schema (EleutherAI/hendrycks_math, HuggingFaceH4/MATH-500, ...), or
                  ``hub_id`` a local copy read through datasets: a save_to_disk folder, a .parquet/.json/.jsonl/.csv
                  file, a folder of them (tasks/hub_data.py)

Own data (sources jsonl and hub): ``question`` and ``answer`` name the columns holding the problem and its reference
answer (default: "problem" and "answer"), and ``answer_pattern`` a regular expression whose first group is the answer
within its column (tasks/columns.py). GSM8K: ``hub_id=openai/gsm8k hub_config=main question=question
answer_pattern='#### (.+)'``; the column's full text stays in the problem's meta as "raw_answer", and a row the
pattern finds nothing in is dropped (counted in data_source()). Without these options rows are read as before.

Train and eval are disjoint by content: a source with train/test splits keeps them (minus any train problem whose
text is also in test); a single pool is cut by a hash of the normalised problem text, never by seeds (reasoning-gym
item i of seed s+1 is item i+1 of seed s; see tasks/splits.py).

"correct" counts only an answer the completion COMMITS to (tasks/math_answers.py): a \\boxed{}, "the answer is X",
"Answer: X", a final sentence that states a value ("... = 7", "The sum is 55."), or a final line that is a value
alone. A completion that commits to none is unparsed (extracted None), never right or wrong by chance: a number that
merely appears last in rambling text is a guess. "boxed" is the format: the committed answer is boxed and is a value:
not a copy of what the instruction's own box holds (the placeholder of "\\boxed{result}"), and not the problem's
arithmetic written out again ("\\boxed{9 + 3}", a hack GRPO found within 6 steps on SmolLM2-135M).
"lenient_correct" reads a completion that commits to nothing as its last number, as math-v2 did, and is reported
with weight 0: visible in metrics, never trained on or scalarised. "strict" (right and boxed) is weighted only when
``strict_weight`` > 0: a format reward paid only on a right answer, which a wrong boxed answer cannot collect.

"length" prefers concise completions: with n = len(completion.strip()) characters,
    length = 1                                          if n <= length_target
           = (length_cap - n) / (length_cap - length_target)   if length_target < n < length_cap
           = 0                                          if n >= length_cap, or when no answer was found
(an empty reply, or one that commits to no answer, is not a concise answer). It is always reported and weighted only
when ``length_weight`` > 0.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from harness.plugins.option_help import Bounds
from harness.plugins.options import coerce
from harness.plugins.size_bounds import CHARS, POOL
from harness.tasks.behaviours import with_hints
from harness.tasks.chat_data import COMPLETION, ask, other_columns, question_column, read_completion, read_prompt
from harness.tasks.columns import Columns
from harness.tasks.hub_data import id_prefix, load_splits, local_path, local_version
from harness.tasks.jsonl import read_jsonl
from harness.tasks.math_answers import (
    HEDGED,
    answers_match,
    boxed_contents,
    is_checkable,
    is_unevaluated,
    last_number,
    read_answer,
    solution_answer,
)
from harness.tasks.provenance import file_digest, package_version, resolved_revision
from harness.tasks.splits import POOL_SEED, dedupe, digest, eval_split, normalise, split_by_content, take
from harness.types import Messages, Problem, Score, Split, TaskCapabilities

SOURCES = ("gym-arithmetic", "champ", "jsonl", "hub")
# gym-arithmetic's terms and digits at most: a hundred numbers of a hundred digits is far past the arithmetic a model
# is trained on, and past it the generated values grow beyond what Python prints (sys.int_max_str_digits)
MAX_ARITHMETIC = 100
HENDRYCKS = "EleutherAI/hendrycks_math"
HENDRYCKS_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)  # one hub config each; no config means all of them
GYM_POOL_SEED = POOL_SEED  # the one seed of the generated pool; part of the data, so changing it bumps `version`
# SmolLM2-135M boxes 0 of 128 sampled answers when asked to "put your final answer inside \boxed{}", and 7 of 128
# (besides 21 copies of the placeholder) when shown the form: a format GRPO can learn needs a base rate above zero.
INSTRUCTION = "Give the result in the form \\boxed{result}."


class MathTask:
    """Maths problems scored by their final answer. Options are keyword arguments; all have defaults."""

    name = "math"
    # bump on any change of data, prompt, extraction or scoring (v2: the "length" component; v3: "correct" counts
    # committed answers only, "lenient_correct" the old last-number reading; v4: the instruction shows the boxed
    # form, and a box that copies the instruction's placeholder or the unevaluated sum earns no "boxed"; v5: boxes of
    # different values are a hedge, unparsed, and earn neither "correct" nor "boxed" nor "lenient_correct"; v6: a box
    # copying the instruction's word placeholder is no answer: what was committed before it is read; markdown
    # emphasis and quotes around a committed value are read through; v7: the question's own sum stated equal to a
    # value commits to it ("77 - 33 = 22", later sums on other numbers are steps), fenced code, boxes that hold no
    # value or are operands are no answer, a cut-off sentence commits to nothing it had not finished, a word is no
    # answer to a sum; v8: integers side by side ("71 19") are no value, where math-verify summed them; v9: for a
    # question that asks a sum, a box holding a word or latex junk ("\boxed{yes}", "\boxed{\#19}"), the sum written
    # out or an equation with no value is no answer and earns no "boxed", so what came before it is read; a box
    # used as an operand in words ("\boxed{24} to the power of 33", "62 x \boxed{8}") is none either; number
    # words ("zero"), "should be N", "N is the result of ...", "which is simply N", a reply opening with its value
    # alone are read; a final aside ("Note that 9 = 3 x 3.") or a remark on the value before it is not the answer,
    # nor a number run into a word ("99pasted"), a numbered step with working after it, or a text cut mid-prose)
    version = "math-v9"
    capabilities = TaskCapabilities(misleading_hints=True, reference_completions=True)

    def __init__(
        self,
        *,
        source: str = "gym-arithmetic",  # gym-arithmetic (offline), champ, jsonl or hub (module docstring)
        path: str | None = None,  # source=jsonl: the file of problems
        hub_id: str = HENDRYCKS,  # source=hub: a hub dataset id in MATH's schema, or a local copy
        hub_config: str | None = None,  # the hub dataset's config (GSM8K: main)
        hub_revision: str | None = None,  # the hub dataset's revision (a commit, tag or branch)
        terms: Annotated[int, Bounds(1, MAX_ARITHMETIC)] = 2,  # gym-arithmetic: numbers in each expression
        min_digits: Annotated[int, Bounds(1, MAX_ARITHMETIC)] = 1,  # gym-arithmetic: fewest digits of a number
        max_digits: Annotated[int, Bounds(1, MAX_ARITHMETIC)] = 2,  # gym-arithmetic: most digits of a number
        operators: str | Iterable[str] = "+-",  # gym-arithmetic: the operators drawn from, of "+-*/"
        pool_size: Annotated[int, Bounds(1, POOL)] = 2000,  # gym-arithmetic: problems generated before the split
        eval_fraction: float = 0.2,  # a single pool's share of eval problems, by a hash of each problem
        boxed_weight: float = 0.5,  # reward weight of "boxed": the committed answer is a boxed value
        length_weight: float = 0.0,  # reward weight of "length" (concise completions); 0: reported only
        strict_weight: float = 0.0,  # reward weight of "strict" (right and boxed); 0: not in the reward
        length_target: Annotated[int, Bounds(0, CHARS)] = 200,  # characters up to which "length" is 1
        length_cap: Annotated[int, Bounds(1, CHARS)] = 800,  # characters from which "length" is 0
        misleading_hint: bool | str = False,  # every problem carries a wrong hint (VSPO's robustness behaviour)
        instruction: str = INSTRUCTION,  # the request that follows each problem in the prompt
        question: str = "problem",  # own data: the column holding the problem
        answer: str = "answer",  # own data: the column holding the reference answer
        answer_pattern: str | None = None,  # own data: a regex whose first group is the answer within its column
        worked_reference: bool | str = False,  # reference completions work the sum out before the box
    ) -> None:
        if source not in SOURCES:
            raise ValueError(f"math: unknown source {source!r}; available: {', '.join(SOURCES)}")
        if source == "jsonl" and not path:
            raise ValueError("math: source 'jsonl' needs path=<file.jsonl>")
        self.source = source
        self.path = path
        self.columns = Columns.build(
            "math",
            {"problem": question, "answer": answer},
            {"problem": "problem", "answer": "answer"},
            answer_pattern,
            options={"problem": "question"},
        )
        if self.columns.mapped and source not in ("jsonl", "hub"):
            raise ValueError(
                f"math: question, answer and answer_pattern map the columns of your own data (source "
                f"jsonl or hub), not of source {source!r}"
            )
        if not isinstance(instruction, str) or not instruction.strip():
            raise ValueError("math: instruction must be a non-empty string (it follows each problem in the prompt)")
        self.instruction = instruction
        # what the instruction's own boxes hold ("result" in \boxed{result}): a copy of it is not an answer
        self._placeholders = {_normalise_box(b) for b in boxed_contents(instruction) if b.strip()}
        self._word_placeholders = word_placeholders(instruction)
        # VSPO's robustness behaviour: every problem carries a wrong hint (tasks/behaviours.py); scoring unchanged
        self.misleading_hint = coerce(misleading_hint, False)
        # the reference completion works the arithmetic out before the box (`4 + 3 = 7, so the result is
        # \boxed{7}`) where a problem carries it: SmolLM2-135M's bare `\boxed{X}` and `4 + 3 = \boxed{X}` are right
        # far less often than a sum it writes out (docs/results/history.md#the-demo-at-math-v6)
        self.worked_reference = coerce(worked_reference, False)
        self.hub_id = hub_id
        self.hub_config = hub_config
        self.hub_revision = hub_revision
        self.terms, self.min_digits, self.max_digits = int(terms), int(min_digits), int(max_digits)
        self.operators = tuple(operators)
        self.pool_size = int(pool_size)
        self.eval_fraction = float(eval_fraction)
        if not (self.terms >= 1 and 1 <= self.min_digits <= self.max_digits and self.pool_size >= 1):
            raise ValueError("math: need terms >= 1, 1 <= min_digits <= max_digits and pool_size >= 1")
        if not self.operators or not set(self.operators) <= set("+-*/"):
            raise ValueError(f"math: operators must be drawn from '+-*/', got {operators!r}")
        if not 0.0 < self.eval_fraction <= 1.0:
            raise ValueError(f"math: eval_fraction must be in (0, 1], got {eval_fraction!r}")
        self.boxed_weight, self.length_weight = float(boxed_weight), float(length_weight)
        self.strict_weight = float(strict_weight)
        self.length_target, self.length_cap = int(length_target), int(length_cap)
        if not (
            min(self.length_weight, self.boxed_weight, self.strict_weight) >= 0
            and 0 <= self.length_target < self.length_cap
        ):
            raise ValueError(
                "math: need boxed_weight, length_weight and strict_weight >= 0 and 0 <= length_target < length_cap"
            )
        # GRPO needs signal on a weak model: the format component is rewarded, strict only where strict_weight > 0.
        # "correct" counts "the answer is X" and final statements too (SmolLM2-135M boxes 3 answers in 80), so the
        # reward keeps its signal; "lenient_correct" (a guess counts) is reported with weight 0, never trained on.
        self.reward_weights = {"correct": 1.0, "boxed": self.boxed_weight}
        if self.strict_weight > 0:
            self.reward_weights["strict"] = self.strict_weight
        if self.length_weight > 0:
            self.reward_weights["length"] = self.length_weight
        self.reward_weights["lenient_correct"] = 0.0
        self._splits: dict[str, list[Problem]] | None = None
        self._notes: dict[str, Any] = {}  # facts learnt while loading (split method, rows dropped), for data_source

    # ------------------------------------------------------------------------------------------------------------
    # Task protocol
    # ------------------------------------------------------------------------------------------------------------

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        if split not in ("train", "eval"):
            raise ValueError(f"math: split must be 'train' or 'eval', got {split!r}")
        if limit is not None and limit < 0:
            raise ValueError(f"math: limit must be >= 0, got {limit}")
        return with_hints(take(self._load()[split], limit, seed), self.misleading_hint)

    def messages(self, problem: Problem) -> Messages:
        return ask(problem, f"{problem.prompt}\n\n{self.instruction}")  # a conversation from the data: as written

    def score(self, problem: Problem, completion: str) -> Score:
        # the committed answer, never raises; a box that copies the instruction's word placeholder (\boxed{result})
        # is no answer at all, so what the completion committed to before it is read instead
        reading = read_answer(completion, question=problem.prompt, placeholders=self._word_placeholders)
        answer = reading.value
        # the format is a boxed final value: not the instruction's placeholder copied, not the sum written out again
        from_box = (
            reading.boxed
            and _normalise_box(answer) not in self._placeholders
            and not is_unevaluated(problem.answer, answer)
        )
        correct = answers_match(problem.answer, answer)
        # A completion that commits to nothing is read leniently as its last number: reported, weight 0.
        lenient = answer if answer is not None or reading == HEDGED else last_number(completion).value
        lenient_correct = correct if answer is not None else answers_match(problem.answer, lenient)
        # "strict" needs both a correct answer and the format.
        length = self._length(completion) if answer is not None else 0.0
        return Score(
            rewards={
                "correct": float(correct),
                "boxed": float(from_box),
                "strict": float(correct and from_box),
                "length": length,
                "lenient_correct": float(lenient_correct),
            },
            primary="correct",
            extracted=answer,
            unparsed=answer is None,
        )

    def _length(self, completion: str) -> float:
        """1 up to length_target characters, falling linearly to 0 at length_cap (formula in the module doc)."""
        n = len(completion.strip())
        return min(1.0, max(0.0, (self.length_cap - n) / (self.length_cap - self.length_target)))

    def reference_completion(self, problem: Problem) -> str | None:
        """The answer in the form the default instruction asks for: what SFT on references and the format
        warm-up write as this task's short answer. With ``worked_reference``, a problem that carries its
        expression (reasoning-gym arithmetic) gets it worked out first: ``4 + 3 = 7, so the result is \\boxed{7}``."""
        if problem.answer is None:
            return None
        expression = problem.meta.get("expression") if self.worked_reference else None
        if expression:  # the value follows "=" as the model writes sums, then is copied into the box
            return f"{expression} = {problem.answer}, so the result is \\boxed{{{problem.answer}}}"
        return f"\\boxed{{{problem.answer}}}"

    def data_card(self) -> dict[str, Any]:
        """The data in three fields (harness.types.DataCard): the hub id, file path or generator, the eval split,
        its rows."""
        splits = self._load()
        if self.source == "gym-arithmetic":
            name = "reasoning-gym basic_arithmetic (generated)"
        elif self.source == "champ":
            name = "CHAMP (champ-dataset package)"
        elif self.source == "jsonl":
            name = str(self.path)
        else:
            name = self.hub_id + (f" ({self.hub_config})" if self.hub_config else "")
        return {
            "name": name,
            "split": eval_split(self._notes.get("split"), self.eval_fraction),
            "size": len(splits["eval"]),
        }

    def data_source(self) -> dict[str, Any]:
        info: dict[str, Any] = {"source": self.source, "misleading_hint": self.misleading_hint}
        if self.source == "gym-arithmetic":
            info |= {
                "dataset": "reasoning-gym/basic_arithmetic",
                "version": package_version("reasoning-gym"),
                "params": self._gym_params(),
            }
        elif self.source == "champ":
            info |= {"dataset": "champ-dataset/dataset_files/v0.json", "version": package_version("champ-dataset")}
        elif self.source == "jsonl":
            info |= {"dataset": str(self.path), "version": file_digest(Path(str(self.path)))}
        elif (local := local_path(self.hub_id)) is not None:
            info |= {"dataset": self.hub_id, "config": self.hub_config, "version": local_version(local)}
        else:
            resolved = self._notes.get("resolved_revision")  # known once loaded from the hub
            info |= {
                "dataset": self.hub_id,
                "config": self.hub_config,
                "version": self.hub_revision or resolved or "unpinned",
            }
        info |= self.columns.describe()
        info["eval_fraction"] = self.eval_fraction
        return info | {k: v for k, v in self._notes.items() if v is not None}

    # ------------------------------------------------------------------------------------------------------------
    # Loading: each loader returns {"train": [...], "eval": [...]} or {"all": [...]} (a single pool)
    # ------------------------------------------------------------------------------------------------------------

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is None:
            loader = {
                "gym-arithmetic": self._load_gym,
                "champ": self._load_champ,
                "jsonl": self._load_jsonl,
                "hub": self._load_hub,
            }[self.source]
            self._splits = self._split(loader())
            self._notes |= {"n_train": len(self._splits["train"]), "n_eval": len(self._splits["eval"])}
        return self._splits

    def _split(self, parts: dict[str, list[Problem]]) -> dict[str, list[Problem]]:
        if "all" in parts:
            self._notes["split"] = "content-hash"
            return split_by_content(parts["all"], self.eval_fraction)
        self._notes["split"] = "native train/test"
        evaluation = dedupe(parts["eval"])
        seen = {normalise(p.prompt) for p in evaluation}
        return {"train": [p for p in dedupe(parts["train"]) if normalise(p.prompt) not in seen], "eval": evaluation}

    def _gym_params(self) -> dict[str, Any]:
        return {
            "min_terms": self.terms,
            "max_terms": self.terms,
            "min_digits": self.min_digits,
            "max_digits": self.max_digits,
            "operators": list(self.operators),
            "allow_parentheses": False,
            "allow_negation": False,
            "seed": GYM_POOL_SEED,
            "size": self.pool_size,
        }

    def _load_gym(self) -> dict[str, list[Problem]]:
        from reasoning_gym.arithmetic.basic_arithmetic import BasicArithmeticDataset, BasicArithmeticDatasetConfig

        generated = BasicArithmeticDataset(BasicArithmeticDatasetConfig(**self._gym_params()))
        rows = []
        for i in range(len(generated)):
            item = generated[i]
            expression = item["metadata"]["expression"]
            # reasoning-gym draws operands from 0..10**digits inclusive: "100" is not a two-digit number.
            if any(len(n) > self.max_digits for n in re.findall(r"\d+", expression)):
                continue
            rows.append(
                {
                    "problem": item["question"],
                    "answer": item["answer"],
                    "expression": expression,
                    "num_digits": item["metadata"]["num_digits"],
                    "source_index": i,
                }
            )
        self._notes["dropped_oversized_operands"] = len(generated) - len(rows)
        return {"all": _to_problems(rows, "reasoning-gym basic_arithmetic", "gym-arith")}

    def _load_champ(self) -> dict[str, list[Problem]]:
        rows, total = _champ_rows()
        self._notes["champ_kept"] = f"{len(rows)} of {total} (the rest have prose answers math-verify can't check)"
        return {"all": _to_problems(rows, "champ-dataset v0.json", "champ")}

    def _load_jsonl(self) -> dict[str, list[Problem]]:
        path = Path(str(self.path))
        rows, line_numbers = read_jsonl(path)
        rows, kept, dropped = self.columns.rows(rows, str(path), label=lambda i: f"row {i} (line {line_numbers[i]})")
        self._note_dropped(dropped)
        return {
            "all": _to_problems(
                rows,
                str(path),
                path.stem,
                label=lambda i: f"row {kept[i]} (line {line_numbers[kept[i]]})",
                columns=self.columns,
            )
        }

    def _note_dropped(self, dropped: int) -> None:
        if self.columns.pattern is not None:
            self._notes["skipped_no_answer_match"] = self._notes.get("skipped_no_answer_match", 0) + dropped

    def _load_hub(self) -> dict[str, list[Problem]]:
        configs: list[str | None] = (
            [self.hub_config] if self.hub_config else list(HENDRYCKS_SUBJECTS) if self.hub_id == HENDRYCKS else [None]
        )
        prefix = id_prefix(self.hub_id)
        by_split: dict[str, list[Problem]] = {}
        skipped = 0
        for config in configs:
            try:
                loaded = load_splits(self.hub_id, config, self.hub_revision)
            except Exception as exc:  # offline, unknown id or config: one line for the user, not a traceback
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ValueError(f"hub dataset {self.hub_id!r} config {config!r} failed to load: {first}") from exc
            for split_name, table in loaded.items():
                self._notes["resolved_revision"] = self._notes.get("resolved_revision") or resolved_revision(table)
                where = f"hub {self.hub_id} config {config} split {split_name}"
                columns = getattr(table, "column_names", None)
                # MATH's own schema has no answer column: the answer is the last box of the solution
                optional = ("answer",) if "solution" in (columns or ()) else ()
                self.columns.check(columns, where, optional)
                table, _, dropped = self.columns.rows(table, where, optional=optional)
                self._note_dropped(dropped)
                rows = []
                for row in table:
                    row = _hub_row(row, config)
                    if row is None:
                        skipped += 1
                        continue
                    rows.append(row)
                by_split.setdefault(split_name, []).extend(_to_problems(rows, where, prefix, columns=self.columns))
        self._notes["skipped_no_boxed_answer"] = skipped
        if "train" in by_split and "test" in by_split:
            return {"train": by_split["train"], "eval": by_split["test"]}
        return {"all": [p for name in sorted(by_split) for p in by_split[name]]}


# ----------------------------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------------------------


def _to_problems(
    rows: Iterable[Any],
    where: str,
    id_prefix: str,
    label: Callable[[int], str] = lambda i: f"row {i}",
    columns: Columns | None = None,
) -> list[Problem]:
    """Validate rows {"id"?, "problem" (a string or a conversation), "answer", "completion"?, ...rest -> meta}; a bad
    row is a one-line ValueError naming it. ``columns``: the rows are the user's own data (tasks/chat_data.py)."""
    problems: list[Problem] = []
    texts_by_id: dict[str, str] = {}
    for i, row in enumerate(rows):
        at = f"{where} {label(i)}"
        if not isinstance(row, Mapping):
            raise ValueError(f"{at}: expected an object with 'problem' and 'answer', got {type(row).__name__}")
        field = question_column(row, "problem")
        problem, conversation = read_prompt(row.get(field), at, field)
        answer = row.get("answer")
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError(f"{at}: 'answer' must be a non-empty string or number, got {_short(answer)}")
        given_id = row.get("id")
        pid = str(given_id) if given_id not in (None, "") else f"{id_prefix}-{digest(problem)[:12]}"
        if pid in texts_by_id:
            if texts_by_id[pid] != normalise(problem):
                raise ValueError(f"{at}: duplicate id {pid!r} for a different problem")
            continue  # the same problem twice
        texts_by_id[pid] = normalise(problem)
        meta = {k: v for k, v in row.items() if k not in ("id", field, "answer", COMPLETION) and v is not None}
        own = {} if columns is None else other_columns(columns.source_row(row), columns.columns["problem"], field)
        problems.append(
            Problem(
                id=pid,
                prompt=problem,
                answer=answer.strip(),
                meta=meta,
                messages=conversation,
                completion=read_completion(row.get(COMPLETION), at),
                columns=own,
            )
        )
    return problems


def _short(value: Any) -> str:
    text = repr(value)  # repr keeps the message on one line
    return text if len(text) <= 40 else text[:37] + "..."


def _hub_row(row: Mapping[str, Any], config: str | None) -> dict[str, Any] | None:
    """A MATH-schema row -> our row. hendrycks_math has problem/level/type/solution (answer = last box of the
    solution); MATH-500 adds answer/subject/unique_id. None when a solution holds no boxed answer."""
    out = dict(row)
    if out.get("answer") in (None, "") and isinstance(out.get("solution"), str):
        out["answer"] = solution_answer(out["solution"])
        if out["answer"] is None:
            return None
    if out.get("id") in (None, "") and out.get("unique_id"):
        out["id"] = out.pop("unique_id")
    if config is not None:
        out["config"] = config
    return out


# Prose wrappers around a checkable CHAMP answer: "0 is the only possible value", "100 (i.e., all values)", ...
_CHAMP_WRAPPERS = (
    re.compile(r"^(.+?) is the only possible value$"),
    re.compile(r"^The limit exists and is equal to (.+)$"),
    re.compile(r"^The only possible value for the limit is (.+)$"),
)


def _champ_answer(raw: Any) -> str | None:
    """The checkable form of a CHAMP answer, or None for prose ("No integer solutions", "Yes", ...)."""
    if not isinstance(raw, str):
        return None
    answer = raw.strip()
    if ", or equivalently " in answer:  # "C(10, 5), or equivalently 252": the closed form comes last
        answer = answer.rsplit("equivalently ", 1)[1]
    answer = answer.split(", or approximately")[0]
    answer = re.sub(r"\s*\((?:i\.e\.,|none|no such)[^)]*\)$", "", answer)
    for wrapper in _CHAMP_WRAPPERS:
        m = wrapper.match(answer)
        if m:
            answer = m.group(1)
    if re.search(r"[A-Za-z]{2,}", answer.replace("sqrt", "")) or "..." in answer or "≥" in answer:
        return None
    return answer if is_checkable(answer) else None


@functools.lru_cache(maxsize=1)
def _champ_rows() -> tuple[list[dict[str, Any]], int]:
    """CHAMP's problems with checkable answers, read straight from the package's data file (importing the
    package would pull in its dependencies for nothing)."""
    spec = importlib.util.find_spec("champ_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("source 'champ' needs the champ-dataset package: pip install champ-dataset")
    path = Path(next(iter(spec.submodule_search_locations))) / "dataset_files" / "v0.json"
    problems = json.loads(path.read_text(encoding="utf-8"))["problems"]
    rows = []
    for i, (key, item) in enumerate(problems.items()):
        if not isinstance(item, dict) or not isinstance(item.get("_text"), str):
            raise ValueError(f"{path} row {i} ({key}): no problem text ('_text')")
        answer = _champ_answer(item.get("_answer"))
        if answer is not None:
            rows.append(
                {
                    "id": f"champ-{key}",
                    "problem": item["_text"],
                    "answer": answer,
                    "category": item.get("category"),
                    "champ_answer": item.get("_answer"),
                }
            )
    return rows, len(problems)


def word_placeholders(instruction: str) -> tuple[str, ...]:
    """The words an instruction boxes ("result" of "\\boxed{result}"): a completion's copy of one is no answer. A
    placeholder that is a value (an example \\boxed{5}) is not among them: a completion's \\boxed{5} may be right."""
    boxed = {_normalise_box(b) for b in boxed_contents(instruction) if b.strip()}
    return tuple(sorted(p for p in boxed if re.fullmatch(r"[a-z_][a-z_0-9]*", p)))


def _normalise_box(text: str | None) -> str:
    """A box's contents compared as the model would copy them: case, spaces and surrounding $ ignored."""
    return re.sub(r"[\s$]", "", text or "").lower()
