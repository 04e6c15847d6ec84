"""The ``harness`` command. Imports nothing heavy at module level: `harness --help` and `harness list` never load
torch; `harness run` imports it only once its arguments and plugin names have been checked."""

from __future__ import annotations

import argparse
import errno
import sqlite3
import sys
from typing import Any

from harness.failures import RunFailed, reason, run_folder_of
from harness.interrupts import terminate_as_interrupt
from harness.plugins.registry import PluginError
from harness.runner.config import RunConfig, add_flags, given_settings, option_string
from harness.steering.vectors import BETA_UNITS

DEBUG_HELP = "show the full traceback of an error instead of its one line"
QUIET_HELP = (
    "no progress bars or progress lines: print only the summary, warnings and errors (as TQDM_DISABLE=1 does for bars)"
)
# Exit codes: 0 done; 2 a usage or configuration error, refused before anything ran (as argparse's own); 1 a run
# that started (it has a run folder) and failed, or a grid with a failed cell; 130 interrupted (^C, SIGTERM).
EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
EXIT_CODES = (
    "Exit codes: 0 done; 1 a run (or a grid's cell) started and failed, its folder says why; 2 a usage or "
    "configuration error, refused before anything ran; 130 interrupted (^C or SIGTERM), with the command that resumes"
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "quiet", False):
        from harness import progress

        progress.set_quiet()
    terminate_as_interrupt()  # SIGTERM ends a run as ^C does: recorded, cleaned up, one line
    try:
        return args.func(args)
    except (PluginError, ValueError, FileNotFoundError, RuntimeError) as exc:
        if args.debug:
            raise
        return _error(str(exc), code=exit_code(exc))
    except OSError as exc:
        if args.debug or exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        folder = run_folder_of(exc)
        if exc.errno == errno.EFBIG:  # RLIMIT_FSIZE (ulimit -f), or the file system's largest file
            what, fix = "the file-size limit reached", "lift the limit (ulimit -f)"
        else:
            what, fix = "no space left", "free space"
        return _error(
            f"{what} writing {exc.filename or 'the run folder'} ({exc.strerror}); everything "
            f"written before is kept: {fix}, then `{resume_command(folder)}`",
            code=exit_code(exc),
        )
    except sqlite3.OperationalError as exc:  # the results store (index, report) on a full or read-only disk
        if args.debug:
            raise
        return _error(
            f"the results store could not be written: {exc}; the run folders are untouched: free space, "
            "then run the command again"
        )
    except KeyboardInterrupt as exc:
        return _error(interrupted_message(exc), code=EXIT_INTERRUPTED)
    except SystemExit as exc:  # code a command called ended the process outside any plugin's guard: never a silent 0
        if args.debug:
            raise
        return _error(f"code the command called raised {reason(exc)} (--debug shows where)", code=exit_code(exc))


def exit_code(exc: BaseException) -> int:
    """1 for a run that started and failed (its error carries its folder; a grid's failed cells), else 2."""
    return EXIT_FAILED if run_folder_of(exc) or isinstance(exc, RunFailed) else EXIT_USAGE


def resume_command(folder: str | None) -> str:
    import shlex

    return f"harness run --resume {shlex.quote(folder) if folder else 'RUN_DIR'}"


def interrupted_message(exc: BaseException) -> str:
    """What an interrupt leaves and the exact command that continues it."""
    folder = run_folder_of(exc)
    if folder is None:
        return "interrupted before a run folder was written; nothing to resume"
    line = f"interrupted; everything written so far is kept in {folder}; resume it with `{resume_command(folder)}`"
    if getattr(exc, "harness_grid", False):
        line += ", then run the grid's command again for the cells left"
    return line


