"""Reference-model sync (TR-DPO, arXiv 2404.09656; TRL's ``sync_ref_model``): every ``ref_model_sync_steps``
optimizer steps the KL reference moves towards the policy, ref <- alpha * policy + (1 - alpha) * ref, so a long run's
KL term keeps the policy near where it recently was rather than near where it started."""

from __future__ import annotations

import torch


def sync_due(step: int, every: int) -> bool:
    """After step ``step`` (0-based), as TRL's after its global step ``step + 1``: steps every, 2 * every, ..."""
    return (step + 1) % every == 0


@torch.no_grad()
def mix_into(reference: torch.nn.Module, policy: torch.nn.Module, alpha: float) -> None:
    """reference <- alpha * policy + (1 - alpha) * reference, parameter by parameter (the reference is a copy of
    the policy, so the two list the same parameters in the same order)."""
    for ref, p in zip(reference.parameters(), policy.parameters(), strict=True):
        ref.mul_(1 - alpha).add_(p.detach().to(ref.device, ref.dtype), alpha=alpha)
