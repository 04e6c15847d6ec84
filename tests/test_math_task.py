"""The math task: answer extraction on chat-model habits, scoring, sources, splits. Offline and fast."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.tasks.math import HENDRYCKS, HENDRYCKS_SUBJECTS, INSTRUCTION, MathTask, word_placeholders
from harness.tasks.math_answers import (
    answers_match,
    boxed_contents,
    extract_answer,
    extract_lenient,
    read_answer,
    read_lenient,
)
from harness.types import Problem, Task, scalarize

FIXTURES = Path(__file__).parent / "fixtures" / "math"
EXTRACTION = Path(__file__).parent / "fixtures" / "extraction"
REPO = Path(__file__).resolve().parents[1]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _problem(answer: str, prompt: str = "Calculate 23 + 5.") -> Problem:
    return Problem(id="p", prompt=prompt, answer=answer)


# ----------------------------------------------------------------------------------------------------------------
# Extraction and scoring
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "answer", "from_box"),
    [
        ("23 + 5 is 28, so the answer is $\\boxed{28}$.", "28", True),
        ("Half of one is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}", True),
        ("\\boxed{5}, I checked it: \\boxed{ 5 }", "5", True),  # the same value boxed again commits to it
        ("The answer is 42.", "42", False),
        ("**Answer:** 7 apples", "7", False),
        ("So the final answer is $\\frac{3}{4}$.", "\\frac{3}{4}", False),
        ("23 + 5 = 28", "28", False),
        ("We add 3 and 5, and finally get 8 in total", "8", False),
        ("The answer is that we add them. That makes 1,000 dollars", "1000", False),
        ("It costs \\$15.", "15", False),
        ("The answer is 4 and 5 becomes 6", "4", False),  # the value alone, not the words after it
        ("So, 23 + 5 = 20 + 8 = 28.", "28", False),  # a chain: the last right-hand side
        ("23 + 5 = 28\nThis was an easy one.", "28", False),  # a closing remark without digits
        ("28 is the final answer.", "28", False),
        ("Let me compute.\n\n28", "28", False),  # a final line that is a value alone
        ("The answer is 27. Wait, 23 + 5 = 28, so the answer is 28.", "28", False),  # the last commitment wins
        ("**Final answer: 7**", "7", False),  # markdown emphasis around the phrase
        ("Final Answer: **42**", "42", False),  # or around the value
        ('The answer is "25".', "25", False),  # a quoted value
        ("The total is 1,234.", "1234", False),  # thousands separators
        ("So the answer is 12. Let me know if you have questions!", "12", False),  # a closing remark after it
    ],
)
def test_extract_answer_on_chat_model_habits(completion: str, answer: str, from_box: bool) -> None:
    assert extract_answer(completion) == (answer, from_box)


@pytest.mark.parametrize(
    "completion",
    [
        "",
        "I don't know.",
        "Let me think about it",
        "\\boxed{",
        "\\boxed{ }",
        "\\boxed{} I am not sure, maybe 12",  # an empty box is no answer, and "maybe 12" a guess (math-v2: 12)
        "... so 3 + 4 is a sum, and 12 is another number",  # a number merely written last (math-v2: 12)
        "First the tens: 20 + 0 = 20. Then the ones: 3 + 5 = 8. Then we",  # cut off mid-work (math-v2: 8)
        "x + 2 = 7",  # an equation in x states no value
        "=23 + 5",  # the question written again
        "The answer is that we need to add them together",
    ],
)
def test_no_committed_answer_is_unparsed(completion: str) -> None:
    score = MathTask().score(_problem("28"), completion)
    assert score.unparsed and score.extracted is None
    assert {k: v for k, v in score.rewards.items() if k != "lenient_correct"} == {
        "correct": 0.0,
        "boxed": 0.0,
        "strict": 0.0,
        "length": 0.0,
    }


def test_a_guess_counts_only_in_lenient_correct() -> None:
    """A number written last, without a commitment, is unparsed: not right by luck. The old reading is kept,
    as "lenient_correct" with weight 0 (reported, never trained on)."""
    task = MathTask()
    guess = task.score(_problem("28"), "Adding is fun, and 23 and 5 make me think of 28")
    assert guess.unparsed and guess.extracted is None and guess.rewards["correct"] == 0.0
    assert guess.rewards["lenient_correct"] == 1.0
    assert extract_lenient("Adding is fun, and 23 and 5 make me think of 28") == ("28", False)
    committed = task.score(_problem("28"), "23 + 5 = 27")
    assert committed.extracted == "27" and committed.rewards["lenient_correct"] == committed.rewards["correct"] == 0.0
    assert task.reward_weights["lenient_correct"] == 0.0
    assert scalarize(guess.rewards, task.reward_weights) == 0.0
    assert read_answer("The answer is 28.").committed and not read_lenient("think of 28").committed


def _rows() -> list[dict]:
    return [json.loads(line) for line in (EXTRACTION / "math.jsonl").read_text(encoding="utf-8").splitlines()]


def _fixture(source: str) -> list[dict]:
    return [r for r in _rows() if r["source"] == source]


def _batch(row: dict) -> str:
    """ "synthetic", or the batch a real row's id names ("math-real-t07-05" -> "t07"): README.md there."""
    return "synthetic" if row["source"] == "synthetic" else row["id"].split("-")[2]


