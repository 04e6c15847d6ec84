"""The memory plan (harness/runner/memory_plan.py, `harness memory`): parameter and LoRA counts from the architecture
against the real model's and peft's, each part against a hand computation, and one-line errors. Its agreement with
measured peaks is a bench (bench/memory_plan_check.py), not a test."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.runner.memory_plan import GIB, TrainingShape, model_config, model_shape, plan


def test_counts_come_from_the_architecture_and_match_the_model_and_peft(tiny_policy, plugins):
    from harness.trainers.post_training import PostTrainingOptions, prepare_policy

    shape = model_shape(model_config("tiny-random", plugins["model"]))
    assert shape["params"] == sum(p.numel() for p in tiny_policy.model.parameters())
    # per layer (in + out): q 64+64, k 64+32, v 64+32, o 64+64, gate 64+128, up 64+128, down 128+64 = 1024; 2 layers
    assert shape["lora_per_rank"] == 2048
    prepare_policy(tiny_policy, PostTrainingOptions(lora_r=4, lora_alpha=8))
    assert sum(p.numel() for p in tiny_policy.model.parameters() if p.requires_grad) == 4 * 2048


def test_each_part_by_hand():
    shape = {"params": 1000, "hidden": 10, "mlp": 20, "layers": 2, "vocab": 100, "lora_per_rank": 50}
    full = plan(shape, TrainingShape(micro_batch=2, prompt_tokens=3, completion_tokens=5))
    assert (full["weights"], full["gradients"], full["optimizer"], full["reference"]) == (4000, 4000, 8000, 0)
    # layers: 2 rows x 8 tokens x (20 x 10 + 6 x 20) x 2 layers x 4 bytes; logits: 2 x 100 x (3.5 x 4 x 5 + 4 x 3)
    assert full["activations"] == 16 * 320 * 2 * 4 + 2 * 100 * (3.5 * 4 * 5 + 4 * 3)
    assert full["peak"] == 16000 + full["activations"]
    lora = plan(
        shape,
        TrainingShape(
            dtype="bfloat16",
            lora_r=4,
            beta=0.1,
            gradient_checkpointing=True,
            micro_batch=2,
            prompt_tokens=3,
            completion_tokens=5,
            vllm_share=0.5,
            gpu_gib=2,
        ),
    )
    assert lora["trained_parameters"] == 200 and (lora["gradients"], lora["optimizer"]) == (400, 800)
    assert lora["reference"] == 0  # LoRA's reference is the adapters switched off
    # checkpointed: one hidden width per layer in bf16, plus one layer in full
    assert lora["activations"] == 16 * 10 * 2 * 2 + 16 * 320 * 2 + 2 * 100 * (3.5 * 4 * 5 + 2 * 3)
    assert lora["vllm"] == GIB
    kl = plan(shape, TrainingShape(autocast="bfloat16", beta=0.1, micro_batch=2, prompt_tokens=3, completion_tokens=5))
    assert kl["reference"] == 4000 and kl["activations"] == 16 * 320 * 2 * 2 + 2 * 100 * (3.5 * 4 * 5 + 2 * 3) + 2000
    # sharded over 4: the plain policy whole, a quarter of the trained copy, its gradients and moments, one of the
    # two layers' weights gathered in its forward
    sharded = plan(shape, TrainingShape(shards=4, micro_batch=2, prompt_tokens=3, completion_tokens=5))
    assert (sharded["weights"], sharded["gradients"], sharded["optimizer"]) == (4000 + 1000 + 2000, 1000, 2000)
    assert sharded["activations"] == full["activations"]


def test_the_command_prints_each_part_and_refuses_what_it_cannot_plan(capsys):
    assert (
        main(
            [
                "memory",
                "--model",
                "Qwen/Qwen2.5-7B-Instruct",
                "--dtype",
                "bfloat16",
                "--lora-r",
                "16",
                "--gradient-checkpointing",
                "--micro-batch",
                "4",
                "--vllm-share",
                "0.3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "7.62B parameters" in out and "vllm            24.00 GiB" in out and "reference" not in out
    assert main(["memory", "--model", "nobody/nothing"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no config for model 'nobody/nothing'" in line
    with pytest.raises(SystemExit):
        main(["memory", "--lora-r", "x"])
