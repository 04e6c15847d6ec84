"""The ``harness`` command. Imports nothing heavy at module level: `harness --help` and `harness list` never load
torch; `harness run` imports it only once its arguments and plugin names have been checked."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.registry import PluginError
from harness.steering import BETA_UNITS


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (PluginError, ValueError, FileNotFoundError) as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted; everything written so far is kept in the run folder", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Evaluate, train and search with language models on tasks with vector rewards.",
        epilog="Example: harness run --task math --trainer grpo --searcher best-of-k --preset quick",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run_p = sub.add_parser("run", help="evaluate a model, train it, evaluate again; write a run folder",
                           description="Evaluate the model with the searcher, train it with the trainer, evaluate "
                                       "again, and write manifest.json, metrics.json, samples.jsonl and "
                                       "steps.jsonl to a new folder under --out.")
    run_p.add_argument("--task", default="math", help="task name (see `harness list`; default: math)")
    run_p.add_argument("--trainer", default="grpo", help="trainer name, or 'none' to evaluate only (default: grpo)")
    run_p.add_argument("--searcher", default="best-of-k", help="searcher name (default: best-of-k)")
    run_p.add_argument("--model", default="smollm2-135m",
                       help="model alias (smollm2-135m, tiny-random), local folder or hub id (default: smollm2-135m)")
    run_p.add_argument("--preset", default="quick", help="option bundle: quick (CPU, minutes) or full (GPU)")
    run_p.add_argument("--steps", type=int, help="training steps (default: the preset's)")
    run_p.add_argument("--limit", type=int, help="number of evaluation problems (default: the preset's)")
    run_p.add_argument("--train-limit", type=int, help="number of training problems (default: the preset's)")
    run_p.add_argument("--k", help="comma-separated k for pass@k / best@k, e.g. 1,4,16 (each needs n >= k)")
    run_p.add_argument("--seed", type=int, default=0, help="seed for data order, sampling and training (default: 0)")
    run_p.add_argument("--out", default="runs", help="folder for run folders (default: runs/)")
    run_p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    run_p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KIND.KEY=VALUE",
                       help="plugin option, e.g. --set trainer.lr=1e-5 --set task.source=champ "
                            "--set searcher.n=16 (repeatable)")
    run_p.set_defaults(func=cmd_run)

    steer_p = sub.add_parser(
        "steer", help="build a steering vector for a behaviour, save it, and measure its effect",
        description="Build a steering vector: the policy answers --prompts train problems, a teacher rewrites each "
                    "answer towards and away from the behaviour, and the layer whose difference of means separates "
                    "the two sets best is kept (unit norm). Then, unless --no-measure, generate on --eval-prompts "
                    "eval problems at each beta and report mean tokens and mean behaviour score (a table, and JSON "
                    "next to the vector: <stem>.measure.json).",
        epilog="Example: harness steer --behaviour conciseness --model smollm2-135m --task math --prompts 16 "
               "--out vectors/conciseness.safetensors")
    steer_p.add_argument("--behaviour", required=True, help="behaviour scorer name (see `harness list`)")
    steer_p.add_argument("--model", default="smollm2-135m", help="policy model alias, folder or hub id")
    steer_p.add_argument("--task", default="math", help="task giving the prompts (default: math)")
    steer_p.add_argument("--prompts", type=int, default=16, help="train problems for the contrastive pairs (16)")
    steer_p.add_argument("--out", required=True, help="the vector file to write (.safetensors)")
    steer_p.add_argument("--teacher", help="teacher model for the rewrites (default: the policy itself)")
    steer_p.add_argument("--seed", type=int, default=0, help="seed for data order and sampling (default: 0)")
    steer_p.add_argument("--max-new-tokens", type=int, default=96,
                         help="token budget of base answers and measured answers; rewrites get twice it (96)")
    steer_p.add_argument("--measure", action=argparse.BooleanOptionalAction, default=True,
                         help="measure the behaviour's effect at each beta (default: on)")
    steer_p.add_argument("--betas", default="-0.3,-0.15,0,0.15,0.3",
                         help="comma-separated steering strengths to measure (default: -0.3,-0.15,0,0.15,0.3)")
    steer_p.add_argument("--beta-unit", choices=BETA_UNITS, default="activation_norm",
                         help="activation_norm: beta is a fraction of the mean activation norm at the vector's "
                              "layer (as in VSPO); absolute: the norm added to the residual stream; raw_norm: in "
                              "units of |mean_pos - mean_neg| (default: activation_norm)")
    steer_p.add_argument("--criterion", choices=("preference", "cohen_d"), default="preference",
                         help="how the layer is picked: preference (steer each layer, keep the one that most raises "
                              "the positive rewrites' likelihood; default) or cohen_d (best separation, cheaper)")
    steer_p.add_argument("--layer", type=int,
                         help="decoder layer to build the vector at (default: the one --criterion picks)")
    steer_p.add_argument("--eval-prompts", type=int, default=8, help="eval problems per beta (default: 8)")
    steer_p.add_argument("--temperature", type=float, default=0.0,
                         help="sampling temperature of the base and measured answers; rewrites are greedy (default: 0)")
    steer_p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    steer_p.add_argument("--set", dest="overrides", action="append", default=[], metavar="task.KEY=VALUE",
                         help="task option, e.g. --set task.source=champ (repeatable)")
    steer_p.set_defaults(func=cmd_steer)

    list_p = sub.add_parser("list", help="list tasks, trainers, searchers, estimators and models with their plugin")
    list_p.set_defaults(func=cmd_list)
    return parser


def parse_overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {"task": {}, "trainer": {}, "searcher": {}}
    for item in items:
        key, sep, value = item.partition("=")
        kind, dot, name = key.partition(".")
        if not sep or not dot or not name or kind not in options:
            raise ValueError(f"--set {item!r}: expected KIND.KEY=VALUE with KIND one of task, trainer, searcher")
        options[kind][name] = value
    return options


def cmd_run(args: argparse.Namespace) -> int:
    from harness.run import RunConfig, run

    cfg = RunConfig(task=args.task, trainer=args.trainer, searcher=args.searcher, model=args.model,
                    preset=args.preset, steps=args.steps, limit=args.limit, train_limit=args.train_limit, k=args.k,
                    seed=args.seed, out=args.out, threads=args.threads, options=parse_overrides(args.overrides))
    run(cfg)
    return 0


def cmd_steer(args: argparse.Namespace) -> int:
    from harness.steer_command import build_and_measure

    options = parse_overrides(args.overrides)
    if options["trainer"] or options["searcher"]:
        raise ValueError("harness steer: only task.KEY=VALUE options apply (--set)")
    build_and_measure(behaviour=args.behaviour, out=args.out, model=args.model, task=args.task,
                      prompts=args.prompts, teacher=args.teacher, seed=args.seed, max_new_tokens=args.max_new_tokens,
                      measure=args.measure, betas=args.betas, beta_unit=args.beta_unit,
                      eval_prompts=args.eval_prompts, temperature=args.temperature, task_options=options["task"],
                      threads=args.threads, layer=args.layer, criterion=args.criterion)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from harness.plugins import get_plugin_manager

    plugins = get_plugin_manager()
    titles = {"task": "tasks", "trainer": "trainers", "searcher": "searchers", "advantage": "advantage estimators",
              "behaviour": "behaviour scorers", "model": "model aliases"}
    for kind, title in titles.items():
        entries = list(plugins[kind])
        print(f"{title}:")
        width = max((len(e.name) for e in entries), default=0)
        for e in entries:
            print(f"  {e.name:<{width}}  {e.description}  [{e.plugin}]")
        print()
    for label, message in plugins.broken.items():
        print(f"broken plugin {label}: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
