"""VPO's set-level estimator, its ablations and PKPO on hand-made reward matrices."""

from __future__ import annotations

from itertools import combinations, product
from math import comb

import pytest
import torch

from harness.metrics import pass_at_k
from harness.trainers.advantages import (
    dirichlet,
    group_relative,
    grpo,
    loo_max_at_k_advantages,
    max_at_k_rewards,
    multi_rlvr,
    pkpo,
    random_weights,
    set_reward,
    trade_offs,
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
    expected = torch.cat(
        [
            group_relative(torch.tensor([w0[0], w0[1]]), torch.tensor([0, 0])),
            group_relative(torch.tensor([w1[0], w1[1]]), torch.tensor([0, 0])),
        ]
    )
    uniform = random_weights(rewards, groups, weights, generator=torch.Generator().manual_seed(3), weighting="uniform")
    assert torch.allclose(uniform, expected)
    # "task" weighting: the same draws times n x the task's weights (2 x 1 here), which the group's std divides out
    assert torch.allclose(a, expected, atol=1e-3) and not torch.equal(a, uniform)


# maths: components (correct, boxed) weighted 1 and 0.5; one answer per rollout
MATH_WEIGHTS = torch.tensor([1.0, 0.5])
RIGHT_UNBOXED, WRONG_BOXED, RIGHT_BOXED, WRONG_UNBOXED = [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]


def test_task_weighted_trade_offs_centre_on_the_tasks_weights():
    active, drawn = trade_offs(torch.tensor([1.0, 0.0, 0.5]), 40_000, torch.Generator().manual_seed(0))
    assert active.tolist() == [True, False, True]
    assert torch.allclose(drawn.mean(0), torch.tensor([1.0, 0.5]), atol=0.01)
    _, uniform = trade_offs(torch.tensor([1.0, 0.0, 0.5]), 40_000, torch.Generator().manual_seed(0), "uniform")
    assert torch.allclose(uniform.sum(-1), torch.ones(40_000))
    with pytest.raises(ValueError, match="unknown trade-off weighting 'equal'"):
        trade_offs(MATH_WEIGHTS, 4, weighting="equal")


def test_with_one_answer_and_the_tasks_weights_vpo_and_its_ablations_are_grpo():
    rewards = torch.tensor([[RIGHT_UNBOXED], [WRONG_BOXED], [RIGHT_BOXED], [WRONG_UNBOXED]])
    groups = torch.tensor([0, 0, 0, 0])
    expected = grpo(rewards, groups, MATH_WEIGHTS)  # 1.0, 0.5, 1.5, 0.0, normalised
    assert expected.argsort().tolist() == [3, 1, 0, 2]
    assert torch.equal(vpo(rewards, groups, MATH_WEIGHTS, generator=torch.Generator().manual_seed(0)), expected)
    assert torch.equal(multi_rlvr(rewards, groups, MATH_WEIGHTS), expected)
    # the method's unweighted draws value both components alike: right-but-unboxed ties wrong-but-boxed
    unweighted = multi_rlvr(rewards, groups, MATH_WEIGHTS, weighting="uniform")
    assert unweighted[0] == unweighted[1] and not torch.equal(unweighted, expected)


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


def _brute_force_loo(scores: list[float], k: int) -> list[float]:
    """The leave-one-out advantages by their definition: k >= 2, over every k-subset S holding i, max(S) less the
    max of S without i; k = 1, (g_i - mean of the others) / n."""
    n = len(scores)
    if k == 1:
        return [(g - (sum(scores) - g) / (n - 1)) / n for g in scores]
    totals = [0.0] * n
    for subset in combinations(range(n), k):
        for i in subset:
            totals[i] += max(scores[j] for j in subset) - max(scores[j] for j in subset if j != i)
    return [t / comb(n, k) for t in totals]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_pkpo_leave_one_out_advantages_match_their_definition(k):
    scores = [0.3, 0.9, 0.1, 0.9, 0.5, 0.3]  # ties included: tied samples get equal advantages
    got = loo_max_at_k_advantages(torch.tensor(scores, dtype=torch.float64), k)
    assert torch.allclose(got, torch.tensor(_brute_force_loo(scores, k), dtype=torch.float64), atol=1e-12)
    assert float(got[1]) == pytest.approx(float(got[3]), abs=1e-12)
    assert float(got[0]) == pytest.approx(float(got[5]), abs=1e-12)
    with pytest.raises(ValueError, match="k=7"):
        loo_max_at_k_advantages(torch.ones(6), 7)


def test_pkpo_leave_one_out_binary_closed_form():
    n, correct = 6, [1, 0, 0, 1, 0, 0]
    c = sum(correct)
    for k in range(2, n + 1):
        got = loo_max_at_k_advantages(torch.tensor(correct, dtype=torch.float64), k)
        # a correct sample: the subsets where it is the only correct one; a wrong one can never top a subset
        expected = [comb(n - c, k - 1) / comb(n, k) if f else 0.0 for f in correct]
        assert got.tolist() == pytest.approx(expected, abs=1e-12)
    # k = 1: (g_i - mean g) / (n - 1)
    assert loo_max_at_k_advantages(torch.tensor(correct, dtype=torch.float64), 1).tolist() == pytest.approx(
        [(f - c / n) / (n - 1) for f in correct]
    )
    assert loo_max_at_k_advantages(torch.tensor([0.7]), 1).tolist() == pytest.approx([0.7])  # no other sample


ARM_REWARDS = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)  # ascending
THETA = torch.tensor([0.4, -0.3, -0.6], dtype=torch.float64)  # the best arm is the least likely


