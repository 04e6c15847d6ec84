"""A grid of runs: every task x trainer x searcher x seed, each cell a normal run in a folder named by its
configuration, so rerunning the same grid skips the cells already complete and redoes only the rest.

Every cell of a grid shares the run-level settings (model, preset, limit, k, options), so cells that differ only
in the trainer see the same problems in the same order with the same sampling seeds. An experiment file may instead
list arms ([[arm]] tables: a named trainer with its own options, e.g. an ablation's estimator): the grid is then
arm x task x searcher x seed, and each cell carries its arm's name. Its sizes ([size.cpu], [size.gpu]) are the
same experiment at two scales.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from harness.failures import RunFailed
from harness.runner.bounded_yaml import AliasBomb, load_bounded_yaml
from harness.runner.config import RunConfig, positive_int
from harness.store.lock import FolderBusy, lock_grid_cell, lock_run_folder
from harness.store.run_folder import check_writable_folder

LIST_FIELDS = ("task", "trainer", "searcher", "seed")  # the grid's axes; every other field is shared by all cells
# Where a cell runs, how fast, what watches it and how often it checkpoints do not change its results.
# Where a run happens, not what it computes: a vLLM server's address and its weights folder are not part of a cell.
# The engine's batch size changes how fast, not what: rollouts are batch-invariant up to float rounding; so does
# sharding the training state (--shard), whose update equals the unsharded one to float rounding.
# Evaluations during training watch it (their random numbers are their own: training is the same without them).
NOT_IN_IDENTITY = (
    "out",
    "threads",
    "name",
    "loggers",
    "checkpoint_every",
    "engine_url",
    "engine_weights_dir",
    "save_model",
    "push_to_hub",
    "batch_size",
    "save_every",
    "shard",
    "eval_every",
    "eval_every_limit",
    "log_completions_every",
)


def split_names(value: Any) -> list[Any]:
    """ "math,code" or ["math", "code"] -> ["math", "code"] (order kept, duplicates dropped)."""
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [value]
    out: list[Any] = []
    for item in items:
        item = item.strip() if isinstance(item, str) else item
        if item in ("", None):
            raise ValueError(f"empty name in the list {value!r}")
        if isinstance(item, (list, tuple, dict, set)):  # YAML's `task: [math, [nested]]`
            raise ValueError(f"a list of names holds {item!r}: a name (or a number, for seeds) was expected")
        if item not in out:
            out.append(item)
    return out


def expand(base: RunConfig, axes: dict[str, list[Any]]) -> list[RunConfig]:
    """One RunConfig per combination of the axes (task outermost, seed innermost), each with its cell name."""
    cells = [base]
    for axis in LIST_FIELDS:
        values = axes.get(axis) or [getattr(base, axis)]
        if axis == "seed":
            values = [_seed(v) for v in values]
        cells = [replace(cell, **{axis: value}) for cell in cells for value in values]
    return [replace(cell, name=cell_name(cell)) for cell in cells]


def cell_name(cfg: RunConfig) -> str:
    """``<task>-<trainer or arm>-<searcher>-seed<N>-<hash>``: readable, and unique to everything that changes results
    (an arm's name included, so two arms never share a folder even with equal settings)."""
    identity = {k: v for k, v in asdict(cfg).items() if k not in NOT_IN_IDENTITY}
    if identity.get("engine") == "transformers":  # the default engine keeps the names cells had before engines
        del identity["engine"]
    if not identity.get("arm"):  # so do cells outside arms: their names are the ones they had before arms
        identity.pop("arm", None)
    if not identity.get("model_revision"):  # and cells on a model's latest revision
        identity.pop("model_revision", None)
    # and cells sampling in the weights' precision, or in what "auto" (the default) picks: like the thread count, a
    # choice made for the machine (bf16 training rollouts where native; evaluations always in the weights')
    if identity.get("rollout_dtype") in ("", "auto", identity.get("dtype")):
        del identity["rollout_dtype"]
    if identity.get("dtype") == "float32":  # and cells with float32 weights
        del identity["dtype"]
    for key in ("rewards", "plugins"):  # and cells without --reward functions or --plugin files
        if not identity.get(key):
            identity.pop(key, None)
    identity["options"] = {
        kind: {key: as_toml_value(value) for key, value in values.items()}
        for kind, values in identity["options"].items()
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]
    # an arm's name stands for its trainer: two arms of one trainer (an ablation) must be told apart at a glance
    label = f"{cfg.task}-{cfg.arm or cfg.trainer}-{cfg.searcher}-seed{cfg.seed}".replace(":", "_").replace("/", "_")
    return f"{label}-{digest}"


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


def load_experiment(path: Path | str, size: str | None = None) -> dict[str, Any]:
    """A grid written down: a TOML (or YAML, with PyYAML installed) file whose keys are RunConfig fields (task,
    trainer, searcher and seed may be lists) plus ``[set.task]``, ``[set.trainer]``, ``[set.searcher]`` tables of
    plugin options. Optionally:

    - ``[size.NAME]`` tables (e.g. cpu and gpu) of the same keys, overriding the shared ones for that size: ``size``
      picks one, "cpu" by default when the file has sizes;
    - ``[[arm]]`` tables, each a method of the comparison: ``name``, ``trainer``, optionally ``searcher`` and
      ``steps``, its own ``[arm.set.KIND]`` options over the shared ones and ``[arm.size.NAME]`` overrides (steps,
      set). Returned as ``arms``: [{"name", "trainer", "searcher", "steps", "options"}], the size applied.

    Unknown keys and wrong types are refused in one line naming the file."""
    path = Path(path)
    data = _read(path)
    sizes = data.pop("size", None)
    arms = data.pop("arm", None)
    settings = _settings(data, f"{path}", top=True)
    if sizes is None:
        if size is not None:
            raise ValueError(f"{path}: has no [size.*] tables; drop --size {size}")
    else:
        if not isinstance(sizes, dict) or not sizes or not all(isinstance(v, dict) for v in sizes.values()):
            raise ValueError(f"{path}: 'size' must hold tables of settings, e.g. [size.cpu] and [size.gpu]")
        size = size or DEFAULT_SIZE
        if size not in sizes:
            raise ValueError(f"{path}: no size {size!r}; sizes: {', '.join(sizes)}")
        settings = _merge(settings, _settings(dict(sizes[size]), f"{path} [size.{size}]"))
        settings["size"] = size
    if arms is not None:
        if "trainer" in settings:
            raise ValueError(f"{path}: with [[arm]] tables each arm names its trainer; remove the shared 'trainer'")
        if not isinstance(arms, list) or not arms:
            raise ValueError(f"{path}: 'arm' must be [[arm]] tables, each with a name and a trainer")
        settings["arms"] = [_arm(arm, i, path, size, sizes or {}) for i, arm in enumerate(arms, 1)]
        names = [arm["name"] for arm in settings["arms"]]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{path}: arm name(s) {', '.join(twice)} used twice; each arm needs its own name")
    return settings


DEFAULT_SIZE = "cpu"  # what `harness run --config FILE` runs when the file has sizes and --size is not given
OPTION_KINDS = ("task", "trainer", "searcher")
ARM_KEYS = ("name", "trainer", "searcher", "steps", "set", "size")
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # it becomes part of a folder name


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"experiment file {path} does not exist")
    try:
        text = path.read_text()
        if path.suffix in (".yaml", ".yml"):
            data = load_bounded_yaml(text, str(path)) or {}
        else:
            import tomllib

            data = tomllib.loads(text)
    except ImportError as exc:
        raise ValueError(f"{path}: cannot read this format ({exc})") from None
    except AliasBomb:  # its line names the file already
        raise
    except Exception as exc:  # tomllib.TOMLDecodeError / yaml.YAMLError: the parser says where
        raise ValueError(f"{path}: not valid {path.suffix.lstrip('.') or 'TOML'}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of settings at the top level")
    return data


