"""Sample fast, train exact: rollouts may be sampled in a lower precision than the trainer computes in
(``--rollout-dtype``), as every large RL system does (vLLM samples in bf16). Two things then go wrong if the engine's
log-probabilities enter the loss as the old policy's:
- the first ratio pi_trainer / pi_sampler is not 1 but carries the precision gap (up to ~0.35 nats per token
  between bf16 and fp32 on SmolLM2-135M), so the clip acts on rounding noise;
- the samples come from pi_sampler, not from the old policy the surrogate assumes.

So the trainer recomputes the old log-probs in its own precision (one no-grad forward, batched by ``micro_batch``)
and uses them as ``old_logp`` (the ratio starts at 1 again), and corrects for sampling from the other distribution by
truncated importance sampling (TIS; TRL's vLLM path and verl do the same): each token's policy-gradient loss is
multiplied by w = min(exp(old_logp - sampler_logp), tis_cap), with no gradient through w. The cap trades the bias
of truncation for bounded variance: a token the sampler found much less likely than the trainer does would
otherwise dominate the batch.

When both sides compute in the same precision nothing is recomputed (unless ``old_logprobs="recompute"``) and w is
exactly 1 (exp(0)), so the loss is the one without the correction, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from harness.runner.threads import phase_threads
from harness.trainers.policy_gradient import pad_completions, sequence_logprobs
from harness.trainers.post_training import PostTrainingOptions, autocast, autocast_dtype
from harness.types import Completion, EngineCapabilities, capabilities_of

OLD_LOGPROBS = ("auto", "recompute", "sampler")


def weights_dtype(model: Any) -> str:
    return str(next(model.parameters()).dtype).removeprefix("torch.")


def trainer_precision(options: PostTrainingOptions, model: Any) -> str:
    """The precision the update's forward passes run in: autocast's, else the weights'."""
    return autocast_dtype(options) or weights_dtype(model)


def sampler_precision(engine: Any, model: Any) -> str:
    """The precision the engine samples in: the one it declares, else the weights'."""
    return capabilities_of(engine, EngineCapabilities).sampling_dtype or weights_dtype(model)


def should_recompute(mode: str, engine: Any, model: Any, options: PostTrainingOptions) -> bool:
    """``auto``: when the two precisions differ, or when the trainer autocasts (bf16 rounding in the engine's
    token-by-token decoding and in the trainer's whole-sequence forward differ as much as the precisions do);
    ``recompute``: always (an engine whose kernels differ from the trainer's at the same dtype, e.g. vLLM);
    ``sampler``: never, the engine's log-probs are used as they are."""
    if mode == "auto":
        mixed = bool(autocast_dtype(options))
        return mixed or sampler_precision(engine, model) != trainer_precision(options, model)
    return mode == "recompute"


@torch.no_grad()
def policy_logprobs(
    model: Any,
    pad_id: int,
    completions: Sequence[Completion],
    options: PostTrainingOptions,
    micro_batch: int,
    temperature: float,
) -> list[list[float]]:
    """log pi(token) of every completion token under ``model`` in the trainer's precision (its autocast), at the
    sampling temperature, ``micro_batch`` rows per forward pass."""
    model.eval()
    device = next(model.parameters()).device
    out: list[list[float]] = []
    with phase_threads("update"):  # large forwards, like the update's (harness/runner/threads.py)
        for start in range(0, len(completions), micro_batch):
            part = completions[start : start + micro_batch]
            batch = pad_completions(part, pad_id)
            with autocast(options, device):
                logp = (
                    sequence_logprobs(
                        model,
                        batch["input_ids"].to(device),
                        batch["attention_mask"].to(device),
                        int(batch["prompt_width"]),
                        temperature,
                    )
                    .float()
                    .cpu()
                )
            out.extend(logp[r, : len(c.token_ids)].tolist() for r, c in enumerate(part))
    return out


def tis_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Per-token truncated importance weights min(pi_old / pi_sampler, cap), constants for the gradient."""
    return torch.exp(old_logp - sampler_logp).clamp(max=cap).detach()


@dataclass
class Corrected:
    """The rollouts as the update sees them: old log-probs in the trainer's precision, and each token's weight."""

    completions: list[Completion]  # ``logprobs``: the old policy's, in the trainer's precision
    weights: list[list[float]]  # per token, aligned with each completion's tokens
    abs_log_ratio: float  # sum over tokens of |old_logp - sampler_logp|
    clipped: int  # tokens whose weight the cap truncated
    tokens: int


def correct_rollouts(
    completions: Sequence[Completion], old_logprobs: list[list[float]] | None, cap: float
) -> Corrected:
    """Pair each rollout's sampler log-probs with the old policy's (None: the sampler's are the old policy's, so
    every weight is exactly 1) and weigh its tokens."""
    rows, weights, gap, clipped, tokens = [], [], 0.0, 0, 0
    for i, c in enumerate(completions):
        sampler = torch.tensor(c.logprobs, dtype=torch.float32)
        old = sampler if old_logprobs is None else torch.tensor(old_logprobs[i], dtype=torch.float32)
        ratio = torch.exp(old - sampler)
        weights.append(tis_weights(old, sampler, cap).tolist())
        gap += float((old - sampler).abs().sum())
        clipped += int((ratio > cap).sum())
        tokens += len(c.logprobs)
        rows.append(c if old_logprobs is None else replace(c, logprobs=old.tolist()))
    return Corrected(rows, weights, gap, clipped, tokens)


def pad_weights(weights: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    """[B, width]: row r's weights from column 0 (where pad_completions puts its completion), 1 on padding."""
    out = torch.ones((len(weights), width))
    for r, row in enumerate(weights):
        out[r, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out
