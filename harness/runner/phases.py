"""Step 5 of a run: its phases. ``eval`` alone (--trainer none), or ``before`` -> ``train`` -> ``after``.

Each finished phase is recorded in the manifest with a snapshot of the folder, so a resumed run skips it and cuts
back to its end. A plugin that raises is named: the error becomes ``PluginFailed`` (harness/failures.py: "searcher
'x' (plugin 'y') failed ..."), the manifest says ``failed`` with that line, and the traceback goes to ``error.txt``
in the folder; everything written before stays. The step ends in harness/runner/finish.py once every phase is done.

Every moment is interruptible (docs/design/reliability.md): ^C or SIGTERM in any phase ends the run ``interrupted``,
and a resume redoes the unfinished phase from its start (its partial samples cut back to the last phase's snapshot)
or, in training, from the last checkpoint. A phase's end is one step a signal cannot split: its name, its snapshot
and the manifest that records them are written together (``deferred_interrupts``). A fault point at each phase's
start (``<phase>_start``) and once every phase is done (``phases_done``) lets the tests hold or kill a run there.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from typing import Any

from harness import interrupts
from harness.failures import PluginFailed, blame
from harness.faults import fault_point
from harness.report.data import answers_per_rollout, phase_intervals
from harness.runner.during_training import DuringTraining
from harness.runner.plan import Plan
from harness.store.policy_export import save_policy
from harness.store.reading import read_json, read_jsonl
from harness.store.run_folder import RunStore
from harness.types import EngineCapabilities, TrainerCapabilities, capabilities_of, data_card_line

ERROR_FILE = "error.txt"
# PluginFailed and blame live in harness/failures.py (scoring lets PluginFailed through); still importable from here
__all__ = ["ERROR_FILE", "PluginFailed", "blame", "execute", "record_failure", "record_unfinished", "restore_trained"]


def execute(
    plan: Plan, plugins: Any, policy: Any, engine: Any, store: RunStore, manifest: dict, echo: Callable[..., None]
) -> None:
    """Run the phases not yet done; on failure record it in the manifest and error.txt, then re-raise."""
    from harness.runner import threads  # (torch: imported with the model, never by a run refused before it)

    cfg = plan.cfg
    done, seconds = manifest["phases_done"], manifest["phase_seconds"]

    def phase(name: str, work: Callable[[], None]) -> None:
        if name in done:
            return
        fault_point(f"{name}_start")  # where a test holds or kills a run at a phase's start (harness/faults.py)
        t0 = time.time()
        threads.run_phase(name)  # threads decided again for it, from the load now (harness/runner/threads.py)
        work()
        snapshot = store.snapshot()
        with interrupts.deferred_interrupts():  # done, its snapshot and the manifest: all three or none
            changed = threads.take_changes()  # and the thread counts it changed to as the load changed
            if changed:
                manifest["thread_changes"] = [*manifest.get("thread_changes", []), *changed]
            seconds[name] = round(seconds.get(name, 0.0) + time.time() - t0, 1)
            done.append(name)
            manifest["phase_snapshots"][name] = snapshot
            store.write_manifest(manifest)

    def evaluate(name: str) -> None:
        data = data_card_line((manifest.get("task") or {}).get("data_card"))
        echo(
            f"evaluating ({name}): {cfg.searcher} on {len(plan.eval_problems)} problems"
            + (f" of {data}" if data else "")
        )
        with blame("searcher", cfg.searcher, plugins["searcher"].get(cfg.searcher).plugin, f"evaluating ({name})"):
            metrics = plan.searcher.search(engine, plan.task, plan.eval_problems, phase=name, store=store)
        store.update_metrics({f"{name}/{key}": value for key, value in metrics.items()})
        store.record_intervals(intervals(store, name, len(plan.eval_problems), manifest))

    def train() -> None:
        # --eval-every: the searcher on a few eval problems before the first step and after every N-th
        store.after_train_step = DuringTraining(plan, plugins, policy, engine, store, echo) if cfg.eval_every else None
        # --rollout-dtype auto: the training rollouts may sample in bf16, evaluations never (runner/precision.py)
        try:
            with (
                train_precision(plan, engine),
                blame("trainer", cfg.trainer, plugins["trainer"].get(cfg.trainer).plugin, "training"),
            ):
                if store.after_train_step:
                    store.after_train_step(0)  # (skipped by a resume whose checkpoint has it)
                plan.trainer.train(policy, engine, plan.task, plan.train_problems, store=store)
        finally:
            store.after_train_step = None
        if cfg.save_model:  # before the final evaluation: a run that dies there still has its trained policy
            merged = capabilities_of(plan.trainer, TrainerCapabilities).save_merged
            for folder in save_policy(policy, store.dir, merged=merged):
                echo(f"saved the trained policy to {folder}")
        if capabilities_of(engine, EngineCapabilities).own_weights:  # the final evaluation samples trained weights
            engine.sync_weights(policy.model)

    interrupts.where(store.dir)  # for the watchdog's line, should the process not stop in time (harness/interrupts.py)
    try:
        with interrupts.last_words(lambda: record_failure(store, manifest, interrupts.Interrupted("signal"))):
            if plan.trainer is None:
                phase("eval", lambda: evaluate("eval"))
            else:
                phase("before", lambda: evaluate("before"))
                if "train" not in done:
                    echo(f"training: {cfg.trainer} on {len(plan.train_problems)} problems")
                else:
                    restore_trained(plan, policy, engine, store.checkpointer)
                phase("train", train)
                phase("after", lambda: evaluate("after"))
            store.check_complete()  # every line whole before anything may say "complete"
            fault_point("phases_done")  # every phase done, the run not yet complete (harness/runner/finish.py)
    except BaseException as exc:
        record_failure(store, manifest, exc)
        if isinstance(exc, PluginFailed):
            raise PluginFailed(f"{exc} (traceback in {store.dir / ERROR_FILE})") from exc.__cause__
        raise


def restore_trained(plan: Plan, policy: Any, engine: Any, checkpointer: Any) -> None:
    """A resumed run whose training is done: the trained weights from the last checkpoint (taken after the last
    step), into the policy and into an engine that holds its own copy, for the final evaluation."""
    if capabilities_of(plan.trainer, TrainerCapabilities).prepares_policy:  # a LoRA checkpoint's weights need
        plan.trainer.prepare_policy(policy)  # their adapters first
    checkpointer.restore_model(policy.model)
    if capabilities_of(engine, EngineCapabilities).own_weights:
        engine.sync_weights(policy.model)


def intervals(store: RunStore, phase: str, problems: int, manifest: dict) -> dict[str, list[float]]:
    """The phase's 95% intervals over problems, from its samples as the report computes them
    (harness/report/data.py ``phase_intervals``); none where the searcher wrote no samples."""
    samples_file = store.dir / "samples.jsonl"
    if not samples_file.exists():
        return {}
    try:  # intervals are an addition: records the report could not read either cost only them
        samples = [r for r in read_jsonl(samples_file) if r.get("phase") == phase]
        return phase_intervals(store.metrics, samples, phase, problems, answers_per_rollout(manifest))
    except (ValueError, TypeError, KeyError):
        return {}


def train_precision(plan: Plan, engine: Any) -> contextlib.AbstractContextManager:
    """The precision the training phase samples in (``plan.precision``, decided when the model loaded)."""
    return plan.precision.train_phase(engine) if plan.precision is not None else contextlib.nullcontext()


def record_unfinished(store: RunStore, manifest: dict, exc: BaseException) -> None:
    """A run ended by ``exc`` after ``execute`` (closing its loggers, harness/runner/finish.py) is recorded as
    ``record_failure`` records it, unless its manifest already says on disk how it ended: "complete" (the folder is
    whole; a resume indexes it if need be), or the failure ``execute`` recorded."""
    try:
        status = read_json(store.dir / "manifest.json").get("status")
    except Exception:
        status = "running"
    if status == "running":
        record_failure(store, manifest, exc)


def record_failure(store: RunStore, manifest: dict, exc: BaseException) -> None:
    """The manifest says how the run ended (``interrupted`` for ^C, else ``failed`` with the error's line), and
    error.txt keeps the traceback; both best-effort, so the original error is what the user sees."""
    with contextlib.suppress(Exception):
        (store.dir / ERROR_FILE).write_text("".join(traceback.format_exception(exc)))
    interrupted = isinstance(exc, KeyboardInterrupt)
    manifest.update(
        status="interrupted" if interrupted else "failed",
        error=None if interrupted else (str(exc) or type(exc).__name__),
    )
    with contextlib.suppress(Exception):
        store.write_manifest(manifest)
