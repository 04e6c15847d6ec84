"""Metric loggers: every logger of a run receives the same stream of events from the run's store.

JSONL (``<run>/metrics.jsonl``) is always on; TensorBoard, Weights & Biases and MLflow when their package is
installed. They are registered through ``harness_register_loggers`` like any plugin's. This module is a built-in
plugin, imported by every ``harness list``, so it imports none of those packages (nor torch) at module level.

An event is ``log(metrics, step, stage)``; a value's name is ``f"{stage}/{key}"``, its key in metrics.json, and
``step`` is None for one-off values such as evaluations (see ``RunStore``). The numeric backends receive only the
numbers of an event (``scalars``); JSONL receives everything.

A logger that also has ``log_completions(rows, step, stage)`` receives, every ``--log-completions-every`` training
steps (``RunStore.completions_every``), a table of that step's completions: prompt, completion, extracted answer,
reward vector, scalar reward and advantage (``completion_table``); TensorBoard shows it as Markdown text, W&B as a
``wandb.Table``.

On ``--resume`` the events after the resume point are sent again (the work is redone). A logger whose stream is cut
back with the run folder says so (``rolled_back = True``: JSONL) and receives them; every other logger already has
them and is skipped for those events, so TensorBoard, MLflow and W&B never get a point twice.

A logger whose code ends the process (``sys.exit``, a ``KeyboardInterrupt`` it raised itself) while starting or
receiving an event ends the run ``failed``, named (``logger_exits``; harness/failures.py), never with exit 0; any
other error of its drops it with one warning (``RunStore``), and one while closing is a warning.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import netrc
import numbers
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from harness.failures import exits_named
from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.plugins.registry import Registry

ALWAYS = "jsonl"
PLUGIN = "harness_plugin"  # the attribute open_loggers sets on each logger: the plugin that registered it


@hookimpl
def harness_register_loggers(registry: Registry) -> None:
    registry.add(
        "jsonl", "harness.store.loggers:JsonlLogger", "one JSON line per event in <run>/metrics.jsonl (always on)"
    )
    registry.add(
        "tensorboard", "harness.store.loggers:TensorBoardLogger", "TensorBoard event files in <run>/tensorboard"
    )
    registry.add(
        "wandb",
        "harness.store.loggers:WandbLogger",
        "Weights & Biases: online when logged in (WANDB_API_KEY, ~/.netrc) or WANDB_MODE says so, else "
        "offline into <run>/wandb",
    )
    registry.add(
        "mlflow", "harness.store.loggers:MlflowLogger", "MLflow, into <run>/mlruns unless MLFLOW_TRACKING_URI is set"
    )


def check_loggers(names: list[str], registry: Registry) -> list[str]:
    """The loggers a run will open: "jsonl" first, then ``names`` without duplicates.

    Raises the registry's PluginError for an unknown name (it lists the available ones) and ValueError for a logger
    whose package is missing. Imports no logging package, so a run can call it before loading its model."""
    names = list(dict.fromkeys([ALWAYS, *names]))
    for name in names:
        _require(name, getattr(registry.get(name).load(), "requires", None))
    return names


def open_loggers(names: list[str], registry: Registry, run_dir: Path | str, config: dict[str, Any]) -> list[Any]:
    """Construct the loggers of ``check_loggers(names, registry)`` for the run in ``run_dir``; ``config`` is the run's
    options (W&B config, MLflow params). The caller closes them (``RunStore.close`` does). If one fails to start,
    those already started are closed before the error propagates."""
    loggers: list[Any] = []
    try:
        for name in check_loggers(names, registry):
            entry = registry.get(name)
            with exits_named("logger", name, entry.plugin, "starting"):
                logger = entry.create(run_dir=Path(run_dir), config=config)
            with contextlib.suppress(Exception):  # for logger_exits' line; a logger with __slots__ goes without
                setattr(logger, PLUGIN, entry.plugin)
            loggers.append(logger)
    except BaseException:
        for logger in loggers:
            with contextlib.suppress(Exception):  # the error that stopped us is the one to report
                logger.close()
        raise
    return loggers


def logger_exits(logger: Any, doing: str) -> contextlib.AbstractContextManager:
    """The logger's code ending the process while ``doing`` ("receiving log()") as ``PluginFailed`` naming it
    (harness/failures.py ``exits_named``); its other errors pass unchanged, for the store to drop it."""
    name = getattr(logger, "name", None) or type(logger).__name__
    plugin = getattr(logger, PLUGIN, None) or type(logger).__module__
    return exits_named("logger", str(name), str(plugin), doing)


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """The values a plotting backend can take: numbers (bools as 0/1). None, strings and lists are skipped."""
    return {key: float(value) for key, value in metrics.items() if isinstance(value, numbers.Real)}


def metric_name(stage: str, key: str) -> str:
    return f"{stage}/{key}" if stage else key


COMPLETION_ROWS = 64  # a table's rows at most: a step of 16 prompts x 8 samples would make a page nobody reads


def completion_table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """samples.jsonl records of one training step -> (columns, data): problem, prompt, completion, extracted answer,
    one column per reward component (in the order the records name them), scalar reward, advantage."""
    components = list(dict.fromkeys(name for r in rows for name in (r.get("rewards") or {})))
    columns = ["problem_id", "prompt", "completion", "extracted", *components, "scalar", "advantage"]
    data = [
        [
            r.get("problem_id"),
            r.get("prompt"),
            r.get("text"),
            r.get("extracted"),
            *((r.get("rewards") or {}).get(c) for c in components),
            r.get("scalar"),
            r.get("advantage"),
        ]
        for r in rows[:COMPLETION_ROWS]
    ]
    return columns, data


def markdown_table(columns: list[str], data: list[list[Any]]) -> str:
    """A Markdown table (TensorBoard's text plugin renders it): cells on one line, "|" escaped."""

    def cell(value: Any) -> str:
        text = f"{value:.4g}" if isinstance(value, float) else "" if value is None else str(value)
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in data])


