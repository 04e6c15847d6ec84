"""VPO (Vector Policy Optimization): GRPO's loop with multi-answer rollouts and the set-level estimator.

A rollout writes M candidate answers; the set is scored by E_{w ~ Dirichlet(1)}[max_m w . r(y_m)] over the
task's weighted reward components (trainers/advantages.py: vpo), normalised over the G rollouts of a prompt, and
every token of the rollout gets that advantage. An SFT warm-up on the policy's own answers, joined in the
multi-answer format, teaches the format first and runs until sampled rollouts are well formed
(trainers/format_warmup.py). The ablations are estimator choices on the same trainer:
``--set trainer.advantage=multi_rlvr`` (no random weights) and ``--trainer grpo --set
trainer.advantage=random_weights`` (no multi-answer).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from harness.trainers.format_warmup import WARMUP_TARGETS, WarmupPlan, format_warmup
from harness.trainers.grpo import GRPOConfig, GRPOTrainer
from harness.trainers.policy_gradient import cycle_problems


@dataclass
class VPOConfig(GRPOConfig):
    advantage: str = "vpo"  # the set-level estimator; "multi_rlvr" is the fixed-weights ablation
    answers_per_rollout: int = 4  # M answers per rollout
    # The format warm-up (trainers/format_warmup.py): SFT on M of the policy's own answers joined in the format, in
    # rounds of warmup_check_every steps, until warmup_target_rate of sampled rollouts are well formed or
    # warmup_steps are spent. warmup_steps=0 skips it.
    warmup_steps: int = 64
    warmup_check_every: int = 8
    warmup_target_rate: float = 0.9
    warmup_samples: int = 8  # samples per problem the warm-up draws to build its targets (>= M)
    warmup_problems: int = 16  # problems the targets come from (sampling them all would cost more than RL)
    warmup_check_problems: int = 8  # other problems whose rollouts (2 each) measure the rate
    warmup_lr: float = 1e-4  # SmolLM2-135M wrote no well-formed rollout after 8 steps at 2e-5
    warmup_batch_size: int = 4
    # "self": M of its answers as written; "extracted": the answers the task extracted from them, each written in
    # the task's short answer form (for a policy whose own answers ramble past the budget, as on maze); "auto":
    # extracted where the task declares its answer form (reference completions), else self
    warmup_targets: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.warmup_target_rate <= 1.0:
            raise ValueError(f"vpo: warmup_target_rate must be in [0, 1], got {self.warmup_target_rate!r}")
        for name in ("warmup_check_every", "warmup_problems", "warmup_check_problems", "warmup_batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"vpo: {name} must be >= 1, got {getattr(self, name)!r}")
        if self.warmup_targets not in WARMUP_TARGETS:
            raise ValueError(f"vpo: warmup_targets must be one of {', '.join(WARMUP_TARGETS)}, "
                             f"got {self.warmup_targets!r}")
        if self.warmup_steps < 0:
            raise ValueError(f"vpo: warmup_steps must be >= 0, got {self.warmup_steps!r}")


class VPOTrainer(GRPOTrainer):
    name = "vpo"
    config_class = VPOConfig

    def train(self, policy, engine, task, problems, *, store) -> None:
        cfg = self.config
        self.prepare_policy(policy)  # LoRA / checkpointing before the warm-up too: it trains what RL will train
        if cfg.warmup_steps > 0 and self.checkpoint_state(store) is None:  # a resumed run is past its warm-up
            shuffled = list(itertools.islice(cycle_problems(problems, cfg.seed + 1), len(problems)))
            targets = shuffled[: cfg.warmup_problems]
            # held out from the targets where there are enough problems, so the rate is not one of memorised answers
            check = shuffled[cfg.warmup_problems:][: cfg.warmup_check_problems] or shuffled[: cfg.warmup_check_problems]
            plan = WarmupPlan(m=cfg.answers_per_rollout, delimiter=cfg.delimiter, max_new_tokens=cfg.max_new_tokens,
                              temperature=cfg.temperature, max_steps=cfg.warmup_steps,
                              check_every=cfg.warmup_check_every, target_rate=cfg.warmup_target_rate,
                              samples_per_problem=cfg.warmup_samples, lr=cfg.warmup_lr,
                              batch_size=cfg.warmup_batch_size, micro_batch=cfg.micro_batch, seed=cfg.seed,
                              targets=cfg.warmup_targets)
            format_warmup(policy, engine, task, targets, check, plan, store=store, plugins=self.plugins)
        super().train(policy, engine, task, problems, store=store)
