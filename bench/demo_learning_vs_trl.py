"""Learning per CPU-minute on the demo's task: our GRPO trainer against TRL's ``GRPOTrainer``, same model, prompts,
reward and hyper-parameters, each trained from a fresh copy of the same weights.

    .venv/bin/python bench/demo_learning_vs_trl.py --model smollm2-135m --steps 15 --threads 1 --seed 0
        [--set task.KEY=VALUE ...] [--out bench/results/demo_learning_vs_trl.json]

(``--model tiny-random --steps 2`` is a smoke check: a random model learns nothing.)

What it measures. `make demo` trains GRPO's ``quick`` preset (2 prompts x 8 samples x 96 tokens a step, lr 5e-5,
temperature 1) on the ``math`` task. Here both trainers run that configuration for ``--steps`` steps in one process
(ours first, then TRL's), so they share the machine's load:
- the prompts are the task's own ``task.messages(problem)`` (TRL gets them as a conversational "prompt" column), the
  train problems those of the quick preset (``task.problems("train", 64, seed)``), in the order our trainer draws
  them (``cycle_problems``; TRL's dataset is that order with ``shuffle_dataset=False``);
- the reward is the task's scalarised reward, ``scalarize(task.score(problem, text).rewards, task.reward_weights)``,
  a TRL reward function finding the problem through a "problem_id" column;
- TRL: beta 0, loss_type grpo + scale_rewards group (= our sequence-mean loss and grpo advantages), the same clip
  epsilons, AdamW at the same constant lr, grad clip 1.0, fp32, no gradient checkpointing, no vLLM, and the same
  micro-batches (our ``micro_batch`` rows a forward pass: per-device batch = micro_batch, accumulated to the step).
Per step and side: CPU seconds (``time.process_time`` of the whole process, all threads) and wall seconds, both
from the start of ``train`` to the end of that step (our store's ``log_step``, TRL's ``on_step_end``); and, over that
step's 16 rollouts, the boxed rate and committed-answer correct rate (``task.score(...).rewards["boxed"]`` /
``["correct"]``), the unparsed rate, the rate of boxed answers that are an operand of the problem (a reward hack the
boxed component allows), the mean reward and the mean completion length. A step's rollouts are sampled before its
update; a threshold is "reached" at the CPU time of the end of the first step whose rollouts reach it. The area under
a curve is the step function (each step's rate over that step's CPU time) integrated over CPU-minutes, divided by the
span: a CPU-weighted mean rate, given over each side's own span and over the span both sides covered (the fair
comparison when one side's steps are cheaper). The last two steps' completions of each side are kept in the JSON.

Needs ``trl`` (``pip install -e '.[bench]'``). Prints a table per side and a summary, writes JSON. A bench prints
figures: it asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

import torch
import transformers
from transformers import PrinterCallback, TrainerCallback

sys.path.insert(0, str(Path(__file__).parent))
from grpo_step_vs_trl import RecordingEngine, fresh_model, loss_options  # a sibling script (bench/ is no package)

from harness.cli import parse_overrides
from harness.engine.transformers_engine import TransformersEngine
from harness.models import load_policy
from harness.plugins import get_plugin_manager
from harness.plugins.options import build_plugin
from harness.runner.presets import preset_options, run_preset
from harness.testing import FakeStore
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.policy_gradient import cycle_problems
from harness.types import Problem, Score, scalarize

THRESHOLDS = (0.5, 0.9)  # boxed rates whose first arrival is reported, in CPU-minutes
KEEP_LAST = 2  # steps whose completions the JSON keeps, per side


def clocks() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def boxed_operand(problem: Problem, score: Score) -> bool:
    """A boxed answer that is one of the numbers in the problem and not the answer: the "boxed" reward component
    pays for it, the "correct" one does not."""
    if not score.rewards["boxed"] or score.rewards["correct"] or score.extracted is None:
        return False
    return str(score.extracted).strip() in re.findall(r"\d+(?:\.\d+)?", problem.prompt)


def sample_row(task, problem: Problem, text: str, score: Score, tokens: int) -> dict:
    """One rollout, as both sides record it: what the table and JSON need."""
    return {
        "problem_id": problem.id,
        "answer": problem.answer,
        "text": text,
        "extracted": score.extracted,
        "boxed": score.rewards["boxed"],
        "correct": score.rewards["correct"],
        "unparsed": bool(score.unparsed),
        "boxed_operand": boxed_operand(problem, score),
        "reward": scalarize(score.rewards, task.reward_weights),
        "tokens": tokens,
    }


def step_figures(rows: list[dict]) -> dict:
    def rate(key: str) -> float:
        return sum(float(r[key]) for r in rows) / len(rows)

    return {
        "boxed": rate("boxed"),
        "correct": rate("correct"),
        "unparsed": rate("unparsed"),
        "boxed_operand": rate("boxed_operand"),
        "reward_mean": rate("reward"),
        "tokens_mean": rate("tokens"),
        "problems": sorted({r["problem_id"] for r in rows}),
    }


def side_result(
    rollouts: list[list[dict]], marks: list[tuple[float, float]], start: tuple[float, float], setup_cpu_s: float
) -> dict:
    """Per-step figures from each step's rollouts and the clock marks taken at the end of each step."""
    steps, previous = [], start
    for k, (rows, mark) in enumerate(zip(rollouts, marks, strict=True)):
        steps.append(
            {
                "step": k,
                "cpu_s": mark[0] - previous[0],
                "wall_s": mark[1] - previous[1],
                "cum_cpu_min": (mark[0] - start[0]) / 60,
                "cum_wall_min": (mark[1] - start[1]) / 60,
                **step_figures(rows),
            }
        )
        previous = mark
    last = [r for rows in rollouts[-KEEP_LAST:] for r in rows]
    return {"setup_cpu_s": setup_cpu_s, "steps": steps, "last_completions": last}


