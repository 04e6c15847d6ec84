"""The rollout engine on transformers: batched sampling with per-token log-probabilities.

A hand-written decoding loop rather than ``model.generate`` because we need, cheaply and exactly:
- the log-probability of every sampled token under the policy at the sampling temperature (what GRPO's ratio uses);
- prefix sharing: each prompt is prefilled once and its KV cache repeated for its n samples (steered: once per beta);
- finished rows dropped from the batch, so a long straggler does not make everyone pay;
- per-sample random streams: sample j of a prompt draws from a generator seeded by (seed, prompt, j), so a
  sample does not change when the batch around it does, and "before" and "after" evaluations share random numbers;
- per-prompt sample counts (``samples=[k_0, k_1, ...]`` instead of ``params.n`` each): one call for prompts that
  want different numbers of samples (evolve's children, grouped by prompt), each prefilled once;
- per-row steering (VSPO): ``generate(..., steering=Steering(vector, betas))`` adds ``betas[r] * v`` to the output of
  decoder layer ``v.layer`` for completion row r (harness/steering/vectors.py: RowSteering).

Where the time goes (SmolLM2-135M on CPU, bench/rollout_throughput.py) and what the loop does about it:
- up to ``max_batch_rows`` rows decode together, and a waiting prompt's n rows join the running batch as soon as
  finished rows leave room (its prefill merged into the batch's cache), rather than waiting for the batch to empty;
  a prompt with more than ``max_batch_rows`` samples joins in slices of at most that many rows (each slice
  prefilled once), so memory is bounded by the batch size whatever n is;
- the KV cache is preallocated (``_RoomyLayer``): transformers' DynamicCache appends by concatenation, copying the
  whole cache at every layer of every step (30% of a decode step); finished rows leave by moving the last rows into
  their slots, not by copying every row;
- sampling draws one uniform per row and searches the cumulative distribution (``_inverse_cdf``), instead of
  ``torch.multinomial`` row by row (a random number per vocabulary entry: ~15% of a step); a row's uniforms for its
  whole budget are drawn from its generator once, when it joins, and kept on the model's device, so a step indexes
  them instead of calling each row's generator on the host (the same numbers as drawing them step by step);
- the host reads the sampled tokens (which rows ended, which prompts may join) every ``sync_every`` steps: every
  step on CPU, where a read costs nothing; every 8 on a GPU, where each read waits for the device and the host could
  be queueing the next steps' kernels instead (what a row samples after its end is dropped; the completions are
  those of reading every step, up to the float rounding a batch's composition brings).
What is left is the model's matrix products (~70%) and attention (~13%). Batch composition changes the floating-point
rounding of a row's logits, not its random stream, so results are batch-invariant up to that rounding.
Log-probabilities are those of the temperature-scaled distribution *before* top-k/top-p truncation, which is what a
trainer recomputes with a forward pass (see trainers/policy_gradient.py: sequence_logprobs).

Precision (``rollout_dtype``, the run's ``--rollout-dtype``): the forward passes run under ``torch.autocast`` to that
dtype, weights untouched. Autocast rather than a low-precision copy of the model: it costs no memory, needs no
refresh after an optimizer step (the casts are made from the live weights; the whole call is one autocast region,
which caches the casts of trainable weights for the call, while frozen ones, a LoRA base, are cast at every step),
and a LoRA policy needs no merging. The log-probabilities are then those of the distribution sampled from, the
low-precision one; a trainer that computes in another precision learns so from ``capabilities.sampling_dtype`` and
recomputes its own (trainers/rollout_precision.py). ``sampling_in(dtype)`` changes the precision for a region: the
runner samples only the training phase in bf16 under ``--rollout-dtype auto`` (harness/runner/precision.py).

Threads: ``generate`` runs at the run's thread count for decoding (harness/runner/threads.py: without ``--threads``,
fewer than the update's, since the loop's small steps stall when a thread shares its core with another job).

Steering, in detail:
- every position of a row is steered, its prompt included (as steering vectors are usually applied, and as a plain
  forward pass under ``RowSteering`` would do), and left padding too (masked out as keys, outputs never read);
- so the prefill is shared only among a prompt's samples that have the same beta: the engine prefills each distinct
  (prompt, beta) once and copies its cache to the rows that continue from it (unsteered: one prefill per prompt);
- the betas follow the batch as finished rows are dropped (``active``);
- the log-probabilities of a steered generate are those of the *steered* sampling distribution; VSPO recomputes the
  unsteered ones with a plain forward pass;
- the hook is removed in a ``finally``: an unsteered call afterwards is bit-identical to one before any steering;
- random streams do not depend on beta, so the same sample index under different betas shares random numbers.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any

import torch

from harness import progress
from harness.engine.tokens import encode_chat, eos_ids
from harness.faults import fault_point
from harness.models import Policy
from harness.plugins.option_help import Bounds
from harness.plugins.size_bounds import COUNT, TOKENS
from harness.runner.threads import follow_load, phase_threads
from harness.steering.vectors import RowSteering, Steering
from harness.types import Completion, EngineCapabilities, Messages, SamplingParams

ROLLOUT_DTYPES = ("float32", "bfloat16", "float16")


class TransformersEngine:
    # --batch-size N: N rows; --rollout-dtype D: forward passes under autocast to D, for every phase or (auto, the
    # runner through sampling_in) for the training phase only
    capabilities = EngineCapabilities(
        steering=True,
        batch_size="max_batch_rows",
        rollout_dtype="rollout_dtype",
        phase_dtype=True,
        samples_per_prompt=True,
    )

    def __init__(
        self,
        policy: Policy,
        max_batch_rows: Annotated[int, Bounds(1, COUNT)] = 64,  # rows (samples) decoded together (--batch-size)
        progress: bool = True,
        main_process: bool = True,
        rollout_dtype: str = "",  # float32, bfloat16 or float16: sample under autocast to it; "": the weights'
        # decoding steps between reads of the sampled tokens; none: 1 on CPU, 8 on GPU
        sync_every: Annotated[int | None, Bounds(1, TOKENS)] = None,
    ) -> None:
        self.policy = policy
        self._set_precision(rollout_dtype)
        # Decoding steps between reads of the sampled tokens on the host (which rows ended, who joins): each read
        # waits for the device. None: 1 on CPU, where a read costs nothing and a row that ended leaves at once;
        # 8 on a GPU, where the host can queue the next steps' kernels meanwhile (rows that ended ride along until
        # the read, and what they sample after their end is dropped)
        self.sync_every = None if sync_every is None else _at_least_one("sync_every", sync_every)
        # Rows (samples) decoded together; the KV cache holds max_batch_rows x (prompt + max_new_tokens) positions.
        # A decode step's cost is mostly fixed (reading the weights) on CPU: 64 rows made 64 x 64-token rollouts of
        # SmolLM2-135M 1.6x faster than 32 (bench/rollout_throughput.py).
        self.max_batch_rows = _at_least_one("max_batch_rows", max_batch_rows)
        self.progress = progress and main_process  # one progress bar per run, rank 0's

    def _set_precision(self, rollout_dtype: str) -> None:
        weights = str(next(self.policy.model.parameters()).dtype).removeprefix("torch.")
        if rollout_dtype and rollout_dtype not in ROLLOUT_DTYPES:
            raise ValueError(f"rollout_dtype must be one of {', '.join(ROLLOUT_DTYPES)}, got {rollout_dtype!r}")
        if rollout_dtype == "float32" and weights != "float32":  # autocast only lowers precision
            raise ValueError(
                f"rollout_dtype float32 needs float32 weights (these are {weights}): autocast cannot "
                "sample more precisely than the weights"
            )
        # "" or the weights' own dtype: forward passes as they are, the capabilities of the class
        self.rollout_dtype = rollout_dtype if rollout_dtype not in ("", weights) else ""
        # what a trainer compares with its own precision ("": the weights')
        self.capabilities = replace(type(self).capabilities, sampling_dtype=self.rollout_dtype)

    @contextlib.contextmanager
    def sampling_in(self, dtype: str) -> Iterator[None]:
        """Sample in ``dtype`` inside (the weights' own: as they are), declared as ``capabilities.sampling_dtype``;
        the precision the engine was built with after. The runner's training phase under ``--rollout-dtype auto``
        (harness/runner/precision.py): autocast needs no copy of the weights, so switching costs nothing."""
        saved = self.rollout_dtype, self.capabilities
        self._set_precision(dtype)
        try:
            yield
        finally:
            self.rollout_dtype, self.capabilities = saved

    def encode(self, messages: Messages) -> list[int]:
        """Chat-template a conversation into prompt token ids, ready for the assistant's turn."""
        return encode_chat(self.policy.tokenizer, messages)

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Messages],
        params: SamplingParams,
        *,
        desc: str = "",
        steering: Steering | None = None,
        samples: Sequence[int] | None = None,
    ) -> list[Completion]:
        """Completions, prompt-major. ``steering``: add ``beta_r * v`` at row r (see the module docstring and
        ``Steering`` for the betas' layout); log-probabilities are then those of the steered distribution.
        ``samples``: prompt p gets ``samples[p]`` samples (indices 0..samples[p]-1) instead of ``params.n``; sample j
        of a prompt is the same as with n > j (its random stream is (seed, prompt, j)), so one call serves prompts
        that want different numbers of samples (evolve's children)."""
        encoded = [self.encode(m) for m in prompts]
        if samples is None:
            counts = [params.n] * len(encoded)
        else:
            counts = [int(k) for k in samples]
            if len(counts) != len(encoded) or any(k < 0 for k in counts):
                raise ValueError(f"samples needs one count >= 0 per prompt ({len(encoded)}), got {list(samples)}")
            if steering is not None:
                raise ValueError("generate: steering takes params.n samples per prompt, not samples=")
        betas = steering.row_betas(len(prompts), params.n) if steering is not None else None
        # one call's samples, counted into the phase's bar where a searcher or trainer opened one (harness/progress.py)
        bar = progress.bar(sum(counts), desc or "generate", "sample", disable=not self.progress, inner=True)
        hook = RowSteering(self.policy.model, steering.vector) if steering is not None else None
        try:
            with phase_threads("decode"), self.precision():  # the run's thread count for decoding (runner/threads.py)
                return self._decode(encoded, counts, params, hook, betas, bar)
        finally:  # the model must come back unsteered whatever happened
            if hook is not None:
                hook.remove()
            bar.close()

    def precision(self) -> contextlib.AbstractContextManager:
        """The region the forward passes run in: autocast to ``rollout_dtype``, or as they are. One region per
        ``generate`` call, so autocast casts each trainable weight once per call, not once per decoding step."""
        if not self.rollout_dtype:
            return contextlib.nullcontext()
        device = next(self.policy.model.parameters()).device
        return torch.autocast(device_type=device.type, dtype=getattr(torch, self.rollout_dtype))

    def _decode(
        self,
        prompt_ids: list[list[int]],
        counts: list[int],
        params: SamplingParams,
        hook: RowSteering | None,
        betas: list[float] | None,
        bar: progress.Bar,
    ) -> list[Completion]:
        """The decoding loop. Completion row r is sample ``sample_of[r]`` of prompt ``prompt_of[r]`` (prompt p has
        ``counts[p]`` rows, prompt-major; with params.n each, row r is sample r % n of prompt r // n). Prompts join
        the running batch whenever it has room for their rows, so the batch stays full while prompts are waiting; a
        prompt's rows join together, in slices of at most max_batch_rows when there are more."""
        model, tok = self.policy.model, self.policy.tokenizer
        stop_ids = eos_ids(model, tok)
        budget = params.max_new_tokens
        device = next(model.parameters()).device
        sync_every = self.sync_every or (8 if device.type == "cuda" else 1)
        prompt_of = [p for p, k in enumerate(counts) for _ in range(k)]
        sample_of = [j for k in counts for j in range(k)]
        starts = [0, *itertools.accumulate(counts)]  # prompt p's rows: starts[p] .. starts[p + 1] - 1
        rows = len(prompt_of)
        tokens: list[list[int]] = [[] for _ in range(rows)]
        logps: list[list[float]] = [[] for _ in range(rows)]
        finished = [False] * rows
        # Row r's step t samples with uniforms[r, t]: its own generator's stream, drawn once when the row joins, onto
        # the model's device, so a step gathers them in one indexing op instead of one host call per row
        sampled = params.temperature != 0 and budget > 0
        uniforms = torch.empty((rows, budget) if sampled else (0, 0), dtype=torch.float64, device=device)
        # Each waiting entry is the completion rows of one prompt (all of them, or a slice of max_batch_rows).
        size = max(1, self.max_batch_rows)
        waiting = (
            deque(
                range(starts[p] + j, starts[p] + min(k, j + size))
                for p, k in enumerate(counts)
                for j in range(0, k, size)
            )
            if budget > 0
            else deque()
        )
        batch: _Batch | None = None
        while waiting or batch is not None:
            # Admit entries while their rows fit (an empty batch takes at least one). A cache that cannot be merged
            # (another transformers' layout) takes new prompts only when it is empty: plain chunks.
            room = self.max_batch_rows - (len(batch.active) if batch is not None else 0)
            admit: list[int] = []
            while waiting and (
                (batch is None and not admit)
                or ((batch is None or batch.mergeable) and len(admit) + len(waiting[0]) <= room)
            ):
                admit.extend(waiting.popleft())
            if admit:
                joining = self._prefill(admit, prompt_ids, prompt_of, params, hook, betas)
                if sampled:
                    uniforms[joining.active] = torch.stack(
                        [
                            torch.rand(
                                budget,
                                generator=_row_generator(params.seed, prompt_ids[prompt_of[r]], sample_of[r]),
                                dtype=torch.float64,
                            )
                            for r in joining.active
                        ]
                    ).to(device)
                batch = joining if batch is None else batch.merge(joining, budget)
            assert batch is not None

            # `run` steps before the host reads what was sampled (sync_every), never past any row's budget
            taken = [len(tokens[r]) for r in batch.active]
            run = min(sync_every, budget - max(taken))
            picked, picked_logp = [], []
            for i in range(run):
                fault_point("generate")
                follow_load()  # a long call looks at the load again now and then (runner/threads.py)
                steps = [t + i for t in taken]
                chosen, chosen_logp = _sample(batch.logits, params, uniforms[batch.active, steps] if sampled else None)
                picked.append(chosen)
                picked_logp.append(chosen_logp)
                if i + 1 < run:
                    batch.step(model, chosen)
            still = []
            # one conversion per read, not two tensor reads per row
            read = zip(batch.active, torch.stack(picked, 1).tolist(), torch.stack(picked_logp, 1).tolist(), strict=True)
            for pos, (row, row_tokens, row_logps) in enumerate(read):
                for token, logp in zip(row_tokens, row_logps, strict=True):
                    tokens[row].append(token)
                    logps[row].append(logp)
                    if token in stop_ids:  # what it sampled after its end (sync_every > 1) is dropped
                        finished[row] = True
                        break
                if not finished[row] and len(tokens[row]) < budget:
                    still.append(pos)
            bar.update(len(batch.active) - len(still))
            if not still:
                batch = None
                continue
            if len(still) < len(batch.active):  # drop finished rows from every batched tensor and the cache
                chosen = chosen[batch.select(still)]
            if hook is not None:  # the betas follow the rows still in the batch
                hook.set_betas([betas[r] for r in batch.active])
            batch.step(model, chosen)

        return [
            Completion(
                prompt_index=prompt_of[r],
                sample_index=sample_of[r],
                prompt_ids=prompt_ids[prompt_of[r]],
                token_ids=tokens[r],
                logprobs=logps[r],
                text=tok.decode(tokens[r], skip_special_tokens=True),
                finished=finished[r],
            )
            for r in range(rows)
        ]

    def _prefill(
        self,
        rows: list[int],
        prompt_ids: list[list[int]],
        prompt_of: list[int],
        params: SamplingParams,
        hook: RowSteering | None,
        betas: list[float] | None,
    ) -> _Batch:
        """A batch of the completion rows ``rows`` (row r continues prompt ``prompt_of[r]``), each with the logits
        of its first token."""
        model, tok = self.policy.model, self.policy.tokenizer
        device = next(model.parameters()).device
        # Each row continues from one prefill. Unsteered, a prompt is prefilled once for its n samples; steered, its
        # own positions are steered too, so once per distinct (prompt, beta).
        keys = [(prompt_of[r], betas[r] if betas is not None else 0.0) for r in rows]
        groups = {key: g for g, key in enumerate(dict.fromkeys(keys))}
        source = torch.tensor([groups[k] for k in keys], device=device)  # row -> prefill row
        prefill_ids = [prompt_ids[p] for p, _ in groups]

        # Left padding: every prompt ends at the same column, so the next token of every row is at the end.
        width = max(len(p) for p in prefill_ids)
        input_ids = torch.full((len(prefill_ids), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(prefill_ids), width), dtype=torch.long)
        for row, ids in enumerate(prefill_ids):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            mask[row, width - len(ids) :] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)

        if hook is not None:
            hook.set_betas([beta for _, beta in groups])
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        cache_arg = _cache_argument(model)
        cache = getattr(out, cache_arg)
        # Copy each prefill's cache to the rows that continue from it, into buffers with room for the whole budget.
        mergeable = _preallocate(cache, source, width + params.max_new_tokens)
        if not mergeable and len(groups) < len(rows):
            cache.batch_select_indices(source)
        return _Batch(
            cache=cache,
            cache_arg=cache_arg,
            mask=mask[source],
            next_pos=positions[:, -1][source] + 1,
            logits=out.logits[:, -1, :].float()[source],
            active=rows,
            mergeable=mergeable,
        )


