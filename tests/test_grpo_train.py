"""GRPO on the tiny random model: parameters change, and a learnable reward rises."""

from __future__ import annotations

import json

import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.store.run_folder import RunStore
from harness.testing import FakeTask, UppercaseTask
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.policy_gradient import pad_completions, sequence_logprobs
from harness.types import SamplingParams


def test_grpo_changes_parameters(tiny_policy, plugins, tmp_path):
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    engine = TransformersEngine(tiny_policy, progress=False)
    trainer = GRPOTrainer(
        plugins=plugins, steps=2, prompts_per_step=2, group_size=4, max_new_tokens=8, lr=1e-3, beta=0.04
    )
    store = RunStore(tmp_path, "run")
    trainer.train(tiny_policy, engine, UppercaseTask(), UppercaseTask().problems("train"), store=store)
    changed = [k for k, v in tiny_policy.model.state_dict().items() if not torch.equal(before[k], v)]
    assert len(changed) == len(before), "every parameter tensor should receive a gradient step"
    steps = [json.loads(line) for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [0, 1]
    assert all(s["grad_norm"] > 0 for s in steps)
    samples = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * 2 * 4  # every training rollout is kept
    prompts = {p.id: p.prompt for p in UppercaseTask().problems("train")}
    # each row carries its question and reference (UppercaseTask has none: None), so it can be judged on its own
    assert all(s["prompt"] == prompts[s["problem_id"]] and s["reference"] is None for s in samples)


def test_an_update_moves_probability_towards_positive_advantages(tiny_policy, plugins):
    """On the tiny model a reward rises too slowly to test cheaply (49k-token vocabulary, random weights), so test
    the direction of one update instead: sequences with A > 0 gain log-probability relative to those with A < 0.
    The real-model test in test_smoke_real_model.py checks that a reward rises over steps."""
    task = UppercaseTask()
    engine = TransformersEngine(tiny_policy, progress=False)
    completions = engine.generate(
        [task.messages(p) for p in task.problems("train")],
        SamplingParams(n=8, max_new_tokens=8, temperature=1.0, seed=5),
    )
    rewards = torch.tensor([[[task.score(None, c.text).rewards["upper"]]] for c in completions])
    groups = torch.tensor([c.prompt_index for c in completions])
    trainer = GRPOTrainer(plugins=plugins, lr=1e-3, max_new_tokens=8)
    advantages = trainer.estimator(rewards, groups, torch.tensor([1.0]))
    assert (advantages > 0).any() and (advantages < 0).any()

    def sequence_logp():
        batch = pad_completions(completions, tiny_policy.tokenizer.pad_token_id)
        with torch.no_grad():
            logp = sequence_logprobs(
                tiny_policy.model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"])
            )
        return (logp * batch["completion_mask"]).sum(-1)

    before = sequence_logp()
    optimizer = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-3)
    stats = trainer.update(tiny_policy.model, tiny_policy.tokenizer, optimizer, None, completions, advantages)
    assert abs(stats["ratio_mean"] - 1.0) < 1e-3  # engine log-probs are the policy's: the first ratio is 1
    delta = sequence_logp() - before
    assert delta[advantages > 0].mean() > delta[advantages < 0].mean() + 0.05


def test_zero_variance_groups_give_no_update(tiny_policy, plugins, tmp_path):
    """A reward the model never earns (SmolLM2-135M and a boxed-only reward) yields zero advantages and leaves the
    model as it was."""
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    engine = TransformersEngine(tiny_policy, progress=False)
    trainer = GRPOTrainer(plugins=plugins, steps=1, prompts_per_step=2, group_size=4, max_new_tokens=6, lr=1e-2)
    store = RunStore(tmp_path, "run")
    task = FakeTask()
    trainer.train(tiny_policy, engine, task, task.problems("train"), store=store)
    step = json.loads((store.dir / "steps.jsonl").read_text())
    assert step["zero_std_groups"] == 1.0 and step["grad_norm"] == 0.0
    samples = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
    answers = {p.id: (p.prompt, p.answer) for p in task.problems("train")}
    assert samples and all((s["prompt"], s["reference"]) == answers[s["problem_id"]] for s in samples)
    assert all(s["reference"] is not None for s in samples)
    assert all(torch.equal(before[k], v) for k, v in tiny_policy.model.state_dict().items())


def test_micro_batches_with_zero_advantages_are_skipped_to_the_bit(tiny_policy, plugins, monkeypatch):
    """With beta 0 an update skips the forward and backward of micro-batches whose rows all have advantage 0 (they
    add nothing to the loss or its gradient), and the weights come out bit for bit as an update that runs them
    leaves them, over two steps (the second with every row at 0, where AdamW's momentum still moves the weights)."""
    import harness.trainers.grpo as grpo

    task = UppercaseTask()
    engine = TransformersEngine(tiny_policy, progress=False)
    completions = engine.generate(
        [task.messages(p) for p in task.problems("train")[:2]],
        SamplingParams(n=4, max_new_tokens=8, temperature=1.0, seed=3),
    )
    first = torch.tensor([0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0])  # micro-batches of 2: the last two are all 0
    initial = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}

    def two_updates():
        tiny_policy.model.load_state_dict(initial)
        trainer = GRPOTrainer(plugins=plugins, lr=1e-3, max_new_tokens=8, micro_batch=2)
        optimizer = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-3, weight_decay=0.01)
        tok = tiny_policy.tokenizer
        stats = [trainer.update(tiny_policy.model, tok, optimizer, None, completions, a) for a in (first, first * 0)]
        return stats, {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}

    stats, skipping = two_updates()
    assert [s["zero_advantage_rows_skipped"] for s in stats] == [0.5, 1.0]
    assert abs(stats[0]["ratio_mean"] - 1.0) < 1e-3 and stats[1]["ratio_mean"] == 1.0
    monkeypatch.setattr(grpo, "needs_backward", lambda advantages, skippable: True)
    full_stats, every_row = two_updates()
    assert [s["zero_advantage_rows_skipped"] for s in full_stats] == [0.0, 0.0]
    assert stats[0]["loss"] == full_stats[0]["loss"] and stats[0]["grad_norm"] == full_stats[0]["grad_norm"]
    assert [k for k in initial if not torch.equal(initial[k], skipping[k])], "the update should change the weights"
    assert all(torch.equal(skipping[k], every_row[k]) for k in initial)
