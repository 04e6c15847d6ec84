"""The rollout engine on the tiny random Llama: exact log-probs, left padding, seeds, budgets."""

from __future__ import annotations

import torch

from harness.engine import TransformersEngine
from harness.types import SamplingParams
from trainers.policy_gradient import pad_completions, sequence_logprobs

SHORT = [{"role": "user", "content": "Hi"}]
LONG = [{"role": "user", "content": "Please write a long and detailed story about a dragon who learns maths."}]


def _engine(policy):
    return TransformersEngine(policy, progress=False)


def test_logprobs_match_a_plain_forward_pass(tiny_policy):
    engine = _engine(tiny_policy)
    for temperature in (1.0, 0.7):
        completions = engine.generate([SHORT, LONG], SamplingParams(n=3, max_new_tokens=12, temperature=temperature,
                                                                   seed=1))
        assert [(c.prompt_index, c.sample_index) for c in completions] == [(p, s) for p in range(2) for s in range(3)]
        batch = pad_completions(completions, tiny_policy.tokenizer.pad_token_id)
        with torch.no_grad():
            logp = sequence_logprobs(tiny_policy.model, batch["input_ids"], batch["attention_mask"],
                                     int(batch["prompt_width"]), temperature)
        mask = batch["completion_mask"].bool()
        assert torch.allclose(logp[mask], batch["old_logp"][mask], atol=2e-4), temperature


def test_left_padding_does_not_change_a_prompt_s_completion(tiny_policy):
    engine = _engine(tiny_policy)
    greedy = SamplingParams(n=1, max_new_tokens=10, temperature=0)
    alone = engine.generate([SHORT], greedy)[0]
    batched = engine.generate([LONG, SHORT], greedy)[1]
    assert batched.prompt_index == 1
    assert batched.token_ids == alone.token_ids
    assert torch.allclose(torch.tensor(batched.logprobs), torch.tensor(alone.logprobs), atol=1e-4)


def test_seeded_sampling_is_deterministic_and_batch_invariant(tiny_policy):
    engine = _engine(tiny_policy)
    params = SamplingParams(n=4, max_new_tokens=8, temperature=1.0, seed=7)
    first = engine.generate([SHORT, LONG], params)
    again = engine.generate([SHORT, LONG], params)
    assert [c.token_ids for c in first] == [c.token_ids for c in again]
    alone = engine.generate([LONG], params)  # same prompt, different batch: same random stream per sample
    assert [c.token_ids for c in alone] == [c.token_ids for c in first[4:]]
    other = engine.generate([SHORT, LONG], SamplingParams(n=4, max_new_tokens=8, temperature=1.0, seed=8))
    assert [c.token_ids for c in other] != [c.token_ids for c in first]
    assert len({tuple(c.token_ids) for c in first[:4]}) > 1  # the n samples of one prompt differ


def test_budget_and_finished_flags(tiny_policy):
    engine = _engine(tiny_policy)
    eos = tiny_policy.tokenizer.eos_token_id
    completions = engine.generate([SHORT, LONG], SamplingParams(n=2, max_new_tokens=5, temperature=1.0))
    for c in completions:
        assert 1 <= len(c.token_ids) <= 5 and len(c.logprobs) == len(c.token_ids)
        assert c.finished == (c.token_ids[-1] == eos)
        assert all(lp <= 0 for lp in c.logprobs)
        assert c.text == tiny_policy.tokenizer.decode(c.token_ids, skip_special_tokens=True)


def test_top_k_one_is_greedy(tiny_policy):
    engine = _engine(tiny_policy)
    greedy = engine.generate([LONG], SamplingParams(n=1, max_new_tokens=6, temperature=0))[0]
    top1 = engine.generate([LONG], SamplingParams(n=2, max_new_tokens=6, temperature=1.0, top_k=1, seed=3))
    assert all(c.token_ids == greedy.token_ids for c in top1)
