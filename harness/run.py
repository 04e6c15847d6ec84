"""One run: task -> model -> evaluate (searcher) -> train (trainer) -> evaluate again -> run folder.

``run()`` strings together the five steps of docs/architecture.md, each in its own module: 1. the plugins
(harness/plugins/manager.py), 2. the plan (harness/runner/plan.py: every plugin built and checked, no model yet: a
typo costs a second, not a model load), 3. the model and its engine (harness/runner/load_model.py), 4. the run
folder (harness/runner/open_run_folder.py), 5. the phases (harness/runner/phases.py), ending in
harness/runner/finish.py. Every sample and metric is written as soon as it exists, so a run that dies keeps what it
did, and ``resume()`` continues it.
"""

from __future__ import annotations

import os
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from harness import progress
from harness.failures import mark_run_folder
from harness.plugins import Plugins, get_plugin_manager
from harness.runner.config import RunConfig
from harness.runner.distributed import current as current_parallel
from harness.runner.finish import finish, index_if_missing
from harness.runner.load_model import load_model
from harness.runner.manifest import check_resume_point
from harness.runner.open_run_folder import checkpointer_for, open_run_folder, step_models_for
from harness.runner.phases import execute, record_unfinished, restore_trained, train_precision
from harness.runner.plan import Plan, plan_run
from harness.scoring.reward_functions import reward_context
from harness.store.lock import lock_run_folder
from harness.store.reading import read_json
from harness.store.run_folder import (
    ROOM_IN_RUN_FOLDER,
    FollowerStore,
    RunStore,
    check_path_length,
    check_writable_folder,
)

__all__ = ["RunConfig", "resume", "run"]


def run(
    cfg: RunConfig,
    plugins: Plugins | None = None,
    echo=print,
    resuming: dict | None = None,
    store: RunStore | None = None,
) -> Path:
    """Execute one run and return its folder (``resuming``: the manifest of the killed run to continue, and
    ``store`` its folder, which ``resume`` has locked and checked)."""
    started = time.time()
    plugins = plugins or get_plugin_manager(local=cfg.plugins)
    dp = current_parallel()  # one process, or one rank of `torchrun` / `accelerate launch`
    dp.use_sharding(cfg.shard)
    echo = echo if dp.is_main else _quiet  # rank 0 speaks for the run
    say = _quiet if progress.quiet_requested() else echo  # --quiet: the summary, warnings and errors only
    plan = plan_run(cfg, plugins, dp.world_size, resuming=resuming is not None)
    try:
        policy, engine = load_model(plan, plugins, dp, say, resuming)
        if not dp.is_main:
            return follow(plan, dp, policy, engine)
        store, manifest = open_run_folder(plan, plugins, policy, dp, resuming, store, started, say)
        try:
            finished = False
            try:
                with reward_context(tokenizer=policy.tokenizer):  # a batch reward function's completion_ids
                    execute(plan, plugins, policy, engine, store, manifest, say)
                finished = True
            finally:
                store.close()  # flush the loggers (TensorBoard, MLflow, W&B) even when the run dies
                dp.close(finished)
            finish(plan, store, manifest, started, echo)
        except BaseException as exc:  # the run had a folder: a failure exits 1, ^C says how to resume (harness/cli.py)
            record_unfinished(store, manifest, exc)  # ended after its phases, before "complete" was written
            mark_run_folder(exc, store.dir)
            raise
        finally:
            store.lock.release()  # this process is done writing the folder (its end would release it too)
        return store.dir
    finally:
        _forget_threads()  # the per-phase counts were this run's; later library calls change none


def resume(run_dir: Path | str, plugins: Plugins | None = None, echo=print, threads: int | None = None) -> Path:
    """Continue a run that was killed or failed: its own configuration, its finished phases skipped, training from
    its last checkpoint, everything written after that point cut away first (so nothing is lost or duplicated).

    The folder is locked first (a second writer is refused, naming the first's pid) and checked against the point
    it resumes from before the model loads; a run complete on disk but missing from the index is indexed."""
    run_dir = check_path_length(run_dir, "cannot resume", ROOM_IN_RUN_FOLDER)  # before the path is looked at
    if not run_dir.is_dir():
        raise FileNotFoundError(f"cannot resume {run_dir}: no such folder")
    main = current_parallel().is_main  # rank 0 writes, and so locks and checks; the others follow it
    if main:  # a read-only mount: the lock, the cut back and every line after it would fail
        check_writable_folder(run_dir, "cannot resume", ROOM_IN_RUN_FOLDER)
    lock = lock_run_folder(run_dir) if main else None
    try:
        try:
            manifest = read_json(run_dir / "manifest.json")
        except ValueError as exc:
            raise ValueError(f"cannot resume {run_dir}: no readable manifest.json ({exc})") from None
        if isinstance(manifest, dict) and manifest.get("status") == "complete":
            return index_if_missing(run_dir, echo)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
            raise ValueError(f"cannot resume {run_dir}: manifest.json holds no run configuration")
        known = {f.name for f in fields(RunConfig)}
        # a run from before --rollout-dtype sampled in the weights' precision: "", not today's default "auto"
        config = {"rollout_dtype": "", **manifest["config"]}
        cfg = RunConfig(**{k: v for k, v in config.items() if k in known})
        if threads is not None and threads != cfg.threads:  # torch's thread count changes the rounding, so results
            recorded = f"--threads {cfg.threads}" if cfg.threads else "torch's default threads"
            raise ValueError(
                f"--threads {threads}: {run_dir} ran with {recorded}, and a resume keeps it (results "
                "depend on it); drop --threads"
            )
        cfg = replace(cfg, out=str(run_dir.parent), name=run_dir.name)
        store = None
        if main:
            store = RunStore(cfg.out, cfg.name, existing=True)
            store.lock, store.checkpointer = lock, checkpointer_for(cfg, store.dir)
            store.step_models = step_models_for(cfg, store.dir)
            check_resume_point(manifest, store)
        return run(cfg, plugins=plugins, echo=echo, resuming=manifest, store=store)
    finally:
        if lock is not None:
            lock.release()


def follow(plan: Plan, dp: Any, policy: Any, engine: Any) -> Path:
    """A rank other than 0 of a data-parallel run: in rank 0's run folder, train its share of each step, and take
    its share of each evaluation when the searcher splits over ranks (else rank 0 evaluates alone); every write to
    the folder is rank 0's."""
    cfg = plan.cfg
    told = dp.broadcast(None)
    run_dir = Path(cfg.out) / told["name"]
    store = FollowerStore(run_dir, checkpointer_for(cfg, run_dir))  # rank 0's checkpoint, to restore from on resume
    os.environ["TQDM_DISABLE"] = "1"  # rank 0 draws the run's bars
    finished = False
    try:
        for phase in told["phases"]:
            if phase == "train":
                with train_precision(plan, engine):  # the precision rank 0's training samples in
                    plan.trainer.train(policy, engine, plan.task, plan.train_problems, store=store)
            else:
                if phase == "after" and "train" not in told["phases"]:  # trained before a resume
                    restore_trained(plan, policy, engine, store.checkpointer)
                plan.searcher.search(engine, plan.task, plan.eval_problems, phase=phase, store=store)
        finished = True
    finally:
        dp.close(finished)  # after rank 0's evaluation: it waits there for rank 0
    return run_dir


def _forget_threads() -> None:
    import sys

    # (imported with the model: a run refused before that configured nothing)
    if "harness.runner.threads" in sys.modules:
        sys.modules["harness.runner.threads"].reset()


def _quiet(*_: Any, **__: Any) -> None:
    pass