def _error(message: str, code: int = 2) -> int:
    """One line on stderr, on a line of its own: a progress bar left open by the failure is closed first."""
    if "tqdm" in sys.modules:
        from tqdm.std import tqdm

        for bar in list(getattr(tqdm, "_instances", ())):
            bar.close()
    print(f"harness: error: {message}", file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Evaluate, train and search with language models on tasks with vector rewards.",
        epilog="Example: harness run --task math --trainer grpo --searcher best-of-k --preset quick. " + EXIT_CODES,
    )
    # --debug is taken before or after the command (`harness --debug run ...` or `harness run ... --debug`)
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)  # likewise before or after the command
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    common.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    sub = parser.add_subparsers(dest="command", required=True)

    run_p = sub.add_parser(
        "run",
        parents=[common],
        help="evaluate a model, train it, evaluate again; write a run folder",
        description="Evaluate the model with the searcher, train it with the trainer, evaluate again, and write "
        "manifest.json, metrics.json, samples.jsonl and steps.jsonl to a new folder under --out.",
    )
    # every RunConfig field with a flag, generated from the field (harness/runner/config.py: its help, type, name);
    # the flags that are no setting of a run are written here, each after the field --help lists it after
    add_flags(run_p, RunConfig, after={"name": _resume_flag, "arm": _experiment_file_flags, "options": _set_flag})
    run_p.set_defaults(func=cmd_run)

    steer_p = sub.add_parser(
        "steer",
        parents=[common],
        help="build a steering vector for a behaviour, save it, and measure its effect",
        description="Build a steering vector: the policy answers --prompts train problems, a teacher rewrites each "
        "answer towards and away from the behaviour, the difference of means at the layer --criterion "
        "picks is kept (unit norm). Then, unless --no-measure, generate on --eval-prompts "
        "eval problems at each beta and report mean tokens and mean behaviour score (a table, and JSON "
        "next to the vector: <stem>.measure.json).",
        epilog="Example: harness steer --behaviour conciseness --model smollm2-135m --task math --prompts 16 "
        "--out vectors/conciseness.safetensors",
    )
    steer_p.add_argument("--behaviour", required=True, help="behaviour scorer name (see `harness list`)")
    steer_p.add_argument("--model", default="smollm2-135m", help="policy model alias, folder or hub id")
    steer_p.add_argument("--task", default="math", help="task giving the prompts (default: math)")
    steer_p.add_argument("--prompts", type=int, default=16, help="train problems for the contrastive pairs (16)")
    steer_p.add_argument("--out", required=True, help="the vector file to write (.safetensors)")
    steer_p.add_argument("--teacher", help="teacher model for the rewrites (default: the policy itself)")
    steer_p.add_argument("--seed", type=int, default=0, help="seed for data order and sampling (default: 0)")
    steer_p.add_argument(
        "--max-new-tokens",
        type=int,
        default=96,
        help="token budget of base answers and measured answers; rewrites get twice it (96)",
    )
    steer_p.add_argument(
        "--measure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the behaviour's effect at each beta (default: on)",
    )
    steer_p.add_argument(
        "--betas",
        default="-0.3,-0.15,0,0.15,0.3",
        help="comma-separated steering strengths to measure (default: -0.3,-0.15,0,0.15,0.3)",
    )
    steer_p.add_argument(
        "--beta-unit",
        choices=BETA_UNITS,
        default="activation_norm",
        help="activation_norm: beta is a fraction of the mean activation norm at the vector's "
        "layer (as in VSPO); absolute: the norm added to the residual stream; raw_norm: in "
        "units of |mean_pos - mean_neg| (default: activation_norm)",
    )
    steer_p.add_argument(
        "--criterion",
        choices=("preference", "cohen_d"),
        default="preference",
        help="how the layer is picked: preference (steer each layer, keep the one that most raises "
        "the positive rewrites' likelihood; default) or cohen_d (best separation, cheaper)",
    )
    steer_p.add_argument(
        "--layer", type=int, help="decoder layer to build the vector at (default: the one --criterion picks)"
    )
    steer_p.add_argument("--eval-prompts", type=int, default=8, help="eval problems per beta (default: 8)")
    steer_p.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature of the base and measured answers; rewrites are greedy (default: 0)",
    )
    steer_p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    steer_p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="task.KEY=VALUE",
        help="task option, e.g. --set task.source=champ (repeatable)",
    )
    steer_p.set_defaults(func=cmd_steer)

    report_p = sub.add_parser(
        "report",
        parents=[common],
        help="a leaderboard of runs: HTML page, Markdown, CSV and JSON",
        description="Index the run folders (named, or found one level below the folders named) into "
        "OUT/results.sqlite and write OUT/index.html (open it in a browser; no server needed), "
        "OUT/report.md, OUT/leaderboard.csv and OUT/leaderboard.json.",
        epilog="Example: harness report runs/ --out report/",
    )
    report_p.add_argument("runs", nargs="+", help="run folders, or folders holding run folders")
    report_p.add_argument("--out", required=True, help="folder to write the report to")
    report_p.add_argument(
        "--screenshot",
        metavar="PNG",
        help="also render the page in headless Chromium and save a screenshot (needs chromium "
        "and the playwright package); any console error or missing image is an error",
    )
    report_p.set_defaults(func=cmd_report)

    index_p = sub.add_parser(
        "index",
        parents=[common],
        help="rebuild the results store (results.sqlite) of a folder of runs",
        description="Index every run folder under FOLDER into a new FOLDER/results.sqlite, which replaces the old "
        "one when it is whole: the run folders are the record, the store only indexes them.",
    )
    index_p.add_argument("folder", help="a folder of run folders (e.g. runs/)")
    index_p.set_defaults(func=cmd_index)

    memory_p = sub.add_parser(
        "memory",
        parents=[common],
        help="the expected peak memory of training a model, part by part",
        description="Weights, gradients, AdamW state, the KL reference, one micro-batch's activations and vLLM's "
        "share, from the model's config alone (harness/runner/memory_plan.py; checked against measured CPU "
        "peaks by bench/memory_plan_check.py).",
    )
    memory_p.add_argument("--model", default="smollm2-135m", help="alias, folder or hub id (default: smollm2-135m)")
    memory_p.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "bfloat16", "float16"),
        help="the weights' dtype, as harness run --dtype",
    )
    memory_p.add_argument(
        "--autocast", default="", help="bfloat16: forwards in bf16 over the weights (trainer.autocast)"
    )
    memory_p.add_argument("--lora-r", type=int, default=0, help="LoRA rank (trainer.lora_r); 0: full fine-tuning")
    memory_p.add_argument("--gradient-checkpointing", action="store_true", help="trainer.gradient_checkpointing")
    memory_p.add_argument(
        "--beta",
        type=float,
        default=0.0,
        help="the KL coefficient (trainer.beta): a reference copy when > 0 and not LoRA",
    )
    memory_p.add_argument("--micro-batch", type=int, default=8, help="rows per forward/backward (trainer.micro_batch)")
    memory_p.add_argument("--prompt-tokens", type=int, default=256, help="tokens of a prompt (default 256)")
    memory_p.add_argument(
        "--completion-tokens",
        type=int,
        default=512,
        help="tokens of a completion (trainer.max_new_tokens; default 512, the full preset's)",
    )
    memory_p.add_argument(
        "--vllm-share",
        type=float,
        default=0.0,
        help="vLLM's share of the GPU beside the trainer (engine.gpu_memory_utilization: 0.3 "
        "with --engine vllm on a GPU)",
    )
    memory_p.add_argument("--gpu-gib", type=float, default=80.0, help="the GPU's memory, for --vllm-share")
    memory_p.add_argument(
        "--shard-over",
        type=int,
        default=1,
        metavar="N",
        help="processes the training state is split over (harness run --shard fsdp under "
        "torchrun --nproc_per_node N); per process (default 1: not sharded)",
    )
    memory_p.set_defaults(func=cmd_memory)

    list_p = sub.add_parser(
        "list",
        parents=[common],
        help="list every registered plugin (tasks, trainers, searchers, estimators, "
        "behaviours, engines, models, loggers) with the package that added it",
    )
    _plugin_flag(list_p)
    list_p.set_defaults(func=cmd_list)

    options_p = sub.add_parser(
        "options",
        parents=[common],
        help="every option of a plugin with its type, default and help",
        description="Print every option a plugin takes (--set KIND.KEY=VALUE), with its type, the default a run "
        "gets (the default preset's value where it sets one, labelled, beside the option's own), bounds and help, "
        "e.g. `harness options trainer grpo`. docs/reference/options.md lists every built-in's.",
    )
    options_p.add_argument("kind", choices=("task", "trainer", "searcher", "engine", "logger"))
    options_p.add_argument("name", help="the plugin's name, as `harness list` shows it (a family member: rg:maze)")
    _plugin_flag(options_p)
    options_p.set_defaults(func=cmd_options)
    return parser


