"""VPO's set-level estimator, its ablations and PKPO on hand-made reward matrices."""

from __future__ import annotations

from itertools import combinations
from math import comb

import pytest
import torch

from harness.metrics import pass_at_k
from harness.trainers.advantages import (
    dirichlet,
    group_relative,
    max_at_k_rewards,
    multi_rlvr,
    pkpo,
    random_weights,
    set_reward,
    vpo,
)

SPECIALISTS = [[1.0, 0.0], [0.0, 1.0]]  # one answer per component
GENERALISTS = [[0.5, 0.5], [0.5, 0.5]]  # the same mean per component, no trade-off covered


def test_dirichlet_points_lie_on_the_simplex_and_are_uniform():
    w = dirichlet(2, 20_000, torch.Generator().manual_seed(0))
    assert torch.allclose(w.sum(-1), torch.ones(20_000))
    assert (w >= 0).all() and abs(float(w[:, 0].mean()) - 0.5) < 0.01
    assert abs(float((w[:, 0] < 0.25).float().mean()) - 0.25) < 0.01  # Dirichlet(1,1): w1 ~ Uniform(0, 1)


def test_specialists_outrank_generalists_with_the_same_mean():
    rewards = torch.tensor([SPECIALISTS, GENERALISTS])
    # E[max(w1, 1 - w1)] with w1 ~ U(0, 1) is 3/4; the generalists score 1/2 under every w
    trade_offs = dirichlet(2, 20_000, torch.Generator().manual_seed(1))
    values = set_reward(rewards, trade_offs)
    assert values[0] == pytest.approx(0.75, abs=0.01) and values[1] == pytest.approx(0.5, abs=1e-6)
    groups, weights = torch.tensor([0, 0]), torch.tensor([1.0, 1.0])
    adv = vpo(rewards, groups, weights, generator=torch.Generator().manual_seed(2), draws=64)
    assert adv[0] > 0 > adv[1]
    # the ablation without random weights cannot tell them apart: both sets' best equal-weight answer is 1/2
    assert torch.allclose(multi_rlvr(rewards, groups, weights), torch.zeros(2))


def test_with_one_component_vpo_is_best_of_m():
    rewards = torch.tensor([[[0.2], [0.9], [0.1]], [[0.5], [0.4], [0.3]], [[0.0], [0.0], [1.0]]])
    groups, weights = torch.tensor([0, 0, 0]), torch.tensor([1.0])
    expected = group_relative(torch.tensor([0.9, 0.5, 1.0]), groups)
    assert torch.allclose(vpo(rewards, groups, weights, generator=torch.Generator().manual_seed(0)), expected)
    assert torch.allclose(multi_rlvr(rewards, groups, weights), expected)


def test_missing_answers_never_win_and_unweighted_components_are_ignored():
    # component 2 has weight 0: a set cannot win on it
    rewards = torch.tensor([[[0.0, 0.0, 9.0], [0.7, 0.0, 0.0]], [[0.6, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    present = torch.tensor([[True, True], [True, False]])
    weights = torch.tensor([1.0, 0.0, 0.0])  # one weighted component: set reward = best present answer on it
    adv = vpo(rewards, torch.tensor([0, 0]), weights, present=present, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(adv, group_relative(torch.tensor([0.7, 0.6]), torch.tensor([0, 0])))
    absent = torch.tensor([[False, False]])
    assert set_reward(torch.ones(1, 2, 1), torch.ones(1, 1), absent).item() == 0.0  # an empty set scores 0


def test_random_weights_use_one_trade_off_per_group():
    rewards = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 0.0]], [[0.0, 1.0]]])
    groups, weights = torch.tensor([0, 0, 1, 1]), torch.tensor([1.0, 1.0])
    a = random_weights(rewards, groups, weights, generator=torch.Generator().manual_seed(3))
    b = random_weights(rewards, groups, weights, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)  # seeded
    g = torch.Generator().manual_seed(3)
    w0, w1 = dirichlet(2, 1, g)[0], dirichlet(2, 1, g)[0]
    expected = torch.cat([group_relative(torch.tensor([w0[0], w0[1]]), torch.tensor([0, 0])),
                          group_relative(torch.tensor([w1[0], w1[1]]), torch.tensor([0, 0]))])
    assert torch.allclose(a, expected)


def _brute_force_max_at_k(scores: list[float], k: int) -> list[float]:
    n = len(scores)
    totals = [0.0] * n
    for subset in combinations(range(n), k):
        best = max(scores[i] for i in subset)
        for i in subset:
            totals[i] += best
    return [t / comb(n, k) for t in totals]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_pkpo_rewards_match_brute_force(k):
    scores = [0.3, 0.9, 0.1, 0.9, 0.5]
    got = max_at_k_rewards(torch.tensor(scores), k)
    assert torch.allclose(got, torch.tensor(_brute_force_max_at_k(scores, k)), atol=1e-6)


def test_pkpo_binary_closed_form():
    n, k, correct = 6, 3, [1, 0, 0, 1, 0, 0]
    c = sum(correct)
    got = max_at_k_rewards(torch.tensor(correct, dtype=torch.float32), k)
    for value, f in zip(got.tolist(), correct, strict=True):
        expected = k / n if f else k / n * pass_at_k(n - 1, c, k - 1)
        assert value == pytest.approx(expected, abs=1e-6)
    # the rewards' sum is k times the unbiased pass@k estimate
    assert float(got.sum()) == pytest.approx(k * pass_at_k(n, c, k), abs=1e-6)
    with pytest.raises(ValueError, match="k=7"):
        max_at_k_rewards(torch.ones(6), 7)


def test_pkpo_estimator_centres_per_group():
    rewards = torch.tensor([[[1.0]], [[0.0]], [[0.0]], [[0.0]]])
    adv = pkpo(rewards, torch.tensor([0, 0, 0, 0]), torch.tensor([1.0]), k=2)
    transformed = torch.tensor(_brute_force_max_at_k([1.0, 0.0, 0.0, 0.0], 2))
    assert torch.allclose(adv, transformed - transformed.mean(), atol=1e-6)
    assert adv[0] > 0 and adv.sum().abs() < 1e-6