def wandb_mode(environ: Any = os.environ) -> str:
    """W&B's mode: WANDB_MODE when set; else "online" where the user is logged in (WANDB_API_KEY, or a ~/.netrc entry
    for the W&B host, which `wandb login` writes), so a logged-in user's runs reach their project; else "offline"
    into the run folder, which `wandb sync` uploads later."""
    if environ.get("WANDB_MODE"):
        return environ["WANDB_MODE"]
    if environ.get("WANDB_API_KEY"):
        return "online"
    host = urlparse(environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname
    try:
        found = netrc.netrc(environ.get("NETRC") or None).authenticators(host or "")
    except (OSError, netrc.NetrcParseError):  # no ~/.netrc (FileNotFoundError is an OSError), or one netrc refuses
        found = None
    return "online" if found and found[2] else "offline"  # the password is the API key


class JsonlLogger:
    """``<run>/metrics.jsonl``: one line ``{"stage", "step", "time", **metrics}`` per event, flushed and fsynced, so
    a killed run keeps every event before the kill. Values JSON cannot hold are written as strings."""

    name = "jsonl"
    requires = None
    rolled_back = True  # its file is cut back with the folder on resume, so it receives the replayed events again

    def __init__(self, run_dir: Path, config: dict[str, Any] | None = None) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self._file = open(self.path, "a")  # noqa: SIM115 -- open for the whole run, closed by close()

    def log(self, metrics: dict[str, Any], step: int | None, stage: str) -> None:
        record = {"stage": stage, "step": step, "time": time.time(), **metrics}
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


class TensorBoardLogger:
    """``<run>/tensorboard``, one scalar per number, tagged ``<stage>/<key>``; a one-off value is written at step 0."""

    name = "tensorboard"
    requires = "tensorboard"

    def __init__(self, run_dir: Path, config: dict[str, Any] | None = None) -> None:
        _require(self.name, self.requires)
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))

    def log(self, metrics: dict[str, Any], step: int | None, stage: str) -> None:
        for key, value in scalars(metrics).items():
            self._writer.add_scalar(metric_name(stage, key), value, global_step=step)
        self._writer.flush()  # the writer's own flush is every 2 minutes; a killed run should keep its curves

    def log_completions(self, rows: list[dict[str, Any]], step: int, stage: str) -> None:
        self._writer.add_text(
            metric_name(stage, "completions"), markdown_table(*completion_table(rows)), global_step=step
        )
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbLogger:
    """Weights & Biases (project: WANDB_PROJECT, default "vector-harness"), in ``wandb_mode()``: online where the user
    is logged in or WANDB_MODE says so, else offline into ``<run>/wandb``.

    Each stage has its own step axis ``<stage>/step`` rather than W&B's global step, which must only grow: a
    warm-up stage counts from 0 and training counts from 0 again after it. One-off values (step None) go to the
    run's summary, where W&B shows final numbers."""

    name = "wandb"
    requires = "wandb"

    def __init__(self, run_dir: Path, config: dict[str, Any] | None = None) -> None:
        _require(self.name, self.requires)
        import wandb

        self._run = wandb.init(
            dir=str(run_dir),
            config=config or {},
            name=Path(run_dir).name,
            project=os.environ.get("WANDB_PROJECT", "vector-harness"),
            mode=wandb_mode(),
        )
        self._stages: set[str] = set()

    def log(self, metrics: dict[str, Any], step: int | None, stage: str) -> None:
        values = {metric_name(stage, key): value for key, value in scalars(metrics).items()}
        if step is None:
            self._run.summary.update(values)
            return
        self._log_at(step, stage, values)

    def log_completions(self, rows: list[dict[str, Any]], step: int, stage: str) -> None:
        import wandb

        columns, data = completion_table(rows)
        self._log_at(step, stage, {metric_name(stage, "completions"): wandb.Table(columns=columns, data=data)})

    def _log_at(self, step: int, stage: str, values: dict[str, Any]) -> None:
        if stage not in self._stages:
            self._stages.add(stage)
            self._run.define_metric(f"{stage}/*", step_metric=f"{stage}/step")
        self._run.log({f"{stage}/step": step, **values})

    def close(self) -> None:
        self._run.finish()


