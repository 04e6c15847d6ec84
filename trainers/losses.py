"""Policy-gradient losses as pure functions on [B, T] tensors (T completion tokens, ``mask`` 1 on real tokens)."""

from __future__ import annotations

import torch

LOSS_NORMS = ("sequence", "token", "constant")
# the method each normaliser is known by, taken as its name too (loss_norm=dapo is "token"; TRL's loss_type values)
LOSS_NORM_NAMES = {"grpo": "sequence", "dapo": "token", "dr_grpo": "constant"}


IMPORTANCE_LEVELS = ("token", "sequence")


def log_importance_ratio(
    logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor | None = None, level: str = "token"
) -> torch.Tensor:
    """log pi/pi_old per token [B, T]. "token" (PPO, GRPO): each token's own. "sequence" (GSPO): one per completion,
    the mean over its real tokens (``mask``) of log pi - log pi_old, given to each of its tokens, so the clip keeps
    or drops a completion whole and one outlying token cannot dominate the ratio of a long answer."""
    log_ratio = logp - old_logp
    if level == "token":
        return log_ratio
    if level != "sequence":
        raise ValueError(f"unknown importance_sampling_level {level!r}; choose one of {', '.join(IMPORTANCE_LEVELS)}")
    if mask is None:
        raise ValueError("a sequence-level ratio needs the completion mask (which tokens are real)")
    m = mask.to(log_ratio.dtype)
    mean = (log_ratio * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)
    return mean.expand_as(log_ratio)


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
    mask: torch.Tensor | None = None,
    level: str = "token",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token -min(rho A, clip(rho, 1-eps_low, 1+eps_high) A) and whether the clip was active, rho the ratio
    pi/pi_old of ``level`` (``log_importance_ratio``). ``advantages`` is [B] (one per rollout, broadcast to its
    tokens) or [B, T]."""
    adv = advantages[:, None] if advantages.dim() == 1 else advantages
    ratio = torch.exp(log_importance_ratio(logp, old_logp, mask, level))
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    return -torch.minimum(unclipped, clipped), (clipped < unclipped)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref) per token: exp(q - p) - (q - p) - 1 >= 0."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1


def normalise(
    row_sums: torch.Tensor, row_counts: torch.Tensor, norm: str, batch_rows: int, batch_tokens: int, max_len: int
) -> torch.Tensor:
    """Reduce per-row sums of a per-token loss to a scalar, with the batch totals passed in so micro-batches add up
    to exactly the full-batch value:
    - "sequence" (GRPO): mean over rows of each row's token mean;
    - "token" (DAPO): sum over all tokens / number of tokens in the batch;
    - "constant" (Dr. GRPO): sum over all tokens / (rows x generation budget), no length bias at all.
    """
    if norm == "sequence":
        return (row_sums / row_counts.clamp(min=1)).sum() / batch_rows
    if norm == "token":
        return row_sums.sum() / max(batch_tokens, 1)
    if norm == "constant":
        return row_sums.sum() / (batch_rows * max_len)
    raise ValueError(f"unknown loss_norm {norm!r}; choose one of {', '.join(LOSS_NORMS)}")


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, norm: str, max_len: int) -> torch.Tensor:
    """``normalise`` on a whole batch at once."""
    mask = mask.to(per_token.dtype)
    return normalise((per_token * mask).sum(-1), mask.sum(-1), norm, per_token.shape[0], int(mask.sum()), max_len)
