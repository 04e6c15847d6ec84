"""Step 3 of a run: the model and its engine. The policy on this rank's device, the engine that samples from it,
then each phase's thread count (harness/runner/threads.py) and sampling precision (harness/runner/precision.py),
which the manifest records."""

from __future__ import annotations

from typing import Any

from harness import progress
from harness.plugins import Plugins
from harness.runner.expected_time import expected_time
from harness.runner.plan import Plan, training_budget, translated_lines

__all__ = ["load_model"]


def load_model(plan: Plan, plugins: Plugins, dp: Any, echo, resuming: dict | None = None) -> tuple[Any, Any]:
    """Step 3: the policy on this rank's device, and the engine that samples from it; then the threads of each phase
    (a resumed run's recorded ones) and the precision each phase samples in, which the manifest records
    (``plan.threads``, ``plan.precision``)."""
    from harness.models import load_policy
    from harness.runner import threads
    from harness.runner.precision import resolve

    cfg = plan.cfg
    if cfg.threads:  # --threads N: every phase at N, set before anything runs
        threads.configure(cfg.threads)
    if (expected := expected_time(cfg)) and not resuming:
        echo(expected)
    if (budget := training_budget(plan)) and not resuming:
        echo(budget)
    for line in translated_lines(plan) if not resuming else ():  # TRL's names given: which, and as what
        echo(line)
    for line in plan.notes if not resuming else ():  # train and eval problems that overlap
        echo(line)
    echo(f"loading model {cfg.model} ...")
    if progress.quiet() or not progress.on_terminal():  # a log file gets no third-party bar at all
        progress.quiet_libraries()
    policy = load_policy(cfg.model, plugins["model"], dtype=cfg.dtype, revision=cfg.model_revision or None)
    progress.quiet_libraries()  # none mid-run either (the diversity metrics' embedding model loads later)
    policy.model.to(dp.device)  # this rank's GPU, or the CPU
    make_engine = plugins["engine"].get(cfg.engine).load()  # the hook's contract: (policy, main_process, **options)
    engine = make_engine(policy, main_process=dp.is_main, **plan.options["engine"])
    parameter = next(policy.model.parameters())
    # without --threads: per phase (decoding, update), from the cores other work leaves free (harness/runner/threads.py)
    plan.threads = threads.configure(cfg.threads, parameter.device, (resuming or {}).get("threads")).describe()
    plan.precision = resolve(
        cfg.rollout_dtype, str(parameter.dtype).removeprefix("torch."), parameter.device.type, engine, plan.trainer
    )
    return policy, engine
