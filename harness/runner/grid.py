"""A grid of runs: every task x trainer x searcher x seed, each cell a normal run in a folder named by its
configuration, so rerunning the same grid skips the cells already complete and redoes only the rest.

Every cell of a grid shares the run-level settings (model, preset, steps, limit, k, options), so cells that differ
only in the trainer see the same problems in the same order with the same sampling seeds.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from harness.runner.config import RunConfig

LIST_FIELDS = ("task", "trainer", "searcher", "seed")  # the grid's axes; every other field is shared by all cells
# Where a cell runs, how fast, what watches it and how often it checkpoints do not change its results.
# Where a run happens, not what it computes: a vLLM server's address and its weights folder are not part of a cell.
NOT_IN_IDENTITY = ("out", "threads", "name", "loggers", "checkpoint_every", "engine_url", "engine_weights_dir")


def split_names(value: Any) -> list[Any]:
    """"math,code" or ["math", "code"] -> ["math", "code"] (order kept, duplicates dropped)."""
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [
        value]
    out: list[Any] = []
    for item in items:
        item = item.strip() if isinstance(item, str) else item
        if item in ("", None):
            raise ValueError(f"empty name in the list {value!r}")
        if item not in out:
            out.append(item)
    return out


def expand(base: RunConfig, axes: dict[str, list[Any]]) -> list[RunConfig]:
    """One RunConfig per combination of the axes (task outermost, seed innermost), each with its cell name."""
    cells = [base]
    for axis in LIST_FIELDS:
        values = axes.get(axis) or [getattr(base, axis)]
        if axis == "seed":
            values = [_int(v, "seed") for v in values]
        cells = [replace(cell, **{axis: value}) for cell in cells for value in values]
    return [replace(cell, name=cell_name(cell)) for cell in cells]


def cell_name(cfg: RunConfig) -> str:
    """``<task>-<trainer>-<searcher>-seed<N>-<hash>``: readable, and unique to everything that changes results."""
    identity = {k: v for k, v in asdict(cfg).items() if k not in NOT_IN_IDENTITY}
    if identity.get("engine") == "transformers":  # the default engine keeps the names cells had before engines
        del identity["engine"]
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]
    label = f"{cfg.task}-{cfg.trainer}-{cfg.searcher}-seed{cfg.seed}".replace(":", "_").replace("/", "_")
    return f"{label}-{digest}"


def is_complete(run_dir: Path) -> bool:
    try:
        return json.loads((run_dir / "manifest.json").read_text()).get("status") == "complete"
    except (OSError, ValueError):
        return False


def run_grid(cells: list[RunConfig], plugins: Any = None, echo=print) -> list[Path]:
    """Run every cell not already complete. A cell whose folder exists but never finished (the grid was killed) is
    moved aside, not deleted, and run again. One failing cell does not stop the others; the failures are raised
    together at the end, after every other cell has run."""
    from harness.plugins import get_plugin_manager
    from harness.run import run

    plugins = plugins or get_plugin_manager()
    for cfg in cells:  # a misspelt name or option fails the grid now, not after hours of the cells before it
        check_cell(cfg, plugins)
    done: list[Path] = []
    failed: list[str] = []
    for i, cfg in enumerate(cells, 1):
        folder = Path(cfg.out) / str(cfg.name)
        if is_complete(folder):
            echo(f"[{i}/{len(cells)}] {cfg.name}: complete, skipped")
            done.append(folder)
            continue
        if folder.exists():
            aside = folder.with_name(f"{folder.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
            folder.rename(aside)
            echo(f"[{i}/{len(cells)}] {cfg.name}: an unfinished earlier attempt moved to {aside.name}")
        echo(f"[{i}/{len(cells)}] {cfg.name}: running")
        try:
            done.append(run(cfg, plugins=plugins, echo=echo))
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            print(f"harness: cell {cfg.name} failed: {exc}", file=sys.stderr)
            failed.append(f"{cfg.name} ({exc})")
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(cells)} grid cells failed: {'; '.join(failed)}")
    return done


def check_cell(cfg: RunConfig, plugins: Any) -> None:
    """Resolve the cell's plugin names and construct its trainer and searcher with their options (cheap: no model,
    no data), so an option one trainer of the grid does not take is refused before any cell runs."""
    from harness.runner.plan import build_plugins

    try:
        build_plugins(cfg, plugins, with_task=False)
    except ValueError as exc:
        raise ValueError(f"grid cell {cfg.name}: {exc}") from None


def load_experiment(path: Path | str) -> dict[str, Any]:
    """A grid written down: a TOML (or YAML, with PyYAML installed) file whose keys are RunConfig fields (task,
    trainer, searcher and seed may be lists) plus ``[set.task]``, ``[set.trainer]``, ``[set.searcher]`` tables of
    plugin options. Unknown keys and wrong types are refused in one line naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"experiment file {path} does not exist")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            import tomllib

            data = tomllib.loads(text)
    except ImportError as exc:
        raise ValueError(f"{path}: cannot read this format ({exc})") from None
    except Exception as exc:  # tomllib.TOMLDecodeError / yaml.YAMLError: the parser says where
        raise ValueError(f"{path}: not valid {path.suffix.lstrip('.') or 'TOML'}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of settings at the top level")
    known = {f.name for f in fields(RunConfig)} - {"options", "name"}
    unknown = sorted(set(data) - known - {"set"})
    if unknown:
        raise ValueError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}, set")
    options = data.pop("set", {}) or {}
    if not isinstance(options, dict) or not all(k in ("task", "trainer", "searcher") and isinstance(v, dict)
                                                 for k, v in options.items()):
        raise ValueError(f"{path}: 'set' must hold tables named task, trainer or searcher")
    for key in ("steps", "limit", "train_limit", "threads"):
        if key in data and data[key] is not None:
            data[key] = _int(data[key], f"{path}: {key}")
    if isinstance(data.get("k"), list):  # k = [1, 4, 16] -> "1,4,16", as on the command line
        data["k"] = ",".join(str(_int(k, f"{path}: k")) for k in data["k"])
    for key in ("model", "preset", "out", "k"):
        if key in data and not isinstance(data[key], (str, int)):
            raise ValueError(f"{path}: {key} should be a string, got {data[key]!r}")
    return {**data, "options": {kind: dict(options.get(kind, {})) for kind in ("task", "trainer", "searcher")}}


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().lstrip("-").isdigit():
        raise ValueError(f"{what} should be an integer, got {value!r}")
    return int(value)