def _resume_flag(run_p: argparse.ArgumentParser) -> None:
    run_p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue a killed run in its folder, with its own configuration: finished phases are "
        "skipped, training continues from its last checkpoint (only --threads may be given too)",
    )


def _experiment_file_flags(run_p: argparse.ArgumentParser) -> None:
    run_p.add_argument(
        "--config",
        metavar="FILE",
        help="an experiment file (TOML, or YAML) of the same settings, lists allowed; flags given "
        "here override it. Lists or a file make a grid: each cell a run in a folder named by its "
        "configuration, and rerunning the grid skips the cells already complete",
    )
    run_p.add_argument(
        "--size",
        help="which of the experiment file's sizes to run, e.g. cpu or gpu ([size.NAME] "
        "tables; default: cpu when the file has sizes)",
    )
    run_p.add_argument(
        "--arm",
        help="run only these of the experiment file's arms ([[arm]] tables), e.g. grpo,vpo (default: every arm)",
    )


def _set_flag(run_p: argparse.ArgumentParser) -> None:
    run_p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KIND.KEY=VALUE",
        help="plugin option, KIND one of task, trainer, searcher, engine; e.g. --set trainer.lr=1e-5 "
        "--set task.source=champ --set searcher.n=16 (repeatable). `harness options KIND NAME` lists them with "
        "the default a run gets (the preset's, where it sets one; a run without --preset gets quick). "
        "TRL's GRPOConfig names work too (trainer.learning_rate, num_generations, ...: "
        "docs/reference/trl-options.md)",
    )


