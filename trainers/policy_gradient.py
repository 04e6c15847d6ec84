"""Pieces every policy-gradient trainer shares: batching completions, recomputing log-probs, scoring."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.types import Completion, Problem, Score, Task


def pad_completions(completions: Sequence[Completion], pad_id: int) -> dict[str, torch.Tensor]:
    """One batch: prompts left-padded, completions right-padded, so every completion starts at the same column."""
    p_width = max(len(c.prompt_ids) for c in completions)
    c_width = max(max(len(c.token_ids) for c in completions), 1)
    rows = len(completions)
    input_ids = torch.full((rows, p_width + c_width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    completion_mask = torch.zeros((rows, c_width), dtype=torch.long)
    old_logp = torch.zeros((rows, c_width))
    for r, c in enumerate(completions):
        p0 = p_width - len(c.prompt_ids)
        input_ids[r, p0:p_width] = torch.tensor(c.prompt_ids)
        input_ids[r, p_width : p_width + len(c.token_ids)] = torch.tensor(c.token_ids, dtype=torch.long)
        attention[r, p0 : p_width + len(c.token_ids)] = 1
        completion_mask[r, : len(c.token_ids)] = 1
        old_logp[r, : len(c.logprobs)] = torch.tensor(c.logprobs)
    return {"input_ids": input_ids, "attention_mask": attention, "completion_mask": completion_mask,
            "old_logp": old_logp, "prompt_width": torch.tensor(p_width)}


def sequence_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int,
                      temperature: float = 1.0) -> torch.Tensor:
    """log pi(token) of every completion token [B, T], from one forward pass, at the sampling temperature."""
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    width = input_ids.shape[1] - prompt_width
    # Only the positions that predict completion tokens: the prompt's vocabulary-sized logits are never built.
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                   logits_to_keep=width + 1).logits
    logits = logits[:, :-1, :].float()
    if temperature > 0:
        logits = logits / temperature
    targets = input_ids[:, prompt_width:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)


def score_all(task: Task, problems: Sequence[Problem], completions: Sequence[Completion]) -> list[Score | None]:
    """Score each completion against its prompt's problem; a scorer that raises gives None (counted by the caller)."""
    scores: list[Score | None] = []
    for c in completions:
        try:
            scores.append(task.score(problems[c.prompt_index], c.text))
        except Exception:
            scores.append(None)
    return scores


def reward_tensor(scores: Sequence[Score | None], components: Sequence[str]) -> torch.Tensor:
    """[B, 1, N] rewards; a failed score is all zeros (the caller logs how many)."""
    rows = [[s.rewards.get(name, 0.0) if s else 0.0 for name in components] for s in scores]
    return torch.tensor(rows, dtype=torch.float32)[:, None, :]
