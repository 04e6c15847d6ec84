"""Unbiased pass@k and best@k from n samples per problem (Chen et al. 2021, "Evaluating Large Language Models
Trained on Code"). Standard library only, so reports and tests can use them without torch or numpy.

Both estimators are defined only where n >= k: with fewer samples than draws there is nothing to estimate, and
the aggregate helpers leave such k out rather than report a number that means something else.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k draws without replacement from n samples, c of them correct, is correct)
    = 1 - C(n-c, k) / C(n, k)."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    # Exact Python ints: int / int true division is correctly rounded however large both get, so n in the
    # thousands loses nothing (a float C(n, k) would overflow near n = 1030).
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def best_at_k(scores: Sequence[float], k: int) -> float:
    """E[max of k draws without replacement from ``scores``] = sum_i s_(i) C(i-1, k-1) / C(n, k), s ascending."""
    n = len(scores)
    if not 1 <= k <= n:
        raise ValueError(f"best@k needs 1 <= k <= n, got k={k}, n={n}")
    ordered = sorted(float(s) for s in scores)
    # w_i = C(i-1, k-1) / C(n, k) is the chance that the i-th smallest is the max of the draw. Walk down from
    # w_n = k/n with w_{i-1} = w_i (i-k)/(i-1): no huge binomials, and weights too small for a float just
    # underflow to 0 at the low (and least likely) end.
    weight = k / n
    terms = []
    for i in range(n, k - 1, -1):  # 1-based rank i; ranks below k can never be the max of k draws
        terms.append(ordered[i - 1] * weight)
        weight *= (i - k) / (i - 1) if i > 1 else 0.0
    return math.fsum(terms)


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    if not values:
        raise ValueError("no problems to average over")
    return math.fsum(values) / len(values)


def mean_pass_at_k(per_problem: Sequence[tuple[int, int]], k: int) -> float:
    """Mean pass@k over problems given as (n samples, c correct) pairs."""
    # Problems share (n, c) pairs (c takes at most n + 1 values), so each distinct pair is computed once: the big
    # binomials dominate (bench/pass_at_k.py). The same values, in the same order, go to the sum.
    values: dict[tuple[int, int], float] = {}

    def value(n: int, c: int) -> float:
        if (n, c) not in values:
            values[n, c] = pass_at_k(n, c, k)
        return values[n, c]

    return _mean(value(n, c) for n, c in per_problem)


def mean_best_at_k(per_problem_scores: Sequence[Sequence[float]], k: int) -> float:
    """Mean best@k over problems, each given as the scores of its samples."""
    return _mean(best_at_k(scores, k) for scores in per_problem_scores)


def reportable_ks(ks: Iterable[int], n: int) -> list[int]:
    """The ks, sorted and deduplicated, kept only where n >= k (n: the fewest samples any problem has)."""
    return sorted({int(k) for k in ks if 1 <= int(k) <= n})


def pass_at_ks(per_problem: Sequence[tuple[int, int]], ks: Iterable[int]) -> dict[int, float]:
    """{k: mean pass@k} only where n >= k for every problem, so each k averages over the same problems.
    Raises ValueError when no k qualifies."""
    ks = list(ks)
    kept = reportable_ks(ks, min((n for n, _ in per_problem), default=0))
    if not kept:
        raise ValueError(f"no k in {ks} is <= the samples per problem; pass@k needs n >= k")
    return {k: mean_pass_at_k(per_problem, k) for k in kept}


def best_at_ks(per_problem_scores: Sequence[Sequence[float]], ks: Iterable[int]) -> dict[int, float]:
    """{k: mean best@k} only where n >= k for every problem. Raises ValueError when no k qualifies."""
    ks = list(ks)
    kept = reportable_ks(ks, min((len(s) for s in per_problem_scores), default=0))
    if not kept:
        raise ValueError(f"no k in {ks} is <= the samples per problem; best@k needs n >= k")
    return {k: mean_best_at_k(per_problem_scores, k) for k in kept}