def _agrees(label: str | None, value: str | None) -> bool:
    if label is None or value is None:
        return label is None and value is None
    return label.replace(" ", "") == value.replace(" ", "") or answers_match(label, value)


def _as_the_task_reads(row: dict) -> str | None:
    return read_answer(row["text"], question=row["problem"], placeholders=word_placeholders(INSTRUCTION)).value


@pytest.mark.parametrize("batch", sorted({_batch(r) for r in _rows()}))
def test_extraction_agrees_with_labels_read_by_hand(batch: str) -> None:
    """Labelled SmolLM2-135M outputs (real, per batch: the ones the rules were written on and the ones generated
    and labelled afterwards) and hand-written forms (synthetic): tests/fixtures/extraction/README.md.
    python bench/extraction_agreement.py prints the figures, the old extractor's beside them."""
    rows = [r for r in _rows() if _batch(r) == batch]
    assert len(rows) >= 16
    misses = [(r["id"], r["label"], read) for r in rows if not _agrees(r["label"], read := _as_the_task_reads(r))]
    assert (len(rows) - len(misses)) / len(rows) >= 0.95, misses
    # Rows labelled "commits to nothing" must stay unparsed: no value may be read into them by luck.
    guessed = [m for m in misses if m[1] is None]
    assert len(guessed) <= max(1, 0.05 * sum(r["label"] is None for r in rows)), guessed


def test_every_labelled_batch_is_checked() -> None:
    """Each batch labelled before the rules saw it (README.md there) is checked on its own above, none dropped."""
    batches = {"a", "b", "t1", "t07", "demo", "f1", "f05", "vspo", "f07", "synthetic"}
    assert batches <= {_batch(r) for r in _rows()}


@pytest.mark.parametrize(
    ("text", "extracted", "boxed"),
    [
        ("23 + 5 = 28. So the answer is \\boxed{yes}", "28", 0.0),  # a word in a box: no answer, no format reward
        ("23 + 5 = 28, so \\boxed{\\#28}", "28", 0.0),  # latex junk in a box: what came before it is read
        ("\\boxed{00:00:28}", None, 0.0),
        ("\\boxed{23 + 5}", None, 0.0),  # the sum written out
        ("23 x \\boxed{5}", None, 0.0),  # an operand
        ("We take \\boxed{4} to the power of 2.", None, 0.0),
        ("23 + 5 = \\Boxed{28}", "28", 0.0),  # a misspelt box: its value, not the format
        ("The sum is twenty-eight.", "28", 0.0),  # a number word
        ("28 is the result of 23 + 5.", "28", 0.0),
        ("23 + 5 should be 28.", "28", 0.0),
        ("Adding 23 and 5 is simply 28.", "28", 0.0),
        ("23 + 5 = 28. Note that 28 = 4 x 7.", "28", 0.0),  # a final aside is not the answer
        ("We add 23 and 5, which gives 28. This is the result of 20 + 3 + 5.", "28", 0.0),
        ("28\n\nThis was a simple addition.", "28", 0.0),  # opens with its value alone
        ("The result: 28Impressed", None, 0.0),  # a number run into a word
        ("\\boxed{28}", "28", 1.0),
        ("Half of it is \\boxed{x}", "x", 1.0),  # a variable is a value (a wrong one here)
    ],
)
def test_math_v9_reads_fresh_forms_and_no_junk_box(text: str, extracted: str | None, boxed: float) -> None:
    score = MathTask().score(_problem("28"), text)
    assert (score.extracted, score.rewards["boxed"]) == (extracted, boxed)


