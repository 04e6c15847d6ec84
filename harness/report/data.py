"""What a leaderboard report shows, queried from the results store: one row per run and evaluation phase, each
pass@k / best@k / solved@c with a 95% confidence interval over problems.

Intervals: pass@k and best@k are means of per-problem estimates, so the interval is a percentile bootstrap over
problems (resampling problems, not samples: it answers "how much would this number move on other problems like
these"). solved@c is a fraction of problems solved, so it gets the Wilson score interval.

Per-problem values are recomputed from the samples (the store's ``problems`` table) and kept on each row
(``Row.values``) only where they reproduce the figure the run reported, so an interval or a paired difference
(harness/report/compare.py) is never computed from numbers that mean something else. With M answers per rollout
(``resolved_options.searcher.answers_per_rollout``) pass@k and best@k are set-level, as best-of-k reports them: the
rollout is the unit (it succeeds when any of its answers does, its best is its best answer, a missing answer is a
failure and never its best, a rollout cut short by n is left out), and the unbiased estimators run over the R whole
rollouts with k/M draws (k a multiple of M). A run written before that change (per-answer figures over pooled
candidates) is recognised by its figures: the pooled recomputation is tried when the set-level one does not match.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.metrics.unbiased import best_at_k, pass_at_k
from harness.scoring.multi_answer import answer_budget
from harness.store.reading import shown
from harness.store.results_db import problem_records
from harness.types import data_card_line

PHASES = ("before", "after", "eval")
HEADLINE = re.compile(r"^(pass|best|solved)@(\d+)$")
BEHAVIOUR = "behaviour/"  # behaviour/<name>: a headline metric too where its per-problem scores reproduce it
HELD_OUT = "heldout/"  # heldout/<name>: the same behaviour by its held-out evaluator (no trainer uses it); likewise
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
    shared_by: list[str] = field(default_factory=list)  # a "before" row standing for several runs: their trainers
    note: str = ""  # why this row is as it is (merged baselines, baselines kept apart)
    arm: str = ""  # the experiment file's arm the run belongs to ("" outside arms)
    # a trained run's format warm-up SFT steps (metric warmup/steps; 0 without a warm-up) on its "after" row: arms
    # with one stop rule can take very different amounts of it; None on a row of no training ("before", "eval")
    warmup_steps: int | None = None
    # the token cap of one candidate, "TRAIN / EVAL" on a trained run's "after" row, "EVAL" otherwise: a rollout's
    # max_new_tokens less its delimiters' allowance, over M (harness/scoring/multi_answer.py answer_budget), so
    # one-answer and M-answer arms are seen to be at equal tokens per candidate, or not
    candidate_tokens: str = ""
    stopped: str = ""  # a trained run stopped early and rolled back: "stopped: 2 of 4 steps trained" ("" otherwise)
    # the data evaluated on, from the manifest's data card: "NAME; SPLIT; SIZE rows" (harness.types.DataCard); two
    # evaluations of one task on different data are two rows that say so
    dataset: str = ""
    # Not exported: per-problem values of each headline metric that reproduce its figure ("pass@4" -> {id: value}),
    # which problems any candidate solved, and the run's manifest (for grouping runs).
    values: dict[str, dict[str, float]] = field(default_factory=dict, repr=False, compare=False)
    solved: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)
    manifest: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    EXPORTED = (
        "run",
        "run_dir",
        "task",
        "dataset",
        "trainer",
        "arm",
        "searcher",
        "model",
        "seed",
        "phase",
        "problems",
        "warmup_steps",
        "candidate_tokens",
        "stopped",
        "other",
        "shared_by",
        "note",
    )

    @property
    def anchor(self) -> str:
        return re.sub(r"[^A-Za-z0-9_-]", "-", f"{self.run}-{self.phase}")

    @property
    def method(self) -> str:
        """What the comparisons call the run: its arm (two arms of one trainer are two methods), else its trainer."""
        return self.arm or self.trainer

    @property
    def label(self) -> str:
        return f"{self.method} / {self.searcher} ({self.phase})"

    @property
    def legend(self) -> str:
        """A plot's legend entry: the method, searcher, phase and seed, then the model and the data's name."""
        return f"{self.label} s{self.seed}: {self.model} on {dataset_name(self.manifest) or self.task}"

    @property
    def answers_per_rollout(self) -> int:
        return answers_per_rollout(self.manifest)

    def export(self) -> dict[str, Any]:
        """The row as JSON-ready data (leaderboard.json): identity, other metrics, headline estimates."""
        return {
            **{k: getattr(self, k) for k in self.EXPORTED},
            "headline": {n: e.as_dict() for n, e in self.headline.items()},
        }


def leaderboard(conn: sqlite3.Connection, seed: int = 0, run_dir: str | None = None) -> list[Row]:
    """Rows for every complete run in the store (or the one in ``run_dir``), ordered task, trainer, searcher, model,
    seed, phase."""
    rows = []
    only = " AND run_dir = ?" if run_dir is not None else ""
    runs = conn.execute(
        f"SELECT * FROM runs WHERE status = 'complete'{only} ORDER BY task, trainer, searcher, model, seed, name",
        () if run_dir is None else (run_dir,),
    ).fetchall()
    for run in runs:
        metrics = {
            r["key"]: r["value"]
            for r in conn.execute("SELECT key, value FROM metrics WHERE run_dir = ?", (run["run_dir"],))
        }
        manifest = json.loads(run["manifest"])
        config = manifest.get("config") or {}
        m = answers_per_rollout(manifest)
        for phase in PHASES:
            mine = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith(phase + "/")}
            if not mine:
                continue
            per_problem = conn.execute(
                "SELECT * FROM problems WHERE run_dir = ? AND phase = ? ORDER BY problem_id", (run["run_dir"], phase)
            ).fetchall()
            problems = int((manifest.get("task") or {}).get("eval_problems") or len(per_problem))
            row = Row(
                run["name"],
                run["run_dir"],
                run["task"],
                run["trainer"],
                run["searcher"],
                run["model"],
                run["seed"],
                phase,
                problems,
                manifest=manifest,
                arm=str(config.get("arm") or ""),
                dataset=dataset_label(manifest),
                warmup_steps=warmup_steps(metrics) if phase == "after" else None,
                candidate_tokens=candidate_tokens(manifest, trained=phase == "after"),
                stopped=stopped_note(metrics, config) if phase == "after" else "",
                solved={p["problem_id"]: p["successes"] > 0 for p in per_problem},
            )
            row.headline, row.values, row.other = estimates(mine, per_problem, problems, m, seed)
            rows.append(row)
    return rows


def estimates(
    metrics: dict[str, float], per_problem: list, problems: int, m: int = 1, seed: int = 0
) -> tuple[dict[str, Estimate], dict[str, dict[str, float]], dict[str, float]]:
    """One phase's figures (``metrics``: name -> value, without the phase) with the per-problem records of that
    phase (the store's ``problems`` rows, by problem id) -> (headline estimates with their 95% intervals, the
    per-problem values that reproduce them, every other scalar). pass@k and best@k get the percentile bootstrap
    over problems, solved@c Wilson's interval, a behaviour score the bootstrap of its per-problem means; a figure
    the records do not reproduce gets no interval."""
    headline: dict[str, Estimate] = {}
    values_of: dict[str, dict[str, float]] = {}
    other: dict[str, float] = {}
    for name, value in sorted(metrics.items(), key=lambda kv: _order(kv[0])):
        match = HEADLINE.match(name)
        if not match:
            other[name] = value
            if name.startswith((BEHAVIOUR, HELD_OUT)) and (scores := behaviour_values(name, value, per_problem)):
                values_of[name] = scores  # paired after - before and method - method like pass@k
                headline[name] = Estimate(value, *bootstrap(list(scores.values()), seed))
            continue
        kind, k = match[1], int(match[2])
        values = problem_values(kind, k, value, per_problem, problems, m)
        if values is not None:
            values_of[name] = values
        if kind == "solved":
            headline[name] = Estimate(value, *wilson(value, problems))
        elif values is not None:
            headline[name] = Estimate(value, *bootstrap(list(values.values()), seed))
        else:  # the samples do not reproduce the metric (another searcher's records): no interval
            headline[name] = Estimate(value)
    return headline, values_of, other


def phase_intervals(
    metrics: dict[str, Any], samples: list[dict[str, Any]], phase: str, problems: int, m: int = 1, seed: int = 0
) -> dict[str, list[float]]:
    """{"<phase>/<metric>": [low, high]}: the 95% interval of each headline figure of one phase of a run, from its
    samples.jsonl records, computed exactly as the report computes it from the index (``estimates`` over the
    records the index would hold, in its order), so a run's printed interval is its leaderboard cell's."""
    mine = {
        k.split("/", 1)[1]: v
        for k, v in metrics.items()
        if k.startswith(phase + "/") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    per_problem = sorted(problem_records([s for s in samples if s.get("phase") == phase]), key=_problem_key)
    headline, _, _ = estimates(mine, per_problem, problems or len(per_problem), m, seed)
    return {
        f"{phase}/{name}": [e.low, e.high]
        for name, e in headline.items()
        if e.low is not None and e.high is not None and not (math.isnan(e.low) or math.isnan(e.high))
    }


def _problem_key(record: dict[str, Any]) -> bytes:
    """The index's order of problems (SQLite's ORDER BY problem_id: by the UTF-8 bytes)."""
    return str(record["problem_id"]).encode()


def dataset_label(manifest: dict[str, Any]) -> str:
    """The run's data as its leaderboard row shows it: the data card's "NAME; SPLIT; SIZE rows"; for a run from
    before data cards, the data source's dataset or source name; "" when the manifest says nothing."""
    task = manifest.get("task") if isinstance(manifest, dict) else None
    if not isinstance(task, dict):
        return ""
    if line := data_card_line(task.get("data_card")):
        return shown(line, 1000)  # run data: a "name" that is a large object is cut
    return dataset_name(manifest)


