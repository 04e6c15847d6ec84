"""The plugin contract: every hook a plugin may implement.

Plugins are plain modules or objects whose functions are decorated with `harness.hookimpl`. Built-in plugins
and third-party packages (entry-point group ``harness``) register through exactly these hooks.

Registration hooks return nothing: they call ``registry.add(name, factory, description=...)``. A factory is a
callable or a ``"module:attribute"`` string; strings are imported only when the plugin is used, so listing plugins
never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from harness.plugins.registry import Registry

PROJECT = "harness"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------------------------------------------------------
# Registration: called once per plugin manager, in get_plugin_manager(); each hook receives the registry of its kind.
# ---------------------------------------------------------------------------------------------------------------


@hookspec
def harness_register_tasks(registry: Registry) -> None:
    """Add tasks. The factory is called with the task's options (keyword arguments) and returns a `Task`."""


@hookspec
def harness_register_trainers(registry: Registry) -> None:
    """Add trainers. The factory is called with the trainer's options and returns a `Trainer`."""


@hookspec
def harness_register_searchers(registry: Registry) -> None:
    """Add searchers. The factory is called with the searcher's options and returns a `Searcher`."""


@hookspec
def harness_register_advantage_estimators(registry: Registry) -> None:
    """Add advantage estimators: callables ``(rewards, groups, weights) -> advantages`` (see trainers/advantages.py).

    Policy-gradient trainers look their estimator up here by name, so a new estimator needs no trainer change.
    """


@hookspec
def harness_register_models(registry: Registry) -> None:
    """Add model aliases (``--model NAME``). The factory returns a local folder or hub id that transformers loads."""


@hookspec
def harness_register_behaviours(registry: Registry) -> None:
    """Add behaviours: each entry is a ``harness.types.Behaviour`` (or a ``"module:attr"`` string naming one): its
    scorer ``(text, problem=None) -> [0, 1]``, the teacher's rewrite instructions towards and away from it (steering
    vectors, SFT on rewrites) and a judge's question (RLAIF). Trainers and searchers look them up by name
    (``--set trainer.behaviour=NAME``, ``--set searcher.behaviours=A,B``) and never import tasks."""


@hookspec
def harness_register_engines(registry: Registry) -> None:
    """Add rollout engines (``--engine NAME``). The factory is called after the model loads as
    ``factory(policy, main_process=bool, **options)`` with the engine's options (``--set engine.KEY=VALUE``) and
    returns an ``Engine``; it may declare ``capabilities = EngineCapabilities(...)`` (steering, its own weights,
    shared by ranks, a module it requires), which the runner reads before the model loads."""


@hookspec
def harness_register_loggers(registry: Registry) -> None:
    """Add metric loggers. The factory is called as ``factory(run_dir=Path, config=dict)`` and
    returns an object with ``log(metrics: dict[str, float], step: int | None, stage: str)`` and ``close()``.

    Every logger of a run receives the same stream from the run's store (see harness/store/run_folder.py): a value's name is
    ``f"{stage}/{key}"``, its key in metrics.json; ``step`` is None for one-off values such as evaluations. A logger
    should skip what it cannot record (non-numbers) rather than raise: one that raises is dropped for the rest of
    the run. A factory may set the attribute ``requires`` to the module it imports, so a missing package is reported
    before the model loads."""
