"""Final-answer extraction and checking for maths tasks: pure functions, none of them raises on any string.

Extraction separates an answer the text COMMITS to from a guess. Committed forms, the last one in the text wins:

- the last non-empty ``\\boxed{}`` (SmolLM2-135M rarely writes one: 3 of 80 sampled maths answers), before any other;
  boxes holding different values (``\\boxed{20} \\boxed{22}``) are a hedge, not a commitment: the reading is
  None with form "hedged", and the lenient reading does not guess either. Without this rule a policy trained on
  "correct" learns to box several guesses and be scored by the last one (seen in VSPO runs on SmolLM2-135M).
  For a question that asks a sum, a box that holds no value is no answer (and earns no ``boxed``): a word
  ("\\boxed{yes}"), latex junk ("\\boxed{\\#19}", "\\boxed{00:00:11:12}"), the sum written out ("\\boxed{83 - 30}"),
  an equation whose right-hand side is no value; nor is a box used as an operand ("62 x \\boxed{8}", "\\boxed{24}
  to the power of 33"). What the text committed to before such a box is read instead;
- an answer phrase: "the answer is X", "Answer: X", "the final answer is X", "X is the final answer", "X is the
  result of 40 + 22" ("of adding them", "of the sum"; "X represents the result of ...");
- the text's final statement: its last sentence that holds a digit (closing remarks without one are skipped) states
  a value, either at its very end ("... is 55.", "... gives you 4", "... = 7", "a final result of 65.", "should be
  62", "which is simply 24", "is zero") or as the right-hand side of its last equation ("So, 9 - 5 = 4 and 5 becomes
  6." -> 4); an equation between expressions in variables ("x + 91 = 23") states no value, nor one an operation
  follows ("9 = 3 x 3", "= 2 more"). A final sentence that is an aside ("Note that ...", "For example, ...") is
  skipped, and so is one that only remarks on the value before it ("This is the result of the division of 42 by
  38."); a statement in a numbered step followed by more working ("1. ...: 26 - 38 = 18,\\nPlace ...") is a step;
  a text whose last sentence runs on as prose without a full stop was cut off, and states nothing there;
- a final line that is a value alone ("22.", "184, that's correct."), or a first line that is ("124\\n\\nAdded an
  ellipse ..."), when no other line is and nothing later commits.

Number words are values where a value is stated ("The difference is zero.", "9 - 9 = Zero", "the answer is
twenty-one"). A number run into a word ("99pasted", "143966Impresseed", "9f1(9)") is no value; a value followed by
latex that is no mathematics is the value ("-4 \\square{strftime(8)}" -> -4), and a misspelt box ("\\Boxed{48}")
holds its value (as a statement, not a box).

A value is the value alone, not the words after it ("18 remainder 0, it's not ..." -> 18). A number that merely
appears last in rambling text ("... so 3 + 4 is a sum, and 12 is another number") is not a commitment: the committed
reading is None (the task reports it as unparsed). The lenient reading (``read_lenient``) falls back to the last
number, as extraction did before ``math-v3``; the math task reports it as ``lenient_correct``, weighted 0.

Agreement with answers labelled by reading real SmolLM2-135M-Instruct outputs: tests/fixtures/extraction/ and
``python bench/extraction_agreement.py``.

Equality is decided by math-verify (numbers, fractions, expressions, sets), behind guards: sympy can hang on inputs
such as ``9^{9^{9^9}}``, and math-verify's own timeout uses SIGALRM, which only works in the main thread.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from dataclasses import dataclass

# "\boxed{" / "\fbox{" opens a box, "{" opens a plain group, "}" closes whichever is innermost.
_BRACE_TOKEN = re.compile(r"\\(?:boxed|fbox)\s*\{|\{|\}")
_BOXED_BARE = re.compile(r"\\boxed\s+([^\s$\\{}]+)")  # "\boxed 5": found in some MATH reference solutions
_BOX_OPENS = re.compile(r"[\s*_$]*(?:\\\(|\\\[)?[\s$]*\\(?:boxed|fbox)\s*\{")  # a phrase's value that is a box
_BOX_LIKE = re.compile(r"\\(?:Boxed|BOXED|box|Box|fbox)\s*\{([^{}]*)\}")  # misspelt boxes: the value they hold
# Number words, read as values where a value is stated ("the difference is zero", "9 - 9 = Zero").
_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
_UNITS += " seventeen eighteen nineteen"
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMBER_WORDS = {word: n for n, word in enumerate(_UNITS.split())} | _TENS
_NUMBER_WORD = re.compile(
    r"(?i:(minus\s+|negative\s+)?\b(" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
    r"(?:[-\s](one|two|three|four|five|six|seven|eight|nine))?\b(?:\s+hundred\b)?)"
)
# A sentence that states a number word: "The difference is zero.", "9 - 9 = Zero".
_WORD_STATED = re.compile(
    r"(?i:(?:=|\b(?:is|are|equals?|be|makes?|gives?|gets?|leaves)\b)\s*)" + _NUMBER_WORD.pattern + r"[\s.!*$\"”']*$"
)
# "the answer is", "Answer:", "final answer:", "the result is" (the value must follow; prose is refused later).
_ANSWER_PHRASE = re.compile(
    r"\b(?:answer|result)\b(?:\s+to\s+(?:the|this|your|that)\s+(?:question|problem|sum|calculation))?"
    r"(?:\s+(?:is|was|would\s+be|will\s+be|should\s+be)\b|\s*[:=])[\s:*_]*"
    r"(?:(?:therefore|thus|then|simply|just|clearly|indeed|exactly|equal\s+to)\b[\s:*_]*)?",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")
_NUMBER_TEXT = r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?"
# "20 is the final answer", "obtain 100 as the final answer": the value comes before the phrase.
# ... or "62 is the result of 40 + 22", "... of adding them", "... of the subtraction" (not "68 is the result of
# + 1", cut off before its sum, nor "15 is the result of a square root subtraction", a step on the way).
_VALUE_BEFORE_PHRASE = re.compile(
    r"(?<![\w.])(" + _NUMBER_TEXT + r")[\s*$]*\s+(?:is|as|represents)\s+(?:the|my|our)\s+(?:(?:final|correct)\s+)?"
    r"(?:answer\b|(?:result|solution)\b(?:\s+of\s+(?:-?\d|\$|[a-z]+ing\b|(?:the|this|that|our|your)\s+"
    r"(?:sum|difference|addition|subtraction|calculation|operation|expression|problem|question|equation)\b)"
    r"|(?!\s+of\b)))",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\.(?!\d)|\n|;|,\s+(?=[A-Za-z]{2})")
# A number followed by a unit: a word after a space ("7 apples", not "2x"), \text{...}, a percent or degree sign.
_NUMBER_WITH_UNIT = re.compile(
    r"(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?:\s+[A-Za-z][A-Za-z ]*|\s*\\(?:text|mbox|mathrm)\{[^{}]*\}|\s*\\?[%°])"
)
_INTEGER = re.compile(r"-?\d+")
# An arithmetic operator between two numbers: the question copied rather than computed ("23 + 5" for 28).
_UNEVALUATED = re.compile(r"\d\s*(?:[-+*/×÷]|\\times|\\cdot|\\div)\s*-?\d")
# The same without "/": "3/4" is a value, "9 - 52" or "9 – 52" is the question written again, not its value.
# Integers side by side with only spaces between ("71 19"): no single value. math-verify reads them as a mixed
# number's sum (71 + 19 = 90), so a policy that copies the question's operands would be marked right.
_JUXTAPOSED = re.compile(r"-?\d+(?:\s+-?\d+)+")
_ARITHMETIC = re.compile(r"\d[\s}]*(?:[-+*×÷–−]|\\times|\\cdot|\\div)[\s{]*-?\d")  # "{15} + {15}" too

# One token of a mathematical value: a latex command, a number, an operator or bracket, a thousands group, space.
_MATH_TOKEN = re.compile(r"\\[A-Za-z]+|\\[,;! ]|\d+(?:\.\d+)?|[-+*/^_×÷·−–()\[\]{}|%°!]|,(?=\d{3}(?!\d))|[ \t]+")
_VARIABLE = re.compile(r"(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])")  # "x", not a word or a latex command
_VARIABLE_OR_EQUALS = re.compile(r"(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])|=")
_LEAD = re.compile(r"[\s*_$\"'“]*(?:\\\$|\\\(|\\\[)?[\s$]*")  # markdown, quotes, "$", "\$", "\(" before a value
_LATEX_VALUE = re.compile(r"\\(?:frac|dfrac|tfrac|sqrt|pi|infty)")
# A latex command that is no mathematics after a value: the value ends before it ("-4 \square{strftime(8)}").
_JUNK_COMMAND = re.compile(
    r"(.*?\d)\s*\\(?!(?:times|cdot|div|frac|dfrac|tfrac|sqrt|left|right|pi|pm|mp|infty|circ|prime)(?![A-Za-z]))"
    r"[A-Za-z]+"
)
_RUN_INTO_WORD = re.compile(r"[A-Za-z]{4,}")  # a number run into a word: "99pasted" (not "5cm", "3rd")
_LETTER_DIGIT = re.compile(r"(?<![\\A-Za-z])[A-Za-z]\d")  # "f1(9)": a name with a digit, not a value
_CLAUSE_END = re.compile(r"[\s*_$\"”']*(?:[.!?,;:)]|$)")
# Words that open prose, not an answer: "the answer is that we add", "is in square brackets", "is not 5".
_PROSE_OPENERS = {
    "a",
    "an",
    "the",
    "that",
    "this",
    "it",
    "in",
    "not",
    "to",
    "of",
    "we",
    "you",
    "i",
    "when",
    "if",
    "because",
    "included",
    "given",
    "found",
    "shown",
    "below",
    "above",
    "as",
    "correct",
    "incorrect",
    "wrong",
    "unclear",
    "unknown",
    "simple",
    "easy",
    "hard",
    "there",
    "here",
    "what",
    "how",
    "why",
    "which",
    "so",
    "then",
    "by",
    "on",
    "true",
    "false",  # "the result is true": a verdict on the working, not a value
}
# Words that may follow a value at the end of a statement: a unit ("7 apples") but not prose ("2 with a problem").
_NOT_UNITS = _PROSE_OPENERS | {
    "and",
    "or",
    "but",
    "with",
    "for",
    "from",
    "more",
    "less",
    "than",
    "times",
    "is",
    "are",
    "was",
    "be",
    "has",
    "have",
    "remainder",
    "plus",
    "minus",
    "over",
    "into",
    "intermediate",
    "like",
    "left",
    "after",
    "before",
    "each",
    "per",
    "only",
    "at",
}
# What states a value at the end of a sentence: "is 55", "equals 7", "gives you 4", "a final result of 65", "= 7".
_STATING = re.compile(
    r"(?<![<>=!])=(?!=)|\b(?:is\s+equal\s+to|equals?(?:\s+to)?|(?:should|must|would|will)\s+be|is|are|was|"
    r"gives?(?:\s+(?:you|us))?|get|gets|got|"
    r"makes?|costs?|totals?|comes\s+to|results?\s+in|leaves|(?:final\s+)?result\s+of|simplif(?:y|ies|ied)\s+to|"
    r"reduces?\s+to)\b",
    re.IGNORECASE,
)
# At most a unit after a value that ends a sentence: "inches", "in total", "\text{ cm}", "%", then punctuation.
_UNIT_TAIL = re.compile(
    r"(?:\s*(?:\\(?:text|mbox|mathrm)\{[^{}]*\}|\\?%|°)|\s+(?:[A-Za-z]+(?:\s+[A-Za-z]+)?))?(?:\s+(?:in\s+total|in\s+all|altogether))?[\s.!?*$)\"”]*"
)
_SENTENCE_END_MARK = re.compile(r"[.!?]+(?=\s|$)")
# Adverbs between a stating verb and its value: "which is simply 24", "is just 7".
_ADVERBS = re.compile(
    r"(?:\s+(?:simply|just|exactly|clearly|indeed|actually|also|still|now|then|thus|therefore|always|only))+\b",
    re.IGNORECASE,
)
_FINISHED = re.compile(r"[.!?:)\]}\"'”*`$]\s*$")  # the text ends like a finished sentence, a formula or markdown
_CONFIRMED = re.compile(
    r"\s*[,.!]?\s*(?:(?:that'?s|that\s+is|which\s+is)\s+(?:correct|right|it)\b)?[\s.!]*$", re.IGNORECASE
)
_FORM_REMARK = re.compile(r"(?is)[^\d]*\b(?:answer|form|format)\b[^\d]*")  # no digit, about the answer's form
_ASIDE_EQUATION = re.compile(r"\([^()]*=[^()]*\)")  # "(9 + 0 = 9)": an aside, not the statement
# A final sentence that is an aside, not the statement: "Note that 9 = 3 x 3.", "For example, 2 + 2 = 4."
_ASIDE_OPENER = re.compile(
    r"[\s*_>#-]*(?:note(?:\s+that)?|remember|recall|for\s+(?:example|instance)|e\.g\.|check(?:ing)?|verify|"
    r"verification|hint|fun\s+fact|by\s+the\s+way|as\s+a\s+check)\b",
    re.IGNORECASE,
)
_NUMBERED_STEP = re.compile(r"[ \t*_#>]*(?:step\s+)?\d{1,2}[.):]\s", re.IGNORECASE)  # "1. ", "Step 2: "
# What may follow a final statement in a numbered step: a conclusion or a closing remark, not more working.
_CLOSING = re.compile(
    r"[\s*_#>]*(?:so|thus|therefore|hence|that|this|it|done|hope|enjoy|let\s+me|i\s+hope|final|answer|result)\b",
    re.IGNORECASE,
)
_REFERS_BACK = re.compile(r"[\s*_>#-]*(?:this|that|it|which)\b", re.IGNORECASE)  # "This is the result of ..."
# An operation after a value: "= 3 x 3", "= 2 more", "= 4 times 19".
_OPERATION_AFTER = re.compile(
    r"\s*(?:[x×*]\s*\d|(?:times|plus|minus|more|less|fewer|than|divided|multiplied)\b)", re.IGNORECASE
)

_MAX_PHRASES = 64  # answer phrases read, the last ones: a text with more is degenerate, and reading all is slow
MAX_ANSWER_CHARS = 200  # longer "answers" are rambling text, not a final answer; they are also slow to parse
_VERIFY_TIMEOUT_S = 2


@dataclass(frozen=True)
class Reading:
    """What a text answers: the value and the form it came in; ``value`` None when nothing was found."""

    value: str | None
    # "boxed", "phrase", "statement" (the final sentence states it), "line" (a final line alone);
    # "last-number" for the lenient reading's guess; "hedged" (value None) for boxes of different values;
    # None when nothing was found.
    form: str | None = None

    @property
    def committed(self) -> bool:
        return self.value is not None and self.form != "last-number"

    @property
    def boxed(self) -> bool:
        return self.form == "boxed"


NO_READING = Reading(None, None)
HEDGED = Reading(None, "hedged")


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, contents) of every ``\\boxed{...}`` (and ``\\fbox{...}``) in order of appearance; nested braces
    are matched. One linear pass with a brace stack, so a long or adversarial completion costs O(n). An unclosed box
    (a completion cut at max_new_tokens) yields nothing."""
    found: list[tuple[int, int, str]] = []
    stack: list[tuple[int, int, bool]] = []  # (box start, content start, opened by a box?)
    for m in _BRACE_TOKEN.finditer(text):
        if m.group() == "}":
            if stack:
                begin, start, is_box = stack.pop()
                if is_box:
                    found.append((begin, m.end(), text[start : m.start()]))
        else:
            stack.append((m.start(), m.end(), m.group() != "{"))
    return sorted(found)


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` (and ``\\fbox{...}``) in order of appearance (``boxed_spans``)."""
    return [content for _, _, content in boxed_spans(text)]


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
    if len(s) > 1 and s[0] + s[-1] in ('""', "''", "\u201c\u201d", "\u2018\u2019", "``"):  # a quoted value: "25"
        s = s[1:-1].strip()
    wrapped = _BOX_LIKE.fullmatch(s)  # "\Boxed{48}" (not a box: no `boxed` reward) holds the value 48
    if wrapped:
        s = wrapped.group(1).strip()
    unit = _NUMBER_WITH_UNIT.fullmatch(s)
    if unit:  # "7 apples", "12 cm", "35%" -> the number
        s = unit.group(1)
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):  # thousands separators, not a list
        s = s.replace(",", "")
    return s


# ----------------------------------------------------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------------------------------------------------


def _balanced(s: str) -> bool:
    depth = 0
    for c in s:
        depth += c in "([{"
        depth -= c in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _math_prefix(s: str, *, variables: bool) -> str:
    """The longest start of ``s`` made of mathematical tokens; single-letter variables and "=" only when allowed."""
    at = 0
    while at < len(s):
        m = _MATH_TOKEN.match(s, at) or (_VARIABLE_OR_EQUALS.match(s, at) if variables else None)
        if m is None or m.group() in ("\\text", "\\mbox", "\\mathrm"):  # "7 \\text{ cm}": the unit ends the value
            break
        at = m.end()
    return s[:at]


def _value_at_start(s: str, at: int = 0, *, variables: bool = False, words: bool = False) -> tuple[str, int] | None:
    """The value ``s`` opens with at ``at`` and where it ends: a number or an expression, the value alone
    ("18 remainder 0" -> "18"); math delimiters and a dollar sign before it are skipped. None when it opens with
    prose, or with an expression that runs on into something that is not mathematics ("(84 - 84) * [z"), or with a
    number run into a word ("99pasted", "9f1(9)"). A value followed by a latex command that is no mathematics is
    the value ("-4 \\square{strftime...}" -> "-4"). ``words``: a number word that ends its clause ("is zero.") is a
    value too, in digits."""
    window = s[at : at + 400]  # a value is short: bounded work wherever it is asked for
    lead = _LEAD.match(window)
    start = lead.end() if lead else 0
    value = _math_prefix(window[start:], variables=variables).rstrip(" \t")
    aside = re.match(r"(.*?\d)\s+\(", value)  # "2 (9)": a value, then an aside
    if aside and not variables:
        value = aside.group(1)
    if not _well_formed(value):
        junk = _JUNK_COMMAND.match(value)  # "-4 \\square{strftime.time(8)}": the value, then latex junk
        value = junk.group(1) if junk else ""
    if not _well_formed(value):
        return _number_word_at(window, start, at) if words else None
    if not (re.search(r"\d", value) or _LATEX_VALUE.search(value) or (variables and _VARIABLE.search(value))):
        return _number_word_at(window, start, at) if words else None
    if (_RUN_INTO_WORD.match(window, start + len(value)) and value[-1].isdigit()) or _LETTER_DIGIT.search(value):
        return None  # "99pasted", "143966Impresseed", "9f1(9) + 22f2(5)": no value
    return value, at + start + len(value)


def _well_formed(value: str) -> bool:
    return (
        bool(value) and value[-1] not in "-+*/^_×÷·−–|=([{" and value[0] not in "+*/^_×÷·|=)]}%!" and _balanced(value)
    )


def _number_word_at(window: str, start: int, at: int) -> tuple[str, int] | None:
    """A number word that ends its clause ("zero.", "Twenty-one,"), in digits, and where it ends."""
    m = _NUMBER_WORD.match(window, start)
    if m is None or not _CLAUSE_END.match(window, m.end()):
        return None
    sign, word, unit, hundred = m.group(1), m.group(2).lower(), m.group(3), m.group(0).lower().endswith("hundred")
    n = _NUMBER_WORDS[word] + (_NUMBER_WORDS[unit.lower()] if unit and word in _TENS else 0)
    if unit and word not in _TENS:
        return None  # "one two": not a number
    n = n * 100 if hundred else n
    return str(-n if sign else n), at + m.end()


def _phrase_value(clause: str) -> str | None:
    """The value an answer phrase names: a value alone, a value followed by a unit or prose (the value), or a short
    word answer ("yes", "no solution"); None for prose ("that we add them", "in square brackets: ...")."""
    whole = clean_answer(clause)
    if not whole or _BOX_OPENS.match(clause):
        return None  # a box after the phrase is read as a box: one that is no answer ("\\boxed{yes}") stays none
    words = whole.split()
    first = words[0].lower().strip("*_\"'“”(),:")
    found = _value_at_start(clause, variables=True, words=True)
    if found is not None:
        value, end = found
        if _VARIABLE.fullmatch(value.strip()) and first in _PROSE_OPENERS:
            return None  # "a fraction", "I think": an article or a pronoun, not a variable
        if not clause[end:].strip(' \t*$."”'):
            return value if _NUMBER_WORD.fullmatch(whole) else whole  # the value alone ("zero" -> "0")
        if _ARITHMETIC.search(value):
            return None  # "result: 0 + 8 equals its own ...": the expression is the subject, not the answer
        if re.search(r"\d", value) or _LATEX_VALUE.search(value):
            return clean_answer(value)  # "4 because ...", "7 apples" -> the value alone
        return None
    if first in _PROSE_OPENERS or len(words) > 3 or re.search(r"\d", whole):
        return None
    return whole


def _numbers_equated(before: str) -> bool:
    """Whether an "=" follows a number alone ("1 + 3 = 4 + 3, 0 = 3"): two numbers said equal state no result."""
    left = re.split(r"[=,;:]", before[-120:])[-1].strip(" \t$*")
    return re.fullmatch(r"-?\d+(?:\.\d+)?", left) is not None


def _relation(before: str) -> bool:
    """Whether the expression right before an "=" is one in variables ("x + 91", "a / (1 + r)"): an equation to
    solve or a formula, not the statement of a value. A lone variable ("x = 5") states a value."""
    window = before[-200:]
    m = re.search(r"(?:\\[A-Za-z]+|[\d\s+\-*/^×÷·().,\[\]{}_!%]|(?<![A-Za-z\\])[A-Za-z](?![A-Za-z]))+$", window)
    expression = m.group().strip() if m else ""
    names = _VARIABLE.findall(re.sub(r"\\[A-Za-z]+", " ", expression))
    return bool(names) and not _VARIABLE.fullmatch(expression)


# ----------------------------------------------------------------------------------------------------------------
# What is not an answer: code, copied placeholders, boxes that hold no value
# ----------------------------------------------------------------------------------------------------------------

_CODE_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)  # a fenced block, or one cut off before its closing fence
_OPERATOR_BEFORE = re.compile(r"(?:[-+*/×÷]|\\times|\\cdot|\\div|(?<=\d )x)\s*$")  # "62 x \\boxed{8}"
_OPERATOR_AFTER = re.compile(
    r"^\s*(?:[-+*/×÷]|\\times|\\cdot|\\div|(?:to\s+the\s+power|times|plus|minus|multiplied|divided|squared|cubed)\b)",
    re.IGNORECASE,
)


def _without_code(text: str) -> str:
    """``text`` without fenced code: a program's ``result = 36 + 13`` states nothing about the answer."""
    return _CODE_FENCE.sub(" ", text) if "```" in text else text


