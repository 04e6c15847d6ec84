"""Checks of a finished run's figures that a user should not have to spot in the tables: each gives one line for
the manifest's ``warnings`` (harness/runner/finish.py records and prints them), or None when all is well.

- the training reward went down, seen two ways, each a one-sided t-test at ``LEVEL`` with a minimum size
  (``MIN_DROP``) so that a fall too small to matter is not warned however steady it is:
  - the trend: the least-squares slope of ``train/reward_mean`` over the steps, t = slope / its standard error
    against Student's t with n - 2 degrees of freedom (the old fixed 2 standard errors false-alarmed on 9% of flat
    4-step curves: with 2 degrees of freedom the 97.5% point is 4.30, not 2);
  - the last step on its own: a collapse in the last step barely tilts a line through the others, so the last value
    is tested against the earlier steps' prediction interval (their mean, their spread, n - 2 degrees of freedom).
  Together the two false-alarm under 5% of the time on a flat noisy curve (tests/test_run_warnings.py simulates it);
  the price is power: over 4 steps only a fall several times the step-to-step noise is warned;
- the trained policy scored lower than the base model: the paired 95% interval of after - before
  (harness/report/compare.py ``after_minus_before``) lies entirely below 0 for a score where higher is better, or
  for the behaviour the trainer was given (``behaviour/<name>``, its held-out ``heldout/<name>`` too): behaviour is
  checked in the direction trained;
- the trained policy lost problems it solved: an exact test over the problems' candidates (``lost_solved``), which
  sees a method losing a few problems it solved where an interval over 16 problems cannot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.report.student_t import t_quantile

# each test's one-sided false-alarm rate. Flat 4-step curves (noise sd 0.1, 10,000 simulated) then warn 2.0% of the
# time with independent noise, 3.0% with AR(1) noise of 0.5 and 4.5% of 0.8 (a drifting curve does look like a
# trend): bench/health_false_alarms.py
LEVEL = 0.01
MIN_DROP = 0.05  # a fall of the reward smaller than this (in its own units) is not warned, however steady
MIN_STEPS = 4  # with 3 points the slope's error has 1 degree of freedom: a single odd step decides it
HIGHER_IS_BETTER = ("pass@", "best@", "solved@", "mean_reward")  # scores, not counts (tokens, candidates)
BEHAVIOUR_SCORES = ("behaviour/", "heldout/")  # a behaviour's training scorer and its held-out evaluator
LOST_LEVEL = 0.05  # the exact test's one-sided level


def slope(values: Sequence[float]) -> tuple[float, float]:
    """(least-squares slope of ``values`` against their index, its standard error); needs 3 values or more."""
    n = len(values)
    x_mean, y_mean = (n - 1) / 2, math.fsum(values) / n
    sxx = math.fsum((i - x_mean) ** 2 for i in range(n))
    b = math.fsum((i - x_mean) * (y - y_mean) for i, y in enumerate(values)) / sxx
    residuals = math.fsum((y - (y_mean + b * (i - x_mean))) ** 2 for i, y in enumerate(values))
    return b, math.sqrt(residuals / (n - 2) / sxx)


def trend_fell(ys: Sequence[float]) -> bool:
    """The slope is below 0 beyond the one-sided t-test at ``LEVEL`` and the fitted fall over the run is at least
    ``MIN_DROP``."""
    b, error = slope(ys)
    fall = -b * (len(ys) - 1)
    if fall < MIN_DROP:
        return False
    return error == 0 or -b / error > t_quantile(1 - LEVEL, len(ys) - 2)


def last_step_fell(ys: Sequence[float]) -> bool:
    """The last value lies below the earlier values' one-sided prediction interval at ``LEVEL`` (mean - t x sd x
    sqrt(1 + 1/m) over m earlier values, m - 1 degrees of freedom) and at least ``MIN_DROP`` below their mean."""
    earlier, last = ys[:-1], ys[-1]
    m = len(earlier)
    mean = math.fsum(earlier) / m
    sd = math.sqrt(math.fsum((y - mean) ** 2 for y in earlier) / (m - 1))
    if mean - last < MIN_DROP:
        return False
    return last < mean - t_quantile(1 - LEVEL, m - 1) * sd * math.sqrt(1 + 1 / m)


def reward_went_down(values: Sequence[Any], name: str = "reward_mean") -> str | None:
    """The warning for a training curve that falls beyond its noise, or None (fewer than ``MIN_STEPS`` finite
    values, a flat or rising curve, or a fall within its noise or smaller than ``MIN_DROP``)."""
    ys = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(ys) < MIN_STEPS:
        return None
    if trend_fell(ys):
        b, _ = slope(ys)
        how = f"slope {b:.3g} per step, beyond its noise"
    elif last_step_fell(ys):
        how = "the last step fell below the earlier steps' range"
    else:
        return None
    return f"training reward went down: {name} {ys[0]:.3f} -> {ys[-1]:.3f} over {len(ys)} steps ({how})"


def scored_lower(name: str, before: Any, after: Any, change: Any, trained: Sequence[str] = ()) -> str | None:
    """The warning for a score where higher is better (or the score of a behaviour in ``trained``, the behaviours
    the trainer was given) whose paired after - before interval (``change``: an Estimate with ``value``, ``low``,
    ``high``) lies entirely below 0, or None."""
    high = getattr(change, "high", None)
    kind, _, behaviour = name.partition("/")
    checked = name.startswith(HIGHER_IS_BETTER) or (f"{kind}/" in BEHAVIOUR_SCORES and behaviour in trained)
    if not checked or high is None or not high < 0:  # (a NaN interval is not below 0)
        return None
    what = " (the behaviour it was trained towards)" if not name.startswith(HIGHER_IS_BETTER) else ""
    return (
        f"the trained policy scored lower on {name}{what}: {_fmt(before)} -> {_fmt(after)}, change "
        f"{change.value:+.3f} [{change.low:+.3f}, {high:+.3f}] (paired 95% interval excludes 0)"
    )


def lost_solved_p(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> float:
    """One-sided exact p-value that the policy after training succeeds less often than before, from each problem's
    (successes, candidates) in both phases: given a problem's total successes, under "no change" the successes fall
    on before's and after's candidates at random (a hypergeometric draw per problem, independent across problems),
    so the after-side total has the convolution of those draws as its distribution; p = P(total <= observed).
    With one candidate per problem and phase this is the sign test on the problems that changed."""
    pmf = [1.0]  # distribution of the after-side total so far
    observed = 0
    for pid in sorted(set(before) & set(after)):
        (sb, nb), (sa, na) = before[pid], after[pid]
        total = sb + sa
        if total == 0 or nb <= 0 or na <= 0:
            continue
        observed += sa
        draw = [_hypergeom(j, nb + na, total, na) for j in range(min(total, na) + 1)]
        pmf = [
            math.fsum(pmf[i - j] * draw[j] for j in range(len(draw)) if 0 <= i - j < len(pmf))
            for i in range(len(pmf) + len(draw) - 1)
        ]
    return min(1.0, math.fsum(pmf[: observed + 1]))


def lost_solved(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> str | None:
    """The warning for a trained policy that solves fewer of its evaluation problems' candidates than the base model
    beyond chance (``lost_solved_p`` below ``LOST_LEVEL``), naming how many problems it lost and gained; or None."""
    common = sorted(set(before) & set(after))
    lost = [p for p in common if before[p][0] > 0 and after[p][0] == 0]
    gained = [p for p in common if before[p][0] == 0 and after[p][0] > 0]
    p = lost_solved_p(before, after)
    if p >= LOST_LEVEL:
        return None
    was = sum(before[q][0] > 0 for q in common)
    return (
        f"the trained policy lost problems it solved: {len(lost)} of the {was} solved before are unsolved after "
        f"(gained {len(gained)}); its right candidates fell "
        f"{sum(before[q][0] for q in common)} -> {sum(after[q][0] for q in common)} "
        f"(exact test over problems' candidates, p = {p:.3f})"
    )


def _hypergeom(k: int, population: int, successes: int, draws: int) -> float:
    """P(k successes in ``draws`` from ``population`` holding ``successes``)."""
    if k < 0 or k > draws or k > successes or draws - k > population - successes:
        return 0.0
    return math.comb(successes, k) * math.comb(population - successes, draws - k) / math.comb(population, draws)


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else str(value)
