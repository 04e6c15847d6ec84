"""VPO's format warm-up (trainers/format_warmup.py): it trains until sampled rollouts are well formed, logs the rate
before and after, stops as soon as the target is met, and warns in one line when RL must start below it."""

from __future__ import annotations

import re

import pytest

from harness.engine.transformers_engine import TransformersEngine
from harness.scoring.multi_answer import join_answers
from harness.testing import FakeEngine, FakeStore, FakeTask, UppercaseTask
from harness.trainers.format_warmup import WarmupPlan, format_warmup, well_formed_rate
from harness.trainers.sft import SFTTrainer

DELIMITER = "### next answer ###"


def _messages(err: str) -> list[str]:
    """The warm-up's one-line messages: what is left of each line once its progress bar's redraws (``\r``), the
    bar's own cleared line and its plain progress lines (stderr is not a terminal here: "... 2/3 step (67%) [...]")
    are dropped."""
    lines = [kept for line in err.split("\n") if (kept := line.split("\r")[-1].strip())]
    return [line for line in lines if not re.search(r" \d+/\d+ \w+ \(\d+%\) \[", line)]


def _plan(**overrides) -> WarmupPlan:
    values = dict(
        m=2,
        delimiter=DELIMITER,
        max_new_tokens=12,
        temperature=1.0,
        max_steps=3,
        check_every=1,
        target_rate=0.9,
        samples_per_problem=3,
        lr=1e-3,
        batch_size=2,
        micro_batch=2,
        seed=0,
    )
    return WarmupPlan(**{**values, **overrides})


def test_the_rate_counts_rollouts_with_m_answers_the_task_reads():
    task = FakeTask(size=2)  # FakeTask reads the last integer of an answer
    engine = FakeEngine(
        [
            join_answers(["It is 2.", "It is 3."], DELIMITER),
            "It is 2.",
            f"It is 2.\n{DELIMITER}\n",
            join_answers(["It is 1.", "It is 4.", "c"], DELIMITER),  # the third answer is dropped: M = 2
            join_answers(["a", "b"], DELIMITER),  # the structure, but no answer the task reads
        ]
    )
    rate, texts = well_formed_rate(engine, task, task.problems("eval"), _plan(max_new_tokens=40), seed=0, samples=5)
    assert len(texts) == 10
    assert [r["well_formed"] for r in texts[:5]] == [True, False, False, True, False]
    assert rate == 0.4  # not one answer, nor one plus an empty part, nor two the task cannot read


def test_one_well_formedness_rule_for_one_and_four_answers():
    """The per-answer test is the same whatever M is: a GRPO arm's one-answer rollout and a VPO arm's four-answer
    rollout are judged by one standard (before, M > 1 counted the structure alone and M = 1 a read answer)."""
    from harness.trainers.format_warmup import well_formed_answer

    task = FakeTask(size=1)  # eval problem 0+0; "format" is earned by any integer
    (problem,) = task.problems("eval")
    read, unread = "It is 3.", "no idea"
    assert well_formed_answer(read, task.score(problem, read))
    assert not well_formed_answer(unread, task.score(problem, unread))
    assert not well_formed_answer("", task.score(problem, ""))
    assert not well_formed_answer(read, None)  # its scorer raised
    texts = {
        1: [read, unread, ""],
        4: [
            join_answers([read] * 4, DELIMITER),
            join_answers([read, read, read, unread], DELIMITER),  # one answer the task cannot read
            join_answers([read, read, read], DELIMITER),  # three answers
        ],
    }
    for m, rollouts in texts.items():
        for format_component in ("", "format"):
            plan = _plan(m=m, max_new_tokens=80, format_component=format_component)
            rate, records = well_formed_rate(FakeEngine(rollouts), task, [problem], plan, seed=0, samples=3)
            assert [r["well_formed"] for r in records] == [True, False, False], (m, format_component)
            assert rate == 1 / 3
    upper = UppercaseTask()  # a task that extracts nothing but never calls an answer unparsed: its format decides
    (first,) = upper.problems("train")[:1]
    plan = _plan(m=4, max_new_tokens=80, format_component="upper")
    rollouts = [join_answers(["YES"] * 4, DELIMITER), join_answers(["YES", "YES", "YES", "no"], DELIMITER)]
    _, records = well_formed_rate(FakeEngine(rollouts), upper, [first], plan, seed=0, samples=2)
    assert [r["well_formed"] for r in records] == [True, False]


