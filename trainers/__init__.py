"""Built-in trainers and advantage estimators, registered through the same hooks as third-party ones.
Only "module:attr" strings here: importing this package must not import torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.plugins.registry import Registry


@hookimpl
def harness_register_trainers(registry: Registry) -> None:
    registry.add("grpo", "harness.trainers.grpo:GRPOTrainer",
                 "GRPO: group-relative advantages, clipped ratio, optional k3 KL; Dr. GRPO / DAPO as options")
    registry.add("vpo", "harness.trainers.vpo:VPOTrainer",
                 "VPO: M answers per rollout, set reward E_w[max_m w.r] over random trade-offs; SFT format warm-up")
    registry.add("vspo", "harness.trainers.vspo:VSPOTrainer",
                 "VSPO: GRPO with rollouts sampled under a steering vector at strengths betas, reward r0 + alpha "
                 "beta (or alpha x a behaviour score); the unsteered policy is updated")
    registry.add("rlaif", "harness.trainers.rlaif:RLAIFTrainer",
                 "RLAIF: GRPO with a teacher's online judgement of each rollout in the reward (r0 + alpha x judge); "
                 "teacher calls and tokens reported")
    registry.add("sft", "harness.trainers.sft:SFTTrainer",
                 "SFT on references, the policy's own successful samples, or a teacher's (teacher-tracking)")


@hookimpl
def harness_register_advantage_estimators(registry: Registry) -> None:
    registry.add("grpo", "harness.trainers.advantages:grpo", "(r - group mean) / group std of the weighted reward")
    registry.add("dr_grpo", "harness.trainers.advantages:dr_grpo", "r - group mean of the weighted reward (Dr. GRPO)")
    registry.add("vpo", "harness.trainers.advantages:vpo", "set reward E_w~Dir(1)[max_m w.r(y_m)], group-normalised (VPO)")
    registry.add("multi_rlvr", "harness.trainers.advantages:multi_rlvr",
                 "best answer of the set under fixed equal weights (VPO ablation)")
    registry.add("random_weights", "harness.trainers.advantages:random_weights",
                 "one random trade-off per prompt's group (VPO ablation)")
    registry.add("pkpo", "harness.trainers.advantages:pkpo", "PKPO: unbiased per-sample rewards for max@k / pass@k")
