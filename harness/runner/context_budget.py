"""Generation budgets against the model's context, before the model loads: a ``max_new_tokens`` the model cannot
hold (the prompt comes first, in the same context) would be found only after the load, or never, since a RoPE
model decodes past its trained positions into noise. The context is read from the model's config alone
(``max_position_embeddings``; no weights): a hub id not in the local cache has none here, and is not checked."""

from __future__ import annotations

from typing import Any

from harness.runner.config import RunConfig

CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length")  # Llama-likes, GPT-2, others


def check_generation_budget(cfg: RunConfig, models: Any, options: dict[str, dict[str, Any]]) -> None:
    """Refuse, in one line, a trainer's or searcher's ``max_new_tokens`` that leaves no room for a prompt in the
    context of ``cfg.model`` (``models``: the model registry)."""
    budgets = {kind: _whole(options.get(kind, {}).get("max_new_tokens")) for kind in ("trainer", "searcher")}
    if not any(budgets.values()):
        return
    context = context_length(cfg.model, models, cfg.model_revision or None)
    for kind, budget in budgets.items():
        if context and budget and budget >= context:
            raise ValueError(
                f"{kind}.max_new_tokens={budget}: model {cfg.model!r} reads at most {context} tokens "
                f"(max_position_embeddings), the prompt included; give fewer than {context}"
            )


def context_length(spec: str, models: Any, revision: str | None = None) -> int | None:
    """The most tokens model ``spec`` reads at once, from its config (a local folder, an alias's, or a hub id's in
    the local cache), else None."""
    from transformers import AutoConfig

    from harness.models import resolve

    try:
        config = AutoConfig.from_pretrained(
            resolve(spec, models), local_files_only=True, **({"revision": revision} if revision else {})
        )
    except Exception:  # no config here (a hub id not cached, a LoRA adapter's folder): the load will say
        return None
    found = [value for name in CONTEXT_FIELDS if isinstance(value := config.to_dict().get(name), int) and value > 0]
    return found[0] if found else None


def _whole(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
