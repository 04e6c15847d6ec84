"""Own data in TRL's formats (tasks/chat_data.py): a conversational ``prompt`` (system and user turns) or a plain one,
a ``completion`` column (messages or a string), extra columns kept under their own names; written by `datasets`
itself (to_json, to_parquet, save_to_disk) and read by the math, mmlu-pro and code tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.tasks.code import CodeTask
from harness.tasks.math import MathTask
from harness.tasks.mmlu_pro import MMLUProTask
from harness.testing import FakeEngine
from harness.trainers.sft import SFTTrainer

SYSTEM = {"role": "system", "content": "You are a careful calculator. Box the final value."}


def sums(n: int = 4) -> list[dict]:
    """TRL's conversational prompt-completion format, with an answer column and an extra one."""
    return [
        {
            "prompt": [SYSTEM, {"role": "user", "content": f"What is {i} + {i}?"}],
            "completion": [{"role": "assistant", "content": f"{i} + {i} = {2 * i}, so \\boxed{{{2 * i}}}"}],
            "solution": str(2 * i),
            "difficulty": i % 3,
        }
        for i in range(n)
    ]


@pytest.fixture(autouse=True)
def _datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def _write(tmp_path: Path, rows: list[dict], how: str) -> Path:
    import datasets

    table = datasets.Dataset.from_list(rows)
    if how == "save_to_disk":
        table.save_to_disk(str(tmp_path / "saved"))
        return tmp_path / "saved"
    path = tmp_path / f"data.{how}"
    {"parquet": table.to_parquet, "jsonl": table.to_json}[how](str(path))
    return path


@pytest.mark.parametrize("how", ["jsonl", "parquet", "save_to_disk"])
def test_a_conversational_maths_dataset_keeps_its_system_turn_completion_and_columns(tmp_path: Path, how: str) -> None:
    task = MathTask(
        source="hub", hub_id=str(_write(tmp_path, sums(), how)), question="prompt", answer="solution", eval_fraction=1.0
    )
    problems = {p.prompt: p for p in task.problems("eval")}
    three = problems["What is 3 + 3?"]
    assert three.answer == "6" and three.completion == "3 + 3 = 6, so \\boxed{6}"
    assert three.columns == {"solution": "6", "difficulty": 0}  # TRL's reward kwargs: all but prompt and completion
    # asked as written: the system turn survives and the task adds no instruction of its own
    assert task.messages(three) == [SYSTEM, {"role": "user", "content": "What is 3 + 3?"}]
    assert task.score(three, "\\boxed{6}").rewards["correct"] == 1.0


def test_a_plain_prompt_column_and_a_string_completion_read_as_before(tmp_path: Path) -> None:
    rows = [{"prompt": "What is 2 + 5?", "completion": "\\boxed{7}", "answer": "7", "source": "mine"}]
    path = tmp_path / "rows.jsonl"
    import datasets

    datasets.Dataset.from_list(rows).to_json(str(path))
    task = MathTask(source="jsonl", path=str(path), question="prompt", eval_fraction=1.0)
    (problem,) = task.problems("eval")
    assert problem.messages is None and problem.completion == "\\boxed{7}"
    assert problem.columns == {"answer": "7", "source": "mine"}
    assert task.messages(problem) == [{"role": "user", "content": f"What is 2 + 5?\n\n{task.instruction}"}]


@pytest.mark.parametrize("how", ["jsonl", "save_to_disk"])
def test_trl_s_prompt_column_is_read_without_mapping(tmp_path: Path, how: str) -> None:
    """A dataset made for TRL names its question column ``prompt``: read as the question, not refused."""
    rows = [r | {"answer": r.pop("solution")} for r in sums()]
    source = (
        {"source": "jsonl", "path": str(_write(tmp_path, rows, "jsonl"))}
        if how == "jsonl"
        else {"source": "hub", "hub_id": str(_write(tmp_path, rows, how))}
    )
    task = MathTask(**source, eval_fraction=1.0)
    three = {p.prompt: p for p in task.problems("eval")}["What is 3 + 3?"]
    assert three.answer == "6" and task.messages(three)[0] == SYSTEM
    assert three.columns == {"answer": "6", "difficulty": 0}  # what TRL passes a reward: all but prompt, completion
    choice = [{"prompt": [{"role": "user", "content": "Pick the even number."}], "options": ["3", "4"], "answer": "B"}]
    (mc,) = MMLUProTask(source="jsonl", path=str(_write(tmp_path, choice, "jsonl")), eval_fraction=1.0).problems("eval")
    assert mc.prompt == "Pick the even number." and mc.answer == "B" and "prompt" not in mc.columns


