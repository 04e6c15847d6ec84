"""The prompts task (tasks/prompts.py) and TRL's reward contract (harness/scoring/reward_functions.py) without a model:
prompts sent as written, columns reaching the functions, None as NaN, async functions, the success rule and pass@k,
a built-in task's component weighted to 0, and each mistake in one line."""

from __future__ import annotations

import asyncio
import json
import math
import warnings
from pathlib import Path

import datasets
import pytest

from harness import in_process
from harness.failures import PluginFailed
from harness.plugins import get_plugin_manager
from harness.runner.config import RunConfig
from harness.runner.plan import build_plugins, plan_run
from harness.scoring.reward_functions import TrainerState, reward_context
from harness.searchers.best_of_k import BestOfK
from harness.tasks.prompts import PromptsTask
from harness.testing import FakeEngine, fake_token_ids, run_searcher
from harness.types import scalarize

CALLS: list[dict] = []


def length(prompts, completions, **columns):
    CALLS.append({"prompts": prompts, "completions": completions, **columns})
    return [float(len(c if isinstance(c, str) else c[0]["content"])) for c in completions]


def says_yes(prompt, completion, reference):
    return "yes" in completion


def only_easy(prompts, completions, level, **kwargs):
    return [1.0 if lv == "easy" else None for lv in level]


async def async_yes(prompt, completion, reference):
    await asyncio.sleep(0)
    return 1.0 if "yes" in completion else 0.0


async def async_batch(prompts, completions, **kwargs):
    await asyncio.sleep(0)
    return [0.5 for _ in completions]


def raises(prompts, completions, **kwargs):
    raise KeyError("score")


def stateful(prompts, completions, completion_ids, trainer_state, **kwargs):
    CALLS.append({"ids": completion_ids, "step": trainer_state.global_step})
    return [0.0 for _ in completions]


FUNCTIONS = {f.__name__: f for f in (length, says_yes, only_easy, async_yes, async_batch, raises, stateful)}


@pytest.fixture(autouse=True)
def registered():
    CALLS.clear()
    for name, fn in FUNCTIONS.items():
        in_process.register_function(name, fn)


ROWS = [
    {"prompt": f"  Question {i}, as written.\n", "level": "easy" if i % 2 else "hard", "id": f"q{i}"} for i in range(40)
]
CHAT = [
    {
        "prompt": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"Say yes to {i}."},
        ],
        "level": "easy",
    }
    for i in range(40)
]


def task(rows=ROWS, **options) -> PromptsTask:
    name = in_process.register_dataset(in_process.dataset_name(datasets.Dataset.from_list(rows)), rows)
    return PromptsTask(data=name, **({"rewards": ["@length"]} | options))


def test_a_string_prompt_is_sent_verbatim_with_no_instruction():
    t = task()
    problem = t.problems("eval")[0]
    assert t.messages(problem) == [{"role": "user", "content": problem.prompt}]
    assert problem.prompt.startswith("  Question ") and problem.prompt.endswith(", as written.\n")
    assert problem.answer is None


def test_a_conversation_is_sent_as_written_system_turn_included():
    t = task(CHAT)
    problem = t.problems("train")[0]
    messages = t.messages(problem)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["role"] == "user" and messages[1]["content"].startswith("Say yes to ")
    t.score_many([problem], ["yes"])
    assert CALLS[-1]["prompts"] == [messages]  # TRL's conversational form, both ways
    assert CALLS[-1]["completions"] == [[{"role": "assistant", "content": "yes"}]]


def test_splits_are_disjoint_by_content_and_a_dataset_s_test_split_is_kept(tmp_path: Path):
    t = task()
    train, eval_ = t.problems("train"), t.problems("eval")
    assert train and eval_ and not {p.prompt for p in train} & {p.prompt for p in eval_}
    assert len(train) + len(eval_) == len(ROWS)
    # a hub-style folder with train and test splits, read through datasets (as a hub id would be)
    folder = tmp_path / "dd"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS[:30]), "test": datasets.Dataset.from_list(ROWS[30:])}
    ).save_to_disk(str(folder))
    kept = PromptsTask(data=str(folder), rewards="@length")
    assert [p.id for p in kept.problems("eval", seed=0)] != [] and len(kept.problems("eval")) == 10
    assert kept.data_card() == {"name": str(folder), "split": "test", "size": 10}
    assert kept.data_source()["source"] == "local"


