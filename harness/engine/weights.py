"""The weights an engine with a model of its own (vLLM, a vLLM server) loads from the policy: the plain architecture's
state dict, whatever trains on top of it.

A LoRA policy (peft's layers injected into the model, trainers/post_training.py) has names the plain architecture
does not know (``q_proj.base_layer.weight``, ``q_proj.lora_A.default.weight``); a server given them would refuse them
or, worse, keep its old weights. Each adapted layer is sent instead as its merged weight ``W + scale * B A`` under
the layer's own name (``q_proj.weight``), which is what the adapted layer computes. Merging here, not in the model,
leaves the trained adapters untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

BASE = ".base_layer."


def serving_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """(name, tensor) pairs of the plain architecture's weights, adapters merged in; the model's own state dict when
    it has no adapters."""
    adapted = {
        name: module
        for name, module in model.named_modules()
        if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight")
    }
    for key, tensor in model.state_dict().items():
        if ".lora_" in key:  # lora_A / lora_B / lora_dropout / lora_embedding_*: folded into the base weight below
            continue
        if BASE in key:
            owner, leaf = key.split(BASE, 1)
            layer = adapted.get(owner)
            if leaf == "weight" and layer is not None and not layer.merged and not layer.disable_adapters:
                delta = sum(layer.get_delta_weight(name) for name in layer.active_adapters)
                tensor = (tensor + delta).to(tensor.dtype)
            key = f"{owner}.{leaf}"
        yield key, tensor.detach()
