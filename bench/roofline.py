"""Roofline of rollouts on this machine: its measured peak matmul rate and memory bandwidth, and what they allow the
default model to decode.

    .venv/bin/python bench/roofline.py [--threads 1] [--model smollm2-135m] [--rows 1,8,32,64] [--context 160]
        [--json bench/results/roofline.json]

Measured (torch, at ``--threads`` CPU threads, the rollout benchmark's setting):
- peak matmul GFLOP/s: ``torch.matmul`` of two square matrices of each of ``--matmul-sizes``, fp32 and (where the
  CPU has native bf16, ``avx512_bf16`` or AMX) bf16; best of ``--repeats`` timed calls after a warm-up, and the peak
  is the best size's (on a shared machine the best call is the one that had the core). Also the same rate at one
  decoding step's shape (rows x hidden by hidden x intermediate), which is what the engine's matmuls see;
- memory bandwidth GB/s: ``torch.sum`` over a fp32 tensor (reads only: a decoding step reads weights), at
  ``--bandwidth-mib`` and at the size of the model's weights in each dtype (a cache as large as this machine's L3
  can hold part of them; the ceiling uses the better of the read at the weights' own size and at ``--bandwidth-mib``,
  since a job beside it can take the memory bus during either), and ``Tensor.copy_``
  into another (read + write, both counted) at ``--bandwidth-mib``; best of ``--repeats``.

Computed for the model (from its loaded parameters, so tied embeddings count once):
- FLOPs per generated token: 2 x the parameters of every matmul (the layers' linear weights and the lm_head, which
  is the embedding matrix when tied) + attention's 4 x layers x heads x head_dim x context (scores and the weighted
  sum, at ``--context`` positions: default the math prompts' mean length + half of ``--max-new-tokens``);
- bytes read per decoding step at B rows: every weight once (the embedding lookup reads only B rows, but a tied
  lm_head reads the whole matrix) + B x the KV cache of one row at ``--context`` positions, in fp32 and in bf16.

Ceilings at B rows (B the rows decoded together; the engine's default ``max_batch_rows`` is marked): compute-bound
tokens/s = peak FLOP/s / FLOPs per token; bandwidth-bound decoding steps/s = bandwidth / bytes per step, so tokens/s
= B x steps/s; the roofline is the lower of the two. Both use the measured square-matmul peak and read bandwidth:
upper bounds, not predictions (softmax, norms, sampling, Python and the smaller matmuls' lower rate are left out).
Prints a table; writes the figures with the machine (harness.provenance.machine()) and load average to ``--json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rollout_throughput import math_prompts  # bench/ is not a package: the rollout bench's prompts

from harness.engine.tokens import encode_chat
from harness.provenance import machine

DEFAULT_JSON = "bench/results/roofline.json"


def best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: allocation, oneDNN primitive creation, page faults
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def matmul_gflops(rows: int, inner: int, cols: int, dtype: torch.dtype, repeats: int) -> float:
    a = torch.randn(rows, inner).to(dtype)
    b = torch.randn(inner, cols).to(dtype)
    out = torch.empty(rows, cols, dtype=dtype)
    seconds = best_seconds(lambda: torch.matmul(a, b, out=out), repeats)
    return 2 * rows * inner * cols / seconds / 1e9


def read_gbs(nbytes: int, repeats: int) -> float:
    src = torch.rand(nbytes // 4)
    return src.numel() * 4 / best_seconds(lambda: src.sum(), repeats) / 1e9


def copy_gbs(nbytes: int, repeats: int) -> float:
    src = torch.rand(nbytes // 4)
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / best_seconds(lambda: dst.copy_(src), repeats) / 1e9


def native_bf16() -> bool:
    isa = machine().get("isa", [])
    return "bf16" in isa or "amx" in isa


def model_costs(model: torch.nn.Module, context: int) -> dict[str, Any]:
    """FLOPs per token and weight bytes per step, from the model's parameters and config."""
    config = model.config
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    embedding = model.get_input_embeddings().weight
    lm_head = model.get_output_embeddings().weight
    tied = lm_head.data_ptr() == embedding.data_ptr()
    layer_matmul = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2 and ".layers." in name)
    all_params = sum(p.numel() for p in model.parameters())  # shared tensors count once
    lm_head_params = lm_head.numel()
    attention_flops = 4 * layers * heads * head_dim * context
    return {
        "layers": layers,
        "hidden": config.hidden_size,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "vocab": config.vocab_size,
        "tied_embeddings": tied,
        "parameters": all_params,
        "layer_matmul_parameters": layer_matmul,
        "lm_head_parameters": lm_head_params,
        "context": context,
        "flops_per_token": {
            "layer_matmuls": 2 * layer_matmul,
            "lm_head": 2 * lm_head_params,
            "attention": attention_flops,
            "total": 2 * layer_matmul + 2 * lm_head_params + attention_flops,
        },
        # every parameter once per step (a tied embedding is the lm_head's read); the lookup's B rows are noise
        "weight_elements_per_step": all_params if tied else all_params - embedding.numel(),
        "kv_elements_per_row": 2 * layers * kv_heads * head_dim * context,
    }