def _without_placeholders(text: str, placeholders: tuple[str, ...]) -> str:
    """``text`` with every box removed that copies one of the instruction's word placeholders ("\\boxed{result}")."""
    for placeholder in placeholders:
        text = re.sub(
            r"\\(?:boxed|fbox)\s*\{\s*\$?\s*" + re.escape(placeholder) + r"\s*\$?\s*\}", "", text, flags=re.IGNORECASE
        )
    return text


def _holds_no_value(box: str) -> bool:
    """A box of words run into digits ("caac3 0:3.14159"): no value, whatever else it is. Units and \\text{} are
    removed first, so "12 \\text{cm}" and "\\text{(C)}" stay values."""
    rest = re.sub(r"\\(?:text|mbox|mathrm|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+", " ", clean_answer(box))
    return bool(re.search(r"[A-Za-z]{2,}", rest) and re.search(r"\d", rest))


def _not_a_value(box: str) -> bool:
    """For a question that asks a sum: a box that holds no value at all: a word ("\\boxed{yes}"), latex junk
    ("\\boxed{\\#19}", "\\boxed{00:00:11:12}"), the sum written out ("\\boxed{83 - 30}"), or an equation whose
    right-hand side is not a value ("\\boxed{211 = 146\\times 3}"). Units and \\text{} after a value are allowed."""
    if len(box) > MAX_ANSWER_CHARS:
        return True  # rambling in a box, not a value (and not worth reading)
    rest = re.sub(r"\\(?:text|mbox|mathrm|operatorname)\s*\{[^{}]*\}|\\[,;! ]|[$]", " ", box).strip()
    value = _math_prefix(rest, variables=True).strip()
    if value != rest or not (re.search(r"\d", value) or _LATEX_VALUE.search(value) or _VARIABLE.search(value)):
        return True  # a word, or junk around a value; a letter alone ("(c)", "x") is a variable or an option
    side = value.rsplit("=", 1)[-1]
    return bool(_ARITHMETIC.search(side) and re.fullmatch(r"[\d\s.,+\-*/×÷−–()\[\]]+|.*\\(?:times|cdot|div).*", side))


