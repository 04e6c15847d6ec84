"""What post-training a real model needs beyond the update rule, shared by every trainer: LoRA adapters (peft),
gradient checkpointing, mixed-precision autocast, and a learning-rate schedule.

- LoRA: ``lora_r > 0`` wraps the policy with peft adapters IN PLACE: peft swaps the targeted Linear layers of
  ``policy.model`` for LoRA layers, so the engine, which holds ``policy.model``, samples from the adapted policy with
  no change. Only the adapters train; the KL reference is the same model with its adapters switched off
  (``AdaptersOff``), not a second copy of the weights. ``policy.adapter`` keeps the peft wrapper, for saving.
- Gradient checkpointing: activations are recomputed in the backward pass instead of kept (transformers' own,
  non-reentrant); it only acts in training mode, so generation keeps its KV cache.
- Autocast: forward passes of the update run under ``torch.autocast`` in bf16/fp16 while the weights (and AdamW's
  state) stay in their own dtype: TRL's ``bf16=True``. Weights stored in bf16 are the run's ``--dtype`` instead.
  ``auto`` (the default) trains in the precision the training rollouts were sampled in when that is bf16 over
  float32 weights (``--rollout-dtype auto`` picks it where bf16 is native: a CUDA GPU from Ampere on, an AVX-512
  bf16 CPU), else in the weights' own: the update's forwards then run 1.6x faster on such a CPU (SmolLM2-135M,
  8 x 110 tokens, 2 cores), and sampler and trainer compute in one precision (the old log-probs are still
  recomputed, in bf16: token-by-token decoding rounds otherwise than a whole-sequence forward).
- Schedule: the learning rate of step s is ``lr * lr_factor(s)`` (linear warm-up over ``warmup_ratio`` of the steps,
  then constant, linear or cosine decay to 0), set on the optimizer before each step. A function of the step, not
  a scheduler object, so a resumed run needs no scheduler state to land on the same rate.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import torch

from harness.plugins.size_bounds import RANK, bounded

SCHEDULES = ("constant", "linear", "cosine")
AUTOCAST = ("", "auto", "bfloat16", "float16")
AUTO = "auto"


@dataclass
class PostTrainingOptions:
    """Trainer options every trainer takes (a base of each trainer's config dataclass)."""

    lora_r: int = bounded(0, 0, RANK)  # LoRA rank; 0 trains every weight
    lora_alpha: float = 32.0  # LoRA scale alpha (the update is alpha / r * B A)
    lora_dropout: float = 0.0  # dropout on the LoRA adapters' input
    lora_target_modules: str = "all-linear"  # peft's target_modules: "all-linear" or comma-separated module names
    save_merged: bool = False  # LoRA: also save the adapters merged into the weights (<run>/model-merged/)
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~1/3 more compute
    # "bfloat16"/"float16": the update's forward passes in that precision, weights unchanged; "": the weights';
    # "auto": bfloat16 when the training rollouts sample in it over float32 weights, else the weights'
    # (resolve_autocast)
    autocast: str = AUTO
    lr_scheduler: str = "constant"  # "constant", "linear" or "cosine" decay after the warm-up
    warmup_ratio: float = 0.0  # fraction of the steps over which the learning rate rises linearly from 0

    def check_post_training(self, name: str) -> None:
        if self.lora_r < 0 or (self.lora_r and self.lora_alpha <= 0) or not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"{name}: need lora_r >= 0, lora_alpha > 0 and 0 <= lora_dropout < 1")
        if self.autocast not in AUTOCAST:
            raise ValueError(f"{name}: autocast must be one of auto, bfloat16, float16 or empty, got {self.autocast!r}")
        if self.lr_scheduler not in SCHEDULES:
            raise ValueError(
                f"{name}: unknown lr_scheduler {self.lr_scheduler!r}; choose one of {', '.join(SCHEDULES)}"
            )
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"{name}: warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}")