DTYPE_BYTES = {"float32": 4, "bfloat16": 2}


def ceilings(
    costs: dict[str, Any], rows: Sequence[int], peak: dict[str, float], read: dict[str, float]
) -> list[dict[str, Any]]:
    """Per dtype and rows: the bandwidth and compute ceilings; ``read`` is the read GB/s to use for each dtype."""
    out = []
    for dtype, size in DTYPE_BYTES.items():
        gflops = peak.get(dtype)
        for b in rows:
            step_bytes = (costs["weight_elements_per_step"] + b * costs["kv_elements_per_row"]) * size
            steps = read[dtype] * 1e9 / step_bytes
            row = {
                "dtype": dtype,
                "rows": b,
                "bytes_per_step": step_bytes,
                "read_gb_per_s": round(read[dtype], 2),
                "bandwidth_steps_per_s": round(steps, 2),
                "bandwidth_tokens_per_s": round(b * steps, 1),
                "compute_tokens_per_s": None,
                "roofline_tokens_per_s": round(b * steps, 1),
                "bound": "bandwidth",
            }
            if gflops:
                compute = gflops * 1e9 / costs["flops_per_token"]["total"]
                row["compute_tokens_per_s"] = round(compute, 1)
                if compute < b * steps:
                    row["roofline_tokens_per_s"], row["bound"] = round(compute, 1), "compute"
            out.append(row)
    return out