def test_placeholder_copied_from_the_instruction_is_never_an_answer_nor_boxed() -> None:
    task = MathTask()
    problem = Problem(id="p", prompt="Calculate 4 + 3.", answer="7")
    for text in ("4 + 3 = 7, so \\boxed{result}", "\\boxed{result}", "The result is \\boxed{ Result }."):
        score = task.score(problem, text)
        assert score.rewards["boxed"] == 0.0 and score.extracted != "result", text
    assert task.score(problem, "4 + 3 = 7, so \\boxed{result}").extracted == "7"  # what came before the copy


def test_real_fixture_is_mostly_unboxed_so_the_reward_keeps_signal() -> None:
    """SmolLM2-135M rarely boxes: its committed answers must count without a box, or "correct" would be ~0."""
    # batches a and b: generated under a prompt that did not show the box (later prompts do)
    committed = [
        read_answer(r["text"], question=r["problem"])
        for r in _fixture("real")
        if r["label"] is not None and _batch(r) in ("a", "b")
    ]
    assert len(committed) >= 40 and sum(r.boxed for r in committed) <= 3
    assert sum(r.value is not None for r in committed) >= 0.95 * len(committed)


def test_boxed_contents_match_nested_braces() -> None:
    text = "x \\boxed{\\frac{\\sqrt{3}}{2}} y \\fbox{7} z \\boxed{unclosed"
    assert boxed_contents(text) == ["\\frac{\\sqrt{3}}{2}", "7"]


def test_reward_vector_order_and_components() -> None:
    task = MathTask()
    problem = _problem("28")
    boxed_right = task.score(problem, "23 + 5 = 28, so \\boxed{28}")
    assert list(boxed_right.rewards) == ["correct", "boxed", "strict", "length", "lenient_correct"]
    assert boxed_right.rewards == {"correct": 1.0, "boxed": 1.0, "strict": 1.0, "length": 1.0, "lenient_correct": 1.0}
    assert boxed_right.primary == "correct" and boxed_right.success and boxed_right.extracted == "28"
    # Right but unboxed: correct (reported apart from strict), no format reward.
    assert task.score(problem, "23 + 5 = 28").rewards == {
        "correct": 1.0,
        "boxed": 0.0,
        "strict": 0.0,
        "length": 1.0,
        "lenient_correct": 1.0,
    }
    # Boxed but wrong: the format reward alone (and it is short).
    assert task.score(problem, "\\boxed{27}").rewards == {
        "correct": 0.0,
        "boxed": 1.0,
        "strict": 0.0,
        "length": 1.0,
        "lenient_correct": 0.0,
    }
    # Length is reported, not weighted by default; lenient_correct is reported with weight 0.
    assert task.reward_weights == {"correct": 1.0, "boxed": 0.5, "lenient_correct": 0.0}
    assert task.version == "math-v9"


