"""What `harness run` is asked to run: the flags it was given and an experiment file's settings, as run settings
(RunConfig): one for a single run, which harness/run.py runs as it is, or the cells of a grid
(harness/runner/grid.py names and runs them)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.plugins.size_bounds import MAX_SEED  # numpy's range, every seed option's too
from harness.runner.config import RunConfig
from harness.runner.experiment_file import as_int

LIST_FIELDS = ("task", "trainer", "searcher", "seed")  # the grid's axes; every other field is shared by all cells


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
    """One RunConfig per combination of the axes (task outermost, seed innermost)."""
    cells = [base]
    for axis in LIST_FIELDS:
        values = axes.get(axis) or [getattr(base, axis)]
        if axis == "seed":
            values = [_seed(v) for v in values]
        cells = [replace(cell, **{axis: value}) for cell in cells for value in values]
    return cells


def configs_for(
    settings: dict[str, Any],
    given: dict[str, Any],
    cli_options: dict[str, dict[str, Any]],
    arms: list[str] | None = None,
) -> list[RunConfig]:
    """The runs `harness run` asks for: an experiment file's settings (``load_experiment``; ``{"options": {}}`` without
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


def _seed(value: Any) -> int:
    """A seed in [0, 2^32 - 1]: a larger one was accepted, then made `harness index`, `report` and `--resume` of its
    folder crash (OverflowError) where the index stores it."""
    seed = as_int(value, "seed")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed should be in [0, {MAX_SEED}], got {seed}")
    return seed
