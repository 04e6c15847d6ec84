"""DAPO's dynamic sampling (arXiv 2503.14476, section 3.2; verl's ``algorithm.filter_groups``).

A group whose rollouts all earn the same reward has zero advantages: it adds nothing to the policy gradient, yet
under GRPO's per-sequence normaliser it still dilutes the step (fewer effective prompts per update). Dynamic
sampling drops such groups and samples more prompts until the step holds ``prompts_per_step`` groups with spread.

Choices made here, and why:
- A group counts as flat when every advantage is 0 (|A| < 1e-6, the test behind the ``zero_std_groups`` metric),
  not when its rewards are equal: that is the group that gives no gradient under any estimator (and the two agree for
  the group-relative ones). Each round's advantages are computed over that round's groups; every built-in estimator
  is per group, so a kept group's advantages are what they would have been in any batch.
- Extra prompts come from a shuffled order of the training problems drawn per step (not from the step stream), so a
  resumed run redraws exactly what an uninterrupted one did without the checkpoint holding any sampling state; they
  skip the problems the step already holds while unused ones remain.
- After ``max_resample_rounds`` extra rounds a batch still short is topped up with flat groups, in draw order, so a
  step always trains on ``prompts_per_step`` groups (data-parallel ranks split that evenly; verl stops the run with an
  error instead). ``zero_std_groups`` then says how much of the batch is flat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import torch

from harness.trainers.policy_gradient import ScoredRollouts, cycle_problems
from harness.types import Completion, Problem

ZERO = 1e-6  # an advantage below this in size is 0 (as zero_std_groups counts)


@dataclass
class Rollouts:
    """One batch of scored rollouts: ``completions[i].prompt_index`` indexes ``problems``."""

    problems: list[Problem]
    completions: list[Completion]
    scored: ScoredRollouts
    advantages: torch.Tensor  # [B]


def informative(batch: Rollouts) -> list[bool]:
    """Per problem of the batch: whether any of its rollouts has a non-zero advantage."""
    spread = [False] * len(batch.problems)
    for c, a in zip(batch.completions, batch.advantages.tolist(), strict=True):
        spread[c.prompt_index] = spread[c.prompt_index] or abs(a) >= ZERO
    return spread


def take_groups(batch: Rollouts, groups: Sequence[int], m: int) -> Rollouts:
    """The rollouts of the problems ``groups`` (indices into ``batch.problems``), renumbered 0..len(groups)-1.
    ``scored.errors`` stays the whole batch's count (errors are not kept per rollout)."""
    new_index = {g: k for k, g in enumerate(groups)}
    rows = [i for g in groups for i, c in enumerate(batch.completions) if c.prompt_index == g]
    s = batch.scored
    scored = ScoredRollouts(
        rewards=s.rewards[rows],
        present=s.present[rows],
        scores=[s.scores[i] for i in rows],
        errors=s.errors,
        malformed=sum(len(s.scores[i]) < m for i in rows),
    )
    completions = [
        replace(batch.completions[i], prompt_index=new_index[batch.completions[i].prompt_index]) for i in rows
    ]
    return Rollouts([batch.problems[g] for g in groups], completions, scored, batch.advantages[rows])


def join(parts: Sequence[Rollouts], errors: int) -> Rollouts:
    """The parts as one batch, in order, prompt indices shifted past the parts before; ``errors`` the step's."""
    completions, offset = [], 0
    for part in parts:
        completions += [replace(c, prompt_index=c.prompt_index + offset) for c in part.completions]
        offset += len(part.problems)
    scored = ScoredRollouts(
        rewards=torch.cat([p.scored.rewards for p in parts]),
        present=torch.cat([p.scored.present for p in parts]),
        scores=[row for p in parts for row in p.scored.scores],
        errors=errors,
        malformed=sum(p.scored.malformed for p in parts),
    )
    return Rollouts(
        [q for p in parts for q in p.problems], completions, scored, torch.cat([p.advantages for p in parts])
    )


def fill_batch(draw: Callable[[int], Rollouts], want: int, max_rounds: int, m: int) -> tuple[Rollouts, dict]:
    """Round 0 is ``draw(0)``, the step's own prompts; while fewer than ``want`` groups have spread, up to
    ``max_rounds`` more rounds are drawn. Returns the batch of ``want`` groups (those with spread first come, topped up
    with flat ones if the rounds ran out), in draw order, and the step's figures."""
    rounds: list[Rollouts] = []
    kept: list[tuple[int, int]] = []  # (round, group) of the groups with spread
    flat: list[tuple[int, int]] = []
    for r in range(max_rounds + 1):
        batch = draw(r)
        rounds.append(batch)
        for g, ok in enumerate(informative(batch)):
            (kept if ok else flat).append((r, g))
        if len(kept) >= want:
            break
    topped_up = flat[: max(0, want - len(kept))]
    chosen = sorted(kept[:want] + topped_up)
    parts = [take_groups(batch, [g for rr, g in chosen if rr == r], m) for r, batch in enumerate(rounds)]
    figures = {
        "dynamic_sampling/dropped_groups": len(flat) - len(topped_up),
        "dynamic_sampling/redrawn_prompts": sum(len(b.problems) for b in rounds[1:]),
    }
    return join(parts, sum(b.scored.errors for b in rounds)), figures


def refill_problems(problems: Sequence[Problem], seed: int, step: int, drawn: Sequence[Problem]) -> Iterator[Problem]:
    """The problems a step's extra rounds draw: a shuffled order of its own per (seed, step), skipping the ones the
    step already holds (``drawn``, and each one drawn here) while any training problem is still unused."""
    used = {p.id for p in drawn}
    distinct = len({p.id for p in problems})
    for p in cycle_problems(problems, seed * 1_000_003 + step + 1):
        if p.id in used and len(used) < distinct:
            continue
        used.add(p.id)
        yield p
