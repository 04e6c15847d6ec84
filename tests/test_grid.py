"""Grids of runs: cells named by configuration, same seeds and problems in every cell, finished cells skipped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.run import RunConfig
from harness.runner.experiment_file import load_experiment
from harness.runner.grid import cell_name, name_cells, run_grid
from harness.runner.run_settings import expand, split_names

TINY = {
    "task": {},
    "trainer": {"group_size": 2, "prompts_per_step": 1, "max_new_tokens": 4},
    "searcher": {"n": 2, "max_new_tokens": 4},
}


def _base(tmp_path, **kw):
    settings = {
        "model": "tiny-random",
        "steps": 1,
        "limit": 2,
        "train_limit": 2,
        "k": "1,2",
        "out": str(tmp_path),
        "options": json.loads(json.dumps(TINY)),
        **kw,
    }
    return RunConfig(**settings)


def test_expand_crosses_the_axes_and_names_cells_by_configuration(tmp_path):
    cells = name_cells(
        expand(_base(tmp_path), {"task": ["math", "code"], "trainer": ["none", "grpo"], "seed": ["0", "1"]})
    )
    assert len(cells) == 8
    assert [(c.task, c.trainer, c.seed) for c in cells[:3]] == [
        ("math", "none", 0),
        ("math", "none", 1),
        ("math", "grpo", 0),
    ]
    assert len({c.name for c in cells}) == 8
    assert cells[0].name.startswith("math-none-best-of-k-seed0-")
    # Where a cell runs (out, threads) does not change its name; what it computes (steps, an option) does.
    same = _base(tmp_path / "elsewhere", threads=3)
    assert cell_name(same) == cell_name(_base(tmp_path))
    assert cell_name(_base(tmp_path, steps=2)) != cell_name(_base(tmp_path))


def test_split_names_refuses_empty_items():
    assert split_names("grpo, vpo,grpo") == ["grpo", "vpo"]
    with pytest.raises(ValueError, match="empty name"):
        split_names("grpo,,vpo")


def test_experiment_file_is_read_and_checked(tmp_path):
    good = tmp_path / "exp.toml"
    good.write_text(
        'task = ["math"]\ntrainer = ["none", "grpo"]\nseed = [0, 1]\nsteps = 2\nk = [1, 2]\n'
        "[set.trainer]\ngroup_size = 2\n"
    )
    settings = load_experiment(good)
    assert settings["trainer"] == ["none", "grpo"] and settings["k"] == "1,2" and settings["steps"] == 2
    assert settings["options"] == {"task": {}, "trainer": {"group_size": 2}, "searcher": {}}
    bad = tmp_path / "bad.toml"
    for text, message in (
        ('trainr = "grpo"', "unknown setting"),
        ("steps = 'many'", "steps should be an integer"),
        ("task = [", "not valid"),
        ("[set.optimizer]\nlr = 1", "'set' must hold"),
    ):
        bad.write_text(text)
        with pytest.raises(ValueError, match=message):
            load_experiment(bad)
    yaml_file = tmp_path / "exp.yaml"
    yaml_file.write_text("trainer: [none]\nlimit: 3\n")
    assert load_experiment(yaml_file)["limit"] == 3
    with pytest.raises(FileNotFoundError):
        load_experiment(tmp_path / "missing.toml")


def test_grid_runs_cells_on_the_same_problems_and_skips_finished_ones(tmp_path, plugins, tiny_policy_spec):
    cells = name_cells(expand(_base(tmp_path), {"trainer": ["none", "grpo"]}))
    folders = run_grid(cells, plugins=plugins, echo=lambda _: None)
    assert [f.name for f in folders] == [c.name for c in cells]
    problems = []
    for folder in folders:
        samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
        phase = "eval" if "none" in folder.name else "before"
        problems.append(sorted({s["problem_id"] for s in samples if s["phase"] == phase}))
    assert problems[0] == problems[1]  # same seed -> same eval problems in every cell
    mtimes = [(f / "manifest.json").stat().st_mtime_ns for f in folders]
    lines = []
    run_grid(cells, plugins=plugins, echo=lines.append)
    assert [(f / "manifest.json").stat().st_mtime_ns for f in folders] == mtimes
    assert sum("complete, skipped" in line for line in lines) == 2


def test_an_unfinished_cell_is_moved_aside_and_rerun(tmp_path, plugins, tiny_policy_spec):
    (cell,) = name_cells(expand(_base(tmp_path, trainer="none"), {}))
    dead = tmp_path / str(cell.name)
    dead.mkdir()
    (dead / "manifest.json").write_text(json.dumps({"status": "running"}))
    run_grid([cell], plugins=plugins, echo=lambda _: None)
    assert json.loads((dead / "manifest.json").read_text())["status"] == "complete"
    assert len(list(tmp_path.glob(f"{cell.name}.incomplete-*"))) == 1  # the dead attempt is kept, not deleted


def test_cli_grid_killed_halfway_finishes_the_rest_on_rerun(tmp_path, tiny_policy_spec):
    """SIGKILL the CLI grid during its second cell; rerunning it skips the first cell and finishes the others."""
    out = tmp_path / "grid"
    exp = tmp_path / "exp.toml"
    exp.write_text(
        f'model = "tiny-random"\ntrainer = ["none", "grpo", "vpo"]\nsteps = 1\nlimit = 2\n'
        f'train_limit = 2\nk = "1,2"\nout = "{out}"\n'
        "[set.trainer]\ngroup_size = 2\nprompts_per_step = 1\nmax_new_tokens = 4\n"
        "[set.searcher]\nn = 2\nmax_new_tokens = 4\n"
    )
    env = {**os.environ, "HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "harness", "run", "--config", str(exp)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        manifests = list(out.glob("*/manifest.json"))
        if len(manifests) >= 2:  # the first cell is complete and the second has started
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the grid finished before it could be killed; make its cells slower"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = next(p for p in out.glob("*-none-*/manifest.json"))
    assert json.loads(first.read_text())["status"] == "complete"
    first_mtime = first.stat().st_mtime_ns

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "complete, skipped" in done.stdout
    assert first.stat().st_mtime_ns == first_mtime  # not redone
    finished = [p for p in out.glob("*/manifest.json") if ".incomplete-" not in str(p)]
    assert len(finished) == 3 and all(json.loads(p.read_text())["status"] == "complete" for p in finished)


def test_cli_refuses_a_broken_config_in_one_line(tmp_path, capsys):
    bad = tmp_path / "exp.toml"
    bad.write_text("steps = 'lots'\n")
    assert main(["run", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "steps should be an integer" in err
    assert main(["run", "--trainer", "grpo,nonsense", "--out", str(tmp_path), "--model", "tiny-random"]) == 2
    assert "nonsense" in capsys.readouterr().err
    # An option one cell's trainer does not take fails the grid before any cell runs.
    assert (
        main(
            [
                "run",
                "--trainer",
                "none,sft",
                "--set",
                "trainer.group_size=2",
                "--out",
                str(tmp_path),
                "--model",
                "tiny-random",
            ]
        )
        == 2
    )
    assert "unknown option group_size" in capsys.readouterr().err
    assert not list(tmp_path.glob("*/manifest.json"))


def test_results_land_in_the_store_beside_the_runs(tmp_path, plugins, tiny_policy_spec):
    import sqlite3

    (folder,) = run_grid(name_cells(expand(_base(tmp_path, trainer="none"), {})), plugins=plugins, echo=lambda _: None)
    conn = sqlite3.connect(tmp_path / "results.sqlite")
    assert conn.execute("SELECT name, status FROM runs").fetchall() == [(folder.name, "complete")]
    assert Path(conn.execute("SELECT run_dir FROM runs").fetchone()[0]) == folder.resolve()
