"""Which option a multiple-choice answer commits to: pure functions, none of them raises on any string.

lm-eval's MMLU-Pro regex (``answer is \\(?([A-J])\\)?``) once scored 0 for a model under a chat template because the
model wrote "**Answer: C**". Extraction here follows what chat models actually write, in three tiers:

1. committed mentions, anywhere in the text, the last one wins ("The answer is (B). Wait, no: the answer is (D)"),
   and reasoning after it does not undo it ("The answer is (D). Step by step: A is ..., C is ..."):
   "The answer is (X)" (the requested form), "the answer is X.", "**Answer: C**", "Answer: (D) photosynthesis",
   "the correct option is E", "the correct answer is option G", "the initial answer of A", "I'd go with B",
   "I chose answer 1 (A)", "so it is (B)", "Therefore, answer A", 'the correct answer "D"', "\\boxed{C}", "Option B
   is correct", "option 2 is correct", "the answer is option 2" (an option named by its number), "The answer is: 2.
   Kinetic friction" (its number and text), "The answer is b) ..." (lower case with a closing parenthesis), an
   answer phrase followed by an option's text ("The answer is photosynthesis", "The answer is (i) and (iii)" for
   "(i) and (iii) only") or naming one option in its sentence ("The answer is backed by option A"); "A is the
   answer", "option C probably the best answer", "the answer, which is (D)", "The correct answer is ['B']", "Choose
   A: ..." (a line that opens so), "The most appropriate pharmacotherapy ... is <option text>";
   "none of the options is correct" (or "none of the above", when no option says so) commits to no option.
   Options named "the answer" in turn are an enumeration, not a choice: every option, or three or more in the
   options' order ("The answer is A ... The answer is C ... The answer is D"), unless the last one is named again
   in a paragraph of its own ("...\\n\\nThe correct answer is D."); two answers side by side on one line ("The answer
   is (A) The answer is (B)") choose neither;
2. otherwise a letter standing on its own line ("(F)", "**C**", "B.", "b)"), the last one, unless three or more
   letters stand alone (an echoed list) or the reply opens with another letter's line ("D. ...\\n\\nC"); or a reply
   whose first line opens with a letter ("B) text", "c. text" when the option's text follows) and no other line
   opens with another letter (that would be an echoed option list), and not with two ("C. (B) ...");
3. otherwise an option's text written out in the text's last sentence, if it names one option only ("... so it
   must be photosynthesis."); a mention in passing, followed by more sentences, is not an answer.

Letters are upper case, except "(b)" and "b)"; a lower-case "a" in prose is an article and "(i)" a roman numeral. A
bare "A" or "I" followed by a lower-case word ("Answer: A protein ...") is an article or a pronoun too, unless that
word is a connective or a verb ("A because ...", "A requires B"). A phrase after "incorrect", "wrong", "no" or "not
the" ("An incorrect answer is (A)") commits to nothing, nor does a letter followed by "is wrong". A letter beyond
the options ("The answer is (E)" with options A-D) is not an option: it is no answer unless another valid one is
committed, and it stops tiers 2 and 3 from reading a letter into the text instead. An answer phrase followed by the
whole option list ("The correct answer would be:\\nA. ...\\nB. ...", the next letter on the next line) names no
option, nor does a letter whose option's text the text then rejects ('A. "..." wasn't addressed'); a letter read
from a line or an option's text (tiers 2 and 3) is no answer when the text rejects it ("D. ...\\n... not exactly
(D)"), but reasoning after a committed answer does not undo it.

Agreement with answers labelled by reading real SmolLM2-135M-Instruct outputs: tests/fixtures/extraction/ and
``python bench/extraction_agreement.py``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

LETTERS = "ABCDEFGHIJ"  # MMLU-Pro has up to 10 options

# An answer phrase: "answer" or "correct/final/my option|choice" with a verb or a colon ("Option B says ..." is not
# a commitment), "I'd go with", "I chose", "so it is", "Therefore, answer", 'the correct answer "D"'. The letter (or
# option text, or option number) must come right after it; markdown, quotes and the word "option" may stand between.
_PHRASE = re.compile(
    r"(?i:(?:\b(?:(?:final|correct|right|best)\s+)?answer(?:\s+to\s+(?:the|this|your|that)\s+question)?"
    r"|\b(?:final|correct|right|best|my)\s+(?:option|choice|letter|response))"
    r"(?:\s+(?:to|for)\s+(?:the|this|your|that)(?:\s+given)?(?:\s+answer)?\s+(?:question|choices|options))?"
    r"(?:\s*:|\s*=|\s*,?\s+which\s+is|\s+(?:is|would\s+be|should\s+be|will\s+be|must\s+be)"
    r"(?:\s+(?:therefore|thus|clearly|definitely|probably|likely|most\s+likely|indeed|actually|obviously|surely))?\b)"
    r"|\bi(?:\s+would|\s+will|['’]d|['’]ll)?\s+(?:choose|pick|select|go\s+with)\b"
    r"|\bi\s+(?:chose|picked|selected|went\s+with)\b"
    r"|\b(?:so|thus|therefore|hence)[\s,]+(?:it|this|that)(?:\s+is|['’]s|\s+must\s+be|\s+would\s+be)\b"
    r"|\b(?:so|thus|therefore|hence)[\s,]+(?:the\s+)?(?:answer|option|choice)(?=\s+\(?[A-J]\b)"
    r"|\b(?:correct|right|final)\s+(?:answer|option|choice)(?=\s*[\"“])"
    r"|\b(?i:initial|original|final)\s+answer\s+of\b"
    r"|\bthe\s+(?:most\s+(?:appropriate|suitable|likely|accurate)|best)(?:\s+[a-z]+){1,7}?\s+(?:is|would\s+be)\b"
    r"|(?m:^)[\s*_#>]*(?:choose|select|pick)(?=\s+\(?[A-J]\b))"  # "Choose A: A"
    r"[\s*_:=\"'“]*(?i:(?:option|choice|letter|answer|number)\b\s*)?"
)
_NEGATED_BEFORE = re.compile(r"(?i:\b(?:incorrect|wrong|no|not(?:\s+the)?|isn['’]t(?:\s+the)?)[\s*_]*)$")
_REJECTS = re.compile(
    r"(?i:[\s*_\"'”).]*(?:(?:is|was|are|were)\s+not\b|(?:isn|wasn|aren|weren)['’]t\b|(?:is|was)\s+(?:incorrect|wrong|false)\b))"
)
_NEGATED_AFTER = re.compile(r"(?i:[\s*_\"'”).]*(?:is|was)\s+(?:not\b|incorrect|wrong|false))")
_REQUESTED = re.compile(r"(?i:answer\s+is)[\s*_]*\(([A-J])\)")  # "The answer is (X)", markdown allowed around
_PAREN_LETTER = re.compile(r"\(\s*([A-Ja-hj])\s*\)")  # "(i)" in lower case is a roman numeral
_LOWER_CLOSING = re.compile(r"([a-hj])\)")  # "b)"
_BRACKETED = re.compile(r"\[\s*['\"‘’“”]?\s*([A-J])\s*['\"‘’“”]?\s*\]")  # "['B']", "[C]"
_BARE_LETTER = re.compile(r"([A-J])(?![A-Za-z0-9'’])")
_NUMBERED = re.compile(r"(\d{1,2})(?!\d)(?:\s*\(\s*([A-J])\s*\))?")  # "2", "1 (A)"
_NAMED_WORD = re.compile(r"(?i:(?:option|choice|answer|number)\b\s*)$")
_IN_SENTENCE = re.compile(r"\b(?i:option|choice)\s+\(?([A-J])\)?(?![A-Za-z0-9])")
_NEGATION = re.compile(r"(?i:\bnot\b|n['’]t\b|\bincorrect\b|\bwrong\b|\beither\b|\bor\b|\bneither\b)")
_FOLLOWING_WORD = re.compile(r"\s+([a-z]+)")
# "A because ...", "A requires B" is still the letter A (an article is followed by a noun, not a verb)
_CONNECTIVES = {"because", "since", "as", "which", "is", "requires", "means", "has", "fits", "matches", "seems"}
_STATEMENT = re.compile(
    r"(?<![A-Za-z])(?i:(?:option|choice)\s*)?\(?([A-J])\)?[\s*_]+(?i:is\s+(?:the\s+)?(?:correct|right|best)\b"
    r"|is\s+the\s+(?:final\s+)?answer\b)"  # "A is the answer"
    r"|(?<![A-Za-z])(?i:option|choice)\s*\(?([A-J])\)?[\s*_]+(?i:(?:is\s+)?(?:probably|likely|clearly|definitely|"
    r"obviously|surely)\s+(?:is\s+)?the\s+(?:correct|right|best)\b)"  # "option C probably the best answer"
)
_NUMBER_STATEMENT = re.compile(
    r"(?i:\b(?:option|choice|answer)\s+(\d{1,2})(?!\d)(?:\s*\(\s*([A-J])\s*\))?[\s*_]+is\s+(?:the\s+)?"
    r"(?:correct|right|best)\b)"
)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{\s*)?\(?([A-Ja-hj])\)?\s*\}")  # "\boxed{C}", "\boxed{\text{C}"
# "not (D)", "not option B", "not B.": a letter the text rejects after choosing it is not its answer.
_REJECTED = re.compile(
    r"\b(?i:not)\s+(?i:exactly\s+|quite\s+|really\s+)?(?:(?i:option|choice)\s+\(?([A-J])\)?(?![A-Za-z0-9])"
    r"|\(([A-J])\)|([A-J])(?=[.,;!?]|\s*$))"
)
_NONE = re.compile(
    r"(?i:\b(?:none\s+of\s+(?:the\s+|these\s+|those\s+)?(?:above|options|choices|answers|given\s+(?:options|choices))"
    r"(?:\s+(?:is|are|seems?\s+to\s+be)\s+(?:correct|right|true|valid)\b|[\s*_\"”]*(?=[.!\n]|$))"
    r"|no\s+(?:option|choice)\s+(?:is|was)\s+(?:correct|right|true)\b"
    r"|neither\s+(?:option|choice)\s+is\s+(?:correct|right)\b))"
)
_ALONE_LINE = re.compile(r"^[\s*_#>]*(?:\(?([A-J])\)?[.:]?|\(?([a-hj])\))[\s*_]*$", re.MULTILINE)
_OPENING_LINE = re.compile(r"^[\s*_#>-]*\(?([A-Ja-hj])([).:\"'])[\s*_]*(\S.*)?$", re.MULTILINE)
_SENTENCE_END = re.compile(r"[!?\n]|\.(?=\s|$)")  # not the point in "3.5" or "U.S"
# One answer phrase's letter right after another's: "(A) The answer is (B)".
_BACK_TO_BACK = re.compile(r"\(?[A-J]\)?[ \t\"'“”*_]*(?i:the\s+answer\s+is)[ \t*_:]*")  # on one line
_MAX_PHRASES = 64  # answer phrases read, the last ones: a text with more is degenerate, and reading all is slow


@dataclass(frozen=True)
class Choice:
    letter: str | None  # "A".."J", None when no answer was found
    form: str | None  # "requested", "phrase", "statement", "boxed", "phrase-text", "line", "text"

    @property
    def requested(self) -> bool:
        """The answer came in the requested form "The answer is (X)"."""
        return self.form == "requested"


NO_CHOICE = Choice(None, None)
_INVALID = Choice(None, "invalid")  # a committed letter beyond the options: blocks tiers 2 and 3
_NONE_OF_THEM = Choice(None, "none")  # "none of the options is correct": a commitment to no option


def option_letters(num_options: int) -> str:
    return LETTERS[: max(0, min(num_options, len(LETTERS)))]


def format_options(options: Sequence[str]) -> str:
    """ "A. first\\nB. second ..." as MMLU-Pro's own prompts list them."""
    return "\n".join(f"{letter}. {option}" for letter, option in zip(LETTERS, options, strict=False))


