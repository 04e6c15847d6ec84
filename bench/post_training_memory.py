"""Peak memory and seconds per GRPO step for the ways of fitting a bigger model: float32 full fine-tuning, bf16
autocast over float32 weights, bf16 weights, bf16 + LoRA, bf16 + LoRA + gradient checkpointing; and whether each
learns the brevity reward as fast.

    .venv/bin/python bench/post_training_memory.py --model smollm2-135m --steps 6 --threads 2 --seed 0
        [--configs fp32,autocast,bf16,bf16-lora,bf16-lora-gc] [--out bench/results/post_training_memory.json]

Each configuration runs in a child process of its own, so its peak resident memory (``ru_maxrss``, which includes
the loaded model and Python itself) is its own; a baseline child that only loads the model gives the part that is
not training. Every configuration trains ``GRPOTrainer`` on ``harness.testing.BrevityTask`` (reward 1 - tokens / 40
on small-talk prompts: learnable in a few steps on the real model) with the same batch shape (2 prompts x 8 samples
x 40 tokens, micro-batch 8) and seed; ``reward_mean`` per step is the learning curve, seconds per step split into
rollout and update. LoRA runs use rank 16, alpha 32 on every linear layer at lr 5e-4 (LoRA's usual 10x the full
fine-tuning rate of 5e-5). A bench prints figures: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

LORA = {"lora_r": 16, "lora_alpha": 32.0, "lr": 5e-4}
CONFIGS = {  # name -> (--dtype, trainer options)
    "load-only": ("float32", None),
    "fp32": ("float32", {}),
    "autocast": ("float32", {"autocast": "bfloat16"}),
    "bf16": ("bfloat16", {}),
    "bf16-lora": ("bfloat16", LORA),
    "bf16-lora-gc": ("bfloat16", {**LORA, "gradient_checkpointing": True}),
}
MAX_TOKENS = 40


def child(name: str, model: str, steps: int, threads: int, seed: int) -> dict:
    """One configuration in this process: load, train, report peak RSS and the steps' figures."""
    import warnings

    import torch

    from harness.engine.transformers_engine import TransformersEngine
    from harness.models import load_policy
    from harness.plugins import get_plugin_manager
    from harness.testing import BrevityTask, FakeStore
    from harness.trainers.grpo import GRPOTrainer

    warnings.filterwarnings("ignore")  # bf16 full fine-tuning warns that small updates round away: measured here
    torch.set_num_threads(threads)
    dtype, options = CONFIGS[name]
    plugins = get_plugin_manager()
    policy = load_policy(model, plugins["model"], dtype=dtype)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"config": name, "dtype": dtype, "options": options, "rss_after_load_mb": loaded}
    if options is None:
        return {**out, "peak_rss_mb": loaded}
    engine = TransformersEngine(policy, progress=False)
    task = BrevityTask(policy.tokenizer, MAX_TOKENS)
    store = FakeStore()
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=steps,
        prompts_per_step=2,
        group_size=8,
        max_new_tokens=MAX_TOKENS,
        micro_batch=8,
        seed=seed,
        **{"lr": 5e-5, **options},
    )
    started = time.perf_counter()
    trainer.train(policy, engine, task, task.problems("train"), store=store)
    wall = time.perf_counter() - started
    steps_logged = store.steps
    trainable = sum(p.numel() for p in policy.model.parameters() if p.requires_grad)
    return {
        **out,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "train_seconds": wall,
        "trainable_parameters": trainable,
        "reward_mean": [m["reward_mean"] for m in steps_logged],
        "rollout_seconds": [m["rollout_seconds"] for m in steps_logged],
        "update_seconds": [m["update_seconds"] for m in steps_logged],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", default="bench/results/post_training_memory.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.model, args.steps, args.threads, args.seed)))
        return
    results = []
    for name in args.configs.split(","):
        if name not in CONFIGS:
            raise SystemExit(f"unknown configuration {name!r}; choose from {', '.join(CONFIGS)}")
        command = [
            sys.executable,
            __file__,
            "--child",
            name,
            "--model",
            args.model,
            "--steps",
            str(args.steps),
            "--threads",
            str(args.threads),
            "--seed",
            str(args.seed),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(_row(results[-1]), flush=True)
    report = {
        "model": args.model,
        "steps": args.steps,
        "threads": args.threads,
        "seed": args.seed,
        "batch": "2 prompts x 8 samples x 40 tokens, micro-batch 8",
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")


def _row(r: dict) -> str:
    if "reward_mean" not in r:
        return f"{r['config']:<13} peak RSS {r['peak_rss_mb']:7.0f} MB (model loaded, no training)"
    steps = len(r["reward_mean"])
    per_step = (sum(r["rollout_seconds"]) + sum(r["update_seconds"])) / steps
    update = sum(r["update_seconds"]) / steps
    curve = " ".join(f"{x:.2f}" for x in r["reward_mean"])
    return (
        f"{r['config']:<13} peak RSS {r['peak_rss_mb']:7.0f} MB  {per_step:5.1f} s/step (update {update:4.1f})  "
        f"trainable {r['trainable_parameters'] / 1e6:6.2f} M  reward {curve}"
    )


if __name__ == "__main__":
    main()
