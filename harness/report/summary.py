"""What `harness run` prints when a run finishes: before / after / change per metric, the training curves' ends,
and a best and a worst final candidate (means can be hacked; samples show how)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from harness.report.compare import Difference, after_minus_before
from harness.report.data import BEHAVIOUR, HELD_OUT, leaderboard, metric_label
from harness.store.reading import read_jsonl
from harness.store.results_db import open_index

# What a searcher spends and counts, not how well the policy did: printed under the task's figures, apart.
BOOKKEEPING = (
    "budget/",
    "num_",
    "children/",
    "malformed_rollouts",
    "missing_answers",
    "generations",
    "step",
    "seconds",
)


def summary_table(metrics: dict[str, Any]) -> str:
    """Before / after / change for every evaluation metric, plus first and last value of each training curve. The
    task's figures come first (pass@k, best@k, solved@c, behaviour scores, then the rest), each with its 95%
    interval where metrics.json holds one (``intervals``, harness/runner/phases.py), then a rule, then the
    bookkeeping (``BOOKKEEPING``: budgets, counts)."""
    phases = [p for p in ("before", "after", "eval") if any(k.startswith(p + "/") for k in metrics)]
    names = sorted(
        {name for k in metrics for p, sep, name in [k.partition("/")] if sep and p in phases}, key=_metric_order
    )
    found = metrics.get("intervals")
    intervals = found if isinstance(found, dict) else {}
    lines = []
    if names:
        header = ["metric", *phases] + (["change"] if {"before", "after"} <= set(phases) else [])
        figures, bookkeeping = [], []
        for name in names:
            values = [metrics.get(f"{p}/{name}") for p in phases]
            row = [
                metric_label(name, names),
                *(_fmt(v, intervals.get(f"{p}/{name}")) for p, v in zip(phases, values, strict=True)),
            ]
            if "change" in header:  # every row has the cell: a metric of one phase only (evolve's children/...) too
                row.append(_change(values[0], values[1]))
            (bookkeeping if is_bookkeeping(name) else figures).append(row)
        lines += _table(header, figures, bookkeeping)
        if any(f"{p}/{n}" in intervals for p in phases for n in names):
            lines.append(
                "[low, high]: 95% interval over the problems (percentile bootstrap; Wilson for solved@c), as in "
                "`harness report`"
            )
    curves = [
        (k[len("train/") :], v) for k, v in metrics.items() if k.startswith("train/") and isinstance(v, list) and v
    ]  # (a curve with no step yet has no ends)
    shown = [c for c in curves if c[0] in ("reward_mean", "loss", "kl", "grad_norm") or c[0].startswith("reward/")]
    if shown:
        lines += [""] * bool(lines) + _table(
            ["training", "first step", "last step", "steps"],
            [[k, _fmt(v[0]), _fmt(v[-1]), str(len(v))] for k, v in shown],
        )
    if warm_up := warm_up_line(metrics):
        lines += [""] * bool(lines) + [warm_up]
    return "\n".join(lines)


def warm_up_line(metrics: dict[str, Any]) -> str:
    """The format warm-up in one line (trainers/format_warmup.py's ``warmup/*``), or "" for a run without one:
    its SFT steps are training too, and can cost more than the RL steps after them."""
    if not all(
        isinstance(metrics.get(f"warmup/{k}"), (int, float))
        for k in ("steps", "well_formed_before", "well_formed_after")
    ):
        return ""  # no warm-up, or a partial record of one
    seconds = metrics.get("warmup/seconds")
    took = f" ({seconds / 60:.1f} min)" if isinstance(seconds, (int, float)) else ""
    right = (
        f"; right {metrics['warmup/check_success_before']:.0%} -> {metrics['warmup/check_success_after']:.0%}"
        if all(isinstance(metrics.get(f"warmup/check_success_{k}"), (int, float)) for k in ("before", "after"))
        else ""
    )
    return (
        f"format warm-up: {metrics['warmup/well_formed_before']:.0%} -> {metrics['warmup/well_formed_after']:.0%} "
        f"well-formed check rollouts in {metrics['warmup/steps']} SFT steps{took}{right}"
    )


NO_WORSE_MARGIN = 0.1  # "no worse" is said only where the interval excludes a drop of this much
# (z(0.975) + z(0.8)) x the standard error: the change a paired test at 5% would detect 80% of the time
DETECTABLE_SE = 2.80


def paired_change(db: Path, run_dir: Path) -> str:
    """After - before of a trained run, paired over its eval problems with a 95% bootstrap interval: whether the
    change is more than which problems happened to be drawn (an interval that excludes 0), the verdict it supports,
    and the smallest change this many problems could detect. Empty when the run has no before/after pair in the
    index."""
    diff = paired_difference(db, run_dir)
    if diff is None:
        return ""
    rows = [
        [
            metric_label(name, diff.metrics),
            f"{e.value:+.3f}",
            f"[{e.low:+.3f}, {e.high:+.3f}]",
            verdict(e),
            f"{detectable(diff.values[name]):.3f}",
        ]
        for name, e in diff.metrics.items()
        if e.low is not None and not math.isnan(e.low) and name in diff.values
    ]
    if not rows:
        return ""
    return "\n".join(
        [
            f"\nafter - before, paired over the {diff.problems} eval problems (95% bootstrap interval; verdict: "
            f"better or worse where it excludes 0, no worse where it excludes a drop of {NO_WORSE_MARGIN}; "
            f"detectable: the change this many problems would show 80% of the time, from the paired spread):",
            *_table(["metric", "change", "interval", "verdict", "detectable"], rows),
        ]
    )


def verdict(change: Any) -> str:
    """What a paired interval supports: "better" or "worse" where it excludes 0, "no worse" where it excludes a drop
    of ``NO_WORSE_MARGIN``, else "undecided" (it cannot tell a drop of that size from no change)."""
    if change.low > 0:
        return "better"
    if change.high < 0:
        return "worse"
    return "no worse" if change.low > -NO_WORSE_MARGIN else "undecided"


def detectable(differences: list[float]) -> float:
    """The smallest mean change a paired comparison over these problems detects 80% of the time at 5% two-sided:
    2.8 standard errors of the mean per-problem difference. With no spread at all (every problem moved alike) the
    spread of a single problem's change is unknown: 2.8 / sqrt(n) x 0.5 stands in, a 0/1 score's largest sd."""
    n = len(differences)
    if n < 2:
        return math.nan
    mean = math.fsum(differences) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1))
    return DETECTABLE_SE * (sd if sd > 0 else 0.5) / math.sqrt(n)


def paired_difference(db: Path, run_dir: Path) -> Difference | None:
    """The run's after - before from the index ``db``, paired over its eval problems (None: no such pair)."""
    with open_index(db) as conn:
        differences = after_minus_before(leaderboard(conn, run_dir=str(Path(run_dir).resolve())))
    return differences[0] if differences else None


def successes_by_problem(db: Path, run_dir: Path, phase: str) -> dict[str, tuple[int, int]]:
    """{problem id: (candidates that succeeded, candidates)} of one phase of the run, from the index ``db``."""
    with open_index(db) as conn:
        rows = conn.execute(
            "SELECT problem_id, successes, n FROM problems WHERE run_dir = ? AND phase = ?",
            (str(Path(run_dir).resolve()), phase),
        ).fetchall()
    return {r["problem_id"]: (int(r["successes"]), int(r["n"])) for r in rows if r["n"]}


def example_samples(path: Path, phase: str, width: int = 100) -> str:
    """A best and a worst candidate of the final evaluation: means can be hacked, samples show how."""
    if not path.exists():
        return ""
    rows = [r for r in read_jsonl(path) if r.get("phase") == phase and r.get("scalar") is not None]
    if not rows:
        return ""
    # Among equal scores, the shortest: the cleanest candidate that earned the top score, not a rambling one.
    best = min(rows, key=lambda r: (-r["scalar"], len(r["text"])))
    worst = min(rows, key=lambda r: r["scalar"])
    lines = [f"\nexample candidates ({phase}; all in {path.name}):"]
    if best["scalar"] <= 0:  # a "best" of nothing would present noise as the model's best work
        lines.append(f"  no candidate scored above 0 (of {len(rows)}); one of them:")
    for label, r in (("e.g.", best),) if best["scalar"] <= 0 else (("best", best), ("worst", worst)):
        text = " ".join(r["text"].split())
        text = text if len(text) <= width else text[: width - 3] + "..."
        asked = " ".join(str(r.get("prompt") or "").split())
        asked = f" {asked[:width]!r}" + (f" (reference {r['reference']!r})" if r.get("reference") else "")
        lines.append(
            f"  {label:<5} {r['problem_id']}:{asked}\n        answer {text!r} -> extracted "
            f"{r['extracted']!r}, rewards {r['rewards']}"
        )
    return "\n".join(lines)


def is_bookkeeping(name: str) -> bool:
    """A searcher's budget or count (``BOOKKEEPING``), not a figure of the task."""
    return name.startswith(BOOKKEEPING)


def _metric_order(name: str) -> tuple:
    """pass@k / best@k / solved@c (any name@k) first, then behaviour scores, then the rest by name."""
    prefix, _, k = name.partition("@")
    if k.isdecimal():  # isdigit() takes "²"
        return (0, prefix, int(k), name)
    return (1 if name.startswith((BEHAVIOUR, HELD_OUT)) else 2, prefix, 0, name)


def _change(before: Any, after: Any) -> str:
    """after - before, signed; empty unless both are numbers (a count stays whole)."""
    if not all(isinstance(v, (int, float)) for v in (before, after)):
        return ""
    delta = after - before
    return f"{delta:+.3f}" if isinstance(delta, float) else f"{delta:+d}"


def _fmt(value: Any, interval: Any = None) -> str:
    """A value, to 3 decimals when a float, with its 95% interval ``[low, high]`` when it has one."""
    if value is None:
        return "-"
    shown = f"{value:.3f}" if isinstance(value, float) else str(value)
    if (
        isinstance(interval, list)
        and len(interval) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in interval)
    ):
        shown += f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    return shown


def _table(header: list[str], rows: list[list[str]], after_rule: list[list[str]] | None = None) -> list[str]:
    """Columns padded to their widest cell, a rule under the header; ``after_rule``'s rows under a second rule."""
    after_rule = after_rule or []
    widths = [max(len(str(r[i])) for r in [header, *rows, *after_rule]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    rule = fmt.format(*("-" * w for w in widths))
    second = [rule] if rows and after_rule else []
    return [fmt.format(*header), rule, *(fmt.format(*r) for r in rows), *second, *(fmt.format(*r) for r in after_rule)]