@pytest.mark.parametrize(
    "hedge",
    [
        "\\boxed{20} \\boxed{22} \\boxed{28}",  # what a VSPO-trained SmolLM2-135M wrote: the last box is right
        "First \\boxed{3}, then I corrected it: \\boxed{ 28 }",
        "It is \\boxed{28} or \\boxed{27}. The answer is 28.",  # a phrase after a hedge does not undo it
    ],
)
def test_boxes_of_different_values_are_a_hedge_that_earns_nothing(hedge: str) -> None:
    assert read_answer(hedge).value is None and read_answer(hedge).form == "hedged"
    assert read_lenient(hedge).value is None  # the lenient reading does not guess the last number either
    score = MathTask().score(_problem("28"), hedge)
    assert score.unparsed and score.extracted is None
    assert score.rewards | {"length": 0} == {
        "correct": 0.0,
        "boxed": 0.0,
        "strict": 0.0,
        "length": 0,
        "lenient_correct": 0.0,
    }


def test_a_box_that_copies_the_instructions_placeholder_earns_no_format_reward() -> None:
    problem = _problem("28")
    task = MathTask()  # "Give the result in the form \boxed{result}."
    for copy in ("\\boxed{result}", "So: $\\boxed{ Result }$"):
        assert task.score(problem, copy).rewards | {"length": 0} == {
            "correct": 0.0,
            "boxed": 0.0,
            "strict": 0.0,
            "length": 0,
            "lenient_correct": 0.0,
        }
    assert task.score(problem, "23 + 5 = \\boxed{28}").rewards["boxed"] == 1.0
    # An instruction whose example box holds a value: copying the example is no format either, another value is.
    # Nor is the problem's sum boxed again, however the completion goes on; a boxed equation's value is a value.
    assert task.score(problem, "To calculate \\boxed{23 + 5}, we add.").rewards["boxed"] == 0.0
    assert task.score(problem, "\\boxed{23 + 5 = 28}").rewards["boxed"] == 1.0
    # The placeholder box is no answer: a value committed before it is read (the default model wrote such copies
    # after a right value in 6 of 48 answers, which scored correct 0), and with nothing before it nothing is.
    after = task.score(problem, "23 + 5 = 28. So the answer is \\boxed{result}.")
    assert (after.extracted, after.rewards["correct"], after.rewards["boxed"]) == ("28", 1.0, 0.0)
    assert task.score(problem, "\\boxed{result}").extracted is None
    shown = MathTask(instruction="Answer as in 2 + 3 = \\boxed{5}.")
    assert shown.score(problem, "\\boxed{5}").rewards["boxed"] == 0.0
    assert shown.score(problem, "\\boxed{28}").rewards["boxed"] == 1.0


@pytest.mark.parametrize(("chars", "length"), [(1, 1.0), (200, 1.0), (350, 0.75), (500, 0.5), (800, 0.0), (5000, 0.0)])
def test_length_component_falls_linearly_from_target_to_cap(chars: int, length: float) -> None:
    completion = "x" * (chars - 4) + " = 7" if chars > 4 else "7"  # ends in an answer, so it is parsed
    assert MathTask().score(_problem("28"), completion).rewards["length"] == pytest.approx(length)
    # Surrounding whitespace is not counted; a custom target and cap move the ramp.
    assert MathTask().score(_problem("28"), "\n\n" + completion + "  \n").rewards["length"] == pytest.approx(length)
    custom = MathTask(length_target=100, length_cap=300).score(_problem("28"), "x" * 196 + " = 7")
    assert custom.rewards["length"] == pytest.approx(0.5)


def test_length_weight_option_and_no_reward_for_saying_nothing() -> None:
    assert MathTask(length_weight="0.25").reward_weights == {
        "correct": 1.0,
        "boxed": 0.5,
        "length": 0.25,
        "lenient_correct": 0.0,
    }
    assert MathTask().score(_problem("28"), "").rewards["length"] == 0.0  # silence is not a concise answer
    assert MathTask().score(_problem("28"), "I don't know").rewards["length"] == 0.0