def test_local_files_load_as_the_other_tasks_do(tmp_path: Path):
    for suffix, write in (
        (".jsonl", lambda p: p.write_text("".join(json.dumps(r) + "\n" for r in ROWS))),
        (".parquet", lambda p: datasets.Dataset.from_list(ROWS).to_parquet(str(p))),
        (".csv", lambda p: datasets.Dataset.from_list(ROWS).to_csv(str(p))),
    ):
        path = tmp_path / f"rows{suffix}"
        write(path)
        t = PromptsTask(data=str(path), rewards=["@length"])
        assert len(t.problems("train")) + len(t.problems("eval")) == len(ROWS), suffix


def test_extra_columns_reach_a_batch_function_by_name_with_trainer_state_and_completion_ids():
    t = task(rewards=["@length", "@stateful"])
    problems = t.problems("eval")[:2]
    t.score_many(problems, ["a b", "c"])
    batch = CALLS[0]
    assert batch["level"] == [p.columns["level"] for p in problems] and batch["id"] == [p.id for p in problems]
    assert CALLS[1] == {"ids": [None, None], "step": 0}  # no tokenizer, no sampled ids: None, as outside a run
    with reward_context(state=TrainerState(global_step=3, max_steps=5, phase="train"), ids={"a b": [7, 8, 2]}):
        t.score_many(problems, ["a b", "c"])
    assert CALLS[-1] == {"ids": [[7, 8, 2], None], "step": 3}


def test_none_is_nan_left_out_of_the_mean_and_the_weighted_sum():
    t = task(rewards=["@only_easy", "@says_yes=2"], success="reward>=2")
    easy = next(p for p in t.problems("train") if p.columns["level"] == "easy")
    hard = next(p for p in t.problems("train") if p.columns["level"] == "hard")
    a, b = t.score_many([easy, hard], ["yes", "yes"])
    assert a.rewards["only_easy"] == 1.0 and math.isnan(b.rewards["only_easy"])
    assert scalarize(b.rewards, t.reward_weights) == 2.0  # nansum: the NaN adds nothing
    assert a.success and b.success
    metrics, _ = run_searcher(BestOfK(n=2, k="1"), t, [easy, hard], FakeEngine(["yes"]))
    assert metrics["mean_reward/only_easy"] == 1.0  # over the answers it applies to


def test_async_reward_functions_are_awaited_without_a_warning():
    t = task(rewards=["@async_yes", "@async_batch"])
    problems = t.problems("eval")[:2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = t.score_many(problems, ["yes", "no"])

        async def inside_a_running_loop():  # a notebook's
            return t.score_many(problems, ["no", "yes"])

        again = asyncio.run(inside_a_running_loop())
    assert [s.rewards["async_yes"] for s in scores] == [1.0, 0.0]
    assert [s.rewards["async_yes"] for s in again] == [0.0, 1.0]
    assert all(s.rewards["async_batch"] == 0.5 for s in scores)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [("reward>=3", [True, False]), ("length>4", [True, False]), ("says_yes", [True, False]), ("length<4", [0, 1])],
)
def test_the_success_rule_by_threshold_or_boolean_function_is_what_pass_at_k_counts(rule, expected):
    t = task(rewards=["@length", "@says_yes=0"], success=rule)
    problems = t.problems("eval")[:2]
    scores = t.score_many(problems, ["yes!!", "no"])
    assert [s.success for s in scores] == [bool(e) for e in expected]
    assert t.reward_weights == {"length": 1.0, "says_yes": 0.0, "success": 0.0}
    engine = FakeEngine(lambda messages, i, seed: "yes!!" if "1," in messages[-1]["content"] else "no")
    metrics, _ = run_searcher(BestOfK(n=2, k="1"), t, problems, engine)
    solved = [t.score(p, engine._respond(t.messages(p), 0, 0)).success for p in problems]
    assert metrics["pass@1"] == sum(solved) / len(problems)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"success": "lenght>=1"}, "success='lenght>=1': no reward function named 'lenght'"),
        ({"success": "length>=high"}, "success='length>=high': 'high' is not a number"),
        ({"success": "length >= 1 extra"}, "does not read"),
        ({"rewards": []}, "prompts: needs a reward function: --reward MODULE:FN"),
        ({"rewards": ["@nowhere"]}, "no Python function registered as '@nowhere' in this process"),
        ({"prompt": "question"}, "no column 'question' for the prompt (columns: prompt, level, id)"),
    ],
)
def test_mistakes_are_one_line(options, message):
    with pytest.raises(ValueError) as caught:
        t = task(**options)
        t.problems("eval")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_reward_function_that_raises_is_named_in_one_line():
    t = task(rewards=["@length", "@raises"])
    with pytest.raises(PluginFailed) as caught:
        t.score_many(t.problems("eval")[:1], ["x"])
    assert str(caught.value).startswith("reward 'raises' (plugin '@raises') failed while scoring problem ")
    assert "KeyError: 'score'" in str(caught.value) and "\n" not in str(caught.value)


