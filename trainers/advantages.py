"""Advantage estimators: (rewards [B, M, N], groups [B], weights [N]) -> advantages [B].

B rollouts, M answers per rollout (1 unless a trainer asks for multi-answer rollouts), N reward components.
The reward stays a vector until here: an estimator decides how to turn it into one number per rollout, so VPO's
set-level estimator is just another entry in this registry. ``groups[b]`` is the prompt index of rollout b.
"""

from __future__ import annotations

import torch


def group_relative(scalar: torch.Tensor, groups: torch.Tensor, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """(r - mean over the rollout's group) / (std over the group + eps), the std unbiased as in TRL and the
    DeepSeekMath paper. ``scale=False`` drops the division (Dr. GRPO: it biases towards easy and hard prompts)."""
    advantages = torch.empty_like(scalar)
    for g in groups.unique():
        members = groups == g
        r = scalar[members]
        centred = r - r.mean()
        if scale:
            std = r.std() if r.numel() > 1 else r.new_zeros(())
            centred = centred / (std + eps)
        advantages[members] = centred
    return advantages


def weighted_scalar(rewards: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """w . r per answer, averaged over a rollout's M answers (a single answer when M is 1)."""
    return (rewards * weights).sum(-1).mean(-1)


def grpo(rewards: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return group_relative(weighted_scalar(rewards, weights), groups, scale=True)


def dr_grpo(rewards: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return group_relative(weighted_scalar(rewards, weights), groups, scale=False)