@dataclass
class _Batch:
    """The rows decoded together: their KV cache, attention mask (1 on real tokens; each row's tokens are contiguous
    and end at the last column), next position ids and next-token logits, and which completion row each is."""

    cache: Any
    cache_arg: str  # the forward's name for the cache argument
    mask: torch.Tensor  # [B, W]
    next_pos: torch.Tensor  # [B]
    logits: torch.Tensor  # [B, V] float32
    active: list[int]  # batch position -> completion row
    mergeable: bool  # the cache is ours (_RoomyLayer): rows can join, appending writes in place

    def step(self, model: Any, chosen: torch.Tensor) -> None:
        """Feed each row its chosen token: one decoding step."""
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(self.active), 1))], dim=1)
        out = model(
            input_ids=chosen[:, None],
            attention_mask=self.mask,
            position_ids=self.next_pos[:, None],
            use_cache=True,
            **{self.cache_arg: self.cache},
        )
        self.cache = getattr(out, self.cache_arg)
        self.logits = out.logits[:, -1, :].float()
        self.next_pos = self.next_pos + 1

    def select(self, still: list[int]) -> torch.Tensor:
        """Keep the batch positions ``still`` (ascending), then cut the columns that are padding for every row left.
        Our cache moves only the kept rows beyond the new size into the holes (rows reorder, ``active`` follows):
        copying every row twice, as index-selecting does, cost ~6% of a rollout (measured). Returns the old
        position of each new one."""
        size = len(still)
        if self.mergeable:
            kept = set(still)
            holes = [p for p in range(size) if p not in kept]
            movers = [p for p in still if p >= size]
            order = list(range(size))
            for hole, mover in zip(holes, movers, strict=True):
                order[hole] = mover
            for layer in self.cache.layers:
                layer.move_rows(holes, movers, size)
        else:
            order = still
        index = torch.tensor(order, device=self.mask.device)
        if not self.mergeable:
            self.cache.batch_select_indices(index)
        self.mask, self.next_pos = self.mask[index], self.next_pos[index]  # (logits: replaced by the next step)
        self.active = [self.active[p] for p in order]
        if self.mergeable:
            lead = self.mask.shape[1] - int(self.mask.sum(dim=1).max())
            if lead > 0:
                self.mask = self.mask[:, lead:]
                for layer in self.cache.layers:
                    layer.drop_leading(lead)
        return index

    def merge(self, other: _Batch, budget: int) -> _Batch:
        """This batch with ``other``'s rows appended (the narrower one left-padded to the wider)."""
        width = max(self.mask.shape[1], other.mask.shape[1])
        for mine, theirs in zip(self.cache.layers, other.cache.layers, strict=True):
            mine.append_rows(theirs, width, width + budget)
        self.mask = torch.cat([_pad_left(self.mask, width), _pad_left(other.mask, width)])
        self.next_pos = torch.cat([self.next_pos, other.next_pos])
        self.logits = torch.cat([self.logits, other.logits])
        self.active = self.active + other.active
        return self


