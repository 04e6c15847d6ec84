"""What answers "is A better than B" beyond one run's interval: paired differences over the same problems, means
over seeds, the problems only one method solved, and one baseline row per base-model evaluation.

Paired differences resample problems, not runs: A and B are evaluated on the same problems, so each resample draws
problem ids (with replacement) and takes the SAME ids on both sides; the difference of the two means over the
resample is the mean of the per-problem differences. Problem difficulty, shared by both sides, cancels, which is
why a paired interval is narrower than the two runs' own intervals suggest. The interval is the 2.5th-97.5th
percentile of 2000 resamples (seeded: the same report twice gives the same figures), like the leaderboard's.

- after - before, within each trained run: the base model and the trained one on the run's own eval problems.
- method - method: runs that share task, model, seed, searcher, the searcher and task settings the user gave, and
  their eval problems (a trainer's answer format, e.g. VPO's M answers per rollout, may differ: the budget is
  counted in candidates, so the comparison stays fair, and the table says so). A method is the run's arm (an
  experiment file's [[arm]]) or else its trainer, so two arms of one trainer, an ablation, are two methods.

Means over seeds: runs that differ only in their seed are grouped; the value is the mean of the seeds' figures, with
95% intervals that answer two questions:

- over seeds (``metrics``; the one a gain is judged by): the wider of two. A hierarchical bootstrap (``bootstrap``)
  resamples the seeds (with replacement), then each drawn seed's problems from its own: it treats the training
  runs as a sample, so one seed that fell widens it. With 2 or 3 seeds it is optimistic (the seeds' bootstrap has
  3 or 10 distinct draws; over 3 seeds it covered 77-82% where 95% was meant when seed-to-seed variance dominates,
  bench/seed_interval_coverage.py),
  so beside it stands Student's t-interval over the seeds' means (``t_interval``, seeds - 1 degrees of freedom:
  mean +- t x sd / sqrt(seeds)), which holds its coverage for normal seed means however few. A verdict reads
  the wider, bound by bound.
- over problems only (``problem_level``): the seeds fixed, each seed's problems resampled from its own (stratified).
  How much the mean would move on other problems with these very training runs.

The seeds' own spread (lowest and highest) is shown beside them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.report.data import BOOTSTRAP_RESAMPLES, Estimate, Row, _order, is_headline
from harness.report.student_t import t_quantile

# Configuration keys that do not change what a run measures, or that differ between seeds by construction.
NOT_SETTINGS = ("seed", "name", "out", "checkpoint_every", "loggers")
# Searcher options the runner fills in from the trainer (its answer format), not settings the user chose.
FROM_THE_TRAINER = ("answers_per_rollout", "delimiter", "behaviours", "resume", "max_new_tokens")
BASE = "base model"
SHOW_IDS = 8  # problem ids listed per method in the solved-only-by table; the rest are counted


@dataclass
class Difference:
    """A - B on the same problems, per headline metric both sides can recompute per problem."""

    kind: str  # "after - before" or "method - method"
    task: str
    model: str
    searcher: str
    seed: int
    a: str  # label of each side
    b: str
    problems: int  # problems compared
    metrics: dict[str, Estimate] = field(default_factory=dict)
    note: str = ""
    runs: tuple[str, str] = ("", "")  # run folder names of A and B
    # Not exported: per-problem differences (for the means over seeds) and the seed-free key of the pair.
    values: dict[str, list[float]] = field(default_factory=dict, repr=False, compare=False)
    group: tuple = field(default=(), repr=False, compare=False)

    def export(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "task": self.task,
            "model": self.model,
            "searcher": self.searcher,
            "seed": self.seed,
            "a": self.a,
            "b": self.b,
            "runs": list(self.runs),
            "problems": self.problems,
            "note": self.note,
            "metrics": {n: e.as_dict() for n, e in self.metrics.items()},
        }


@dataclass
class OverSeeds:
    """Runs (or pairs of runs) that differ only in their seed: the seeds' mean, its interval over seeds and problems
    (``metrics``) and over problems alone (``problem_level``)."""

    kind: str  # "run", "after - before" or "method - method"
    task: str
    model: str
    searcher: str
    label: str  # the trainer and phase, or "A - B"
    seeds: list[int]
    metrics: dict[str, Estimate] = field(default_factory=dict)  # interval: the wider of the two below, per bound
    bootstrap: dict[str, Estimate] = field(default_factory=dict)  # interval: seeds, then problems (hierarchical)
    t_interval: dict[str, Estimate] = field(default_factory=dict)  # interval: Student's t over the seeds' means
    problem_level: dict[str, Estimate] = field(default_factory=dict)  # interval: problems, the seeds fixed
    spread: dict[str, tuple[float, float]] = field(default_factory=dict)  # lowest and highest seed's value
    runs: list[str] = field(default_factory=list)

    def export(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "task": self.task,
            "model": self.model,
            "searcher": self.searcher,
            "label": self.label,
            "seeds": self.seeds,
            "runs": self.runs,
            "metrics": {
                n: {
                    **e.as_dict(),
                    "interval": "the wider of a hierarchical bootstrap over seeds and problems and a t-interval over "
                    "the seeds' means",
                    "bootstrap": self.bootstrap[n].as_dict() if n in self.bootstrap else None,
                    "t_interval": self.t_interval[n].as_dict() if n in self.t_interval else None,
                    "problems_only": self.problem_level[n].as_dict() if n in self.problem_level else None,
                    "lowest_seed": self.spread[n][0],
                    "highest_seed": self.spread[n][1],
                }
                for n, e in self.metrics.items()
            },
        }


@dataclass
class SolvedOnly:
    """Per task and model: the problems (evaluated by every method) that exactly one method solved."""

    task: str
    model: str
    methods: list[str]
    compared: int  # problems every method evaluated
    left_out: int  # problems some method did not evaluate (another seed's draw)
    by_all: int
    by_none: int
    only: dict[str, list[str]] = field(default_factory=dict)  # method -> problem ids, sorted

    def export(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------------------------------------------
# Paired bootstrap
# --------------------------------------------------------------------------------------------------------------


def paired(
    a: dict[str, float], b: dict[str, float], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[Estimate, list[float]]:
    """mean(A) - mean(B) over the problems both have, with a 95% paired percentile bootstrap (the same resampled
    problem ids on both sides); and the per-problem differences, in problem id order."""
    ids = sorted(set(a) & set(b))
    if not ids:
        raise ValueError("no problem in common")
    differences = [a[i] - b[i] for i in ids]
    low, high = pooled_bootstrap([differences], seed, resamples)
    return Estimate(math.fsum(differences) / len(differences), low, high), differences


def pooled_bootstrap(
    groups: list[list[float]], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """95% percentile interval of the mean of the groups' means, resampling within each group (stratified): one
    group is the plain bootstrap of data.bootstrap, draw for draw."""
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for group in groups:
        data = np.asarray(group, dtype=float)
        total += data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    means = total / len(groups)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def hierarchical_bootstrap(
    groups: list[list[float]], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """95% percentile interval of the mean of the groups' means with the groups (seeds) a sample too: each resample
    draws len(groups) groups with replacement, then each drawn group's values from its own, and averages."""
    rng = np.random.default_rng(seed)
    n = len(groups)
    picks = rng.integers(0, n, size=(resamples, n))  # which seed fills each of the n slots of each resample
    means = np.zeros(resamples)
    for g, group in enumerate(groups):
        data = np.asarray(group, dtype=float)
        # this seed's problem-resampled mean for every (resample, slot); kept only where the slot drew this seed
        inner = data[rng.integers(0, len(data), size=(resamples, n, len(data)))].mean(axis=2)
        means += np.where(picks == g, inner, 0.0).sum(axis=1)
    means /= n
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _compare(
    kind: str, a: Row, b: Row, a_label: str, b_label: str, group: tuple, note: str = "", seed: int = 0
) -> Difference | None:
    ids_a, ids_b = set(a.solved), set(b.solved)
    common = ids_a & ids_b
    if not common:
        return None
    if ids_a != ids_b:
        note = _join(note, f"on the {len(common)} problems both evaluated ({len(ids_a)} vs {len(ids_b)})")
    diff = Difference(
        kind,
        a.task,
        a.model,
        a.searcher,
        a.seed,
        a_label,
        b_label,
        len(common),
        note=note,
        runs=(a.run, b.run),
        group=group,
    )
    for name in sorted(set(a.values) & set(b.values), key=_order):
        av = {i: v for i, v in a.values[name].items() if i in common}
        bv = {i: v for i, v in b.values[name].items() if i in common}
        if set(av) != common or set(bv) != common:
            continue
        diff.metrics[name], diff.values[name] = paired(av, bv, seed)
    return diff if diff.metrics else None


