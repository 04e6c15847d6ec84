"""The VPO trainer on the tiny model: warm-up, multi-answer rollouts, set-level advantages, and its evaluation."""

from __future__ import annotations

import json

import torch
from tiny_runs import OWN_SIZES, tiny_config

from harness.engine.transformers_engine import TransformersEngine
from harness.run import run
from harness.scoring.multi_answer import DELIMITER
from harness.store.run_folder import RunStore
from harness.testing import UppercaseTask
from harness.trainers.vpo import VPOTrainer


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_vpo_warms_up_then_trains_on_answer_sets(tiny_policy, plugins, tmp_path):
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    trainer = VPOTrainer(
        plugins=plugins,
        steps=2,
        prompts_per_step=2,
        group_size=3,
        answers_per_rollout=2,
        max_new_tokens=12,
        lr=1e-3,
        warmup_steps=1,
        warmup_samples=2,
    )
    assert trainer.config.advantage == "vpo"
    store = RunStore(tmp_path, "run")
    task = UppercaseTask()
    trainer.train(
        tiny_policy, TransformersEngine(tiny_policy, progress=False), task, task.problems("train"), store=store
    )
    assert any(not torch.equal(before[k], v) for k, v in tiny_policy.model.state_dict().items())
    steps = _lines(store.dir / "steps.jsonl")
    assert [s["stage"] for s in steps] == ["warmup", "train", "train"]
    metrics = json.loads((store.dir / "metrics.json").read_text())
    assert len(metrics["warmup/loss"]) == 1 and len(metrics["train/loss"]) == 2  # stages never mix
    assert 0.0 <= metrics["train/malformed_rate"][0] <= 1.0 and "train/set_best_mean" in metrics
    train_samples = [s for s in _lines(store.dir / "samples.jsonl") if s["phase"] == "train"]
    assert {s["answer_index"] for s in train_samples} <= {0, 1}
    assert all(DELIMITER not in s["text"] for s in train_samples)  # one record per answer, not per rollout


def test_a_vpo_run_evaluates_candidates_in_its_own_format(tmp_path, plugins, tiny_policy_spec):
    folder = run(
        tiny_config(
            "vpo",
            k="1,4",
            out=str(tmp_path),
            sets={  # VPO's own budgets, behind the evaluation's asserted below
                **OWN_SIZES,
                "trainer.group_size": 2,
                "trainer.warmup_steps": 1,
                "trainer.warmup_samples": 4,
                "searcher.n": 4,
                "searcher.embedding_diversity": "false",
            },
        ),
        plugins=plugins,
        echo=lambda _: None,
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    searcher = manifest["resolved_options"]["searcher"]
    assert searcher["answers_per_rollout"] == 4  # the trainer's M, passed to the evaluation
    assert searcher["max_new_tokens"] == 96 * 4 + 16 * 3  # per-answer budget x M, plus delimiter room
    metrics = json.loads((folder / "metrics.json").read_text())
    for phase in ("before", "after"):
        assert metrics[f"{phase}/budget/candidates"] == 2 * 4
        assert metrics[f"{phase}/budget/rollouts"] == 2 * 1  # ceil(n / M) rollouts per problem
        assert f"{phase}/diversity/distinct_1" in metrics
