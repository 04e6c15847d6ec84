"""DAPO's dynamic sampling (trainers/dynamic_sampling.py): flat groups are dropped and refilled from extra rounds,
by hand on scripted rounds, and in training: no flat group reaches the update, where without it one does."""

from __future__ import annotations

import json
import re

import pytest
import torch
from small_vocab_engine import SmallVocabEngine

from harness.store.run_folder import RunStore
from harness.testing import FakeTask
from harness.trainers.dynamic_sampling import Rollouts, fill_batch, informative, refill_problems
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.policy_gradient import ScoredRollouts
from harness.types import Completion, Problem

G = 2


def scripted_round(name: str, spreads: list[bool]) -> Rollouts:
    """A round of len(spreads) problems "<name><g>", G rollouts each; a group with spread gets advantages +1, -1."""
    problems = [Problem(id=f"{name}{g}", prompt="") for g in range(len(spreads))]
    completions = [
        Completion(
            prompt_index=g,
            sample_index=j,
            prompt_ids=[1],
            token_ids=[2 + j],
            logprobs=[0.0],
            text=f"{name}{g}/{j}",
            finished=True,
        )
        for g in range(len(spreads))
        for j in range(G)
    ]
    advantages = torch.tensor([(1.0 - 2 * j) if spread else 0.0 for spread in spreads for j in range(G)])
    rewards = advantages.view(-1, 1, 1)
    scored = ScoredRollouts(
        rewards=rewards,
        present=torch.ones(len(completions), 1, dtype=torch.bool),
        scores=[[None] for _ in completions],
        errors=1,
        malformed=0,
    )
    return Rollouts(problems, completions, scored, advantages)


def test_flat_groups_are_dropped_and_refilled_in_draw_order():
    rounds = [scripted_round("a", [False, True, False]), scripted_round("b", [True, False, True])]
    batch, figures = fill_batch(lambda r: rounds[r], want=3, max_rounds=3, m=1)
    assert [p.id for p in batch.problems] == ["a1", "b0", "b2"]  # b2 fills the step; no third round is drawn
    assert [c.text for c in batch.completions] == ["a1/0", "a1/1", "b0/0", "b0/1", "b2/0", "b2/1"]
    assert [c.prompt_index for c in batch.completions] == [0, 0, 1, 1, 2, 2]
    assert batch.advantages.tolist() == [1.0, -1.0] * 3
    assert batch.scored.rewards.view(-1).tolist() == [1.0, -1.0] * 3
    assert batch.scored.errors == 2  # both rounds' scorer errors
    assert all(informative(batch))
    assert figures == {"dynamic_sampling/dropped_groups": 3, "dynamic_sampling/redrawn_prompts": 3}


def test_a_batch_short_after_the_last_round_is_topped_up_with_flat_groups():
    rounds = [scripted_round("a", [False, False]), scripted_round("b", [False, True])]
    batch, figures = fill_batch(lambda r: rounds[r], want=2, max_rounds=1, m=1)
    assert [p.id for p in batch.problems] == ["a0", "b1"]  # the first flat group drawn, then the one with spread
    assert figures == {"dynamic_sampling/dropped_groups": 2, "dynamic_sampling/redrawn_prompts": 2}
    only_first, figures = fill_batch(lambda r: rounds[r], want=2, max_rounds=0, m=1)
    assert [p.id for p in only_first.problems] == ["a0", "a1"]  # no extra round: today's batch
    assert figures == {"dynamic_sampling/dropped_groups": 0, "dynamic_sampling/redrawn_prompts": 0}


def test_refills_skip_the_steps_problems_and_depend_only_on_seed_and_step():
    problems = [Problem(id=str(i), prompt="") for i in range(6)]
    first = [p.id for p, _ in zip(refill_problems(problems, 0, 3, problems[:2]), range(4), strict=False)]
    assert sorted(first) == ["2", "3", "4", "5"]
    again = [p.id for p, _ in zip(refill_problems(problems, 0, 3, problems[:2]), range(4), strict=False)]
    assert again == first  # a resumed run draws the same
    more = [p.id for p, _ in zip(refill_problems(problems, 0, 3, problems[:2]), range(10), strict=False)]
    assert len(more) == 10  # once every problem is used, they repeat rather than stop


def half_flat(messages, sample_index, seed):
    """FakeTask answers: a problem whose i is even gets the same (wrong) answer in every rollout, a flat group;
    an odd one is right in rollout 0 only."""
    i = int(re.search(r"What is (\d+)\+", messages[-1]["content"]).group(1))
    if i % 2 == 0 or sample_index:
        return "It is 1"
    return f"It is {2 * i}"


@pytest.mark.parametrize("dynamic", [True, False])
def test_no_flat_group_reaches_the_update(tiny_policy, plugins, tmp_path, dynamic):
    task = FakeTask(size=8)
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=2,
        prompts_per_step=2,
        group_size=4,
        max_new_tokens=6,
        dynamic_sampling=dynamic,
        max_resample_rounds=3,
    )
    updated = []

    def update_batch(model, tok, trained, optimizer, reference, engine, completions, advantages):
        updated.append(advantages.view(-1, 4))
        return GRPOTrainer.update_batch(
            trainer, model, tok, trained, optimizer, reference, engine, completions, advantages
        )

    trainer.update_batch = update_batch
    store = RunStore(tmp_path, "run")
    trainer.train(tiny_policy, SmallVocabEngine(tiny_policy, half_flat), task, task.problems("train"), store=store)
    steps = [json.loads(line) for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    flat = [bool((a.abs().amax(dim=1) < 1e-6).any()) for a in updated]
    assert len(updated) == 2 and all(a.shape == (2, 4) for a in updated)  # the step's size is kept
    if dynamic:
        assert not any(flat)
        assert all(s["zero_std_groups"] == 0.0 for s in steps)
        assert sum(s["dynamic_sampling/dropped_groups"] for s in steps) > 0
        assert all(s["dynamic_sampling/redrawn_prompts"] % 2 == 0 for s in steps)
        samples = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
        assert all(int(s["problem_id"].split("-")[1]) % 2 == 1 for s in samples)  # only the odd problems trained
    else:
        assert any(flat)  # this seed's steps draw an even problem: the check above is not vacuous
        assert "dynamic_sampling/dropped_groups" not in steps[0]