def default_context(policy, max_new_tokens: int, prompts: int) -> int:
    """The math prompts' mean chat-templated length + half the token budget: the mean context of a decoding step
    when samples run to the budget (the rollout benchmark's prompts)."""
    lengths = [len(encode_chat(policy.tokenizer, m)) for m in math_prompts(prompts)]
    return round(sum(lengths) / len(lengths) + max_new_tokens / 2)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rows", default="1,8,32,64", help="batch rows to compute ceilings for")
    parser.add_argument("--context", type=int, default=None, help="positions attended per step (default: above)")
    parser.add_argument("--prompts", type=int, default=4, help="math prompts for the default context (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="for the default context (default 64)")
    parser.add_argument("--matmul-sizes", default="512,1024,2048", help="square matmul sizes (default 512,1024,2048)")
    parser.add_argument("--bandwidth-mib", type=int, default=1024, help="fp32 tensor for the bandwidth test")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    load_before = list(os.getloadavg())

    from harness.engine.transformers_engine import TransformersEngine
    from harness.models import load_policy
    from harness.plugins import get_plugin_manager

    policy = load_policy(args.model, get_plugin_manager(autoload=False)["model"], dtype="float32")
    engine_rows = TransformersEngine(policy, progress=False).max_batch_rows
    rows = sorted({int(r) for r in args.rows.split(",")} | {engine_rows})
    context = args.context or default_context(policy, args.max_new_tokens, args.prompts)
    costs = model_costs(policy.model, context)

    sizes = [int(x) for x in args.matmul_sizes.split(",")]
    dtypes = ["float32", "bfloat16"] if native_bf16() else ["float32"]
    square = {
        dtype: {n: round(matmul_gflops(n, n, n, getattr(torch, dtype), args.repeats), 1) for n in sizes}
        for dtype in dtypes
    }
    peak = {dtype: max(by_size.values()) for dtype, by_size in square.items()}
    hidden, inter = costs["hidden"], policy.model.config.intermediate_size
    decode_shape = {
        f"{dtype}_rows{b}": round(matmul_gflops(b, hidden, inter, getattr(torch, dtype), args.repeats * 20), 1)
        for dtype in peak
        for b in rows
    }
    weight_bytes = {dtype: costs["weight_elements_per_step"] * size for dtype, size in DTYPE_BYTES.items()}
    bandwidth = {
        "read_gb_per_s": read_gbs(args.bandwidth_mib * 2**20, args.repeats),
        "copy_gb_per_s": copy_gbs(args.bandwidth_mib * 2**20, args.repeats),
        **{
            f"read_gb_per_s_at_{dtype}_weights": read_gbs(nbytes, args.repeats)
            for dtype, nbytes in weight_bytes.items()
        },
    }
    # a ceiling: the better of the two reads at or beyond the weights' size (on a shared machine, one of them may
    # have run while another job took the memory bus)
    read_for = {
        dtype: max(bandwidth[f"read_gb_per_s_at_{dtype}_weights"], bandwidth["read_gb_per_s"]) for dtype in DTYPE_BYTES
    }
    table = ceilings(costs, rows, peak, read_for)
    load_after = list(os.getloadavg())

    flops = {k: v / 1e6 for k, v in costs["flops_per_token"].items()}
    print(
        f"model {args.model}: {costs['parameters'] / 1e6:.1f}M parameters, {flops['total']:.1f} MFLOP per token at "
        f"context {context} (layer matmuls {flops['layer_matmuls']:.1f}, lm_head {flops['lm_head']:.1f}, attention "
        f"{flops['attention']:.1f}); "
        f"threads {torch.get_num_threads()}; load {load_before} -> {load_after}"
    )
    print(f"matmul GFLOP/s, square: {square}; peak " + ", ".join(f"{k} {v:.1f}" for k, v in peak.items()))
    print(f"matmul GFLOP/s at decode shape (rows x {hidden} @ {hidden} x {inter}): {decode_shape}")
    print(
        f"bandwidth GB/s ({args.bandwidth_mib} MiB unless named): "
        + ", ".join(f"{k} {v:.1f}" for k, v in bandwidth.items())
    )
    print(
        f"\n{'dtype':9s} {'rows':>5s} {'MB/step':>8s} {'steps/s (bw)':>12s} {'tok/s (bw)':>11s} "
        f"{'tok/s (compute)':>15s} {'roofline':>9s} bound"
    )
    for r in table:
        compute = "" if r["compute_tokens_per_s"] is None else f"{r['compute_tokens_per_s']:.0f}"
        mark = " (engine default)" if r["rows"] == engine_rows else ""
        print(
            f"{r['dtype']:9s} {r['rows']:5d} {r['bytes_per_step'] / 1e6:8.0f} {r['bandwidth_steps_per_s']:12.1f} "
            f"{r['bandwidth_tokens_per_s']:11.0f} {compute:>15s} {r['roofline_tokens_per_s']:9.0f} {r['bound']}{mark}"
        )
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "roofline",
                "command": "bench/roofline.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "model": args.model,
                "threads": torch.get_num_threads(),
                "torch": torch.__version__,
                "machine": machine(),
                "loadavg_before": load_before,
                "loadavg_after": load_after,
                "engine_max_batch_rows": engine_rows,
                "square_matmul_gflops": square,
                "peak_matmul_gflops": {k: round(v, 1) for k, v in peak.items()},
                "decode_shape_matmul_gflops": decode_shape,
                "bandwidth_mib": args.bandwidth_mib,
                "bandwidth": {k: round(v, 2) for k, v in bandwidth.items()},
                "weight_bytes": weight_bytes,
                "model_costs": costs,
                "ceilings": table,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
