"""Which option a multiple-choice answer commits to: pure functions, none of them raises on any string.

lm-eval's MMLU-Pro regex (``answer is \\(?([A-J])\\)?``) once scored 0 for a model under a chat template because the
model wrote "**Answer: C**". Extraction here follows what chat models actually write, in three tiers:

1. committed mentions, anywhere in the text, the last one wins ("The answer is (B). Wait, no: the answer is (D)"):
   "The answer is (X)" (the requested form), "the answer is X.", "**Answer: C**", "Answer: (D) photosynthesis",
   "the correct option is E", "the correct answer is option G", "I'd go with B", "\\boxed{C}", "Option B is
   correct", and an answer phrase followed by an option's text ("The answer is photosynthesis");
2. otherwise a letter standing on its own line ("(F)", "**C**", "B."), the last one; or a single line opening
   with a letter ("B) text") - several such lines are an echoed option list, not an answer;
3. otherwise an option's text written out: the last sentence that mentions option texts, if it mentions one only.

Letters are upper case, except inside parentheses after an answer phrase ("the answer is (b)"): a lower-case "a"
in prose is an article. A bare "A" or "I" followed by a lower-case word ("Answer: A protein ...") is an article or
a pronoun too, unless that word is a connective ("A because ..."). Letters beyond the number of options are not
answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

LETTERS = "ABCDEFGHIJ"  # MMLU-Pro has up to 10 options

# An answer phrase: "answer" or "correct/final/my option|choice" with a verb or a colon ("Option B says ..." is not
# a commitment), or "I'd go with". The letter (or option text) must come right after it; markdown, quotes and the
# word "option" may stand between.
_PHRASE = re.compile(
    r"(?i:(?:\b(?:(?:final|correct|right|best)\s+)?answer"
    r"|\b(?:final|correct|right|best|my)\s+(?:option|choice|letter|response))"
    r"(?:\s*:|\s*=|\s+(?:is|would\s+be|should\s+be|will\s+be|must\s+be)"
    r"(?:\s+(?:therefore|thus|clearly|definitely|probably|likely|most\s+likely))?\b)"
    r"|\bi(?:\s+would|\s+will|['’]d|['’]ll)?\s+(?:choose|pick|select|go\s+with)\b)"
    r"[\s*_:=\"'“]*(?i:(?:option|choice|letter)\b\s*)?"
)
_REQUESTED = re.compile(r"(?i:answer\s+is)[\s*_]*\(([A-J])\)")  # "The answer is (X)", markdown allowed around
_PAREN_LETTER = re.compile(r"\(\s*([A-Ja-j])\s*\)")
_BARE_LETTER = re.compile(r"([A-J])(?![A-Za-z0-9'’])")
_FOLLOWING_WORD = re.compile(r"\s+([a-z]+)")
_CONNECTIVES = {"because", "since", "as", "which", "is"}  # "A because ..." is still the letter A
_STATEMENT = re.compile(
    r"(?<![A-Za-z])(?i:(?:option|choice)\s*)?\(?([A-J])\)?[\s*_]+(?i:is\s+(?:the\s+)?(?:correct|right|best)\b)"
)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{\s*)?\(?([A-Ja-j])\)?\s*\}")  # "\boxed{C}", "\boxed{\text{C}"
_ALONE_LINE = re.compile(r"^[\s*_#>]*\(?([A-J])\)?[.:]?[\s*_]*$", re.MULTILINE)
_OPENING_LINE = re.compile(r"^[\s*_]*\(?([A-J])[).:][\s*_]+\S.*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"[!?\n]|\.(?=\s|$)")  # not the point in "3.5" or "U.S"


@dataclass(frozen=True)
class Choice:
    letter: str | None  # "A".."J", None when no answer was found
    form: str | None  # "requested", "phrase", "statement", "boxed", "phrase-text", "line", "text"

    @property
    def requested(self) -> bool:
        """The answer came in the requested form "The answer is (X)"."""
        return self.form == "requested"


NO_CHOICE = Choice(None, None)


def option_letters(num_options: int) -> str:
    return LETTERS[: max(0, min(num_options, len(LETTERS)))]


def format_options(options: Sequence[str]) -> str:
    """ "A. first\\nB. second ..." as MMLU-Pro's own prompts list them."""
    return "\n".join(f"{letter}. {option}" for letter, option in zip(LETTERS, options, strict=False))


def _normalise(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split()).strip(" .;:!*_\"'")


