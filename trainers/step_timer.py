"""Where a training step's time goes: seconds per section, logged with the step as ``time/<section>``, so a user
sees what a slow run spends its time on (generation, scoring, old log-probs, backward, optimizer, ...)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence

import torch


class StepTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, section: str) -> Iterator[None]:
        """Add the time spent inside to ``section`` (sections may repeat within a step: the passes' backwards)."""
        _wait_for_device()
        started = time.perf_counter()
        try:
            yield
        finally:
            _wait_for_device()
            self.seconds[section] = self.seconds.get(section, 0.0) + time.perf_counter() - started

    def take(self, sections: Sequence[str]) -> dict[str, float]:
        """``time/<section>`` for each of ``sections`` (0 for one not entered), and start afresh."""
        out = {f"time/{s}": self.seconds.get(s, 0.0) for s in sections}
        self.seconds = {}
        return out


def _wait_for_device() -> None:
    """A GPU runs kernels after the Python call that queued them returns: without waiting at each boundary, a
    section's work would be counted in whichever section next waits for a result."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
