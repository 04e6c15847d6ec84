"""The unbiased estimators against hand-computed values, brute force over all k-subsets, and their properties;
the `evaluate` modules load offline by path and agree with the pure functions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import combinations, pairwise
from math import comb
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.metrics import (
    best_at_k,
    best_at_ks,
    evaluate_module_path,
    mean_best_at_k,
    mean_pass_at_k,
    pass_at_k,
    pass_at_ks,
    reportable_ks,
    rollout_outcomes,
    set_best_at_k,
    set_best_at_ks,
    set_level_ks,
    set_pass_at_k,
    set_pass_at_ks,
)


def brute_pass(n: int, c: int, k: int) -> float:
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(combinations(outcomes, k))
    return sum(max(s) for s in subsets) / len(subsets)


def brute_best(scores: list[float], k: int) -> float:
    subsets = list(combinations(scores, k))
    return sum(max(s) for s in subsets) / len(subsets)


def test_pass_at_k_hand_computed():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - comb(3, 2) / comb(5, 2)) == pytest.approx(0.7)
    assert pass_at_k(4, 0, 3) == 0.0
    assert pass_at_k(4, 4, 3) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 4, 2) == 1.0  # fewer failures than draws: a success is certain


def test_best_at_k_hand_computed():
    assert best_at_k([0.9, 0.1, 0.5], 2) == pytest.approx((0.5 * 1 + 0.9 * 2) / 3)
    assert best_at_k([0.1, 0.5, 0.9], 1) == pytest.approx(0.5)
    assert best_at_k([0.1, 0.5, 0.9], 3) == pytest.approx(0.9)
    assert best_at_k([-2.0, -1.0], 1) == pytest.approx(-1.5)


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_matches_brute_force(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass(n, c, k))


@given(st.lists(st.floats(-10, 10), min_size=1, max_size=8), st.data())
def test_best_at_k_matches_brute_force(scores, data):
    k = data.draw(st.integers(1, len(scores)))
    assert best_at_k(scores, k) == pytest.approx(brute_best(scores, k), abs=1e-9)


@given(st.integers(1, 300), st.data())
def test_pass_at_k_monotone_and_bounded(n, data):
    c = data.draw(st.integers(0, n))
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b + 1e-12 for a, b in pairwise(values))
    assert values[0] == pytest.approx(c / n)


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=40))
def test_best_at_k_monotone_in_k(scores):
    values = [best_at_k(scores, k) for k in range(1, len(scores) + 1)]
    assert all(a <= b + 1e-9 for a, b in pairwise(values))
    assert values[0] == pytest.approx(sum(scores) / len(scores), abs=1e-9)
    assert values[-1] == max(scores)


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=60), st.data())
def test_best_at_k_of_binary_scores_is_pass_at_k(scores, data):
    k = data.draw(st.integers(1, len(scores)))
    assert best_at_k(scores, k) == pytest.approx(pass_at_k(len(scores), int(sum(scores)), k), abs=1e-12)


def test_large_n_is_stable():
    assert pass_at_k(4000, 1, 2000) == pytest.approx(0.5)
    assert pass_at_k(4000, 3, 2000) == pytest.approx(1 - comb(3997, 2000) / comb(4000, 2000))
    scores = [1.0] + [0.0] * 3999
    assert best_at_k(scores, 2000) == pytest.approx(0.5)
    assert best_at_k(scores, 4000) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(4, 1, 5), (4, 1, 0), (4, 5, 2), (4, -1, 2)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_best_at_k_rejects_k_above_n():
    with pytest.raises(ValueError):
        best_at_k([0.1, 0.2], 3)


def test_aggregates_report_only_k_up_to_n():
    per_problem = [(4, 1), (4, 0), (6, 6)]
    assert mean_pass_at_k(per_problem, 2) == pytest.approx((pass_at_k(4, 1, 2) + 0 + 1) / 3)
    assert list(pass_at_ks(per_problem, [8, 1, 4, 4])) == [1, 4]  # 8 > the fewest samples (4): left out
    assert reportable_ks([16, 2, 1, 2], 8) == [1, 2]
    scores = [[0.1, 0.5, 0.9], [1.0, 0.0, 0.0, 0.0]]
    assert mean_best_at_k(scores, 2) == pytest.approx(((0.5 + 1.8) / 3 + 0.5) / 2)
    assert best_at_ks(scores, [1, 3, 4]) == {1: pytest.approx((0.5 + 0.25) / 2), 3: pytest.approx((0.9 + 0.75) / 2)}
    with pytest.raises(ValueError):
        pass_at_ks(per_problem, [5])
    with pytest.raises(ValueError):
        mean_pass_at_k([], 1)


# -- set-level pass@k / best@k: the rollout of M answers is the unit ----------------------------------------------


def brute_set(rollouts: list[list[float]], k: int, m: int) -> float:
    """Mean, over every choice of k/m of the rollouts, of the best answer among them (1/0 answers: pass@k)."""
    subsets = list(combinations(rollouts, k // m))
    return sum(max(max(r) for r in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize(
    ("rollouts", "pooled", "set_level"),
    [
        ([[1, 0, 0, 0], [1, 0, 0, 0]], 1 - comb(6, 4) / comb(8, 4), 1.0),  # 0.786 pooled; every 4-answer set succeeds
        ([[1, 1, 1, 1], [0, 0, 0, 0]], 1 - comb(4, 4) / comb(8, 4), 0.5),  # 0.986 pooled; half the sets succeed
    ],
)
def test_set_level_pass_at_k_hand_computed(rollouts, pooled, set_level):
    answers = [a for r in rollouts for a in r]
    assert pass_at_k(8, sum(answers), 4) == pytest.approx(pooled)
    assert round(pooled, 3) in (0.786, 0.986)
    successful = sum(any(r) for r in rollouts)
    assert set_pass_at_k(2, successful, 4, 4) == set_level == brute_set(rollouts, 4, 4)
    assert set_best_at_k([max(r) for r in rollouts], 4, 4) == set_level
    assert set_pass_at_k(2, successful, 8, 4) == 1.0


def test_set_level_hand_computed_with_three_rollouts_of_two():
    # rollouts (0, 1), (0, 0), (0.5, 0.25): bests 1, 0, 0.5. pass@2 (one rollout) = 1/3; pass@4 (two) =
    # 1 - C(2, 2)/C(3, 2) = 2/3; best@2 = mean best 0.5; best@4 = mean of max over pairs (1 + 1 + 0.5)/3
    rollouts = [[0.0, 1.0], [0.0, 0.0], [0.5, 0.25]]
    bests = [max(r) for r in rollouts]
    assert set_pass_at_k(3, 1, 2, 2) == pytest.approx(1 / 3)
    assert set_pass_at_k(3, 1, 4, 2) == pytest.approx(2 / 3)
    assert set_best_at_k(bests, 2, 2) == pytest.approx(0.5)
    assert set_best_at_k(bests, 4, 2) == pytest.approx(2.5 / 3) == pytest.approx(brute_set(rollouts, 4, 2))
    assert set_pass_at_ks([(3, 1), (3, 3)], [1, 2, 3, 4, 6, 8], 2) == {
        2: pytest.approx((1 / 3 + 1) / 2),
        4: pytest.approx((2 / 3 + 1) / 2),
        6: 1.0,
    }
    assert set_best_at_ks([bests], [2, 3, 6], 2) == {2: pytest.approx(0.5), 6: 1.0}
    with pytest.raises(ValueError, match="multiple of m=2"):
        set_pass_at_k(3, 1, 3, 2)
    with pytest.raises(ValueError, match="multiple of m=2"):
        set_best_at_k(bests, 1, 2)
    with pytest.raises(ValueError, match="multiple of m=2"):
        set_pass_at_ks([(3, 1)], [1, 3], 2)


@given(
    st.integers(1, 4),
    st.lists(st.lists(st.sampled_from([0.0, 0.25, 1.0]), min_size=4, max_size=4), min_size=1, max_size=6),
    st.data(),
)
def test_set_level_matches_brute_force_over_rollouts(m, rows, data):
    rollouts = [row[:m] for row in rows]
    j = data.draw(st.integers(1, len(rollouts)))
    successes = [[float(a >= 1.0) for a in r] for r in rollouts]
    assert set_pass_at_k(len(rollouts), sum(any(r) for r in successes), j * m, m) == pytest.approx(
        brute_set(successes, j * m, m), abs=1e-12
    )
    assert set_best_at_k([max(r) for r in rollouts], j * m, m) == pytest.approx(
        brute_set(rollouts, j * m, m), abs=1e-12
    )


def test_set_level_ks():
    assert set_level_ks([1, 4, 8, 16, 4], 4, 3) == [4, 8]  # 16 / 4 = 4 rollouts > 3
    assert set_level_ks([1, 2, 3], 4, 8) == []
    assert set_level_ks([16, 2, 1, 2], 1, 8) == reportable_ks([16, 2, 1, 2], 8)


def record(rollout, success, scalar, **extra):
    return {"rollout_index": rollout, "success": success, "scalar": scalar, **extra}


def test_rollout_outcomes_follow_best_of_k_rules():
    records = [
        record(0, False, 0.5),
        record(0, True, 1.5),  # succeeds, best 1.5
        record(1, False, None, error="boom"),
        record(1, False, 0.0, missing=True),  # raised -> floor; missing: never
        record(2, False, -1.0),
        record(2, False, 0.2),
        record(3, True, 1.5),  # cut short (n not a multiple of m): left out
    ]
    # floor = the lowest known scalar, -1.0 (as pooled best@k fills it); rollout 1's only written answer raised
    assert rollout_outcomes(records, 2) == (3, 1, [1.5, -1.0, 0.2])
    everything_missing = [
        record(0, False, 0.0, missing=True),
        record(0, False, 0.0, missing=True),
        record(1, False, -2.0),
        record(1, False, -3.0),
    ]
    assert rollout_outcomes(everything_missing, 2) == (2, 0, [0.0, -2.0])  # an empty rollout scores 0, as in VPO
    with pytest.raises(KeyError):
        rollout_outcomes([{"success": True, "scalar": 1.0}] * 2, 2)  # m > 1 needs rollout_index


@given(
    st.lists(
        st.lists(st.tuples(st.booleans(), st.one_of(st.none(), st.floats(-5, 5))), min_size=1, max_size=9),
        min_size=1,
        max_size=5,
    ),
    st.data(),
)
def test_with_m_1_set_level_is_the_per_sample_estimator_exactly(problems, data):
    """M = 1: rollout_outcomes + set_*_at_ks give the per-sample figures value for value, scorer errors included."""
    records = [[{"success": ok, "scalar": x, "rollout_index": i} for i, (ok, x) in enumerate(p)] for p in problems]
    outcomes = [rollout_outcomes(rs, 1) for rs in records]
    counts = [(len(rs), sum(r["success"] for r in rs)) for rs in records]
    assert [(r, c) for r, c, _ in outcomes] == counts
    floors = [min((r["scalar"] for r in rs if r["scalar"] is not None), default=0.0) for rs in records]
    filled = [[f if r["scalar"] is None else r["scalar"] for r in rs] for rs, f in zip(records, floors, strict=True)]
    assert [b for _, _, b in outcomes] == filled
    ks = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=4))
    if reportable_ks(ks, min(n for n, _ in counts)):
        assert set_pass_at_ks([(r, c) for r, c, _ in outcomes], ks, 1) == pass_at_ks(counts, ks)
        assert set_best_at_ks([b for _, _, b in outcomes], ks, 1) == best_at_ks(filled, ks)


def test_evaluate_module_path():
    assert Path(evaluate_module_path("pass_at_k"), "pass_at_k.py").is_file()
    with pytest.raises(ValueError, match="available: best_at_k, pass_at_k"):
        evaluate_module_path("nope")


_LOAD_OFFLINE = """
import json, sys, evaluate
from harness.metrics import evaluate_module_path
p = evaluate.load(evaluate_module_path("pass_at_k"), keep_in_memory=True)
b = evaluate.load(evaluate_module_path("best_at_k"), keep_in_memory=True)
out = {
    "pass": p.compute(successes=[[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 0, 1, 0]], k=[1, 2, 4, 8]),
    "pass_int": p.compute(successes=[[1, 0, 0]], k=2),
    "best": b.compute(scores=[[0.1, 0.5, 0.9], [0.0, 1.0, 0.25]], k=[1, 2, 3]),
}
json.dump(out, sys.stdout)
"""


def test_evaluate_modules_load_offline_and_agree(tmp_path):
    # A fresh interpreter: evaluate reads its offline flags and module cache path once, at import.
    repo = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _LOAD_OFFLINE], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    per_problem = [(4, 2), (4, 0), (5, 3)]
    assert out["pass"] == pytest.approx({f"pass@{k}": mean_pass_at_k(per_problem, k) for k in (1, 2, 4)})
    assert out["pass_int"] == pytest.approx({"pass@2": pass_at_k(3, 1, 2)})
    scores = [[0.1, 0.5, 0.9], [0.0, 1.0, 0.25]]
    assert out["best"] == pytest.approx({f"best@{k}": mean_best_at_k(scores, k) for k in (1, 2, 3)})