def test_strict_weight_pays_the_format_only_on_a_right_answer() -> None:
    task = MathTask(boxed_weight=0, strict_weight="1")
    assert task.reward_weights == {"correct": 1.0, "boxed": 0.0, "strict": 1.0, "lenient_correct": 0.0}
    weighted = {
        text: sum(w * task.score(_problem("28"), text).rewards[k] for k, w in task.reward_weights.items())
        for text in ("\\boxed{28}", "\\boxed{27}", "23 + 5 = 28")
    }
    assert weighted == {"\\boxed{28}": 2.0, "\\boxed{27}": 0.0, "23 + 5 = 28": 1.0}


def test_reference_completion_is_the_boxed_answer_right_boxed_and_strict() -> None:
    task = MathTask()
    reference = task.reference_completion(_problem("28"))
    assert reference == "\\boxed{28}"
    assert {k: task.score(_problem("28"), reference).rewards[k] for k in ("correct", "boxed", "strict")} == {
        "correct": 1.0,
        "boxed": 1.0,
        "strict": 1.0,
    }


def test_worked_reference_works_the_problems_expression_out_before_the_box() -> None:
    task = MathTask(worked_reference="true")  # as --set passes it
    worked = Problem(id="p", prompt="Calculate 23 + 5.", answer="28", meta={"expression": "23 + 5"})
    reference = task.reference_completion(worked)
    assert reference == "23 + 5 = 28, so the result is \\boxed{28}"
    assert {k: task.score(worked, reference).rewards[k] for k in ("correct", "boxed", "strict")} == {
        "correct": 1.0,
        "boxed": 1.0,
        "strict": 1.0,
    }
    assert task.reference_completion(_problem("28")) == "\\boxed{28}"  # no expression carried: the bare box
    assert MathTask().reference_completion(worked) == "\\boxed{28}"  # off by default


@pytest.mark.parametrize(
    "hack", ["\\boxed{23}", "\\boxed{5}", "\\boxed{23 + 5}", "\\boxed{23+5}", "The answer is 23 + 5."]
)
def test_operand_or_question_copied_into_the_answer_is_wrong(hack: str) -> None:
    score = MathTask().score(_problem("28"), hack)
    assert score.rewards["correct"] == 0.0 and score.rewards["strict"] == 0.0


@pytest.mark.parametrize(
    ("reference", "answer"),
    [
        ("0.5", "\\frac{1}{2}"),
        ("\\frac{1}{2}", "0.5"),
        ("1/2", "\\dfrac{1}{2}"),
        ("-18", "-18"),
        ("1000", "1,000"),
        ("1000", "1 000"),
        ("28", "x = 28"),
        ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt{3}"),
        ("2x+1", "1+2x"),
        ("\\text{(C)}", "(c)"),
    ],
)
def test_equivalent_forms_are_correct(reference: str, answer: str) -> None:
    assert answers_match(reference, answer)
    assert MathTask().score(_problem(reference), f"\\boxed{{{answer}}}").rewards["strict"] == 1.0


@pytest.mark.parametrize(
    ("reference", "answer"),
    # "71 19" for 71 + 19: math-verify read the juxtaposed operands as a mixed number's sum (the main job's trained
    # policy wrote exactly this, and evolve counted it solved)
    [("0.5", "\\frac{1}{3}"), ("28", "28, 23"), ("28", "28 or 23"), ("90", "71 19"), ("90", "45 45"), ("-2", "20 -22")],
)
def test_different_or_hedged_answers_are_wrong(reference: str, answer: str) -> None:
    assert not answers_match(reference, answer)


def test_pathological_answers_are_refused_quickly_in_any_thread() -> None:
    task, problem = MathTask(), _problem("28")
    results: list[float] = []

    def score_all() -> None:
        for answer in ("9^{9^{9^{9}}}", "(10^{100})!", "99999999!", "((((((((((1))))))))))", "x" * 5000):
            results.append(task.score(problem, f"\\boxed{{{answer}}}").rewards["correct"])
        results.append(task.score(problem, "\\boxed{28}").rewards["correct"])  # and it still works off main

    worker = threading.Thread(target=score_all)  # math-verify's SIGALRM timeout can't run here: must not raise
    worker.start()
    # A ceiling against a hang, not a claim about speed: unrefused, any one of these runs for hours or forever.
    worker.join(timeout=300)
    assert not worker.is_alive()
    assert results == [0.0] * 5 + [1.0]