def test_the_cli_s_rewards_go_into_the_prompts_task_and_a_missing_column_is_one_line(tmp_path: Path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    cfg = RunConfig(task="prompts", trainer="none", rewards=["@length", "@says_yes=0.5"], out=str(tmp_path))
    cfg.options["task"] = {"data": str(path), "success": "says_yes"}
    plan = plan_run(cfg, get_plugin_manager())
    assert [r.name for r in plan.rewards] == ["length", "says_yes"]
    assert plan.task.reward_weights == {"length": 1.0, "says_yes": 0.5, "success": 0.0}
    cfg.options["task"] = {"data": str(path), "prompt": "text"}
    with pytest.raises(Exception, match=r"no column 'text' for the prompt .*--set task.prompt=COLUMN$"):
        plan_run(cfg, get_plugin_manager())


def test_a_built_in_task_s_component_is_weighted_to_zero_with_task_weights(tmp_path: Path):
    cfg = RunConfig(task="math", trainer="none", out=str(tmp_path))
    cfg.options["task"] = {"weights": "correct:0,boxed:1"}
    task, *_ = build_plugins(cfg, get_plugin_manager())
    assert task.reward_weights["correct"] == 0.0 and task.reward_weights["boxed"] == 1.0
    score = task.score(task.problems("eval", limit=1)[0], "\\boxed{0}")
    assert scalarize(score.rewards, task.reward_weights) == score.rewards["boxed"]  # correct counts for nothing
    cfg.options["task"] = {"weights": "corect:0"}
    with pytest.raises(ValueError, match=r"task 'math': option weights: no component 'corect' \(its weighted "):
        build_plugins(cfg, get_plugin_manager())
    cfg.options["task"] = {"weights": "correct"}
    with pytest.raises(ValueError, match="expected NAME:WEIGHT"):
        build_plugins(cfg, get_plugin_manager())


def test_grpo_trains_through_none_its_mean_over_the_answers_it_applies_to(tiny_policy, plugins, tmp_path: Path):
    import torch

    from harness.store.run_folder import RunStore
    from harness.trainers.grpo import GRPOTrainer

    t = task(rewards=["@only_easy", "@says_yes", "@stateful"])
    problems = [p for p in t.problems("train") if p.columns["level"] == "easy"][:1]
    problems += [p for p in t.problems("train") if p.columns["level"] == "hard"][:1]
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    trainer = GRPOTrainer(plugins=plugins, steps=2, prompts_per_step=2, group_size=2, max_new_tokens=4, lr=1e-3)
    trainer.train(tiny_policy, FakeEngine(["yes", "no"]), t, problems, store=RunStore(tmp_path, "run"))
    steps = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    assert [s["reward/only_easy"] for s in steps] == [1.0, 1.0]  # the hard problem's None left out
    assert all(math.isfinite(s["loss"]) for s in steps)
    assert any(not torch.equal(before[k], v) for k, v in tiny_policy.model.state_dict().items())
    rollouts = [c for c in CALLS if "step" in c][-2:]  # (the first call: GRPO learning the components on "")
    assert [c["step"] for c in rollouts] == [0, 1]  # trainer_state.global_step
    sampled = {str(fake_token_ids("yes")), str(fake_token_ids("no"))}  # the engine's ids, not a re-tokenizing
    assert all(str(ids) in sampled for c in rollouts for ids in c["ids"])
