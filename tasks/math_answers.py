"""Final-answer extraction and checking for maths tasks: pure functions, none of them raises on any string.

Extraction follows where chat models actually put answers: the last ``\\boxed{}`` first (SmolLM2-135M rarely writes
one: 3 of 80 sampled maths answers), then "the answer is X" / "Answer: X", then "... = X" at the very end, then
the last number.
Equality is decided by math-verify (numbers, fractions, expressions, sets), behind guards: sympy can hang on inputs
such as ``9^{9^{9^9}}``, and math-verify's own timeout uses SIGALRM, which only works in the main thread.
"""

from __future__ import annotations

import re
import threading

# "\boxed{" / "\fbox{" opens a box, "{" opens a plain group, "}" closes whichever is innermost.
_BRACE_TOKEN = re.compile(r"\\(?:boxed|fbox)\s*\{|\{|\}")
_BOXED_BARE = re.compile(r"\\boxed\s+([^\s$\\{}]+)")  # "\boxed 5": found in some MATH reference solutions
_ANSWER_PHRASE = re.compile(r"\b(?:answer|result)\b(?:\s+is\b|\s*:)[\s:*]*([^\n]*)", re.IGNORECASE)
_TRAILING_EQUALS = re.compile(r"=\s*([^=\n]+)$")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")
_SENTENCE_END = re.compile(r"\.(?!\d)|\n|;|,\s+(?=[A-Za-z]{2})")
# A number followed by a unit: a word after a space ("7 apples", not "2x"), \text{...}, a percent or degree sign.
_NUMBER_WITH_UNIT = re.compile(
    r"(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?:\s+[A-Za-z][A-Za-z ]*|\s*\\(?:text|mbox|mathrm)\{[^{}]*\}|\s*\\?[%°])"
)
_INTEGER = re.compile(r"-?\d+")
# An arithmetic operator between two numbers: the question copied rather than computed ("23 + 5" for 28).
_UNEVALUATED = re.compile(r"\d\s*(?:[-+*/×÷]|\\times|\\cdot|\\div)\s*-?\d")

