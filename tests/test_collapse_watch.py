"""The collapse watch: its rules on hand-made inputs, and GRPO stopping with the last healthy weights when the
rollouts turn empty (trainers/collapse_watch.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.store.run_folder import RunStore
from harness.testing import UppercaseTask
from harness.trainers.collapse_watch import CollapseWatch
from harness.trainers.grpo import GRPOTrainer


def test_empty_or_identical_answers_are_a_collapse():
    watch = CollapseWatch()
    assert watch.rollouts(["", " ", "\n", "ok"]) == "75% of the step's 4 answers are empty"
    assert watch.rollouts(["", "", "a", "b"]) is None  # half empty is not "most"
    assert watch.rollouts(["7", "7 ", "7", "7"]) == "all 4 answers are the same text '7'"
    assert watch.rollouts(["7", "7", "7"]) is None  # three samples agreeing is a confident policy, not a collapse
    assert watch.rollouts([]) is None


def test_rollouts_shrunk_to_a_few_tokens_from_eight_times_that_are_a_collapse():
    watch = CollapseWatch()
    answers = ["to find 76 - 83 subtract", "76 - 83 = -7", "the result is -7", "-7"]
    assert watch.rollouts(answers, [60, 70, 50, 20]) is None  # the first step sets the level: 50 tokens
    assert watch.rollouts(answers, [6, 7, 6, 6]) is None  # bare boxes ("\\boxed{7}" and end): short, not degenerate
    assert (
        watch.rollouts(["9", "1", "6", "7"], [2, 2, 2, 3])
        == "the rollouts shrank to 2.2 tokens on average from 50.0 at the first step"
    )
    assert CollapseWatch().rollouts(["B", "C", "A", "B"], [2, 2, 2, 2]) is None  # short from the start
    terse = CollapseWatch()
    assert terse.rollouts(answers, [20, 20, 20, 20]) is None
    assert terse.rollouts(answers, [3, 3, 3, 3]) is None  # 20 tokens -> 3: less than 8x
    assert CollapseWatch().rollouts(answers) is None  # no token counts: no shrink rule


def test_a_gradient_spike_is_measured_against_the_earlier_median():
    watch = CollapseWatch()
    assert [watch.update(n) for n in (1.0, 0.0, 3.0, 2.0)] == [None, None, None, None]  # zeros are not a level
    assert watch.update(39.0) is None  # 19.5x the median 2
    assert watch.update(61.0) == "gradient norm 61, 24x the median 2.5 of the earlier steps"  # median(1, 3, 2, 39)


def test_a_flat_task_reward_is_said_once_after_three_steps():
    watch = CollapseWatch()
    assert watch.task_reward([0.0, 0.0]) is None
    assert watch.task_reward([0.5, 0.0]) is None  # spread: the count starts again
    assert [watch.task_reward([0.0, 0.0]) for _ in range(3)] == [
        None,
        None,
        "the task's reward was 0 for every answer 3 steps in a row: nothing in it to learn from",
    ]
    assert watch.task_reward([0.0, 0.0]) is None  # said once


class EmptyAfter:
    """A real engine whose rollouts turn empty (a bare end-of-sequence) from call ``empty_from`` on; it keeps a
    copy of the policy's weights at each call, i.e. the weights each step sampled with."""

    def __init__(self, policy, empty_from: int) -> None:
        self.engine, self.policy, self.empty_from = TransformersEngine(policy, progress=False), policy, empty_from
        self.capabilities = self.engine.capabilities
        self.weights: list[dict[str, torch.Tensor]] = []

    def generate(self, prompts, params, *, desc="", **kwargs):
        self.weights.append({k: v.clone() for k, v in self.policy.model.state_dict().items()})
        completions = self.engine.generate(prompts, params, desc=desc, **kwargs)
        if len(self.weights) <= self.empty_from:
            return completions
        eos = self.policy.tokenizer.eos_token_id
        return [replace(c, token_ids=[eos], logprobs=[0.0], text="", finished=True) for c in completions]


def _train(policy, plugins, tmp_path, **options):
    engine = EmptyAfter(policy, empty_from=2)
    trainer = GRPOTrainer(
        plugins=plugins, steps=4, prompts_per_step=2, group_size=4, max_new_tokens=8, lr=1e-3, **options
    )
    store = RunStore(tmp_path, "run")
    trainer.train(policy, engine, UppercaseTask(), UppercaseTask().problems("train"), store=store)
    steps = [json.loads(line) for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    return engine, store, steps


def test_grpo_stops_at_empty_rollouts_with_the_last_healthy_weights(tiny_policy, plugins, tmp_path):
    engine, store, steps = _train(tiny_policy, plugins, tmp_path)
    assert [s["step"] for s in steps] == [0, 1, 2]  # the collapsed step is logged, then training ends
    assert "grad_norm" not in steps[2] and steps[1]["grad_norm"] > 0  # ... and never trained on
    assert store.warnings == [
        "grpo stopped at step 2: policy collapse (100% of the step's 8 answers are empty); "
        "the policy is rolled back to its weights before step 1's update"
    ]
    # the weights step 1 sampled with (after step 0's update), not step 1's update nor the initial ones
    now = tiny_policy.model.state_dict()
    assert all(torch.equal(now[k], v) for k, v in engine.weights[1].items())
    assert not all(torch.equal(now[k], v) for k, v in engine.weights[0].items())
    assert store.snapshot()["warnings"] == store.warnings  # a resume keeps them
    # what the report marks the run with: one step's update kept of the steps asked for
    assert (store.metrics["stopped/at_step"], store.metrics["stopped/steps_trained"]) == (2, 1)


def test_without_the_watch_training_goes_on(tiny_policy, plugins, tmp_path):
    _, store, steps = _train(tiny_policy, plugins, tmp_path, stop_on_collapse=False)
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    assert not any("collapse" in w for w in store.warnings)