def _normalise(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split()).strip(" .;:!*_\"'")


def _letter_after(text: str, at: int, valid: str) -> tuple[str | None, bool, int]:
    """(the letter that starts at ``at`` if a valid answer letter, whether a letter beyond the options is there,
    where the mention ends). Parenthesised, bare upper case, lower case with ")", or an option number after
    "option"/"answer"."""
    paren = _PAREN_LETTER.match(text, at) or _LOWER_CLOSING.match(text, at) or _BRACKETED.match(text, at)
    if paren:
        letter = paren.group(1).upper()
        return (letter, False, paren.end()) if letter in valid else (None, True, paren.end())
    numbered = _NUMBERED.match(text, at)
    if numbered:
        if numbered.group(2):  # "answer 1 (A)": the letter
            letter = numbered.group(2)
            return (letter, False, numbered.end()) if letter in valid else (None, True, numbered.end())
        if _NAMED_WORD.search(text, max(0, at - 12), at):  # "option 2", not a bare number (a numeric option)
            index = int(numbered.group(1)) - 1
            return (valid[index], False, numbered.end()) if 0 <= index < len(valid) else (None, True, at)
        return None, False, at
    bare = _BARE_LETTER.match(text, at)
    if not bare:
        return None, False, at
    following = _FOLLOWING_WORD.match(text, bare.end())
    if bare.group(1) in "AI" and following and following.group(1) not in _CONNECTIVES:
        return None, False, at  # "Answer: A protein that ..." - an article; "I think" - a pronoun
    if bare.group(1) not in valid:
        return None, True, bare.end()
    return bare.group(1), False, bare.end()