def _letter_after(text: str, at: int, valid: str) -> str | None:
    """The letter that starts at ``at`` (parenthesised or bare), if it is a valid answer letter."""
    paren = _PAREN_LETTER.match(text, at)
    if paren:
        letter = paren.group(1).upper()
        return letter if letter in valid else None
    bare = _BARE_LETTER.match(text, at)
    if not bare or bare.group(1) not in valid:
        return None
    following = _FOLLOWING_WORD.match(text, bare.end())
    if bare.group(1) in "AI" and following and following.group(1) not in _CONNECTIVES:
        return None  # "Answer: A protein that ..." - an article; "I think" - a pronoun
    return bare.group(1)


def _option_at(text: str, at: int, options: Sequence[str]) -> str | None:
    """The option whose text starts at ``at`` (the longest, when one option's text begins another's)."""
    rest = _normalise(text[at : at + 400])
    best: tuple[int, str] | None = None
    for candidate in (rest, re.sub(r"^(?:the|an?)\s+", "", rest)):  # "The answer is the mitochondria."
        for letter, option in zip(LETTERS, options, strict=False):
            target = _normalise(option)
            whole = candidate.startswith(target) and not candidate[len(target) : len(target) + 1].isalnum()
            if target and whole and (best is None or len(target) > best[0]):
                best = (len(target), letter)
    return best[1] if best else None


def _committed(text: str, options: Sequence[str]) -> list[tuple[int, Choice]]:
    valid = option_letters(len(options))
    found: list[tuple[int, Choice]] = []
    requested = {m.start(1) - 1 for m in _REQUESTED.finditer(text) if m.group(1) in valid}
    for m in _PHRASE.finditer(text):
        letter = _letter_after(text, m.end(), valid)
        if letter:
            form = "requested" if m.end() in requested else "phrase"
            found.append((m.end(), Choice(letter, form)))
        elif (letter := _option_at(text, m.end(), options)) is not None:
            found.append((m.end(), Choice(letter, "phrase-text")))
    for pattern, form in ((_STATEMENT, "statement"), (_BOXED, "boxed")):
        for m in pattern.finditer(text):
            letter = m.group(1).upper()
            if letter in valid:
                found.append((m.start(1), Choice(letter, form)))
    return sorted(found, key=lambda item: item[0])


def _on_a_line(text: str, valid: str) -> Choice:
    alone = [m.group(1) for m in _ALONE_LINE.finditer(text) if m.group(1) in valid]
    if alone:
        return Choice(alone[-1], "line")
    opening = {m.group(1) for m in _OPENING_LINE.finditer(text)}
    if len(opening) == 1 and (letter := opening.pop()) in valid:
        return Choice(letter, "line")
    return NO_CHOICE


def _written_out(text: str, options: Sequence[str]) -> Choice:
    """The option named in the last sentence that names any option, when it names exactly one."""
    spans: list[tuple[int, int, str]] = []
    # Lines that open with a letter ("B) photosynthesis") echo the option list: blanked, not read as answers.
    lowered = _OPENING_LINE.sub(lambda m: " " * len(m.group()), text).lower().replace("’", "'")
    for letter, option in zip(LETTERS, options, strict=False):
        target = " ".join(option.lower().replace("’", "'").split()).rstrip(".")
        if not target:
            continue
        pattern = r"(?<!\w)" + r"\s+".join(re.escape(w) for w in target.split()) + r"(?!\w)"
        spans += [(m.start(), m.end(), letter) for m in re.finditer(pattern, lowered)]
    # An option inside a longer option's text ("wrong" in "not wrong") is not a mention of its own.
    spans = [s for s in spans if not any(o[0] <= s[0] and s[1] <= o[1] and o[1] - o[0] > s[1] - s[0] for o in spans)]
    if not spans:
        return NO_CHOICE
    last_start = max(spans, key=lambda s: (s[1], s[1] - s[0]))[0]
    boundaries = [m.end() for m in _SENTENCE_END.finditer(text, 0, last_start)]
    sentence_start = boundaries[-1] if boundaries else 0
    named = {letter for start, _, letter in spans if start >= sentence_start}
    return Choice(named.pop(), "text") if len(named) == 1 else NO_CHOICE


def extract_choice(text: str, options: Sequence[str]) -> Choice:
    """The option ``text`` commits to, given the ``options`` it chose from (see the module docstring)."""
    if not isinstance(text, str) or not text.strip() or not options:
        return NO_CHOICE
    options = [o if isinstance(o, str) else str(o) for o in options][: len(LETTERS)]
    committed = _committed(text, options)
    if committed:
        return committed[-1][1]
    line = _on_a_line(text, option_letters(len(options)))
    return line if line.letter else _written_out(text, options)
