"""Tokenizing chat prompts without building an engine: what every engine, the judge, SFT and steering share, so
none of them constructs a ``TransformersEngine`` just to apply a chat template."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from harness.types import Messages


def encode_chat(tokenizer: Any, messages: Messages) -> list[int]:
    """A conversation's prompt token ids, ready for the assistant's turn (its chat template; plain lines when the
    tokenizer has none)."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        return list(ids["input_ids"] if isinstance(ids, dict) else ids)
    return tokenizer("\n".join(m["content"] for m in messages))["input_ids"]


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every token that ends an answer: the tokenizer's EOS and the model's generation config's (chat models often
    stop on an end-of-turn token that is not the tokenizer's EOS)."""
    ids = {tokenizer.eos_token_id}
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if gen_eos is not None:
        ids |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    return {i for i in ids if i is not None}


def left_pad(rows: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows left-padded into one batch (input_ids, attention_mask): every row's last token is at the last
    position, where a next-token prediction is read."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r) :] = 1
    return ids, mask
