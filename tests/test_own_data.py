"""Own data without packaging: datasets written to disk by `datasets` itself (save_to_disk, parquet, JSON lines, CSV)
read through a task's ``hub_id`` with column mapping and an answer pattern (tasks/columns.py, tasks/hub_data.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.tasks.code import CodeTask
from harness.tasks.math import MathTask
from harness.tasks.mmlu_pro import MMLUProTask

GSM8K = {  # two rows in GSM8K's shape: the answer column is a worked solution ending in "#### <answer>"
    "question": [
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did Natalia sell altogether in April and May?",
        "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
        "How much did she earn?",
    ],
    "answer": [
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
        "altogether in April and May.\n#### 72",
        "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = "
        "$<<0.2*50=10>>10.\n#### 10",
    ],
}
GSM8K_OPTIONS = {
    "source": "hub",
    "question": "question",
    "answer": "answer",
    "answer_pattern": "#### (.+)",
    "eval_fraction": 1.0,
}


@pytest.fixture(autouse=True)
def _datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_dataset's Arrow cache for the files read below stays in the test's folder."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def _write(tmp_path: Path, columns: dict[str, list], how: str) -> Path:
    """``columns`` written by datasets itself, the way a user would have saved them."""
    import datasets

    table = datasets.Dataset.from_dict(columns)
    if how == "save_to_disk":
        table.save_to_disk(str(tmp_path / "saved"))
        return tmp_path / "saved"
    if how == "dataset_dict":
        datasets.DatasetDict({"train": table.select([0]), "test": table.select([1])}).save_to_disk(
            str(tmp_path / "saved_dict")
        )
        return tmp_path / "saved_dict"
    path = tmp_path / f"data.{how}"
    {"parquet": table.to_parquet, "jsonl": table.to_json, "csv": lambda p: table.to_csv(p, index=False)}[how](str(path))
    return path


@pytest.mark.parametrize("how", ["save_to_disk", "parquet", "jsonl", "csv"])
def test_gsm8k_shaped_data_loads_through_column_mapping_and_the_answer_pattern(tmp_path: Path, how: str) -> None:
    path = _write(tmp_path, GSM8K, how)
    task = MathTask(hub_id=str(path), **GSM8K_OPTIONS)
    problems = {p.prompt: p for p in task.problems("eval")}
    assert [problems[q].answer for q in GSM8K["question"]] == ["72", "10"]  # the pattern's group, not the solution
    assert problems[GSM8K["question"][0]].meta["raw_answer"] == GSM8K["answer"][0]  # the worked solution is kept
    source = task.data_source()
    assert source["dataset"] == str(path) and source["version"].startswith("sha256:")
    assert source["columns"] == {"question": "question"} and source["answer_pattern"] == "#### (.+)"
    assert source["skipped_no_answer_match"] == 0
    # the extracted answer is what a completion is checked against
    assert task.score(problems[GSM8K["question"][0]], "So she sold \\boxed{72} clips.").rewards["correct"] == 1.0


def test_a_saved_dataset_dict_keeps_its_splits(tmp_path: Path) -> None:
    task = MathTask(hub_id=str(_write(tmp_path, GSM8K, "dataset_dict")), **GSM8K_OPTIONS)
    assert [p.answer for p in task.problems("train")] == ["72"] and [p.answer for p in task.problems("eval")] == ["10"]
    assert task.data_source()["split"] == "native train/test"


def test_a_missing_column_is_one_line_naming_it_the_columns_and_the_source(tmp_path: Path) -> None:
    path = _write(tmp_path, GSM8K, "parquet")
    with pytest.raises(ValueError) as error:  # today's column names on GSM8K's shape
        MathTask(source="hub", hub_id=str(path)).problems("eval")
    text = str(error.value)
    assert "\n" not in text and "'problem'" in text and "columns: question, answer" in text and str(path) in text
    assert "task.question=" in text
    with pytest.raises(ValueError, match=r"no column 'prompt' for the question \(columns: question, answer\)"):
        MathTask(**{**GSM8K_OPTIONS, "question": "prompt"}, hub_id=str(path)).problems("eval")


def test_rows_the_pattern_finds_nothing_in_are_dropped_and_counted(tmp_path: Path) -> None:
    columns = {"question": [*GSM8K["question"], "What is 2 + 2?"], "answer": [*GSM8K["answer"], "four"]}
    task = MathTask(hub_id=str(_write(tmp_path, columns, "parquet")), **GSM8K_OPTIONS)
    assert sorted(p.answer for p in task.problems("eval")) == ["10", "72"]
    assert task.data_source()["skipped_no_answer_match"] == 1
    nothing = MathTask(hub_id=str(_write(tmp_path, columns, "jsonl")), **{**GSM8K_OPTIONS, "answer_pattern": "@@(.+)"})
    with pytest.raises(ValueError, match=r"^math: answer_pattern '@@\(\.\+\)' matched no answer in .*3 rows"):
        nothing.problems("eval")


def test_unmapped_sources_keep_their_data_source_and_mapped_ones_differ(tmp_path: Path) -> None:
    plain = MathTask()
    assert "columns" not in plain.data_source() and "answer_pattern" not in plain.data_source()
    path = tmp_path / "rows.jsonl"
    path.write_text('{"problem": "What is 2 + 2?", "answer": "The sum is 4. #### 4"}\n')
    unmapped = MathTask(source="jsonl", path=str(path), eval_fraction=1.0)
    mapped = MathTask(source="jsonl", path=str(path), eval_fraction=1.0, answer_pattern="#### (.+)")
    assert unmapped.problems("eval")[0].answer == "The sum is 4. #### 4" and mapped.problems("eval")[0].answer == "4"
    assert unmapped.problems("eval")[0].id == mapped.problems("eval")[0].id  # the same problem, another reference
    assert mapped.data_source() != unmapped.data_source()


@pytest.mark.parametrize("options", [{"question": "q"}, {"answer_pattern": "#### (.+)"}])
def test_column_options_are_refused_for_the_built_in_sources(options: dict) -> None:
    with pytest.raises(ValueError, match=r"^math: .*source jsonl or hub.*'gym-arithmetic'"):
        MathTask(**options)


def test_a_bad_pattern_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^math: answer_pattern '#### \(' is not a regular expression"):
        MathTask(source="hub", answer_pattern="#### (")


def test_mmlu_shaped_data_maps_question_choices_and_an_index_answer(tmp_path: Path) -> None:
    """cais/mmlu's shape: choices (a list) and answer (the option's index)."""
    columns = {
        "question": ["Which gas do plants take in?", "What is 3 x 3?"],
        "choices": [["oxygen", "carbon dioxide", "helium", "neon"], ["6", "9", "12", "3"]],
        "answer": [1, 1],
        "subject": ["biology", "maths"],
    }
    task = MMLUProTask(
        source="hub", hub_id=str(_write(tmp_path, columns, "parquet")), options="choices", eval_fraction=1.0
    )
    problems = {p.meta["question"]: p for p in task.problems("eval")}
    nine = problems["What is 3 x 3?"]
    assert [p.answer for p in problems.values()] == ["B", "B"] and nine.meta["options"] == ["6", "9", "12", "3"]
    assert task.score(nine, "The answer is (B).").rewards["correct"] == 1.0
    assert task.score(nine, "The answer is (A).").rewards["correct"] == 0.0
    assert task.data_source()["columns"] == {"options": "choices"}
    with pytest.raises(ValueError, match=r"no column 'options' for the options \(columns: question, choices, "):
        MMLUProTask(source="hub", hub_id=str(tmp_path / "data.parquet"), eval_fraction=1.0).problems("eval")


def test_mmlu_answer_pattern_reads_the_letter(tmp_path: Path) -> None:
    columns = {"q": ["What is 3 x 3?"], "opts": [["6", "9"]], "label": ["Answer: (B)"]}
    task = MMLUProTask(
        source="hub",
        hub_id=str(_write(tmp_path, columns, "jsonl")),
        question="q",
        options="opts",
        answer="label",
        answer_pattern=r"\(([A-J])\)",
        eval_fraction=1.0,
    )
    assert [p.answer for p in task.problems("eval")] == ["B"]


def test_code_reads_another_dataset_in_the_jsonl_schema_through_its_columns(tmp_path: Path) -> None:
    columns = {
        "text": ["Write a function double(x) that returns twice x."],
        "func": ["double"],
        "checks": [["assert double(2) == 4", "assert double(-1) == -2"]],
    }
    path = _write(tmp_path, columns, "parquet")
    task = CodeTask(
        source="hub", hub_id=str(path), prompt="text", entry_point="func", tests="checks", eval_fraction=1.0
    )
    (problem,) = task.problems("eval")
    assert problem.meta["entry_point"] == "double" and len(problem.meta["tests"]) == 2
    rewards = task.score(problem, "```python\ndef double(x):\n    return 2 * x\n```").rewards
    assert rewards["all_pass"] == 1.0 and rewards["pass_fraction"] == 1.0
    assert task.data_source()["columns"] == {"prompt": "text", "entry_point": "func", "tests": "checks"}
    with pytest.raises(ValueError, match=r"no column 'tests' for the tests \(columns: text, func, checks\)"):
        CodeTask(source="hub", hub_id=str(path), prompt="text", entry_point="func", eval_fraction=1.0).problems("eval")


def test_code_refuses_column_options_on_a_schema_it_knows() -> None:
    with pytest.raises(ValueError, match=r"^code: prompt, entry_point and tests map the columns"):
        CodeTask(prompt="text")
