"""What a TRL user brings, through the CLI in fresh processes on the tiny model: a conversational dataset written by
`datasets` with a column of its own, and a reward function in TRL's batch form that reads that column."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tiny_runs import CEILING, harness_env, only_run, tiny_argv

SYSTEM = "You add numbers. Give the result alone."
TINY_GRPO = tiny_argv(task="math", steps=2, k=1, no_save_model=True)

REWARDS = '''
import json

def by_difficulty(prompts, completions, difficulty, **kwargs):
    """TRL's form: prompts and completions as conversations, the dataset's extra columns by name."""
    with open("calls.jsonl", "a") as f:
        f.write(json.dumps({"prompts": prompts, "completions": completions, "difficulty": difficulty,
                            "others": sorted(kwargs)}) + "\\n")
    return [1.0 / (1 + len(c[0]["content"])) if d == "easy" else 0.0 for c, d in zip(completions, difficulty)]
'''


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=CEILING,
    )


def test_grpo_trains_on_a_chat_dataset_with_a_batch_reward_reading_its_column(tmp_path: Path) -> None:
    import datasets

    rows = [
        {
            "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {i} + {i + 3}?"}],
            "solution": str(2 * i + 3),
            "difficulty": "easy" if i % 2 else "hard",
        }
        for i in range(16)
    ]
    datasets.Dataset.from_list(rows).to_json(str(tmp_path / "sums.jsonl"))
    (tmp_path / "myrewards.py").write_text(REWARDS)
    done = _cli(
        [
            *TINY_GRPO,
            "--set",
            "task.source=hub",
            "--set",
            "task.hub_id=./sums.jsonl",
            "--set",
            "task.question=prompt",
            "--set",
            "task.answer=solution",
            "--set",
            "task.eval_fraction=0.5",
            "--reward",
            "myrewards:by_difficulty",
            "--out",
            "runs",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    run = only_run(tmp_path / "runs")
    assert json.loads((run / "manifest.json").read_text())["status"] == "complete"

    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    by_question = {r["prompt"][1]["content"]: r for r in rows}
    for call in calls:  # every batch got the dataset's own column, row for row, and its conversations
        assert len(call["difficulty"]) == len(call["prompts"]) == len(call["completions"])
        for prompt, difficulty in zip(call["prompts"], call["difficulty"], strict=True):
            assert prompt == by_question[prompt[1]["content"]]["prompt"]  # the system turn reached the function
            assert difficulty == by_question[prompt[1]["content"]]["difficulty"]
        assert all(c[0]["role"] == "assistant" for c in call["completions"])
        # every other column but the prompt, by its own name, and what TRL passes beside them
        assert call["others"] == ["completion_ids", "solution", "trainer_state"]
    assert max(len(c["completions"]) for c in calls) > 1  # batches, not one answer at a time

    steps = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 2 and all("reward/by_difficulty" in s for s in steps)
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    train = [s for s in samples if s["phase"] == "train"]
    assert len(train) == 4
    for s in train:  # what the function returned is the component GRPO trained on
        easy = by_question[s["prompt"]]["difficulty"] == "easy"
        assert s["rewards"]["by_difficulty"] == (1 / (1 + len(s["text"])) if easy else 0.0)


def test_sft_trains_on_a_conversational_dataset_s_completions(tmp_path: Path) -> None:
    import datasets

    rows = [
        {
            "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {i} + 1?"}],
            "completion": [{"role": "assistant", "content": f"{i} + 1 = {i + 1}, so \\boxed{{{i + 1}}}"}],
            "answer": str(i + 1),
        }
        for i in range(12)
    ]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "sums"))
    sizes = {"trainer.batch_size": 2, "searcher.n": 1}
    data = {"task.source": "hub", "task.hub_id": "./sums", "task.question": "prompt", "task.eval_fraction": 0.5}
    done = _cli(
        tiny_argv("sft", task="math", limit=1, train_limit=3, k=1, no_save_model=True, sets=sizes | data, out="runs"),
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    run = only_run(tmp_path / "runs")
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    targets = [s["text"] for s in samples if s["phase"] == "train-sft"]
    completions = {r["completion"][0]["content"] for r in rows}
    assert len(targets) == 3 and set(targets) <= completions  # the data's completions, not "\boxed{answer}"
    assert json.loads((run / "manifest.json").read_text())["status"] == "complete"
