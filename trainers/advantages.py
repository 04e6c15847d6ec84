"""Advantage estimators: (rewards [B, M, N], groups [B], weights [N], **context) -> advantages [B].

B rollouts, M answers per rollout (1 unless a trainer asks for multi-answer rollouts), N reward components.
The reward stays a vector until here: an estimator decides how to turn it into one number per rollout, so VPO's
set-level estimator is just another entry in this registry. ``groups[b]`` is the prompt index of rollout b.
Keyword context a trainer passes (estimators ignore what they do not use): ``generator`` (a seeded torch.Generator
for random weights), ``draws`` (Dirichlet draws per set, VPO), ``k`` (PKPO's k), ``present`` ([B, M] bool: which
answers a multi-answer rollout actually produced; a missing answer can never be a set's best), ``weighting`` (how
VPO's trade-offs relate to the task's weights: ``trade_offs``).
"""

from __future__ import annotations

from math import comb

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


def grpo(rewards: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor, **_) -> torch.Tensor:
    return group_relative(weighted_scalar(rewards, weights), groups, scale=True)


def dr_grpo(rewards: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor, **_) -> torch.Tensor:
    return group_relative(weighted_scalar(rewards, weights), groups, scale=False)


# ----------------------------------------------------------------------------------------------------------------
# VPO: the set of M answers is scored by its best member under a random trade-off between the components.
# Only the components the task weighs (weights > 0) take part: the others are reported, not optimised.
# ----------------------------------------------------------------------------------------------------------------

WEIGHTINGS = ("task", "uniform")


def check_weighting(weighting: str) -> None:
    if weighting not in WEIGHTINGS:
        raise ValueError(f"unknown trade-off weighting {weighting!r}; choose one of {', '.join(WEIGHTINGS)}")


