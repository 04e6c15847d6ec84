"""Unbiased pass@k and best@k from n samples per problem (Chen et al. 2021, "Evaluating Large Language Models
Trained on Code"). Standard library only, so reports and tests can use them without torch or numpy.

Both estimators are defined only where n >= k: with fewer samples than draws there is nothing to estimate, and
the aggregate helpers leave such k out rather than report a number that means something else.

Set-level figures for a multi-answer policy (M answers per rollout): the M answers of one rollout are written
together, one after the other, so they are not independent draws and the estimators above, applied to the pooled
answers, are biased (two rollouts [1,0,0,0] and [1,0,0,0] give a pooled pass@4 of 0.786, though every set of 4
answers the policy writes holds a correct one). ``set_pass_at_k`` / ``set_best_at_k`` take the ROLLOUT as the unit:
k candidates are the answers of k/M rollouts (k must be a multiple of M), a rollout succeeds when any of its answers
does and its best is its best answer, and the same unbiased estimators run over the R rollouts. With M = 1 they are
the estimators above, exactly. ``rollout_outcomes`` turns one problem's sample records into (R, c_R, bests) under
the rules best-of-k uses, so a report can recompute the run's own figures from samples.jsonl.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


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


# ----------------------------------------------------------------------------------------------------------------
# Set-level pass@k / best@k: the rollout of M answers is the unit
# ----------------------------------------------------------------------------------------------------------------


def _check_multiple(k: int, m: int, what: str) -> int:
    if m < 1:
        raise ValueError(f"{what} needs answers_per_rollout m >= 1, got m={m}")
    if k < 1 or k % m:
        raise ValueError(f"{what} counts whole rollouts: k={k} must be a positive multiple of m={m}")
    return k // m


def set_pass_at_k(rollouts: int, successful: int, k: int, m: int) -> float:
    """P(at least one of k/m rollouts, drawn without replacement from ``rollouts`` of which ``successful`` have a
    correct answer, has one) = 1 - C(R - c_R, k/m) / C(R, k/m): pass@k when the k candidates are the answers of
    k/m whole rollouts of m answers. m = 1 is ``pass_at_k``."""
    return pass_at_k(rollouts, successful, _check_multiple(k, m, "set-level pass@k"))


def set_best_at_k(rollout_bests: Sequence[float], k: int, m: int) -> float:
    """E[best answer among the answers of k/m rollouts drawn without replacement], each rollout given as its best
    answer's score: best@k over whole rollouts of m answers. m = 1 is ``best_at_k``."""
    return best_at_k(rollout_bests, _check_multiple(k, m, "set-level best@k"))


def set_level_ks(ks: Iterable[int], m: int, rollouts: int) -> list[int]:
    """The ks, sorted and deduplicated, kept where k is a multiple of m and k/m <= rollouts (the fewest whole
    rollouts any problem has). A k that is not a multiple of m has no set-level figure: a partial rollout is not
    a set the policy writes. m = 1 gives ``reportable_ks``."""
    if m < 1:
        raise ValueError(f"set-level ks need answers_per_rollout m >= 1, got m={m}")
    return sorted({int(k) for k in ks if int(k) >= 1 and int(k) % m == 0 and int(k) // m <= rollouts})


def set_pass_at_ks(per_problem: Sequence[tuple[int, int]], ks: Iterable[int], m: int) -> dict[int, float]:
    """{k: mean set-level pass@k} over problems given as (R whole rollouts, c_R successful rollouts), for the ks
    ``set_level_ks`` keeps. m = 1 is ``pass_at_ks``, value for value. Raises ValueError when no k qualifies."""
    ks = list(ks)
    kept = set_level_ks(ks, m, min((r for r, _ in per_problem), default=0))
    if not kept:
        raise ValueError(f"no k in {ks} is a multiple of m={m} with k/m <= the rollouts per problem")
    return {k: mean_pass_at_k(per_problem, k // m) for k in kept}


def set_best_at_ks(per_problem_bests: Sequence[Sequence[float]], ks: Iterable[int], m: int) -> dict[int, float]:
    """{k: mean set-level best@k} over problems, each given as the best score of each of its whole rollouts, for
    the ks ``set_level_ks`` keeps. m = 1 is ``best_at_ks``. Raises ValueError when no k qualifies."""
    ks = list(ks)
    kept = set_level_ks(ks, m, min((len(b) for b in per_problem_bests), default=0))
    if not kept:
        raise ValueError(f"no k in {ks} is a multiple of m={m} with k/m <= the rollouts per problem")
    return {k: mean_best_at_k(per_problem_bests, k // m) for k in kept}


def rollout_outcomes(records: Sequence[Mapping[str, Any]], m: int) -> tuple[int, int, list[float]]:
    """One problem's candidate records (samples.jsonl rows: ``rollout_index``, ``success``, ``scalar``, optional
    ``missing``) -> (R, c_R, bests): the whole rollouts (those with all m answers among the records, in order of
    first appearance; a rollout cut short because n is not a multiple of m is left out), how many have a
    successful answer, and each one's best scalar.

    The rules are best-of-k's: a scalar of None (the scorer raised) takes the problem's lowest known scalar, as
    for pooled best@k; a missing answer (``missing``: the rollout stopped short of m answers) is a failure and is
    never a rollout's best; a rollout with no written answer scores 0.0. With m = 1 every record is a rollout
    (``rollout_index`` is not needed) and (R, c_R, bests) are (n, c, the filled scalars)."""
    known = [float(r["scalar"]) for r in records if _is_number(r.get("scalar"))]
    floor = min(known, default=0.0)
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for position, record in enumerate(records):
        groups.setdefault(position if m == 1 else record["rollout_index"], []).append(record)
    rollouts = [answers for answers in groups.values() if len(answers) == m]
    successful = sum(any(bool(a.get("success")) for a in answers) for answers in rollouts)
    bests = [
        max(
            (float(a["scalar"]) if _is_number(a.get("scalar")) else floor for a in answers if not a.get("missing")),
            default=0.0,
        )
        for answers in rollouts
    ]
    return len(rollouts), successful, bests


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
