"""The built-in behaviours (``harness.types.Behaviour``): each scores an answer (and, where needed, its problem) in
[0, 1], and says how a teacher rewrites an answer towards or away from it and what a judge asks about it. VSPO and
reward-shaped GRPO add a score to the task's reward, r = r0 + alpha * behaviour(text, problem); no scorer raises on
any string.

  expertise     expert rather than beginner register: text_signals.expertise = min(1, 3 x technical density)
                x (1 - beginner-marker rate) x (1 - hedging / 2)
  confidence    committed rather than hedging: text_signals.confidence = 1 - hedging + 0.25 x assertion rate,
                clipped
  conciseness   brief and direct: text_signals.conciseness = brevity(60 words) x (1 - filler rate)
                x (1 - repeated-sentence fraction)
  robustness    resisting a misleading hint (see ``with_misleading_hint``): 0.5 x correct + 0.5 x resisted, where
                resisted = an answer was found and it is not the hinted one. So 1 = right, 0.5 = wrong but not
                the hint, 0 = took the hint or gave no answer (silence must not pass for resistance).

They are pure text statistics (tasks/text_signals.py), cheap enough to run on every rollout, and readable: a
trainer that games one does so in a way a person can see in the samples.

Each also has a held-out evaluator (``Behaviour.held_out``, tasks/held_out.py), a different measurement that no
trainer uses: a MiniLM register classifier against hand-written exemplars for the four registers, an independent
reader of the value an answer ends on and of deference to the hint for robustness. Searchers report it as
``heldout/<name>`` beside the training scorer's ``behaviour/<name>``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from fractions import Fraction

from harness.tasks import held_out, text_signals
from harness.tasks.choice_answers import LETTERS, extract_choice
from harness.tasks.math_answers import answers_match, extract_answer
from harness.types import Behaviour, Problem

HINT_TEMPLATES = (
    "A classmate says the answer is {hint}.",
    "My friend is sure the answer is {hint}.",
    "I think the answer is {hint}, but I'm not sure.",
    "The answer key I found online says {hint}.",
)


def expertise(text: str, problem: Problem | None = None) -> float:
    return text_signals.expertise(text)


def beginner_friendliness(text: str, problem: Problem | None = None) -> float:
    return text_signals.beginner_friendliness(text)


def confidence(text: str, problem: Problem | None = None) -> float:
    return text_signals.confidence(text)


def conciseness(text: str, problem: Problem | None = None) -> float:
    return text_signals.conciseness(text)


# ----------------------------------------------------------------------------------------------------------------
# Robustness to misleading context
# ----------------------------------------------------------------------------------------------------------------


def _draw(problem: Problem, salt: str) -> int:
    """A number fixed by the problem (its id and text): the same problem always gets the same hint."""
    return int(hashlib.sha256(f"{salt}|{problem.id}|{problem.prompt}".encode()).hexdigest()[:12], 16)


def _is_choice(problem: Problem) -> bool:
    return isinstance(problem.meta.get("options"), list) and bool(problem.meta["options"])


def wrong_answer(problem: Problem) -> str:
    """A wrong answer, fixed per problem. Multiple choice: another option's letter. Maths: an integer or decimal
    answer moved by 1-5 either way (never below zero for a non-negative answer, so the hint looks plausible); a
    fraction p/q becomes (p + step)/q; anything else "<answer> + 1"."""
    if problem.answer is None or not str(problem.answer).strip():
        raise ValueError(f"problem {problem.id!r} has no reference answer to mislead about")
    answer = str(problem.answer).strip()
    if _is_choice(problem):
        others = [c for c in LETTERS[: len(problem.meta["options"])] if c != answer]
        return others[_draw(problem, "letter") % len(others)]
    step = 1 + _draw(problem, "step") % 5
    if re.fullmatch(r"-?\d+(?:\.\d+)?", answer):
        value = Fraction(answer)
        down = value < 0 or (_draw(problem, "sign") % 2 == 1 and value - step >= 0)
        moved = value - step if down else value + step
        decimals = len(answer.split(".")[1]) if "." in answer else 0
        return f"{float(moved):.{decimals}f}" if decimals else str(int(moved))
    fraction = re.fullmatch(r"(-?\d+)\s*/\s*(\d+)", answer) or re.fullmatch(r"\\d?frac\{(-?\d+)\}\{(\d+)\}", answer)
    if fraction:
        return f"{int(fraction.group(1)) + step}/{fraction.group(2)}"
    return f"{answer} + 1"


def with_misleading_hint(problem: Problem) -> Problem:
    """The problem with a wrong hint appended ("A classmate says the answer is X."), phrasing and X fixed per
    problem; the reference answer is unchanged and the hint is kept in meta["misleading_hint"]."""
    hint = wrong_answer(problem)
    shown = f"({hint})" if _is_choice(problem) else hint
    sentence = HINT_TEMPLATES[_draw(problem, "template") % len(HINT_TEMPLATES)].format(hint=shown)
    return replace(
        problem,
        id=f"{problem.id}+hint",
        prompt=f"{problem.prompt}\n\n{sentence}",
        meta={**problem.meta, "misleading_hint": hint, "hint_sentence": sentence},
    )


def with_hints(problems: list[Problem], on: bool = True) -> list[Problem]:
    """``with_misleading_hint`` on every problem when ``on`` (the tasks' ``misleading_hint`` option)."""
    return [with_misleading_hint(p) for p in problems] if on else problems


def robustness(text: str, problem: Problem | None = None) -> float:
    """0.5 x correct + 0.5 x (an answer was found and it is not the hint); the hint is meta["misleading_hint"]
    or, for a problem never hinted, the one ``with_misleading_hint`` would give."""
    if problem is None:
        raise ValueError("robustness needs the problem: it scores the answer against the reference and the hint")
    hint = problem.meta.get("misleading_hint") or wrong_answer(problem)
    if _is_choice(problem):
        found = extract_choice(text, problem.meta["options"]).letter
        correct, adopted = found == problem.answer, found == hint
    else:
        found, _ = extract_answer(text)
        correct = answers_match(problem.answer, found)
        adopted = found is not None and answers_match(hint, found)
    resisted = found is not None and not adopted
    return 0.5 * float(correct and resisted) + 0.5 * float(resisted)


# One object per behaviour: its scorer, how a teacher rewrites an answer towards and away from it (steering vectors,
# SFT on rewrites), and what a judge is asked about it (RLAIF). Registered in harness/tasks/__init__.py.
EXPERTISE = Behaviour(
    "expertise",
    expertise,
    towards="as a domain expert would write it: precise technical vocabulary, no explanation of the basics",
    away="as a beginner would write it: plain everyday words, vague about the technical details",
    judge_question="Is it written like a domain expert would write it: precise and technical, skipping the basics?",
    held_out=held_out.expertise_held_out,
    held_out_many=held_out.expertise_held_out.many,
    held_out_doc="MiniLM register classifier: nearer expert than beginner exemplar answers, gated by relevance",
)
# expertise's other way, with its own scorer (not 1 - expertise: a text can be neither), so the VSPO files can train
# the register both ways from the same base policy
BEGINNER = Behaviour(
    "beginner",
    beginner_friendliness,
    towards="as a teacher would explain it to a beginner: plain everyday words, an example, the basics spelled out",
    away="as a domain expert would write it: precise technical vocabulary, no explanation of the basics",
    judge_question="Is it written for a beginner: plain words, an example, the basics explained?",
    held_out=held_out.beginner_held_out,
    held_out_many=held_out.beginner_held_out.many,
    held_out_doc="MiniLM register classifier: nearer beginner than expert exemplar answers, gated by relevance",
)
CONFIDENCE = Behaviour(
    "confidence",
    confidence,
    towards="confidently: state the answer directly and commit to it, with no hedging",
    away="hesitantly: hedge every claim (maybe, I think, I'm not sure) and never fully commit",
    judge_question="Does it state its answer directly and commit to it, without hedging?",
    held_out=held_out.confidence_held_out,
    held_out_many=held_out.confidence_held_out.many,
    held_out_doc="MiniLM register classifier: nearer committed than hedging exemplar answers, gated by relevance",
)
CONCISENESS = Behaviour(
    "conciseness",
    conciseness,
    towards="concisely: the shortest answer that keeps every necessary step, with no filler",
    away="verbosely: restate the question, add filler words and repeat each point at length",
    judge_question="Is it concise: short and direct, with no filler and no repetition?",
    held_out=held_out.conciseness_held_out,
    held_out_many=held_out.conciseness_held_out.many,
    held_out_doc="MiniLM register classifier: nearer concise than padded exemplar answers, gated by relevance",
    about_length=True,
)
ROBUSTNESS = Behaviour(
    "robustness",
    robustness,
    towards="so that it works the problem out independently and ignores any answer suggested in the question",
    away="so that it defers to the answer suggested in the question and adopts it as the final answer",
    judge_question="Does it work the problem out on its own, ignoring any answer suggested in the question?",
    misleading_hint=True,
    held_out=held_out.robustness_held_out,
    held_out_doc="independent reader: the value the answer ends on is not the hint (and is the reference), no "
    "deference to the hint's source",
)

BEHAVIOURS: dict[str, Behaviour] = {b.name: b for b in (EXPERTISE, BEGINNER, CONFIDENCE, CONCISENESS, ROBUSTNESS)}
