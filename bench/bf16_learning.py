"""Does bf16 change what GRPO learns? The brevity learnable reward over a few steps in three precisions, several
seeds each: ``fp32`` (rollouts and update in float32), ``bf16`` (rollouts sampled in bf16, the old log-probs
recomputed in float32, truncated importance weights, the update in float32) and ``bf16-update`` (bf16 rollouts and
the update's forwards under bf16 autocast, old log-probs recomputed under it: what ``--rollout-dtype auto`` with
``trainer.autocast=auto`` does where bf16 is native).

    .venv/bin/python bench/bf16_learning.py --model smollm2-135m --seeds 0,1,2 [--steps 6] [--threads 1]
        [--out bench/results/bf16_learning.json]

Each (precision, seed) trains ``GRPOTrainer`` from a fresh copy of the same weights on ``harness.testing.BrevityTask``
(reward 1 - tokens / 40 on small-talk prompts; bench/post_training_memory.py's learnable check: 2 prompts x 8
samples x 40 tokens, micro-batch 8, lr 5e-5). Printed: each seed's reward curve (the mean reward of each step's
rollouts), then per step the mean and the range over seeds of each precision, and whether bf16's mean lies within
fp32's range over seeds, for each bf16 arm. Also each bf16 step's sampler/trainer gap (``mismatch/*``). A bench
prints figures: nothing is asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.models import load_policy
from harness.plugins import get_plugin_manager
from harness.runner.precision import cpu_flags
from harness.testing import BrevityTask, FakeStore
from harness.trainers.grpo import GRPOTrainer

# arm -> (rollout dtype, the update's autocast)
PRECISIONS = {"fp32": ("float32", ""), "bf16": ("bfloat16", ""), "bf16-update": ("bfloat16", "bfloat16")}


def train_curve(policy, plugins, precision: str, seed: int, args) -> dict:
    run_policy = copy.copy(policy)
    run_policy.model = copy.deepcopy(policy.model)
    rollout_dtype, update_dtype = PRECISIONS[precision]
    engine = TransformersEngine(run_policy, progress=False, rollout_dtype=rollout_dtype)
    task = BrevityTask(policy.tokenizer, args.max_new_tokens)
    store = FakeStore()
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=args.steps,
        prompts_per_step=args.prompts,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        micro_batch=args.group_size,
        lr=args.lr,
        seed=seed,
        autocast=update_dtype,
    )
    started = time.perf_counter()
    trainer.train(run_policy, engine, task, task.problems("train"), store=store)
    return {
        "precision": precision,
        "seed": seed,
        "seconds": time.perf_counter() - started,
        "reward_mean": [m["reward_mean"] for m in store.steps],
        "mismatch_abs_log_ratio": [m["mismatch/abs_log_ratio_mean"] for m in store.steps],
        "tis_clipped_fraction": [m["mismatch/tis_clipped_fraction"] for m in store.steps],
        "completion_tokens_mean": [m["completion_tokens_mean"] for m in store.steps],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-random", help="tiny-random (smoke) or smollm2-135m (the figure)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="bench/results/bf16_learning.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    plugins = get_plugin_manager(autoload=False)
    policy = load_policy(args.model, plugins["model"])
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else "?"
    )
    native = bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
    print(f"machine: {cpu}, {os.cpu_count()} cores, native bf16 {'yes' if native else 'no'}")
    print(
        f"model {args.model}, brevity reward, {args.steps} steps of {args.prompts} prompts x {args.group_size} x "
        f"{args.max_new_tokens} tokens, lr {args.lr}, seeds {seeds}, threads {args.threads}, load "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    runs = []
    for seed in seeds:  # every precision of a seed back to back, the order alternating with the seed
        for precision in list(PRECISIONS) if seed % 2 == 0 else list(PRECISIONS)[::-1]:
            r = train_curve(policy, plugins, precision, seed, args)
            runs.append(r)
            gap = (
                f"  |log-ratio| {statistics.mean(r['mismatch_abs_log_ratio']):.4f}, clipped "
                f"{statistics.mean(r['tis_clipped_fraction']):.4f}"
                if precision != "fp32"
                else ""
            )
            print(
                f"  {precision} seed {seed}: reward "
                + " ".join(f"{x:.3f}" for x in r["reward_mean"])
                + f"  ({r['seconds']:.0f} s){gap}",
                flush=True,
            )

    print(f"\nper step, mean [min, max] over {len(seeds)} seeds:")
    spread = []
    for step in range(args.steps):
        row = {"step": step}
        for precision in PRECISIONS:
            values = [r["reward_mean"][step] for r in runs if r["precision"] == precision]
            row[precision] = {"mean": statistics.mean(values), "min": min(values), "max": max(values)}
        low = [p for p in PRECISIONS if p != "fp32"]
        for p in low:
            row[f"{p}_mean_within_fp32_range"] = row["fp32"]["min"] <= row[p]["mean"] <= row["fp32"]["max"]
            row[f"fp32_mean_within_{p}_range"] = row[p]["min"] <= row["fp32"]["mean"] <= row[p]["max"]
        spread.append(row)
        cells = "   ".join(f"{p} {row[p]['mean']:.3f} [{row[p]['min']:.3f}, {row[p]['max']:.3f}]" for p in PRECISIONS)
        within = ", ".join(f"{p} {'yes' if row[f'{p}_mean_within_fp32_range'] else 'no'}" for p in low)
        print(f"  step {step}: {cells}   mean within fp32 range: {within}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "bf16_learning",
                "model": args.model,
                "seeds": seeds,
                "steps": args.steps,
                "prompts": args.prompts,
                "group_size": args.group_size,
                "max_new_tokens": args.max_new_tokens,
                "lr": args.lr,
                "threads": args.threads,
                "cpus": os.cpu_count(),
                "cpu": cpu,
                "native_bf16": native,
                "python": platform.python_version(),
                "torch": torch.__version__,
                "loadavg_end": os.getloadavg(),
                "runs": runs,
                "per_step": spread,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
