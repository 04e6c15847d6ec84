"""DAPO's two treatments of rollouts that run into the generation budget (arXiv 2503.14476, section 3.4).

- Overlong filtering (``mask_truncated``): a rollout cut at ``max_new_tokens`` without end-of-sequence gets no loss
  at all. Its reward judges an answer the budget cut off, not one the policy chose to write, so training on it
  punishes reasoning for being long rather than wrong.
- Soft overlong punishment (``overlong_penalty``, ``overlong_buffer``): a reward component ``overlong`` that is 0
  up to ``max_new_tokens - overlong_buffer`` tokens and falls linearly to -1 at the budget; its weight is the
  penalty factor, so it is part of the reward vector before the advantage estimator like any other component.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.types import Completion

OVERLONG = "overlong"  # the reward component's name, logged as reward/overlong


def overlong_penalty(length: int, max_len: int, buffer: int) -> float:
    """DAPO's R_length: 0 for length <= max_len - buffer, then ((max_len - buffer) - length) / buffer, down to -1."""
    free = max_len - buffer
    if length <= free:
        return 0.0
    return max((free - length) / buffer, -1.0)


def overlong_shaping(penalty: float) -> dict[str, float]:
    """The ``overlong`` component and its weight, when the penalty is on."""
    return {OVERLONG: penalty} if penalty > 0 else {}


def trained_rows(completions: Sequence[Completion], mask_truncated: bool) -> torch.Tensor:
    """1.0 for each rollout the loss counts, 0.0 for one cut at the budget when ``mask_truncated`` [B]."""
    return torch.tensor([0.0 if mask_truncated and not c.finished else 1.0 for c in completions])


def loss_tokens(completions: Sequence[Completion], mask_truncated: bool) -> int:
    """The tokens the loss counts (the token-level normaliser): a masked rollout's are not among them, as in TRL."""
    return sum(len(c.token_ids) for c in completions if c.finished or not mask_truncated)