def test_with_a_format_component_an_answer_must_earn_it_and_success_is_recorded():
    task = FakeTask(size=1)  # eval problem: 0+0 = 0; FakeTask's "format" is earned by any integer
    engine = FakeEngine(["It is 0.", "no idea", "It is 3."])
    rate, records = well_formed_rate(
        engine, task, task.problems("eval"), _plan(m=1, format_component="format"), seed=0, samples=3
    )
    assert rate == 2 / 3  # one answer without an integer: not well formed though it is one non-empty answer
    assert [r["well_formed"] for r in records] == [True, False, True]
    assert [r["success"] for r in records] == [True, False, False]
    rate, records = well_formed_rate(engine, task, task.problems("eval"), _plan(m=1), seed=0, samples=3)
    assert rate == 2 / 3  # no format named: well formed when the task reads an answer from it
    assert [r["well_formed"] for r in records] == [True, False, True]
    two = FakeEngine([join_answers(["It is 3.", "It is 0."], DELIMITER), join_answers(["It is 3.", "none"], DELIMITER)])
    rate, records = well_formed_rate(
        two, task, task.problems("eval"), _plan(m=2, format_component="format", max_new_tokens=40), seed=0, samples=2
    )
    assert [(r["well_formed"], r["success"]) for r in records] == [(True, True), (False, False)]  # a set is right


