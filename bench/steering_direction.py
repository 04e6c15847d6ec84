"""Which way does VSPO's steering vector point? Build it as `harness run --task T --trainer vspo` does at its defaults
(the policy's own answers rewritten by the policy into more / less of the behaviour, the layer picked by the
preference probe), then sample the evaluation problems with it at -s, 0 and +s (s: the largest strength of VSPO's
schedule, in its unit) and print, per strength, the answers' mean length, behaviour score and correct rate, each
against strength 0 with a 95% paired bootstrap interval over problems.

The vector is meant to raise the behaviour at positive strength (conciseness: shorter answers) and lower it at
negative strength. If it does the opposite, VSPO's reward (which prefers the more positively steered rollouts)
trains the policy the wrong way.

    python bench/steering_direction.py                           # math, conciseness, SmolLM2-135M, seed 0
    python bench/steering_direction.py --task persona --json bench/results/steering_direction_persona.json
    python bench/steering_direction.py --set task.misleading_hint=true --set trainer.behaviour=robustness \
        --set trainer.vector_prompts=32 --json bench/results/steering_direction_robustness.json
    # the same vector with its length direction kept (as VSPO built it before remove_length):
    #   ... --set trainer.remove_length=false --json bench/results/steering_direction_robustness_with_length.json

Columns: mean tokens, the share cut at the token limit, the behaviour's training scorer, correct, and its held-out
evaluator where it has one.

Figures depend on the machine's float rounding (AVX2 against AVX-512): the JSON names the CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

from harness.report.compare import paired
from harness.runner.config import RunConfig
from harness.runner.plan import plan_run


class VectorStore:
    """What VSPOTrainer.build_vector writes to: a folder for the vector, and metrics (kept here)."""

    def __init__(self, folder: Path) -> None:
        self.dir, self.metrics = folder, {}

    def update_metrics(self, metrics: dict) -> None:
        self.metrics.update(metrics)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="math")
    parser.add_argument("--model", default=RunConfig.model)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, default=4, help="answers per problem and strength (default 4)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KIND.KEY=VALUE",
        help="a task or trainer option, as `harness run --set` (e.g. task.misleading_hint=true "
        "trainer.behaviour=robustness)",
    )
    args = parser.parse_args()
    options: dict[str, dict[str, str]] = {"task": {}, "trainer": {}, "searcher": {}}
    for item in args.set:
        key, _, value = item.partition("=")
        kind, _, name = key.partition(".")
        if kind not in ("task", "trainer") or not name or not _:
            parser.error(f"--set takes task.KEY=VALUE or trainer.KEY=VALUE, got {item!r}")
        options[kind][name] = value

    import torch

    from harness.engine.transformers_engine import TransformersEngine
    from harness.models import load_policy
    from harness.plugins import get_plugin_manager
    from harness.steering.vectors import Steering, SteeringVector
    from harness.types import SamplingParams

    plugins = get_plugin_manager()
    plan = plan_run(
        RunConfig(task=args.task, trainer="vspo", model=args.model, seed=args.seed, options=options), plugins
    )
    trainer, task, cfg = plan.trainer, plan.task, plan.trainer.config
    policy = load_policy(args.model, plugins["model"])
    engine = TransformersEngine(policy, progress=False)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        store = VectorStore(Path(folder))
        vector = SteeringVector.load(
            trainer.build_vector(policy, engine, task, plan.train_problems, store), model=policy
        )
    built = time.perf_counter() - started
    unit = vector.unit(cfg.beta_unit)
    strength = max(abs(b) for b in trainer.betas)
    behaviour = trainer.behaviour
    problems = plan.eval_problems
    rows: dict[float, dict[str, dict[str, float]]] = {}
    for beta in (-strength, 0.0, strength):
        params = SamplingParams(
            n=args.samples,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=args.seed,
        )  # the same seeds at every strength
        steering = Steering(vector, [beta * unit] * args.samples) if beta else None
        completions = engine.generate([task.messages(p) for p in problems], params, steering=steering)
        figures: dict[str, dict[str, list[float]]] = {"tokens": {}, "truncated": {}, "behaviour": {}, "correct": {}}
        held_out = behaviour.held_out_scores(
            [c.text for c in completions], [problems[c.prompt_index] for c in completions]
        )
        if held_out:
            figures["heldout"] = {}
        for i, c in enumerate(completions):
            problem = problems[c.prompt_index]
            score = task.score(problem, c.text)
            figures["tokens"].setdefault(problem.id, []).append(len(c.token_ids))
            figures["truncated"].setdefault(problem.id, []).append(float(not c.finished))
            if held_out and held_out[i] is not None:
                figures["heldout"].setdefault(problem.id, []).append(held_out[i])
            figures["behaviour"].setdefault(problem.id, []).append(behaviour.score(c.text, problem))
            figures["correct"].setdefault(problem.id, []).append(float(score.rewards.get("correct", 0.0)))
        rows[beta] = {name: {pid: sum(v) / len(v) for pid, v in per.items()} for name, per in figures.items()}

    print(
        f"{args.model} on {args.task}, behaviour {cfg.behaviour}: vector at layer {vector.layer} "
        f"(preference {store.metrics.get('vspo/vector_preference')}), built in {built:.0f} s; "
        f"{len(problems)} problems x {args.samples} answers per strength, seed {args.seed}; CPU {cpu_name()}"
    )
    out = {
        "model": args.model,
        "task": args.task,
        "behaviour": cfg.behaviour,
        "options": options,
        "remove_length": trainer.removes_length(),
        "layer": vector.layer,
        "preference": store.metrics.get("vspo/vector_preference"),
        "strength": strength,
        "unit": cfg.beta_unit,
        "problems": len(problems),
        "samples": args.samples,
        "seed": args.seed,
        "cpu": cpu_name(),
        "torch": torch.__version__,
        "strengths": {},
    }
    for beta, figures in rows.items():
        line = {}
        for name, per in figures.items():
            mean = math.fsum(per.values()) / len(per)
            line[name] = {"mean": mean}
            if beta:
                change, _ = paired(per, rows[0.0][name])
                line[name].update(change=change.value, low=change.low, high=change.high)
        out["strengths"][f"{beta:+g}"] = line
        print(
            f"  strength {beta:+g} x {cfg.beta_unit}: "
            + "  ".join(
                f"{name} {v['mean']:.3f}"
                + (f" ({v['change']:+.3f} [{v['low']:+.3f}, {v['high']:+.3f}])" if "change" in v else "")
                for name, v in line.items()
            )
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