def dataset_name(manifest: dict[str, Any]) -> str:
    """The data's name alone (a legend's): the data card's name, else the data source's dataset or source."""
    task = manifest.get("task") if isinstance(manifest, dict) else None
    if not isinstance(task, dict):
        return ""
    card, source = task.get("data_card"), task.get("data_source")
    if isinstance(card, dict) and card.get("name"):
        return shown(card["name"], 1000)
    if isinstance(source, dict) and (source.get("dataset") or source.get("source")):
        return shown(source.get("dataset") or source.get("source"), 1000)
    return ""


def stopped_note(metrics: dict[str, float], config: dict[str, Any]) -> str:
    """ "stopped: K of N steps trained" for a run whose trainer stopped and rolled back (``stopped/steps_trained``,
    trainers/grpo.py), else "": a comparison must not read a rolled-back run as "no change"."""
    kept = metrics.get("stopped/steps_trained")
    if not isinstance(kept, (int, float)):
        return ""
    planned = config.get("steps")
    return f"stopped: {int(kept)} of {shown(planned, 40) if planned is not None else '?'} steps trained"


def warmup_steps(metrics: dict[str, float]) -> int:
    """The SFT steps a trained run's format warm-up took (``warmup/steps``); 0 for a run without one."""
    try:
        return int(metrics.get("warmup/steps", 0))
    except (TypeError, ValueError):
        return 0


