"""Evaluation during training (``--eval-every N``, harness/runner/during_training.py), through the CLI on the tiny
model: its points in steps.jsonl, metrics.json, the loggers and the report; training unchanged by it; a run killed
inside one of its evaluations resumes to exactly the points of a run never interrupted."""

from __future__ import annotations

import json

import pytest
from tiny_runs import harness, only_run, outcome, tiny_argv

from harness.cli import main

FOUR = tiny_argv(steps=4, checkpoint_every=1)  # tiny_runs.RUN over 4 steps
EVERY = [*FOUR, "--eval-every", "2", "--eval-every-limit", "1"]


def lines(path, **match):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in records if all(r.get(k) == v for k, v in match.items())]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, tiny_policy_spec):
    """A 4-step run evaluated every 2 steps, and where its fault points fall."""
    out = tmp_path_factory.mktemp("every")
    log = out / "points.log"
    done = harness([*EVERY, "--out", str(out / "runs")], HARNESS_FAULT_LOG=str(log))
    assert done.returncode == 0, done.stderr[-2000:]
    return only_run(out / "runs"), log.read_text().split()


def test_points_before_training_and_every_n_steps(evaluated, tmp_path):
    folder, _ = evaluated
    during = lines(folder / "steps.jsonl", stage="during")
    assert [d["step"] for d in during] == [0, 2, 4]  # optimizer steps taken
    assert all({"pass@1", "best@2", "seconds"} <= set(d) for d in during)
    assert [line["step"] for line in lines(folder / "steps.jsonl", stage="train")] == [0, 1, 2, 3]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["during/step"] == [0, 2, 4] and len(metrics["during/pass@1"]) == 3
    assert [e["step"] for e in lines(folder / "metrics.jsonl", stage="during")] == [0, 2, 4]  # the loggers' stream
    for step in (0, 2, 4):  # the first --eval-every-limit eval problems, at the searcher's n
        samples = lines(folder / "samples.jsonl", phase=f"during-{step}")
        assert len({s["problem_id"] for s in samples}) == 1 and len(samples) == 2

    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "report.md").read_text()
    table = md[md.index("Evaluation during training") :].splitlines()
    header = table[2].split(" | ")
    assert header[0] == "| step" and "pass@1" in header
    pass1 = header.index("pass@1")
    assert [row.split(" | ")[0] for row in table[4:7]] == ["| 0", "| 2", "| 4"]
    assert [float(row.split(" | ")[pass1]) for row in table[4:7]] == pytest.approx(metrics["during/pass@1"], abs=5e-4)
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<h4>Evaluation during training</h4>" in page and 'class="during"' in page


def test_training_is_the_same_without_it(evaluated, tmp_path):
    folder, _ = evaluated
    plain = harness([*FOUR, "--out", str(tmp_path)])
    assert plain.returncode == 0, plain.stderr[-2000:]
    expected = outcome(only_run(tmp_path))
    got = outcome(folder)
    assert [s for s in got["steps.jsonl"] if s["stage"] == "train"] == expected["steps.jsonl"]
    assert [s for s in got["samples.jsonl"] if s["phase"] == "train"] == [
        s for s in expected["samples.jsonl"] if s["phase"] == "train"
    ]
    assert {k: v for k, v in got["metrics"].items() if not k.startswith("during/")} == expected["metrics"]


def test_a_run_killed_inside_an_evaluation_resumes_without_losing_or_repeating_a_point(evaluated, tmp_path):
    folder, points = evaluated
    # the first decoding step after the second optimizer step: the evaluation at step 2 (its checkpoint not yet
    # written; the last one, after step 1, holds the point at step 0)
    second = [i for i, p in enumerate(points) if p == "optimizer_step"][1]
    kill = points[:second].count("generate") + 1
    assert points[second:].index("generate") < points[second:].index("checkpoint")
    killed = harness([*EVERY, "--out", str(tmp_path)], HARNESS_FAULT=f"generate:{kill}")
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed_folder = only_run(tmp_path)
    assert [d["step"] for d in lines(resumed_folder / "steps.jsonl", stage="during")] == [0]
    resumed = harness(["run", "--resume", str(resumed_folder), "--threads", "1"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert outcome(resumed_folder) == outcome(folder)
    assert [d["step"] for d in lines(resumed_folder / "steps.jsonl", stage="during")] == [0, 2, 4]


def test_refused_when_nothing_trains(tmp_path, capsys):
    assert (
        main(["run", "--model", "tiny-random", "--trainer", "none", "--eval-every", "2", "--out", str(tmp_path)]) == 2
    )
    assert "--eval-every evaluates during training" in capsys.readouterr().err
    assert main(["run", "--model", "tiny-random", "--eval-every", "-1", "--out", str(tmp_path)]) == 2
    assert "--eval-every should be an integer >= 0" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
