"""Step 4 of a run: its folder. A new one, locked (or the killed run's, which ``resume`` locked and cut back), its
manifest, its loggers; and what checkpoints and keeps models in it."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.plugins import Plugins
from harness.runner.config import RunConfig
from harness.runner.manifest import carry_over, new_manifest
from harness.runner.plan import Plan
from harness.store.checkpoint import Checkpointer
from harness.store.lock import lock_run_folder
from harness.store.loggers import open_loggers
from harness.store.run_folder import RunStore
from harness.store.step_models import StepModels
from harness.types import SearcherCapabilities, capabilities_of

__all__ = ["checkpointer_for", "open_run_folder", "shared_phases", "step_models_for"]


def open_run_folder(
    plan: Plan,
    plugins: Plugins,
    policy: Any,
    dp: Any,
    resuming: dict | None,
    store: RunStore | None,
    started: float,
    echo,
) -> tuple[RunStore, dict]:
    """Step 4: a new folder, locked (or the killed run's, cut back to its last consistent moment), its manifest,
    loggers."""
    cfg = plan.cfg
    label = f"{cfg.task}-{cfg.trainer}-{cfg.searcher}".replace(":", "_").replace("/", "_")
    if store is None:
        store = RunStore(cfg.out, cfg.name) if cfg.name else RunStore.create(cfg.out, label)
        store.lock = lock_run_folder(store.dir)
        store.checkpointer = checkpointer_for(cfg, store.dir)
        store.step_models = step_models_for(cfg, store.dir)
    manifest = new_manifest(plan, plugins, policy.describe(), dp.world_size, started)
    if resuming:
        carry_over(manifest, resuming, store)
        echo(f"resuming {store.dir}: done {', '.join(manifest['phases_done']) or 'nothing'}")
    store.write_manifest(manifest)
    # The other ranks of a data-parallel run wait here for the folder's name and the phases they take part in.
    dp.broadcast({"name": store.dir.name, "phases": shared_phases(plan, manifest["phases_done"])})
    store.attach_loggers(
        open_loggers(plan.loggers, plugins["logger"], store.dir, {"config": asdict(cfg), "options": plan.options})
    )
    store.completions_every = cfg.log_completions_every
    echo(f"run folder: {store.dir}")
    return store, manifest


def checkpointer_for(cfg: RunConfig, run_dir: Path) -> Checkpointer | None:
    """A training run checkpoints (every ``--checkpoint-every`` steps or minutes, and after the last step; 0: never)."""
    return Checkpointer(run_dir, cfg.checkpoint_every) if cfg.trainer != "none" and cfg.checkpoint_every else None


def step_models_for(cfg: RunConfig, run_dir: Path) -> StepModels | None:
    """A training run with ``--save-every N`` keeps a loadable model every N steps (harness/store/step_models.py)."""
    return StepModels(run_dir, cfg.save_every) if cfg.trainer != "none" and cfg.save_every else None


def shared_phases(plan: Plan, done: list[str]) -> list[str]:
    """The phases left to run that every rank of a data-parallel run takes part in, in order: training, and the
    evaluations when the searcher splits its problems over the ranks (else rank 0 evaluates alone)."""
    order = ["eval"] if plan.trainer is None else ["before", "train", "after"]
    splits = capabilities_of(plan.searcher, SearcherCapabilities).data_parallel
    return [p for p in order if p not in done and (p == "train" or splits)]
