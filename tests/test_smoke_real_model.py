"""A few tests on the real default model (SmolLM2-135M-Instruct): minutes, not seconds, so marked slow."""

from __future__ import annotations

import json

import pytest
import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.run import RunConfig, run
from harness.store.run_folder import RunStore
from harness.testing import BrevityTask
from harness.trainers.grpo import GRPOTrainer
from harness.types import SamplingParams

pytestmark = pytest.mark.slow
MAX_TOKENS = 40


def test_default_model_answers_greedily(smollm2_policy_loader):
    policy = smollm2_policy_loader()
    engine = TransformersEngine(policy, progress=False)
    (completion,) = engine.generate(
        [[{"role": "user", "content": "What is 3 + 4?"}]], SamplingParams(n=1, max_new_tokens=24, temperature=0)
    )
    assert completion.text.startswith("3 + 4 = 7")


def test_grpo_raises_a_learnable_reward_on_the_real_model(smollm2_policy_loader, plugins, tmp_path):
    policy = smollm2_policy_loader()
    torch.set_num_threads(max(torch.get_num_threads(), 2))
    engine = TransformersEngine(policy, progress=False)
    task = BrevityTask(policy.tokenizer)

    def mean_length():
        completions = engine.generate(
            [task.messages(p) for p in task.problems("eval")], SamplingParams(n=4, max_new_tokens=MAX_TOKENS, seed=99)
        )
        return sum(len(c.token_ids) for c in completions) / len(completions)

    before_params = [p.detach().clone() for p in policy.model.parameters()]
    before_length = mean_length()
    store = RunStore(tmp_path, "run")
    GRPOTrainer(plugins=plugins, steps=5, prompts_per_step=2, group_size=8, max_new_tokens=MAX_TOKENS, lr=5e-5).train(
        policy, engine, task, task.problems("train"), store=store
    )
    rewards = json.loads((store.dir / "metrics.json").read_text())["train/reward_mean"]
    assert len(rewards) == 5
    assert sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.2, rewards
    assert mean_length() < before_length * 0.7
    assert any(not torch.equal(a, b) for a, b in zip(before_params, policy.model.parameters(), strict=True))


def test_harness_run_on_the_real_model(plugins, tmp_path):
    folder = run(
        RunConfig(
            model="smollm2-135m",
            steps=1,
            limit=2,
            k="1,2",
            out=str(tmp_path),
            options={
                "task": {},
                "trainer": {"group_size": 4, "max_new_tokens": 32},
                "searcher": {"n": 2, "max_new_tokens": 32},
            },
        ),
        plugins=plugins,
        echo=lambda _: None,
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["model"]["parameters"] > 100_000_000
    metrics = json.loads((folder / "metrics.json").read_text())
    assert 0.0 <= metrics["after/pass@2"] <= 1.0 and metrics["before/num_candidates"] == 4
