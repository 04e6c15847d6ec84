"""The memory a GRPO-family run needs, per part, before anything is allocated (``harness memory``).

From the model's config alone (its shape: no weights are loaded, the parameter count comes from the architecture
built on the meta device) and the training settings, in bytes:

- weights: parameters x the weights' dtype size;
- trained: every parameter, or the LoRA adapters (rank r on every linear layer of the decoder: r x (in + out) each);
- gradients: the trained parameters in their dtype; AdamW: two moments per trained parameter, in its dtype;
- reference: a frozen copy of the weights when the KL term is on (beta > 0) and the run is not LoRA (LoRA's
  reference is the adapters switched off, no copy);
- activations: what one micro-batch keeps for its backward pass, per token and decoder layer ``ACT_HIDDEN`` hidden
  widths and ``ACT_MLP`` MLP widths in the compute dtype (bf16 under autocast or bf16 weights, else fp32), or one
  hidden width per layer with gradient checkpointing (plus one layer recomputed); plus the vocabulary's logits,
  ``LOGIT_COPIES`` float32 ones for the completion tokens (logits, log-softmax, its gradient) and one in the compute
  dtype for the prompt's; under autocast over float32 weights, the bf16 casts of the trained weights it caches;
- vLLM: its share of the GPU (``gpu_memory_utilization``), when sampling with ``--engine vllm`` on a GPU;
- sharded over N processes (``--shard fsdp``): each holds the plain policy whole (rollouts), plus 1/N of the
  trainable copy's weights, gradients and AdamW moments, plus one decoder layer gathered whole in its forward.

The constants are fitted to the peaks measured on CPU at three shapes (bench/memory_plan_check.py, which prints
estimate against measurement); an estimate, not a guarantee: allocator caching and fragmentation come on top.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Fitted to bench/memory_plan_check.py's CPU peaks (what a layer saves, plus what the allocator holds on to):
ACT_HIDDEN = 20  # hidden-width tensors per token and decoder layer (norms, q/k/v with GQA repeated, rotary, out)
ACT_MLP = 6  # MLP-width tensors per token and layer (gate, up, their activation and product)
LOGIT_COPIES = 3.5  # float32 vocabulary-wide tensors per completion token at the backward peak (3, and cache)
GIB = 1 << 30
# The recipes' models (docs/reference/post-training.md), so their plan needs no download: their published
# config.json fields
KNOWN_SHAPES = {
    "Qwen/Qwen2.5-1.5B": {
        "model_type": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "Qwen/Qwen2.5-7B": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
}


@dataclass
class TrainingShape:
    dtype: str = "float32"  # the weights'
    autocast: str = ""  # "bfloat16": forwards in bf16 over these weights
    lora_r: int = 0
    gradient_checkpointing: bool = False
    beta: float = 0.0  # the KL coefficient: a reference copy when > 0 and not LoRA
    micro_batch: int = 8  # rows per forward/backward
    prompt_tokens: int = 128
    completion_tokens: int = 96
    vllm_share: float = 0.0  # of the GPU, when vLLM samples beside the trainer
    gpu_gib: float = 0.0  # the GPU's memory (for the vLLM share)
    shards: int = 1  # processes the training state is split over (--shard fsdp); 1: none


def model_config(spec: str, registry: Any) -> Any:
    """The transformers config of a model alias, folder or hub id (the local cache only for a hub id), else that of
    a model in KNOWN_SHAPES (an -Instruct id has its base's shape); otherwise one line saying so."""
    from transformers import AutoConfig

    from harness.models import resolve

    source = resolve(spec, registry)
    try:
        return AutoConfig.from_pretrained(source, local_files_only=True)
    except Exception as exc:
        known = KNOWN_SHAPES.get(spec.removesuffix("-Instruct"))
        if known is None:
            raise ValueError(
                f"memory plan: no config for model {spec!r} here ({type(exc).__name__}); give a local "
                f"folder, a hub id in the local cache, or one of {', '.join(KNOWN_SHAPES)}"
            ) from None
        fields = dict(known)
        return AutoConfig.for_model(fields.pop("model_type"), **fields)


def model_shape(config: Any) -> dict[str, int]:
    """Parameter count and the widths the activations depend on, from a transformers config (built on the meta
    device, so a 7B config costs nothing)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())  # tied embeddings counted once, as they are stored
    linear = [
        (m.in_features, m.out_features)
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and name != "lm_head" and ".layers." in f".{name}"
    ]
    return {
        "params": params,
        "hidden": config.hidden_size,
        "mlp": config.intermediate_size,
        "layers": config.num_hidden_layers,
        "vocab": config.vocab_size,
        "lora_per_rank": sum(i + o for i, o in linear),
    }


def plan(shape: dict[str, int], train: TrainingShape) -> dict[str, float]:
    """Bytes per part (module docstring) and their sum, ``peak``: everything resident at the end of a backward."""
    weight_bytes = BYTES[train.dtype]
    trained = shape["lora_per_rank"] * train.lora_r if train.lora_r else shape["params"]
    compute = BYTES["bfloat16"] if (train.autocast or weight_bytes == 2) else 4
    tokens = train.micro_batch * (train.prompt_tokens + train.completion_tokens)
    per_layer = (
        shape["hidden"] if train.gradient_checkpointing else ACT_HIDDEN * shape["hidden"] + ACT_MLP * shape["mlp"]
    )
    layers = tokens * per_layer * shape["layers"] * compute
    if train.gradient_checkpointing:  # the layer being recomputed holds its full activations
        layers += tokens * (ACT_HIDDEN * shape["hidden"] + ACT_MLP * shape["mlp"]) * compute
    logits = (
        train.micro_batch
        * shape["vocab"]
        * (LOGIT_COPIES * 4 * train.completion_tokens + compute * train.prompt_tokens)
    )
    casts = trained * BYTES["bfloat16"] if train.autocast and weight_bytes == 4 else 0  # autocast's weight casts
    weights = shape["params"] * weight_bytes
    if train.shards > 1:  # the plain policy, this rank's share of the sharded copy, one layer gathered in a forward
        weights += weights / train.shards + (shape["params"] / shape["layers"]) * weight_bytes
    parts = {
        "weights": weights,
        "gradients": trained * weight_bytes / train.shards,
        "optimizer": 2 * trained * weight_bytes / train.shards,
        "reference": shape["params"] * weight_bytes if train.beta > 0 and not train.lora_r else 0,
        "activations": layers + logits + casts,
        "vllm": train.vllm_share * train.gpu_gib * GIB,
    }
    return {**parts, "peak": sum(parts.values()), "trained_parameters": trained}


def table(parts: dict[str, float]) -> str:
    rows = [(name, parts[name]) for name in ("weights", "gradients", "optimizer", "reference", "activations", "vllm")]
    width = max(len(n) for n, _ in rows)
    lines = [f"{name:<{width}}  {value / GIB:8.2f} GiB" for name, value in rows if value]
    lines.append(
        f"{'peak':<{width}}  {parts['peak'] / GIB:8.2f} GiB  (trained parameters: "
        f"{parts['trained_parameters'] / 1e6:,.1f}M)"
    )
    return "\n".join(lines)
