"""What a leaderboard report shows, queried from the results store: one row per run and evaluation phase, each
pass@k / best@k / solved@c with a 95% confidence interval over problems.

Intervals: pass@k and best@k are means of per-problem estimates, so the interval is a percentile bootstrap over
problems (resampling problems, not samples: it answers "how much would this number move on other problems like
these"). solved@c is a fraction of problems solved, so it gets the Wilson score interval.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.metrics.unbiased import best_at_k, pass_at_k

PHASES = ("before", "after", "eval")
HEADLINE = re.compile(r"^(pass|best|solved)@(\d+)$")
BOOTSTRAP_RESAMPLES = 2000


@dataclass
class Estimate:
    value: float
    low: float | None = None
    high: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass
class Row:
    """One run at one phase."""

    run: str  # the run folder's name
    run_dir: str
    task: str
    trainer: str
    searcher: str
    model: str
    seed: int
    phase: str
    problems: int
    headline: dict[str, Estimate] = field(default_factory=dict)  # "pass@4" -> Estimate
    other: dict[str, float] = field(default_factory=dict)  # every other scalar of the phase (diversity/..., ...)

    @property
    def anchor(self) -> str:
        return re.sub(r"[^A-Za-z0-9_-]", "-", f"{self.run}-{self.phase}")

    @property
    def label(self) -> str:
        return f"{self.trainer} / {self.searcher} ({self.phase})"


def leaderboard(conn: sqlite3.Connection, seed: int = 0) -> list[Row]:
    """Rows for every complete run in the store, ordered task, trainer, searcher, model, seed, phase."""
    rows = []
    runs = conn.execute("SELECT * FROM runs WHERE status = 'complete' ORDER BY task, trainer, searcher, model, seed, "
                        "name").fetchall()
    for run in runs:
        metrics = {r["key"]: r["value"] for r in conn.execute("SELECT key, value FROM metrics WHERE run_dir = ?",
                                                              (run["run_dir"],))}
        for phase in PHASES:
            mine = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith(phase + "/")}
            if not mine:
                continue
            per_problem = conn.execute("SELECT n, successes, scalars FROM problems WHERE run_dir = ? AND phase = ? "
                                       "ORDER BY problem_id", (run["run_dir"], phase)).fetchall()
            problems = int(json.loads(run["manifest"]).get("task", {}).get("eval_problems") or len(per_problem))
            row = Row(run["name"], run["run_dir"], run["task"], run["trainer"], run["searcher"], run["model"],
                      run["seed"], phase, problems)
            for name, value in sorted(mine.items(), key=lambda kv: _order(kv[0])):
                match = HEADLINE.match(name)
                if match:
                    row.headline[name] = Estimate(value, *interval(match[1], int(match[2]), value, per_problem,
                                                                   problems, seed))
                else:
                    row.other[name] = value
            rows.append(row)
    return rows


def interval(kind: str, k: int, value: float, per_problem: list, problems: int, seed: int = 0
             ) -> tuple[float | None, float | None]:
    """95% interval of a headline metric; (None, None) where the per-problem data cannot give one."""
    if kind == "solved":
        return wilson(value, problems)
    if kind == "pass":
        values = [pass_at_k(p["n"], p["successes"], k) for p in per_problem if p["n"] >= k]
    else:
        values = [best_at_k(json.loads(p["scalars"]), k) for p in per_problem if p["n"] >= k]
    if len(values) != len(per_problem) or not values or not math.isclose(sum(values) / len(values), value,
                                                                         abs_tol=1e-6):
        return None, None  # the samples do not reproduce the metric (another searcher's records): no interval
    return bootstrap(values, seed)


def bootstrap(values: list[float], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap of the mean over the given per-problem values."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def wilson(fraction: float, n: int, z: float = 1.96) -> tuple[float | None, float | None]:
    if n <= 0:
        return None, None
    centre = (fraction + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(fraction * (1 - fraction) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def skipped_runs(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(run folder, why) for every indexed run that has no row on the leaderboard: not complete (a "failed" run's
    manifest carries its error), or complete without evaluation metrics."""
    out = []
    for run in conn.execute("SELECT run_dir, status, manifest FROM runs ORDER BY run_dir").fetchall():
        if run["status"] == "failed":
            error = (str(json.loads(run["manifest"]).get("error") or "").strip().splitlines() or ["no error given"])[0]
            out.append((run["run_dir"], f"status 'failed': {error}"))
        elif run["status"] != "complete":
            out.append((run["run_dir"], f"status {run['status']!r} (unfinished or died)"))
        elif not any(r["key"].split("/", 1)[0] in PHASES
                     for r in conn.execute("SELECT key FROM metrics WHERE run_dir = ?", (run["run_dir"],))):
            out.append((run["run_dir"], "complete, but no evaluation metrics (before/, after/ or eval/)"))
    return out


def other_columns(rows: list[Row], leave_out: tuple[str, ...] = ()) -> list[str]:
    """Every non-headline metric any row has (a searcher's own too, e.g. "majority@8"), sorted; names starting
    with a prefix in ``leave_out`` are left out (shown in a table of their own)."""
    return sorted({name for row in rows for name in row.other if not name.startswith(leave_out)})


def whole_columns(rows: list[Row]) -> set[str]:
    """The non-headline metrics whose every value is a whole number (counts: tokens, candidates, calls)."""
    values: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.other.items():
            values.setdefault(name, []).append(value)
    return {name for name, vs in values.items() if all(float(v).is_integer() for v in vs)}


def headline_columns(rows: list[Row]) -> list[str]:
    """pass@k, then best@k, then solved@c, each by increasing k: the columns any row has."""
    names = {name for row in rows for name in row.headline}
    return sorted(names, key=_order)


def curves(conn: sqlite3.Connection, run_dir: str) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for r in conn.execute("SELECT key, step, value FROM curves WHERE run_dir = ? ORDER BY key, step", (run_dir,)):
        out.setdefault(r["key"], []).append((r["step"], r["value"]))
    return out


def examples(conn: sqlite3.Connection, run_dir: str, phase: str) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute("SELECT * FROM examples WHERE run_dir = ? AND phase = ? ORDER BY which",
                                          (run_dir, phase))]


def manifest(conn: sqlite3.Connection, run_dir: str) -> dict[str, Any]:
    row = conn.execute("SELECT manifest FROM runs WHERE run_dir = ?", (run_dir,)).fetchone()
    return json.loads(row["manifest"]) if row else {}


def _order(name: str) -> tuple:
    match = HEADLINE.match(name)
    if match:
        return (0, ("pass", "best", "solved").index(match[1]), int(match[2]), name)
    return (1, 0, 0, name)
