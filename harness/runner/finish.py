"""The end of step 5 of a run, once its phases are done: the manifest says complete, the checkpoint goes, the run
joins the results index, the health checks' warnings, the summary. Nothing here can fail a complete run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.report import health
from harness.report.summary import (
    example_samples,
    paired_change,
    paired_difference,
    successes_by_problem,
    summary_table,
)
from harness.runner.plan import Plan
from harness.store.checkpoint import Checkpointer
from harness.store.policy_export import MODEL_DIR, push_to_hub, write_model_card
from harness.store.results_db import RESULTS_DB, index_run, is_indexed
from harness.store.run_folder import RunStore
from harness.types import data_card_line

__all__ = ["finish", "health_warnings", "index_if_missing", "index_into", "run_heading", "trained_behaviours"]


def finish(plan: Plan, store: RunStore, manifest: dict, started: float, echo) -> None:
    """The end of step 5: the manifest says complete (every file whole by then: ``execute`` checked), with the
    run's warnings; the checkpoint goes, the run joins the results index; the health checks
    (harness/report/health.py) add their warnings to the manifest; a summary, the warnings last. A kill between
    "complete" and the index is mended by --resume. Nothing after "complete" can fail the run: each later step that
    raises is one warning line."""
    write_model_card(store.dir, manifest, store.metrics)
    # a trainer's one-line warnings (store.warn: "training stopped at step 3: ..."); every RunStore has them
    manifest.update(
        status="complete",
        seconds=round(time.time() - started, 1),
        warnings=[str(w) for w in store.warnings],
    )
    store.write_manifest(manifest)
    db = Path(plan.cfg.out) / RESULTS_DB
    if store.checkpointer:  # only a killed run needs it, and for the default model it is ~1.6 GB
        _or_warn(echo, "remove the checkpoint", store.checkpointer.remove)
    indexed = index_into(db, store.dir, echo)
    if plan.cfg.push_to_hub:
        try:  # the run is complete whatever the hub says; the folder can be pushed again by hand
            echo(f"pushed {store.dir / MODEL_DIR} to {push_to_hub(store.dir, plan.cfg.push_to_hub)}")
        except Exception as exc:
            echo(f"warning: could not push to the hub repo {plan.cfg.push_to_hub!r}: {_one_line(exc)}")
    found = _or_warn(
        echo,
        "check the run's figures",
        health_warnings,
        store.metrics,
        db if indexed else None,
        store.dir,
        trained_behaviours(manifest),
    )
    if found:
        manifest["warnings"] += found
        store.write_manifest(manifest)  # still complete, now with the checks' lines
        if indexed:
            index_into(db, store.dir, echo)  # the index keeps the manifest too
    try:
        echo(run_heading(manifest))
        echo(summary_table(store.metrics))
        echo(_paired_change(db, store.dir))
        echo(example_samples(store.dir / "samples.jsonl", "after" if plan.trainer else "eval"))
    except Exception as exc:
        echo(f"warning: could not print the summary: {_one_line(exc)}")
    for line in manifest["warnings"]:  # last, where a user reading the end of the output sees them
        echo(f"warning: {line}")
    echo(f"wrote {store.dir} in {manifest['seconds']} s")


def run_heading(manifest: dict[str, Any]) -> str:
    """The summary's first line: what was evaluated on what data ("task math, model tiny-random; data: NAME;
    SPLIT; SIZE rows; 8 problems evaluated")."""
    task = manifest.get("task") or {}
    data = data_card_line(task.get("data_card")) or "unknown"
    model = (manifest.get("model") or {}).get("spec") or (manifest.get("config") or {}).get("model")
    return f"\ntask {task.get('name')}, model {model}; data: {data}; {task.get('eval_problems')} problems evaluated"


def health_warnings(
    metrics: dict[str, Any], db: Path | None, run_dir: Path, trained: tuple[str, ...] = ()
) -> list[str]:
    """The health checks' warnings for a finished run: its training reward curve, its paired after - before from
    the index ``db`` (scores, and the behaviours in ``trained`` in the direction trained) and the exact test of
    problems lost (both skipped without an index: None, missing, or unreadable)."""
    found = [health.reward_went_down(metrics.get("train/reward_mean") or [])]
    try:
        indexed = db is not None and db.is_file()
        diff = paired_difference(db, run_dir) if indexed else None
        solved = {p: successes_by_problem(db, run_dir, p) for p in ("before", "after")} if indexed else {}
    except Exception:  # the index failed above (a warning said so); the paired checks are all it costs
        diff, solved = None, {}
    for name, change in diff.metrics.items() if diff else ():
        found.append(
            health.scored_lower(name, metrics.get(f"before/{name}"), metrics.get(f"after/{name}"), change, trained)
        )
    if solved.get("before") and solved.get("after"):
        found.append(health.lost_solved(solved["before"], solved["after"]))
    return [line for line in found if line]


def trained_behaviours(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The behaviour the run's trainer was given (``trainer.behaviour``), as a tuple: () when none."""
    options = (manifest.get("resolved_options") or {}).get("trainer") or {}
    name = options.get("behaviour") if isinstance(options, dict) else None
    return (name,) if isinstance(name, str) and name else ()


def index_into(db: Path, run_dir: Path, echo=print) -> bool:
    """Add the finished run to the results store beside it. The run folder is the record; the index is rebuilt from
    folders if lost, so failing to write it (a locked or read-only disk) is a warning, not a lost run. Returns
    whether it was indexed."""
    try:
        index_run(db, run_dir)
        return True
    except Exception as exc:
        echo(f"warning: could not index {run_dir.name} into {db}: {exc} (rebuild with `harness index {db.parent}`)")
        return False


def index_if_missing(run_dir: Path, echo) -> Path:
    """A run complete on disk (killed after saying so, before it was indexed) gets what ``finish`` left undone:
    its checkpoint removed, its row in the index. One already indexed has nothing left to resume."""
    db = run_dir.parent / RESULTS_DB
    if is_indexed(db, run_dir):
        raise ValueError(f"{run_dir} is already complete; nothing to resume")
    Checkpointer(run_dir).remove()
    index_run(db, run_dir)
    echo(f"{run_dir} was complete but missing from {db}: indexed it")
    return run_dir


def _paired_change(db: Path, run_dir: Path) -> str:
    """The summary's paired after - before; the index may be missing (a warning above), which costs only this."""
    try:
        return paired_change(db, run_dir)
    except Exception as exc:
        return f"(no paired after - before: {exc})"


def _or_warn(echo, what: str, step, *args: Any) -> Any:
    """``step(*args)``, or None and the line "warning: could not WHAT: ..." when it raises: after a run says it is
    complete, nothing may turn it into a traceback and exit status 1."""
    try:
        return step(*args)
    except Exception as exc:
        echo(f"warning: could not {what}: {_one_line(exc)}")
        return None


def _one_line(exc: BaseException) -> str:
    """ "ExcType: the message's first line" (or the type alone when it has no message)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
