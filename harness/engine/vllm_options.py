"""How `--engine vllm` is started: the options it takes, typed; the GPU memory share it may use beside the trainer;
its place under torchrun. Decided from the options and the environment, so it is tested without vLLM.

- Options: the engine's own (harness/engine/vllm_engine.py) and any field of vLLM's ``EngineArgs``, which go to
  ``vllm.LLM``. Anything else is refused in one line before the model loads (``EngineCapabilities.passthrough``,
  harness/runner/plan.py); ``--set engine.KEY=VALUE`` values arrive as text and are typed by the field's default.
- Memory, on a GPU: vLLM refuses to start when the card's free memory is below ``gpu_memory_utilization`` of its
  total (0.9 by default), and the policy, its optimizer state and the reference are already there. Colocated as TRL
  colocates it, it gets a share (``GPU_SHARE``, TRL's default) that holds its weights and a KV cache sized by vLLM
  from what is left of the share; ``kv_cache_gib`` fixes the cache instead. On CPU the share means nothing and the
  cache is ``kv_cache_gib`` (1 GiB by default: vLLM's own CPU default is a fraction of the machine's memory).
- Under torchrun / accelerate launch (WORLD_SIZE > 1) each rank builds its own vLLM on its own GPU
  (``LOCAL_RANK``), through vLLM's ``external_launcher`` backend, which runs the engine inside the launched process
  rather than spawning workers; every rank then samples its own share of the prompts, as with the default engine.
  On CPU there is no such placement: refused in one line, pointing at ``--engine vllm-server`` (one server for all
  ranks).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from harness.plugins.options import coerce

GPU_SHARE = 0.3  # of the card's memory for vLLM's weights and KV cache, as TRL's colocate mode by default
CPU_KV_CACHE_GIB = 1.0
ENGINE_ARGS = "vllm.engine.arg_utils:EngineArgs"  # whose fields ``vllm.LLM`` takes as keyword arguments
RANKS_ON_CPU = (
    "--engine vllm under torchrun needs a GPU per rank (vLLM's external_launcher); on CPU use "
    "--engine vllm-server, one server for every rank"
)


def typed(options: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``options`` with text values typed by the field's default (``fields``: name -> default): a bool's as a
    bool, a number's as a number (int or float as written: vLLM annotates some float fields with int defaults), a
    text's as text, a None default's as whatever the text reads as (``literal``)."""
    out = dict(options)
    for key, value in options.items():
        default = fields.get(key)
        if not isinstance(value, str) or isinstance(default, str):
            continue
        if isinstance(default, bool):
            try:
                out[key] = coerce(value, default)
            except ValueError:
                raise ValueError(f"engine 'vllm': option {key}={value!r} should be true or false") from None
        else:
            out[key] = literal(value)
            number = isinstance(out[key], (int, float)) and not isinstance(out[key], bool)
            if default is not None and not number:
                raise ValueError(f"engine 'vllm': option {key}={value!r} should be a number")
    return out


def literal(text: str) -> Any:
    """'3' -> 3, '0.5' -> 0.5, 'true' / 'false' -> a bool, anything else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def engine_arg_defaults(engine_args: type) -> dict[str, Any]:
    """vLLM's ``EngineArgs`` fields and their defaults (None where a field has a factory or no default)."""
    return {
        f.name: (f.default if f.default is not dataclasses.MISSING else None) for f in dataclasses.fields(engine_args)
    }


def memory_options(on_gpu: bool, kv_cache_gib: float | None, gpu_memory_utilization: float | None) -> dict[str, Any]:
    """The KV cache and memory share options for ``vllm.LLM`` (module docstring)."""
    options: dict[str, Any] = {}
    if on_gpu:
        options["gpu_memory_utilization"] = GPU_SHARE if gpu_memory_utilization is None else gpu_memory_utilization
    elif gpu_memory_utilization is not None:
        raise ValueError("engine 'vllm': gpu_memory_utilization is a share of a GPU's memory; on CPU set kv_cache_gib")
    if kv_cache_gib is None and not on_gpu:
        kv_cache_gib = CPU_KV_CACHE_GIB
    if kv_cache_gib is not None:
        options["kv_cache_memory_bytes"] = int(float(kv_cache_gib) * (1 << 30))
    return options


def rank_placement(on_gpu: bool, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Options placing this rank's vLLM under torchrun (module docstring); {} in a single process. Also returns the
    device index under the key ``"device"``, for the caller to select before vLLM starts."""
    env = dict(os.environ) if env is None else env
    world = int(env.get("WORLD_SIZE", "1"))
    if world <= 1:
        return {}
    if not on_gpu:
        raise RuntimeError(RANKS_ON_CPU)
    rank = int(env.get("RANK", "0"))
    return {
        "distributed_executor_backend": "external_launcher",
        "seed": rank,
        "device": int(env.get("LOCAL_RANK", rank)),
    }
