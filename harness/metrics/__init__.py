"""Metrics: the unbiased pass@k / best@k estimators and the `evaluate` modules that wrap them.

Importing this package is cheap (standard library only); the `evaluate` modules are loaded by path:
``evaluate.load(evaluate_module_path("pass_at_k"))``.
"""

from __future__ import annotations

from pathlib import Path

from harness.metrics.unbiased import (
    best_at_k,
    best_at_ks,
    mean_best_at_k,
    mean_pass_at_k,
    pass_at_k,
    pass_at_ks,
    reportable_ks,
    rollout_outcomes,
    set_best_at_k,
    set_best_at_ks,
    set_level_ks,
    set_pass_at_k,
    set_pass_at_ks,
)

__all__ = [
    "best_at_k",
    "best_at_ks",
    "evaluate_module_path",
    "mean_best_at_k",
    "mean_pass_at_k",
    "pass_at_k",
    "pass_at_ks",
    "reportable_ks",
    "rollout_outcomes",
    "set_best_at_k",
    "set_best_at_ks",
    "set_level_ks",
    "set_pass_at_k",
    "set_pass_at_ks",
]

_MODULES_DIR = Path(__file__).parent / "evaluate_modules"


def evaluate_module_path(name: str) -> str:
    """The folder of a bundled `evaluate` module ("pass_at_k" or "best_at_k"), for ``evaluate.load(path)``."""
    folder = _MODULES_DIR / name
    if not (folder / f"{name}.py").is_file():
        available = sorted(p.name for p in _MODULES_DIR.iterdir() if (p / f"{p.name}.py").is_file())
        raise ValueError(f"unknown evaluate module {name!r}; available: {', '.join(available)}")
    return str(folder)
