"""Presets: ``--preset quick`` (the default: sized so `make demo` finishes on a 2-core CPU in minutes) or ``full``
(a starting point for a GPU). The run-level part (how many problems) lives here; each plugin's part is registered
with the plugin (``registry.add(..., presets=...)``), so a third-party plugin brings its own. Flags (--steps, --k,
--limit) and ``--set KIND.KEY=VALUE`` override any preset value."""

from __future__ import annotations

from typing import Any

RUN_PRESETS: dict[str, dict[str, Any]] = {
    # eval problems, train problems, and the longest rollout the preset budgets (tokens; None: no cap). Quick's cap
    # binds only M-answer rollouts of a long-answer task: on code, VPO's 4 answers x 384 tokens (1,584 with the
    # delimiters) let one rambling rollout decode alone for ~80 s, and its before-evaluation alone took 5.5 minutes
    "quick": {"limit": 16, "train_limit": 64, "max_rollout_tokens": 512},
    "full": {"limit": 500, "train_limit": None, "max_rollout_tokens": None},
}


def run_preset(preset: str) -> dict[str, Any]:
    if preset not in RUN_PRESETS:
        raise ValueError(f"unknown preset {preset!r}; available: {', '.join(RUN_PRESETS)}")
    return RUN_PRESETS[preset]


def preset_options(plugins: Any, preset: str, kind: str, name: str) -> dict[str, Any]:
    """The options plugin ``name`` of ``kind`` registered for ``preset`` (empty when it registered none)."""
    run_preset(preset)
    return dict(plugins[kind].get(name).presets.get(preset, {}))
