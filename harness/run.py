"""One run: task -> model -> evaluate (searcher) -> train (trainer) -> evaluate again -> run folder.

``run()`` is four steps, each in harness/runner/: plan (every plugin built and checked, no model yet: a typo costs
a second, not a model load), load the model and its engine, open the run folder, execute the phases. Every sample
and metric is written as soon as it exists, so a run that dies keeps what it did, and ``--resume`` continues it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from harness import progress
from harness.failures import mark_run_folder
from harness.plugins import Plugins, get_plugin_manager
from harness.policy_export import MODEL_DIR, push_to_hub, write_model_card
from harness.report import health
from harness.report.summary import (
    example_samples,
    paired_change,
    paired_difference,
    successes_by_problem,
    summary_table,
)
from harness.reward_functions import reward_context
from harness.runner.config import RunConfig
from harness.runner.distributed import current as current_parallel
from harness.runner.expected_time import expected_time
from harness.runner.manifest import carry_over, check_resume_point, new_manifest
from harness.runner.phases import execute, train_precision
from harness.runner.plan import Plan, plan_run, training_budget, translated_lines
from harness.store.checkpoint import Checkpointer
from harness.store.lock import lock_run_folder
from harness.store.loggers import open_loggers
from harness.store.reading import read_json
from harness.store.results_db import RESULTS_DB, index_run, is_indexed
from harness.store.run_folder import FollowerStore, RunStore
from harness.store.step_models import StepModels
from harness.types import data_card_line

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
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"cannot resume {run_dir}: no such folder")
    main = current_parallel().is_main  # rank 0 writes, and so locks and checks; the others follow it
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


def checkpointer_for(cfg: RunConfig, run_dir: Path) -> Checkpointer | None:
    """A training run checkpoints (every ``--checkpoint-every`` steps or minutes, and after the last step; 0: never)."""
    return Checkpointer(run_dir, cfg.checkpoint_every) if cfg.trainer != "none" and cfg.checkpoint_every else None


def step_models_for(cfg: RunConfig, run_dir: Path) -> StepModels | None:
    """A training run with ``--save-every N`` keeps a loadable model every N steps (harness/store/step_models.py)."""
    return StepModels(run_dir, cfg.save_every) if cfg.trainer != "none" and cfg.save_every else None


def load_model(plan: Plan, plugins: Plugins, dp: Any, echo, resuming: dict | None = None) -> tuple[Any, Any]:
    """Step 2: the policy on this rank's device, and the engine that samples from it; then the threads of each phase
    (a resumed run's recorded ones) and the precision each phase samples in, which the manifest records
    (``plan.threads``, ``plan.precision``)."""
    from harness import threads
    from harness.models import load_policy
    from harness.runner.precision import resolve

    cfg = plan.cfg
    if cfg.threads:  # --threads N: every phase at N, set before anything runs
        threads.configure(cfg.threads)
    if (expected := expected_time(cfg)) and not resuming:
        echo(expected)
    if (budget := training_budget(plan)) and not resuming:
        echo(budget)
    for line in translated_lines(plan) if not resuming else ():  # TRL's names given: which, and as what
        echo(line)
    for line in plan.notes if not resuming else ():  # train and eval problems that overlap
        echo(line)
    echo(f"loading model {cfg.model} ...")
    if progress.quiet() or not progress.on_terminal():  # a log file gets no third-party bar at all
        progress.quiet_libraries()
    policy = load_policy(cfg.model, plugins["model"], dtype=cfg.dtype, revision=cfg.model_revision or None)
    progress.quiet_libraries()  # none mid-run either (the diversity metrics' embedding model loads later)
    policy.model.to(dp.device)  # this rank's GPU, or the CPU
    make_engine = plugins["engine"].get(cfg.engine).load()  # the hook's contract: (policy, main_process, **options)
    engine = make_engine(policy, main_process=dp.is_main, **plan.options["engine"])
    parameter = next(policy.model.parameters())
    # without --threads: per phase (decoding, update), from the cores other work leaves free (harness/threads.py)
    plan.threads = threads.configure(cfg.threads, parameter.device, (resuming or {}).get("threads")).describe()
    plan.precision = resolve(
        cfg.rollout_dtype, str(parameter.dtype).removeprefix("torch."), parameter.device.type, engine, plan.trainer
    )
    return policy, engine


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
    """Step 3: a new folder, locked (or the killed run's, cut back to its last consistent moment), its manifest,
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
    # The other ranks of a data-parallel run wait here for the folder's name and whether training is left to do.
    dp.broadcast({"name": store.dir.name, "train": plan.trainer is not None and "train" not in manifest["phases_done"]})
    store.attach_loggers(
        open_loggers(plan.loggers, plugins["logger"], store.dir, {"config": asdict(cfg), "options": plan.options})
    )
    store.completions_every = cfg.log_completions_every
    echo(f"run folder: {store.dir}")
    return store, manifest


def finish(plan: Plan, store: RunStore, manifest: dict, started: float, echo) -> None:
    """Step 5: the manifest says complete (every file whole by then: ``execute`` checked), with the run's warnings;
    the checkpoint goes, the run joins the results index; the health checks (harness/report/health.py) add their
    warnings to the manifest; a summary, the warnings last. A kill between "complete" and the index is mended by
    --resume. Nothing after "complete" can fail the run: each later step that raises is one warning line."""
    write_model_card(store.dir, manifest, store.metrics)
    # a trainer's one-line warnings (store.warn: "training stopped at step 3: ..."); getattr: not every store has them
    manifest.update(
        status="complete",
        seconds=round(time.time() - started, 1),
        warnings=[str(w) for w in getattr(store, "warnings", [])],
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


def follow(plan: Plan, dp: Any, policy: Any, engine: Any) -> Path:
    """A rank other than 0 of a data-parallel run: train its share of each step in rank 0's run folder; evaluation
    and every write are rank 0's."""
    cfg = plan.cfg
    told = dp.broadcast(None)
    run_dir = Path(cfg.out) / told["name"]
    finished = False
    try:
        if told["train"]:
            checkpointer = Checkpointer(run_dir, cfg.checkpoint_every) if cfg.checkpoint_every else None
            with train_precision(plan, engine):  # the precision rank 0's training samples in
                plan.trainer.train(
                    policy, engine, plan.task, plan.train_problems, store=FollowerStore(run_dir, checkpointer)
                )
        finished = True
    finally:
        dp.close(finished)  # after rank 0's evaluation: it waits there for rank 0
    return run_dir


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


def _forget_threads() -> None:
    import sys

    if "harness.threads" in sys.modules:  # (imported with the model: a run refused before that configured nothing)
        sys.modules["harness.threads"].reset()


def _quiet(*_: Any, **__: Any) -> None:
    pass
