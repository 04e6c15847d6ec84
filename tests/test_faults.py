"""Fault injection: a tiny-model run SIGKILLed at points drawn at random (seeded) from every place it can die
(a decoding step, between backward and the optimizer step, inside an atomic JSON write, half-way through a JSONL
line, while publishing a checkpoint), then `harness run --resume`d, ends with exactly the metrics, samples and step
logs of a run that was never interrupted: nothing lost, nothing duplicated."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tiny_runs import RUN, only_run
from tiny_runs import harness as _harness
from tiny_runs import outcome as _outcome

KILLS_PER_POINT = {"generate": 2, "optimizer_step": 2, "json_write": 2, "jsonl_write": 1, "checkpoint": 1}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, tiny_policy_spec):
    """An uninterrupted run, and how often it reaches each fault point."""
    out = tmp_path_factory.mktemp("baseline")
    log = out / "points.log"
    done = _harness([*RUN, "--out", str(out / "runs")], HARNESS_FAULT_LOG=str(log))
    assert done.returncode == 0, done.stderr[-2000:]
    return _outcome(only_run(out / "runs")), Counter(log.read_text().split())


def _kill_points(counts: Counter) -> list[tuple[str, int]]:
    """For each point, hit numbers drawn at random (seed 0), one from each equal slice of the run's hits, so the
    kills spread over the first evaluation, training and the last evaluation. JSON writes start at the 3rd: a run
    killed before its manifest is first written has nothing to resume (the resume command says so in one line)."""
    rng = random.Random(0)
    points = []
    for point, kills in KILLS_PER_POINT.items():
        first = 3 if point == "json_write" else 1
        assert counts[point] >= first + kills - 1, f"the run reaches {point} only {counts[point]} times"
        edges = [first + round(i * (counts[point] - first + 1) / kills) for i in range(kills + 1)]
        points += [(point, rng.randrange(lo, hi)) for lo, hi in itertools.pairwise(edges)]
    return points


def _kill_and_resume(point: str, n: int, out: Path, expected: dict) -> str:
    """One kill point: the run killed there, resumed, and compared with the uninterrupted run."""
    killed = _harness([*RUN, "--out", str(out)], HARNESS_FAULT=f"{point}:{n}")
    assert killed.returncode == -9, f"{point}:{n} was not killed: rc {killed.returncode}"
    (folder,) = (p for p in out.iterdir() if p.is_dir())
    resumed = _harness(["run", "--resume", str(folder), "--threads", "1"])
    assert resumed.returncode == 0, f"{point}:{n}: {resumed.stderr[-2000:]}"
    got = _outcome(folder)
    for part in ("metrics", "samples.jsonl", "steps.jsonl"):
        assert got[part] == expected[part], f"{point}:{n}: {part} differs after resume"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumed"]) == 1
    return f"{point}:{n}"


def test_killed_runs_resume_to_identical_results(baseline, tmp_path):
    expected, counts = baseline
    # two kill points at a time: each run is one thread (RUN), so they do not change each other's results
    with ThreadPoolExecutor(max_workers=2) as pool:
        tried = list(
            pool.map(
                lambda kill: _kill_and_resume(*kill, tmp_path / f"{kill[0]}-{kill[1]}", expected),
                _kill_points(counts),
            )
        )
    print(f"\n{len(tried)} kill points, all resumed to identical metrics: {', '.join(tried)}")
    assert len(tried) == sum(KILLS_PER_POINT.values())


def test_resume_refuses_what_it_cannot_continue(tmp_path, baseline):
    assert _harness(["run", "--resume", str(tmp_path / "nowhere")]).stderr.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _harness(["run", "--resume", str(empty)])
    assert done.returncode == 2 and "no readable manifest.json" in done.stderr
    done = _harness(["run", "--resume", str(empty), "--steps", "4"])
    assert done.returncode == 2 and "drop --steps" in done.stderr
