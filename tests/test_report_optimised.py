"""The report says what each run optimised (harness/report/optimised.py): the task's reward components and
weights, the --reward functions and theirs, the package behind every plugin (loggers included, recorded in the
manifest), the warm-up's outcome and the run's warnings; through the CLI on the tiny model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tiny_runs import tiny_argv

from harness.cli import main
from harness.report.optimised import what_was_optimised

REWARDS = """
def f(prompt, completion, reference):
    return float(len(completion) < 20)
"""

LOGGER = """
from harness.hookspecs import hookimpl


class Quiet:
    def __init__(self, run_dir, config):
        pass

    def log(self, metrics, step, stage):
        pass

    def close(self):
        pass


@hookimpl
def harness_register_loggers(registry):
    registry.add("quiet", Quiet, "records nothing (a --plugin file's logger)")
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's folder, as the working directory, with a reward module and a logger plugin file; what importing
    them adds to sys.path and sys.modules is undone afterwards."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "m.py").write_text(REWARDS)
    (work / "quiet_logger.py").write_text(LOGGER)
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in ("m", "quiet_logger"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield work
    for name in ("m", "quiet_logger"):
        sys.modules.pop(name, None)


def test_the_report_names_the_added_reward_and_its_weight(folder, tiny_policy_spec):
    out = folder / "runs"
    argv = tiny_argv(train_limit=2, k=1, threads=None, sets={"searcher.n": 1}, out=out)
    assert main([*argv, "--reward", "m:f=0.5", "--plugin", "./quiet_logger.py", "--log", "quiet"]) == 0
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    manifest = json.loads((run / "manifest.json").read_text())
    # the package behind every plugin the run used, loggers and the trainer's estimator included
    packages = manifest["plugin_packages"]
    assert packages["task:math"].startswith("vector-harness ") and packages["trainer:grpo"] == packages["task:math"]
    assert packages["logger:quiet"] == str(folder / "quiet_logger.py")  # a --plugin file: its path
    assert manifest["plugins"]["loggers"] == [
        {"name": "jsonl", "plugin": "builtin:harness.store.loggers"},
        {"name": "quiet", "plugin": "local:./quiet_logger.py"},
    ]
    assert {"kind": "advantage", "name": "grpo", "plugin": "builtin:harness.trainers"} in manifest["plugins"]["others"]
    assert packages["advantage:grpo"].startswith("vector-harness ")

    # what the report must repeat: a warm-up's outcome and a warning, as a run records them
    metrics = json.loads((run / "metrics.json").read_text())
    metrics.update({"warmup/steps": 3, "warmup/well_formed_before": 0.25, "warmup/well_formed_after": 0.75})
    (run / "metrics.json").write_text(json.dumps(metrics))
    manifest["warnings"] = ["grpo step 0: a <b> warning"]
    (run / "manifest.json").write_text(json.dumps(manifest))

    assert main(["report", str(out), "--out", str(folder / "report")]) == 0
    md = (folder / "report" / "report.md").read_text()
    section = md[md.index(f"### {run.name}") :]
    assert "Reward: 1 x correct + 0.5 x boxed + 0 x lenient_correct + 0.5 x f" in section
    assert f"| f | 0.5 | --reward m:f ({folder / 'm.py'}) |" in section
    assert "| correct | 1 | task math (vector-harness " in section
    assert f"logger `quiet` ({folder / 'quiet_logger.py'})" in section and "advantage `grpo` (vector-harness" in section
    assert "format warm-up: 25% -&gt; 75% well-formed check rollouts in 3 SFT steps." in section  # escaped
    assert "1 warning(s)" in section and "- `" + run.name + "`: grpo step 0: a &lt;b&gt; warning" in md
    page = (folder / "report" / "index.html").read_text()
    assert f'<td>f</td><td class="num">0.5</td><td>--reward m:f ({folder / "m.py"})</td>' in page
    assert "0.5 x f</p>" in page and "format warm-up: 25% -&gt; 75%" in page
    assert "<li>warning: grpo step 0: a &lt;b&gt; warning</li>" in page


def test_a_run_without_the_record_or_with_a_broken_one_says_what_it_can():
    old = {
        "task": {"name": "math", "reward_weights": {"correct": 1.0}},
        "plugins": {"task": {"name": "math", "plugin": "builtin:harness.tasks"}},
    }
    got = what_was_optimised(old)  # before plugin_packages: the registering plugin stands in
    assert got["formula"] == "1 x correct" and got["terms"][0]["source"] == "task math"
    assert got["plugins"] == [{"kind": "task", "name": "math", "plugin": "builtin:harness.tasks", "package": None}]
    broken = {"task": "math", "plugins": [1], "plugin_packages": 3, "resolved_options": {"trainer": []}}
    assert what_was_optimised(broken) == {"formula": "", "terms": [], "plugins": []}
    odd = {
        "task": {"reward_weights": {"a": "heavy"}},
        "resolved_options": {"trainer": {"behaviour": "concise", "behaviour_weight": "0.5"}},
    }
    got = what_was_optimised(odd)
    assert got["formula"] == "0.5 x behaviour/concise" and got["terms"][0]["shown"] == "heavy"
