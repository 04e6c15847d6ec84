"""SFT on the tiny random model: the label mask, targets from references / own samples / a teacher, multi-answer
targets, and that training lowers the targets' NLL."""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch

from harness.scoring.multi_answer import instruct, join_answers, split_answers
from harness.store.run_folder import RunStore
from harness.testing import FakeEngine, FakeTask
from harness.trainers.sft import SFTTrainer, target_batch, target_nll


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_only_target_tokens_are_scored(tiny_policy):
    """A hand-made batch: prompts of different lengths (left-padded), targets of different lengths (right-padded).
    The mask covers exactly the target tokens, and the loss equals transformers' own with prompt labels = -100."""
    pairs = [([11, 12, 13], [21, 22]), ([14], [23, 24, 25])]
    batch = target_batch(pairs, pad_id=0)
    width = int(batch["prompt_width"])
    assert batch["completion_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    scored = [batch["input_ids"][r, width:][batch["completion_mask"][r].bool()].tolist() for r in range(2)]
    assert scored == [t for _, t in pairs]

    model = tiny_policy.model
    with torch.no_grad():
        nll = target_nll(model, batch)
        for r, (prompt, target) in enumerate(pairs):
            ids = torch.tensor([prompt + target])
            labels = torch.tensor([[-100] * len(prompt) + target])
            expected = model(input_ids=ids, labels=labels).loss  # mean over the target tokens only
            assert nll[r].sum() / len(target) == pytest.approx(float(expected), rel=1e-4)
    assert (nll[0, 2] == 0).item()  # padding contributes nothing


def test_references_training_lowers_target_nll_and_changes_parameters(tiny_policy, tmp_path):
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    task = FakeTask(size=2)
    store = RunStore(tmp_path, "run")
    # The whole (fixed) dataset in every batch at a high rate: the loss curve is that of the same two targets.
    trainer = SFTTrainer(steps=6, batch_size=2, lr=3e-3, max_target_tokens=16)
    trainer.train(tiny_policy, FakeEngine(["unused"]), task, task.problems("train"), store=store)

    steps = _lines(store.dir / "steps.jsonl")
    assert [s["step"] for s in steps] == list(range(6))
    assert steps[-1]["loss"] < steps[0]["loss"] - 1.0
    assert all(s["tokens"] > 0 and s["seconds"] >= 0 for s in steps)
    changed = [k for k, v in tiny_policy.model.state_dict().items() if not torch.equal(before[k], v)]
    assert len(changed) == len(before)
    samples = _lines(store.dir / "samples.jsonl")
    assert [s["text"] for s in samples] == ["The answer is 4.", "The answer is 6."]
    assert {s["phase"] for s in samples} == {"train-sft"}


def test_reference_completion_renders_and_skips():
    from harness.types import TaskCapabilities

    class BoxedTask(FakeTask):
        capabilities = TaskCapabilities(reference_completions=True)

        def reference_completion(self, problem):
            return None if problem.id == "add-2" else f"So \\boxed{{{problem.answer}}}"

    task = BoxedTask(size=2)
    examples, stats = SFTTrainer().build_targets(FakeEngine(["unused"]), task, task.problems("train"))
    assert [e.target for e in examples] == ["So \\boxed{6}"]
    assert stats["skipped_no_reference"] == 1


def test_auto_targets_are_the_references_or_else_the_policys_own_samples():
    """persona's problems carry no answer: SFT at its defaults (targets=auto) learns from the policy's successful
    samples instead of refusing to train; a task with references keeps them and samples nothing."""
    import dataclasses

    class Unreferenced(FakeTask):
        def problems(self, split, limit=None, seed=0):
            return [dataclasses.replace(p, answer=None) for p in super().problems(split, limit, seed)]

    engine = FakeEngine(["It is 4.", "no number"])
    trainer = SFTTrainer(samples_per_problem=2)
    examples, stats = trainer.build_targets(engine, Unreferenced(size=2), Unreferenced(size=2).problems("train"))
    assert len(engine.calls) == 1 and trainer.targets_used == "self" and stats["self_samples"] == 4
    assert [e.target for e in examples] == ["It is 4.", "It is 4."]  # a number beats none on the format reward
    referenced = FakeEngine(["unused"])
    examples, stats = trainer.build_targets(referenced, FakeTask(size=2), FakeTask(size=2).problems("train"))
    assert referenced.calls == [] and trainer.targets_used == "auto" and stats["skipped_no_reference"] == 0
    assert [e.target for e in examples] == ["The answer is 4.", "The answer is 6."]


def test_self_targets_keep_successful_samples_else_the_best(tiny_policy, tmp_path):
    task = FakeTask(size=3)  # train problems: 3+3, 4+4, 5+5
    engine = FakeEngine(["It is 6.", "no number", "It is 8."])
    store = RunStore(tmp_path, "run")
    trainer = SFTTrainer(targets="self", samples_per_problem=3, steps=1, batch_size=2, lr=1e-3, max_target_tokens=8)
    trainer.train(tiny_policy, engine, task, task.problems("train"), store=store)

    assert len(engine.calls) == 1 and engine.calls[0][1].n == 3  # sampling goes through the engine
    by_problem = {s["problem_id"]: s["text"] for s in _lines(store.dir / "samples.jsonl")}
    # 3+3 and 4+4: only the correct sample; 5+5: none is correct, so the best by reward (a number beats none, ties
    # keep sampling order) is kept
    assert by_problem == {"add-3": "It is 6.", "add-4": "It is 8.", "add-5": "It is 6."}
    assert store.metrics["sft/fallback_problems"] == 1
    assert store.metrics["sft/self_samples"] == 9
    assert store.metrics["sft/truncated_targets"] == 0  # "It is 6." + EOS fits in 8 tokens


def test_multi_answer_targets_join_distinct_answers():
    task = FakeTask(size=1)  # train problem: 1+1
    engine = FakeEngine(["It is 2.", "It is 2!", "It is 7.", "no idea"])
    trainer = SFTTrainer(targets="self", samples_per_problem=4, answers_per_rollout=3)
    (example,), _ = trainer.build_targets(engine, task, task.problems("train"))

    # Different extracted answers first (2, then 7), best first; then the best remaining distinct text.
    assert example.answers == ["It is 2.", "It is 7.", "It is 2!"]
    assert example.target == join_answers(example.answers, trainer.config.delimiter)
    assert split_answers(example.target, 3, trainer.config.delimiter) == example.answers
    assert example.messages == instruct(task.messages(task.problems("train")[0]), 3, trainer.config.delimiter)
    assert engine.calls[0][0][0] == task.messages(task.problems("train")[0])  # answers are sampled one at a time


def test_teacher_samples_are_counted(plugins):
    task = FakeTask(size=2)
    engine = FakeEngine(["unused"])
    trainer = SFTTrainer(
        plugins=plugins, targets="teacher", teacher="tiny-random", samples_per_problem=2, max_target_tokens=4
    )
    examples, stats = trainer.build_targets(engine, task, task.problems("train"))
    assert not engine.calls  # the teacher samples, not the policy's engine
    assert stats["teacher_samples"] == 4 and 0 < stats["teacher_tokens"] <= 16
    assert len(examples) >= 2


@pytest.mark.parametrize(
    "options",
    [
        {"targets": "nope"},
        {"targets": "teacher"},
        {"answers_per_rollout": 2},
        {"targets": "self", "answers_per_rollout": 4, "samples_per_problem": 2},
    ],
)
def test_bad_options_fail_early(options):
    with pytest.raises(ValueError, match="sft"):
        SFTTrainer(**options)


def test_rewrite_targets_are_the_teacher_s_rewrites_minus_those_worse_on_the_behaviour(plugins):
    """Teacher-tracking SFT: the policy answers, the teacher rewrites towards the behaviour, and a rewrite the
    behaviour scorer rates below the original is dropped (here: the verbose rewrites of odd problems)."""
    from harness.tasks.behaviours import CONCISENESS, conciseness

    verbose = " ".join(["Basically, it is very important to note that the sum is what it is."] * 8)

    def respond(messages, sample_index, seed):
        text = messages[-1]["content"]
        i = int(re.search(r"What is (\d+)\+", text).group(1))
        if text.startswith("Here is a question and an answer"):  # a rewrite request
            return f"{2 * i}." if i % 2 == 0 else f"{verbose} {2 * i}"
        return f"Let me add {i} and {i}. Adding them gives {2 * i}, so the answer is {2 * i}."

    task = FakeTask(size=6)
    engine = FakeEngine(respond)
    trainer = SFTTrainer(
        plugins=plugins, targets="rewrites", behaviour="conciseness", steps=2, batch_size=2, max_target_tokens=200
    )
    examples, stats = trainer.build_targets(engine, task, task.problems("train"))
    problems = task.problems("train")[:4]  # steps x batch_size: each target trained on about once
    assert [e.problem.id for e in examples] == [problems[0].id, problems[2].id]
    assert [e.target for e in examples] == [f"{p.answer}." for p in (problems[0], problems[2])]
    assert all(e.success == [True] for e in examples)
    assert stats["teacher_calls"] == 4 and stats["skipped_less_conciseness"] == 2
    assert stats["examples"] == 2 and stats["target_success_rate"] == 1.0
    assert conciseness(verbose) < conciseness("Let me add 6 and 6. Adding them gives 12, so the answer is 12.")
    requests = engine.calls[1][0]  # answers first, then one rewrite request per answer
    assert len(requests) == 4 and CONCISENESS.towards in requests[0][0]["content"]
    assert "so the answer is 12" in requests[0][0]["content"]  # the policy's answer is what gets rewritten

    kept = SFTTrainer(
        plugins=plugins,
        targets="rewrites",
        behaviour="conciseness",
        steps=2,
        batch_size=2,
        max_target_tokens=200,
        filter_rewrites=False,
    ).build_targets(engine, task, problems)[0]
    assert len(kept) == 4


def test_rewrite_targets_need_a_known_behaviour():
    from harness.plugins import PluginError

    with pytest.raises(ValueError, match="targets=rewrites needs behaviour=NAME"):
        SFTTrainer(targets="rewrites")
    with pytest.raises(PluginError, match="unknown behaviour 'charm'"):  # before any model loads
        SFTTrainer(targets="rewrites", behaviour="charm")


def test_an_update_under_bf16_autocast_lowers_the_nll_as_float32_does(tiny_policy):
    """A format warm-up takes its RL trainer's autocast: the same steps in bf16 must learn (the loss within bf16's
    rounding of float32's, each falling) while the weights stay float32."""
    pairs = [([11, 12, 13], [21, 22, 23, 24]), ([14, 15], [25, 26, 27])]
    trainer = SFTTrainer(lr=3e-3, batch_size=2)
    curves = {}
    for precision in ("", "bfloat16"):
        model = copy.deepcopy(tiny_policy.model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        curves[precision] = [trainer.update(model, 0, optimizer, pairs, autocast=precision)["loss"] for _ in range(4)]
        assert next(model.parameters()).dtype == torch.float32
    for curve in curves.values():
        assert curve[-1] < curve[0] - 0.05
    assert curves["bfloat16"][0] == pytest.approx(curves[""][0], rel=2e-2)
