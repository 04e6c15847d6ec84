"""Reference-model sync (trainers/ref_sync.py): the mixup formula by hand, and in a training run the reference ends
as alpha * policy + (1 - alpha) * initial policy after its sync step, and stays the initial policy without sync."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import harness.trainers.grpo as grpo_module
from harness.engine.transformers_engine import TransformersEngine
from harness.store.run_folder import RunStore
from harness.testing import UppercaseTask
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.ref_sync import mix_into, sync_due


def test_the_mixup_hand_computed():
    policy, reference = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    with torch.no_grad():
        policy.weight.copy_(torch.tensor([[1.0, 2.0]]))
        policy.bias.fill_(4.0)
        reference.weight.copy_(torch.tensor([[3.0, -2.0]]))
        reference.bias.fill_(0.0)
    mix_into(reference, policy, 0.25)
    assert reference.weight.tolist() == [[0.25 * 1 + 0.75 * 3, 0.25 * 2 + 0.75 * -2]]
    assert reference.bias.tolist() == [1.0]
    assert policy.weight.tolist() == [[1.0, 2.0]]  # the policy is untouched
    assert [s for s in range(10) if sync_due(s, 4)] == [3, 7]


@pytest.mark.parametrize("sync", [True, False])
def test_training_moves_the_reference_by_the_formula(tiny_policy, plugins, tmp_path, monkeypatch, sync):
    references = []

    def keep(model):  # the trainer's frozen copy, kept for the test to read after training
        references.append(frozen(model))
        return references[-1]

    frozen = grpo_module._frozen_copy
    monkeypatch.setattr(grpo_module, "_frozen_copy", keep)
    initial = copy.deepcopy(tiny_policy.model)
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=2,
        prompts_per_step=1,
        group_size=4,
        max_new_tokens=6,
        lr=1e-2,
        beta=0.1,
        sync_ref_model=sync,
        ref_model_sync_steps=2,
        ref_model_mixup_alpha=0.3,
    )
    store = RunStore(tmp_path, "run")
    task = UppercaseTask()
    trainer.train(
        tiny_policy, TransformersEngine(tiny_policy, progress=False), task, task.problems("train"), store=store
    )
    (reference,) = references
    steps = [json.loads(line) for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    assert all(s["grad_norm"] > 0 for s in steps)  # the policy moved, so a mix is told from either end
    for ref, start, end in zip(
        reference.parameters(), initial.parameters(), tiny_policy.model.parameters(), strict=True
    ):
        expected = 0.3 * end + 0.7 * start if sync else start
        assert torch.allclose(ref, expected, atol=1e-6)
    assert [s.get("ref_synced") for s in steps] == ([0.0, 1.0] if sync else [None, None])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"beta": 0.0}, "needs beta > 0"),
        ({"lora_r": 4}, "needs full fine-tuning"),
        ({"ref_model_mixup_alpha": 0.0}, "ref_model_mixup_alpha must be in"),
        ({"ref_model_sync_steps": 11}, "more would never sync"),
    ],
)
def test_the_options_are_checked(plugins, options, message):
    with pytest.raises(ValueError, match=message):
        GRPOTrainer(plugins=plugins, sync_ref_model=True, **{"beta": 0.04, "steps": 10, **options})
