"""Built-in trainers and advantage estimators, registered through the same hooks as third-party ones.
Only "module:attr" strings here: importing this package must not import torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.registry import Registry


@hookimpl
def harness_register_trainers(registry: Registry) -> None:
    registry.add("grpo", "trainers.grpo:GRPOTrainer",
                 "GRPO: group-relative advantages, clipped ratio, optional k3 KL; Dr. GRPO / DAPO as options")


@hookimpl
def harness_register_advantage_estimators(registry: Registry) -> None:
    registry.add("grpo", "trainers.advantages:grpo", "(r - group mean) / group std of the weighted reward")
    registry.add("dr_grpo", "trainers.advantages:dr_grpo", "r - group mean of the weighted reward (Dr. GRPO)")
