"""The tiny-model run that the fault-injection and reliability tests kill, resume and race, and how they compare
two runs' results: everything but wall-clock fields must be equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RUN = [
    "run",
    "--model",
    "tiny-random",
    "--trainer",
    "grpo",
    "--steps",
    "3",
    "--limit",
    "2",
    "--train-limit",
    "4",
    "--k",
    "1,2",
    "--threads",
    "1",
    "--set",
    "trainer.group_size=2",
    "--set",
    "trainer.prompts_per_step=1",
    "--set",
    "trainer.max_new_tokens=4",
    "--set",
    "searcher.n=2",
    "--set",
    "searcher.max_new_tokens=4",
    "--checkpoint-every",
    "1",
]  # a checkpoint after every step (default: 10 minutes), so kills land between them
# An evaluation only (no training, no curves to draw): the run the report tests copy into many folders.
EVAL = [
    "run",
    "--model",
    "tiny-random",
    "--trainer",
    "none",
    "--limit",
    "2",
    "--k",
    "1,2",
    "--threads",
    "1",
    "--set",
    "searcher.n=2",
    "--set",
    "searcher.max_new_tokens=4",
]
CEILING = 300  # seconds: a hang, never a speed


def harness_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1", **extra}


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
