"""One run: task -> model -> evaluate (searcher) -> train (trainer) -> evaluate again -> run folder.

``run()`` is four steps, each in harness/runner/: plan (every plugin built and checked, no model yet: a typo costs
a second, not a model load), load the model and its engine, open the run folder, execute the phases. Every sample
and metric is written as soon as it exists, so a run that dies keeps what it did, and ``--resume`` continues it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from harness.plugins import Plugins, get_plugin_manager
from harness.policy_export import MODEL_DIR, push_to_hub, write_model_card
from harness.report.summary import example_samples, paired_change, summary_table
from harness.runner.config import RunConfig
from harness.runner.distributed import current as current_parallel
from harness.runner.manifest import carry_over, new_manifest
from harness.runner.phases import execute
from harness.runner.plan import Plan, plan_run
from harness.store.checkpoint import Checkpointer
from harness.store.loggers import open_loggers
from harness.store.results_db import RESULTS_DB, index_run
from harness.store.run_folder import FollowerStore, RunStore

__all__ = ["RunConfig", "resume", "run"]


def run(cfg: RunConfig, plugins: Plugins | None = None, echo=print, resuming: dict | None = None) -> Path:
    """Execute one run and return its folder (``resuming``: the manifest of the killed run to continue)."""
    started = time.time()
    plugins = plugins or get_plugin_manager(local=cfg.plugins)
    dp = current_parallel()  # one process, or one rank of `torchrun` / `accelerate launch`
    echo = echo if dp.is_main else _quiet  # rank 0 speaks for the run
    plan = plan_run(cfg, plugins, dp.world_size, resuming=resuming is not None)
    policy, engine = load_model(plan, plugins, dp, echo)
    if not dp.is_main:
        return follow(plan, dp, policy, engine)
    store, manifest = open_run_folder(plan, plugins, policy, dp, resuming, started, echo)
    try:
        execute(plan, plugins, policy, engine, store, manifest, echo)
    finally:
        store.close()  # flush the loggers (TensorBoard, MLflow, W&B) even when the run dies
        dp.close()
    finish(plan, store, manifest, started, echo)
    return store.dir


def resume(run_dir: Path | str, plugins: Plugins | None = None, echo=print, threads: int | None = None) -> Path:
    """Continue a run that was killed or failed: its own configuration, its finished phases skipped, training from
    its last checkpoint, everything written after that point cut away first (so nothing is lost or duplicated)."""
    run_dir = Path(run_dir)
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot resume {run_dir}: no readable manifest.json ({exc})") from None
    if manifest.get("status") == "complete":
        raise ValueError(f"{run_dir} is already complete; nothing to resume")
    known = {f.name for f in fields(RunConfig)}
    cfg = RunConfig(**{k: v for k, v in manifest["config"].items() if k in known})
    cfg = replace(cfg, out=str(run_dir.parent), name=run_dir.name, threads=threads or cfg.threads)
    return run(cfg, plugins=plugins, echo=echo, resuming=manifest)


def load_model(plan: Plan, plugins: Plugins, dp: Any, echo) -> tuple[Any, Any]:
    """Step 2: the policy on this rank's device, and the engine that samples from it."""
    from harness.models import load_policy

    cfg = plan.cfg
    if cfg.threads:
        import torch

        torch.set_num_threads(cfg.threads)
    echo(f"loading model {cfg.model} ...")
    policy = load_policy(cfg.model, plugins["model"], dtype=cfg.dtype, revision=cfg.model_revision or None)
    policy.model.to(dp.device)  # this rank's GPU, or the CPU
    make_engine = plugins["engine"].get(cfg.engine).load()  # the hook's contract: (policy, main_process, **options)
    return policy, make_engine(policy, main_process=dp.is_main, **plan.options["engine"])


