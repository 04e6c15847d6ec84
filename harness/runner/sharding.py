"""Sharded training (``--shard fsdp``): the update runs through an FSDP2-sharded copy of the policy, while rollouts,
old log-probs, evaluation and checkpoints keep using the plain policy, as a colocated vLLM keeps its own copy.

Why a copy and not the policy itself: generation runs a different number of forward passes on every rank (each
rank its own prompts, each stopping at its own EOS), and a sharded module all-gathers its weights in every forward,
a collective that needs every rank. The plain copy generates with no collectives; the sharded one holds each rank's
1/N of the trainable weights, their gradients and AdamW's two moments, which is where a full fine-tune's memory goes
(3 of the 4 copies of the weights). After each optimizer step the trained weights are gathered into the plain copy.

torch's own FSDP2 (``fully_shard``, torch >= 2.6) rather than accelerate's FSDP plugin: accelerate refuses FSDP on
CPU, so its path could not be tested on the gloo ranks every CI machine has; this one is the same code on CPU and GPU.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn


def is_decoder_layer(module: nn.Module) -> bool:
    # transformers' decoder blocks are named <Arch>DecoderLayer (Llama, Qwen2, Mistral, Gemma, ...); sharding each one
    # apart lets FSDP gather one block's weights at a time instead of the whole model's.
    return type(module).__name__.endswith("DecoderLayer")


def sharded_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with each decoder layer, and the rest at the root, sharded over the process group's ranks
    (FSDP2: every parameter a DTensor holding this rank's rows). ``requires_grad`` is kept, so a LoRA policy's copy
    trains its adapters and leaves the sharded base frozen."""
    from torch.distributed.fsdp import fully_shard

    shadow = copy.deepcopy(model)
    layers = [m for m in shadow.modules() if is_decoder_layer(m)]
    if not layers:
        raise ValueError(f"--shard fsdp: found no decoder layers (…DecoderLayer modules) in {type(model).__name__}")
    for layer in layers:
        fully_shard(layer)
    fully_shard(shadow)
    return shadow


def trained_pairs(plain: nn.Module, shadow: nn.Module) -> list[tuple[nn.Parameter, nn.Parameter]]:
    """(plain, sharded) of each trained parameter, matched by name."""
    sharded = dict(shadow.named_parameters())
    return [(p, sharded[name]) for name, p in plain.named_parameters() if p.requires_grad]


def moved_optimizer(optimizer: torch.optim.Optimizer, plain: nn.Module, shadow: nn.Module) -> torch.optim.Optimizer:
    """``optimizer`` pointed at the sharded copy's trained parameters instead of the plain ones, its state (a resumed
    run's moments) split the way each parameter is; its kind and settings are kept as they were."""
    from torch.distributed.tensor import distribute_tensor

    pairs = trained_pairs(plain, shadow)
    group = optimizer.param_groups[0]
    if len(optimizer.param_groups) != 1 or [id(p) for p in group["params"]] != [id(p) for p, _ in pairs]:
        raise ValueError("--shard fsdp: the optimizer must hold exactly the policy's trained parameters, in order")
    group["params"] = [s for _, s in pairs]
    for old, new in pairs:
        state = optimizer.state.pop(old, None)
        if state:
            optimizer.state[new] = {
                k: distribute_tensor(v.to(new.device), new.device_mesh, new.placements)
                if torch.is_tensor(v) and v.shape == old.shape
                else v
                for k, v in state.items()
            }
    return optimizer


@torch.no_grad()
def gather_into(shadow: nn.Module, plain: nn.Module) -> None:
    """The sharded copy's trained weights, gathered whole, into the plain policy (a collective: every rank calls
    it, in the same order)."""
    for p, s in trained_pairs(plain, shadow):
        p.copy_(s.full_tensor())


def full_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """``optimizer.state_dict()`` with every sharded tensor gathered whole: the state a one-process optimizer over
    the same parameters would hold, so a checkpoint reads the same sharded or not (a collective)."""
    from torch.distributed.tensor import DTensor

    state = optimizer.state_dict()
    return {
        **state,
        "state": {
            i: {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in s.items()}
            for i, s in state["state"].items()
        },
    }


def clip_grad_norm_(shadow: nn.Module, max_norm: float) -> torch.Tensor:
    """The whole gradient's norm (over every rank's shard), clipped to ``max_norm`` as one process would."""
    from torch.distributed.tensor import DTensor

    norm = torch.nn.utils.clip_grad_norm_([p for p in shadow.parameters() if p.requires_grad], max_norm)
    return norm.full_tensor() if isinstance(norm, DTensor) else norm
