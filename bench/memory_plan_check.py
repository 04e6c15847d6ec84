"""The memory plan (harness/runner/memory_plan.py, `harness memory`) against the peak measured: three random-weight
Llama shapes x three ways of training (float32 full fine-tuning; bf16 autocast over float32 weights with the KL
reference; bf16 weights with LoRA and gradient checkpointing), two GRPO steps each, on CPU; on a GPU (the GPU check,
bench/gpu_check.sh) Qwen2.5-1.5B's shape, trained fully in bf16, with LoRA, and as VPO with LoRA.

    .venv/bin/python bench/memory_plan_check.py [--threads 2] [--out bench/results/memory_plan_check.json]
    python bench/memory_plan_check.py --device cuda --shapes qwen2.5-1.5b --ways bf16-full,bf16-lora-gc,vpo-lora-gc

Each (shape, way) runs in a child process of its own; the model is built from its config with random weights (seed
0), nothing is downloaded. What is compared is the training part. On CPU: the child's peak resident memory
(``ru_maxrss``) at the end, minus its peak once the model is loaded and every weight paged in (Python, torch and
the weights); on CUDA: torch's peak allocated memory minus what was allocated once the model was on the GPU. The
plan's part is its peak minus the weights. Seconds per step are printed too. Rollouts come from an engine that
returns random tokens of a fixed length (the model's own sampling would cost memory of its own and vary the length),
scored at random, so every step updates. Printed: one row per child with both figures and their ratio; the goal is
within 25%. A bench prints figures: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

from harness.types import EngineCapabilities  # no torch: plain dataclasses

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

SHAPES = {  # SmolLM2-like: tied embeddings, its vocabulary (the tokenizer is the tiny-random model's, SmolLM2's)
    "small": {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "medium": {
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
    },
    "large": {
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
    },
    "qwen2.5-1.5b": "Qwen/Qwen2.5-1.5B",  # harness/runner/memory_plan.py KNOWN_SHAPES (the GPU check's shape)
}
WAYS = {  # name -> (weights dtype, trainer options)
    "fp32": ("float32", {}),
    "autocast-kl": ("float32", {"autocast": "bfloat16", "beta": 0.04}),
    "bf16-lora-gc": ("bfloat16", {"lora_r": 16, "lora_alpha": 32.0, "gradient_checkpointing": True}),
    "bf16-full": ("bfloat16", {}),
    "vpo-lora-gc": ("bfloat16", {"lora_r": 16, "lora_alpha": 32.0, "gradient_checkpointing": True, "vpo": True}),
}
BATCH = {"prompts_per_step": 2, "group_size": 4, "micro_batch": 4}
PROMPT_TOKENS, COMPLETION_TOKENS = 64, 96


def random_policy(shape: str, dtype: str, device: str):
    """A random-weight model of the shape (seed 0), with the tiny-random model's tokenizer (SmolLM2's), in memory."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from harness.models import Policy, tiny_random
    from harness.runner.memory_plan import KNOWN_SHAPES

    tokenizer = AutoTokenizer.from_pretrained(tiny_random())
    if isinstance(SHAPES[shape], str):
        fields = dict(KNOWN_SHAPES[SHAPES[shape]])
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    else:
        config = AutoConfig.for_model(
            "llama", vocab_size=len(tokenizer), max_position_embeddings=2048, tie_word_embeddings=True, **SHAPES[shape]
        )
    config.pad_token_id, config.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return Policy(model=model, tokenizer=tokenizer, spec=f"random {shape}", source=f"random {shape}")


class RandomTokens:
    """Completions of exactly COMPLETION_TOKENS random tokens after a prompt of PROMPT_TOKENS, never finished."""

    capabilities = EngineCapabilities()

    def __init__(self, vocab: int) -> None:
        import random

        self.vocab, self.rng = vocab, random.Random(0)

    def generate(self, prompts, params, *, desc="", steering=None):
        from harness.types import Completion

        out = []
        for p in range(len(prompts)):
            prompt = [self.rng.randrange(self.vocab) for _ in range(PROMPT_TOKENS)]
            for j in range(params.n):
                tokens = [self.rng.randrange(self.vocab) for _ in range(COMPLETION_TOKENS)]
                out.append(
                    Completion(
                        prompt_index=p,
                        sample_index=j,
                        prompt_ids=prompt,
                        token_ids=tokens,
                        logprobs=[-10.0] * len(tokens),
                        text=str(self.rng.random()),
                        finished=False,
                    )
                )
        return out


