"""Checks of a finished run's figures that a user should not have to spot in the tables: each gives one line for
the manifest's ``warnings`` (harness/run.py ``finish`` records and prints them), or None when all is well.

- the training reward went down: the least-squares slope of ``train/reward_mean`` over the steps is negative by
  more than ``NOISE`` standard errors of the slope (a noisy curve that merely ends lower is not flagged);
- the trained policy scored lower than the base model: the paired 95% interval of after - before
  (harness/report/compare.py ``after_minus_before``) lies entirely below 0 for a score where higher is better.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

NOISE = 2.0  # standard errors of the slope: about a 95% two-sided test for a line through the steps
MIN_STEPS = 4  # with 3 points the slope's error has 1 degree of freedom: a single odd step decides it
HIGHER_IS_BETTER = ("pass@", "best@", "solved@", "mean_reward")  # scores, not counts (tokens, candidates)


def slope(values: Sequence[float]) -> tuple[float, float]:
    """(least-squares slope of ``values`` against their index, its standard error); needs 3 values or more."""
    n = len(values)
    x_mean, y_mean = (n - 1) / 2, math.fsum(values) / n
    sxx = math.fsum((i - x_mean) ** 2 for i in range(n))
    b = math.fsum((i - x_mean) * (y - y_mean) for i, y in enumerate(values)) / sxx
    residuals = math.fsum((y - (y_mean + b * (i - x_mean))) ** 2 for i, y in enumerate(values))
    return b, math.sqrt(residuals / (n - 2) / sxx)


def reward_went_down(values: Sequence[Any], name: str = "reward_mean") -> str | None:
    """The warning for a training curve that falls beyond its noise, or None (fewer than ``MIN_STEPS`` finite
    values, a flat or rising curve, or a fall within ``NOISE`` standard errors)."""
    ys = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(ys) < MIN_STEPS:
        return None
    b, error = slope(ys)
    if b >= 0 or -b <= NOISE * error:
        return None
    return (
        f"training reward went down: {name} {ys[0]:.3f} -> {ys[-1]:.3f} over {len(ys)} steps "
        f"(slope {b:.3g} per step, beyond its noise)"
    )


def scored_lower(name: str, before: Any, after: Any, change: Any) -> str | None:
    """The warning for a score where higher is better whose paired after - before interval (``change``: an Estimate
    with ``value``, ``low``, ``high``) lies entirely below 0, or None."""
    high = getattr(change, "high", None)
    if not name.startswith(HIGHER_IS_BETTER) or high is None or not high < 0:  # (a NaN interval is not below 0)
        return None
    return (
        f"the trained policy scored lower on {name}: {_fmt(before)} -> {_fmt(after)}, change "
        f"{change.value:+.3f} [{change.low:+.3f}, {high:+.3f}] (paired 95% interval excludes 0)"
    )


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else str(value)