def prepare_policy(policy: Any, options: PostTrainingOptions) -> None:
    """Add LoRA adapters (once: a resumed or re-trained policy keeps its own) and switch on gradient checkpointing."""
    model = policy.model
    loaded = getattr(policy, "adapter", None)
    if loaded is not None and not options.lora_r:
        raise ValueError(
            "this policy is LoRA adapters over a base model: train its adapters (lora_r > 0) or load "
            "its merged weights (model-merged/, written with save_merged=true)"
        )
    if loaded is not None:  # adapters loaded from a saved run train on (they load frozen)
        for name, parameter in model.named_parameters():
            parameter.requires_grad_("lora_" in name)
    if options.lora_r and loaded is None:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as exc:
            raise ImportError("LoRA needs peft: pip install peft") from exc
        targets = options.lora_target_modules
        modules = targets if targets == "all-linear" else [t.strip() for t in targets.split(",")]
        config = LoraConfig(
            r=options.lora_r,
            lora_alpha=options.lora_alpha,
            lora_dropout=options.lora_dropout,
            target_modules=modules,
            task_type="CAUSAL_LM",
        )
        # peft keeps adapter weights in fp32 over bf16/fp16 weights (autocast_adapter_dtype): the updates that
        # train are not rounded away
        policy.adapter = get_peft_model(model, config)
        model.eval()
    if options.gradient_checkpointing and not checkpointing(model):
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x's name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if not options.lora_r and next(model.parameters()).dtype != torch.float32 and not getattr(policy, "adapter", None):
        import warnings

        warnings.warn(
            f"full fine-tuning with {next(model.parameters()).dtype} weights rounds away updates smaller "
            "than their precision; keep float32 weights with autocast=bfloat16, or train LoRA adapters",
            stacklevel=2,
        )


def checkpointing(model: Any) -> bool:
    """Whether the model recomputes activations in backward (the attribute was renamed in transformers 5)."""
    if hasattr(type(model), "is_activation_checkpointing"):
        return bool(model.is_activation_checkpointing)
    return bool(getattr(model, "is_gradient_checkpointing", False))


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    """What the optimizer updates: every weight, or only the adapters of a LoRA policy."""
    return [p for p in model.parameters() if p.requires_grad]


class AdaptersOff:
    """The KL reference of a LoRA policy: the same model called with its adapters switched off, which is the
    policy before training; costs no memory beyond a forward pass."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter

    def __call__(self, **inputs: Any) -> Any:
        with self.adapter.disable_adapter():
            return self.adapter.get_base_model()(**inputs)

    def parameters(self):
        return self.adapter.get_base_model().parameters()


def resolve_autocast(setting: str, sampling_dtype: str, weights_dtype: str) -> str:
    """``auto`` -> "bfloat16" when the training rollouts sample in bf16 over float32 weights, else "" (the weights'
    precision); any other setting as it is. Mixed precision is then what the sampler already computes in, so it
    adds no gap between the two, and happens only where the run chose bf16 sampling as native."""
    if setting != AUTO:
        return setting
    return "bfloat16" if sampling_dtype == "bfloat16" and weights_dtype == "float32" else ""


def autocast_dtype(options: PostTrainingOptions) -> str:
    """The precision ``options`` autocast to: "bfloat16"/"float16", or "" for none (also an unresolved ``auto``:
    the trainer resolves it when training starts)."""
    return "" if options.autocast == AUTO else options.autocast


def autocast_to(dtype: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Forward passes under ``torch.autocast`` to ``dtype``, or as they are for ""."""
    if not dtype:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=getattr(torch, dtype))


def autocast(options: PostTrainingOptions, device: torch.device) -> contextlib.AbstractContextManager:
    """The update's forward passes in ``options.autocast`` precision, or as they are."""
    return autocast_to(autocast_dtype(options), device)


def lr_factor(step: int, steps: int, options: PostTrainingOptions) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based) of ``steps``: warm-up from
    1/(warm-up steps + 1) up to 1 (a first step at rate 0 would be wasted), then the schedule's decay."""
    warmup = math.ceil(options.warmup_ratio * steps)
    if step < warmup:
        return (step + 1) / (warmup + 1)
    if options.lr_scheduler == "constant" or steps - warmup <= 1:
        return 1.0
    progress = (step - warmup) / (steps - warmup)  # 0 at the first step after warm-up, < 1 at the last
    if options.lr_scheduler == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
