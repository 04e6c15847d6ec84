"""Evaluation during training (``--eval-every N``): the run's searcher on a small held-out slice (the first
``--eval-every-limit`` eval problems) before the first training step and after every N-th, so a curve shows where
training helped or hurt, not only its two ends.

Each point is a line ``{"stage": "during", "step": S, ...the searcher's metrics}`` in steps.jsonl (S: optimizer steps
taken, so a 4-step run with N = 2 has points at 0, 2 and 4), the lists ``during/<metric>`` in metrics.json
(``during/step`` holds the steps), an event for every logger, and a table and a curve in the report. Its samples go
to samples.jsonl with phase ``during-S``.

The trainer needs nothing for it: the store calls back after each training step's line (``RunStore.log_step`` with
stage "train"), so every trainer that logs its steps gets it, a plugin's too. A point is written before its step's
checkpoint (trainers checkpoint after logging), so it is in that checkpoint's snapshot: a resume cut back there
neither loses nor repeats it, and a step already evaluated (in ``during/step``) is skipped. Its random numbers are
its own (torch's, Python's and numpy's RNG restored after it): training is the same with or without it.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from typing import Any

from harness.failures import blame
from harness.runner.distributed import alone
from harness.types import EngineCapabilities, capabilities_of

STAGE = "during"


class DuringTraining:
    """The runner's callback for the store (``RunStore.after_train_step``): ``self(steps)`` evaluates when due."""

    def __init__(self, plan: Any, plugins: Any, policy: Any, engine: Any, store: Any, echo: Any) -> None:
        self.plan, self.policy, self.engine, self.store, self.echo = plan, policy, engine, store, echo
        self.every = plan.cfg.eval_every
        self.problems = plan.eval_problems[: plan.cfg.eval_every_limit]
        self.plugin = plugins["searcher"].get(plan.cfg.searcher).plugin

    def due(self, steps: int) -> bool:
        return steps % self.every == 0 and steps not in self.store.metrics.get(f"{STAGE}/step", [])

    def __call__(self, steps: int) -> None:
        if not self.due(steps):
            return
        cfg, model = self.plan.cfg, self.policy.model
        started = time.perf_counter()
        was_training = model.training
        with (
            _own_random_numbers(),
            self._eval_precision(),
            blame("searcher", cfg.searcher, self.plugin, f"evaluating during training (step {steps})"),
        ):
            model.eval()
            try:
                if capabilities_of(self.engine, EngineCapabilities).own_weights:  # SFT does not sync its engine
                    self.engine.sync_weights(model)
                with alone():  # rank 0 alone: the other ranks of a launch wait in training
                    metrics = self.plan.searcher.search(
                        self.engine, self.plan.task, self.problems, phase=f"{STAGE}-{steps}", store=self.store
                    )
            finally:
                model.train(was_training)
        self.store.log_step(steps, {"step": steps, **metrics, "seconds": time.perf_counter() - started}, stage=STAGE)
        shown = ", ".join(
            f"{k} {v:.3f}"
            for k, v in metrics.items()
            if k.startswith(("pass@", "best@", "solved@")) and isinstance(v, (int, float))
        )
        self.echo(f"evaluation during training, step {steps} ({len(self.problems)} problems): {shown or 'done'}")

    def _eval_precision(self) -> contextlib.AbstractContextManager:
        precision = self.plan.precision  # evaluations sample in the weights' precision, as before and after do
        return precision.eval_phase(self.engine) if precision is not None else contextlib.nullcontext()


@contextlib.contextmanager
def _own_random_numbers() -> Iterator[None]:
    import numpy as np
    import torch

    python, numpy = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)
