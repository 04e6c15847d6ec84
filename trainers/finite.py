"""Non-finite training is a failure, never a result: a NaN or infinite loss, gradient or weight stops training
before it reaches the weights (or right after, naming it), so a run can never end ``complete`` with a broken model.

`--set trainer.lr=1e308` once trained every weight to NaN; the after-answers were "BritainBritain..." and the run
was recorded complete, exit 0. The checks cost one pass over the trained parameters per optimizer step.
"""

from __future__ import annotations

import math

import torch

# Learning rates above this are refused before the model loads: no real run uses them, and they overflow.
MAX_LR = 1.0


class NonFiniteTraining(ValueError):
    """Training produced a NaN or infinity: the run fails here, its last checkpoint (if any) kept as it was."""


def check_lr(name: str, lr: float, option: str = "lr") -> None:
    if not 0 < lr <= MAX_LR:
        raise ValueError(f"{name}: {option} must be in (0, {MAX_LR:g}], got {lr!r}")


def check_update(name: str, loss: float, grad_norm) -> None:
    """Before the optimizer step: the loss and the gradient's norm must be finite (the weights are still good)."""
    norm = float(grad_norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        raise NonFiniteTraining(
            f"{name}: the loss is {loss:g} and the gradient norm {norm:g}: training stopped "
            "before this update (lower trainer.lr, or check the reward)"
        )


@torch.no_grad()
def check_weights(name: str, parameters) -> None:
    """After the optimizer step: every trained weight must be finite."""
    for p in parameters:
        if p.requires_grad and not torch.isfinite(p).all():
            raise NonFiniteTraining(
                f"{name}: the update made weights non-finite (NaN or inf): training stopped; lower trainer.lr"
            )
