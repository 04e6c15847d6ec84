"""Steering vectors: a direction v in one decoder layer's residual stream that moves the model towards a behaviour,
its file, and the forward hook that adds ``beta_r * v`` to row r of a batch while sampling (VSPO's stage 2:
``TransformersEngine.generate(..., steering=Steering(v, betas))``). Building a vector is harness/steering/build.py;
the contrastive pairs it is built from come from a teacher (harness/teacher/rewrite.py).

Layers are numbered as ``model.model.layers``: ``layer=i`` is the *output* of decoder layer i, which is
``hidden_states[i + 1]`` of ``output_hidden_states=True``.

torch is imported inside the functions, so importing this module (e.g. from a plugin's registration) stays cheap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

FILE_FORMAT = "vector-harness/steering-vector/1"
# How a strength beta is read: absolute (beta is the norm added to the residual stream; the vector has unit norm),
# or in units of the vector's raw_norm or activation_norm (SteeringVector.norms). activation_norm makes a schedule
# portable across layers and models: the residual stream's norm grows ~6x from early to late layers of SmolLM2-135M,
# so "add 10" is a shove at layer 4 and a whisper at layer 28, while "add 0.15 of the activation norm" is comparable.
BETA_UNITS = ("absolute", "raw_norm", "activation_norm")

# ----------------------------------------------------------------------------------------------------------------
# The vector and its file
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class SteeringVector:
    vector: torch.Tensor  # [hidden]; unit norm when built by build_vector
    layer: int  # index into the model's decoder layers: steering adds to the *output* of layers[layer]
    model: str  # the model spec it was built on (e.g. "smollm2-135m"); provenance["model_source"] has the folder
    behaviour: str
    provenance: dict[str, Any] = field(default_factory=dict)  # teacher, pairs, criterion, layer scores, date, version
    # raw_norm: |mean_pos - mean_neg| at the layer before normalising (beta = raw_norm moves the negative set's mean
    # activation onto the positive set's); activation_norm: mean norm of the per-example mean activation there.
    norms: dict[str, float] = field(default_factory=dict)

    def unit(self, beta_unit: str) -> float:
        """The residual-stream norm that one unit of beta stands for (see BETA_UNITS)."""
        if beta_unit not in BETA_UNITS:
            raise ValueError(f"beta_unit must be one of {', '.join(BETA_UNITS)}, got {beta_unit!r}")
        if beta_unit == "absolute":
            return 1.0
        if beta_unit not in self.norms:
            raise ValueError(f"steering vector for {self.model!r} has no {beta_unit} recorded; use beta_unit=absolute")
        return float(self.norms[beta_unit])

    @property
    def hidden_size(self) -> int:
        return int(self.vector.shape[-1])

    def check(self, model: Any) -> None:
        """Raise unless the vector fits ``model`` (a Policy, a transformers model, or a hidden size)."""
        hidden, layers = _model_shape(model)
        if hidden != self.hidden_size:
            raise ValueError(
                f"steering vector for {self.model!r} has hidden size {self.hidden_size}; the model has {hidden}"
            )
        if layers is not None and not 0 <= self.layer < layers:
            raise ValueError(f"steering vector layer {self.layer} is out of range: the model has {layers} layers")

    def save(self, path: str | Path) -> None:
        """One small safetensors file: the tensor, and everything else as JSON in the file's metadata."""
        from safetensors.torch import save_file

        from harness.store.run_folder import new_file_mode

        meta = {
            "layer": self.layer,
            "model": self.model,
            "behaviour": self.behaviour,
            "provenance": self.provenance,
            "norms": self.norms,
        }
        mode = new_file_mode(Path(path))  # save_file leaves 0600; give what open(path, "w") would
        save_file(
            {"vector": self.vector.detach().float().cpu().contiguous()},
            str(path),
            metadata={"format": FILE_FORMAT, "meta": json.dumps(meta)},
        )
        os.chmod(path, mode)

    @classmethod
    def load(cls, path: str | Path, model: Any = None) -> SteeringVector:
        """Read a file written by ``save``; given ``model`` (Policy, transformers model or hidden size), check it."""
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            if header.get("format") != FILE_FORMAT:
                raise ValueError(f"{path}: not a steering vector file (format {header.get('format')!r})")
            vector = f.get_tensor("vector")
        meta = json.loads(header["meta"])
        loaded = cls(
            vector=vector,
            layer=int(meta["layer"]),
            model=meta["model"],
            behaviour=meta["behaviour"],
            provenance=meta["provenance"],
            norms=meta["norms"],
        )
        if model is not None:
            loaded.check(model)
        return loaded


