from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.searchers.evolve_prompt import apply_diff, build_prompt, child_text, extract_code, format_rewards


@dataclass
class Cand:
    id: int
    text: str
    rewards: dict[str, float]
    fitness: float
    feedback: str = ""


PARENT_CODE = "def add(a, b):\n    return a - b"
PARENT = Cand(
    1,
    f"Here it is:\n```python\n{PARENT_CODE}\n```\nDone.",
    {"test_0": 1.0, "test_1": 0.0},
    0.5,
    "test_1: assert add(2, 2) == 4 failed",
)
TOP = Cand(2, "```python\ndef add(a, b):\n    return a + b + 0\n```", {"test_0": 1.0, "test_1": 1.0}, 1.0)
DIVERSE = Cand(
    3,
    "```python\ndef add(a, b):\n    return sum([a, b])\n```",
    {"test_0": 0.0, "test_1": 1.0},
    0.25,
    "test_0: TypeError",
)
TASK = [
    {"role": "system", "content": "You are a careful programmer."},
    {"role": "user", "content": "Write add(a, b) returning the sum."},
]
DIFF = "<<<<<<< SEARCH\n{}\n=======\n{}\n>>>>>>> REPLACE"


def test_prompt_shows_problem_parent_and_others_and_keeps_system():
    out = build_prompt(TASK, PARENT, [TOP, PARENT], [DIVERSE])
    assert [m["role"] for m in out] == ["system", "user"]
    assert out[0] == TASK[0]
    text = out[1]["content"]
    assert "Write add(a, b) returning the sum." in text
    assert PARENT_CODE in text and "Done." not in text  # the parent's code, without its prose
    assert "test_0=1 test_1=0" in text and "0.500" in text and "assert add(2, 2) == 4 failed" in text
    assert "return a + b + 0" in text and "test_0=1 test_1=1" in text and "1.000" in text
    assert "return sum([a, b])" in text and "test_0: TypeError" in text and "0.250" in text
    assert text.count(PARENT_CODE) == 1  # the parent listed among the top is not shown twice
    assert text.index("return a + b + 0") < text.index("return sum([a, b])")  # top before diverse
    assert "single ```python code block" in text and "SEARCH" not in text


def test_prompt_omits_empty_sections_and_deduplicates_across_them():
    text = build_prompt(TASK, PARENT, [], [PARENT])[-1]["content"]
    assert "Best solutions" not in text and "Other approaches" not in text
    text = build_prompt(TASK, PARENT, [TOP], [TOP, DIVERSE])[-1]["content"]
    assert text.count("return a + b + 0") == 1 and "return sum([a, b])" in text


def test_prompt_diff_mode_asks_for_search_replace_blocks():
    text = build_prompt(TASK[1:], PARENT, [TOP], [], mode="diff")[-1]["content"]
    assert "<<<<<<< SEARCH" in text and "=======" in text and ">>>>>>> REPLACE" in text
    assert "single ```python code block" not in text
    assert text.rstrip().endswith("applied in order.")  # the instruction comes last
    with pytest.raises(ValueError, match="unknown mode"):
        build_prompt(TASK, PARENT, [], [], mode="patch")


def test_prompt_for_math_answers_and_long_texts():
    long = Cand(5, "The answer is " + "9" * 500 + " so \\boxed{7}", {"correct": 0.0, "boxed": 1.0}, 0.1)
    other = Cand(6, "x" * 50, {"correct": 1.0, "boxed": 1.0}, 2 / 3)
    out = build_prompt([{"role": "user", "content": "What is 3+4?"}], long, [other], [], max_chars=100)
    assert len(out) == 1 and out[0]["role"] == "user"
    text = out[0]["content"]
    assert "correct=0 boxed=1" in text and "0.667" in text and "Feedback" not in text
    assert "The answer is " + "9" * 86 + "\n..." in text and "9" * 87 not in text and "\\boxed{7}" not in text
    assert "x" * 50 in text and "x" * 50 + "\n..." not in text  # short texts are not cut
    assert "```python" not in text and "format asked for in the problem" in text


def test_format_rewards_is_compact():
    assert (
        format_rewards({"correct": 1.0, "boxed": 0.0, "len": 0.12345, "neg": -0.0})
        == "correct=1 boxed=0 len=0.123 neg=0"
    )


def test_extract_code_picks_the_last_code_block():
    text = "```python\nfirst\n```\nthen\n```\nsecond\n```\n```text\nprose\n```"
    assert extract_code(text) == "second"
    assert extract_code("```py\na = 1\n```\n```python\n\n```") == "a = 1"  # an empty block is no code
    assert extract_code("```python\nx = 1\ny = 2") == "x = 1\ny = 2"  # unclosed: runs to the end
    assert extract_code("just an answer: 42") is None


def test_apply_diff_applies_blocks_in_order_to_the_first_occurrence():
    code = "a = 1\nb = 2\na = 1\nc = 3"
    completion = "Edits:\n" + DIFF.format("a = 1", "a = 10") + "\nand\n" + DIFF.format("a = 10\nb = 2", "b = 20")
    assert apply_diff(code, completion) == "b = 20\na = 1\nc = 3"  # the second block sees the first's result
    assert apply_diff(code, DIFF.format("b = 2\n", "")) == "a = 1\na = 1\nc = 3"  # an empty replacement deletes


def test_apply_diff_ignores_trailing_whitespace():
    code = "def f(x):   \n    return x\t\nprint(f(1))"
    completion = DIFF.format("def f(x):\n    return x  ", "def f(x):\n    return x + 1")
    assert apply_diff(code, completion) == "def f(x):\n    return x + 1\nprint(f(1))"


def test_apply_diff_fails_on_missing_search_and_on_no_blocks():
    code = "a = 1\nb = 2"
    assert apply_diff(code, DIFF.format("a = 1", "a = 5") + "\n" + DIFF.format("z = 9", "z = 0")) is None
    assert apply_diff(code, DIFF.format("    a = 1", "a = 5")) is None  # leading whitespace still matters
    assert apply_diff(code, DIFF.format("", "a = 5")) is None  # an empty search says nowhere
    assert apply_diff(code, "```python\na = 5\n```") is None


def test_child_text_each_way():
    diff = DIFF.format("    return a - b", "    return a + b")
    assert child_text(PARENT.text, diff, mode="diff") == ("```python\ndef add(a, b):\n    return a + b\n```", "diff")
    assert child_text(PARENT.text, DIFF.format("return a * b", "x"), mode="diff") == (None, "failed")
    rewrite = "Fixed:\n```python\ndef add(a, b):\n    return a + b\n```"
    assert child_text(PARENT.text, rewrite, mode="rewrite") == (rewrite, "rewrite")
    assert child_text(PARENT.text, rewrite, mode="diff") == (rewrite, "rewrite")  # no blocks: falls back
    assert child_text("So \\boxed{6}.", "So \\boxed{7}.", mode="rewrite") == ("So \\boxed{7}.", "text")
    assert child_text(PARENT.text, "  \n", mode="rewrite") == (None, "failed")
    assert child_text(PARENT.text, "I would add them.", mode="diff") == (None, "failed")  # no edits, no code


def test_child_text_diff_on_a_text_parent_stays_text():
    assert child_text("x = 2, so \\boxed{2}", DIFF.format("\\boxed{2}", "\\boxed{3}"), mode="diff") == (
        "x = 2, so \\boxed{3}",
        "diff",
    )
