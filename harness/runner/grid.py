"""A grid of runs: every task x trainer x searcher x seed, each cell a normal run in a folder named by its
configuration, so rerunning the same grid skips the cells already complete and redoes only the rest.

Every cell of a grid shares the run-level settings (model, preset, limit, k, options), so cells that differ only
in the trainer see the same problems in the same order with the same sampling seeds. An experiment file
(harness/runner/experiment_file.py reads it) may instead list arms ([[arm]] tables: a named trainer with its own
options, e.g. an ablation's estimator): the grid is then arm x task x searcher x seed, and each cell carries its
arm's name. Its sizes ([size.cpu], [size.gpu]) are the same experiment at two scales.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from harness.failures import RunFailed
from harness.runner.config import RunConfig, field_names
from harness.runner.run_settings import configs_for
from harness.store.lock import FolderBusy, lock_grid_cell, lock_run_folder
from harness.store.run_folder import check_writable_folder

# The settings no part of a cell's identity, as RunConfig's fields declare (identity=False; why, beside each): where
# a cell runs, how fast, what watches it and how often it checkpoints do not change its results.
NOT_IN_IDENTITY = field_names(RunConfig, identity=False)


# A cell's identity is every field of it that is part of one (RunConfig's identity=True), but a field that came
# after cells had names is left out while it holds a value all cells had before it came, so that their folders keep
# their names (a grid run again finds and skips its complete cells). Each such field, and the values left out:
SAME_AS_DTYPE = "<the weights' dtype>"
AS_BEFORE: dict[str, tuple[Any, ...]] = {
    "engine": ("transformers",),  # the default engine (cells from before engines)
    "arm": ("", None),  # a cell outside arms
    "model_revision": ("", None),  # a model's latest revision
    "dtype": ("float32",),  # float32 weights
    # sampling in the weights' precision, or in what "auto" (the default) picks: like the thread count, a choice
    # made for the machine (bf16 training rollouts where native; evaluations always in the weights')
    "rollout_dtype": ("", "auto", SAME_AS_DTYPE),
    "rewards": ([],),  # no --reward functions
    "plugins": ([],),  # no --plugin files
}


def cell_name(cfg: RunConfig) -> str:
    """``<task>-<trainer or arm>-<searcher>-seed<N>-<hash>``: readable, and unique to everything that changes results
    (an arm's name included, so two arms never share a folder even with equal settings)."""
    values = asdict(cfg)
    identity = {
        key: values[key] for key in field_names(type(cfg), identity=True) if not _as_before(cfg, key, values[key])
    }
    identity["options"] = {
        kind: {key: as_toml_value(value) for key, value in options.items()}
        for kind, options in identity["options"].items()
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]
    # an arm's name stands for its trainer: two arms of one trainer (an ablation) must be told apart at a glance
    label = f"{cfg.task}-{cfg.arm or cfg.trainer}-{cfg.searcher}-seed{cfg.seed}".replace(":", "_").replace("/", "_")
    return f"{label}-{digest}"


def _as_before(cfg: RunConfig, key: str, value: Any) -> bool:
    """Whether ``value`` of field ``key`` is one every cell had before the field came (``AS_BEFORE``)."""
    return any(value == (cfg.dtype if before == SAME_AS_DTYPE else before) for before in AS_BEFORE.get(key, ()))


def as_toml_value(value: Any) -> Any:
    """An option as an experiment file would write it: ``--set trainer.lr=3e-5`` gives the string "3e-5" where the
    file's ``lr = 3e-5`` gives a float, and both must name the same cell (a CLI variant of a file's setting lands
    in the file's folder). Only strings that read as a TOML integer, float or boolean change."""
    if not isinstance(value, str):
        return value
    if value in ("true", "false"):
        return value == "true"
    for number in (int, float):
        try:
            parsed = number(value)
        except ValueError:
            continue
        return parsed if math.isfinite(parsed) else value
    return value


def is_complete(run_dir: Path) -> bool:
    try:
        return json.loads((run_dir / "manifest.json").read_text()).get("status") == "complete"
    except (OSError, ValueError):
        return False


def run_grid(cells: list[RunConfig], plugins: Any = None, echo=print) -> list[Path]:
    """Run every cell not already complete. A cell whose folder exists but never finished (the grid was killed) is
    moved aside, not deleted, and run again. One failing cell does not stop the others; the failures are raised
    together at the end, after every other cell has run.

    Each cell is locked while this grid checks, moves and runs it (harness/store/lock.py), and its folder's own
    lock is taken before it is moved. A cell another process is running (the same grid started twice, or a
    `--resume` of the cell's folder) is left alone while this grid runs the others, then waited for: complete
    there, it counts as done here; two processes started on one grid share its cells and both exit 0."""
    from harness.plugins import get_plugin_manager

    plugins = plugins or get_plugin_manager(local=cells[0].plugins if cells else ())  # not an axis: shared by all
    for cfg in cells:  # a misspelt name or option fails the grid now, not after hours of the cells before it
        check_cell(cfg, plugins)
    for out in dict.fromkeys(cfg.out for cfg in cells):  # where the cells' locks go, and their folders
        check_writable_folder(out, "--out").mkdir(parents=True, exist_ok=True)
    done: dict[int, Path] = {}
    failed: list[str] = []
    elsewhere: list[tuple[int, RunConfig, str]] = []  # (cell, its configuration, the pid running it)
    for i, cfg in enumerate(cells, 1):
        label = f"[{i}/{len(cells)}] {cfg.name}"
        try:
            done[i] = _run_cell(cfg, label, plugins, echo)
        except FolderBusy as exc:
            echo(f"{label}: running in another process (pid {exc.holder}); waited for after the other cells")
            elsewhere.append((i, cfg, exc.holder))
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            print(f"harness: cell {cfg.name} failed: {exc}", file=sys.stderr)
            failed.append(f"{cfg.name} ({exc})")
    for i, cfg, holder in elsewhere:
        label = f"[{i}/{len(cells)}] {cfg.name}"
        echo(f"{label}: waiting for pid {holder} to finish it")
        folder = _wait_for_cell(cfg)
        if is_complete(folder):
            echo(f"{label}: complete (run by pid {holder})")
            done[i] = folder
        else:
            print(f"harness: cell {cfg.name} failed: pid {holder} left it unfinished", file=sys.stderr)
            failed.append(f"{cfg.name} (pid {holder} left it unfinished; rerun the grid to run it)")
    if failed:
        raise RunFailed(f"{len(failed)} of {len(cells)} grid cells failed: {'; '.join(failed)}")
    return [done[i] for i in sorted(done)]


def _run_cell(cfg: RunConfig, label: str, plugins: Any, echo) -> Path:
    """One cell under its lock: skipped when complete, else (an unfinished folder moved aside) run. ``FolderBusy``
    when another process holds the cell or its folder."""
    from harness.run import run

    folder = Path(cfg.out) / str(cfg.name)
    cell_lock = lock_grid_cell(cfg.out, str(cfg.name))
    try:
        if is_complete(folder):
            echo(f"{label}: complete, skipped")
            return folder
        if folder.exists():
            move_aside(folder, echo, label)
        echo(f"{label}: running")
        return run(cfg, plugins=plugins, echo=echo)
    finally:
        cell_lock.release()


def _wait_for_cell(cfg: RunConfig) -> Path:
    """Wait until no other process holds the cell or its folder (a grid running it, a `--resume` of it); returns
    the folder, as that process left it."""
    folder = Path(cfg.out) / str(cfg.name)
    lock_grid_cell(cfg.out, str(cfg.name), wait=True).release()
    if folder.exists():
        lock_run_folder(folder, wait=True).release()
    return folder


def move_aside(folder: Path, echo, label: str) -> None:
    """Move an unfinished cell's folder to ``<name>.incomplete-<time>``, unless a live process (a `--resume`)
    holds it: then ``FolderBusy`` names that process and the folder stays."""
    folder_lock = lock_run_folder(folder)
    try:
        aside = folder.with_name(f"{folder.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
        folder.rename(aside)
    finally:
        folder_lock.release()
    echo(f"{label}: an unfinished earlier attempt moved to {aside.name}")


def check_cell(cfg: RunConfig, plugins: Any) -> None:
    """Resolve the cell's plugin names and construct its trainer and searcher with their options (cheap: no model,
    no data), so an option one trainer of the grid does not take is refused before any cell runs."""
    from harness.runner.plan import build_plugins

    try:
        build_plugins(cfg, plugins, with_task=False)
    except ValueError as exc:
        raise ValueError(f"grid cell {cfg.name}: {exc}") from None


def cells_for(
    settings: dict[str, Any],
    given: dict[str, Any],
    cli_options: dict[str, dict[str, Any]],
    arms: list[str] | None = None,
) -> list[RunConfig]:
    """The grid's cells: ``configs_for``'s run settings (harness/runner/run_settings.py), each named by its
    configuration."""
    return name_cells(configs_for(settings, given, cli_options, arms=arms))


def name_cells(configs: list[RunConfig]) -> list[RunConfig]:
    """Each run of a grid named by its configuration (``cell_name``)."""
    return [replace(cfg, name=cell_name(cfg)) for cfg in configs]