def after_minus_before(rows: list[Row], seed: int = 0) -> list[Difference]:
    """Per trained run: after - before on the run's eval problems (same problems, same base model)."""
    by_run: dict[str, dict[str, Row]] = defaultdict(dict)
    for row in rows:
        by_run[row.run_dir][row.phase] = row
    out = []
    for phases in by_run.values():
        before, after = phases.get("before"), phases.get("after")
        if before and after:
            diff = _compare(
                "after - before",
                after,
                before,
                f"{after.method} after" + (f" ({after.stopped})" if after.stopped else ""),
                "before",
                ("after - before", seed_key(after)),
                seed=seed,
            )
            if diff:
                out.append(diff)
    return out


def method_differences(rows: list[Row], seed: int = 0) -> list[Difference]:
    """method - method between the final evaluations (after, or eval for an evaluation-only run) of runs that share
    task, model, seed, searcher and settings, on their common problems; each pair once, the base model (trainer
    none) always second."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        if row.phase in ("after", "eval"):
            groups[comparison_key(row)].append(row)
    out = []
    for members in groups.values():
        members.sort(key=lambda r: (r.trainer == "none", r.method, r.run))
        labels = _labels(members)
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                settings = _setting_differences(a, b)
                note = _join(
                    _answer_formats(a, b), f"searcher settings the trainer sets: {settings}" if settings else ""
                )
                diff = _compare(
                    "method - method",
                    a,
                    b,
                    labels[a.run_dir],
                    labels[b.run_dir],
                    ("method - method", seed_key(a), seed_key(b)),
                    note=note,
                    seed=seed,
                )
                if diff:
                    out.append(diff)
    return out


def _labels(rows: list[Row]) -> dict[str, str]:
    """A method's label: its arm or trainer ("none (base model)" for an evaluation-only run), with the run's name
    where two runs of one group share it."""
    count = defaultdict(int)
    for row in rows:
        count[row.method] += 1
    return {
        row.run_dir: (f"{row.method} ({BASE})" if row.trainer == "none" else row.method)
        + (f" [{row.run}]" if count[row.method] > 1 else "")
        + (f" ({row.stopped})" if row.stopped else "")
        for row in rows
    }


def _answer_formats(a: Row, b: Row) -> str:
    m_a, m_b = a.answers_per_rollout, b.answers_per_rollout
    if m_a == m_b:
        return ""
    if "evolve" in (a.searcher, b.searcher):  # evolve's budget is model calls; an M-answer seed call writes M
        return (
            f"answers per rollout {m_a} vs {m_b} (the same budget of model calls, not of candidates: see "
            f"budget/candidates)"
        )
    return f"answers per rollout {m_a} vs {m_b} (the same budget of candidates; pass@k/best@k count whole rollouts)"


# --------------------------------------------------------------------------------------------------------------
# Keys: which runs may be compared, which differ only by seed
# --------------------------------------------------------------------------------------------------------------


def _config(row: Row) -> dict[str, Any]:
    return row.manifest.get("config") or {}


def _task_identity(row: Row) -> str:
    task = row.manifest.get("task") or {}
    return json.dumps(
        [
            task.get("name", row.task),
            task.get("version"),
            task.get("data_source"),
            (row.manifest.get("resolved_options") or {}).get("task"),
        ],
        sort_keys=True,
        default=str,
    )


def _searcher_options(row: Row, leave_out: Iterable[str]) -> str:
    options = (row.manifest.get("resolved_options") or {}).get("searcher") or {}
    return json.dumps({k: str(v) for k, v in options.items() if k not in leave_out}, sort_keys=True)


def comparison_key(row: Row) -> tuple:
    """Runs with the same key are two methods on one footing: task (and its data), model, seed, searcher, the
    searcher options the user gave (``--set searcher.*``, k, preset), engine."""
    cfg = _config(row)
    user = (cfg.get("options") or {}).get("searcher") or {}
    return (
        row.task,
        row.model,
        row.seed,
        row.searcher,
        _task_identity(row),
        str(cfg.get("k")),
        cfg.get("preset"),
        json.dumps({k: str(v) for k, v in user.items()}, sort_keys=True),
        cfg.get("engine"),
        _searcher_options(row, (*FROM_THE_TRAINER, "seed")),
    )


def baseline_key(row: Row, with_seed: bool = True) -> tuple:
    """Before-evaluations with the same key evaluate the same base model the same way on the same problems."""
    return (
        row.phase,
        row.task,
        row.model,
        row.seed if with_seed else None,
        row.searcher,
        _task_identity(row),
        _searcher_options(row, ("resume",) if with_seed else ("resume", "seed")),
        tuple(sorted(row.solved)) if with_seed else (),
    )


def seed_key(row: Row) -> tuple:
    """Rows with the same key differ only in their seed (and so in the problems each seed drew)."""
    if row.phase == "before":
        return baseline_key(row, with_seed=False)
    cfg = {k: v for k, v in _config(row).items() if k not in NOT_SETTINGS}
    return (
        row.phase,
        row.task,
        row.dataset,  # one task on other data is another measurement, not another seed
        row.trainer,
        row.searcher,
        row.model,
        json.dumps(cfg, sort_keys=True, default=str),
    )


def _setting_differences(a: Row, b: Row) -> str:
    """The resolved searcher options that differ between two runs (those the trainer sets), as "key a vs b"."""
    sa = (a.manifest.get("resolved_options") or {}).get("searcher") or {}
    sb = (b.manifest.get("resolved_options") or {}).get("searcher") or {}
    keys = sorted(
        k
        for k in set(sa) | set(sb)
        if k not in ("seed", "resume", "answers_per_rollout") and str(sa.get(k)) != str(sb.get(k))
    )
    return ", ".join(f"{k} {sa.get(k, 'unset')} vs {sb.get(k, 'unset')}" for k in keys)


# --------------------------------------------------------------------------------------------------------------
# One baseline row per base-model evaluation
# --------------------------------------------------------------------------------------------------------------


def merge_baselines(rows: list[Row]) -> list[Row]:
    """The leaderboard with one "before" row per (task, model, seed, searcher settings, problems): every trained
    run evaluates the same base model first, so their before-rows are one measurement. Rows are merged only where
    their figures agree exactly; a row kept apart says why (its figures differ although nothing that should change
    them does, or its searcher settings differ: e.g. the trainer's answer format)."""
    groups: dict[tuple, list[list[Row]]] = {}
    for row in rows:
        if row.phase != "before":
            continue
        clusters = groups.setdefault(baseline_key(row), [])
        for cluster in clusters:
            if _same_figures(cluster[0], row):
                cluster.append(row)
                break
        else:
            clusters.append([row])
    merged: dict[str, Row] = {}  # run_dir of a cluster's first row -> the row standing for the cluster
    dropped: set[str] = set()
    for clusters in groups.values():
        for cluster in clusters:
            first = cluster[0]
            trainers = sorted({r.method for r in cluster})  # the methods (arms or trainers) that share the row
            row = dataclasses.replace(first)  # a copy: the notes below are the leaderboard's, not the run's
            if len(cluster) > 1:  # the row stands for several methods: its trainer column lists them
                row = dataclasses.replace(first, trainer=", ".join(trainers), arm="", shared_by=trainers)
                row.note = (
                    f"one row for the before-evaluations of {len(cluster)} runs ({', '.join(trainers)}): "
                    "the same base model, searcher settings and problems gave the same figures"
                )
            if len(clusters) > 1:
                others = [c[0] for c in clusters if c is not cluster]
                row.note = _join(
                    row.note,
                    "kept apart from the before-evaluation of "
                    + "; ".join(
                        f"{o.run} ({_figure_differences(first, o)}; {_manifest_differences(first, o)})" for o in others
                    )
                    + " although model, settings and problems are the same",
                )
            merged[first.run_dir] = row
            dropped.update(r.run_dir for r in cluster[1:])
    # Before-rows of one task, model, seed and searcher that were not merged because their settings differ.
    by_footing: dict[tuple, list[Row]] = defaultdict(list)
    for row in merged.values():
        by_footing[(row.task, row.model, row.seed, row.searcher)].append(row)
    for footing in by_footing.values():
        for row in footing:
            for other in footing:
                if other is not row and baseline_key(other) != baseline_key(row):
                    why = _baseline_differences(row, other)
                    row.note = _join(
                        row.note, f"evaluated apart from the before-evaluation of {other.method} ({other.run}): {why}"
                    )
    out = []
    for row in rows:
        if row.phase == "before":
            if row.run_dir in dropped:
                continue
            out.append(merged[row.run_dir])
        else:
            out.append(row)
    return out


def _same_figures(a: Row, b: Row) -> bool:
    if set(a.headline) != set(b.headline) or set(a.values) != set(b.values):
        return False
    if any(
        not math.isclose(a.headline[n].value, b.headline[n].value, rel_tol=1e-12, abs_tol=1e-12) for n in a.headline
    ):
        return False
    return all(
        a.values[n].keys() == b.values[n].keys()
        and all(math.isclose(a.values[n][i], b.values[n][i], rel_tol=1e-12, abs_tol=1e-12) for i in a.values[n])
        for n in a.values
    )


def _figure_differences(a: Row, b: Row) -> str:
    names = [
        n
        for n in sorted(set(a.headline) & set(b.headline), key=_order)
        if not math.isclose(a.headline[n].value, b.headline[n].value, abs_tol=1e-12)
    ]
    if names:
        n = names[0]
        return f"{n} {a.headline[n].value:.3f} vs {b.headline[n].value:.3f}"
    return "the same means, other per-problem figures"


def _manifest_differences(a: Row, b: Row) -> str:
    """What differs between two runs' manifests that could change a before-evaluation."""
    found = []
    for what, get in (
        ("engine", lambda m: (m.get("config") or {}).get("engine")),
        ("threads", lambda m: (m.get("config") or {}).get("threads")),
        ("processes", lambda m: m.get("processes")),
        ("model weights", lambda m: (m.get("model") or {}).get("source")),
        ("dtype", lambda m: (m.get("model") or {}).get("dtype")),
        ("harness version", lambda m: m.get("harness_version")),
    ):
        va, vb = get(a.manifest), get(b.manifest)
        if va != vb:
            found.append(f"{what} {va} vs {vb}")
    pa, pb = a.manifest.get("packages") or {}, b.manifest.get("packages") or {}
    found += [
        f"{name} {pa.get(name)} vs {pb.get(name)}" for name in sorted(set(pa) | set(pb)) if pa.get(name) != pb.get(name)
    ]
    return ("differing: " + ", ".join(found)) if found else "nothing recorded in their manifests differs"


def _baseline_differences(a: Row, b: Row) -> str:
    found = []
    m_a, m_b = a.answers_per_rollout, b.answers_per_rollout
    if m_a != m_b:
        found.append(f"answers per rollout {m_a} vs {m_b} (the trainer's answer format)")
    settings = _setting_differences(a, b)
    if settings:
        found.append(f"searcher settings {settings}")
    if set(a.solved) != set(b.solved):
        found.append(f"other problems ({len(set(a.solved) ^ set(b.solved))} differ)")
    if _task_identity(a) != _task_identity(b):
        found.append("other task data or options")
    return "; ".join(found) or "other settings"


# --------------------------------------------------------------------------------------------------------------
# Means over seeds
# --------------------------------------------------------------------------------------------------------------


def over_seeds(rows: list[Row], seed: int = 0) -> list[OverSeeds]:
    """Groups of rows that differ only in their seed (2 seeds or more): per headline metric all have, the mean of
    the seeds' figures, its interval over seeds and problems, and over problems alone."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        groups[seed_key(row)].append(row)
    out = []
    for members in groups.values():
        if len({r.seed for r in members}) < 2:
            continue
        members.sort(key=lambda r: r.seed)
        first = members[0]
        trainers = sorted({t for r in members for t in r.method.split(", ")})
        label = (
            f"{BASE} (before: {', '.join(trainers)})" if first.phase == "before" else f"{first.method} ({first.phase})"
        ) + _stopped_seeds((r.seed, r.stopped) for r in members)
        group = OverSeeds(
            "run",
            first.task,
            first.model,
            first.searcher,
            label,
            [r.seed for r in members],
            runs=[r.run for r in members],
        )
        for name in sorted(set.intersection(*(set(r.headline) for r in members)), key=_order):
            figures = [r.headline[name].value for r in members]
            per_seed = (
                [list(r.values[name].values()) for r in members] if all(name in r.values for r in members) else None
            )
            _seed_intervals(group, name, figures, per_seed, seed)
        out.append(group)
    return out


def differences_over_seeds(differences: list[Difference], seed: int = 0) -> list[OverSeeds]:
    """Paired differences of pairs that differ only in their seed (2 seeds or more): the mean of the seeds' mean
    differences, its interval over seeds and problems, and over problems alone (paired within each seed)."""
    groups: dict[tuple, list[Difference]] = defaultdict(list)
    for diff in differences:
        groups[diff.group].append(diff)
    out = []
    for members in groups.values():
        if len({d.seed for d in members}) < 2:
            continue
        members.sort(key=lambda d: d.seed)
        first = members[0]
        group = OverSeeds(
            first.kind,
            first.task,
            first.model,
            first.searcher,
            f"{_unmarked(first.a)} - {_unmarked(first.b)}"
            + _stopped_seeds((d.seed, note) for d in members for note in (d.a, d.b) if STOPPED in note),
            [d.seed for d in members],
            runs=[f"{d.runs[0]} - {d.runs[1]}" for d in members],
        )
        for name in sorted(set.intersection(*(set(d.values) for d in members)), key=_order):
            figures = [d.metrics[name].value for d in members]
            _seed_intervals(group, name, figures, [d.values[name] for d in members], seed)
        if group.metrics:
            out.append(group)
    return out


STOPPED = " (stopped: "  # how a stopped run's label is marked (data.stopped_note)


def _unmarked(label: str) -> str:
    """A label without its stopped mark: the over-seeds label names the seeds that stopped instead."""
    return label.split(STOPPED)[0]


def _stopped_seeds(notes: Iterable[tuple[int, str]]) -> str:
    """ " [seed 1 stopped: 2 of 4 steps trained]" for the (seed, note or label) pairs that carry a stopped mark."""
    marks = [f"seed {seed} stopped: {note.split('stopped: ', 1)[1].rstrip(')')}" for seed, note in notes if note]
    return f" [{'; '.join(marks)}]" if marks else ""


def t_interval_over_seeds(figures: list[float]) -> tuple[float, float]:
    """95% Student's t-interval of the mean of the seeds' figures: mean +- t(0.975, seeds - 1) x sd / sqrt(seeds)."""
    n = len(figures)
    mean = math.fsum(figures) / n
    sd = math.sqrt(math.fsum((f - mean) ** 2 for f in figures) / (n - 1))
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def _seed_intervals(
    group: OverSeeds, name: str, figures: list[float], per_seed: list[list[float]] | None, seed: int
) -> None:
    """Fill ``group``'s intervals of ``name`` from the seeds' figures and (when the store reproduces them) their
    per-problem values: the t-interval always, the two bootstraps with per-problem values, the verdict's the wider."""
    mean = math.fsum(figures) / len(figures)
    t_low, t_high = t_interval_over_seeds(figures)
    group.t_interval[name] = Estimate(mean, t_low, t_high)
    if per_seed is not None:
        low, high = hierarchical_bootstrap(per_seed, seed)
        group.bootstrap[name] = Estimate(mean, low, high)
        group.problem_level[name] = Estimate(mean, *pooled_bootstrap(per_seed, seed))
        group.metrics[name] = Estimate(mean, min(low, t_low), max(high, t_high))
    else:
        group.metrics[name] = Estimate(mean, t_low, t_high)
    group.spread[name] = (min(figures), max(figures))


# --------------------------------------------------------------------------------------------------------------
# Solved only by
# --------------------------------------------------------------------------------------------------------------


def solved_only_by(rows: list[Row]) -> list[SolvedOnly]:
    """Per task and model: which problems exactly one method solved (any candidate succeeded, in any of its runs
    and seeds). A method is a trainer's final evaluation ("after"), or the base model (every "before" evaluation
    and evaluation-only run); the searcher is added to the name where a task is searched more than one way. Only
    problems every method evaluated are compared: a problem another seed drew for one method only says nothing."""
    by_footing: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        by_footing[(row.task, row.model)].append(row)
    out = []
    for (task, model), members in sorted(by_footing.items()):
        several_searchers = len({r.searcher for r in members}) > 1
        solved: dict[str, dict[str, bool]] = defaultdict(dict)
        for row in members:
            method = BASE if row.phase == "before" or row.trainer == "none" else row.method
            if several_searchers:
                method += f" / {row.searcher}"
            for problem, ok in row.solved.items():
                solved[method][problem] = solved[method].get(problem, False) or ok
        if len(solved) < 2:
            continue
        methods = sorted(solved, key=lambda m: (not m.startswith(BASE), m))
        every = set.intersection(*(set(s) for s in solved.values()))
        anywhere = set.union(*(set(s) for s in solved.values()))
        count = {p: sum(solved[m][p] for m in methods) for p in every}
        table = SolvedOnly(
            task,
            model,
            methods,
            len(every),
            len(anywhere - every),
            by_all=sum(c == len(methods) for c in count.values()),
            by_none=sum(c == 0 for c in count.values()),
        )
        for method in methods:
            table.only[method] = sorted(p for p in every if count[p] == 1 and solved[method][p])
        out.append(table)
    return out


def headline_names(items: Iterable[Any]) -> list[str]:
    """The headline metrics any of the items (Differences, OverSeeds) has, in leaderboard order."""
    return sorted({n for item in items for n in item.metrics if is_headline(n)}, key=_order)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