def trade_offs(
    weights: torch.Tensor, draws: int, generator: torch.Generator | None = None, weighting: str = "task"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(which components take part [N] bool, ``draws`` trade-offs over them [draws, n]).

    "task" (default): Dirichlet(1) draws scaled component-wise by the task's weights (times n), so a draw's mean is
    the task's weights and VPO pursues the objective GRPO does (maths: correct 1, boxed 0.5), trading off around it.
    "uniform": the method's unweighted Dirichlet(1) over the weighted components, which values every component
    alike (a wrong boxed answer and a right unboxed one then earn the same)."""
    check_weighting(weighting)
    active = weights > 0
    n = int(active.sum())
    drawn = dirichlet(n, draws, generator)
    return active, drawn * n * weights[active] if weighting == "task" else drawn


def set_reward(rewards: torch.Tensor, trade_offs: torch.Tensor, present: torch.Tensor | None = None) -> torch.Tensor:
    """R(S) = mean over the S trade-offs w of max over the set's answers of w . r(y_m).

    rewards [B, M, N], trade_offs [S, N] (rows on the simplex), present [B, M] -> [B]."""
    values = torch.einsum("bmn,sn->bsm", rewards, trade_offs)  # w_s . r(y_m) for every set, draw and answer
    if present is not None:
        values = values.masked_fill(~present[:, None, :], float("-inf"))
    best = values.max(dim=-1).values
    return torch.where(torch.isinf(best), torch.zeros_like(best), best).mean(dim=-1)  # an empty set scores 0


def dirichlet(n: int, draws: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``draws`` points uniform on the (n-1)-simplex, i.e. Dirichlet(1, ..., 1): normalised exponentials."""
    e = -torch.log(torch.rand((draws, n), generator=generator).clamp_min(1e-12))
    return e / e.sum(dim=-1, keepdim=True)


def vpo(
    rewards: torch.Tensor,
    groups: torch.Tensor,
    weights: torch.Tensor,
    *,
    generator=None,
    draws: int = 32,
    present=None,
    weighting: str = "task",
    **_,
) -> torch.Tensor:
    """VPO: R(S) = E_w[max_m w . r(y_m)] over the weighted components (w: ``trade_offs``), estimated with ``draws``
    draws shared by every set of a batch (common random numbers: sets are compared under the same trade-offs),
    then normalised over the G sets of a prompt like GRPO. With one answer per rollout the max is linear, so the
    expectation is taken exactly (w's mean) instead of by draws: under "task" weighting that is GRPO's reward."""
    active, drawn = trade_offs(weights, draws, generator, weighting)
    if rewards.shape[1] == 1:
        drawn = drawn.mean(dim=0, keepdim=True) if weighting == "uniform" else weights[active][None]
    return group_relative(set_reward(rewards[..., active], drawn, present), groups)


def multi_rlvr(
    rewards: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor, *, present=None, weighting: str = "task", **_
) -> torch.Tensor:
    """Ablation "multi-answer without random weights": the set's best answer under one fixed weighting, the
    trade-offs' mean (the task's weights, or equal weights under "uniform")."""
    check_weighting(weighting)
    active = weights > 0
    n = int(active.sum())
    fixed = weights[active][None] if weighting == "task" else torch.full((1, n), 1.0 / n)
    return group_relative(set_reward(rewards[..., active], fixed, present), groups)


def random_weights(
    rewards: torch.Tensor,
    groups: torch.Tensor,
    weights: torch.Tensor,
    *,
    generator=None,
    present=None,
    weighting: str = "task",
    **_,
) -> torch.Tensor:
    """Ablation "random weights without multi-answer": each prompt's group is scored under one random trade-off
    (with M = 1 the best-of-set is the single answer; averaged over draws it would just be the mean weighting)."""
    scalar = torch.empty(rewards.shape[0])
    for g in groups.unique():
        members = groups == g
        active, w = trade_offs(weights, 1, generator, weighting)
        scalar[members] = set_reward(rewards[members][..., active], w, None if present is None else present[members])
    return group_relative(scalar, groups)


# ----------------------------------------------------------------------------------------------------------------
# PKPO (Walder & Karkhanis, 2025): per-sample rewards whose policy gradient is an unbiased estimate of the
# gradient of max@k (pass@k for 0/1 rewards) from the n samples of a prompt.
# ----------------------------------------------------------------------------------------------------------------


def max_at_k_rewards(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Sample i's reward: the mean, over all k-subsets of the n samples, of the subset's max, counting only the
    subsets that contain i (times C(n,k) / C(n,k)). With samples sorted ascending (1-based rank i):
    r_i = [g_(i) C(i-1, k-1) + sum_{j > i} g_(j) C(j-2, k-2)] / C(n, k). For 0/1 rewards this is k/n for a
    correct sample and (k/n) * rho(n-1, c, k-1) for a wrong one."""
    n = scores.numel()
    if not 1 <= k <= n:
        raise ValueError(f"pkpo: k={k} must be between 1 and the group size {n}")
    order = torch.argsort(scores, stable=True)
    g = scores[order].double()
    total = comb(n, k)
    sorted_rewards = torch.empty(n, dtype=torch.float64)
    for i in range(1, n + 1):
        value = g[i - 1] * comb(i - 1, k - 1)
        if k >= 2:
            value = value + sum(g[j - 1] * comb(j - 2, k - 2) for j in range(i + 1, n + 1))
        sorted_rewards[i - 1] = value / total
    out = torch.empty(n, dtype=scores.dtype)
    out[order] = sorted_rewards.to(scores.dtype)
    return out


def loo_max_at_k_advantages(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Sample i's transformed reward ``max_at_k_rewards`` minus a baseline that does not depend on sample i, so
    sum_i s_i grad log p(x_i) stays an unbiased estimate of the gradient of max@k (PKPO's leave-one-out baselines).

    k >= 2 ("loo-1"): s_i = (1/C(n,k)) sum over the k-subsets S holding i of [max(S) - max(S minus i)], i.e. the
    baseline is (k/n) times the unbiased max@(k-1) estimate from the other n-1 samples. Sorted ascending (1-based
    rank i, ties in any order) the terms of the samples above i cancel, leaving
    s_(i) = [g_(i) C(i-1, k-1) - sum_{j<i} g_(j) C(j-1, k-2)] / C(n,k) = sum_{j<i} (g_(i) - g_(j)) C(j-1, k-2) / C(n,k):
    what sample i adds over the runner-up in the subsets it tops, never negative (0/1 rewards: a correct sample
    gets C(n-c, k-1)/C(n,k), the subsets where it is the only correct one; a wrong one gets 0). A sort and a prefix
    sum: O(n log n).
    k = 1: s_i = (g_i - mean_{j != i} g_j) / n, the per-sample reward g_i/n less the others' mean at the same
    scale, which is (g_i - mean g) / (n - 1). A group of one has no other sample: its baseline is 0 (s = g)."""
    n = scores.numel()
    if not 1 <= k <= n:
        raise ValueError(f"pkpo: k={k} must be between 1 and the group size {n}")
    g = scores.double()
    if k == 1:
        others = (g.sum() - g) / (n - 1) if n > 1 else torch.zeros_like(g)
        return ((g - others) / n).to(scores.dtype)
    order = torch.argsort(scores, stable=True)
    g = g[order]
    total = comb(n, k)
    # Exact integer binomials divided once: no overflow for any group size, weights as precise as a float allows
    top = torch.tensor([comb(i - 1, k - 1) / total for i in range(1, n + 1)], dtype=torch.float64)
    runner_up = torch.tensor([comb(j - 1, k - 2) / total for j in range(1, n + 1)], dtype=torch.float64)
    below = torch.cumsum(g * runner_up, 0) - g * runner_up  # sum over j < i of g_(j) C(j-1, k-2) / C(n,k)
    out = torch.empty(n, dtype=scores.dtype)
    out[order] = (g * top - below).to(scores.dtype)
    return out


def pkpo(rewards: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor, *, k: int = 4, **_) -> torch.Tensor:
    """PKPO for max@k of the weighted scalar (pass@k for 0/1 rewards): per group, ``loo_max_at_k_advantages``, an
    unbiased estimate of the gradient of max@k for every k from 1 to the group size.

    Not the transformed rewards centred by their group mean: they sum to k times the group's max@k estimate, so that
    baseline depends on every sample, and the expected update was (1 - k/n) times the gradient of max@k: none at
    k = n. No std scaling either: the advantages are already on max@k's scale, and dividing by a per-group spread
    keeps each group's direction but reweights prompts (towards those with little spread, the bias Dr. GRPO
    removes), so the sum over prompts would no longer follow the gradient of their mean max@k."""
    scalar = weighted_scalar(rewards, weights)
    advantages = torch.empty_like(scalar)
    for g in groups.unique():
        members = groups == g
        advantages[members] = loo_max_at_k_advantages(scalar[members], k)
    return advantages
