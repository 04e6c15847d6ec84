"""Advantages and losses against hand-computed tensors."""

from __future__ import annotations

import math

import pytest
import torch

from harness.trainers.advantages import dr_grpo, group_relative, grpo
from harness.trainers.losses import aggregate, clipped_surrogate, k3_kl, normalise


def test_group_relative_hand_computed():
    rewards = torch.tensor([3.0, 1.0, 2.0, 5.0, 5.0])
    groups = torch.tensor([0, 0, 0, 1, 1])
    adv = group_relative(rewards, groups)
    # group 0: mean 2, unbiased std 1 -> (r - 2) / (1 + 1e-4); group 1: no variance -> 0
    expected = torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0]) / torch.tensor([1 + 1e-4] * 3 + [1.0] * 2)
    assert torch.allclose(adv, expected, atol=1e-6)
    assert torch.allclose(group_relative(rewards, groups, scale=False), torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0]))


def test_estimators_weight_the_reward_vector():
    # rewards [B=4, M=1, N=2]: components (correct, format) weighted (1, 0.5)
    rewards = torch.tensor([[[1.0, 1.0]], [[0.0, 1.0]], [[0.0, 0.0]], [[1.0, 0.0]]])
    groups = torch.tensor([0, 0, 1, 1])
    weights = torch.tensor([1.0, 0.5])
    # scalars: 1.5, 0.5 | 0.0, 1.0 ; each group mean-centred: +0.5, -0.5 | -0.5, +0.5 ; std 0.7071
    assert torch.allclose(dr_grpo(rewards, groups, weights), torch.tensor([0.5, -0.5, -0.5, 0.5]))
    std = math.sqrt(0.5)
    assert torch.allclose(grpo(rewards, groups, weights), torch.tensor([0.5, -0.5, -0.5, 0.5]) / (std + 1e-4))


def test_clipped_surrogate_hand_computed():
    old = torch.zeros(1, 4)
    logp = torch.tensor([[0.0, 0.5, -0.5, -0.5]])
    adv = torch.tensor([[1.0, 1.0, 1.0, -1.0]])
    loss, clipped = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.2)
    r = math.exp(-0.5)
    # ratio 1 -> -A; ratio e^.5 with A>0 clipped at 1.2; ratio e^-.5 with A>0 unclipped; with A<0 clipped at 0.8
    assert torch.allclose(loss, torch.tensor([[-1.0, -1.2, -r, 0.8]]), atol=1e-6)
    assert clipped.tolist() == [[False, True, False, True]]
    # asymmetric clip (DAPO's clip-higher): the upper bound moves, the lower does not
    loss_hi, _ = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.28)
    assert torch.allclose(loss_hi[0, 1], torch.tensor(-1.28))
    # one advantage per row broadcasts to its tokens
    per_row, _ = clipped_surrogate(logp, old, torch.tensor([1.0]), 0.2, 0.2)
    assert torch.allclose(per_row[0, :3], loss[0, :3])


def test_k3_kl_hand_computed():
    logp = torch.tensor([0.0, 0.0, -1.0])
    ref = torch.tensor([0.0, -1.0, 0.0])
    expected = torch.tensor([0.0, math.exp(-1) + 1 - 1, math.exp(1) - 1 - 1])
    assert torch.allclose(k3_kl(logp, ref), expected, atol=1e-6)
    assert (k3_kl(torch.randn(100), torch.randn(100)) >= 0).all()


def test_loss_normalisations_hand_computed():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert aggregate(per_token, mask, "sequence", max_len=5).item() == pytest.approx((6 / 3 + 4 / 1) / 2)
    assert aggregate(per_token, mask, "token", max_len=5).item() == pytest.approx(10 / 4)
    assert aggregate(per_token, mask, "constant", max_len=5).item() == pytest.approx(10 / (2 * 5))
    with pytest.raises(ValueError, match="unknown loss_norm"):
        aggregate(per_token, mask, "bogus", max_len=5)


@pytest.mark.parametrize("norm", ["sequence", "token", "constant"])
def test_micro_batches_add_up_to_the_full_batch(norm):
    torch.manual_seed(0)
    per_token = torch.randn(6, 7)
    mask = (torch.rand(6, 7) > 0.3).long()
    mask[:, 0] = 1
    full = aggregate(per_token, mask, norm, max_len=7)
    parts = sum(
        normalise(
            (per_token[i : i + 2] * mask[i : i + 2]).sum(-1),
            mask[i : i + 2].sum(-1).float(),
            norm,
            batch_rows=6,
            batch_tokens=int(mask.sum()),
            max_len=7,
        )
        for i in range(0, 6, 2)
    )
    assert torch.allclose(full, parts, atol=1e-6)
