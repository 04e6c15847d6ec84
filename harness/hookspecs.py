"""The plugin contract: every hook a plugin may implement.

Plugins are plain modules or objects whose functions are decorated with `harness.hookimpl`. Built-in plugins
and third-party packages (entry-point group ``harness``) register through exactly these hooks.

Registration hooks return nothing: they call ``registry.add(name, factory, description=...)``. A factory is a
callable or a ``"module:attribute"`` string; strings are imported only when the plugin is used, so listing plugins
never imports torch. A factory that declares a parameter named ``plugins`` also receives the ``Plugins`` object (the
registries), to look up behaviours or estimators by name. docs/reference/hooks.md is generated from these docstrings
(``python docs/generate.py``).
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
    """Add tasks (``--task NAME``). The factory is called with the task's options as keyword arguments (the
    preset's, then ``--set task.KEY=VALUE``) and returns a ``Task`` (harness/types.py), which may declare
    ``capabilities = TaskCapabilities(...)``. A name ending in ":" registers a family: ``add("rg:", factory)`` makes
    ``--task rg:maze`` call ``factory("maze", **options)``. The runner checks the task against its protocol
    (``harness.plugins.contract.check_task``) before the model loads."""


@hookspec
def harness_register_trainers(registry: Registry) -> None:
    """Add trainers (``--trainer NAME``). The factory is called with the trainer's options: the preset's, the
    task's ``max_new_tokens`` in place of the preset's, ``seed`` (``--seed``) and ``steps`` (``--steps``), then
    ``--set trainer.KEY=VALUE``. It returns a ``Trainer``, which may declare ``capabilities =
    TrainerCapabilities(...)`` (answers per rollout, a target behaviour, steering, data-parallel, a merged save,
    ``prepare_policy`` before a resumed run's trained weights are restored)."""


@hookspec
def harness_register_searchers(registry: Registry) -> None:
    """Add searchers (``--searcher NAME``). The factory is called with the searcher's options: the preset's, the
    task's ``max_new_tokens`` in place of the preset's, ``seed`` (``--seed``) and ``k`` (``--k``), the run-level
    options its ``SearcherCapabilities`` declares it takes (``answers_per_rollout``, ``behaviours``, ``resume``),
    then ``--set searcher.KEY=VALUE``. It returns a ``Searcher``: ``search(...)`` writes every candidate with
    ``store.write_samples`` (docs/reference/hooks.md lists a record's keys) and returns flat numeric metrics, all of
    which the report shows."""


@hookspec
def harness_register_advantage_estimators(registry: Registry) -> None:
    """Add advantage estimators (``--set trainer.advantage=NAME``): callables
    ``estimator(rewards [B, M, N], groups [B], weights [N], *, present, draws, k, generator) -> advantages [B]``
    (B rollouts of M answers, N reward components; ``groups[b]`` is rollout b's prompt; see trainers/advantages.py).
    Keyword context an estimator does not use is taken by ``**_``.

    Policy-gradient trainers look their estimator up here by name, so a new estimator needs no trainer change.
    """


@hookspec
def harness_register_models(registry: Registry) -> None:
    """Add model aliases (``--model NAME``). The factory returns a local folder or hub id that transformers loads."""


@hookspec
def harness_register_behaviours(registry: Registry) -> None:
    """Add behaviours: each entry is a ``harness.types.Behaviour`` (or a ``"module:attr"`` string naming one): its
    scorer ``(text, problem=None) -> [0, 1]``, the teacher's rewrite instructions towards and away from it (steering
    vectors, SFT on rewrites) and a judge's question (RLAIF); optionally a held-out evaluator ``held_out`` (same
    signature; ``held_out_many`` its batch form, ``held_out_doc`` what it measures) that no trainer may call, which
    searchers report as ``heldout/<name>`` beside the scorer's ``behaviour/<name>``. Trainers and searchers look
    them up by name (``--set trainer.behaviour=NAME``, ``--set searcher.behaviours=A,B``) and never import tasks."""


@hookspec
def harness_register_engines(registry: Registry) -> None:
    """Add rollout engines (``--engine NAME``). The factory is called after the model loads as
    ``factory(policy, main_process=bool, **options)`` with the engine's options (``--engine-url`` as ``url``,
    ``--engine-weights-dir`` as ``weights_dir``, then ``--set engine.KEY=VALUE``) and
    returns an ``Engine``; it may declare ``capabilities = EngineCapabilities(...)`` (steering, its own weights,
    shared by ranks, a module it requires), which the runner reads before the model loads."""


@hookspec
def harness_register_loggers(registry: Registry) -> None:
    """Add metric loggers (``--log NAME``). The factory is called as ``factory(run_dir=Path, config=dict)`` and
    returns an object with ``log(metrics: dict[str, float], step: int | None, stage: str)`` and ``close()``.

    Every logger of a run receives the same stream from the run's store (see harness/store/run_folder.py): a
    value's name is ``f"{stage}/{key}"``, its key in metrics.json; ``step`` is None for one-off values such as
    evaluations. A logger should skip what it cannot record (non-numbers) rather than raise: one that raises is
    dropped for the rest of the run. A factory may set the attribute ``requires`` to the module it imports, so a
    missing package is reported before the model loads. A logger that also has ``log_completions(rows: list[dict],
    step: int, stage: str)`` receives every ``--log-completions-every`` training steps that step's samples.jsonl
    records (prompt, text, extracted, rewards, scalar, advantage, ...); ``completion_table`` in
    harness/store/loggers.py makes them columns."""
