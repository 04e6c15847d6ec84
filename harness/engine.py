"""The rollout engine on transformers: batched sampling with per-token log-probabilities.

A hand-written decoding loop rather than ``model.generate`` because we need, cheaply and exactly:
- the log-probability of every sampled token under the policy at the sampling temperature (what GRPO's ratio uses);
- prefix sharing: each prompt is prefilled once and its KV cache repeated for its n samples (steered: once per beta);
- finished rows dropped from the batch, so a long straggler does not make everyone pay;
- per-sample random streams: sample j of a prompt draws from a generator seeded by (seed, prompt, j), so a
  sample does not change when the batch around it does, and "before" and "after" evaluations share random numbers;
- per-row steering (VSPO): ``generate(..., steering=Steering(vector, betas))`` adds ``betas[r] * v`` to the output of
  decoder layer ``v.layer`` for completion row r (harness/steering.py: RowSteering).
Log-probabilities are those of the temperature-scaled distribution *before* top-k/top-p truncation, which is what a
trainer recomputes with a forward pass (see trainers/policy_gradient.py: sequence_logprobs).

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

import hashlib
import inspect
from collections.abc import Sequence

import torch
from tqdm.auto import tqdm

from harness.models import Policy
from harness.steering import RowSteering, Steering
from harness.types import Completion, Messages, SamplingParams


class TransformersEngine:
    def __init__(self, policy: Policy, max_batch_rows: int = 32, progress: bool = True) -> None:
        self.policy = policy
        self.max_batch_rows = max_batch_rows  # rows (samples) decoded together; memory grows with it
        self.progress = progress

    def encode(self, messages: Messages) -> list[int]:
        """Chat-template a conversation into prompt token ids, ready for the assistant's turn."""
        tok = self.policy.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
            return list(ids["input_ids"] if isinstance(ids, dict) else ids)
        return tok("\n".join(m["content"] for m in messages))["input_ids"]

    @torch.no_grad()
    def generate(self, prompts: Sequence[Messages], params: SamplingParams, *, desc: str = "",
                 steering: Steering | None = None) -> list[Completion]:
        """Completions, prompt-major. ``steering``: add ``beta_r * v`` at row r (see the module docstring and
        ``Steering`` for the betas' layout); log-probabilities are then those of the steered distribution."""
        encoded = [self.encode(m) for m in prompts]
        betas = steering.row_betas(len(prompts), params.n) if steering is not None else None
        prompts_per_chunk = max(1, self.max_batch_rows // params.n)
        completions: list[Completion] = []
        bar = tqdm(total=len(encoded) * params.n, desc=desc or "generate", unit="sample", disable=not self.progress,
                   leave=False)
        hook = RowSteering(self.policy.model, steering.vector) if steering is not None else None
        try:
            for start in range(0, len(encoded), prompts_per_chunk):
                chunk = list(range(start, min(start + prompts_per_chunk, len(encoded))))
                chunk_betas = betas[start * params.n:(chunk[-1] + 1) * params.n] if betas is not None else None
                completions.extend(self._generate_chunk([encoded[i] for i in chunk], chunk, params, hook,
                                                        chunk_betas))
                bar.update(len(chunk) * params.n)
        finally:  # the model must come back unsteered whatever happened
            if hook is not None:
                hook.remove()
            bar.close()
        return completions

    def _generate_chunk(self, prompt_ids: list[list[int]], prompt_indices: list[int], params: SamplingParams,
                        hook: RowSteering | None = None, betas: list[float] | None = None) -> list[Completion]:
        model, tok = self.policy.model, self.policy.tokenizer
        device = next(model.parameters()).device
        eos_ids = _eos_ids(model, tok)
        n = params.n
        rows = len(prompt_ids) * n
        # Each row continues from one prefill. Unsteered, a prompt is prefilled once for its n samples; steered, its
        # own positions are steered too, so once per distinct (prompt, beta).
        keys = [(r // n, betas[r] if betas is not None else 0.0) for r in range(rows)]
        groups = {key: g for g, key in enumerate(dict.fromkeys(keys))}
        source = torch.tensor([groups[k] for k in keys], device=device)  # row -> prefill row
        prefill_ids = [prompt_ids[p] for p, _ in groups]

        # Left padding: every prompt ends at the same column, so the next token of every row is at the end.
        width = max(len(p) for p in prefill_ids)
        input_ids = torch.full((len(prefill_ids), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(prefill_ids), width), dtype=torch.long)
        for row, ids in enumerate(prefill_ids):
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            mask[row, width - len(ids):] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)

        if hook is not None:
            hook.set_betas([beta for _, beta in groups])
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                    logits_to_keep=1)
        cache_arg = _cache_argument(model)
        cache = getattr(out, cache_arg)
        logits = out.logits[:, -1, :].float()[source]
        if len(groups) < rows:  # copy each prefill's cache to the rows that continue from it
            cache.batch_select_indices(source)
        mask = mask[source]
        next_pos = positions[:, -1][source] + 1

        generators = [_row_generator(params.seed, prompt_ids[r // n], r % n) for r in range(rows)]
        tokens: list[list[int]] = [[] for _ in range(rows)]
        logps: list[list[float]] = [[] for _ in range(rows)]
        finished = [False] * rows
        active = list(range(rows))  # batch position -> row
        for _step in range(params.max_new_tokens):
            chosen, chosen_logp = _sample(logits, params, [generators[r] for r in active])
            still = []
            for pos, row in enumerate(active):
                tokens[row].append(int(chosen[pos]))
                logps[row].append(float(chosen_logp[pos]))
                if int(chosen[pos]) in eos_ids:
                    finished[row] = True
                else:
                    still.append(pos)
            if not still or _step == params.max_new_tokens - 1:
                break
            if len(still) < len(active):  # drop finished rows from every batched tensor and the cache
                keep = torch.tensor(still, device=device)
                cache.batch_select_indices(keep)
                mask, next_pos, chosen = mask[keep], next_pos[keep], chosen[keep]
                active = [active[p] for p in still]
            if hook is not None:  # the betas follow the rows still in the batch
                hook.set_betas([betas[r] for r in active])
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            out = model(input_ids=chosen[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                        use_cache=True, **{cache_arg: cache})
            cache = getattr(out, cache_arg)
            logits = out.logits[:, -1, :].float()
            next_pos = next_pos + 1

        return [
            Completion(prompt_index=prompt_indices[r // n], sample_index=r % n, prompt_ids=prompt_ids[r // n],
                       token_ids=tokens[r], logprobs=logps[r],
                       text=tok.decode(tokens[r], skip_special_tokens=True), finished=finished[r])
            for r in range(rows)
        ]


def _cache_argument(model) -> str:
    """transformers 5.24 renamed ``past_key_values`` to ``cache`` (argument and output); accept both."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _eos_ids(model, tok) -> set[int]:
    ids = {tok.eos_token_id}
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if gen_eos is not None:
        ids |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    return {i for i in ids if i is not None}


def _row_generator(seed: int, prompt: list[int], sample_index: int) -> torch.Generator:
    digest = hashlib.blake2b(repr((seed, prompt, sample_index)).encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & (2**63 - 1))


def _sample(logits: torch.Tensor, params: SamplingParams,
            generators: list[torch.Generator]) -> tuple[torch.Tensor, torch.Tensor]:
    """Next tokens and their log-probabilities under softmax(logits / temperature) (greedy when temperature is 0)."""
    if params.temperature == 0:
        logp = torch.log_softmax(logits, dim=-1)
        chosen = logits.argmax(dim=-1)
        return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1)
    logp = torch.log_softmax(logits / params.temperature, dim=-1)
    filtered = _truncate(logp, params.top_k, params.top_p)
    probs = filtered.exp().cpu()
    chosen = torch.stack([torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)])
    chosen = chosen.to(logits.device)
    return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1)


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