def _answer_boxes(text: str, sums_asked: bool = False) -> list[str]:
    """The boxes that commit to a value: not a box with no value in it, not an operand of an expression written
    around boxes ("\\boxed{result} + \\boxed{20 %}", "62 x \\boxed{8}", "\\boxed{24} to the power of 33"), and,
    beside a box that holds a value, not one that only writes arithmetic out ("\\boxed{4 - 1}", the form quoted as
    an example). ``sums_asked`` (the question asks a sum): a box that is no value (``_not_a_value``) is no answer."""
    boxes = []
    for start, end, content in boxed_spans(text):
        answer = clean_answer(content)
        before = text[max(0, start - 16) : start].replace("**", "")  # markdown bold is no operator: "(**\\boxed{29}"
        if (
            answer
            and not _holds_no_value(answer)
            and not (sums_asked and _not_a_value(answer))
            and not _OPERATOR_BEFORE.search(before)
            and not _OPERATOR_AFTER.match(text[end : end + 24])
        ):
            boxes.append(answer)
    values = [box for box in boxes if not _ARITHMETIC.search(box) or "=" in box]
    return values or boxes


# ----------------------------------------------------------------------------------------------------------------
# The question's own arithmetic stated equal to a value
# ----------------------------------------------------------------------------------------------------------------