def open_run_folder(plan: Plan, plugins: Plugins, policy: Any, dp: Any, resuming: dict | None, started: float,
                    echo) -> tuple[RunStore, dict]:
    """Step 3: a new folder (or the killed run's, cut back to its last consistent moment), its manifest, loggers."""
    cfg = plan.cfg
    label = f"{cfg.task}-{cfg.trainer}-{cfg.searcher}".replace(":", "_").replace("/", "_")
    if resuming:
        store = RunStore(cfg.out, str(cfg.name), existing=True)
    else:
        store = RunStore(cfg.out, cfg.name) if cfg.name else RunStore.create(cfg.out, label)
    store.checkpointer = Checkpointer(store.dir, cfg.checkpoint_every) if plan.trainer and cfg.checkpoint_every \
        else None
    manifest = new_manifest(plan, plugins, policy.describe(), dp.world_size, started)
    if resuming:
        carry_over(manifest, resuming, store)
        echo(f"resuming {store.dir}: done {', '.join(manifest['phases_done']) or 'nothing'}")
    store.write_manifest(manifest)
    # The other ranks of a data-parallel run wait here for the folder's name and whether training is left to do.
    dp.broadcast({"name": store.dir.name, "train": plan.trainer is not None and "train" not in manifest["phases_done"]})
    store.attach_loggers(open_loggers(plan.loggers, plugins["logger"], store.dir,
                                      {"config": asdict(cfg), "options": plan.options}))
    echo(f"run folder: {store.dir}")
    return store, manifest


def finish(plan: Plan, store: RunStore, manifest: dict, started: float, echo) -> None:
    """Step 5: the manifest says complete, the checkpoint goes, the run joins the results index; a summary."""
    manifest.update(status="complete", seconds=round(time.time() - started, 1))
    store.write_manifest(manifest)
    if store.checkpointer:  # only a killed run needs it, and for the default model it is ~1.6 GB
        store.checkpointer.remove()
    index_into(Path(plan.cfg.out) / RESULTS_DB, store.dir, echo)
    write_model_card(store.dir, manifest, store.metrics)
    if plan.cfg.push_to_hub:
        try:  # the run is complete whatever the hub says; the folder can be pushed again by hand
            echo(f"pushed {store.dir / MODEL_DIR} to {push_to_hub(store.dir, plan.cfg.push_to_hub)}")
        except Exception as exc:
            echo(f"warning: could not push to the hub repo {plan.cfg.push_to_hub!r}: {type(exc).__name__}: "
                 f"{(str(exc).strip().splitlines() or [''])[0]}")
    echo(summary_table(store.metrics))
    echo(_paired_change(Path(plan.cfg.out) / RESULTS_DB, store.dir))
    echo(example_samples(store.dir / "samples.jsonl", "after" if plan.trainer else "eval"))
    echo(f"wrote {store.dir} in {manifest['seconds']} s")


def follow(plan: Plan, dp: Any, policy: Any, engine: Any) -> Path:
    """A rank other than 0 of a data-parallel run: train its share of each step in rank 0's run folder; evaluation
    and every write are rank 0's."""
    cfg = plan.cfg
    told = dp.broadcast(None)
    run_dir = Path(cfg.out) / told["name"]
    try:
        if told["train"]:
            checkpointer = Checkpointer(run_dir, cfg.checkpoint_every) if cfg.checkpoint_every else None
            plan.trainer.train(policy, engine, plan.task, plan.train_problems,
                               store=FollowerStore(run_dir, checkpointer))
    finally:
        dp.close()
    return run_dir


def index_into(db: Path, run_dir: Path, echo=print) -> None:
    """Add the finished run to the results store beside it. The run folder is the record; the index is rebuilt from
    folders if lost, so failing to write it (a locked or read-only disk) is a warning, not a lost run."""
    try:
        index_run(db, run_dir)
    except Exception as exc:
        echo(f"warning: could not index {run_dir.name} into {db}: {exc} (rebuild with `harness index {db.parent}`)")


def _paired_change(db: Path, run_dir: Path) -> str:
    """The summary's paired after - before; the index may be missing (a warning above), which costs only this."""
    try:
        return paired_change(db, run_dir)
    except Exception as exc:
        return f"(no paired after - before: {exc})"


def _quiet(*_: Any, **__: Any) -> None:
    pass