def test_grpo_warms_up_on_a_named_format_before_rl_and_checks_the_name(tiny_policy, plugins, tmp_path):
    import json

    import torch

    from harness.store.run_folder import RunStore
    from harness.trainers.grpo import GRPOConfig, GRPOTrainer

    GRPOConfig(warmup_steps=2)  # M = 1 without a format: the rate counts answers the task could read
    task = UppercaseTask()
    engine = TransformersEngine(tiny_policy, progress=False)
    with pytest.raises(ValueError, match="warmup_format 'boxed' is not a reward component of task 'uppercase'"):
        GRPOTrainer(plugins=plugins, steps=1, warmup_steps=1, warmup_format="boxed").train(
            tiny_policy, engine, task, task.problems("train"), store=RunStore(tmp_path, "bad")
        )
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=1,
        prompts_per_step=2,
        group_size=2,
        max_new_tokens=8,
        lr=1e-3,
        warmup_steps=2,
        warmup_check_every=1,
        warmup_format="upper",
        warmup_target_rate=1.0,
        warmup_samples=2,
        warmup_problems=2,
        warmup_check_problems=2,
    )
    store = RunStore(tmp_path, "run")
    trainer.train(tiny_policy, engine, task, task.problems("train"), store=store)
    assert any(not torch.equal(before[k], v) for k, v in tiny_policy.model.state_dict().items())
    stages = [json.loads(line)["stage"] for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    metrics = json.loads((store.dir / "metrics.json").read_text())
    taken, rates = metrics["warmup/steps"], metrics["warmup/well_formed_rates"]
    assert stages == ["warmup"] * taken + ["train"] and taken >= 1  # the warm-up's SFT steps, then RL
    assert len(rates) == taken + 1 and rates[0] < 1.0 and (rates[-1] == 1.0 or taken == 2)  # stops at the target
    assert 0.0 <= metrics["warmup/check_success_after"] <= 1.0


def test_warm_up_trains_until_the_target_then_warns_below_it(tiny_policy, plugins, capsys):
    task = UppercaseTask()
    problems = task.problems("train")
    store = FakeStore()
    figures = format_warmup(
        tiny_policy,
        TransformersEngine(tiny_policy, progress=False),
        task,
        problems[:2],
        problems[2:4],
        _plan(),
        store=store,
        plugins=plugins,
    )
    # a random model never writes the delimiter: every round runs, and RL would start malformed
    assert figures["warmup/steps"] == 3 and figures["warmup/well_formed_rates"] == [0.0] * 4
    assert [s["stage"] for s in store.steps] == ["warmup"] * 3
    # where its time went: the whole warm-up, not its last step (4 checks, 3 SFT steps, and the targets' sampling)
    assert figures["warmup/sft_seconds"] == pytest.approx(sum(s["seconds"] for s in store.steps))
    assert figures["warmup/seconds"] > figures["warmup/check_seconds"] + figures["warmup/sft_seconds"]
    assert figures["warmup/check_seconds"] > 0
    assert store.metrics["warmup/well_formed_before"] == 0.0 == store.metrics["warmup/well_formed_after"]
    checks = [r for r in store.samples if r["phase"] == "warmup-check"]  # 4 checks x 2 problems x 2 rollouts
    assert len(checks) == 16 and [r["step"] for r in checks[::4]] == [0, 1, 2, 3]
    assert not any(r["well_formed"] for r in checks)
    summary, warning = _messages(capsys.readouterr().err)  # what it did, then the warning
    assert "vpo: format warm-up: 0% -> 0% well-formed 2-answer rollouts in 3 SFT steps" in summary
    assert "0% well-formed 2-answer rollouts (target 90%) after 3 warm-up steps" in warning


def test_warm_up_stops_once_the_rate_is_met(tiny_policy, plugins, capsys):
    task = UppercaseTask()
    problems = task.problems("train")
    store = FakeStore()
    figures = format_warmup(
        tiny_policy,
        TransformersEngine(tiny_policy, progress=False),
        task,
        problems[:2],
        problems[2:4],
        _plan(target_rate=0.0),
        store=store,
        plugins=plugins,
    )
    assert figures["warmup/steps"] == 0 and store.steps == []
    (summary,) = _messages(capsys.readouterr().err)  # no warning: the target was met
    assert "well-formed 2-answer rollouts in 0 SFT steps" in summary


def test_a_plateau_ends_the_warm_up_but_a_rate_still_at_zero_does_not():
    from harness.trainers.format_warmup import plateaued

    assert not plateaued([0.0, 0.0, 0.0], 1)  # nothing learnt yet: a slow start
    assert not plateaued([0.0, 0.25, 0.5], 1)  # rising
    assert plateaued([0.0, 0.62, 0.56], 1)  # code at 135M: below its best
    assert plateaued([0.1, 0.5, 0.5], 1)  # no higher than its best
    assert not plateaued([0.0, 0.62, 0.56], 2) and plateaued([0.0, 0.62, 0.56, 0.6], 2)
    assert not plateaued([0.0, 0.62, 0.56, 0.5], 0)  # patience 0: never early


def test_the_warm_up_stops_at_a_plateau_and_says_why(tiny_policy, plugins, capsys, monkeypatch):
    import harness.trainers.format_warmup as warmup

    rates = iter([0.0, 0.5, 0.25, 0.75])  # the checks' rates: the third stops it
    monkeypatch.setattr(warmup, "well_formed_rate", lambda *a, **k: (next(rates), []))
    task = UppercaseTask()
    problems = task.problems("train")
    figures = format_warmup(
        tiny_policy,
        TransformersEngine(tiny_policy, progress=False),
        task,
        problems[:2],
        problems[2:4],
        _plan(max_steps=6, patience=1),
        store=FakeStore(),
        plugins=plugins,
    )
    assert figures["warmup/steps"] == 2 and figures["warmup/well_formed_rates"] == [0.0, 0.5, 0.25]
    warning = _messages(capsys.readouterr().err)[-1]
    assert (
        "RL starts with 25% well-formed 2-answer rollouts (target 90%) after 2 warm-up steps; the rate stopped "
        "rising (0% -> 50% -> 25%; trainer.warmup_patience)" in warning
    )


def test_targets_prefer_answers_that_ended_to_those_cut_at_the_budget():
    task = FakeTask(size=1)  # train problem: 1+1
    # 2 answers per target, 3 words per answer (2 x 3 + 16 for the delimiter line): the first sample is cut
    # ("It is 7") and unfinished
    engine = FakeEngine(["It is 7 because reasons", "It is 2.", "It is 7.", "It is 5."])
    trainer = SFTTrainer(targets="self", samples_per_problem=4, answers_per_rollout=2, max_target_tokens=22)
    (example,), _ = trainer.build_targets(engine, task, task.problems("train"))
    assert engine.calls[0][1].max_new_tokens == 3  # one answer's share of the target budget, as RL leaves it
    assert example.answers == ["It is 2.", "It is 7."]
    # the pool the warm-up chooses from again: every sample, with whether it ended
    assert ("It is 7", False) in example.pool and len(example.pool) == 4


def test_extracted_targets_write_the_policys_own_answers_short_and_drop_problems_with_none():
    from harness.trainers.format_warmup import extracted_targets
    from harness.trainers.sft import Example

    task = FakeTask(size=1)
    (problem,) = task.problems("train")  # 1+1 = 2
    rambling = Example(problem, [], "", ["So it is 7 because of 3 reasons, maybe 5", "I think 2"], [False, True])
    one = Example(problem, [], "", ["It is 4, or", "Four: 4"], [False, False])
    nothing = Example(problem, [], "", ["no idea", "none"], [False, False])
    examples, dropped = extracted_targets(task, [rambling, one, nothing], 2, DELIMITER)
    assert dropped == {"skipped_nothing_extracted": 1, "skipped_fewer_than_m": 1, "skipped_cut_samples": 0}
    # the task's extracted answers (the last integer), in its short form; FakeTask has no reference completions
    (example,) = examples  # "one" has a single distinct answer: dropped, not written twice
    assert example.answers == ["The answer is 5.", "The answer is 2."]
    assert example.target == join_answers(["The answer is 5.", "The answer is 2."], DELIMITER)
    assert example.success == [False, True]


def test_m_answer_targets_are_m_distinct_texts_from_the_problems_samples_or_none():
    """A four-answer target never repeats an answer: the warm-up chooses M distinct ones from all the problem's
    samples (the pool), and drops a problem with fewer, counting it; one-answer targets are unaffected."""
    from harness.trainers.format_warmup import extracted_targets
    from harness.trainers.sft import Example

    task = FakeTask(size=1)
    (problem,) = task.problems("train")  # 1+1 = 2
    texts = ["It is 2.", "So 2.", "Maybe 3.", "Then 2 again.", "Or 5.", "no idea"]
    pool = [(t, True) for t in texts]
    # SFT chose four distinct texts, three with the answer 2; the pool has the other answers
    chosen = Example(problem, [], "", texts[:4], [True] * 4, pool)
    (worked,), dropped = extracted_targets(task, [chosen], 4, DELIMITER, worked=True)
    assert len(set(worked.answers)) == 4 and dropped["skipped_fewer_than_m"] == 0
    # distinct answers first (2, 3, 5), then another text of a repeated answer
    assert [a.splitlines()[0] for a in worked.answers] == ["It is 2.", "Maybe 3.", "Or 5.", "So 2."]
    (short,), _ = extracted_targets(task, [chosen], 3, DELIMITER)
    assert short.answers == ["The answer is 2.", "The answer is 3.", "The answer is 5."]
    # extracted: four distinct written answers are needed, the pool has three: dropped, not padded
    examples, dropped = extracted_targets(task, [chosen], 4, DELIMITER)
    assert examples == [] and dropped["skipped_fewer_than_m"] == 1
    # worked: the same text twice in the pool is one text
    twice = Example(problem, [], "", [], [], [("It is 2.", True)] * 3 + [("Or 5.", True)])
    examples, dropped = extracted_targets(task, [twice], 3, DELIMITER, worked=True)
    assert examples == [] and dropped["skipped_fewer_than_m"] == 1


def test_a_sample_cut_at_the_token_limit_gets_no_target():
    """A cut text is never given the task's format after it (nor read for an answer): it is left out, and
    counted."""
    from harness.trainers.format_warmup import extracted_targets
    from harness.trainers.sft import Example

    task = FakeTask(size=1)
    (problem,) = task.problems("train")  # 1+1 = 2
    cut = Example(problem, [], "", ["So far I have 3 and"], [False], [("So far I have 3 and", False)])
    ended = Example(problem, [], "", ["It is 2."], [True], [("It is 2.", True)])
    for worked in (False, True):
        examples, dropped = extracted_targets(task, [cut, ended], 1, DELIMITER, worked=worked)
        assert [e.answers for e in examples] == [["It is 2.\nThe answer is 2." if worked else "The answer is 2."]]
        assert dropped["skipped_cut_samples"] == 1 and dropped["skipped_nothing_extracted"] == 1
    # M answers: the cut sample is passed over for one that ended
    pool = [("It is 2.", True), ("Then 3 and", False), ("Or 5.", True)]
    (target,), dropped = extracted_targets(task, [Example(problem, [], "", [], [], pool)], 2, DELIMITER)
    assert target.answers == ["The answer is 2.", "The answer is 5."] and dropped["skipped_cut_samples"] == 1
    # through SFT's sampling: FakeEngine cuts a response longer than the budget and marks it unfinished; SFT picks
    # the one sample with an answer ("It is 7"), cut; the warm-up gives it no target
    engine = FakeEngine(["It is 7 because of reasons", "no"])
    trainer = SFTTrainer(
        targets="self", samples_per_problem=2, answers_per_rollout=1, max_target_tokens=3, select="sampled"
    )
    (example,), _ = trainer.build_targets(engine, task, task.problems("train"))
    assert example.answers == ["It is 7"] and example.pool == [("It is 7", False)]
    kept, dropped = extracted_targets(task, [example], 1, DELIMITER, worked=True)
    assert kept == [] and dropped["skipped_cut_samples"] == 1


def test_worked_targets_keep_the_policys_reasoning_and_put_its_answer_in_the_format(plugins):
    """Maths' default warm-up target: the policy's own text, its answer boxed after it when it was not boxed; an
    answer already boxed is kept as written. (Printed: what a user reads in samples.jsonl.)"""
    from harness.trainers.format_warmup import extracted_targets, resolve_targets
    from harness.trainers.sft import Example

    task = plugins["task"].get("math").create()
    problem = task.problems("train", limit=1)[0]
    assert resolve_targets("auto", task) == "worked"
    unboxed = f"First I add the numbers, which gives {problem.answer}."
    boxed = f"So the result is \\boxed{{{problem.answer}}}."
    wrong = "I think it is 12345."
    (example,), dropped = extracted_targets(
        task,
        [Example(problem, [], "", [unboxed, boxed, wrong], [])],
        3,
        DELIMITER,
        worked=True,
        format_component="boxed",
    )
    print(example.target)
    assert dropped["skipped_nothing_extracted"] == 0 == dropped["skipped_fewer_than_m"]
    # distinct extracted answers first (the unboxed and boxed texts share one: the first text gives it), then the
    # other text of that answer: three distinct texts, none repeated; the boxed one is kept as written
    assert example.answers == [
        f"{unboxed}\n\\boxed{{{problem.answer}}}",
        f"{wrong}\n\\boxed{{12345}}",
        boxed,
    ]
    assert example.success == [True, False, True]
    (kept,), _ = extracted_targets(
        task, [Example(problem, [], "", [boxed], [])], 1, DELIMITER, worked=True, format_component="boxed"
    )
    assert kept.answers == [boxed]  # already in the format: the policy's words untouched


def test_sampled_selection_ignores_success():
    """warmup_selection=sampled: the targets are the first distinct samples, not the successful ones first."""
    task = FakeTask(size=1)  # train problem: 1+1 = 2
    samples = ["It is 7.", "It is 5.", "It is 2."]
    best = SFTTrainer(targets="self", samples_per_problem=3, answers_per_rollout=2)
    (example,), _ = best.build_targets(FakeEngine(samples), task, task.problems("train"))
    assert example.answers == ["It is 2.", "It is 7."]  # the right one first
    sampled = SFTTrainer(targets="self", samples_per_problem=3, answers_per_rollout=2, select="sampled")
    (example,), _ = sampled.build_targets(FakeEngine(samples), task, task.problems("train"))
    assert example.answers == ["It is 7.", "It is 5."]  # sampling order: the right one is not among them
    with pytest.raises(ValueError, match="select must be successes or sampled"):
        SFTTrainer(select="best")


def test_maze_writes_its_own_extracted_paths_as_the_path_line(plugins):
    from harness.trainers.format_warmup import written_answer
    from harness.trainers.vpo import VPOConfig

    task = plugins["task"].get("maze").create()
    problem = task.problems("eval", limit=1)[0]
    reference = task.reference_completion(problem)
    assert reference == f"Path: {problem.answer}"
    assert set(task.score(problem, reference).rewards.values()) == {1.0}  # reaches the goal, optimal, formatted
    assert written_answer(task, problem, "U U") == "Path: U U"
    from harness.trainers.format_warmup import resolve_targets

    assert resolve_targets("auto", task) == "extracted" and resolve_targets("self", task) == "self"
    assert resolve_targets("auto", FakeTask(size=1)) == "self"  # no answer form declared: its answers as written
    with pytest.raises(ValueError, match="warmup_targets must be one of auto, self, extracted, worked"):
        VPOConfig(warmup_targets="references")
    with pytest.raises(ValueError, match="warmup_selection must be one of successes, sampled"):
        VPOConfig(warmup_selection="best")


def test_code_writes_its_own_extracted_programs_as_one_python_block_each(plugins):
    """Code's answers ramble past what an M-answer rollout leaves each (prose after the program), so its warm-up
    targets are the policy's programs alone, each in the one ```python block the instruction asks for: not the copy
    of the prompt build_program puts before a module answer, nor the prose; each scores as the answer it came from."""
    from harness.trainers.format_warmup import extracted_targets, resolve_targets, written_answer
    from harness.trainers.sft import Example

    task = plugins["task"].get("code").create()
    assert resolve_targets("auto", task) == "extracted"
    problem = next(p for split in ("eval", "train") for p in task.problems(split) if p.id == "HumanEval/0")
    reference = task.reference_completion(problem)
    assert reference == f"```python\n{problem.answer.strip(chr(10)).rstrip()}\n```"  # prompt + canonical body
    assert task.score(problem, reference).rewards["all_pass"] == 1.0
    body = problem.answer[len(problem.meta["code_prompt"]) :]
    function = f"def has_close_elements(numbers, threshold):\n{body.rstrip()}"
    module = f"Here is the solution:\n\n```python\n{function}\n```\n\nIt compares every pair of numbers, so it is slow."
    body_only = f"```python\n{body.rstrip()}\n```\nThat is all."
    for answer, written in ((module, f"```python\n{function}\n```"), (body_only, None)):
        score = task.score(problem, answer)
        short = written_answer(task, problem, score.extracted)
        assert "It compares" not in short and "That is all" not in short and short.count("```") == 2
        if written:  # a module answer: its own function, without build_program's copy of the prompt
            assert short == written
        assert task.score(problem, short).rewards == score.rewards
    example = Example(problem, [], "", [module, body_only], [True, True])
    (target,), dropped = extracted_targets(task, [example], 2, DELIMITER)
    assert not any(dropped.values()) and target.target.count(DELIMITER) == 1 and "It compares" not in target.target


def test_auto_targets_fall_back_to_the_samples_as_written_when_no_answer_is_read(tiny_policy, plugins, capsys):
    # math declares its answer form, so "auto" means worked; a random model commits to no answer at all
    task = plugins["task"].get("math").create()
    problems = task.problems("train", limit=4)
    engine = TransformersEngine(tiny_policy, progress=False)
    store = FakeStore()
    figures = format_warmup(
        tiny_policy,
        engine,
        task,
        problems[:2],
        problems[2:4],
        _plan(targets="auto", max_steps=1),
        store=store,
        plugins=plugins,
    )
    # the samples as written hold no answer the task reads either: no target is well formed, so no step is taken
    assert figures["warmup/skipped_nothing_extracted"] == 2 and figures["warmup/steps"] == 0
    assert figures["warmup/targets_well_formed"] == 0
    assert {r["source"] for r in store.samples if r["phase"] == "train-sft"} == {"self"}
    err = capsys.readouterr().err
    assert "no problem gave 2 distinct answer(s) the task could read in samples that ended" in err
    assert "its targets are the samples as written" in err
    with pytest.raises(ValueError, match="vpo warm-up: no targets from 2 problems"):  # asked for, never replaced
        format_warmup(
            tiny_policy,
            engine,
            task,
            problems[:2],
            problems[2:4],
            _plan(targets="extracted"),
            store=FakeStore(),
            plugins=plugins,
        )