def test_a_hint_goes_into_the_conversation_s_user_turn(tmp_path: Path) -> None:
    task = MathTask(
        source="hub",
        hub_id=str(_write(tmp_path, sums(), "parquet")),
        question="prompt",
        answer="solution",
        eval_fraction=1.0,
        misleading_hint=True,
    )
    problem = task.problems("eval")[0]
    messages = task.messages(problem)
    assert messages[0] == SYSTEM and problem.meta["hint_sentence"] in messages[-1]["content"]


def test_sft_trains_on_the_data_s_completion(tmp_path: Path) -> None:
    task = MathTask(
        source="hub",
        hub_id=str(_write(tmp_path, sums(2), "jsonl")),
        question="prompt",
        answer="solution",
        eval_fraction=1.0,
    )
    problems = task.problems("eval")
    examples, stats = SFTTrainer(steps=1).build_targets(FakeEngine(["unused"]), task, problems)
    assert stats["examples"] == 2
    assert {e.target for e in examples} == {p.completion for p in problems}
    assert all(e.messages[0] == SYSTEM for e in examples)  # the prompt it trains under is the conversation


def test_the_chat_template_gets_the_system_turn(tmp_path: Path, tiny_policy) -> None:
    from harness.engine.tokens import encode_chat

    task = MathTask(
        source="hub",
        hub_id=str(_write(tmp_path, sums(1), "parquet")),
        question="prompt",
        answer="solution",
        eval_fraction=1.0,
    )
    (problem,) = task.problems("eval")
    text = tiny_policy.tokenizer.decode(encode_chat(tiny_policy.tokenizer, task.messages(problem)))
    assert SYSTEM["content"] in text and "What is 0 + 0?" in text


def test_multiple_choice_and_code_take_conversations_too(tmp_path: Path) -> None:
    choice = [
        {
            "prompt": [SYSTEM, {"role": "user", "content": "What is 3 x 3?\nA) 6\nB) 9"}],
            "options": ["6", "9"],
            "answer": "B",
            "topic": "maths",
        }
    ]
    task = MMLUProTask(
        source="hub", hub_id=str(_write(tmp_path, choice, "parquet")), question="prompt", eval_fraction=1.0
    )
    (problem,) = task.problems("eval")
    assert task.messages(problem) == choice[0]["prompt"] and problem.columns["topic"] == "maths"
    assert task.score(problem, "The answer is (B).").rewards["correct"] == 1.0

    code = [
        {
            "prompt": [SYSTEM, {"role": "user", "content": "Write double(x) returning twice x."}],
            "entry_point": "double",
            "tests": ["assert double(2) == 4"],
            "level": "easy",
            "completion": [{"role": "assistant", "content": "```python\ndef double(x):\n    return 2 * x\n```"}],
        }
    ]
    (tmp_path / "code").mkdir()
    task = CodeTask(source="hub", hub_id=str(_write(tmp_path / "code", code, "jsonl")), eval_fraction=1.0)
    (problem,) = task.problems("eval")
    assert task.messages(problem) == code[0]["prompt"] and problem.columns["level"] == "easy"
    assert task.score(problem, problem.completion).rewards["all_pass"] == 1.0


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ([SYSTEM], r"'problem' is a conversation whose last turn is 'system'; it must end with the user's turn"),
        ([{"role": "user", "content": 3}], r"'problem' message 0 must be \{'role': system \| user \| assistant"),
        (None, r"'problem' must be a non-empty string or a list of chat messages"),
    ],
)
def test_a_bad_conversation_is_one_line_naming_the_row(tmp_path: Path, prompt, message) -> None:
    import json

    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"problem": prompt, "answer": "1"}) + "\n")
    with pytest.raises(ValueError, match=rf"^{path} row 0 \(line 1\): {message}"):
        MathTask(source="jsonl", path=str(path), eval_fraction=1.0).problems("eval")