class MlflowLogger:
    """MLflow, into ``<run>/mlruns`` unless MLFLOW_TRACKING_URI is set (experiment: MLFLOW_EXPERIMENT_NAME, default
    "vector-harness"). The flattened config becomes the run's params (values cut to 250 characters, the limit of
    older servers); a one-off value is logged at step 0. Names keep only the characters MLflow accepts ("pass@1"
    becomes "pass_1").

    It uses an ``MlflowClient``, not mlflow's module-level active run, so two runs in one process never share one."""

    name = "mlflow"
    requires = "mlflow"

    def __init__(self, run_dir: Path, config: dict[str, Any] | None = None) -> None:
        _require(self.name, self.requires)
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = (Path(run_dir).resolve() / "mlruns").as_uri()
            # MLflow 3 refuses a folder store unless this is set (it prefers a database, which needs the full mlflow
            # package, not mlflow-skinny); a folder inside the run needs nothing and travels with the run.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._client = MlflowClient(tracking_uri=uri)
        experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "vector-harness")
        experiment = self._client.get_experiment_by_name(experiment_name)
        experiment_id = experiment.experiment_id if experiment else self._client.create_experiment(experiment_name)
        self.run_id = self._client.create_run(experiment_id, run_name=Path(run_dir).name).info.run_id
        params = {_mlflow_name(key): str(value)[:250] for key, value in _flatten(config or {}).items()}
        batch = [Param(key, value) for key, value in params.items()]
        for i in range(0, len(batch), 100):  # MLflow takes at most 100 params per request
            self._client.log_batch(self.run_id, params=batch[i : i + 100])

    def log(self, metrics: dict[str, Any], step: int | None, stage: str) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [
            Metric(_mlflow_name(metric_name(stage, key)), value, now, step or 0)
            for key, value in scalars(metrics).items()
        ]
        if batch:
            self._client.log_batch(self.run_id, metrics=batch)

    def close(self) -> None:
        self._client.set_terminated(self.run_id)


def _require(logger: str, module: str | None) -> None:
    if module and importlib.util.find_spec(module) is None:
        raise ValueError(f"logger {logger!r} needs the {module} package: pip install {module}")


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"trainer": {"lr": 1e-5}}`` -> ``{"trainer.lr": 1e-5}``."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _mlflow_name(name: str) -> str:
    return re.sub(r"[^\w./\- :]", "_", name)[:250]