def _pad_left(mask: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(mask, (width - mask.shape[1], 0))


try:  # transformers >= 4.56 keeps a cache as a list of layers
    from transformers.cache_utils import DynamicLayer
except ImportError:  # pragma: no cover - older transformers: the plain cache, prompts in chunks
    DynamicLayer = None


if DynamicLayer is not None:

    class _RoomyLayer(DynamicLayer):
        """A DynamicLayer whose keys and values are views of the first ``length`` positions of buffers with room to
        spare. transformers' own appends a token by concatenating, which copies the whole cache at every step of
        every layer (a third of a decode step on CPU, measured); here the token is written in place."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
            super().__init__()
            self.device, self.is_initialized = keys.device, True
            self._place(keys, values, capacity)

        def _place(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
            batch, heads, length, dim = keys.shape
            self._keys = keys.new_empty((batch, heads, max(capacity, length), dim))
            self._values = values.new_empty((batch, heads, max(capacity, length), values.shape[-1]))
            self._keys[:, :, :length] = keys
            self._values[:, :, :length] = values
            self._view(length)

        def _view(self, length: int) -> None:
            self.length = length
            self.keys, self.values = self._keys[:, :, :length], self._values[:, :, :length]

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            end = self.length + key_states.shape[-2]
            if end > self._keys.shape[-2]:  # out of room (the budget should prevent it): grow
                self._place(self.keys, self.values, 2 * end)
            self._keys[:, :, self.length : end] = key_states
            self._values[:, :, self.length : end] = value_states
            self._view(end)
            return self.keys, self.values

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            self._place(self.keys[indices], self.values[indices], self._keys.shape[-2])

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._place(
                self.keys.repeat_interleave(repeats, dim=0),
                self.values.repeat_interleave(repeats, dim=0),
                self._keys.shape[-2],
            )

        def crop(self, max_length: int) -> None:  # DynamicLayer's meaning: a negative length removes that many
            self._view(min(max_length, self.length) if max_length >= 0 else max(self.length + max_length, 0))

        def reset(self) -> None:
            self._view(0)

        def move_rows(self, holes: list[int], movers: list[int], size: int) -> None:
            """Copy rows ``movers`` into rows ``holes``, then keep the first ``size`` rows (a view)."""
            if holes:
                to = torch.tensor(holes, device=self._keys.device)
                src = torch.tensor(movers, device=self._keys.device)
                self._keys[to, :, : self.length] = self._keys[src, :, : self.length]
                self._values[to, :, : self.length] = self._values[src, :, : self.length]
            self._keys, self._values = self._keys[:size], self._values[:size]
            self._view(self.length)

        def drop_leading(self, count: int) -> None:
            """Forget the first ``count`` positions (padding for every row): a view, nothing copied."""
            self._keys, self._values = self._keys[:, :, count:], self._values[:, :, count:]
            self._view(self.length - count)

        def append_rows(self, other: _RoomyLayer, width: int, capacity: int) -> None:
            """Append ``other``'s rows; both left-padded with zeros to ``width`` positions (masked out, but finite:
            attention multiplies them by a weight of 0)."""
            mine, theirs = self.keys.shape[0], other.keys.shape[0]
            keys = self._keys.new_zeros((mine + theirs, self._keys.shape[1], capacity, self._keys.shape[-1]))
            values = self._values.new_zeros((mine + theirs, self._values.shape[1], capacity, self._values.shape[-1]))
            keys[:mine, :, width - self.length : width] = self.keys
            keys[mine:, :, width - other.length : width] = other.keys
            values[:mine, :, width - self.length : width] = self.values
            values[mine:, :, width - other.length : width] = other.values
            self._keys, self._values = keys, values
            self._view(width)


def _preallocate(cache: Any, source: torch.Tensor, capacity: int) -> bool:
    """Replace a just-prefilled cache's layers with _RoomyLayers holding row ``source[r]``'s keys and values at row
    r, with room for ``capacity`` positions. False (cache untouched) unless every layer is a plain DynamicLayer."""
    layers = getattr(cache, "layers", None)
    if DynamicLayer is None or not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return False
    cache.layers = [_RoomyLayer(layer.keys[source], layer.values[source], capacity) for layer in layers]
    return True


def _cache_argument(model) -> str:
    """transformers 5.24 renamed ``past_key_values`` to ``cache`` (argument and output); accept both."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _at_least_one(name: str, value: Any) -> int:
    """An engine option that counts (``--set engine.KEY=VALUE`` gives text) as an int >= 1, or one line saying so."""
    try:
        number = int(str(value))
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"engine 'transformers': {name} must be an integer >= 1, got {value!r}")
    return number


