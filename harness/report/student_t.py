"""Student's t distribution: its CDF and quantiles, for the health checks' trend tests and the t-interval over seed
means (harness/report/compare.py). scipy is not a dependency for two functions; the CDF is Simpson's rule on the
density (exact to ~1e-9 for the degrees of freedom and quantiles used here), the quantile a bisection of it."""

from __future__ import annotations

import functools
import math

import numpy as np

_PANELS = 4000  # Simpson panels from 0 to t: the density is smooth, so this is far below the figures' precision


def t_pdf(x: np.ndarray, df: float) -> np.ndarray:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return np.exp(log_norm - (df + 1) / 2 * np.log1p(x * x / df))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for T ~ Student's t with ``df`` degrees of freedom (df > 0)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if t == 0:
        return 0.5
    x = np.linspace(0.0, abs(t), 2 * _PANELS + 1)
    y = t_pdf(x, df)
    area = (x[1] - x[0]) / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum())
    return 0.5 + math.copysign(float(area), t)


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (0 < p < 1), to 1e-9."""
    if not 0 < p < 1:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2
    while high - low > 1e-9:
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2
