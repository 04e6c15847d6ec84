"""Steering inside vLLM: a worker extension (vLLM's ``worker_extension_cls`` engine argument, ``--worker-extension-cls``
for ``vllm serve``) whose methods, called through ``collective_rpc``, put a steering vector on the worker's model and
take it off.

``set_steering(layer, vector, scale)`` registers a forward hook on decoder layer ``layer`` of the worker's model that
adds ``scale * vector`` to the layer's output residual stream, at every token of every request in the batch (vLLM
flattens the batch: one strength per call, which is why the engines group rows by strength); ``clear_steering()``
removes it. The layer is the one ``harness/steering/vectors.py`` numbers (``model.layers[layer]``'s output).

vLLM's Llama-family decoder layers return ``(hidden_states, residual)``, and the residual stream after the layer is
their sum (the next layer's fused add-RMSNorm, or the final norm, adds them). The hook adds to ``residual``: the sum
moves by ``scale * vector`` exactly as the transformers layer's single output does under ``RowSteering``. A layer
that returns one tensor gets it added to that tensor.

A Python forward hook runs only when vLLM runs the model eagerly (``enforce_eager=True``: no torch.compile, no CUDA
graphs; the default of both vLLM engines on CPU); in a compiled model it would silently do nothing, so it is refused.

This module imports only torch (and vLLM's config inside a worker): a generation machine without the harness can use
a copy of it on its ``PYTHONPATH`` (``--worker-extension-cls vllm_steering.SteeringExtension``).
"""

from __future__ import annotations

import json
from typing import Any

EXTENSION = "harness.engine.vllm_steering.SteeringExtension"
EAGER_ONLY = (
    "steering in vLLM needs the model run eagerly (a compiled model or CUDA graph does not run Python forward hooks): "
    "start vLLM with enforce_eager=True (--set engine.enforce_eager=true; vllm serve --enforce-eager)"
)


class SteeringExtension:
    """Mixed into vLLM's worker class (vLLM checks that no name here clashes with the worker's)."""

    def set_steering(self, layer: int, vector: Any, scale: float) -> dict[str, Any]:
        """Add ``scale * vector`` to decoder layer ``layer``'s output from now on (replacing any earlier vector).
        ``vector``: a list of floats, a tensor, or a JSON list (``/collective_rpc`` passes text)."""
        import torch

        _check_eager(self.vllm_config)
        model = self.get_model()
        layers = _decoder_layers(model)
        layer = int(layer)
        if not 0 <= layer < len(layers):
            raise ValueError(f"steering layer {layer} is out of range: the model has {len(layers)} layers")
        if isinstance(vector, str):
            vector = json.loads(vector)
        param = next(model.parameters())
        values = torch.as_tensor(vector, dtype=torch.float32).reshape(-1)
        hidden = int(getattr(model.config, "hidden_size", values.numel()))
        if values.numel() != hidden:
            raise ValueError(f"steering vector has {values.numel()} entries; the model's hidden size is {hidden}")
        # beta * v in the model's dtype, as RowSteering computes it (both factors cast first)
        shift = torch.tensor(float(scale), dtype=param.dtype) * values.to(param.dtype)
        shift = shift.to(param.device)
        self.clear_steering()
        self._harness_steering = layers[layer].register_forward_hook(_adder(shift))
        return {"layer": layer, "scale": float(scale)}

    def clear_steering(self) -> bool:
        """Remove the steering hook; whether there was one."""
        handle = getattr(self, "_harness_steering", None)
        self._harness_steering = None
        if handle is not None:
            handle.remove()
        return handle is not None


def _adder(shift: Any):
    def hook(module: Any, args: Any, output: Any) -> Any:
        if isinstance(output, tuple):
            if len(output) >= 2 and output[1] is not None and output[1].shape == output[0].shape:
                return (output[0], output[1] + shift, *output[2:])  # residual stream = hidden_states + residual
            return (output[0] + shift, *output[1:])
        return output + shift

    return hook


def _decoder_layers(model: Any) -> Any:
    """``model.model.layers`` (vLLM's Llama-style models), or the language model's inside a multimodal one."""
    for candidate in (model, getattr(model, "get_language_model", lambda: None)()):
        inner = getattr(candidate, "model", None)
        if inner is not None and hasattr(inner, "layers"):
            return inner.layers
    raise ValueError(f"steering: cannot find the decoder layers of {type(model).__name__} (no .model.layers)")


def _check_eager(vllm_config: Any) -> None:
    from vllm.config import CompilationMode, CUDAGraphMode

    compilation = vllm_config.compilation_config
    if compilation.mode != CompilationMode.NONE or compilation.cudagraph_mode not in (None, CUDAGraphMode.NONE):
        raise RuntimeError(EAGER_ONLY)