def _plugin_flag(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, RunConfig, only=("plugins",))  # --plugin, as `harness run` takes it


def parse_overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    """``["trainer.lr=1e-5", ...]`` -> {"task": {}, "trainer": {"lr": "1e-5"}, "searcher": {}} (and "engine" only
    when given, so a run without engine options keeps the configuration, and grid cell names, it always had)."""
    options: dict[str, dict[str, Any]] = {"task": {}, "trainer": {}, "searcher": {}}
    for item in items:
        key, sep, value = item.partition("=")
        kind, dot, name = key.partition(".")
        if not sep or not dot or not name or kind not in (*options, "engine"):
            raise ValueError(
                f"--set {item!r}: expected KIND.KEY=VALUE with KIND one of task, trainer, searcher, engine"
            )
        options.setdefault(kind, {})[name] = value
    return options


def cmd_run(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from harness.run import run
    from harness.runner.experiment_file import load_experiment
    from harness.runner.run_settings import configs_for, split_names

    if args.resume:
        from harness.run import resume

        flags = {f.name: option_string(f) for f in fields(RunConfig)} | {"overrides": "--set"}  # as typed: --log, --set
        given = [
            flags.get(k, f"--{k.replace('_', '-')}")
            for k, v in vars(args).items()
            if v not in (None, [], False) and k not in ("resume", "threads", "func", "command", "debug", "quiet")
        ]
        if given:
            raise ValueError(f"--resume continues the run with its own configuration; drop {', '.join(given)}")
        resume(args.resume, threads=args.threads)
        return 0
    if (args.size or args.arm) and not args.config:
        raise ValueError("--size and --arm choose from an experiment file; give it with --config FILE")
    settings = load_experiment(args.config, size=args.size) if args.config else {"options": {}}
    given = given_settings(args, RunConfig)  # the flags given override the file's settings (--set apart)
    arms = split_names(args.arm) if args.arm else None
    configs = configs_for(settings, given, parse_overrides(args.overrides), arms=arms)
    if not args.config and len(configs) == 1:
        run(configs[0])  # a single run: no grid, its folder named by time
        return 0
    from harness.runner.distributed import world_size_from_env
    from harness.runner.grid import name_cells, run_grid

    if world_size_from_env() > 1:
        raise ValueError(
            "a grid runs its cells one after another in one process; launch each cell with "
            "torchrun / accelerate launch on its own"
        )
    cells = name_cells(configs)
    size = f" (size {settings['size']})" if "size" in settings else ""
    print(f"grid: {len(cells)} cells under {cells[0].out}/{size}")
    try:
        run_grid(cells)
    except KeyboardInterrupt as exc:
        exc.harness_grid = True  # the message says to run the grid again after the cell's resume
        raise
    return 0


def cmd_steer(args: argparse.Namespace) -> int:
    from harness.steering.command import build_and_measure

    options = parse_overrides(args.overrides)
    if options["trainer"] or options["searcher"]:
        raise ValueError("harness steer: only task.KEY=VALUE options apply (--set)")
    build_and_measure(
        behaviour=args.behaviour,
        out=args.out,
        model=args.model,
        task=args.task,
        prompts=args.prompts,
        teacher=args.teacher,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        measure=args.measure,
        betas=args.betas,
        beta_unit=args.beta_unit,
        eval_prompts=args.eval_prompts,
        temperature=args.temperature,
        task_options=options["task"],
        threads=args.threads,
        layer=args.layer,
        criterion=args.criterion,
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.build import build_report

    html = build_report(args.runs, args.out)
    if args.screenshot:
        from harness.report.screenshot import screenshot

        problems = screenshot(html, args.screenshot)
        if problems:
            raise ValueError(f"the page rendered with {len(problems)} problem(s): {'; '.join(problems)}")
        print(f"screenshot: {args.screenshot}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.store.results_db import RESULTS_DB, reindex

    count = reindex(args.folder)  # a folder it cannot read is skipped, with a line saying which and why
    print(f"indexed {count} runs into {Path(args.folder) / RESULTS_DB}")
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    from harness.plugins import get_plugin_manager
    from harness.runner.memory_plan import TrainingShape, model_config, model_shape, plan, table

    for name in ("lora_r", "micro_batch", "prompt_tokens", "completion_tokens", "shard_over"):
        if getattr(args, name) < (0 if name == "lora_r" else 1):
            raise ValueError(f"--{name.replace('_', '-')} should be >= {0 if name == 'lora_r' else 1}")
    if args.autocast not in ("", "bfloat16"):
        raise ValueError(f"--autocast takes bfloat16 (or nothing), got {args.autocast!r}")
    shape = model_shape(model_config(args.model, get_plugin_manager()["model"]))
    train = TrainingShape(
        dtype=args.dtype,
        autocast=args.autocast,
        lora_r=args.lora_r,
        gradient_checkpointing=args.gradient_checkpointing,
        beta=args.beta,
        micro_batch=args.micro_batch,
        prompt_tokens=args.prompt_tokens,
        completion_tokens=args.completion_tokens,
        vllm_share=args.vllm_share,
        gpu_gib=args.gpu_gib,
        shards=args.shard_over,
    )
    print(
        f"{args.model}: {shape['params'] / 1e9:.2f}B parameters, {shape['layers']} layers, hidden {shape['hidden']}, "
        f"vocabulary {shape['vocab']:,}; micro-batch {args.micro_batch} x ({args.prompt_tokens} + "
        f"{args.completion_tokens}) tokens"
    )
    print(table(plan(shape, train)))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from harness.plugins import get_plugin_manager

    plugins = get_plugin_manager(local=args.plugins or ())
    titles = {
        "task": "tasks",
        "trainer": "trainers",
        "searcher": "searchers",
        "advantage": "advantage estimators",
        "behaviour": "behaviours",
        "engine": "rollout engines",
        "model": "model aliases",
        "logger": "metric loggers",
    }
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


def cmd_options(args: argparse.Namespace) -> int:
    from harness.plugins import get_plugin_manager
    from harness.plugins.options_reference import options_text

    print(options_text(get_plugin_manager(local=args.plugins or ()), args.kind, args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
