"""Watching a policy-gradient run for a collapsed policy, so a degenerate model is never saved in silence.

A collapse shows in the rollouts before it shows anywhere else: VSPO's content-free strength reward once drove
SmolLM2-135M from 63-token answers to a bare end-of-sequence in three steps while every loss curve looked busy.
The watch reads each step's rollouts (after the gather, so every rank decides alike) and the update's gradient
norm, and names what it saw:

- **stop** (the trainer rolls the weights back to the last step whose rollouts were healthy and ends training):
  more than ``empty_fraction`` of the step's answers are empty, or every answer is the same text, or the rollouts
  shrank to ``shrunk_tokens`` tokens or fewer on average (end-of-sequence included) from ``shrink`` times that or
  more at the watch's first step (VSPO once took SmolLM2-135M's maths answers from 62 tokens to a bare digit and
  end-of-sequence: not empty, not repeated, degenerate; a bare ``\boxed{7}``, 6 tokens, is not caught);
  or a gradient norm more than ``grad_spike`` times the median of the earlier steps' non-zero norms.
- **warn** (training goes on): the task's own reward was identical for every answer ``flat_steps`` steps in a
  row, i.e. no group had anything to learn from.

Thresholds are far from what healthy runs show (the demo's GRPO: no empty answers, gradient norms within 5x of
their median), so a watch that fires means something.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class CollapseWatch:
    empty_fraction: float = 0.5
    grad_spike: float = 20.0
    flat_steps: int = 3
    shrink: float = 8.0
    shrunk_tokens: float = 3.0
    first_tokens: float | None = None  # the mean rollout length, in tokens, of the first step watched
    norms: list[float] = field(default_factory=list)  # the earlier steps' non-zero gradient norms
    flat_run: int = 0  # consecutive steps whose task reward had no spread
    warned_flat: bool = False

    def rollouts(self, answers: Sequence[str], tokens: Sequence[int] = ()) -> str | None:
        """Why this step's answers (and its rollouts' token counts, when given) show a collapsed policy, or None."""
        if not answers:
            return None
        stripped = [a.strip() for a in answers]
        empty = sum(not a for a in stripped) / len(stripped)
        if empty > self.empty_fraction:
            return f"{empty:.0%} of the step's {len(stripped)} answers are empty"
        if len(stripped) >= 4 and len(set(stripped)) == 1:
            return f"all {len(stripped)} answers are the same text {_clip(stripped[0])!r}"
        if not tokens:
            return None
        mean = sum(tokens) / len(tokens)
        if self.first_tokens is None:
            self.first_tokens = mean
        elif mean <= self.shrunk_tokens and self.first_tokens >= self.shrink * max(mean, 1e-9):
            return f"the rollouts shrank to {mean:.1f} tokens on average from {self.first_tokens:.1f} at the first step"
        return None

    def update(self, grad_norm: float) -> str | None:
        """Why this update's gradient norm is a spike (then the update must be undone), or None."""
        reason = None
        if len(self.norms) >= 3:
            median = statistics.median(self.norms)
            if grad_norm > self.grad_spike * median:
                reason = (
                    f"gradient norm {grad_norm:.3g}, {grad_norm / median:.0f}x the median {median:.3g} of the "
                    f"earlier steps"
                )
        if grad_norm > 0:
            self.norms.append(grad_norm)
        return reason

    def task_reward(self, values: Sequence[float]) -> str | None:
        """A one-time warning once the task's reward has had no spread for ``flat_steps`` steps in a row."""
        flat = len(values) > 1 and max(values) - min(values) < 1e-9
        self.flat_run = self.flat_run + 1 if flat else 0
        if self.flat_run >= self.flat_steps and not self.warned_flat:
            self.warned_flat = True
            return (
                f"the task's reward was {values[0]:g} for every answer {self.flat_run} steps in a row: "
                f"nothing in it to learn from"
            )
        return None


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
