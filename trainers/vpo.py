"""VPO (Vector Policy Optimization): GRPO's loop with multi-answer rollouts and the set-level estimator.

A rollout writes M candidate answers; the set is scored by E_{w ~ Dirichlet(1)}[max_m w . r(y_m)] over the
task's weighted reward components (trainers/advantages.py: vpo), normalised over the G rollouts of a prompt, and
every token of the rollout gets that advantage. A short SFT warm-up on the policy's own answers, written in the
multi-answer format, teaches the format first. The ablations are estimator choices on the same trainer:
``--set trainer.advantage=multi_rlvr`` (no random weights) and ``--trainer grpo --set
trainer.advantage=random_weights`` (no multi-answer).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from harness.trainers.grpo import GRPOConfig, GRPOTrainer
from harness.trainers.policy_gradient import cycle_problems


@dataclass
class VPOConfig(GRPOConfig):
    advantage: str = "vpo"  # the set-level estimator; "multi_rlvr" is the fixed-weights ablation
    answers_per_rollout: int = 4  # M answers per rollout
    warmup_steps: int = 4  # SFT steps on the policy's own multi-answer sets before RL; 0 skips the warm-up
    warmup_samples: int = 8  # samples per problem the warm-up draws to build its targets (>= M)
    warmup_problems: int = 8  # problems the warm-up samples from (sampling them all would cost more than RL)
    warmup_lr: float = 2e-5


class VPOTrainer(GRPOTrainer):
    name = "vpo"
    config_class = VPOConfig

    def train(self, policy, engine, task, problems, *, store) -> None:
        cfg = self.config
        if cfg.warmup_steps > 0 and self.checkpoint_state(store) is None:  # a resumed run is past its warm-up
            from harness.trainers.sft import SFTTrainer

            warmup = SFTTrainer(plugins=self.plugins, steps=cfg.warmup_steps, targets="self",
                                answers_per_rollout=cfg.answers_per_rollout, delimiter=cfg.delimiter,
                                samples_per_problem=max(cfg.warmup_samples, cfg.answers_per_rollout),
                                max_target_tokens=cfg.max_new_tokens, lr=cfg.warmup_lr, seed=cfg.seed,
                                temperature=cfg.temperature)
            chosen = list(itertools.islice(cycle_problems(problems, cfg.seed + 1), min(cfg.warmup_problems,
                                                                                          len(problems))))
            warmup.train(policy, engine, task, chosen, store=_Stage(store, "warmup"))
        super().train(policy, engine, task, problems, store=store)


class _Stage:
    """A run store whose step logs go to their own stage, so the warm-up's loss never mixes with RL's."""

    def __init__(self, store, stage: str) -> None:
        self._store, self._stage = store, stage

    def log_step(self, step: int, metrics: dict[str, float]) -> None:
        self._store.log_step(step, metrics, stage=self._stage)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