_QUESTION_SUM = re.compile(r"-?\d+(?:\.\d+)?(?:\s*(?:[-+*/×÷−–]|\\times|\\cdot|\\div)\s*-?\d+(?:\.\d+)?)+")
_OPERATOR_WORD = re.compile(r"\s*(?:times|plus|minus|divided|multiplied|over|squared|cubed)\b", re.IGNORECASE)
_DASHES = str.maketrans({"−": "-", "–": "-", "×": "*", "÷": "/"})


def _question_sums(question: str | None) -> list[str]:
    """The arithmetic the question asks for ("Calculate 57 - 74." -> ["57-74"]), spaces and dash variants removed."""
    if not question:
        return []
    return [re.sub(r"\s+", "", m.group()).translate(_DASHES) for m in _QUESTION_SUM.finditer(question[:2000])]


def _question_statements(text: str, question: str | None) -> list[tuple[int, str]]:
    """(where, value) of each clause that states the question's own sum equal to a value: "77 - 33 = 22",
    "57 - 74 = 7 - 74 = 0" (the end of the chain), "48 - 9 ≡ 50". A chain ending in arithmetic states nothing."""
    sums = set(_question_sums(question))
    found: list[tuple[int, str]] = []
    if not sums:
        return found
    for m in _QUESTION_SUM.finditer(text):
        if re.sub(r"\s+", "", m.group()).translate(_DASHES) not in sums:
            continue
        after = m.end() + (1 if re.match(r"\.\s*[=≡]", text[m.end() : m.end() + 4]) else 0)  # "48 - 0. = 48"
        clause = _SENTENCE_END.split(text[after : after + 300], maxsplit=1)[0]
        clause = _ASIDE_EQUATION.sub(lambda a: " " * len(a.group()), clause)
        relation = re.match(r"\s*(?:=|≡|\b(?:is|equals|(?:should|must|would|will)\s+be)\b)", clause)
        if relation is None:
            continue
        at = max(clause.rfind("=") + 1, clause.rfind("≡") + 1, relation.end())  # the end of a chain "= 7 - 74 = 0"
        value = _value_at_start(clause, at, words=True)
        if (
            value is not None
            and not _ARITHMETIC.search(value[0])
            and not re.search(r"[A-Za-z]", clause[relation.end() : at])  # "= kx or 375 + 2x = 5x": to solve
            and not _OPERATOR_WORD.match(clause[value[1] :])
        ):  # "= 4 times 19 plus 2": arithmetic in words
            found.append((after + at, clean_answer(value[0])))
    return found