def _max_at_k(theta: torch.Tensor, k: int) -> torch.Tensor:
    """E[max of k iid draws] from softmax(theta) over ARM_REWARDS: sum_a r_a (F_a^k - F_{a-1}^k), F the CDF."""
    cdf = torch.cumsum(torch.softmax(theta, 0), 0)
    below = torch.cat([cdf.new_zeros(1), cdf[:-1]])
    return (ARM_REWARDS * (cdf**k - below**k)).sum()


def _expected_update(advantages_of, n: int = 4) -> torch.Tensor:
    """E over every outcome of n iid draws of sum_i A_i grad_theta log p(x_i), each outcome weighted by its exact
    probability; grad log softmax(theta)[x] = onehot(x) - p."""
    p = torch.softmax(THETA, 0)
    total = torch.zeros(3, dtype=torch.float64)
    for outcome in product(range(3), repeat=n):
        prob = torch.prod(p[list(outcome)])
        advantages = advantages_of(ARM_REWARDS[list(outcome)])
        scores = torch.eye(3, dtype=torch.float64)[list(outcome)] - p  # [n, 3]
        total += prob * (advantages[:, None] * scores).sum(0)
    return total


def _true_gradient(k: int) -> torch.Tensor:
    theta = THETA.clone().requires_grad_(True)
    _max_at_k(theta, k).backward()
    return theta.grad


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_pkpo_is_an_unbiased_estimate_of_the_max_at_k_gradient(k):
    """Exact expectation over all 3^4 outcomes of n = 4 samples from a 3-armed softmax policy: the estimator's
    expected policy gradient equals the gradient of max@k (torch autograd of the closed form) for every k <= n."""
    n = 4

    def estimator(values):
        return pkpo(
            values[:, None, None], torch.zeros(n, dtype=torch.long), torch.tensor([1.0], dtype=torch.float64), k=k
        )

    truth = _true_gradient(k)
    assert truth.abs().max() > 1e-3  # a gradient worth matching
    assert torch.allclose(_expected_update(estimator, n), truth, atol=1e-6, rtol=0)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_centring_by_the_group_mean_shrinks_the_gradient_by_1_minus_k_over_n(k):
    """What PKPO did before: the transformed rewards less their group mean. That baseline depends on every sample,
    so the expected update is (1 - k/n) times the gradient of max@k: 0.75, 0.5, 0.25 and 0 at n = 4."""
    n = 4

    def centred(values):
        transformed = max_at_k_rewards(values, k)
        return transformed - transformed.mean()

    truth = _true_gradient(k)
    got = _expected_update(centred, n)
    assert torch.allclose(got, (1 - k / n) * truth, atol=1e-9, rtol=0)
    # and the uncentred transformed rewards (no baseline at all) are unbiased, as the leave-one-out ones are
    assert torch.allclose(_expected_update(lambda v: max_at_k_rewards(v, k), n), truth, atol=1e-9, rtol=0)


def test_pkpo_works_per_group():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, 0.5, 0.0, 1.0, 0.0])[:, None, None]
    groups = torch.tensor([0, 0, 1, 0, 1, 0, 1, 1])
    adv = pkpo(rewards, groups, torch.tensor([1.0]), k=2)
    for g in (0, 1):
        members = groups == g
        assert torch.allclose(adv[members], loo_max_at_k_advantages(rewards[members, 0, 0], 2))
    # group 0 = [1, 0, 0, 0]: only the correct sample moves, by C(3, 1) / C(4, 2) = 1/2
    assert adv[groups == 0].tolist() == pytest.approx([0.5, 0.0, 0.0, 0.0])
    assert torch.equal(
        pkpo(torch.ones(4, 1, 1), torch.zeros(4, dtype=torch.long), torch.tensor([1.0]), k=4), torch.zeros(4)
    )  # nothing to tell apart: no update
