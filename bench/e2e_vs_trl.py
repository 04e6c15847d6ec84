"""End to end: generated tokens per second of training wall time over a short GRPO run, ours against TRL's
``GRPOTrainer``, with the same model copy, prompts, reward and hyper-parameters, in one process.

    .venv/bin/python bench/e2e_vs_trl.py --model smollm2-135m --threads 1 [--load 1] [--repeats 2]
        [--steps 5] [--prompts 2] [--group-size 8] [--max-new-tokens 96] [--methods ours-fp32,ours-bf16,...]
        [--no-eos] [--out bench/results/e2e_vs_trl.json]
    .venv/bin/python bench/e2e_vs_trl.py --model smollm2-135m --group-sizes 4,8,16 --token-budgets 64,128,256
        [--steps 2] [--out bench/results/e2e_scaling.json]

Needs ``trl`` (``pip install -e '.[bench]'``). The pieces are bench/grpo_step_vs_trl.py's: its prompts
(``make_problems``), reward (``text_reward``, a hash of the completion text, the same Python function on both
sides), ``HashRewardTask``, ``RecordingEngine``, ``NullStore``, ``StepClock``, ``fresh_model``, ``our_trainer`` and
``trl_trainer`` (TRL's ``GRPOConfig`` with ``use_vllm=False``, AdamW at the same constant lr, grad clip 1.0, one
micro-batch, no gradient checkpointing, loss ``grpo``, beta 0).

Methods (``--methods``, all by default):
- ``ours-fp32``: ``GRPOTrainer.train`` with the ``TransformersEngine`` sampling in float32 (``--rollout-dtype
  float32``: what every run did before ``auto``);
- ``ours-bf16``: the engine sampling in bf16 under autocast, the old log-probs recomputed in float32 with truncated
  importance weights (``--rollout-dtype bfloat16``; what ``auto``, the default, picks for training rollouts where
  bf16 is native: the header says what it picks on this machine);
- ``trl-fp32``: TRL with ``bf16=False``;
- ``trl-bf16``: TRL with ``bf16=True`` (mixed precision through accelerate; TRL's own default when fp16 is unset:
  the header says what ``GRPOConfig`` resolves to here).

``--threads N`` runs every method at N torch threads; ``--threads auto`` runs ours with harness/runner/threads.py's
per-phase counts (what ``harness run`` does without ``--threads``) and TRL at torch's default. ``--load N`` starts N
busy-loop processes for the whole measurement (bench/threads_probe.py's ``BusyLoad``; killed at the end).

Each repeat runs every method once from a fresh copy of the same weights, with the same seed; the order of the
methods alternates between repeats (forward, reversed, ...), after one untimed warm-up run of each method (1 step).
Time is the wall time of the ``train`` call (ours) or ``trainer.train()`` (TRL); tokens are the generated tokens
of every step (EOS included, no padding). Printed: median tokens/s per method and each method's ratio to TRL's
best median; the JSON keeps every repeat. Not a test: nothing is asserted on time.

Scaling mode (``--group-sizes`` and/or ``--token-budgets``): each group size at ``--max-new-tokens``, then each
token budget at ``--group-size``; per configuration and method (``ours-fp32`` and ``trl-fp32`` unless ``--methods``
is given), the median seconds per step (ours: ``rollout_seconds + update_seconds``; TRL: ``on_step_begin`` to
``on_step_end``) and the peak resident memory within a step (RSS sampled every 5 ms from /proc/self/statm), both
absolute and above the RSS at the step's start (the whole process's: both sides share it, one after the other).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

import torch
import transformers

sys.path.insert(0, str(Path(__file__).parent))
from grpo_step_vs_trl import (  # sibling scripts (bench/ is no package)
    HashRewardTask,
    NoEos,
    NullStore,
    RecordingEngine,
    StepClock,
    fresh_model,
    loss_options,
    make_problems,
    our_trainer,
    trl_trainer,
)
from threads_probe import BusyLoad

from harness.engine.transformers_engine import TransformersEngine
from harness.models import load_policy
from harness.plugins import get_plugin_manager
from harness.runner import threads as harness_threads
from harness.runner.precision import cpu_flags, native_bf16

METHODS = ("ours-fp32", "ours-bf16", "trl-fp32", "trl-bf16")


class RssSampler:
    """The process's resident memory, sampled every ``interval`` seconds on a thread: ``begin()`` starts a window,
    ``end()`` returns (peak RSS in the window, RSS at its start), in MiB."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE") / 2**20
        self.peak = self.start = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> RssSampler:
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.stop.set()
        self.thread.join()

    def begin(self) -> None:
        self.start = self.peak = self.rss()

    def end(self) -> tuple[float, float]:
        self.peak = max(self.peak, self.rss())
        return self.peak, self.start