def _is_word(value: str) -> bool:
    return not re.search(r"\d|\\[A-Za-z]", value)


def _side_sum(text: str, at: int, question: str | None) -> bool:
    """Whether the statement read at ``at`` is an equation on other numbers than the question's ("33 + 3 = 5")."""
    before = text[max(0, at - 80) : at].rstrip()
    if not before.endswith("="):
        return False
    sums = [re.sub(r"\s+", "", m.group()).translate(_DASHES) for m in _QUESTION_SUM.finditer(before)]
    return bool(sums) and sums[-1] not in set(_question_sums(question))


# ----------------------------------------------------------------------------------------------------------------
# Committed forms
# ----------------------------------------------------------------------------------------------------------------


def _phrases(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for m in list(_ANSWER_PHRASE.finditer(text))[-_MAX_PHRASES:]:  # the last commitment wins: the last few decide
        value = _phrase_value(_SENTENCE_END.split(text[m.end() : m.end() + 600], maxsplit=1)[0])
        if value:
            found.append((m.end(), value))
    found += [(m.start(1), clean_answer(m.group(1))) for m in _VALUE_BEFORE_PHRASE.finditer(text)]
    return found


def _final_sentences(text: str, limit: int = 3) -> list[tuple[int, str]]:
    """(where it starts, the text) of the last sentences that hold a value, the last first: a digit, or a number
    word stated ("The difference is zero."); closing remarks without one ("Enjoy!", "This is a fun puzzle.") are
    skipped. Sentences end at a line break or at ". ", "! ", "? " ("3.5" is whole)."""
    offset, found = len(text), []
    last = _last_words(text)
    if not _FINISHED.search(text) and (not re.search(r"\d", last) or _runs_on(text, last)):
        return found  # cut off in the middle of words: a text that stops mid-sentence has stated nothing yet
    for line in reversed(text.splitlines(keepends=True)):
        offset -= len(line)
        if not (re.search(r"\d", line) or _WORD_STATED.search(line)):
            continue
        start, spans = 0, []
        for m in _SENTENCE_END_MARK.finditer(line):
            spans.append((start, line[start : m.end()]))
            start = m.end()
        spans.append((start, line[start:]))
        for begin, sentence in reversed(spans):
            if re.search(r"\d", sentence) or _WORD_STATED.search(sentence):
                found.append((offset + begin, sentence))
                if len(found) == limit:
                    return found
    return found


def _after_adverbs(sentence: str, at: int) -> int:
    """Where the value after a stating verb starts: after adverbs ("which is simply 24")."""
    m = _ADVERBS.match(sentence, at)
    return m.end() if m else at


def _runs_on(text: str, last: str) -> bool:
    """Whether the text's last sentence, without a full stop after sentences that have one, runs on as prose (a
    dozen words or more: "We can divide 36 by 53, which gives us 0.36, and then we'll add that result to 36, which
    results in 36"): a text cut off by the token budget, whose last number may be the start of a longer one."""
    return len(last.split()) >= 12 and _SENTENCE_END_MARK.search(text[: len(text) - len(last)]) is not None


def _last_words(text: str) -> str:
    """The text's last sentence (up to 300 characters back)."""
    tail = text.rstrip()[-300:]
    marks = [m.end() for m in _SENTENCE_END_MARK.finditer(tail)] + [tail.rfind("\n") + 1]
    return tail[max(marks) :]


def _unit_only(rest: str) -> bool:
    """Whether what follows a number to the end of its sentence is at most a unit and punctuation: "inches.",
    "in total", "\\text{ cm}", "%" - not prose ("with next to nothing", "as an intermediate result")."""
    if _CONFIRMED.fullmatch(rest):  # ", that's it."
        return True
    if _UNIT_TAIL.fullmatch(rest) is None:
        return False
    words = [w.lower() for w in re.findall(r"(?<!\\)\b[A-Za-z]+", re.sub(r"\\[A-Za-z]+\{[^{}]*\}", " ", rest))]
    if words[-2:] in (["in", "total"], ["in", "all"]):
        words = words[:-2]
    return not any(w in _NOT_UNITS for w in words)


def _statement(text: str) -> tuple[int, str] | None:
    """The value the final sentence states (``_stated``). A final sentence that is an aside ("Note that 9 = 3 x 3.",
    "For example, ...") is skipped, and so is one that only remarks on what came before ("This is the result of the
    division of 42 by 38."): the sentence before it is the final statement."""
    for at, sentence in _final_sentences(text):
        if _ASIDE_OPENER.match(sentence):
            continue
        line_end = text.find("\n", at)
        after = text[line_end:].strip() if line_end >= 0 else ""
        if _NUMBERED_STEP.match(text, text.rfind("\n", 0, at) + 1) and after and not _CLOSING.match(after):
            return None  # "1. Now multiply: 26 - 38 = 18,\nPlace a square root ...": a step, more follows
        found = _stated(text, at, sentence)
        if found is not None or not _REFERS_BACK.match(sentence):
            return found
    return None


def _stated(text: str, at: int, sentence: str) -> tuple[int, str] | None:
    """The value a sentence states: at its end after "is", "=", "gives" ... ("The sum is 55.", "The area is
    $12\\pi$ square units."); else the right-hand side of its last equation, the value alone ("So, 9 - 5 = 4 and 5
    becomes 6." -> 4). A value that is the question's arithmetic written again ("=9 - 52") states nothing, nor does
    one that an operation follows ("9 = 3 x 3", "= 2 more")."""
    sentence = _ASIDE_EQUATION.sub(lambda m: " " * len(m.group()), sentence)  # same length: positions hold
    # Only a verb near the end can state the value that ends the sentence (at most a unit may follow it).
    stated = [
        (verb, value)
        for verb in _STATING.finditer(sentence, max(0, len(sentence) - 300))
        if (value := _value_at_start(sentence, _after_adverbs(sentence, verb.end()), words=True)) is not None
    ]
    if stated:
        verb, value = stated[-1]  # the last verb followed by a value ("... get 8 in total": not "total")
        if (
            not _ARITHMETIC.search(value[0])
            and _unit_only(re.sub(r"[$*]|\\[)\]]", "", sentence[value[1] :]))
            and not (
                verb.group() == "="
                and (_relation(sentence[: verb.start()]) or _numbers_equated(sentence[: verb.start()]))
            )
        ):
            return at + verb.end(), clean_answer(value[0])
    equals = [m.start() for m in re.finditer(r"(?<![<>=!])=(?!=)", sentence)]
    if equals and not _relation(sentence[: equals[-1]]) and not _numbers_equated(sentence[: equals[-1]]):
        value = _value_at_start(sentence, equals[-1] + 1, words=True)
        # "=9 – 52" restates, it states no value; in a text cut off by the token budget ("4 + 4 + 3 = 3 does not
        # hold true since it") the sentence was still going: only a value that ends it was committed to
        if (
            value is not None
            and not _ARITHMETIC.search(value[0])
            and not _OPERATION_AFTER.match(sentence, value[1])
            and (not re.search(r"[A-Za-z]\s*$", text) or _FINISHED.search(text) or _unit_only(sentence[value[1] :]))
        ):
            return at + equals[-1] + 1, clean_answer(value[0])
    return None


def _final_line(text: str) -> tuple[int, str] | None:
    """A last line that is a value alone: "22.", "**7**", "#### 4", "184, that's correct."; lines after it that only
    talk about the answer's form are a closing remark ("112\n\nYour answer should be in the form \\boxed{result}.")."""
    stripped = text.rstrip()
    start = stripped.rfind("\n") + 1
    while start > 0 and _FORM_REMARK.fullmatch(stripped[start:]):
        start = stripped.rfind("\n", 0, start - 1) + 1
    line = stripped[start:].split("\n", 1)[0]
    body = re.sub(r"^[\s#>*_$]*(?:\\\(|\\\[)?", "", line.replace("**", "  ").replace("__", "  "))
    found = _value_at_start(body)
    if found is None:
        return None
    value, end = found
    after = re.sub(r"\\[)\]]|[*$]", "", body[end:])
    after = re.sub(r"^\s*\([^()]*\)", "", after)  # "15 (Modified Tower Method)": the value, then an aside
    if not _ARITHMETIC.search(value) and _CONFIRMED.fullmatch(after):
        return start + len(line) - len(body), clean_answer(value)
    return None


def _first_line(text: str) -> tuple[int, str] | None:
    """A reply that opens with a value alone on its line ("124\n\nAdded an ellipse ..."): it answers first and
    remarks after; any later commitment wins over it."""
    stripped = text.strip()
    if "\n" not in stripped:
        return None  # a one-line text is its final line too
    first, rest = stripped.split("\n", 1)
    found = _final_line(first)
    if found is None or any(_final_line(line) for line in rest.splitlines()[:50]):
        return None  # more lines of values alone ("1.78 ... 1."): a list or garbage, not an answer
    return 0, found[1]


def read_answer(text: str, question: str | None = None, placeholders: tuple[str, ...] = ()) -> Reading:
    """The answer ``text`` commits to (see the module docstring); ``NO_READING`` when it commits to none.
    ``question``: the problem, whose own arithmetic ("57 - 74") stated equal to a value commits to that value;
    ``placeholders``: words the instruction boxes ("result" of "\\boxed{result}"), whose copies are no answer."""
    if not isinstance(text, str):
        return NO_READING
    text = _without_code(_without_placeholders(text, placeholders))
    sums_asked = bool(_question_sums(question))
    boxes = _answer_boxes(text, sums_asked)
    if boxes:
        if len({_normalise(box) for box in boxes}) > 1:
            return HEDGED  # several different boxed values commit to none of them
        return Reading(boxes[-1][:MAX_ANSWER_CHARS], "boxed")
    text = text.replace("**", "").replace("__", "")  # markdown emphasis: "**Final answer: 7**" is "Final answer: 7"
    # a word is no answer to a sum ("Calculate 62 - 28. ... the final answer is double-precision.")
    candidates = [(at, value, "phrase") for at, value in _phrases(text) if not (sums_asked and _is_word(value))]
    about_question = _question_statements(text, question)
    candidates += [(at, value, "statement") for at, value in about_question]
    for rule, form in ((_statement, "statement"), (_final_line, "line"), (_first_line, "line")):
        found = rule(text)
        # working on other numbers after the question's own sum was stated ("77 - 33 = 22 ... 33 + 3 = 5") is a
        # side step, not a new answer
        if found is not None and found[1] and not (about_question and _side_sum(text, found[0], question)):
            candidates.append((found[0], found[1], form))
    if not candidates:
        return NO_READING
    _, value, form = max(candidates, key=lambda c: c[0])  # the last commitment wins
    return Reading(value[:MAX_ANSWER_CHARS], form)


def last_number(text: str) -> Reading:
    """The last number written, a guess (form "last-number"); ``NO_READING`` when there is none."""
    numbers = _NUMBER.findall(text) if isinstance(text, str) else []
    return Reading(clean_answer(numbers[-1])[:MAX_ANSWER_CHARS], "last-number") if numbers else NO_READING


def read_lenient(text: str) -> Reading:
    """The committed answer, or else the last number written (a guess, form "last-number"); a hedge stays None."""
    reading = read_answer(text)
    return reading if reading.value is not None or reading == HEDGED else last_number(text)


def extract_answer(text: str) -> tuple[str | None, bool]:
    """(committed final answer, whether it came from a box); (None, False) when the text commits to none."""
    reading = read_answer(text)
    return reading.value, reading.boxed


def extract_lenient(text: str) -> tuple[str | None, bool]:
    """Like ``extract_answer``, but a text that commits to nothing is read as its last number."""
    reading = read_lenient(text)
    return reading.value, reading.boxed


# ----------------------------------------------------------------------------------------------------------------
# Checking
# ----------------------------------------------------------------------------------------------------------------


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


@functools.cache
def _quiet_math_verify() -> None:
    """Drop math-verify's "Timeout is disabled as parsing_timeout (timeout_seconds) is None ..." notice (logged once
    per process by parse and once by verify, so a run's terminal got it from every scoring process). We pass None on
    purpose off the main thread, where its SIGALRM timeout cannot work, and guard with _risky() instead: the notice
    is for us, not the user. Only that notice: its other records (a parse that timed out) still reach the logs."""
    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(lambda record: not record.getMessage().startswith("Timeout is disabled"))


def _math_verify_equal(reference: str, answer: str) -> bool:
    from math_verify import parse, verify  # lazy: sympy and lark are slow to import, extraction doesn't need them
    from math_verify.errors import TimeoutException

    _quiet_math_verify()

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


def stated_value(reference: str, answer: str) -> str:
    """The value an answer states: the right-hand side of "x = 5" or "23 + 5 = 28" (unless the reference is an
    equation too)."""
    return answer.rsplit("=", 1)[1].strip() if "=" in answer and "=" not in reference else answer


def is_unevaluated(reference: str | None, answer: str | None) -> bool:
    """Whether ``answer`` writes arithmetic out instead of giving its value ("9 + 3" where the reference is 12)."""
    return bool(
        reference
        and answer
        and _INTEGER.fullmatch(reference.strip())
        and _UNEVALUATED.search(stated_value(reference, answer))
    )


def answers_match(reference: str | None, answer: str | None) -> bool:
    """Whether ``answer`` equals ``reference`` mathematically. Never raises."""
    try:
        if not reference or not answer or not answer.strip():
            return False
        reference, answer = reference.strip(), answer.strip()
        answer = stated_value(reference, answer)
        if is_unevaluated(reference, answer):
            return False  # math-verify would simplify "23 + 5" to 28: copying the question is not computing it
        if _normalise(reference) == _normalise(answer):
            return True  # ("1 000" is 1000: spaces as thousands separators are read here, before the next line)
        if _JUXTAPOSED.fullmatch(answer):
            return False
        return _math_verify_equal(reference, answer)
    except Exception:
        return False


def is_checkable(reference: str) -> bool:
    """Whether math-verify turns ``reference`` into a mathematical object (not just a string to compare)."""
    from math_verify import parse
    from math_verify.errors import TimeoutException

    _quiet_math_verify()
    if _risky(reference):
        return False
    timeout = _VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        return any(not isinstance(x, str) for x in parse(f"\\boxed{{{reference}}}", parsing_timeout=timeout))
    except (Exception, TimeoutException):
        return False
