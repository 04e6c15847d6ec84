"""Rollout engines: the transformers loop (steering, exact log-probs; the default), vLLM in process, a vLLM server.
Registered through ``harness_register_engines`` like any plugin; only ``"module:attr"`` strings here, so importing
this package imports neither torch nor vLLM. ``tokens.py`` tokenizes chat prompts without building an engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.plugins.registry import Registry


@hookimpl
def harness_register_engines(registry: Registry) -> None:
    registry.add(
        "transformers",
        "harness.engine.transformers_engine:TransformersEngine",
        "a sampling loop on the policy itself: exact log-probs, per-row steering (default)",
    )
    registry.add(
        "vllm",
        "harness.engine.vllm_engine:VLLMEngine",
        "vLLM in this process, weights synced from the trainer after each update (extra: vllm)",
    )
    registry.add(
        "vllm-server",
        "harness.engine.vllm_server_engine:VLLMServerEngine",
        "a `vllm serve` at engine.url, weights pushed through a shared folder after each update",
    )
