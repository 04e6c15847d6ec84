"""Evaluation on every rank: best-of-k and evolve under `accelerate launch` with two CPU processes (gloo) split the
eval problems between the ranks and give the one-process run's figures and samples at the same seed.

Three problems over two ranks (2 + 1: a share need not be even). The run in one process and the same run under
the launcher must write the same samples in the same order (rank 0 writes the other rank's after its own) and the
same metrics, every figure but wall-clock time; evolve's per-problem curves too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from launchers import accelerate, check, only_run
from tiny_runs import tiny_argv

pytestmark = pytest.mark.runs  # ranks as processes: not in the quick lane

SEARCHERS = {
    "best-of-k": {"searcher.n": 3, "searcher.max_new_tokens": 6},
    "evolve": {"searcher.seeds": 2, "searcher.children": 2, "searcher.calls": 6, "searcher.max_new_tokens": 6},
}


def _outcome(folder: Path) -> dict:
    def clean(row):
        return {k: v for k, v in row.items() if "seconds" not in k and "time/" not in k}

    curves = sorted(folder.glob("evolve/*/curve.json"))
    return {
        "samples": [clean(json.loads(x)) for x in (folder / "samples.jsonl").read_text().splitlines()],
        "metrics": clean(json.loads((folder / "metrics.json").read_text())),
        "curves": [json.loads(p.read_text()) for p in curves],
    }


@pytest.mark.parametrize("searcher", sorted(SEARCHERS))
def test_two_ranks_evaluate_as_one_process_does(searcher, tmp_path, tiny_policy_spec):
    argv = tiny_argv("none", searcher=searcher, limit=3, k=1, threads=None, sets=SEARCHERS[searcher])
    check([sys.executable, "-m", "harness", *argv, "--out", str(tmp_path / "one")])
    check(accelerate(*argv, "--out", str(tmp_path / "two")))
    folder = only_run(tmp_path / "two")
    assert json.loads((folder / "manifest.json").read_text())["processes"] == 2
    one, two = _outcome(only_run(tmp_path / "one")), _outcome(folder)
    assert len({s["problem_id"] for s in two["samples"]}) == 3
    assert two["samples"] == one["samples"]
    assert two["metrics"] == one["metrics"]
    assert two["curves"] == one["curves"]
