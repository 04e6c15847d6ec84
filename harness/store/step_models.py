"""Loadable models during training (``--save-every N``): after every N-th optimizer step, the policy as it is then,
in Hugging Face format, in ``<run>/checkpoints/step-N/`` (a LoRA policy: its adapter), which ``harness run --model``
evaluates as it does the final ``<run>/model/``.

Not the resume checkpoint (harness/store/checkpoint.py, optimizer and RNG state included, only the latest kept and
removed when the run completes): these are kept, one folder per save, for evaluating the training curve's models.
Each is written to a temporary folder and renamed, so a kill never leaves half a model under a step's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FOLDER = "checkpoints"


class StepModels:
    def __init__(self, run_dir: Path | str, every: int) -> None:
        if int(every) < 1:
            raise ValueError(f"--save-every must be >= 1 steps, got {every!r}")
        self.root = Path(run_dir) / FOLDER
        self.every = int(every)

    def due(self, step: int) -> bool:
        """After every ``every``-th optimizer step (``step`` counts from 0)."""
        return (step + 1) % self.every == 0

    def save(self, step: int, policy: Any) -> Path:
        from harness.store.policy_export import save_folder

        return save_folder(policy, self.root / f"step-{step + 1}")
