"""Where a training step's time goes: ``time/<section>`` in every line of steps.jsonl (trainers/step_timer.py)."""

from __future__ import annotations

import json
import time

import pytest

from harness.engine.transformers_engine import TransformersEngine
from harness.store.checkpoint import Checkpointer
from harness.store.run_folder import RunStore
from harness.testing import UppercaseTask
from harness.trainers.grpo import TIME_SECTIONS, GRPOTrainer
from harness.trainers.step_timer import StepTimer


def test_every_step_says_where_its_time_went(tiny_policy, plugins, tmp_path):
    store = RunStore(tmp_path, "run")
    store.checkpointer = Checkpointer(store.dir, every=1)
    logged_at: list[float] = []
    log_step = store.log_step

    def timed_log_step(step, metrics, **kwargs):  # when each step's line is written
        logged_at.append(time.perf_counter())
        log_step(step, metrics, **kwargs)

    store.log_step = timed_log_step
    trainer = GRPOTrainer(
        plugins=plugins, steps=3, prompts_per_step=2, group_size=4, max_new_tokens=6, lr=1e-3, num_iterations=2
    )
    engine = TransformersEngine(tiny_policy, progress=False, rollout_dtype="bfloat16")  # old log-probs recomputed
    started = time.perf_counter()
    trainer.train(tiny_policy, engine, UppercaseTask(), UppercaseTask().problems("train"), store=store)
    steps = [json.loads(line) for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    keys = [f"time/{s}" for s in TIME_SECTIONS]
    assert {
        "time/generation",
        "time/scoring",
        "time/old_logprobs",
        "time/backward",
        "time/optimizer",
        "time/checkpoint",
    } <= set(keys)
    # each step's window: from the previous step's line (or the start) to its own, the previous step's checkpoint
    # included (it is written after that step's line, so it is reported with the next)
    windows = [b - a for a, b in zip([started, *logged_at], logged_at, strict=False)]
    for step, window in zip(steps, windows, strict=True):
        assert all(step[k] >= 0 for k in keys)
        assert sum(step[k] for k in keys) <= window + 1e-3
        assert step["time/generation"] > 0 and step["time/backward"] > 0 and step["time/old_logprobs"] > 0
        assert step["rollout_seconds"] >= 0 and step["update_seconds"] >= 0  # the keys runs had before
    assert steps[0]["time/checkpoint"] == 0 and all(s["time/checkpoint"] > 0 for s in steps[1:])


def test_a_section_entered_twice_adds_up_and_take_starts_afresh():
    timer = StepTimer()
    for _ in range(2):
        with timer("backward"):
            time.sleep(0.01)
    with pytest.raises(KeyError), timer("optimizer"):  # time spent in a section that raised still counts
        raise KeyError("x")
    seconds = timer.take(("backward", "optimizer", "checkpoint"))
    assert seconds["time/backward"] >= 0.02 and seconds["time/optimizer"] >= 0 and seconds["time/checkpoint"] == 0
    assert timer.take(("backward",)) == {"time/backward": 0.0}
