"""The tiny model's run, built in one place (`tiny_argv` for the command line, `tiny_config` for `harness.run.run`
in process), the run that the fault-injection and reliability tests kill, resume and race (`RUN`), and how they
compare two runs' results: everything but wall-clock fields must be equal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

MODEL = "tiny-random"
# The flags of every tiny run, and of one that trains; a keyword of the builders replaces one, None drops it.
SIZES: dict[str, Any] = {"limit": 2, "k": "1,2", "threads": 1}
TRAINING: dict[str, Any] = {"steps": 1, "train_limit": 4}
# --set KIND.KEY=VALUE by plugin name: small groups and generations (a plugin not named here gets none)
RL = {"group_size": 2, "prompts_per_step": 1, "max_new_tokens": 4}
TRAINER_SETS: dict[str, dict[str, Any]] = {
    "grpo": RL,
    "vpo": RL,
    "rlaif": RL,
    "vspo": {"prompts_per_step": 1, "max_new_tokens": 4},  # its group is its betas
}
SEARCHER_SETS: dict[str, dict[str, Any]] = {"best-of-k": {"n": 2, "max_new_tokens": 4}}
# sets= that drops every size above: the plugins' own (their presets', the task's generation budget)
OWN_SIZES: dict[str, None] = dict.fromkeys(
    [*(f"trainer.{k}" for k in RL), *(f"searcher.{k}" for k in SEARCHER_SETS["best-of-k"])]
)


def tiny_settings(trainer: str, flags: dict[str, Any], sets: dict[str, Any] | None) -> tuple[dict, dict]:
    """The run's flags (a flag's name in Python: `train_limit` for `--train-limit`, a RunConfig field for
    `tiny_config`) and its `--set` options ("KIND.KEY" -> value): tiny-random, one thread, 2 eval problems, k 1,2; a
    training run 1 step on 4 train problems; the sizes above for the trainer and the searcher (`searcher=` chooses
    which). `flags` and `sets` replace any of them; a None drops it."""
    chosen = {"model": MODEL, "trainer": trainer, **(TRAINING if trainer != "none" else {}), **SIZES, **flags}
    options = {f"searcher.{k}": v for k, v in SEARCHER_SETS.get(chosen.get("searcher") or "best-of-k", {}).items()}
    if trainer != "none":
        options = {**{f"trainer.{k}": v for k, v in TRAINER_SETS.get(trainer, {}).items()}, **options}
    options.update(sets or {})
    return {k: v for k, v in chosen.items() if v is not None}, {k: v for k, v in options.items() if v is not None}


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def tiny_argv(trainer: str = "grpo", *, sets: dict[str, Any] | None = None, **flags: Any) -> list[str]:
    """`harness run` on the tiny model, as argv: `tiny_argv("none")` evaluates only; `steps=3` is `--steps 3`,
    `no_save_model=True` the bare `--no-save-model`, a list a repeated flag (`reward=["m:f", "m:g"]`), None drops
    a flag; `sets={"trainer.lr": 1e-2, "searcher.n": None}` adds, replaces or drops a `--set`."""
    chosen, options = tiny_settings(trainer, flags, sets)
    argv = ["run"]
    for name, value in chosen.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            argv += [a for v in value for a in (flag, _text(v))]
        elif value is not False:
            argv += [flag, _text(value)]
    return argv + [a for key, value in options.items() for a in ("--set", f"{key}={_text(value)}")]


def tiny_config(trainer: str = "grpo", *, sets: dict[str, Any] | None = None, **fields: Any):
    """The same run as a RunConfig (harness/runner/config.py), for `harness.run.run` in process: `fields` are
    RunConfig's, `sets` as for `tiny_argv`. Threads are left to torch unless given: `threads=N` pins the count of
    the test's own process, for whatever runs in it after."""
    from harness.runner.config import RunConfig

    chosen, options = tiny_settings(trainer, {"threads": None, **fields}, sets)
    if "k" in chosen:
        chosen["k"] = str(chosen["k"])
    nested: dict[str, dict[str, Any]] = {"task": {}, "trainer": {}, "searcher": {}}
    for key, value in options.items():
        kind, name = key.split(".", 1)
        nested.setdefault(kind, {})[name] = value
    return RunConfig(**chosen, options=nested)


def uppercase_step(out: Path, **fields: Any):
    """One GRPO step on the "uppercase" test task (2 train problems, groups of 4, 6 new tokens) between two
    evaluations of one answer per problem, as a RunConfig for `harness.run.run` with `with_uppercase_task()`'s
    plugins; `fields` as for `tiny_config`."""
    sets = {
        "trainer.group_size": "4",
        "trainer.prompts_per_step": None,
        "trainer.max_new_tokens": "6",
        "searcher.n": "1",
        "searcher.max_new_tokens": "6",
    }
    return tiny_config(task="uppercase", train_limit=2, k=1, out=str(out), save_model=False, sets=sets, **fields)


# 3 steps, a checkpoint after every one (default: 10 minutes), so kills land between them
RUN = tiny_argv(steps=3, checkpoint_every=1)
# An evaluation only (no training, no curves to draw): the run the report tests copy into many folders.
EVAL = tiny_argv("none")

CEILING = 300  # seconds: a hang, never a speed


def harness_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1", **extra}


def foreground() -> None:
    """``preexec_fn`` for a child the test will ^C: SIGINT at its default, as in a terminal's foreground job. A
    shell's background job (`pytest ... &`, a CI runner's) ignores SIGINT, its children inherit that, and a child
    that ignores ^C never sees the test's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def harness(args: list[str], **env: str) -> subprocess.CompletedProcess:
    """`harness ARGS` in a fresh process, environment variables (fault points) added."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        env=harness_env(**env),
        capture_output=True,
        text=True,
        timeout=CEILING,
    )


def without_timing(value):
    """Wall-clock fields (*seconds*, the time/* breakdown) differ between any two runs; everything else must not."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if "seconds" not in k and "time/" not in k}
    return value


def outcome(folder: Path) -> dict:
    """What a run computed: metrics, samples and steps without wall-clock fields."""
    lines = {
        name: [without_timing(json.loads(line)) for line in (folder / name).read_text().splitlines()]
        for name in ("samples.jsonl", "steps.jsonl")
    }
    return {"metrics": without_timing(json.loads((folder / "metrics.json").read_text())), **lines}


def only_run(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def with_uppercase_task():
    """A plugin manager with the built-ins and the "uppercase" test task (harness.testing.UppercaseTask), for tiny
    in-process runs whose reward needs no data."""
    from harness.hookspecs import hookimpl
    from harness.plugins import get_plugin_manager

    class Plugin:
        @hookimpl
        def harness_register_tasks(self, registry):
            registry.add("uppercase", "harness.testing:UppercaseTask", "upper-case letters (tests)")

    return get_plugin_manager(extra_plugins=(Plugin(),), autoload=False)