_FRAGMENTS = [
    "\\boxed{",
    "\\fbox{",
    "{",
    "}",
    "28",
    "-3",
    "1/2",
    "\\frac{1}{2}",
    "^",
    "^{",
    "!",
    "=",
    "+",
    "(",
    ")",
    "The answer is ",
    "**Answer:** ",
    "$",
    ".",
    ",",
    " ",
    "\n",
    "\\sqrt{",
    "x",
    "apples",
    "\\text{",
    "9^{9^{",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(_FRAGMENTS), max_size=30).map("".join)))
def test_score_never_raises_and_rewards_are_in_unit_interval(completion: str) -> None:
    score = MathTask().score(_problem("28"), completion)
    assert list(score.rewards) == ["correct", "boxed", "strict", "length", "lenient_correct"]
    assert all(0.0 <= v <= 1.0 for v in score.rewards.values())
    assert score.unparsed == (score.extracted is None)
    assert score.rewards["strict"] <= min(score.rewards["correct"], score.rewards["boxed"])
    assert score.rewards["correct"] <= score.rewards["lenient_correct"]  # lenient reads more, never less


def test_messages_ask_for_a_boxed_answer() -> None:
    messages = MathTask().messages(_problem("28"))
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert messages[0]["content"].startswith("Calculate 23 + 5.") and "\\boxed{result}" in messages[0]["content"]


def test_instruction_option_replaces_the_request_after_the_problem() -> None:
    messages = MathTask(instruction="Answer as in 2 + 3 = \\boxed{5}.").messages(_problem("28"))
    assert messages[0]["content"] == "Calculate 23 + 5.\n\nAnswer as in 2 + 3 = \\boxed{5}."
    with pytest.raises(ValueError, match="instruction"):
        MathTask(instruction="  ")


# ----------------------------------------------------------------------------------------------------------------
# Sources and splits
# ----------------------------------------------------------------------------------------------------------------


def _assert_disjoint_and_deterministic(task: MathTask) -> None:
    train, evaluation = task.problems("train"), task.problems("eval")
    assert train and evaluation
    normalise = lambda p: " ".join(p.prompt.lower().split())  # noqa: E731
    assert not {normalise(p) for p in train} & {normalise(p) for p in evaluation}
    assert not {p.id for p in train} & {p.id for p in evaluation}
    for split in ("train", "eval"):
        problems = task.problems(split, seed=3)
        assert len({p.id for p in problems}) == len(problems)
        assert all(p.answer for p in problems)
    assert task.problems("train", limit=5, seed=1) == task.problems("train", limit=5, seed=1)
    assert len(task.problems("eval", limit=3)) == 3
    assert task.problems("train", limit=0) == []


def test_gym_arithmetic_default_is_easy_disjoint_and_stable() -> None:
    task = MathTask()
    assert isinstance(task, Task) and task.name == "math" and task.version
    _assert_disjoint_and_deterministic(task)
    problems = task.problems("train", limit=20)
    for p in problems:
        assert p.id.startswith("gym-arith-") and p.prompt.startswith("Calculate ")
        a, operator, b = p.meta["expression"].split()  # two terms, one operator, no parentheses or negation
        assert operator in "+-" and len(a) <= 2 and len(b) <= 2
        assert int(p.answer) == (int(a) + int(b) if operator == "+" else int(a) - int(b))
    # A fresh instance (a new run) gives the same problems with the same ids.
    assert MathTask().problems("train", limit=20) == problems
    source = task.data_source()
    assert source["dataset"] == "reasoning-gym/basic_arithmetic" and source["version"]
    assert "MATH" not in json.dumps(source)


def test_gym_arithmetic_knobs() -> None:
    task = MathTask(terms=3, min_digits=1, max_digits=1, operators="*", pool_size=200)
    for p in task.problems("eval", limit=10):
        operands = p.meta["expression"].split(" * ")
        assert len(operands) == 3 and all(len(n) == 1 for n in operands)
    assert task.data_source()["params"]["operators"] == ["*"]


