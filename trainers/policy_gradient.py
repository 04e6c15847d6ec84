"""Pieces every policy-gradient trainer shares: batching completions, recomputing log-probs, scoring."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from harness.scoring.batch import score_all
from harness.scoring.multi_answer import DELIMITER, split_answers
from harness.scoring.reward_functions import reward_context
from harness.types import Completion, Problem, Score, Task


def cycle_problems(problems: Sequence[Problem], seed: int):
    """Problems in a seeded shuffled order, reshuffled every epoch: the training stream of every trainer."""
    rng = random.Random(seed)
    while True:
        order = list(problems)
        rng.shuffle(order)
        yield from order


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
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "completion_mask": completion_mask,
        "old_logp": old_logp,
        "prompt_width": torch.tensor(p_width),
    }


def sequence_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int, temperature: float = 1.0
) -> torch.Tensor:
    """log pi(token) of every completion token [B, T], from one forward pass, at the sampling temperature."""
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    width = input_ids.shape[1] - prompt_width
    # Only the positions that predict completion tokens: the prompt's vocabulary-sized logits are never built.
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, logits_to_keep=width + 1
    ).logits
    logits = logits[:, :-1, :].float()
    if temperature > 0:
        logits = logits / temperature
    targets = input_ids[:, prompt_width:]
    # log p = logit - logsumexp(logits): no vocabulary-sized log_softmax output is built (or kept for backward).
    return logits.gather(-1, targets[..., None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


@dataclass
class ScoredRollouts:
    """A batch of rollouts scored answer by answer: the reward vector stays a vector (and a set, for VPO)."""

    rewards: torch.Tensor  # [B, M, N]; zeros where an answer is missing or its scorer raised
    present: torch.Tensor  # [B, M] bool: the answer exists and was scored
    scores: list[list[Score | None]]  # per rollout, the Score of each answer it produced (None: the scorer raised)
    errors: int  # answers whose scorer raised (each counted, none fatal)
    malformed: int  # rollouts with fewer than M answers


def score_rollouts(
    task: Task,
    problems: Sequence[Problem],
    completions: Sequence[Completion],
    components: Sequence[str],
    m: int = 1,
    delimiter: str = DELIMITER,
) -> ScoredRollouts:
    """Split each completion into its (up to) M answers and score each against its prompt's problem."""
    rewards = torch.zeros((len(completions), m, len(components)))
    present = torch.zeros((len(completions), m), dtype=torch.bool)
    scores: list[list[Score | None]] = []
    errors = malformed = 0
    answers_of = [split_answers(c.text, m, delimiter) for c in completions]
    pairs = [(problems[c.prompt_index], a) for c, answers in zip(completions, answers_of, strict=True) for a in answers]
    sampled = {c.text: c.token_ids for c in completions} if m == 1 else None  # a batch reward's completion_ids
    with reward_context(ids=sampled):
        results = iter(score_all(task, pairs))
    for b, answers in enumerate(answers_of):
        malformed += len(answers) < m
        row: list[Score | None] = []
        for j in range(len(answers)):
            score = next(results)
            if isinstance(score, Exception):
                errors += 1
                row.append(None)
                continue
            row.append(score)
            rewards[b, j] = torch.tensor([score.rewards.get(name, 0.0) for name in components])
            present[b, j] = True
        scores.append(row)
    return ScoredRollouts(rewards, present, scores, errors, malformed)


def join_rollouts(
    parts: Sequence[tuple[Sequence[Completion], ScoredRollouts]], prompts_per_part: int
) -> tuple[list[Completion], ScoredRollouts]:
    """The ranks' rollouts of one data-parallel step as one batch, in rank order: the rank's prompt indices shifted
    by the prompts before it, so the result is what one process rolling out every prompt would hold."""
    completions = [
        replace(c, prompt_index=c.prompt_index + rank * prompts_per_part)
        for rank, (part, _) in enumerate(parts)
        for c in part
    ]
    scored = [s for _, s in parts]
    return completions, ScoredRollouts(
        rewards=torch.cat([s.rewards for s in scored]),
        present=torch.cat([s.present for s in scored]),
        scores=[row for s in scored for row in s.scores],
        errors=sum(s.errors for s in scored),
        malformed=sum(s.malformed for s in scored),
    )