class RandomReward:
    """Any problem; a reward drawn from the completion's text (a random number), so every group has spread."""

    name, version = "random-reward", "1"
    reward_weights = {"r": 1.0}  # noqa: RUF012

    def problems(self, split, limit=None, seed=0):
        from harness.types import Problem

        return [Problem(id=f"p{i}", prompt="x") for i in range(8)]

    def messages(self, problem):
        return [{"role": "user", "content": problem.prompt}]

    def score(self, problem, completion):
        from harness.types import Score

        try:
            reward = float(completion)
        except ValueError:  # a probe of the task with another text
            reward = 0.0
        return Score(rewards={"r": reward}, primary="r")


def child(shape: str, way: str, threads: int, device: str) -> dict:
    import time

    import torch

    from harness.plugins import get_plugin_manager
    from harness.runner.memory_plan import TrainingShape, model_shape, plan
    from harness.testing import FakeStore
    from harness.trainers.grpo import GRPOTrainer
    from harness.trainers.vpo import VPOTrainer

    torch.set_num_threads(threads)
    dtype, options = WAYS[way]
    options = dict(options)
    vpo = options.pop("vpo", False)
    plugins = get_plugin_manager()
    policy = random_policy(shape, dtype, device)
    with torch.no_grad():  # every weight touched: a lazily mapped page would otherwise count as training memory
        sum(float(p.float().sum()) for p in policy.model.parameters())
    if device == "cuda":
        torch.cuda.synchronize()
        loaded = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    extra = {"answers_per_rollout": 4, "warmup_steps": 0} if vpo else {}
    trainer = (VPOTrainer if vpo else GRPOTrainer)(
        plugins=plugins, steps=2, max_new_tokens=COMPLETION_TOKENS, lr=1e-4, seed=0, **BATCH, **options, **extra
    )
    task = RandomReward()
    started = time.perf_counter()
    trainer.train(policy, RandomTokens(policy.model.config.vocab_size), task, task.problems("train"), store=FakeStore())
    seconds = (time.perf_counter() - started) / 2
    if device == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    train = TrainingShape(
        dtype=dtype,
        autocast=options.get("autocast", ""),
        lora_r=options.get("lora_r", 0),
        gradient_checkpointing=options.get("gradient_checkpointing", False),
        beta=options.get("beta", 0.0),
        micro_batch=BATCH["micro_batch"],
        prompt_tokens=PROMPT_TOKENS,
        completion_tokens=COMPLETION_TOKENS,
    )
    parts = plan(model_shape(policy.model.config), train)
    estimate = parts["peak"] - parts["weights"]
    return {
        "shape": shape,
        "way": way,
        "device": device,
        "measured_mb": (peak - loaded) / 2**20,
        "estimate_mb": estimate / 2**20,
        "ratio": estimate / max(peak - loaded, 1),
        "seconds_per_step": seconds,
        "parts_mb": {k: v / 2**20 for k, v in parts.items()},
        "loaded_mb": loaded / 2**20,
        "peak_mb": peak / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shapes", default="small,medium,large", help=f"comma list of {', '.join(SHAPES)}")
    parser.add_argument("--ways", default="fp32,autocast-kl,bf16-lora-gc", help=f"comma list of {', '.join(WAYS)}")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--out", default="bench/results/memory_plan_check.json")
    parser.add_argument("--child", nargs=2, metavar=("SHAPE", "WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.threads, args.device)))
        return
    rows = []
    print(f"{'shape':<13} {'way':<13} {'measured':>9} {'estimate':>9} {'ratio':>6} {'s/step':>7}")
    for shape in args.shapes.split(","):
        for way in args.ways.split(","):
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    shape,
                    way,
                    "--threads",
                    str(args.threads),
                    "--device",
                    args.device,
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                print(f"{shape:<13} {way:<13} failed: {done.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"{shape:<13} {way:<13} {row['measured_mb']:8.0f}M {row['estimate_mb']:8.0f}M {row['ratio']:6.2f} "
                f"{row['seconds_per_step']:7.1f}",
                flush=True,
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "machine": platform.processor() or platform.machine(),
                "device": args.device,
                "cpus": os.cpu_count(),
                "threads": args.threads,
                "batch": {**BATCH, "prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS},
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
