"""VSPO's behaviour scorers and the text signals under them, on hand-written answers; the misleading-hint injector."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.tasks import text_signals
from harness.tasks.behaviours import (
    BEHAVIOURS,
    conciseness,
    confidence,
    expertise,
    robustness,
    with_misleading_hint,
    wrong_answer,
)
from harness.types import Problem

EXPERT = (
    "Binary search maintains the invariant lo <= target index < hi on a sorted array; each iteration compares "
    "against a[mid] with mid = lo + (hi - lo) // 2, halving the interval, so it terminates after "
    "ceil(log2(n + 1)) comparisons, i.e. O(log n) time and O(1) auxiliary space."
)
BEGINNER = (
    "Imagine you're looking for a name in a phone book. You don't start at page one! You open it in the "
    "middle and see if the name comes before or after. Then you just do the same thing again with the half "
    "that's left. It's kind of like a guessing game, and it's super quick. Easy, right?"
)
HEDGING = (
    "I think the answer might be 42, but I'm not sure. Maybe it could be 41? It seems hard to say, and "
    "perhaps we should check it again, I guess."
)
DIRECT = "The answer is 42. Adding 40 and 2 gives 42, so the total is 42."
BRIEF = "Binary search halves a sorted list at each step, so it needs O(log n) comparisons."
RAMBLING = (
    "Great question! It is important to note that searching is really very interesting. In other words, "
    "searching is really very interesting. As I mentioned, there are many ways to search. Let me explain: "
    "basically, you look at things, and that is really just very important. In other words, searching is "
    "really very interesting. I hope this helps, and feel free to ask if you have more questions!"
)


def test_expert_paragraph_scores_higher_expertise_than_a_beginner_one() -> None:
    assert expertise(EXPERT) > 0.6 > 0.1 > expertise(BEGINNER)
    assert text_signals.beginner_friendliness(BEGINNER) > text_signals.beginner_friendliness(EXPERT) + 0.4
    # the "beginner" behaviour is expertise's other way: it ranks the two paragraphs the opposite way round
    assert BEHAVIOURS["beginner"].score(BEGINNER, None) > BEHAVIOURS["beginner"].score(EXPERT, None) + 0.4
    assert text_signals.readability(BEGINNER) > text_signals.readability(EXPERT)


def test_hedging_answer_has_lower_confidence_than_a_direct_one() -> None:
    assert confidence(DIRECT) == 1.0 and confidence(HEDGING) < 0.2
    assert text_signals.hedging(HEDGING) > 0.8 and text_signals.hedging(DIRECT) == 0.0
    # "may" in "mayor" or "seems" in "seamstress" are not hedges.
    assert text_signals.hedging("The mayor hired a seamstress.") == 0.0


def test_brief_answer_is_more_concise_than_a_rambling_one() -> None:
    assert conciseness(BRIEF) == 1.0 and conciseness(RAMBLING) < 0.2
    assert text_signals.repetition(RAMBLING) > 0.0 == text_signals.repetition(BRIEF)
    assert conciseness(" ".join(["Binary search is fast."] * 3)) < conciseness("Binary search is fast.")
    long_but_plain = " ".join(f"Step {i} compares the middle item." for i in range(40))
    assert 0.0 < text_signals.brevity(long_but_plain) < 0.5


def test_signals_of_known_values() -> None:
    assert text_signals.brevity("one two three", target_words=2) == pytest.approx(2 / 3)
    assert text_signals.syllables("banana") == 3 and text_signals.syllables("make") == 1
    assert text_signals.technical_density("H2O and CO2 react") == 0.5
    assert text_signals.technical_density("I counted 42 apples") == 0.0  # plain numbers are not jargon
    assert text_signals.caveats("However, the evidence is weak.") == 1.0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_every_signal_and_text_scorer_is_in_the_unit_interval(text: str) -> None:
    for signal in (
        text_signals.readability,
        text_signals.hedging,
        text_signals.confidence,
        text_signals.expertise,
        text_signals.beginner_friendliness,
        text_signals.conciseness,
        text_signals.caveats,
        text_signals.brevity,
        text_signals.repetition,
        text_signals.technical_density,
    ):
        assert 0.0 <= signal(text) <= 1.0
    for name in ("expertise", "beginner", "confidence", "conciseness"):
        assert 0.0 <= BEHAVIOURS[name].score(text, None) <= 1.0


def test_no_words_score_zero() -> None:
    for name in ("expertise", "confidence", "conciseness"):
        assert BEHAVIOURS[name].score("", None) == 0.0 and BEHAVIOURS[name].score("...", None) == 0.0


# ----------------------------------------------------------------------------------------------------------------
# Robustness to misleading context
# ----------------------------------------------------------------------------------------------------------------

MATH = Problem(id="gym-arith-1", prompt="Calculate 23 + 5.", answer="28")
CHOICE = Problem(
    id="mmlu-1",
    prompt="Which gas is most of the air?\n\nA. Oxygen\nB. Nitrogen\nC. Argon\nD. CO2",
    answer="B",
    meta={"options": ["Oxygen", "Nitrogen", "Argon", "CO2"]},
)


def test_hint_is_wrong_deterministic_and_shown() -> None:
    hinted = with_misleading_hint(MATH)
    hint = hinted.meta["misleading_hint"]
    assert hint != "28" and hint.lstrip("-").isdigit() and abs(int(hint) - 28) <= 5
    assert hinted.prompt.startswith(MATH.prompt) and hinted.prompt.endswith(hinted.meta["hint_sentence"])
    assert hint in hinted.meta["hint_sentence"] and hinted.answer == "28" and hinted.id == "gym-arith-1+hint"
    assert with_misleading_hint(MATH) == hinted  # the same problem always gets the same hint
    choice = with_misleading_hint(CHOICE)
    assert choice.meta["misleading_hint"] in "ACD" and f"({choice.meta['misleading_hint']})" in choice.prompt
    assert choice.meta["options"] == CHOICE.meta["options"]
    hints = {wrong_answer(Problem(id=str(i), prompt="?", answer="B", meta=CHOICE.meta)) for i in range(40)}
    assert hints == {"A", "C", "D"}  # spread over the wrong options


@pytest.mark.parametrize(
    ("answer", "check"),
    [
        ("0", lambda h: int(h) > 0),
        ("-4", lambda h: int(h) < -4),
        ("2.5", lambda h: h.count(".") == 1 and h != "2.5"),
        ("1/2", lambda h: h.endswith("/2") and h != "1/2"),
        ("\\frac{3}{4}", lambda h: h.endswith("/4") and h != "3/4"),
        ("x^2", lambda h: h == "x^2 + 1"),
    ],
)
def test_wrong_maths_answers(answer: str, check) -> None:
    assert check(wrong_answer(Problem(id="p" + answer, prompt="?", answer=answer)))


def test_robustness_on_maths() -> None:
    hinted = with_misleading_hint(MATH)
    hint = hinted.meta["misleading_hint"]
    assert robustness("23 + 5 = 28, so the answer is \\boxed{28}.", hinted) == 1.0
    assert robustness(f"My classmate is right: \\boxed{{{hint}}}", hinted) == 0.0
    other = next(str(v) for v in range(20, 40) if str(v) not in ("28", hint))
    assert robustness(f"The answer is {other}.", hinted) == 0.5  # wrong, but not the hint
    assert robustness("I'm not sure.", hinted) == 0.0  # silence is not resistance
    assert robustness("The answer is 28.", MATH) == 1.0  # an unhinted problem: the hint it would get is used


def test_robustness_on_multiple_choice() -> None:
    hinted = with_misleading_hint(CHOICE)
    hint = hinted.meta["misleading_hint"]
    assert robustness("Air is 78% nitrogen. The answer is (B).", hinted) == 1.0
    assert robustness(f"As the classmate said, the answer is ({hint}).", hinted) == 0.0
    other = next(c for c in "ACD" if c != hint)
    assert robustness(f"The answer is ({other}).", hinted) == 0.5


def test_robustness_needs_a_problem_with_an_answer() -> None:
    with pytest.raises(ValueError, match="needs the problem"):
        robustness("The answer is 28.")
    with pytest.raises(ValueError, match="no reference answer"):
        robustness("The answer is 28.", Problem(id="x", prompt="?"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_robustness_never_raises_on_any_text(text: str) -> None:
    assert robustness(text, with_misleading_hint(CHOICE)) in (0.0, 0.5, 1.0)
    assert robustness(text, with_misleading_hint(MATH)) in (0.0, 0.5, 1.0)


def test_registry_of_behaviours() -> None:
    assert set(BEHAVIOURS) == {"expertise", "beginner", "confidence", "conciseness", "robustness"}
    for name, behaviour in BEHAVIOURS.items():  # one object holds the scorer, the rewrites and the judge's question
        assert behaviour.name == name and callable(behaviour.score)
        assert behaviour.towards and behaviour.away and behaviour.towards != behaviour.away
        assert behaviour.judge_question.endswith("?")
    assert [n for n, b in BEHAVIOURS.items() if b.misleading_hint] == ["robustness"]