def _row_generator(seed: int, prompt: list[int], sample_index: int) -> torch.Generator:
    digest = hashlib.blake2b(repr((seed, prompt, sample_index)).encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & (2**63 - 1))


def _sample(
    logits: torch.Tensor, params: SamplingParams, uniforms: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next tokens and their log-probabilities under softmax(logits / temperature) (greedy when temperature is 0);
    ``uniforms``: one per row, in [0, 1), from that row's own stream."""
    if params.temperature == 0:
        logp = torch.log_softmax(logits, dim=-1)
        chosen = logits.argmax(dim=-1)
        return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1)
    logp = torch.log_softmax(logits if params.temperature == 1 else logits / params.temperature, dim=-1)
    filtered = _truncate(logp, params.top_k, params.top_p)
    # Inverse-CDF sampling: one uniform per row from that row's own generator, then a batched search of the
    # cumulative distribution. The same distribution as torch.multinomial row by row, which draws a random number
    # per vocabulary entry (49k per row per step: ~1/6 of a decode step on CPU, measured).
    chosen = _inverse_cdf(filtered.exp(), uniforms)
    return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1)


_BLOCK = 256


def _inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Row r's token: the first index whose cumulative probability exceeds ``uniforms[r]`` (in [0, 1)) times the
    row's total (``probs`` need not be normalised). Cumulated in float64, so rounding cannot move mass between
    tokens, and never a token of probability 0. In two levels, block sums then one block of 256, because a
    sequential float64 cumulative sum over the whole vocabulary cost 5% of a decode step (measured)."""
    rows, vocab = probs.shape
    pad = -vocab % _BLOCK
    blocks = (torch.nn.functional.pad(probs, (0, pad)) if pad else probs.contiguous()).view(rows, -1, _BLOCK)
    block_cdf = blocks.sum(-1, dtype=torch.float64).cumsum(-1)
    target = uniforms * block_cdf[:, -1]  # < the total, so the block found has probability > 0
    block = torch.searchsorted(block_cdf, target[:, None], right=True).squeeze(-1)
    block = block.clamp_(max=block_cdf.shape[1] - 1)
    before = block_cdf.gather(-1, (block - 1).clamp(min=0)[:, None]).squeeze(-1) * (block > 0)
    inner = blocks[torch.arange(rows, device=probs.device), block].double().cumsum(-1)
    # The block's sum and its cumulative sum round differently: the remainder is clamped to [0, ...) and the index
    # to the block's last token of probability > 0, so a rounding error can never pick a token of probability 0.
    index = torch.searchsorted(inner, (target - before).clamp(min=0)[:, None], right=True).squeeze(-1)
    last = (inner < inner[:, -1:]).sum(-1)
    return block * _BLOCK + torch.minimum(index, last)


def _truncate(logp: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Top-k and nucleus truncation: excluded tokens get -inf."""
    if top_k and top_k < logp.shape[-1]:
        kth = logp.topk(top_k, dim=-1).values[:, -1:]
        logp = logp.masked_fill(logp < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logp, order = logp.sort(dim=-1, descending=True)
        cumulative = sorted_logp.exp().cumsum(-1)
        drop_sorted = cumulative - sorted_logp.exp() > top_p  # keep the smallest prefix whose mass reaches top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logp = logp.masked_fill(drop, float("-inf"))
    return logp