def _option_targets(option: str) -> list[str]:
    """How an option's text may be written: whole, and without a trailing "only" ("(i) and (iii) only")."""
    target = _normalise(option)
    short = re.sub(r"\s+only$", "", target)
    return [t for t in dict.fromkeys((target, short)) if t]


def _option_at(text: str, at: int, options: Sequence[str]) -> str | None:
    """The option whose text starts at ``at`` (the longest, when one option's text begins another's)."""
    rest = _normalise(text[at : at + 400])
    best: tuple[int, str] | None = None
    for candidate in (rest, re.sub(r"^(?:the|an?)\s+", "", rest)):  # "The answer is the mitochondria."
        for letter, option in zip(LETTERS, options, strict=False):
            for target in _option_targets(option):
                whole = candidate.startswith(target) and not candidate[len(target) : len(target) + 1].isalnum()
                if whole and (best is None or len(target) > best[0]):
                    best = (len(target), letter)
    return best[1] if best else None


def _numbered_option(text: str, at: int, options: Sequence[str]) -> str | None:
    """'The answer is: 2. Kinetic friction': an option's number followed by that option's own text."""
    numbered = re.compile(r"[\s*_]*(\d{1,2})[.)]\s+").match(text, at)
    if numbered is None or not 1 <= int(numbered.group(1)) <= len(options):
        return None
    letter = LETTERS[int(numbered.group(1)) - 1]
    return letter if _option_at(text, numbered.end(), options) == letter else None