class StepEngine(RecordingEngine):
    """Our engine, recording completions (without EOS under ``--no-eos``), and opening the step's memory window at
    the step's first generate."""

    def __init__(self, engine, sampler: RssSampler | None, no_eos: bool = False) -> None:
        super().__init__(engine, no_eos=no_eos)
        self.sampler, self.open = sampler, False

    def generate(self, prompts, params, **kw):
        if self.sampler is not None and not self.open:
            self.sampler.begin()
            self.open = True
        return super().generate(prompts, params, **kw)


class StepStore(NullStore):
    """``NullStore``, closing the step's memory window when the step is logged."""

    def __init__(self, engine: StepEngine) -> None:
        super().__init__()
        self.engine = engine

    def log_step(self, step, metrics, stage="train") -> None:
        if self.engine.sampler is not None:
            metrics = {
                **metrics,
                "peak_rss_mb": self.engine.sampler.end()[0],
                "start_rss_mb": self.engine.sampler.start,
            }
            self.engine.open = False
        super().log_step(step, metrics, stage)


@contextlib.contextmanager
def thread_setting(setting: str, ours: bool):
    """``--threads``: N for every method; "auto": ours per phase (harness/runner/threads.py), TRL at torch's default."""
    default = torch.get_num_threads()
    if setting == "auto":
        if ours:
            harness_threads.configure(None, "cpu")
    else:
        torch.set_num_threads(int(setting))
    try:
        yield
    finally:
        harness_threads.reset()
        torch.set_num_threads(default)


def run_ours(policy, plugins, problems, args, dtype: str, steps: int, sampler: RssSampler | None = None) -> dict:
    step_policy = copy.copy(policy)  # the same tokenizer, a fresh copy of the weights
    step_policy.model = fresh_model(policy.model)
    engine = StepEngine(TransformersEngine(step_policy, progress=False, rollout_dtype=dtype), sampler, args.no_eos)
    options = {**loss_options()["grpo"][0], "beta": 0.0}
    trainer = our_trainer(
        plugins,
        len(problems) * args.group_size,
        args.group_size,
        args.max_new_tokens,
        options,
        steps=steps,
        lr=args.lr,
        seed=args.seed,
    )
    store = StepStore(engine)
    started = time.perf_counter()
    trainer.train(step_policy, engine, HashRewardTask(problems), problems, store=store)
    wall = time.perf_counter() - started
    tokens = sum(len(c.token_ids) for c in engine.completions)
    return {
        "seconds": wall,
        "tokens": tokens,
        "tokens_per_s": tokens / wall,
        "step_seconds": [m["rollout_seconds"] + m["update_seconds"] for m in store.steps],
        "peak_rss_mb": [m.get("peak_rss_mb") for m in store.steps],
        "start_rss_mb": [m.get("start_rss_mb") for m in store.steps],
        "reward_mean": [m["reward_mean"] for m in store.steps],
    }


