"""The Python API: ``harness.train(...)`` and ``harness.evaluate(...)`` from a script or a notebook, with a
``datasets.Dataset`` and Python reward functions, as a TRL user writes ``GRPOTrainer(model, reward_funcs,
train_dataset=...)``. Each is one ``harness.run.run(RunConfig)``: the same run folder, manifest, resume and report as
``harness run``.

Objects that cannot go into a manifest (reward callables, an in-memory dataset, a loaded model) are registered in
this process (harness/in_process.py) under names the configuration records (``@accuracy``, ``@data-<fingerprint>``;
the manifest records each function's module and qualified name, the dataset's fingerprint and size). A run given
them resumes only when the same objects are passed again: ``harness.train(..., resume=RUN_DIR)``.

Keyword options the function does not name itself go to the trainer (``train``) or the searcher (``evaluate``)
under the harness's names (``lr``, ``group_size``, ``max_new_tokens``: ``harness options trainer grpo``), through
the same option path as ``--set trainer.KEY=VALUE`` (harness/plugins/options.py, which also reads TRL's names).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import in_process

__all__ = ["RunResult", "evaluate", "train"]


@dataclass(frozen=True)
class RunResult:
    """A finished run: its folder, its metrics (``metrics.json``: ``<phase>/<key>``, a list per step for training
    keys) and its manifest."""

    run_dir: Path
    metrics: dict[str, Any]
    manifest: dict[str, Any]

    @property
    def status(self) -> str:
        return str(self.manifest.get("status", "unknown"))

    def report(self, out: str | Path | None = None, echo: Callable[..., Any] | None = None) -> Path:
        """``harness report`` on the folder holding this run (and the runs beside it); returns the report folder."""
        from harness.report.build import build_report

        return build_report([self.run_dir.parent], out or self.run_dir.parent / "report", echo=echo or _quiet)


def train(
    model: Any,
    dataset: Any = None,
    reward_funcs: Any = None,
    *,
    trainer: str = "grpo",
    task: str | None = None,
    eval_dataset: Any = None,
    reward_weights: Sequence[float] | None = None,
    success: str | Callable[..., Any] | None = None,
    prompt_column: str | None = None,
    tokenizer: Any = None,
    steps: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    train_limit: int | None = None,
    k: str | int | None = None,
    preset: str = "quick",
    searcher: str = "best-of-k",
    out: str | Path = "runs",
    threads: int | None = None,
    save_model: bool = True,
    task_options: dict[str, Any] | None = None,
    searcher_options: dict[str, Any] | None = None,
    run_options: dict[str, Any] | None = None,
    resume: str | Path | None = None,
    verbose: bool = True,
    **trainer_options: Any,
) -> RunResult:
    """Evaluate, train, evaluate again: ``harness run`` from Python. ``model``: a name (``harness models``), a hub id
    or a folder, or a loaded transformers model with its ``tokenizer`` (saved to a folder under ``out`` first).
    ``dataset``: a ``datasets.Dataset`` / ``DatasetDict`` (or a list of row dicts), a data file, a hub id; with
    ``reward_funcs`` (callables, per answer ``fn(prompt, completion, reference)`` or TRL's ``fn(prompts,
    completions, **columns)``; or ``"module:fn"`` strings) it is the ``prompts`` task (tasks/prompts.py), whose
    ``success`` rule (``"reward>=1"``, ``"NAME>=X"``, a function's name, or a boolean callable) pass@k counts.
    ``task``: a registered task instead (``"math"``), the functions added to its components. ``reward_weights``:
    one weight per function (TRL's), default 1. ``run_options``: any other ``RunConfig`` field (``engine``,
    ``dtype``, ``checkpoint_every``, ``eval_every``, ``loggers``, ...). Other keywords are trainer options.
    ``resume``: a killed run's folder, continued with its own configuration (the other arguments only supply the
    same Python objects again)."""
    return _go(locals() | {"evaluate_only": False}, trainer_options, "trainer", verbose, resume, threads, out, trainer)


def evaluate(
    model: Any,
    dataset: Any = None,
    reward_funcs: Any = None,
    *,
    task: str | None = None,
    eval_dataset: Any = None,
    reward_weights: Sequence[float] | None = None,
    success: str | Callable[..., Any] | None = None,
    prompt_column: str | None = None,
    tokenizer: Any = None,
    seed: int = 0,
    limit: int | None = None,
    k: str | int | None = None,
    preset: str = "quick",
    searcher: str = "best-of-k",
    out: str | Path = "runs",
    threads: int | None = None,
    task_options: dict[str, Any] | None = None,
    run_options: dict[str, Any] | None = None,
    resume: str | Path | None = None,
    verbose: bool = True,
    **searcher_options: Any,
) -> RunResult:
    """Evaluate only (``--trainer none``): the searcher on the eval prompts. Arguments as ``train``'s; other keywords
    are searcher options (``n``, ``max_new_tokens``, ``temperature``: ``harness options searcher best-of-k``)."""
    given = locals() | {"evaluate_only": True, "steps": None, "train_limit": None, "save_model": False}
    return _go(given, searcher_options, "searcher", verbose, resume, threads, out, "none")


# ----------------------------------------------------------------------------------------------------------------


def _go(given: dict[str, Any], extra: dict[str, Any], kind: str, verbose, resume, threads, out, trainer) -> RunResult:
    from harness.run import resume as resume_run
    from harness.run import run
    from harness.runner.config import RunConfig

    echo = print if verbose else _quiet
    task, task_opts, rewards = _task(given)
    if resume is not None:  # the run's own configuration; the objects above are registered again for it
        run_dir = resume_run(Path(resume), echo=echo, threads=threads)
        return _result(run_dir)
    options: dict[str, dict[str, Any]] = {
        "task": task_opts,
        "trainer": dict(extra) if kind == "trainer" else {},
        "searcher": {**(given.get("searcher_options") or {}), **(extra if kind == "searcher" else {})},
    }
    cfg = RunConfig(
        task=task,
        trainer=trainer,
        searcher=given["searcher"],
        model=_model(given["model"], given["tokenizer"], Path(out)),
        preset=given["preset"],
        steps=given["steps"],
        limit=given["limit"],
        train_limit=given["train_limit"],
        k=None if given["k"] is None else str(given["k"]),
        seed=given["seed"],
        out=str(out),
        threads=threads,
        options=options,
        rewards=rewards,
        save_model=given["save_model"],
        **(given.get("run_options") or {}),
    )
    return _result(run(cfg, echo=echo))


def _task(given: dict[str, Any]) -> tuple[str, dict[str, Any], list[str]]:
    """(task name, its options, the reward specs): the objects registered in this process under their names."""
    options = dict(given.get("task_options") or {})
    task = given.get("task")
    dataset, eval_dataset = given.get("dataset"), given.get("eval_dataset")
    funcs = given.get("reward_funcs")
    funcs = [] if funcs is None else list(funcs) if isinstance(funcs, (list, tuple)) else [funcs]
    weights = list(given.get("reward_weights") or [1.0] * len(funcs))
    if len(weights) != len(funcs):
        raise ValueError(f"reward_weights: {len(weights)} weights for {len(funcs)} reward functions")
    success = given.get("success")
    if callable(success):  # a boolean function: a component of weight 0 the rule reads
        funcs.append(success)
        weights.append(0.0)
    rewards = [_reward_spec(fn, w, i) for i, (fn, w) in enumerate(zip(funcs, weights, strict=True))]
    if callable(success):
        success = rewards[-1].partition("=")[0].removeprefix(in_process.PREFIX)
    if task is None:
        task = "prompts"
        if dataset is None:
            raise ValueError("harness.train/evaluate: give a dataset (with reward_funcs), or task= a task's name")
    if task == "prompts":
        if dataset is not None:
            options["data"] = _data(dataset)
        if eval_dataset is not None:
            options["eval_data"] = _data(eval_dataset)
        if success is not None:
            options["success"] = success
        if given.get("prompt_column"):
            options["prompt"] = given["prompt_column"]
    elif dataset is not None or eval_dataset is not None or success is not None:
        raise ValueError(
            f"harness.train/evaluate: dataset, eval_dataset and success are the prompts task's; task {task!r} "
            "reads its own data (task_options={'hub_id': ...})"
        )
    return task, options, rewards


def _reward_spec(fn: Any, weight: float, index: int) -> str:
    """A reward as the spec the configuration records: ``module:fn`` as given, or a callable registered as
    ``@name`` (its ``__name__``; ``reward_<i>`` for a lambda or a partial)."""
    suffix = "" if float(weight) == 1.0 else f"={float(weight)!r}"
    if isinstance(fn, str):
        return fn if "=" in fn or not suffix else fn + suffix
    if not callable(fn):
        raise ValueError(f"reward_funcs[{index}]: a {type(fn).__name__}, not a function or 'module:fn'")
    name = getattr(fn, "__name__", "")
    name = name if name.isidentifier() else f"reward_{index}"
    return in_process.register_function(name, fn) + suffix


def _data(dataset: Any) -> str:
    """A file, hub id or folder as given; an in-memory dataset registered under its content fingerprint."""
    if isinstance(dataset, (str, os.PathLike)):
        return str(dataset)
    if isinstance(dataset, list):
        import datasets

        dataset = datasets.Dataset.from_list(dataset)
    return in_process.register_dataset(in_process.dataset_name(dataset), dataset)


def _model(model: Any, tokenizer: Any, out: Path) -> str:
    """A model's name as given; a loaded model is saved with its tokenizer to a folder under ``out`` first, and the
    run loads it from there as any local model (recorded by its path and weights' digest)."""
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    if tokenizer is None or not hasattr(model, "save_pretrained"):
        raise ValueError("model: a name, a hub id or a folder; or a loaded transformers model with tokenizer=")
    (out / ".models").mkdir(parents=True, exist_ok=True)  # hidden: `harness report` reads the folders beside it
    folder = Path(tempfile.mkdtemp(prefix=f"{type(model).__name__}-", dir=out / ".models"))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _result(run_dir: Path) -> RunResult:
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").exists() else {}
    return RunResult(run_dir, metrics, json.loads((run_dir / "manifest.json").read_text()))


def _quiet(*_: Any, **__: Any) -> None:
    pass