def candidate_tokens(manifest: dict[str, Any], trained: bool) -> str:
    """One candidate's token cap at evaluation, preceded by training's on a trained run's row ("160 / 160"); "" when
    the manifest does not say."""
    options = manifest.get("resolved_options") or {}

    def cap(kind: str) -> str:
        mine = options.get(kind) or {}
        try:
            m = max(1, int(mine.get("answers_per_rollout") or 1))
            return str(answer_budget(int(mine["max_new_tokens"]), m))
        except (KeyError, TypeError, ValueError):
            return ""

    evaluation = cap("searcher")
    training = cap("trainer") if trained else ""
    return f"{training} / {evaluation}" if training and evaluation else evaluation


def answers_per_rollout(manifest: dict[str, Any]) -> int:
    """M, the answers a rollout writes, from the run's resolved searcher options (1 when not set)."""
    searcher = (manifest.get("resolved_options") or {}).get("searcher") or {}
    try:
        return max(1, int(searcher.get("answers_per_rollout", 1)))
    except (TypeError, ValueError):
        return 1


def problem_values(
    kind: str, k: int, value: float, per_problem: list, problems: int, m: int = 1
) -> dict[str, float] | None:
    """{problem id: that problem's pass@k, best@k or solved@k} from the store's per-problem rows, or None where no
    recomputation reproduces ``value`` (the run's own figure): set-level (M > 1, the rollout as unit) first, then
    over the pooled candidates (M = 1, or a run written before set-level figures)."""
    if not per_problem:
        return None
    tries = (("solved", 1),) if kind == "solved" else tuple(dict.fromkeys([(kind, m), (kind, 1)]))
    for each, mm in tries:
        values = {}
        for p in per_problem:
            one = _one_problem(each, k, p, mm)
            if one is None:
                break
            values[p["problem_id"]] = one
        else:
            denominator = problems if kind == "solved" else len(values)
            if len(values) == denominator and math.isclose(
                math.fsum(values.values()) / denominator, value, abs_tol=1e-6
            ):
                return values
    return None