def run_trl(policy, problems, args, bf16: bool, steps: int, out_dir: str, sampler: RssSampler | None = None) -> dict:
    from transformers import TrainerCallback

    model = fresh_model(policy.model)
    clock = StepClock()
    memory: dict[str, list[float]] = {"peak": [], "start": []}

    class Memory(TrainerCallback):
        def on_step_begin(self, *_, **__):
            if sampler is not None:
                sampler.begin()

        def on_step_end(self, *_, **__):
            if sampler is not None:
                peak, start = sampler.end()
                memory["peak"].append(peak)
                memory["start"].append(start)

    options = {**loss_options()["grpo"][1], "beta": 0.0, "max_steps": steps, "bf16": bf16}
    trainer = trl_trainer(
        model,
        policy.tokenizer,
        problems,
        len(problems) * args.group_size,
        args.group_size,
        args.max_new_tokens,
        options,
        out_dir,
        lr=args.lr,
        seed=args.seed,
        callbacks=[clock.callback, Memory()],
    )
    original = trainer._generate_and_score_completions
    tokens = [0]

    def counted(inputs):
        out = original(inputs)
        tokens[0] += int(out["completion_mask"].sum())
        return out

    generate = trainer._generate_single_turn

    def generate_without_eos(*a, **kw):  # --no-eos: EOS masked while TRL generates, never in its loss
        with NoEos(model, policy.tokenizer, args.no_eos):
            return generate(*a, **kw)

    trainer._generate_and_score_completions = counted
    trainer._generate_single_turn = generate_without_eos
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {
        "seconds": wall,
        "tokens": tokens[0],
        "tokens_per_s": tokens[0] / wall,
        "step_seconds": clock.seconds,
        "peak_rss_mb": memory["peak"] or [None] * len(clock.seconds),
        "start_rss_mb": memory["start"] or [None] * len(clock.seconds),
        "reward_mean": rewards,
    }


def run_method(
    method: str, policy, plugins, problems, args, steps: int, out_dir: str, sampler: RssSampler | None = None
) -> dict:
    side, precision = method.split("-")
    with thread_setting(args.threads, ours=side == "ours"):
        plan = harness_threads.current()  # ours at --threads auto: the counts harness/runner/threads.py chose, kept
        threads = plan.describe() if plan is not None else {"setting": torch.get_num_threads()}
        if side == "ours":
            result = run_ours(
                policy, plugins, problems, args, {"fp32": "float32", "bf16": "bfloat16"}[precision], steps, sampler
            )
        else:
            result = run_trl(policy, problems, args, precision == "bf16", steps, out_dir, sampler)
    return {**result, "threads": threads}


def median(xs) -> float:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def end_to_end(policy, plugins, problems, args, methods, out_dir) -> dict:
    for method in methods:  # warm-up: one step of each, untimed
        run_method(method, policy, plugins, problems, args, 1, out_dir)
    runs: dict[str, list[dict]] = {m: [] for m in methods}
    for repeat in range(args.repeats):
        for method in methods if repeat % 2 == 0 else methods[::-1]:
            r = run_method(method, policy, plugins, problems, args, args.steps, out_dir)
            runs[method].append(r)
            print(
                f"  repeat {repeat} {method:10s}: {r['tokens']:5d} tokens in {r['seconds']:6.1f} s = "
                f"{r['tokens_per_s']:6.1f} tok/s",
                flush=True,
            )
    summary = {
        m: {
            "tokens_per_s_median": median(r["tokens_per_s"] for r in rs),
            "tokens_per_s_min": min(r["tokens_per_s"] for r in rs),
            "tokens_per_s_max": max(r["tokens_per_s"] for r in rs),
            "tokens_median": median(r["tokens"] for r in rs),
            "seconds_median": median(r["seconds"] for r in rs),
        }
        for m, rs in runs.items()
    }
    trl = [m for m in methods if m.startswith("trl")]
    best = max(trl, key=lambda m: summary[m]["tokens_per_s_median"]) if trl else None
    for m in methods:
        summary[m]["ratio_to_trl_best"] = (
            summary[m]["tokens_per_s_median"] / summary[best]["tokens_per_s_median"] if best else None
        )
        if best:  # each repeat's ratio to that repeat's TRL best: steadier when the load moves
            summary[m]["ratio_to_trl_best_per_repeat_median"] = median(
                runs[m][i]["tokens_per_s"] / max(runs[t][i]["tokens_per_s"] for t in trl) for i in range(args.repeats)
            )
    print(
        f"\n{'method':10s} {'tok/s':>7s} {'min':>7s} {'max':>7s} {'tokens':>7s} {'seconds':>8s} "
        f"{'/TRL best':>9s} {'per-repeat':>10s}"
    )
    for m in methods:
        s = summary[m]
        ratio = f"{s['ratio_to_trl_best']:.2f}x" if best else ""
        per = f"{s['ratio_to_trl_best_per_repeat_median']:.2f}x" if best else ""
        print(
            f"{m:10s} {s['tokens_per_s_median']:7.1f} {s['tokens_per_s_min']:7.1f} {s['tokens_per_s_max']:7.1f} "
            f"{s['tokens_median']:7.0f} {s['seconds_median']:8.1f} {ratio:>9s} {per:>10s}"
        )
    if best:
        print(f"(TRL's best here: {best})")
    return {"runs": runs, "summary": summary, "trl_best": best}