# ---------------------------------------------------------------------------------------------------------------
# The two sides.
# ---------------------------------------------------------------------------------------------------------------


class ClockedStore(FakeStore):
    """A FakeStore that takes the clocks each time a step is logged (the end of the step: after its update)."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[float, float]] = []

    def log_step(self, step, metrics, stage="train") -> None:
        self.marks.append(clocks())
        super().log_step(step, metrics, stage)


def train_ours(policy, plugins, task, problems: list[Problem], options: dict) -> dict:
    t0 = time.process_time()
    model_policy = copy.copy(policy)
    model_policy.model = fresh_model(policy.model)
    engine = RecordingEngine(TransformersEngine(model_policy, progress=False), no_eos=False)  # keeps token counts
    trainer = GRPOTrainer(plugins=plugins, **options)
    store = ClockedStore()
    setup = time.process_time() - t0
    start = clocks()
    trainer.train(model_policy, engine, task, problems, store=store)
    by_id = {p.id: p for p in problems}
    rollouts: list[list[dict]] = [[] for _ in store.marks]
    # the samples are written in the order of the step's completions, which the engine recorded
    for s, c in zip(store.samples, engine.completions, strict=True):
        score = Score(rewards=s["rewards"], primary="correct", extracted=s["extracted"], unparsed=s["unparsed"])
        rollouts[s["step"]].append(sample_row(task, by_id[s["problem_id"]], s["text"], score, len(c.token_ids)))
    return side_result(rollouts, store.marks, start, setup)


class StepMarks(TrainerCallback):
    def __init__(self) -> None:
        self.marks: list[tuple[float, float]] = []

    def on_step_end(self, args, state, control, **kw):
        self.marks.append(clocks())


def train_trl(policy, task, problems: list[Problem], options: dict, out_dir: str) -> dict:
    from datasets import Dataset
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer as TRLTrainer

    t0 = time.process_time()
    by_id = {p.id: p for p in problems}
    rollouts: list[list[dict]] = []  # one entry per reward call: once per step (one generation batch a step)

    def task_reward(completions, completion_ids, problem_id, **_) -> list[float]:
        rows = []
        for c, ids, pid in zip(completions, completion_ids, problem_id, strict=True):
            text = c[-1]["content"]
            rows.append(sample_row(task, by_id[pid], text, task.score(by_id[pid], text), len(ids)))
        rollouts.append(rows)
        return [r["reward"] for r in rows]

    rows = options["prompts_per_step"] * options["group_size"]
    micro = options["micro_batch"] if rows % options["micro_batch"] == 0 else rows
    loss = loss_options()["grpo"][1]  # loss_type grpo, scale_rewards group: our loss_norm sequence, advantage grpo
    args = TRLConfig(
        output_dir=out_dir,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=rows // micro,
        num_generations=options["group_size"],
        max_completion_length=options["max_new_tokens"],
        max_steps=options["steps"],
        learning_rate=options["lr"],
        lr_scheduler_type="constant",
        optim="adamw_torch",
        weight_decay=options["weight_decay"],
        max_grad_norm=options["max_grad_norm"],
        beta=0.0,
        epsilon=options["eps_low"],
        epsilon_high=options["eps_high"],
        temperature=options["temperature"],
        top_p=options["top_p"],
        top_k=0,
        use_vllm=False,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        shuffle_dataset=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=options["seed"],
        **loss,
    )
    dataset = Dataset.from_list([{"prompt": task.messages(p), "problem_id": p.id} for p in problems])
    marks = StepMarks()
    trainer = TRLTrainer(
        model=fresh_model(policy.model),
        reward_funcs=task_reward,
        args=args,
        train_dataset=dataset,
        processing_class=policy.tokenizer,
        callbacks=[marks],
    )
    trainer.remove_callback(PrinterCallback)  # it prints every log dict
    setup = time.process_time() - t0
    start = clocks()
    trainer.train()
    return side_result(rollouts, marks.marks, start, setup)


# ---------------------------------------------------------------------------------------------------------------
# Summaries.
# ---------------------------------------------------------------------------------------------------------------


def first_reach(steps: list[dict], key: str, threshold: float) -> float | None:
    return next((s["cum_cpu_min"] for s in steps if s[key] >= threshold), None)


def area_per_minute(steps: list[dict], key: str, span_min: float) -> float:
    """Each step's rate held over that step's CPU time, integrated over [0, span], divided by the span."""
    area, begin = 0.0, 0.0
    for s in steps:
        end = min(s["cum_cpu_min"], span_min)
        area += s[key] * max(end - begin, 0.0)
        begin = s["cum_cpu_min"]
    return area / span_min if span_min > 0 else float("nan")


def summarise(sides: dict[str, dict]) -> dict:
    common = min(side["steps"][-1]["cum_cpu_min"] for side in sides.values())
    out = {"common_span_cpu_min": common}
    for name, side in sides.items():
        steps = side["steps"]
        span = steps[-1]["cum_cpu_min"]
        out[name] = {
            "cpu_min_total": span,
            "wall_min_total": steps[-1]["cum_wall_min"],
            "cpu_s_per_step_median": statistics.median(s["cpu_s"] for s in steps),
            "wall_s_per_step_median": statistics.median(s["wall_s"] for s in steps),
            **{f"cpu_min_to_boxed_{t}": first_reach(steps, "boxed", t) for t in THRESHOLDS},
            "final_boxed": steps[-1]["boxed"],
            "final_correct": steps[-1]["correct"],
            "final_unparsed": steps[-1]["unparsed"],
            "final_boxed_operand": steps[-1]["boxed_operand"],
            **{f"auc_{k}_per_cpu_min": area_per_minute(steps, k, span) for k in ("boxed", "correct")},
            **{f"auc_{k}_per_cpu_min_common": area_per_minute(steps, k, common) for k in ("boxed", "correct")},
        }
    return out


def print_side(name: str, side: dict) -> None:
    print(f"\n{name}: setup {side['setup_cpu_s']:.1f} CPU-s before train()")
    print(
        f"{'step':>4s} {'cpu_s':>7s} {'wall_s':>7s} {'cum CPU-min':>11s} {'boxed':>6s} {'correct':>7s} "
        f"{'unparsed':>8s} {'box-op':>6s} {'reward':>6s} {'tokens':>6s}"
    )
    for s in side["steps"]:
        print(
            f"{s['step']:4d} {s['cpu_s']:7.1f} {s['wall_s']:7.1f} {s['cum_cpu_min']:11.2f} {s['boxed']:6.3f} "
            f"{s['correct']:7.3f} {s['unparsed']:8.3f} {s['boxed_operand']:6.3f} {s['reward_mean']:6.3f} "
            f"{s['tokens_mean']:6.1f}"
        )


def source_state(module) -> dict:
    """The last commit of a module's file, and whether the working tree changes it: the task's prompt and scoring
    may be edited between runs (the JSON also keeps a prompt as sent)."""
    path = Path(module.__file__)

    def git(*cmd: str) -> str:
        done = subprocess.run(["git", *cmd], cwd=path.parent, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    return {
        "file": str(path.relative_to(git("rev-parse", "--show-toplevel"))),
        "commit": git("log", "-1", "--format=%h %s", "--", path.name),
        "modified": bool(git("status", "--porcelain", "--", path.name)),
    }


def minutes(x: float | None) -> str:
    return "not reached" if x is None else f"{x:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m (the figure) or tiny-random (smoke)")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads, both sides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KIND.KEY=VALUE",
        help="a math task or GRPO option, e.g. --set task.max_digits=1 --set trainer.lr=3e-5 "
        "(repeatable; the trainer options reach both sides)",
    )
    parser.add_argument("--out", default="bench/results/demo_learning_vs_trl.json")
    args = parser.parse_args()

    import trl

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    overrides = parse_overrides(args.overrides)
    if any(overrides[kind] for kind in overrides if kind not in ("task", "trainer")):
        parser.error("only task.KEY=VALUE and trainer.KEY=VALUE options apply")
    plugins = get_plugin_manager(autoload=False)
    # the demo's options: the quick preset's task options, train problems and GRPO options (steps and seed ours)
    task = build_plugin(
        plugins, "task", "math", {**preset_options(plugins, "quick", "task", "math"), **overrides["task"]}
    )
    grpo = {
        **preset_options(plugins, "quick", "trainer", "grpo"),
        **overrides["trainer"],
        "steps": args.steps,
        "seed": args.seed,
    }
    options = GRPOTrainer(plugins=plugins, **grpo).describe()  # every option, defaults included, for TRL's side
    train = task.problems("train", limit=run_preset("quick")["train_limit"], seed=args.seed)
    # the problems our trainer draws, in its order; TRL's dataset is exactly these, unshuffled
    order = list(itertools.islice(cycle_problems(train, args.seed), args.steps * options["prompts_per_step"]))

    torch.set_num_threads(args.threads)
    policy = load_policy(args.model, plugins["model"])
    print(
        f"model {args.model}, task {task.name} {task.version}, {args.steps} steps of {options['prompts_per_step']} "
        f"prompts x {options['group_size']} samples x {options['max_new_tokens']} tokens, lr {options['lr']}, "
        f"threads {args.threads}; torch {torch.__version__}, transformers {transformers.__version__}, "
        f"trl {trl.__version__}; load {os.getloadavg()[0]:.2f}"
    )
    source = source_state(sys.modules[type(task).__module__])
    print(f"prompt: {task.messages(order[0])[-1]['content']!r}\ntask source: {source}")

    sides, loads = {}, {}
    with tempfile.TemporaryDirectory(prefix="demo-vs-trl-") as tmp:
        for name in ("ours", "trl"):
            torch.set_num_threads(args.threads)
            before = os.getloadavg()[0]
            if name == "ours":
                sides[name] = train_ours(policy, plugins, task, train, grpo)
            else:
                sides[name] = train_trl(policy, task, order, options, str(Path(tmp) / "trl"))
            loads[name] = (before, os.getloadavg()[0])
            print_side(name, sides[name])

    summary = summarise(sides)
    same_order = [s["problems"] for s in sides["ours"]["steps"]] == [s["problems"] for s in sides["trl"]["steps"]]
    print(f"\nsame problems at every step: {same_order}; common span {summary['common_span_cpu_min']:.2f} CPU-min")
    print(
        f"{'':5s} {'CPU-min to boxed 0.5':>20s} {'to 0.9':>12s} {'final boxed':>11s} {'correct':>7s} "
        f"{'CPU-s/step':>10s} {'wall-s/step':>11s} {'AUC boxed':>9s} {'correct':>7s} {'(common span)':>13s}"
    )
    for name in sides:
        s = summary[name]
        print(
            f"{name:5s} {minutes(s['cpu_min_to_boxed_0.5']):>20s} {minutes(s['cpu_min_to_boxed_0.9']):>12s} "
            f"{s['final_boxed']:11.3f} {s['final_correct']:7.3f} {s['cpu_s_per_step_median']:10.1f} "
            f"{s['wall_s_per_step_median']:11.1f} {s['auc_boxed_per_cpu_min']:9.3f} "
            f"{s['auc_correct_per_cpu_min']:7.3f}   {s['auc_boxed_per_cpu_min_common']:.3f} / "
            f"{s['auc_correct_per_cpu_min_common']:.3f}"
        )

    report = {
        "model": args.model,
        "steps": args.steps,
        "threads": args.threads,
        "seed": args.seed,
        "task": {
            "name": task.name,
            "version": task.version,
            "options": overrides["task"],
            "prompt_example": task.messages(order[0]),
            "source": source,
        },
        "grpo": options,
        "same_problem_order": same_order,
        "loadavg_before_after": loads,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "summary": summary,
        **sides,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