def test_champ_is_disjoint_and_checkable() -> None:
    task = MathTask(source="champ")
    _assert_disjoint_and_deterministic(task)
    problems = task.problems("train") + task.problems("eval")
    assert all(p.id.startswith("champ-P_") for p in problems)
    assert all("@@" not in p.prompt for p in problems)  # the cleaned text, not the annotated one
    by_id = {p.id: p for p in problems}
    assert by_id["champ-P_Combinatorics_2"].answer == "252"  # "C(10, 5), or equivalently 252"
    assert "champ-P_Sequence_24" not in by_id  # "The sequence does not exist": prose, not checkable
    assert task.data_source()["dataset"].startswith("champ-dataset")


def test_jsonl_source(tmp_path: Path) -> None:
    task = MathTask(source="jsonl", path=str(FIXTURES / "tiny.jsonl"), eval_fraction=0.5)
    problems = {p.id: p for split in ("train", "eval") for p in task.problems(split)}
    assert len(problems) == 4
    assert problems["t2"].answer == "\\frac{1}{2}" and problems["t4"].meta == {"difficulty": "easy"}
    generated_id = next(i for i in problems if i.startswith("tiny-"))
    assert problems[generated_id].answer == "42"  # a number in the file becomes the answer string
    assert task.data_source()["version"].startswith("sha256:")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"problem": "What is 1 + 1?"}', "'answer'"),
        ('{"problem": "What is 1 + 1?", "answer": ["2"]}', "'answer'"),
        ('{"problem": 5, "answer": "5"}', "'problem'"),
        ('{"problem": "What is 1 + 1?", "answer": true}', "'answer'"),
        ('["What is 1 + 1?", "2"]', "expected an object"),
        ('{"problem": "What is 1 + 1?", "answer": ', "invalid JSON"),
    ],
)
def test_malformed_jsonl_row_names_file_and_row(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"problem": "What is 2 + 2?", "answer": "4"}\n\n' + line + "\n")
    with pytest.raises(ValueError) as error:
        MathTask(source="jsonl", path=str(path)).problems("train")
    text = str(error.value)
    assert "\n" not in text and str(path) in text and "row 1 (line 3)" in text and message in text


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple]:
    """datasets.load_dataset, served from tests/fixtures/math/<dataset>/<config>/<split>.jsonl (the real datasets
    JSON builder reads them, so column types are what the hub's parquet files give)."""
    import datasets

    real_load_dataset = datasets.load_dataset
    folders = {HENDRYCKS: FIXTURES / "hendrycks_math", "HuggingFaceH4/MATH-500": FIXTURES / "math500"}
    calls: list[tuple] = []

    def load_dataset(path: str, name: str | None = None, **kwargs):
        calls.append((path, name, kwargs.get("revision")))
        if path not in folders:
            raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)\nmore detail")
        files = {f.stem: str(f) for f in sorted((folders[path] / (name or "")).glob("*.jsonl"))}
        if not files:  # a subject the fixtures leave out
            return datasets.DatasetDict()
        loaded = real_load_dataset("json", data_files=files, cache_dir=str(tmp_path / "cache"))
        for split, table in loaded.items():  # where the hub's files are recorded, as datasets does for hub data
            table.info.download_checksums = {f"hf://datasets/{path}@{COMMIT}/{name}/{split}-0.parquet": {}}
        return loaded

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_hub_hendrycks_math_uses_its_splits(fake_hub: list[tuple]) -> None:
    task = MathTask(source="hub", hub_config="algebra", hub_revision="abc123")
    train, evaluation = task.problems("train"), task.problems("eval")
    assert fake_hub == [(HENDRYCKS, "algebra", "abc123")]
    assert sorted(p.answer for p in evaluation) == ["2x+1", "4"]  # "\boxed 4" form included
    # The train copy of a test problem is dropped; the unboxed solution is skipped.
    assert sorted(p.answer for p in train) == ["4", "\\frac{\\sqrt{3}}{2}"]
    assert all(p.id.startswith("hendrycks_math-") and p.meta["config"] == "algebra" for p in train + evaluation)
    assert {p.meta["level"] for p in train} == {"Level 1", "Level 2"} and "solution" in train[0].meta
    source = task.data_source()
    assert source["dataset"] == HENDRYCKS and source["config"] == "algebra" and source["version"] == "abc123"
    assert source["split"] == "native train/test" and source["skipped_no_boxed_answer"] == 1
    sin60 = next(p for p in train if "sin" in p.prompt)
    assert task.score(sin60, "So it is \\boxed{\\frac{1}{2}\\sqrt{3}}").rewards["strict"] == 1.0