def _settings(data: dict[str, Any], where: str, top: bool = False) -> dict[str, Any]:
    """Run-level settings and ``set`` tables (the top level of a file, or one of its sizes), checked."""
    known = {f.name for f in fields(RunConfig)} - {"options", "name", "arm"}
    unknown = sorted(set(data) - known - {"set"})
    if unknown:
        tables = ", set, arm, size" if top else ", set"  # arms and sizes are tables of the top level only
        raise ValueError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}{tables}")
    options = _options(data.pop("set", {}), where)
    for key in ("steps", "limit", "train_limit", "threads"):
        if key in data and data[key] is not None:
            data[key] = _int(data[key], f"{where}: {key}")
    if isinstance(data.get("k"), list):  # k = [1, 4, 16] -> "1,4,16", as on the command line
        data["k"] = ",".join(str(_int(k, f"{where}: k")) for k in data["k"])
    if data.get("batch_size") is not None:
        data["batch_size"] = positive_int(data["batch_size"], f"{where}: batch_size")
    for key in ("model", "preset", "out", "k", "model_revision"):
        if key in data and not isinstance(data[key], (str, int)):
            raise ValueError(f"{where}: {key} should be a string, got {data[key]!r}")
    for key in ("rewards", "plugins"):  # rewards = ["myrewards:brevity=0.5"], plugins = ["./my_plugin.py"]
        if key in data and not (isinstance(data[key], list) and all(isinstance(v, str) for v in data[key])):
            raise ValueError(f"{where}: {key} should be a list of strings, got {data[key]!r}")
    return {**data, "options": options}