def scaling(policy, plugins, problems, args, methods, out_dir) -> dict:
    configs = [(g, args.max_new_tokens) for g in args.group_sizes] + [
        (args.group_size, b)
        for b in args.token_budgets
        if (args.group_size, b) not in [(g, args.max_new_tokens) for g in args.group_sizes]
    ]
    rows = []
    with RssSampler() as sampler:
        for group_size, budget in configs:
            sized = argparse.Namespace(**{**vars(args), "group_size": group_size, "max_new_tokens": budget})
            for method in methods:
                run_method(method, policy, plugins, problems, sized, 1, out_dir)  # warm-up at this size
                r = run_method(method, policy, plugins, problems, sized, args.steps, out_dir, sampler)
                peaks = [p for p in r["peak_rss_mb"] if p is not None]
                growth = [
                    p - s
                    for p, s in zip(r["peak_rss_mb"], r["start_rss_mb"], strict=True)
                    if p is not None and s is not None
                ]
                rows.append(
                    {
                        "group_size": group_size,
                        "max_new_tokens": budget,
                        "method": method,
                        "seconds_per_step_median": median(r["step_seconds"]),
                        "peak_rss_mb": max(peaks, default=None),
                        "step_rss_growth_mb": max(growth, default=None),
                        "tokens": r["tokens"],
                        "run": r,
                    }
                )
                row = rows[-1]
                print(
                    f"  G={group_size:3d} budget={budget:4d} {method:10s}: {row['seconds_per_step_median']:7.2f} "
                    f"s/step, peak RSS {row['peak_rss_mb'] or float('nan'):7.0f} MiB (+"
                    f"{row['step_rss_growth_mb'] or float('nan'):5.0f} in the step), {r['tokens']} tokens",
                    flush=True,
                )
    print(f"\n{'G':>3s} {'budget':>6s} " + " ".join(f"{m + ' s/step':>16s} {m + ' MiB':>14s}" for m in methods))
    for group_size, budget in configs:
        cells = []
        for m in methods:
            row = next(
                r for r in rows if (r["group_size"], r["max_new_tokens"], r["method"]) == (group_size, budget, m)
            )
            cells.append(f"{row['seconds_per_step_median']:16.2f} {row['peak_rss_mb'] or float('nan'):14.0f}")
        print(f"{group_size:3d} {budget:6d} " + " ".join(cells))
    return {"configs": configs, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-random", help="tiny-random (smoke) or smollm2-135m (the figure)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", default="auto", help="1, 2, ... or auto (ours per phase, TRL torch's default)")
    parser.add_argument("--load", type=int, default=0, help="busy-loop processes running during the measurement")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", help=f"comma-separated, from {', '.join(METHODS)}")
    parser.add_argument("--group-sizes", help="scaling mode: e.g. 4,8,16")
    parser.add_argument("--token-budgets", help="scaling mode: e.g. 64,128,256")
    parser.add_argument("--out", help="JSON (default bench/results/e2e_vs_trl.json, scaling: e2e_scaling.json)")
    parser.add_argument(
        "--no-eos",
        action="store_true",
        help="EOS masked while generating, on both sides and at any precision: every completion runs "
        "to --max-new-tokens, so each side generates the same tokens and tokens/s compare "
        "equal work (bf16 sides sample other lengths otherwise)",
    )
    args = parser.parse_args()
    scaling_mode = bool(args.group_sizes or args.token_budgets)
    args.group_sizes = [int(x) for x in args.group_sizes.split(",")] if args.group_sizes else []
    args.token_budgets = [int(x) for x in args.token_budgets.split(",")] if args.token_budgets else []
    methods = (
        args.methods.split(",") if args.methods else (["ours-fp32", "trl-fp32"] if scaling_mode else list(METHODS))
    )
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    if args.threads != "auto" and not args.threads.isdigit():
        raise SystemExit(f"--threads should be a number or auto, got {args.threads!r}")
    out = Path(args.out or ("bench/results/e2e_scaling.json" if scaling_mode else "bench/results/e2e_vs_trl.json"))

    import trl
    from trl import GRPOConfig as TRLConfig

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    plugins = get_plugin_manager(autoload=False)
    policy = load_policy(args.model, plugins["model"])
    policy.model.to("cuda" if torch.cuda.is_available() else "cpu")  # where `harness run` puts it; TRL's too
    problems = make_problems(args.prompts)
    native, found = native_bf16("cpu" if not torch.cuda.is_available() else "cuda")
    with tempfile.TemporaryDirectory(prefix="e2e-vs-trl-") as tmp:
        trl_default_bf16 = TRLConfig(output_dir=tmp, use_cpu=not torch.cuda.is_available(), report_to="none").bf16
        print(
            f"model {args.model}, {args.prompts} prompts x G={args.group_size} x {args.max_new_tokens} tokens, "
            f"{args.steps} steps, threads {args.threads}, {args.load} busy loop(s); torch {torch.__version__}, "
            f"transformers {transformers.__version__}, trl {trl.__version__}, {os.cpu_count()} CPUs, load "
            f"{os.getloadavg()[0]:.2f}\n--rollout-dtype auto picks {'bf16' if native else 'fp32'} for training "
            f"rollouts here ({found}); TRL's default precision here: {'bf16' if trl_default_bf16 else 'fp32'}",
            flush=True,
        )
        load_start = os.getloadavg()
        with BusyLoad(args.load):
            if args.load:
                time.sleep(1.0)
            result = (
                scaling(policy, plugins, problems, args, methods, str(Path(tmp) / "trl"))
                if scaling_mode
                else end_to_end(policy, plugins, problems, args, methods, str(Path(tmp) / "trl"))
            )
    report = {
        "benchmark": "e2e_scaling" if scaling_mode else "e2e_vs_trl",
        "model": args.model,
        "steps": args.steps,
        "prompts": args.prompts,
        "group_size": args.group_size,
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "threads": args.threads,
        "load": args.load,
        "lr": args.lr,
        "seed": args.seed,
        "methods": methods,
        "auto_picks_bf16_here": native,
        "bf16_check": found,
        "trl_default_bf16": trl_default_bf16,
        "cpus": os.cpu_count(),
        "cpu_flags": sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}),
        "no_eos": args.no_eos,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        **result,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"load average {load_start[0]:.2f} -> {report['loadavg_end'][0]:.2f}; wrote {out}")


if __name__ == "__main__":
    main()