def _lists_options(text: str, at: int, letter: str) -> bool:
    """Whether ``letter`` at ``at`` opens a line that the next line follows with the next letter: an option list
    ("A. ...\nB. ..."); "D. Skimming\n\nA: A" is an answer and junk after it."""
    line_start = text.rfind("\n", 0, at) + 1
    if text[line_start:at].strip(" \t*_#>-(") or "\n" not in text[at:]:
        return False
    following = [line for line in text[at:].split("\n")[1:4] if line.strip()]
    first = _OPENING_LINE.match(following[0]) if following else None
    return first is not None and LETTERS.find(first.group(1).upper()) == LETTERS.find(letter) + 1


def _rejected_text(text: str, at: int, options: Sequence[str]) -> bool:
    """Whether a letter's line goes on with an option's text and then rejects it: 'A. "The intervening causes
    relieved the manufacturer" wasn't addressed.'"""
    lead = re.match(r"[\s.:)*_\"'“]*", text[at : at + 8])
    start = at + (lead.end() if lead else 0)
    letter = _option_at(text, start, options)
    if letter is None:
        return False
    target = max(_option_targets(options[LETTERS.index(letter)]), key=len)
    words = len(target.split())
    rest = text[start:]
    ends = [m.end() for m in re.finditer(r"\S+", rest)][: words + 1]
    tail = rest[ends[words - 1] if len(ends) >= words else len(rest) :]
    return _REJECTS.match(tail) is not None


def _named_in_sentence(text: str, at: int, valid: str) -> str | None:
    """'The answer is backed by option A': one option named by letter in the answer phrase's sentence."""
    end = _SENTENCE_END.search(text, at, at + 300)  # bounded: a sentence, not the rest of a long text
    sentence = text[at : end.start() if end else at + 300]
    if _NEGATION.search(sentence):
        return None
    named = {m.group(1) for m in _IN_SENTENCE.finditer(sentence)}
    return named.pop() if len(named) == 1 and next(iter(named)) in valid else None