@dataclass(frozen=True)
class Steering:
    """What ``TransformersEngine.generate(..., steering=)`` adds: ``betas[r] * vector`` at row r.

    ``betas`` has one entry per completion row (len(prompts) * n, prompt-major: row r is prompt r // n, sample r % n),
    or, as a shorthand, one entry per sample index j (len n), applied to every prompt. The two readings coincide when
    there is one prompt, so the length alone decides."""

    vector: SteeringVector
    betas: Sequence[float]

    def row_betas(self, num_prompts: int, n: int) -> list[float]:
        betas = [float(b) for b in self.betas]
        if any(b != b or b in (float("inf"), float("-inf")) for b in betas):
            raise ValueError(f"steering betas must be finite: {betas}")
        if len(betas) == num_prompts * n:
            return betas
        if len(betas) == n:
            return betas * num_prompts
        raise ValueError(
            f"steering needs one beta per row ({num_prompts} prompts x n={n} = {num_prompts * n}) "
            f"or one per sample index (n={n}); got {len(betas)}"
        )


# ----------------------------------------------------------------------------------------------------------------
# The hook
# ----------------------------------------------------------------------------------------------------------------


def decoder_layers(model: Any) -> Sequence[Any]:
    """The model's decoder layers (``model.model.layers`` for Llama-style models)."""
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "layers"):
        return inner.layers
    return model.get_decoder().layers


class RowSteering:
    """A forward hook on one decoder layer adding ``betas[b] * vector`` to its output, at every position of batch
    row b (padding included: padded positions are masked out as keys and their outputs are never read).

    Registered on construction; ``remove()`` (or leaving a ``with`` block) takes it off without residue. The engine
    calls ``set_betas`` whenever its batch changes (prefill groups, then rows, then rows still active), so the betas
    always line up with the batch; a batch of another size is an error, not a silent broadcast."""

    def __init__(self, model: Any, vector: SteeringVector, betas: Sequence[float] | None = None) -> None:
        vector.check(model)
        param = next(model.parameters())
        self._device, self._dtype = param.device, param.dtype
        self.vector = vector.vector.to(device=self._device, dtype=self._dtype)
        self.betas: torch.Tensor | None = None
        if betas is not None:
            self.set_betas(betas)
        self._handle = decoder_layers(model)[vector.layer].register_forward_hook(self._hook)

    def set_betas(self, betas: Sequence[float] | torch.Tensor) -> None:
        import torch

        self.betas = torch.as_tensor(betas, dtype=self._dtype, device=self._device).reshape(-1)

    def _hook(self, module: Any, args: Any, output: Any) -> Any:
        # transformers 5.24's decoder layers return a tensor; older ones (and some models) a tuple led by it.
        hidden = output[0] if isinstance(output, tuple) else output
        if self.betas is None or self.betas.shape[0] != hidden.shape[0]:
            got = None if self.betas is None else self.betas.shape[0]
            raise RuntimeError(f"steering has {got} betas for a batch of {hidden.shape[0]} rows")
        steered = hidden + self.betas[:, None, None] * self.vector
        return (steered, *output[1:]) if isinstance(output, tuple) else steered

    def remove(self) -> None:
        self._handle.remove()

    def __enter__(self) -> RowSteering:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _model_shape(model: Any) -> tuple[int, int | None]:
    """(hidden size, number of decoder layers or None) of a Policy, a transformers model, or a bare hidden size."""
    if isinstance(model, int):
        return model, None
    model = getattr(model, "model", model) if hasattr(model, "tokenizer") else model  # a Policy -> its model
    config = model.config
    return int(config.hidden_size), getattr(config, "num_hidden_layers", None)
