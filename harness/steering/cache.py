"""A cache of the steering vectors VSPO builds in a run, so the next run with the same inputs skips stage 1.

Building a vector costs the policy's answers, the teacher's rewrites and a probe of the layers: minutes on a CPU,
spent again by every run with the same model, behaviour and prompts although the result is the same (the build
samples greedily, with a fixed seed). The key is a digest of everything the build reads:

- the policy's weights, hashed (not its name: a fine-tuned or half-trained policy is a different model);
- the teacher (its spec; "" is the policy itself), the behaviour, the prompts the answers are written for;
- the build's options (token limits, seed, probe settings) and ``BUILD_VERSION``, bumped when the build changes.

Entries live under ``<cache_dir>/vectors/<key>.safetensors`` (``HARNESS_CACHE``, by default
~/.cache/vector-harness; ``HARNESS_VECTOR_CACHE`` names another folder); deleting the folder is always safe. The
key does not name the CPU: bf16 kernels differ between machines, so a cache folder shared between machines hands
one machine's vector to another (close, not bit-identical).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

BUILD_VERSION = 1  # bump when contrastive_pairs, agreeing_pairs or build_vector change what they produce


def weights_digest(model: Any) -> str:
    """blake2b of every parameter and buffer, names included (about a second for 135M parameters)."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            h.update(name.encode())
            h.update(str(tensor.dtype).encode())
            h.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def vector_key(model: Any, inputs: dict[str, Any]) -> str:
    """The cache key of a vector built on ``model`` from ``inputs`` (JSON-serialisable: prompts, options)."""
    blob = json.dumps({"weights": weights_digest(model), "build": BUILD_VERSION, **inputs}, sort_keys=True)
    return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()


def cache_folder() -> Path:
    """``HARNESS_VECTOR_CACHE`` if set (the tests give each test its own), else ``<cache_dir>/vectors``."""
    from harness.models import cache_dir

    return Path(os.environ.get("HARNESS_VECTOR_CACHE") or cache_dir() / "vectors")


def cached(key: str) -> Path | None:
    path = cache_folder() / f"{key}.safetensors"
    return path if path.is_file() else None


def remember(key: str, built: Path) -> Path | None:
    """Copy a built vector into the cache (atomically: a crash leaves no half file); None when the cache cannot be
    written, which never fails the run that built it."""
    target = cache_folder() / f"{key}.safetensors"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial")
        shutil.copyfile(built, partial)
        partial.replace(target)
    except OSError:
        return None
    return target