def test_hub_hendrycks_math_without_config_loads_every_subject(fake_hub: list[tuple]) -> None:
    task = MathTask(source="hub")
    evaluation = task.problems("eval")
    assert [name for _, name, _ in fake_hub] == list(HENDRYCKS_SUBJECTS)
    assert {p.meta["config"] for p in evaluation} == {"algebra", "number_theory"}
    assert task.data_source()["version"] == COMMIT  # not pinned, but the commit read is recorded


def test_hub_math500_single_split_is_cut_by_content(fake_hub: list[tuple]) -> None:
    task = MathTask(source="hub", hub_id="HuggingFaceH4/MATH-500", eval_fraction=0.5)
    _assert_disjoint_and_deterministic(task)
    problems = task.problems("train") + task.problems("eval")
    assert fake_hub[0][:2] == ("HuggingFaceH4/MATH-500", None)
    assert len(problems) == 9 and all(p.id.startswith("test/prealgebra/") for p in problems)
    fraction = next(p for p in problems if p.id == "test/prealgebra/99.json")
    assert fraction.answer == "\\frac{3}{4}" and fraction.meta["level"] == 2 and fraction.meta["subject"]
    assert task.score(fraction, "The answer is 0.75.").rewards["correct"] == 1.0
    assert task.data_source()["split"] == "content-hash"


def test_hub_failure_is_one_line(fake_hub: list[tuple]) -> None:
    with pytest.raises(ValueError, match=r"^hub dataset 'nobody/nothing' .*Couldn't reach[^\n]*$"):
        MathTask(source="hub", hub_id="nobody/nothing").problems("eval")


@pytest.mark.parametrize(
    "options",
    [
        {"source": "nope"},
        {"source": "jsonl"},
        {"max_digits": 0},
        {"operators": "%"},
        {"eval_fraction": 0},
        {"length_weight": -1},
        {"strict_weight": -1},
        {"length_target": 500, "length_cap": 500},
    ],
)
def test_bad_options_fail_at_construction(options: dict) -> None:
    with pytest.raises(ValueError, match="math"):
        MathTask(**options)


# ----------------------------------------------------------------------------------------------------------------
# Registration
# ----------------------------------------------------------------------------------------------------------------


def test_import_tasks_is_cheap() -> None:
    code = (
        "import sys, harness.tasks; "
        "print(sorted({'torch', 'datasets', 'math_verify', 'harness.tasks.math'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_math_is_registered_lazily() -> None:
    from harness import tasks
    from harness.plugins.registry import Registry

    registry = Registry("task")
    tasks.harness_register_tasks(registry=registry)
    entry = registry.get("math")
    assert entry.factory == "harness.tasks.math:MathTask" and entry.description
    assert isinstance(entry.create(), MathTask)


def test_misleading_hint_option_adds_a_wrong_hint_and_keeps_the_reference():
    plain = MathTask().problems("eval", limit=3)
    hinted = MathTask(misleading_hint="true").problems("eval", limit=3)  # a CLI string
    for p, h in zip(plain, hinted, strict=True):
        assert h.id == p.id + "+hint" and h.answer == p.answer and h.prompt.startswith(p.prompt)
        hint = h.meta["misleading_hint"]
        assert hint in h.prompt and hint != p.answer
    assert MathTask(misleading_hint=True).data_source()["misleading_hint"] is True
