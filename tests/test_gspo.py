"""GSPO's sequence-level importance ratio (importance_sampling_level="sequence") against hand-computed values, and
through GRPOTrainer.update on the tiny model. TRL's own loss is compared in tests/test_trl_agreement.py ("gspo")."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.testing import UppercaseTask
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.losses import aggregate, clipped_surrogate, log_importance_ratio
from harness.trainers.policy_gradient import pad_completions, sequence_logprobs
from harness.types import SamplingParams

# two completions: 3 real tokens (log-ratios 0.1, 0.3, -0.1: mean 0.1) and 2 (0.5, 0.5: mean 0.5); padding after
LOGP = torch.tensor([[0.1, 0.3, -0.1, 7.0], [0.5, 0.5, -9.0, 3.0]])
OLD = torch.zeros(2, 4)
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])


def test_the_sequence_ratio_is_the_exp_of_the_mean_log_ratio():
    seq = torch.exp(log_importance_ratio(LOGP, OLD, MASK, "sequence"))
    assert torch.allclose(seq[0], torch.full((4,), math.exp(0.1)))  # padding never enters the mean
    assert torch.allclose(seq[1], torch.full((4,), math.exp(0.5)))
    token = torch.exp(log_importance_ratio(LOGP, OLD, MASK, "token"))
    assert not torch.allclose(token[0, :3], seq[0, :3])
    with pytest.raises(ValueError, match="completion mask"):
        log_importance_ratio(LOGP, OLD, None, "sequence")
    with pytest.raises(ValueError, match="importance_sampling_level"):
        log_importance_ratio(LOGP, OLD, MASK, "word")


def test_the_sequence_ratio_is_clipped_per_completion():
    adv = torch.tensor([1.0, 1.0])
    loss, clipped = clipped_surrogate(LOGP, OLD, adv, 0.2, 0.2, MASK, "sequence")
    # row 0: e^0.1 = 1.105 inside [0.8, 1.2] -> -1.105 on every token; row 1: e^0.5 clipped to 1.2
    assert torch.allclose(loss[0, :3], torch.full((3,), -math.exp(0.1)), atol=1e-6)
    assert torch.allclose(loss[1, :2], torch.full((2,), -1.2), atol=1e-6)
    assert clipped[0, :3].tolist() == [False] * 3 and clipped[1, :2].tolist() == [True] * 2
    # token level clips row 0's middle token alone (e^0.3 = 1.35) and keeps the others' own ratios
    token_loss, token_clipped = clipped_surrogate(LOGP, OLD, adv, 0.2, 0.2, MASK, "token")
    assert torch.allclose(token_loss[0, :3], torch.tensor([-math.exp(0.1), -1.2, -math.exp(-0.1)]), atol=1e-6)
    assert token_clipped[0, :3].tolist() == [False, True, False]


def test_the_sequence_gradient_is_the_ratio_times_the_mean_score():
    """GSPO's gradient: s_i A_i / |y_i| on every token of completion i (the sequence ratio's derivative), where the
    token ratio gives each token its own r_t A_i / |y_i|."""
    logp = LOGP[:1].clone().requires_grad_(True)
    loss, _ = clipped_surrogate(logp, OLD[:1], torch.tensor([2.0]), 0.5, 0.5, MASK[:1], "sequence")
    aggregate(loss, MASK[:1], "sequence", max_len=4).backward()
    expected = -2.0 * math.exp(0.1) / 3
    assert torch.allclose(logp.grad[0], torch.tensor([expected] * 3 + [0.0]), atol=1e-6)


def test_update_uses_the_sequence_ratio(tiny_policy, plugins):
    """Old log-probs moved off the policy's: the update's ratio_mean is the hand-computed mean, over tokens, of each
    completion's exp(mean log-ratio), and not the token-level one."""
    task = UppercaseTask()
    engine = TransformersEngine(tiny_policy, progress=False)
    completions = engine.generate(
        [task.messages(p) for p in task.problems("train")[:2]],
        SamplingParams(n=4, max_new_tokens=6, temperature=1.0, seed=3),
    )
    generator = torch.Generator().manual_seed(0)
    completions = [
        replace(c, logprobs=[x + 0.4 * float(torch.randn((), generator=generator)) for x in c.logprobs])
        for c in completions
    ]
    batch = pad_completions(completions, tiny_policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp = sequence_logprobs(
            tiny_policy.model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"])
        )
    mask = batch["completion_mask"].float()
    log_ratio = (logp - batch["old_logp"]) * mask
    per_row = torch.exp(log_ratio.sum(-1) / mask.sum(-1))
    seq_mean = float((per_row * mask.sum(-1)).sum() / mask.sum())
    token_mean = float((torch.exp(log_ratio) * mask).sum() / mask.sum())
    assert abs(seq_mean - token_mean) > 1e-3

    advantages = torch.linspace(-1, 1, len(completions))

    def ratio_mean(level: str) -> float:
        trainer = GRPOTrainer(plugins=plugins, max_new_tokens=6, importance_sampling_level=level)
        optimizer = torch.optim.SGD(tiny_policy.model.parameters(), lr=0.0)  # the weights stay: both see one policy
        return trainer.update(tiny_policy.model, tiny_policy.tokenizer, optimizer, None, completions, advantages)[
            "ratio_mean"
        ]

    assert ratio_mean("sequence") == pytest.approx(seq_mean, rel=1e-4)
    assert ratio_mean("token") == pytest.approx(token_mean, rel=1e-4)


def test_an_unknown_level_is_refused(plugins):
    with pytest.raises(ValueError, match="importance_sampling_level must be one of token, sequence"):
        GRPOTrainer(plugins=plugins, importance_sampling_level="word")
