"""How many torch threads each phase of a GRPO step wants: the engine's decoding loop (tokens/s) and one GRPO update
(seconds), at each thread count, on a machine as it is and with other CPU-bound processes that this script starts.

    nice -n 10 .venv/bin/python bench/threads_probe.py [--model smollm2-135m] [--threads 1,2] [--load 0,1]
        [--prompts 2] [--n 8] [--max-new-tokens 48] [--repeats 2] [--out bench/results/threads_probe.json]

The figures behind harness/runner/threads.py's rule (``choose``). For each ``--load`` N, N busy-loop Python processes
are started (each bounded to ``--load-seconds`` by itself, and killed by pid when the condition ends); then
``--repeats`` rounds, each measuring every thread count in an order that alternates between rounds: decode = our
``TransformersEngine.generate`` on the ``brevity`` prompts (``--prompts`` x ``--n`` samples x ``--max-new-tokens``, a
fixed seed, EOS allowed; tokens counted up to and including EOS), update = ``GRPOTrainer.update`` (loss, backward, clip,
AdamW) on one fixed batch sampled once at the start, on a copy of the model. One untimed warm-up of each first.
The load average before and after each condition is printed: other jobs on the machine count too. A bench prints
figures: no assertion on time.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.models import load_policy
from harness.plugins import get_plugin_manager
from harness.testing import BrevityTask
from harness.trainers.grpo import GRPOTrainer
from harness.types import SamplingParams

BUSY_LOOP = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


class BusyLoad:
    """``count`` CPU-bound Python processes for the duration of a ``with`` block; each also stops by itself after
    ``seconds``, so none outlives a killed benchmark by long. Shared with bench/e2e_vs_trl.py."""

    def __init__(self, count: int, seconds: float = 1800.0) -> None:
        self.count, self.seconds = count, seconds
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> BusyLoad:
        code = BUSY_LOOP.format(seconds=self.seconds)
        self.processes = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.count)]
        return self

    def __exit__(self, *_) -> None:
        for process in self.processes:  # only the processes this object started, by their pid
            process.kill()
        for process in self.processes:
            process.wait()
        self.processes = []


def decode_rate(engine, prompts, n: int, max_new_tokens: int, seed: int) -> dict:
    started = time.perf_counter()
    out = engine.generate(prompts, SamplingParams(n=n, max_new_tokens=max_new_tokens, temperature=1.0, seed=seed))
    seconds = time.perf_counter() - started
    tokens = sum(len(c.token_ids) for c in out)
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def update_seconds(trainer, model, tokenizer, optimizer, completions, advantages) -> float:
    started = time.perf_counter()
    trainer.update(model, tokenizer, optimizer, None, completions, advantages)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", default="1,2", help="thread counts to compare (default 1,2)")
    parser.add_argument("--load", default="0,1", help="busy-loop processes to start, per condition (default 0,1)")
    parser.add_argument("--load-seconds", type=float, default=1800.0, help="each busy loop's own time limit")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="bench/results/threads_probe.json")
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    loads = [int(x) for x in args.load.split(",")]

    plugins = get_plugin_manager(autoload=False)
    policy = load_policy(args.model, plugins["model"])
    task = BrevityTask(policy.tokenizer, args.max_new_tokens)
    prompts = [task.messages(p) for p in task.problems("train")[: args.prompts]]
    engine = TransformersEngine(policy, progress=False)
    batch = engine.generate(prompts, SamplingParams(n=args.n, max_new_tokens=args.max_new_tokens, seed=0))
    trainer = GRPOTrainer(
        plugins=plugins,
        prompts_per_step=args.prompts,
        group_size=args.n,
        max_new_tokens=args.max_new_tokens,
        micro_batch=args.prompts * args.n,
        lr=1e-7,
    )
    rewards = torch.tensor([[[task.score(None, c.text).rewards["short"]]] for c in batch])
    advantages = trainer.estimator(rewards, torch.tensor([c.prompt_index for c in batch]), torch.tensor([1.0]))
    trained = copy.deepcopy(policy.model)
    optimizer = torch.optim.AdamW(trained.parameters(), lr=1e-7)
    default_threads = torch.get_num_threads()
    print(
        f"model {args.model}, {len(prompts)} prompts x n={args.n} x {args.max_new_tokens} tokens; update on "
        f"{len(batch)} rows, {sum(len(c.token_ids) for c in batch)} tokens; torch {torch.__version__}, default "
        f"threads {default_threads}, {os.cpu_count()} CPUs, nice {os.nice(0)}",
        flush=True,
    )
    for threads in thread_counts:  # warm-up: allocator, kernels
        torch.set_num_threads(threads)
        decode_rate(engine, prompts, 2, 8, 99)
        update_seconds(trainer, trained, policy.tokenizer, optimizer, batch[:2], advantages[:2])

    results = []
    for load in loads:
        before = os.getloadavg()
        rows: dict[int, dict[str, list]] = {t: {"decode": [], "update": []} for t in thread_counts}
        with BusyLoad(load, args.load_seconds):
            time.sleep(1.0 if load else 0.0)  # let the loops take their cores
            for round_ in range(args.repeats):
                order = thread_counts if round_ % 2 == 0 else thread_counts[::-1]
                for threads in order:
                    torch.set_num_threads(threads)
                    rows[threads]["decode"].append(
                        decode_rate(engine, prompts, args.n, args.max_new_tokens, seed=round_)
                    )
                    rows[threads]["update"].append(
                        update_seconds(trainer, trained, policy.tokenizer, optimizer, batch, advantages)
                    )
                    d = rows[threads]["decode"][-1]
                    print(
                        f"  load {load} round {round_} threads {threads}: decode {d['tokens_per_s']:6.1f} tok/s "
                        f"({d['tokens']} tokens), update {rows[threads]['update'][-1]:6.2f} s",
                        flush=True,
                    )
        after = os.getloadavg()
        for threads in thread_counts:
            results.append(
                {
                    "load": load,
                    "threads": threads,
                    "loadavg_before": before,
                    "loadavg_after": after,
                    "decode_tokens_per_s_median": statistics.median(d["tokens_per_s"] for d in rows[threads]["decode"]),
                    "update_seconds_median": statistics.median(rows[threads]["update"]),
                    "decode": rows[threads]["decode"],
                    "update_seconds": rows[threads]["update"],
                }
            )
    torch.set_num_threads(default_threads)

    print(
        f"\n{'busy loops':>10s} {'threads':>7s} {'decode tok/s':>12s} {'update s':>9s}   load average before -> after"
    )
    for r in results:
        print(
            f"{r['load']:10d} {r['threads']:7d} {r['decode_tokens_per_s_median']:12.1f} "
            f"{r['update_seconds_median']:9.2f}   {r['loadavg_before'][0]:.2f} -> {r['loadavg_after'][0]:.2f}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "threads_probe",
                "model": args.model,
                "prompts": len(prompts),
                "n": args.n,
                "max_new_tokens": args.max_new_tokens,
                "repeats": args.repeats,
                "default_threads": default_threads,
                "cpus": os.cpu_count(),
                "nice": os.nice(0),
                "python": platform.python_version(),
                "torch": torch.__version__,
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