MAX_ANSWER_CHARS = 200  # longer "answers" are rambling text, not a final answer; they are also slow to parse
_VERIFY_TIMEOUT_S = 2


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` (and ``\\fbox{...}``) in order of appearance; nested braces are matched.

    One linear pass with a brace stack, so a long or adversarial completion costs O(n). An unclosed box (a
    completion cut at max_new_tokens) yields nothing.
    """
    found: list[tuple[int, str]] = []
    stack: list[tuple[int, bool]] = []  # (content start, opened by a box?)
    for m in _BRACE_TOKEN.finditer(text):
        if m.group() == "}":
            if stack:
                start, is_box = stack.pop()
                if is_box:
                    found.append((start, text[start : m.start()]))
        else:
            stack.append((m.end(), m.group() != "{"))
    return [content for _, content in sorted(found)]


def solution_answer(solution: str) -> str | None:
    """The reference answer of a MATH-style worked solution: its last boxed expression."""
    boxes = [b for b in boxed_contents(solution) if b.strip()]
    if boxes:
        return boxes[-1].strip()
    bare = _BOXED_BARE.findall(solution)
    return bare[-1] if bare else None


def clean_answer(candidate: str) -> str:
    """Trim what surrounds an answer: math delimiters, markdown bold, a trailing period, units after a number."""
    s = candidate.strip()
    s = s.replace("\\$", "").replace("\\!", "")
    for left, right in (("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(left) and s.endswith(right):
            s = s[len(left) : -len(right)]
    s = s.strip().strip("*$ \t").rstrip(".").strip().strip("*$ \t")
    unit = _NUMBER_WITH_UNIT.fullmatch(s)
    if unit:  # "7 apples", "12 cm", "35%" -> the number
        s = unit.group(1)
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):  # thousands separators, not a list
        s = s.replace(",", "")
    return s


def _phrase_answer(text: str) -> str | None:
    for m in reversed(list(_ANSWER_PHRASE.finditer(text))):
        candidate = clean_answer(_SENTENCE_END.split(m.group(1), maxsplit=1)[0])
        # "The answer is that we need to add..." is prose, not an answer: fall through to later rules.
        if candidate and (re.search(r"\d", candidate) or len(candidate.split()) <= 3):
            return candidate
    return None


def _trailing_equals_answer(text: str) -> str | None:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    m = _TRAILING_EQUALS.search(lines[-1].strip())
    if m:
        candidate = clean_answer(m.group(1))
        if re.search(r"\d", candidate):
            return candidate
    return None


def _last_number(text: str) -> str | None:
    numbers = _NUMBER.findall(text)
    return clean_answer(numbers[-1]) if numbers else None


def extract_answer(text: str) -> tuple[str | None, bool]:
    """(final answer, whether it came from a box); (None, False) when nothing answer-like is found."""
    if not isinstance(text, str):
        return None, False
    for box in reversed(boxed_contents(text)):
        answer = clean_answer(box)
        if answer:
            return answer[:MAX_ANSWER_CHARS], True
    for rule in (_phrase_answer, _trailing_equals_answer, _last_number):
        answer = rule(text)
        if answer:
            return answer[:MAX_ANSWER_CHARS], False
    return None, False


def _normalise(s: str) -> str:
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\(?:left|right|displaystyle|dfrac|tfrac)", lambda m: "\\frac" if "frac" in m.group() else "", s)
    return re.sub(r"[\s$]", "", s).rstrip(".").lower()


def _risky(s: str) -> bool:
    """Inputs on which sympy can run for minutes or exhaust memory; refused where no timeout can protect us."""
    depth = peak = 0
    for c in s:
        depth += c in "([{"
        depth -= c in ")]}"
        peak = max(peak, depth)
    return (
        len(s) > MAX_ANSWER_CHARS
        or peak > 8
        or re.search(r"\^\s*(?:\{[^{}]*|\([^()]*|\d+\s*)\^", s) is not None  # a tower of powers: 10^{10^{10}}
        or re.search(r"\^\s*[{(]?\s*\d{6,}", s) is not None  # an exponent with a million or more
        or re.search(r"\d{5,}\s*!", s) is not None  # 99999!
        or re.search(r"\([^()]*\^[^()]*\)\s*!", s) is not None  # (10^{100})!
    )


def _math_verify_equal(reference: str, answer: str) -> bool:
    from math_verify import parse, verify  # lazy: sympy and lark are slow to import, extraction doesn't need them
    from math_verify.errors import TimeoutException

    if _risky(answer) or _risky(reference):
        return False
    # SIGALRM timeouts only work in the main thread; elsewhere math-verify would raise, so run without them and
    # rely on _risky() having refused the known pathological inputs.
    timeout = _VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        gold = parse(f"\\boxed{{{reference}}}", parsing_timeout=timeout)
        pred = parse(f"\\boxed{{{answer}}}", parsing_timeout=timeout)
        return bool(gold and pred and verify(gold, pred, timeout_seconds=timeout))
    except (Exception, TimeoutException):  # TimeoutException is a BaseException: name it, don't swallow ^C
        return False


def answers_match(reference: str | None, answer: str | None) -> bool:
    """Whether ``answer`` equals ``reference`` mathematically. Never raises."""
    try:
        if not reference or not answer or not answer.strip():
            return False
        reference, answer = reference.strip(), answer.strip()
        if "=" in answer and "=" not in reference:  # "x = 5" or "23 + 5 = 28": the value is the right-hand side
            answer = answer.rsplit("=", 1)[1].strip()
        if _INTEGER.fullmatch(reference) and _UNEVALUATED.search(answer):
            return False  # math-verify would simplify "23 + 5" to 28: copying the question is not computing it
        if _normalise(reference) == _normalise(answer):
            return True
        return _math_verify_equal(reference, answer)
    except Exception:
        return False


def is_checkable(reference: str) -> bool:
    """Whether math-verify turns ``reference`` into a mathematical object (not just a string to compare)."""
    from math_verify import parse
    from math_verify.errors import TimeoutException

    if _risky(reference):
        return False
    timeout = _VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        return any(not isinstance(x, str) for x in parse(f"\\boxed{{{reference}}}", parsing_timeout=timeout))
    except (Exception, TimeoutException):
        return False
