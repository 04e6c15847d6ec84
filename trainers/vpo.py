"""VPO (Vector Policy Optimization): GRPO's loop with multi-answer rollouts and the set-level estimator.

A rollout writes M candidate answers; the set is scored by E_{w ~ Dirichlet(1)}[max_m w . r(y_m)] over the
task's weighted reward components (trainers/advantages.py: vpo), normalised over the G rollouts of a prompt, and
every token of the rollout gets that advantage. An SFT warm-up on the policy's own answers, joined in the
multi-answer format, teaches the format first and runs until sampled rollouts are well formed
(trainers/format_warmup.py; GRPO's loop runs it when warmup_steps > 0, as VPO's default has it). The ablations are
estimator choices on the same trainer: ``--set trainer.advantage=multi_rlvr`` (no random weights) and
``--trainer grpo --set trainer.advantage=random_weights`` (no multi-answer).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.trainers.grpo import GRPOConfig, GRPOTrainer


@dataclass
class VPOConfig(GRPOConfig):
    advantage: str = "vpo"  # the set-level estimator; "multi_rlvr" is the fixed-weights ablation
    answers_per_rollout: int = 4  # M answers per rollout
    # The format warm-up (trainers/format_warmup.py, every warmup_* option) is on: without the M-answer format,
    # every rollout's set holds one answer and the set reward cannot tell rollouts apart. 0 skips it.
    warmup_steps: int = 64


class VPOTrainer(GRPOTrainer):
    name = "vpo"
    config_class = VPOConfig