def _committed(text: str, options: Sequence[str]) -> list[tuple[int, Choice]]:
    valid = option_letters(len(options))
    found: list[tuple[int, Choice]] = []
    requested = {m.start(1) - 1 for m in _REQUESTED.finditer(text) if m.group(1) in valid}
    for m in list(_PHRASE.finditer(text))[-_MAX_PHRASES:]:  # the last commitment wins: the last few decide
        if _NEGATED_BEFORE.search(text, max(0, m.start() - 16), m.start()):
            continue  # "An incorrect answer is (A)", "No answer is D"
        letter, invalid, end = _letter_after(text, m.end(), valid)
        rejected = _NEGATED_AFTER.match(text, end) or _rejected_text(text, end, options)  # "answer A is wrong"
        if letter and (rejected or _lists_options(text, m.end(), letter)):
            continue  # 'A. "text" wasn't addressed'; "The correct answer would be:\nA. ...\nB. ..."
        if letter:
            form = "requested" if m.end() in requested else "phrase"
            found.append((m.end(), Choice(letter, form)))
        elif (letter := _option_at(text, m.end(), options) or _numbered_option(text, m.end(), options)) is not None:
            found.append((m.end(), Choice(letter, "phrase-text")))
        elif invalid:
            found.append((m.end(), _INVALID))
        elif (letter := _named_in_sentence(text, m.end(), valid)) is not None:
            found.append((m.end(), Choice(letter, "phrase")))
    for pattern, form in ((_STATEMENT, "statement"), (_BOXED, "boxed")):
        for m in pattern.finditer(text):
            group = 1 if m.group(1) else 2
            letter = m.group(group).upper()
            found.append((m.start(group), Choice(letter, form) if letter in valid else _INVALID))
    for m in _NUMBER_STATEMENT.finditer(text):
        index = LETTERS.index(m.group(2)) if m.group(2) else int(m.group(1)) - 1
        found.append((m.start(1), Choice(valid[index], "statement") if 0 <= index < len(valid) else _INVALID))
    if not any("none of" in _normalise(o) or _normalise(o).startswith("none") for o in options):
        found += [(m.start(), _NONE_OF_THEM) for m in _NONE.finditer(text)]
    return sorted(found, key=lambda item: item[0])


_MARKER_IN_LINE = re.compile(r"(?:^|\s)\(?([A-Ja-j])[).:]\s")  # option markers along one line: an enumeration


def _on_a_line(text: str, options: Sequence[str]) -> Choice:
    valid = option_letters(len(options))
    alone = [(m.group(1) or m.group(2)).upper() for m in _ALONE_LINE.finditer(text)]
    if len(set(alone)) >= 3:  # "A)\nB)\nC)\nD)": an echoed list, not an answer
        alone = []
    alone = [letter for letter in alone if letter in valid]
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    first = _OPENING_LINE.match(first_line)
    if alone:
        if first is not None and first.group(1).upper() != alone[-1] and not _ALONE_LINE.fullmatch(first_line):
            return NO_CHOICE  # "D. text\n...\nC": the reply opens with one letter and stands another alone
        return Choice(alone[-1], "line")
    openings = list(_OPENING_LINE.finditer(text))
    if first is None or not openings:
        return NO_CHOICE
    letter, separator, rest = first.group(1), first.group(2), first.group(3) or ""
    if re.match(r"[\s*_]*\(?[A-J]\)", rest):
        return NO_CHOICE  # "C. (B) The Entire Impact ...": two letters, no answer
    if len({m.group(1).upper() for m in _MARKER_IN_LINE.finditer(first_line)}) >= 3:  # "A) x B) y C) z": the list
        return NO_CHOICE
    if letter.islower():  # "b) text"; "c. text" only with the option's own text after it
        index = LETTERS.index(letter.upper())
        own = index < len(options) and _option_at(rest, 0, [""] * index + [options[index]]) is not None
        if separator != ")" and not own:
            return NO_CHOICE
    if {m.group(1).upper() for m in openings} != {letter.upper()} or letter.upper() not in valid:
        return _after_the_list(text, valid)
    return Choice(letter.upper(), "line")


