"""How long a run at its defaults is expected to take, said before the model loads: what the defaults matrix
measured for the same task, trainer and searcher on the default model, with the machine it was measured on.

The figures are measurements, not a model of the machine: ``bench/defaults_matrix.py --record`` writes them to
``measured_minutes.json`` beside this file (one row per task x trainer x searcher x seed, minutes of wall time, and
the CPU; ``busy`` when the sitting ran beside other work, which makes its minutes an upper bound; a row's own
``machine`` when it was measured on another machine than the file's). A run whose
settings change the work (another model, --limit, --steps, --set, --reward, another engine or
dtype) has no such figure, and nothing is said; nor for a cell the matrix has not measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.runner.config import RunConfig, field_names

MEASURED = Path(__file__).with_name("measured_minutes.json")
# The settings that change how much work a run does, as RunConfig's fields declare (work=True); a run that keeps the
# defaults of all of them is the measured one
WORK = field_names(RunConfig, work=True)


def at_defaults(cfg: RunConfig) -> bool:
    default = RunConfig()
    return all(
        # options: none given (a run without --set has {"task": {}, ...}, and "engine" only when given)
        not any(cfg.options.values()) if name == "options" else getattr(cfg, name) == getattr(default, name)
        for name in WORK
    )


def expected_time(cfg: RunConfig, measured: Path = MEASURED) -> str | None:
    """One line with the measured minutes of this run's cell (the range over the seeds measured), or None."""
    if not at_defaults(cfg):
        return None
    try:
        data: dict[str, Any] = json.loads(measured.read_text())
    except (OSError, ValueError):
        return None
    rows = [
        r
        for r in data.get("rows", [])
        if (r.get("task"), r.get("trainer"), r.get("searcher")) == (cfg.task, cfg.trainer, cfg.searcher)
        and r.get("exit") == 0
        and isinstance(r.get("minutes"), (int, float))
    ]
    minutes = sorted(float(r["minutes"]) for r in rows)
    if not minutes:
        return None
    # a row measured on another machine than the file's names its own (one cell re-measured in another sitting)
    default = data.get("machine", "an unnamed machine")
    machine = ", or ".join(sorted({str(r.get("machine") or default) for r in rows}))
    busy = any(r.get("busy") for r in rows)
    bound, beside = ("at most ", ", beside other work") if busy else ("", "")
    if len(minutes) == 1:
        return (
            f"expected time: {bound}about {minutes[0]:.1f} min (measured once on {machine}{beside}; "
            f"bench/defaults_matrix.py)"
        )
    return (
        f"expected time: {bound}{minutes[0]:.1f}-{minutes[-1]:.1f} min (measured at {len(minutes)} seeds on "
        f"{machine}{beside}; bench/defaults_matrix.py)"
    )