def _options(options: Any, where: str) -> dict[str, dict[str, Any]]:
    """``set`` tables -> {"task": {...}, "trainer": {...}, "searcher": {...}}."""
    options = options or {}
    if not isinstance(options, dict) or not all(k in OPTION_KINDS and isinstance(v, dict) for k, v in options.items()):
        raise ValueError(f"{where}: 'set' must hold tables named task, trainer or searcher")
    return {kind: dict(options.get(kind, {})) for kind in OPTION_KINDS}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over``'s settings replace ``base``'s; their option tables merge key by key."""
    options = {kind: {**base["options"].get(kind, {}), **over["options"].get(kind, {})} for kind in OPTION_KINDS}
    return {**base, **over, "options": options}


def _arm(arm: Any, number: int, path: Path, size: str | None, sizes: dict[str, Any]) -> dict[str, Any]:
    """One [[arm]] table, checked, with the chosen size's overrides applied."""
    name = arm.get("name") if isinstance(arm, dict) else None
    where = f"{path}: arm {number}" + (f" ({name})" if isinstance(name, str) else "")
    if not isinstance(arm, dict):
        raise ValueError(f"{where}: expected a table with a name and a trainer")
    unknown = sorted(set(arm) - set(ARM_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; an arm takes {', '.join(ARM_KEYS)}")
    if not isinstance(name, str) or not ARM_NAME.fullmatch(name):
        raise ValueError(
            f"{where}: 'name' must be letters, digits, '_', '.' or '-' (it names the run folders), got {name!r}"
        )
    if not isinstance(arm.get("trainer"), str) or not arm["trainer"].strip():
        raise ValueError(f"{where}: 'trainer' must name a trainer (or 'none'), got {arm.get('trainer')!r}")
    searcher = arm.get("searcher")
    if searcher is not None and not (isinstance(searcher, str) and searcher.strip()):
        raise ValueError(f"{where}: 'searcher' must name a searcher, got {searcher!r}")
    out = {
        "name": name,
        "trainer": arm["trainer"].strip(),
        "searcher": searcher and searcher.strip(),
        "steps": None if arm.get("steps") is None else _int(arm["steps"], f"{where}: steps"),
        "options": _options(arm.get("set"), where),
    }
    own_sizes = arm.get("size") or {}
    if not isinstance(own_sizes, dict) or not all(isinstance(v, dict) for v in own_sizes.values()):
        raise ValueError(f"{where}: 'size' must hold tables, e.g. [arm.size.gpu.set.trainer]")
    strange = sorted(set(own_sizes) - set(sizes))
    if strange:
        raise ValueError(
            f"{where}: size(s) {', '.join(strange)} not among the file's sizes ({', '.join(sizes) or 'none'})"
        )
    chosen = own_sizes.get(size) or {}
    unknown = sorted(set(chosen) - {"steps", "set"})
    if unknown:
        raise ValueError(
            f"{where} [size.{size}]: unknown key(s) {', '.join(unknown)}; an arm's size takes steps and set"
        )
    if chosen.get("steps") is not None:
        out["steps"] = _int(chosen["steps"], f"{where} [size.{size}]: steps")
    return _merge(out, {"options": _options(chosen.get("set"), f"{where} [size.{size}]")})


def cells_for(
    settings: dict[str, Any],
    given: dict[str, Any],
    cli_options: dict[str, dict[str, Any]],
    arms: list[str] | None = None,
) -> list[RunConfig]:
    """The cells of `harness run`: an experiment file's settings (``load_experiment``; ``{"options": {}}`` without
    one) under the flags the command line gave (``given``) and its ``--set`` options, which override the file.

    Options are layered: the file's shared [set.*] < its size's < an arm's < the arm's size's < --set. Without arms
    the cells are the grid of task x trainer x searcher x seed, as before; with arms, arm x task x searcher x seed,
    where an arm's trainer, searcher and steps replace the shared ones (--searcher and --steps still win), and
    ``arms`` (--arm) keeps only the arms named."""
    settings = {**settings, **given}
    settings.pop("size", None)
    shared = settings.pop("options")
    arm_tables = settings.pop("arms", None)
    axes = {axis: split_names(settings.pop(axis)) for axis in LIST_FIELDS if axis in settings}

    def layered(*tables: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        # the kinds --set gave (task, trainer, searcher, and engine only when given), as a run without a file has
        return {kind: {k: v for table in tables for k, v in table.get(kind, {}).items()} for kind in cli_options}

    if arm_tables is None:
        if arms:
            raise ValueError("--arm chooses among an experiment file's [[arm]] tables; this run has none")
        return _trainer_options_used(expand(RunConfig(**settings, options=layered(shared, cli_options)), axes))
    if "trainer" in given:
        raise ValueError("--trainer: the experiment file's arms name their trainers; choose arms with --arm")
    chosen = arm_tables
    if arms:
        known = [a["name"] for a in arm_tables]
        missing = [name for name in arms if name not in known]
        if missing:
            raise ValueError(f"--arm {','.join(missing)}: no such arm; arms: {', '.join(known)}")
        chosen = [a for a in arm_tables if a["name"] in arms]
    cells: list[RunConfig] = []
    for arm in chosen:
        own = {"trainer": arm["trainer"], "arm": arm["name"]}
        if arm["steps"] is not None and "steps" not in given:
            own["steps"] = arm["steps"]
        arm_axes = dict(axes)
        if arm["searcher"] and "searcher" not in given:
            arm_axes["searcher"] = [arm["searcher"]]
        base = RunConfig(**{**settings, **own}, options=layered(shared, arm["options"], cli_options))
        cells += expand(base, arm_axes)
    return _trainer_options_used(cells)


def _trainer_options_used(cells: list[RunConfig]) -> list[RunConfig]:
    """Refuse trainer options when no cell trains: with --trainer none nothing would read (or check) them. In a
    grid where some cells train, those cells check them and the others carry them unread, as before."""
    given = sorted({key for cell in cells for key in cell.options.get("trainer", {})})
    if given and all(cell.trainer == "none" for cell in cells):
        raise ValueError(
            f"--set trainer.{given[0]}: this run trains nothing (--trainer none), so no trainer reads "
            "it; drop the trainer options"
        )
    if any(cell.eval_every for cell in cells) and all(cell.trainer == "none" for cell in cells):
        raise ValueError("--eval-every evaluates during training; this run trains nothing (--trainer none)")
    return cells


MAX_SEED = (1 << 32) - 1  # numpy's and most samplers' range; SQLite's integers end at 2^63 - 1


def _seed(value: Any) -> int:
    """A seed in [0, 2^32 - 1]: a larger one was accepted, then made `harness index`, `report` and `--resume` of its
    folder crash (OverflowError) where the index stores it."""
    seed = _int(value, "seed")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed should be in [0, {MAX_SEED}], got {seed}")
    return seed


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().lstrip("-").isdigit():
        raise ValueError(f"{what} should be an integer, got {value!r}")
    return int(value)
