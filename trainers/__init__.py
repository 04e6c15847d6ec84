"""Built-in trainers and advantage estimators, registered through the same hooks as third-party ones, with their
presets. Only "module:attr" strings here: importing this package must not import torch.

Presets: ``quick`` is sized so `make demo` finishes on a 2-core CPU in minutes; ``full`` is a starting point for a
GPU. Flags (--steps) and ``--set trainer.KEY=VALUE`` override any preset value."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.plugins.registry import Registry


_QUICK_RL = {"prompts_per_step": 2, "group_size": 8, "max_new_tokens": 96, "temperature": 1.0, "lr": 5e-5}
_FULL_RL = {"steps": 200, "prompts_per_step": 16, "group_size": 8, "max_new_tokens": 512, "lr": 1e-6, "micro_batch": 16}


@hookimpl
def harness_register_trainers(registry: Registry) -> None:
    registry.add(
        "grpo",
        "harness.trainers.grpo:GRPOTrainer",
        "GRPO: group-relative advantages, clipped ratio, optional k3 KL; Dr. GRPO / DAPO as options",
        presets={"quick": {"steps": 10, **_QUICK_RL}, "full": _FULL_RL},
    )
    registry.add(
        "vpo",
        "harness.trainers.vpo:VPOTrainer",
        "VPO: M answers per rollout, set reward E_w[max_m w.r] over random trade-offs; SFT format warm-up",
        # G=4 rollouts of M=4 answers = 16 candidates per prompt, as many as GRPO's 2 x 8 rollouts; rollouts
        # of M answers are long: 8 rows of ~700 tokens took 13.7 GB in one backward, hence micro_batch 2
        # quick's format warm-up stops once 60% of sampled rollouts are well formed (RL's set reward favours
        # full sets from there: on code at 135M the rate reached 62% in 8 steps and no more in 16, 15 s each)
        presets={
            "quick": {
                **_QUICK_RL,
                "steps": 4,
                "group_size": 4,
                "answers_per_rollout": 4,
                "warmup_steps": 48,
                "warmup_samples": 4,
                "warmup_target_rate": 0.6,
                "micro_batch": 2,
            },
            "full": {**_FULL_RL, "answers_per_rollout": 4, "warmup_steps": 200},
        },
    )
    registry.add(
        "vspo",
        "harness.trainers.vspo:VSPOTrainer",
        "VSPO: GRPO with rollouts sampled under a steering vector at strengths betas, reward r0 + alpha "
        "beta (or alpha x a behaviour score); the unsteered policy is updated",
        # builds a conciseness vector in the run (16 problems) unless trainer.vector is set
        presets={
            "quick": {**_QUICK_RL, "steps": 8, "behaviour": "conciseness", "vector_prompts": 16},
            "full": {**_FULL_RL, "behaviour": "conciseness", "vector_prompts": 64},
        },
    )
    registry.add(
        "rlaif",
        "harness.trainers.rlaif:RLAIFTrainer",
        "RLAIF: GRPO with a teacher's online judgement of each rollout in the reward (r0 + alpha x judge); "
        "teacher calls and tokens reported",
        presets={
            "quick": {**_QUICK_RL, "steps": 8, "behaviour": "conciseness"},
            "full": {**_FULL_RL, "behaviour": "conciseness"},
        },
    )
    registry.add(
        "sft",
        "harness.trainers.sft:SFTTrainer",
        "SFT on references, the policy's own successful samples, or a teacher's (teacher-tracking)",
        presets={
            "quick": {"steps": 8, "batch_size": 4, "lr": 2e-5},
            "full": {"steps": 200, "batch_size": 16, "lr": 1e-5},
        },
    )


@hookimpl
def harness_register_advantage_estimators(registry: Registry) -> None:
    registry.add("grpo", "harness.trainers.advantages:grpo", "(r - group mean) / group std of the weighted reward")
    registry.add("dr_grpo", "harness.trainers.advantages:dr_grpo", "r - group mean of the weighted reward (Dr. GRPO)")
    registry.add(
        "vpo", "harness.trainers.advantages:vpo", "set reward E_w~Dir(1)[max_m w.r(y_m)], group-normalised (VPO)"
    )
    registry.add(
        "multi_rlvr",
        "harness.trainers.advantages:multi_rlvr",
        "best answer of the set under fixed equal weights (VPO ablation)",
    )
    registry.add(
        "random_weights",
        "harness.trainers.advantages:random_weights",
        "one random trade-off per prompt's group (VPO ablation)",
    )
    registry.add("pkpo", "harness.trainers.advantages:pkpo", "PKPO: unbiased per-sample rewards for max@k / pass@k")
