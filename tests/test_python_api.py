"""The Python API (harness/api.py) on the tiny model: GRPO from a prompt-only conversational ``datasets.Dataset`` and
two Python reward functions with TRL's option names (examples/trl_style_grpo.py, run as a notebook would), the
report naming the data, and a killed run resumed by passing the same objects again."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from safetensors.torch import load_file
from tiny_runs import CEILING, harness_env

import harness

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "trl_style_grpo.py"
TRL_NAMES = ("learning_rate", "num_generations", "max_completion_length")


def _example():
    spec = importlib.util.spec_from_file_location("trl_style_grpo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _weights(folder: Path) -> dict:
    return {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in load_file(str(f)).items()}


def test_import_harness_stays_cheap():
    code = "import sys, harness; harness.train; print('torch' in sys.modules, 'datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CEILING, check=True)
    assert out.stdout.split() == ["False", "False"]  # harness.train is there; nothing heavy was imported for it


@pytest.mark.runs  # a whole run through examples/trl_style_grpo.py, which tests/conftest.py cannot see
def test_grpo_from_a_dataset_and_python_rewards_with_trl_names_then_the_report(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    example = _example()
    try:
        result = example.main("tiny-random", steps=2, out=str(tmp_path / "runs"), tiny=True)
    except ValueError as exc:  # TRL's option names are read by harness/plugins/options.py (another change)
        if "unknown option" in str(exc) and any(name in str(exc) for name in TRL_NAMES):
            pytest.skip(f"TRL option aliases not in harness/plugins/options.py yet: {exc}")
        raise
    assert result.status == "complete"
    metrics = result.metrics
    assert len(metrics["train/reward/brevity"]) == 2 and len(metrics["train/reward/mentions_thing"]) == 2
    assert {"before/pass@1", "after/mean_reward/brevity", "after/mean_reward/success"} <= set(metrics)
    assert result.manifest["resolved_options"]["trainer"]["group_size"] == 2  # num_generations, by its TRL name
    source = Path(result.manifest["model"]["source"])
    before, after = _weights(source), _weights(result.run_dir / "model")
    assert any(not (before[k] == after[k]).all() for k in before if k in after)  # the policy trained
    functions = result.manifest["task"]["reward_functions"]
    assert [f["spec"] for f in functions] == ["@brevity", "@mentions_thing"]
    assert functions[0]["function"] == "trl_style_grpo.brevity"
    card = result.manifest["task"]["data_card"]
    assert card["name"].startswith("in-memory data-")
    assert card["size"] == result.manifest["task"]["data_source"]["eval_rows"]  # the split's rows (--limit: fewer)
    rows = json.loads((tmp_path / "runs" / "report" / "leaderboard.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert rows and all(card["name"] in row["dataset"] for row in rows)


KILLED = """
import sys
sys.path.insert(0, {examples!r})
import harness, trl_style_grpo as ex

harness.train(
    "tiny-random", ex.dataset, [ex.brevity, ex.mentions_thing], success="brevity>=0.5", steps=3, out={out!r},
    lr=1e-4, group_size=2, max_new_tokens=4, prompts_per_step=1, limit=2, train_limit=4, k=1, threads=1,
    save_model=False, searcher_options={{"n": 2, "max_new_tokens": 4}}, run_options={{"checkpoint_every": 1}},
)
"""


def test_a_run_given_python_objects_resumes_when_they_are_passed_again(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    out = tmp_path / "runs"
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED.format(examples=str(EXAMPLE.parent), out=str(out))))
    killed = subprocess.run(
        [sys.executable, str(script)],
        env=harness_env(HARNESS_FAULT="optimizer_step:2"),
        capture_output=True,
        text=True,
        timeout=CEILING,
    )
    assert killed.returncode != 0
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and (p / "manifest.json").exists()]
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"
    # without the objects (the command line, another process): one line saying how to resume it
    cli = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--resume", str(run_dir)],
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=CEILING,
    )
    assert cli.returncode != 0
    assert "no Python function registered as '@brevity'" in cli.stderr
    assert "harness.train(..., resume=RUN_DIR)" in cli.stderr
    example = _example()
    result = harness.train(
        "tiny-random",
        example.dataset,
        [example.brevity, example.mentions_thing],
        resume=run_dir,
        verbose=False,
    )
    assert result.status == "complete" and result.run_dir == run_dir
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if s.get("stage") == "train"] == [0, 1, 2]
