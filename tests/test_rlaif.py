"""RLAIF: the teacher-as-judge (probability-weighted rating) and the trainer that adds it to GRPO's reward."""

from __future__ import annotations

import json
import re

import pytest
import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.store.run_folder import RunStore
from harness.tasks.behaviours import CONCISENESS
from harness.teacher.judge import JUDGE_TEMPLATE, Judge
from harness.testing import UppercaseTask
from harness.trainers.rlaif import RLAIFTrainer


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_judge_score_is_the_expected_rating_of_an_unpadded_forward(tiny_policy):
    judge = Judge(tiny_policy, CONCISENESS, batch_size=2)
    questions = ["What is 2 + 2?", "Name a colour.", "Why is the sky blue? Explain."]
    answers = ["4", "Red, I think, or maybe blue, it depends on what you mean by a colour really.", ""]
    scores = judge.score(questions, answers)  # two batches, padded differently from the reference below

    tok = tiny_policy.tokenizer
    digits = [tok(d, add_special_tokens=False)["input_ids"][0] for d in "12345"]
    for q, a, got in zip(questions, answers, scores, strict=True):
        text = JUDGE_TEMPLATE.format(question=q, answer=a or "(empty)", criterion=CONCISENESS.judge_question)
        ids = TransformersEngine(tiny_policy, progress=False).encode([{"role": "user", "content": text}])
        with torch.no_grad():
            logits = tiny_policy.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        p = torch.softmax(logits[digits], dim=-1)
        expected = (float(p @ torch.arange(1.0, 6.0)) - 1) / 4  # hand-rolled E[rating], rescaled to [0, 1]
        assert got == pytest.approx(expected, abs=1e-4)
        assert 0.0 <= got <= 1.0
    assert judge.calls == 3 and judge.prompt_tokens > 0


def test_rlaif_rejects_an_unknown_behaviour_before_any_model(plugins):
    from harness.plugins import PluginError

    with pytest.raises(PluginError, match="unknown behaviour 'charm'"):
        RLAIFTrainer(plugins=plugins, behaviour="charm")


def test_rlaif_trains_the_policy_with_the_teacher_s_judgement(tiny_policy, plugins, tmp_path):
    engine = TransformersEngine(tiny_policy, progress=False)
    task = UppercaseTask()
    trainer = RLAIFTrainer(
        plugins=plugins,
        behaviour="conciseness",
        alpha=2.0,
        steps=2,
        prompts_per_step=2,
        group_size=4,
        max_new_tokens=6,
        lr=1e-3,
    )
    assert trainer.shaping() == {"teacher/conciseness": 2.0, "behaviour/conciseness": 0.0}
    seen = {}
    estimator = trainer.estimator

    def spy(rewards, groups, weights, **context):
        seen.setdefault("rewards", []).append(rewards)
        seen["weights"] = weights
        return estimator(rewards, groups, weights, **context)

    trainer.estimator = spy
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    store = RunStore(tmp_path, "run")
    trainer.train(tiny_policy, engine, task, task.problems("train"), store=store)

    changed = [k for k, v in tiny_policy.model.state_dict().items() if not torch.equal(before[k], v)]
    assert len(changed) == len(before)
    teacher = trainer.judge.teacher.model  # a frozen copy of the initial weights: the judge does not drift
    assert all(torch.equal(before[k], v) for k, v in teacher.state_dict().items())
    assert all(not p.requires_grad for p in teacher.parameters())
    assert seen["weights"].tolist() == [1.0, 2.0, 0.0]

    steps = _lines(store.dir / "steps.jsonl")
    assert [s["teacher_calls"] for s in steps] == [8, 16]  # cumulative: 2 prompts x 4 rollouts per step
    assert steps[-1]["teacher_prompt_tokens"] > 0
    metrics = json.loads((store.dir / "metrics.json").read_text())
    assert metrics["rlaif/teacher_calls"] == 16
    samples = _lines(store.dir / "samples.jsonl")
    rewards = torch.cat(seen["rewards"])  # [rows, 1, 3]: upper, teacher, behaviour
    for s, row in zip(samples, rewards, strict=True):
        assert s["rewards"]["teacher/conciseness"] == pytest.approx(float(row[0, 1]))
        assert 0.0 <= float(row[0, 1]) <= 1.0
    # The teacher's rating of a sample is what the judge says about that sample alone.
    first = samples[0]
    prompt = {p.id: p.prompt for p in task.problems("train")}[first["problem_id"]]
    direct = Judge(trainer.judge.teacher, CONCISENESS).score([prompt], [first["text"]])
    assert first["rewards"]["teacher/conciseness"] == pytest.approx(direct[0], abs=1e-4)


def test_rlaif_advantages_follow_the_teacher_when_the_task_reward_ties(tiny_policy, plugins, tmp_path):
    """With the task reward constant within a group, the advantage order is the teacher's order."""
    trainer = RLAIFTrainer(
        plugins=plugins, behaviour="conciseness", steps=1, prompts_per_step=1, group_size=4, max_new_tokens=4
    )

    class FlatTask(UppercaseTask):
        def score(self, problem, completion):
            score = super().score(problem, completion)
            return type(score)(rewards={"upper": 0.5}, primary="upper")

    store = RunStore(tmp_path, "run")
    trainer.train(
        tiny_policy,
        TransformersEngine(tiny_policy, progress=False),
        FlatTask(),
        FlatTask().problems("train"),
        store=store,
    )
    samples = _lines(store.dir / "samples.jsonl")
    judged = [s["rewards"]["teacher/conciseness"] for s in samples]
    advantages = [s["advantage"] for s in samples]
    mean = sum(judged) / len(judged)
    assert all((a > 0) == (j > mean) for a, j in zip(advantages, judged, strict=True) if abs(j - mean) > 1e-6)


def test_bad_rlaif_options_are_one_line_errors(plugins):
    for options, message in [
        ({}, "behaviour=NAME is required"),
        ({"behaviour": "conciseness", "judge_batch": 0}, "option judge_batch=0 is out of its bounds (1..100000)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)) as err:
            RLAIFTrainer(plugins=plugins, **options)
        assert "\n" not in str(err.value)
