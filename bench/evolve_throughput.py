"""Evolve's pace against best-of-k's: model calls per second and generated tokens per second, on the same problems
with the same budget of model calls per problem, the same engine and model, in one process.

    .venv/bin/python bench/evolve_throughput.py [--model tiny-random] [--problems 8] [--calls 16] [--seeds 4]
        [--children 4] [--max-new-tokens 96] [--repeats 2] [--threads 1] [--seed 0]
        [--json bench/results/evolve_throughput.json]

Methods (the ``math`` task's first eval problems; both searchers' own ``search`` on a ``TransformersEngine``,
written to a throw-away run folder, scoring and evolve's checkpoints included, so the time is what a run pays):
- ``evolve``: ``seeds`` seeds + children ``children`` at a time until ``calls`` model calls per problem, with
  ``stop_on_success=False`` so every problem spends the whole budget (otherwise a solved problem would stop early
  and the figures would depend on what was solved);
- ``best-of-k``: n = ``calls`` samples per problem (k = 1, no embedding diversity: not what is measured).
A model call is one completion (a seed, a child, a best-of-k sample); tokens are the generated ones. Both sample at
temperature 1.0 with ``max_new_tokens`` per call. Also reported: the engine calls (``generate`` invocations) each
made, the prompt tokens prefilled (each distinct prompt of a call once: the engine prefills a prompt once for its n
samples), the positions the prefills computed (padding included: prompts prefilled together are left-padded to
the longest), the decoding steps (forward passes of one token per row) and their mean rows, the seconds the
model's forward passes took in prefills and in decoding steps (hooks on the model), and the share of the time spent
inside ``generate``.

The goal (docs/reference/performance.md): evolve at >= 0.5x best-of-k's model calls per second. Evolve pays for what
best-of-k does not: each child's prompt (the question, the parent, the best and a diverse candidate, feedback,
about 5x a plain prompt) is prefilled, children of different parents cannot share a prefill, and the search
waits for each generation's scores before the next. One warm-up call of each method (2 problems, 8 tokens), then
``--repeats`` rounds with the order alternating. Not a test: no assertion on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rollout_throughput import machine  # bench/ is not a package

from harness.engine.transformers_engine import TransformersEngine
from harness.models import load_policy
from harness.plugins import get_plugin_manager
from harness.searchers.best_of_k import BestOfK
from harness.searchers.evolve import Evolve
from harness.store.run_folder import RunStore
from harness.types import Messages, SamplingParams

DEFAULT_JSON = "bench/results/evolve_throughput.json"


class CountingEngine:
    """The engine, counting its ``generate`` calls, completions, generated and prompt tokens and time; and, from a
    hook on the model's forward, the positions its prefills computed (padding included) and its decoding steps
    (forward passes of one token per row) with the rows they carried."""

    def __init__(self, engine: TransformersEngine) -> None:
        self.engine, self.capabilities = engine, engine.capabilities
        self.reset()
        engine.policy.model.register_forward_pre_hook(self._count, with_kwargs=True)
        engine.policy.model.register_forward_hook(self._time, with_kwargs=True)

    def reset(self) -> None:
        self.calls = self.rows = self.tokens = self.prompt_tokens = 0
        self.prefill_positions = self.decode_steps = self.decode_rows = 0
        self.seconds = self.prefill_seconds = self.decode_seconds = 0.0
        self._started: tuple[bool, float] | None = None

    def _count(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids")
        if ids is None:
            return
        if ids.shape[1] > 1:
            self.prefill_positions += ids.numel()
        else:
            self.decode_steps += 1
            self.decode_rows += ids.shape[0]
        self._started = (ids.shape[1] > 1, time.perf_counter())

    def _time(self, module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> None:
        if self._started is not None:
            prefill, started = self._started
            if prefill:
                self.prefill_seconds += time.perf_counter() - started
            else:
                self.decode_seconds += time.perf_counter() - started
            self._started = None

    def encode(self, messages: Messages) -> list[int]:
        return self.engine.encode(messages)

    def generate(self, prompts: Sequence[Messages], params: SamplingParams, **kwargs: Any) -> list:
        started = time.perf_counter()
        out = self.engine.generate(prompts, params, **kwargs)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.rows += len(out)
        self.tokens += sum(len(c.token_ids) for c in out)
        self.prompt_tokens += sum(len(c.prompt_ids) for c in out if c.sample_index == 0)
        return out


def run_once(
    name: str, searcher: Any, engine: CountingEngine, task: Any, problems: list, folder: Path
) -> dict[str, Any]:
    engine.reset()
    store = RunStore.create(folder, f"{name}-{time.monotonic_ns()}")
    started = time.perf_counter()
    metrics = searcher.search(engine, task, problems, phase="eval", store=store)
    seconds = time.perf_counter() - started
    store.close()
    calls = int(metrics.get("budget/calls", metrics.get("budget/rollouts", 0)))
    return {
        "seconds": round(seconds, 3),
        "model_calls": calls,
        "tokens": int(metrics["budget/tokens"]),
        "calls_per_s": round(calls / seconds, 3),
        "tokens_per_s": round(metrics["budget/tokens"] / seconds, 2),
        "engine_calls": engine.calls,
        "prompt_tokens": engine.prompt_tokens,
        "prefill_positions": engine.prefill_positions,
        "decode_steps": engine.decode_steps,
        "rows_per_step": round(engine.decode_rows / max(1, engine.decode_steps), 1),
        "generate_share": round(engine.seconds / seconds, 3),
        "prefill_seconds": round(engine.prefill_seconds, 2),
        "decode_seconds": round(engine.decode_seconds, 2),
        "solved": metrics.get(f"solved@{searcher_budget(searcher)}", metrics.get("success_rate")),
    }


def searcher_budget(searcher: Any) -> int:
    return searcher.budget["calls"] if isinstance(searcher, Evolve) else searcher.n


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-random", help="default tiny-random; smollm2-135m for the real one")
    parser.add_argument("--problems", type=int, default=8, help="math eval problems (default 8)")
    parser.add_argument("--calls", type=int, default=16, help="model calls per problem (default 16)")
    parser.add_argument("--seeds", type=int, default=4, help="evolve's seeds (default 4, the quick preset's)")
    parser.add_argument("--children", type=int, default=4, help="evolve's children per generation (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="per call (default 96, the quick preset's)")
    parser.add_argument("--repeats", type=int, default=2, help="measured rounds after the warm-up (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the figures (default {DEFAULT_JSON})")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()

    load_before = machine().get("loadavg")
    plugins = get_plugin_manager(autoload=False)
    policy = load_policy(args.model, plugins["model"])
    task = plugins["task"].get("math").create()
    problems = task.problems("eval", limit=args.problems)
    engine = CountingEngine(TransformersEngine(policy, progress=False))
    common = {"max_new_tokens": args.max_new_tokens, "temperature": 1.0, "seed": args.seed}

    def make(name: str, tokens: int, calls: int) -> Any:
        options = {**common, "max_new_tokens": tokens}
        if name == "evolve":
            return Evolve(
                seeds=min(args.seeds, calls), children=args.children, calls=calls, stop_on_success=False, **options
            )
        return BestOfK(n=calls, k=1, embedding_diversity=False, **options)

    print(
        f"model {args.model}, math, {len(problems)} problems x {args.calls} calls, max_new_tokens "
        f"{args.max_new_tokens}, seed {args.seed}; evolve seeds {args.seeds} children {args.children}; torch "
        f"threads {torch.get_num_threads()}, load {load_before}"
    )
    names = ["evolve", "best-of-k"]
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="evolve-throughput-") as tmp:
        for name in names:  # warm-up: 2 problems, 8 tokens, 2 calls
            run_once(name, make(name, 8, 2), engine, task, problems[:2], Path(tmp))
        for round_ in range(args.repeats):
            for name in names if round_ % 2 == 0 else names[::-1]:
                record = {
                    "round": round_,
                    **run_once(name, make(name, args.max_new_tokens, args.calls), engine, task, problems, Path(tmp)),
                }
                records[name].append(record)
                print(
                    f"  round {round_} {name:9s}: {record['model_calls']} calls, {record['tokens']} tokens in "
                    f"{record['seconds']:.1f}s = {record['calls_per_s']:.2f} calls/s, "
                    f"{record['tokens_per_s']:.1f} tok/s; {record['engine_calls']} engine calls, "
                    f"{record['prompt_tokens']} prompt tokens ({record['prefill_positions']} positions prefilled), "
                    f"{record['decode_steps']} decoding steps of {record['rows_per_step']} rows; forward "
                    f"passes: prefill {record['prefill_seconds']:.1f}s, decoding {record['decode_seconds']:.1f}s; "
                    f"{record['generate_share']:.0%} in generate"
                )

    summary = {
        name: {
            key: statistics.median(r[key] for r in rows)
            for key in (
                "calls_per_s",
                "tokens_per_s",
                "seconds",
                "engine_calls",
                "prompt_tokens",
                "prefill_positions",
                "decode_steps",
                "rows_per_step",
                "prefill_seconds",
                "decode_seconds",
                "generate_share",
            )
        }
        for name, rows in records.items()
    }
    per_round = [
        e["calls_per_s"] / b["calls_per_s"] for e, b in zip(records["evolve"], records["best-of-k"], strict=True)
    ]
    ratio = {
        "calls_per_s": round(summary["evolve"]["calls_per_s"] / summary["best-of-k"]["calls_per_s"], 3),
        "tokens_per_s": round(summary["evolve"]["tokens_per_s"] / summary["best-of-k"]["tokens_per_s"], 3),
        "calls_per_s_per_round_median": round(statistics.median(per_round), 3),
    }
    print(
        f"\n{'method':10s} {'calls/s':>8s} {'tok/s':>8s} {'sec':>7s} {'engine calls':>12s} {'prompt tok':>10s} "
        f"{'prefilled':>9s} {'steps':>6s} {'rows/step':>9s} {'prefill s':>9s} {'decode s':>8s} {'in generate':>11s}"
    )
    for name, s in summary.items():
        print(
            f"{name:10s} {s['calls_per_s']:8.2f} {s['tokens_per_s']:8.1f} {s['seconds']:7.1f} "
            f"{s['engine_calls']:12.0f} {s['prompt_tokens']:10.0f} {s['prefill_positions']:9.0f} "
            f"{s['decode_steps']:6.0f} {s['rows_per_step']:9.1f} {s['prefill_seconds']:9.1f} "
            f"{s['decode_seconds']:8.1f} {s['generate_share']:11.0%}"
        )
    print(
        f"evolve / best-of-k: {ratio['calls_per_s']:.2f}x calls/s (per-round median "
        f"{ratio['calls_per_s_per_round_median']:.2f}x), {ratio['tokens_per_s']:.2f}x tokens/s; goal >= 0.5x "
        f"calls/s: {'met' if ratio['calls_per_s'] >= 0.5 else 'not met'}"
    )
    info = machine()
    info["loadavg_before"] = load_before
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "evolve_throughput",
                "model": args.model,
                "source": policy.source,
                "task": "math",
                "problems": len(problems),
                "calls": args.calls,
                "seeds": args.seeds,
                "children": args.children,
                "max_new_tokens": args.max_new_tokens,
                "seed": args.seed,
                "repeats": args.repeats,
                "machine": info,
                "summary": summary,
                "ratio": ratio,
                "runs": records,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
