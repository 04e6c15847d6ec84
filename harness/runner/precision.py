"""``--rollout-dtype auto`` (the default): the training rollouts sample in bfloat16 where the device computes it
natively and it is safe, every evaluation samples in the weights' own precision.

Safe means: the trainer recomputes the old policy's log-probabilities in its own precision when the engine samples
in another (``TrainerCapabilities.recomputes_old_logprobs``; GRPO and its subclasses do, trainers/
rollout_precision.py), the engine can change its precision for one phase (``EngineCapabilities.phase_dtype``: the
transformers engine, which autocasts; vLLM fixes its dtype when it starts), and the weights are float32 (bf16 weights
sample in bf16 anyway). Evaluations (before, after, a searcher's run) stay exact, so a reported pass@k is the trained
policy's own, not a bf16 approximation of it.

Native means: CUDA with bf16 (compute capability 8.0 and up), or a CPU whose torch build has AVX-512 kernels and
whose flags include ``avx512_bf16`` or ``amx_bf16``. Elsewhere (an AVX2 CPU, say) bf16 matrix products are emulated,
and "auto" keeps the weights' precision everywhere: a run that cannot gain keeps its float32 rollouts bit for bit.

An explicit ``--rollout-dtype`` (float32, bfloat16, float16) is given to the engine when it is built and holds for
every phase, as before "auto" existed; "" (older manifests) is the weights' precision everywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from harness.types import EngineCapabilities, TrainerCapabilities, capabilities_of

AUTO = "auto"


@dataclass(frozen=True)
class RolloutPrecision:
    """What a run samples in: ``setting`` (the flag), ``eval`` and ``train`` (dtypes of the phases), and why."""

    setting: str
    eval: str
    train: str
    why: str

    def describe(self) -> dict[str, str]:
        return asdict(self)

    @contextlib.contextmanager
    def train_phase(self, engine: Any) -> Iterator[None]:
        """Inside: the engine samples in ``train`` (when that differs from what it was built with)."""
        if self.train == self.eval:
            yield
            return
        with engine.sampling_in(self.train):
            yield

    @contextlib.contextmanager
    def eval_phase(self, engine: Any) -> Iterator[None]:
        """Inside the training phase: the engine samples in ``eval`` (an evaluation during training, --eval-every,
        reports the policy in the precision every other evaluation does)."""
        if self.train == self.eval:
            yield
            return
        with engine.sampling_in(self.eval):
            yield


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux reports them (empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@cache
def native_bf16(device_type: str) -> tuple[bool, str]:
    """Whether ``device_type`` ("cpu", "cuda", ...) computes bf16 natively, and what was found."""
    import torch

    if device_type == "cuda":
        if not torch.cuda.is_available():
            return False, "no CUDA device"
        name = torch.cuda.get_device_name()
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return True, f"CUDA {name}: native bf16"
        return False, f"CUDA {name}: no native bf16"
    if device_type != "cpu":
        return False, f"device {device_type}: not checked for bf16"
    capability = torch.backends.cpu.get_cpu_capability()
    found = sorted(cpu_flags() & {"avx512_bf16", "amx_bf16"})
    if capability.startswith("AVX512") and found:
        return True, f"CPU: torch {capability}, {' and '.join(found)}"
    return False, f"CPU: torch {capability}, {'no avx512_bf16 / amx_bf16' if not found else ' and '.join(found)}"


def resolve(setting: str, weights: str, device_type: str, engine: Any, trainer: Any) -> RolloutPrecision:
    """The precision of each phase for ``--rollout-dtype setting`` (``engine`` built, ``trainer`` or None)."""
    if setting != AUTO:
        dtype = setting or weights
        return RolloutPrecision(setting, dtype, dtype, "given" if setting else "the weights' (no setting)")
    why = ""
    if weights != "float32":
        why = f"the weights are {weights} already"
    elif trainer is None:
        why = "no training"
    elif not capabilities_of(trainer, TrainerCapabilities).recomputes_old_logprobs:
        why = "the trainer does not recompute the old log-probs in its own precision"
    elif not capabilities_of(engine, EngineCapabilities).phase_dtype:
        why = "the engine cannot change its precision for the training phase"
    else:
        native, found = native_bf16(device_type)
        if native:
            return RolloutPrecision(AUTO, weights, "bfloat16", f"training rollouts in bf16: {found}")
        why = found
    return RolloutPrecision(AUTO, weights, weights, f"the weights' precision everywhere: {why}")