def behaviour_values(name: str, value: float, per_problem: list) -> dict[str, float] | None:
    """{problem id: the mean behaviour score of its answers} for ``behaviour/<name>`` (the training scorer's, from
    the store's ``behaviours`` column) or ``heldout/<name>`` (the held-out evaluator's, ``held_out``), or None where
    the store has no scores for some problem or they do not reproduce ``value`` (the run's mean over all its
    answers)."""
    column = "held_out" if name.startswith(HELD_OUT) else "behaviours"
    behaviour, sums = name.removeprefix(HELD_OUT if column == "held_out" else BEHAVIOUR), {}
    for p in per_problem:
        stored = p[column]  # NULL: indexed before the column existed
        scores = json.loads(stored).get(behaviour) if stored else None
        if not scores or not scores[1]:
            return None
        sums[p["problem_id"]] = scores
    if not sums or not math.isclose(
        math.fsum(s for s, _ in sums.values()) / sum(n for _, n in sums.values()), value, abs_tol=1e-6
    ):
        return None
    return {pid: s / n for pid, (s, n) in sums.items()}


def _one_problem(kind: str, k: int, p: Any, m: int) -> float | None:
    """One problem's estimate, or None when its record cannot give one (too few candidates, no call numbers)."""
    if k < 1:  # pass@0 is no estimate (the index refuses such a key; a store written before it may hold one)
        return None
    scalars = json.loads(p["scalars"])
    outcomes = json.loads(p["outcomes"]) if p["outcomes"] else None  # None: indexed before the column existed
    if kind == "solved":  # evolve: solved within the first k model calls
        if outcomes is None or any(o[1] and (len(o) < 3 or o[2] is None) for o in outcomes):
            return None
        return float(any(o[1] and o[2] <= k for o in outcomes))
    if m == 1:
        if p["n"] < k:
            return None
        return pass_at_k(p["n"], p["successes"], k) if kind == "pass" else best_at_k(scalars, k)
    if outcomes is None or k % m:
        return None
    rollouts, successful, bests = rollout_outcomes(outcomes, scalars, m)
    if k // m > rollouts:
        return None
    return pass_at_k(rollouts, successful, k // m) if kind == "pass" else best_at_k(bests, k // m)


def rollout_outcomes(outcomes: list[list], scalars: list[float], m: int) -> tuple[int, int, list[float]]:
    """One problem's candidates (``outcomes``: [rollout_index, success, call, missing] each, as indexed, with their
    ``scalars``) -> (R whole rollouts, how many have a successful answer, each one's best scalar), by best-of-k's
    rules (harness/metrics/unbiased.py ``rollout_outcomes``): a rollout with fewer than M candidates (cut by n) is
    left out, a missing answer is a failure and never a rollout's best, a rollout with no written answer scores 0."""
    groups: dict[Any, list[tuple[list, float]]] = {}
    for position, (outcome, scalar) in enumerate(zip(outcomes, scalars, strict=True)):
        key = outcome[0] if outcome[0] is not None else f"#{position}"
        groups.setdefault(key, []).append((outcome, scalar))
    whole = [answers for answers in groups.values() if len(answers) == m]
    successful = sum(any(o[1] for o, _ in answers) for answers in whole)
    bests = [max((s for o, s in answers if not (len(o) > 3 and o[3])), default=0.0) for answers in whole]
    return len(whole), successful, bests


def interval(
    kind: str, k: int, value: float, per_problem: list, problems: int, seed: int = 0, m: int = 1
) -> tuple[float | None, float | None]:
    """95% interval of a headline metric; (None, None) where the per-problem data cannot give one."""
    if kind == "solved":
        return wilson(value, problems)
    values = problem_values(kind, k, value, per_problem, problems, m)
    return (None, None) if values is None else bootstrap(list(values.values()), seed)


def bootstrap(values: list[float], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap of the mean over the given per-problem values."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def wilson(fraction: float, n: int, z: float = 1.96) -> tuple[float | None, float | None]:
    """Wilson's 95% interval of a fraction of ``n`` problems; (None, None) where there is none: no problems, or a
    "fraction" outside [0, 1] (a folder's figure the index took as it is)."""
    if n <= 0 or not 0 <= fraction <= 1:
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
        elif not any(
            r["key"].split("/", 1)[0] in PHASES
            for r in conn.execute("SELECT key FROM metrics WHERE run_dir = ?", (run["run_dir"],))
        ):
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
    """pass@k, then best@k, then solved@c, each by increasing k, then behaviour scores: the columns any row has."""
    names = {name for row in rows for name in row.headline}
    return sorted(names, key=_order)


def curves(conn: sqlite3.Connection, run_dir: str) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for r in conn.execute("SELECT key, step, value FROM curves WHERE run_dir = ? ORDER BY key, step", (run_dir,)):
        out.setdefault(r["key"], []).append((r["step"], r["value"]))
    return out


def during_training(curves_of_run: dict[str, list[tuple[int, float]]]) -> tuple[list[str], list[dict[str, Any]]]:
    """A run's evaluations during training (--eval-every, harness/runner/during_training.py) from its curves:
    (the headline metrics they hold, one {"step": optimizer steps taken, metric: value} per point, by step)."""
    steps = [value for _, value in curves_of_run.get("during/step", [])]
    names = sorted(
        {k.split("/", 1)[1] for k in curves_of_run if k.startswith("during/") and is_headline(k.split("/", 1)[1])},
        key=_order,
    )
    points = [{"step": int(step)} for step in steps]
    for name in names:
        for index, value in curves_of_run[f"during/{name}"]:
            if index < len(points):
                points[index][name] = value
    return names, sorted(points, key=lambda p: p["step"])


def examples(conn: sqlite3.Connection, run_dir: str, phase: str) -> list[dict[str, Any]]:
    return [
        dict(r)
        for r in conn.execute("SELECT * FROM examples WHERE run_dir = ? AND phase = ? ORDER BY which", (run_dir, phase))
    ]


def manifest(conn: sqlite3.Connection, run_dir: str) -> dict[str, Any]:
    row = conn.execute("SELECT manifest FROM runs WHERE run_dir = ?", (run_dir,)).fetchone()
    return json.loads(row["manifest"]) if row else {}


def is_headline(name: str) -> bool:
    """pass@k, best@k, solved@c, or a behaviour score (its training scorer's or its held-out evaluator's)."""
    return bool(HEADLINE.match(name)) or name.startswith((BEHAVIOUR, HELD_OUT))


def _order(name: str) -> tuple:
    """pass@k, best@k, solved@c by k, then the rest by name, a behaviour's heldout/ right after its behaviour/."""
    match = HEADLINE.match(name)
    if match:
        return (0, ("pass", "best", "solved").index(match[1]), int(match[2]), name, 0)
    if name.startswith(HELD_OUT):
        return (1, 0, 0, BEHAVIOUR + name.removeprefix(HELD_OUT), 1)
    return (1, 0, 0, name, 0)


def metric_label(name: str, names: Iterable[str]) -> str:
    """A column's heading: ``behaviour/<b>`` says it is the training reward's scorer (and, where no row has
    ``heldout/<b>``, that the behaviour has no held-out evaluator), ``heldout/<b>`` that it is the held-out
    evaluator; any other name as it is. ``names``: every metric the report shows."""
    if name.startswith(BEHAVIOUR):
        held_out = HELD_OUT + name.removeprefix(BEHAVIOUR)
        if held_out in set(names):
            return f"{name} (training scorer)"
        return f"{name} (training scorer; no held-out evaluator)"
    if name.startswith(HELD_OUT):
        return f"{name} (held-out evaluator)"
    return name