def _after_the_list(text: str, valid: str) -> Choice:
    """The option list echoed, then one option line alone in a paragraph after it ("A. ...\nB. ...\nC. ...\nD. ...
    \n\nD. ..."): that option is the one chosen."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    if len(paragraphs) < 2 or "\n" in paragraphs[-1]:
        return NO_CHOICE
    last = _OPENING_LINE.match(paragraphs[-1])
    listed = {m.group(1).upper() for m in _OPENING_LINE.finditer("\n\n".join(paragraphs[:-1]))}
    # a repeat of a listed option, not the list's own next item ("A. ...\n\nB. ...\n\nC. ...\n\nD. ...")
    if last is None or len(listed) < 3 or last.group(1).upper() not in listed or last.group(1).upper() not in valid:
        return NO_CHOICE
    return Choice(last.group(1).upper(), "line")


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
    last_start, last_end, _ = max(spans, key=lambda s: (s[1], s[1] - s[0]))
    sentence_end = _SENTENCE_END.search(text, last_end)
    if sentence_end and re.search(r"\w", text[sentence_end.end() :]):
        return NO_CHOICE  # the text goes on after that sentence: a mention in passing, not its conclusion
    boundaries = [m.end() for m in _SENTENCE_END.finditer(text, 0, last_start)]
    sentence_start = boundaries[-1] if boundaries else 0
    named = {letter for start, _, letter in spans if start >= sentence_start}
    return Choice(named.pop(), "text") if len(named) == 1 else NO_CHOICE


def _enumeration(decisive: list[tuple[int, Choice]], num_options: int) -> bool:
    """Whether the committed letters name the options in turn: every option, or three or more in the options' order
    ("The answer is A ... The answer is C ... The answer is D"), a partial enumeration."""
    letters = [c.letter for _, c in decisive if c.letter]
    if num_options >= 3 and set(letters) >= set(option_letters(num_options)):
        return True
    runs = [letter for i, letter in enumerate(letters) if i == 0 or letter != letters[i - 1]]
    return len(runs) >= 3 and all(a < b for a, b in itertools.pairwise(runs))


def _concluded(text: str, decisive: list[tuple[int, Choice]]) -> bool:
    """Whether an enumeration ends with a conclusion: its last letter named again in a paragraph of its own
    ("... The answer is D. ...\n\nThe correct answer is D.")."""
    if len(decisive) < 2 or decisive[-1][1].letter is None or decisive[-1][1].letter != decisive[-2][1].letter:
        return False
    return "\n\n" in text[decisive[-2][0] : decisive[-1][0]]


def extract_choice(text: str, options: Sequence[str]) -> Choice:
    """The option ``text`` commits to, given the ``options`` it chose from (see the module docstring)."""
    if not isinstance(text, str) or not text.strip() or not options:
        return NO_CHOICE
    options = [o if isinstance(o, str) else str(o) for o in options][: len(LETTERS)]
    committed = _committed(text, options)
    decisive = [(at, choice) for at, choice in committed if choice is not _INVALID]  # reasoning after stays
    if _enumeration(decisive, len(options)):
        if not _concluded(text, decisive):
            return NO_CHOICE  # "1. The answer is A ... 4. The answer is D": every option in turn is an enumeration
        return decisive[-1][1]
    side_by_side = len(decisive) >= 2 and decisive[-1][1].letter != decisive[-2][1].letter
    if side_by_side and _BACK_TO_BACK.fullmatch(text, decisive[-2][0], decisive[-1][0]):
        return NO_CHOICE  # '"The answer is (A) The answer is (B)"': two answers side by side, neither chosen
    if decisive:
        return NO_CHOICE if decisive[-1][1] is _NONE_OF_THEM else decisive[-1][1]
    if committed:  # only letters beyond the options: no answer, and no weaker reading either
        return NO_CHOICE
    line = _on_a_line(text, options)
    choice = line if line.letter else _written_out(text, options)
    # A reading without a commitment gives way to the text's own rejection of it ("D. ...\n... not exactly (D)").
    rejected = choice.letter is not None and any(choice.letter in m.groups() for m in _REJECTED.finditer(text))
    return NO_CHOICE if rejected else choice
