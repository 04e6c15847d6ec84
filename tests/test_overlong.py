"""DAPO's overlong handling (trainers/overlong.py): a truncated rollout gives no gradient under mask_truncated, and
the soft overlong penalty enters the reward before the advantages."""

from __future__ import annotations

import json

import pytest
import torch
from small_vocab_engine import SmallVocabEngine

from harness.store.run_folder import RunStore
from harness.testing import UppercaseTask
from harness.trainers.advantages import group_relative
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.overlong import loss_tokens, overlong_penalty, trained_rows
from harness.types import Completion, Problem, SamplingParams


def test_the_penalty_hand_computed():
    # DAPO's R_length with L_max 100, L_cache 20: free up to 80, then linear to -1 at 100
    assert [overlong_penalty(n, 100, 20) for n in (10, 80, 81, 90, 100)] == [0.0, 0.0, -0.05, -0.5, -1.0]
    assert overlong_penalty(120, 100, 20) == -1.0  # never below -1
    assert overlong_penalty(6, 6, 6) == -1.0 and overlong_penalty(0, 6, 6) == 0.0


def test_masked_rows_and_tokens(tiny_policy):
    engine = SmallVocabEngine(tiny_policy, ["a b", "a b c d e f g h", "a b c"])
    completions = engine.generate([[{"role": "user", "content": "hi"}]], SamplingParams(n=3, max_new_tokens=6))
    assert [c.finished for c in completions] == [True, False, True]
    assert trained_rows(completions, True).tolist() == [1.0, 0.0, 1.0]
    assert trained_rows(completions, False).tolist() == [1.0, 1.0, 1.0]
    assert (loss_tokens(completions, True), loss_tokens(completions, False)) == (2 + 3, 2 + 6 + 3)


@pytest.mark.parametrize("norm", ["sequence", "token"])
def test_a_truncated_rollout_gives_no_gradient(tiny_policy, plugins, norm):
    """Under mask_truncated the gradient does not depend on a truncated rollout's advantage; without it, it does."""
    engine = SmallVocabEngine(tiny_policy, ["a b", "a b c d e f g h", "q r s", "u v w x y z m n"])
    completions = engine.generate(
        [[{"role": "user", "content": "hi"}]], SamplingParams(n=4, max_new_tokens=6, temperature=1.0)
    )
    assert [c.finished for c in completions] == [True, False, True, False]

    def gradient(mask_truncated: bool, advantages: list[float]) -> torch.Tensor:
        trainer = GRPOTrainer(
            plugins=plugins, max_new_tokens=6, loss_norm=norm, mask_truncated=mask_truncated, max_grad_norm=1e9
        )
        model = tiny_policy.model
        trainer.update(
            model,
            tiny_policy.tokenizer,
            torch.optim.SGD(model.parameters(), lr=0.0),
            None,
            completions,
            torch.tensor(advantages),
        )
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    base = [1.0, 0.5, -1.0, -0.5]
    other = [1.0, -3.0, -1.0, 2.0]  # only the truncated rows' advantages differ
    masked = gradient(True, base)
    assert masked.norm() > 0  # the finished rows still train
    assert torch.allclose(masked, gradient(True, other), atol=1e-7)
    assert not torch.allclose(gradient(False, base), gradient(False, other), atol=1e-5)


def test_the_penalty_enters_the_reward_before_the_advantages(tiny_policy, plugins, tmp_path):
    """Every rollout earns the task the same reward (all lower case), so without the penalty no group varies; with
    it, the longer rollouts get lower advantages, by the hand-computed penalties."""
    responses = ["aa aa", "aa aa aa aa", "aa aa aa aa aa aa", "aa aa aa aa aa aa aa aa"]  # 2, 4, 6, 8 -> cut at 6
    task = UppercaseTask()

    def train(penalty: float) -> list[dict]:
        store = RunStore(tmp_path, f"run-{penalty}")
        trainer = GRPOTrainer(
            plugins=plugins,
            steps=1,
            prompts_per_step=1,
            group_size=4,
            max_new_tokens=6,
            overlong_penalty=penalty,
            overlong_buffer=4,
        )
        trainer.train(tiny_policy, SmallVocabEngine(tiny_policy, responses), task, task.problems("train"), store=store)
        return [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]

    without = train(0.0)
    assert all(s["advantage"] == 0.0 and "overlong" not in s["rewards"] for s in without)
    samples = train(0.5)
    penalties = [0.0, -0.5, -1.0, -1.0]  # free up to 6 - 4 = 2 tokens, then -1/4 a token
    assert [s["rewards"]["overlong"] for s in samples] == penalties
    expected = group_relative(0.5 * torch.tensor(penalties), torch.zeros(4, dtype=torch.long))
    assert torch.allclose(torch.tensor([s["advantage"] for s in samples]), expected, atol=1e-6)


def test_the_options_are_checked(plugins):
    with pytest.raises(ValueError, match="overlong_buffer <= max_new_tokens"):
        GRPOTrainer(plugins=plugins, overlong_penalty=1.0)  # no buffer
    with pytest.raises(ValueError, match="overlong_buffer <= max_new_tokens"):
        GRPOTrainer(plugins=plugins, overlong_penalty=1.0, overlong_buffer=200, max_new_tokens=100)
    with pytest.raises(ValueError, match="overlong_penalty must be >= 0"):
        GRPOTrainer(plugins=plugins, overlong_penalty=-1.0, overlong_buffer=4)


@pytest.mark.parametrize(("name", "options"), [("vpo", {}), ("vspo", {"behaviour": "conciseness"})])
def test_the_penalty_reaches_the_subclasses_shaping(plugins, name, options):
    """VPO and VSPO keep GRPO's loop; VSPO's own shaping() replaces GRPO's, and its shaping_value() still hands
    the overlong component on: 6 tokens of an 8-token budget with a 4-token buffer is -0.5, whatever the answer."""
    trainer = (
        plugins["trainer"]
        .get(name)
        .load()(plugins=plugins, max_new_tokens=8, overlong_penalty=2.0, overlong_buffer=4, **options)
    )
    completion = Completion(
        prompt_index=0, sample_index=0, prompt_ids=[1], token_ids=[5] * 6, logprobs=[0.0] * 6, text="x", finished=True
    )
    assert trainer.shaping_value("overlong", Problem(id="p", prompt="q"), completion, "x") == -0.5
