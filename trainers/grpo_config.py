"""GRPO's options (``GRPOConfig``) and their checks, in one line each before the model loads. Every RL trainer's
config extends it (VPO, VSPO, RLAIF); the trainer is trainers/grpo.py, which re-exports it.

Each option's help is the comment beside it: ``harness options trainer grpo`` and docs/reference/options.md read it
(harness/plugins/option_help.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.plugins.size_bounds import COUNT, SEED, STEPS, TOKENS, bounded
from harness.scoring.multi_answer import DELIMITER
from harness.trainers.advantages import WEIGHTINGS
from harness.trainers.finite import check_lr
from harness.trainers.format_warmup import FormatWarmupOptions
from harness.trainers.losses import IMPORTANCE_LEVELS, LOSS_NORM_NAMES, LOSS_NORMS
from harness.trainers.post_training import PostTrainingOptions
from harness.trainers.rollout_precision import OLD_LOGPROBS

__all__ = ["GRPOConfig"]


@dataclass
class GRPOConfig(PostTrainingOptions, FormatWarmupOptions):  # + LoRA, checkpointing, autocast, lr schedule; warmup_*
    # batches of rollouts (one optimizer step each, num_iterations with several passes)
    steps: int = bounded(10, 1, STEPS)
    prompts_per_step: int = bounded(2, 1, COUNT)  # distinct problems per step
    group_size: int = bounded(8, 1, COUNT)  # G: completions per problem; advantages are relative within these
    # generation budget per completion (Dr. GRPO's constant normaliser too)
    max_new_tokens: int = bounded(96, 1, TOKENS)
    temperature: float = 1.0  # sampling temperature; log-probs are taken at the same temperature
    top_p: float = 1.0  # nucleus sampling: the smallest set of tokens holding this probability
    # 3e-5: lower rates learned nothing in 10 steps on SmolLM2-135M (the quick preset, a default run's, uses 5e-5)
    lr: float = 3e-5  # AdamW learning rate
    weight_decay: float = 0.0  # AdamW weight decay
    max_grad_norm: float = 1.0  # gradients are clipped to this total norm
    eps_low: float = 0.2  # ratio clip below 1
    eps_high: float = 0.2  # ratio clip above 1 (DAPO's clip-higher uses 0.28)
    beta: float = 0.0  # k3 KL coefficient to the frozen initial policy; 0 skips the reference model entirely
    # TR-DPO's reference sync (trainers/ref_sync.py; beta > 0, full fine-tuning): every ref_model_sync_steps steps
    # the KL reference becomes ref_model_mixup_alpha * policy + (1 - ref_model_mixup_alpha) * reference
    sync_ref_model: bool = False
    ref_model_sync_steps: int = bounded(512, 1, STEPS)  # steps between reference syncs (TRL's default; at most `steps`)
    ref_model_mixup_alpha: float = 0.6  # the policy's share in each sync (1: the reference becomes the policy)
    # the loss's normaliser: "sequence" (GRPO), "token" (DAPO), "constant" (Dr. GRPO); each method's name is taken too:
    # "grpo", "dapo", "dr_grpo"
    loss_norm: str = "sequence"
    # the ratio pi/pi_old the clip acts on: "token" (PPO, GRPO) or "sequence" (GSPO: exp of the mean log-ratio over
    # the completion's tokens, clipped per completion; GSPO clips far tighter, e.g. eps_low 3e-4, eps_high 4e-4)
    importance_sampling_level: str = "token"
    # DAPO's dynamic sampling (trainers/dynamic_sampling.py): a group whose advantages are all 0 (no reward spread) is
    # dropped and prompts_per_step more prompts are sampled, up to max_resample_rounds extra rounds per step
    dynamic_sampling: bool = False
    # extra generation rounds a step may take; a batch still short after them is topped up with flat groups
    max_resample_rounds: int = bounded(3, 0, COUNT)
    # DAPO's overlong handling (trainers/overlong.py): no loss at all on a rollout cut at max_new_tokens without EOS
    mask_truncated: bool = False
    # DAPO's soft overlong punishment: weight of reward component "overlong", 0 up to max_new_tokens - overlong_buffer
    # tokens, then falling linearly to -1 at max_new_tokens (0: off)
    overlong_penalty: float = 0.0
    # the tokens before max_new_tokens over which the penalty grows (DAPO: 4096 of 20480)
    overlong_buffer: int = bounded(0, 0, TOKENS)
    advantage: str = "grpo"  # a registered advantage estimator
    # M: candidate answers written in one rollout, separated by `delimiter` (VPO)
    answers_per_rollout: int = bounded(1, 1, COUNT)
    delimiter: str = DELIMITER  # separates the M answers of a rollout
    draws: int = bounded(32, 1, COUNT)  # Dirichlet draws per set reward (VPO's estimators)
    # VPO's trade-offs (trainers/advantages.py trade_offs): "task" centres them on the task's reward weights, so VPO
    # pursues GRPO's objective; "uniform" is the method's unweighted Dirichlet(1)
    trade_off_weights: str = "task"
    pkpo_k: int = bounded(4, 1, COUNT)  # the k of max@k for the PKPO estimator (<= group_size)
    micro_batch: int = bounded(8, 1, COUNT)  # rows per forward/backward; gradients accumulate to the full batch
    # optimizer passes over each batch of rollouts (GRPO's mu; the clip acts from pass 2)
    num_iterations: int = bounded(1, 1, COUNT)
    behaviour: str = ""  # a registered behaviour scorer added to the reward as component "behaviour/<name>"
    behaviour_weight: float = 0.0  # lambda: its weight, r = r0 + lambda * behaviour(answer, problem)
    # The surrogate's old policy (trainers/rollout_precision.py): "auto" recomputes its log-probs in the update's
    # precision when the engine samples in another (--rollout-dtype), "recompute" always, "sampler" never
    old_logprobs: str = "auto"
    tis_cap: float = 2.0  # C: each token's loss is weighted by min(pi_old / pi_sampler, C) (truncated IS)
    # stop, with the weights of the last healthy step, when rollouts or an update show a collapsed policy
    # (trainers/collapse_watch.py); false: train on whatever happens
    stop_on_collapse: bool = True
    seed: int = bounded(0, SEED)  # seed of problem order, sampling and estimator draws

    def __post_init__(self) -> None:
        self.loss_norm = LOSS_NORM_NAMES.get(self.loss_norm, self.loss_norm)  # "dapo" is "token"
        if self.loss_norm not in LOSS_NORMS:
            names = ", ".join(f"{n} ({m})" for m, n in LOSS_NORM_NAMES.items())
            raise ValueError(f"grpo: unknown loss_norm {self.loss_norm!r}; choose one of {names}")
        self.check_post_training("grpo")
        if self.importance_sampling_level not in IMPORTANCE_LEVELS:
            raise ValueError(
                f"grpo: importance_sampling_level must be one of {', '.join(IMPORTANCE_LEVELS)}, got "
                f"{self.importance_sampling_level!r}"
            )
        if self.old_logprobs not in OLD_LOGPROBS:
            raise ValueError(f"grpo: old_logprobs must be one of {', '.join(OLD_LOGPROBS)}, got {self.old_logprobs!r}")
        if not self.tis_cap > 0:
            raise ValueError(f"grpo: tis_cap must be > 0, got {self.tis_cap!r}")
        for name in (
            "steps",
            "prompts_per_step",
            "group_size",
            "max_new_tokens",
            "micro_batch",
            "answers_per_rollout",
            "draws",
            "num_iterations",
        ):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"grpo: {name} must be >= 1, got {getattr(self, name)!r}")
        check_lr("grpo", self.lr)
        check_lr("grpo", self.warmup_lr, "warmup_lr")
        if not (
            self.lr > 0
            and self.temperature > 0
            and 0 < self.top_p <= 1
            and self.max_grad_norm > 0
            and min(self.weight_decay, self.eps_low, self.eps_high, self.beta) >= 0
        ):
            raise ValueError(
                f"grpo: need lr, temperature and max_grad_norm > 0, 0 < top_p <= 1 and weight_decay, "
                f"eps_low, eps_high, beta >= 0; got lr={self.lr!r}, temperature={self.temperature!r}, "
                f"top_p={self.top_p!r}, max_grad_norm={self.max_grad_norm!r}, weight_decay="
                f"{self.weight_decay!r}, eps_low={self.eps_low!r}, eps_high={self.eps_high!r}, "
                f"beta={self.beta!r}"
            )
        if self.trade_off_weights not in WEIGHTINGS:
            raise ValueError(
                f"grpo: trade_off_weights must be one of {', '.join(WEIGHTINGS)}, got {self.trade_off_weights!r}"
            )
        self.check_warmup("grpo")
        if self.max_resample_rounds < 0:
            raise ValueError(f"grpo: max_resample_rounds must be >= 0, got {self.max_resample_rounds!r}")
        if not self.overlong_penalty >= 0:
            raise ValueError(f"grpo: overlong_penalty must be >= 0, got {self.overlong_penalty!r}")
        if self.overlong_penalty > 0 and not 1 <= self.overlong_buffer <= self.max_new_tokens:
            raise ValueError(
                f"grpo: overlong_penalty needs 1 <= overlong_buffer <= max_new_tokens "
                f"({self.max_new_tokens}), got overlong_buffer={self.overlong_buffer!r}"
            )
        self.check_ref_sync()
        if self.behaviour_weight and not self.behaviour:
            raise ValueError("grpo: behaviour_weight needs behaviour=NAME (a registered behaviour scorer)")

    def check_ref_sync(self) -> None:
        if not self.sync_ref_model:
            return
        if self.beta <= 0:
            raise ValueError("grpo: sync_ref_model needs beta > 0 (without the KL term there is no reference)")
        if self.lora_r:
            raise ValueError(
                "grpo: sync_ref_model needs full fine-tuning: a LoRA policy's reference is itself with "
                "the adapters off, no copy to move"
            )
        if not 0 < self.ref_model_mixup_alpha <= 1:
            raise ValueError(f"grpo: ref_model_mixup_alpha must be in (0, 1], got {self.ref_model_mixup_alpha!r}")
        if not 1 <= self.ref_model_sync_steps <= self.steps:
            raise ValueError(
                f"grpo: ref_model_sync_steps must be in [1, steps={self.steps}] (more would never sync), "
                f"got {self.ref_model_sync_steps!r}"
            )
