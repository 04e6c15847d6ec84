"""Interpretable text signals: pure functions of a string, each in [0, 1], none of them raises on any string.

They are deliberately simple (word lists, counts, a syllable heuristic) so that a reward built from them can be read
and audited: every signal says in its docstring what it counts and how the count is mapped to [0, 1]. Persona
rewards (tasks/persona.py) and VSPO's behaviour scorers (tasks/behaviours.py) are built from them.
"""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:[.,]\d+)*")
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)")
_VOWEL_GROUPS = re.compile(r"[aeiouy]+")

# Phrases are matched on lower-cased text with word boundaries; each list is what the signal counts.
HEDGES = (
    "maybe",
    "perhaps",
    "possibly",
    "probably",
    "might",
    "may be",
    "could be",
    "i think",
    "i believe",
    "i guess",
    "i'm not sure",
    "i am not sure",
    "not sure",
    "not certain",
    "it seems",
    "seems",
    "it appears",
    "likely",
    "unlikely",
    "i suppose",
    "sort of",
    "kind of",
    "roughly",
    "somewhat",
    "arguably",
    "if i recall",
    "hard to say",
    "i'm not certain",
    "it depends",
    "not entirely",
    "i could be wrong",
    "don't quote me",
)
ASSERTIONS = (
    "clearly",
    "definitely",
    "certainly",
    "the answer is",
    "in fact",
    "precisely",
    "exactly",
    "always",
    "never",
    "must",
    "without doubt",
    "undoubtedly",
    "therefore",
    "thus",
    "it is",
    "this is",
)
BEGINNER_MARKERS = (
    "imagine",
    "think of it",
    "think of",
    "like a",
    "like when",
    "basically",
    "simply put",
    "in simple terms",
    "don't worry",
    "it's easy",
    "easy",
    "simple",
    "fun",
    "kind of like",
    "super",
    "cool",
    "you know",
    "pretty much",
    "let's",
    "stuff",
    "things",
)
EXAMPLE_MARKERS = (
    "for example",
    "for instance",
    "e.g.",
    "such as",
    "imagine",
    "suppose",
    "let's say",
    "say you",
    "picture",
    "like when",
    "think of",
    "as an example",
    "consider",
)
FILLERS = (
    "great question",
    "good question",
    "it is important to note",
    "it's important to note",
    "it is worth noting",
    "as i mentioned",
    "as mentioned",
    "in other words",
    "to put it another way",
    "let me explain",
    "basically",
    "in conclusion",
    "to summarize",
    "to sum up",
    "all in all",
    "at the end of the day",
    "needless to say",
    "first of all",
    "i hope this helps",
    "feel free to ask",
    "let me know",
    "as you can see",
    "actually",
    "really",
    "very",
    "just",
)
CAVEATS = (
    "however",
    "but",
    "although",
    "though",
    "evidence",
    "depends",
    "limitation",
    "limitations",
    "caveat",
    "not always",
    "assume",
    "assumption",
    "uncertain",
    "unproven",
    "claim",
    "claims",
    "studies",
    "data",
    "bias",
    "verify",
    "correlation",
    "careful",
    "skeptical",
    "misleading",
    "on the other hand",
    "in practice",
)
# Tokens that mark technical writing: formulas and operators, acronyms ("ATP"), letters mixed with digits ("H2O",
# "10kg", "3-phosphoglycerate"), function calls, Greek letters. Plain numbers don't count: arithmetic isn't jargon.
_TECHNICAL = re.compile(r"[=^×÷±≈≤≥∑∫√→_\[\]{}]|\b[A-Z]{2,}s?\b|[A-Za-z]\d|\d[A-Za-z-]|[A-Za-z]\(|[α-ωΑ-Ω]")
_OPERATOR = re.compile(r"[=<>+*/^%|&~-]{2,}|[=<>+*/^%|&~]")  # "<=", "//", "+" standing alone (not a prose dash)


def words(text: str) -> list[str]:
    return _WORD.findall(text) if isinstance(text, str) else []


def sentences(text: str) -> list[str]:
    if not isinstance(text, str):
        return []
    return [s.strip() for s in _SENTENCE.findall(text) if _WORD.search(s)]


@functools.lru_cache(maxsize=64)
def _phrase_pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first, so "i'm not sure" counts once, not also as "not sure".
    alternatives = "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True))
    return re.compile(rf"(?<![a-z'])(?:{alternatives})(?![a-z'])")


def count_phrases(text: str, phrases: tuple[str, ...]) -> int:
    """Non-overlapping occurrences of the phrases in lower-cased text, at word boundaries ("may" is not counted in
    "mayor")."""
    if not isinstance(text, str) or not text:
        return 0
    return len(_phrase_pattern(tuple(phrases)).findall(text.lower().replace("’", "'")))


def _rate(count: int, text: str) -> float:
    """Markers per sentence, capped at 1: one marker in every sentence is as strong as the signal gets."""
    return min(1.0, count / max(1, len(sentences(text))))


def brevity(text: str, target_words: int = 60) -> float:
    """1 up to ``target_words`` words, then target/words (200 words at a target of 50 gives 0.25); 0 for no words."""
    n = len(words(text))
    return 0.0 if n == 0 else min(1.0, target_words / n)


def syllables(word: str) -> int:
    """Vowel groups, minus a silent final 'e'; at least 1. The usual heuristic: right for most English words."""
    w = word.lower()
    n = len(_VOWEL_GROUPS.findall(w))
    if w.endswith("e") and not w.endswith(("le", "ee")) and n > 1:
        n -= 1
    return max(1, n)


def readability(text: str) -> float:
    """Flesch reading ease divided by 100 and clipped: 206.835 - 1.015 words/sentence - 84.6 syllables/word.
    About 0.9+ for a children's book, 0.6 for plain English, under 0.3 for academic prose; 0 for no words."""
    ws = [w for w in words(text) if w[0].isalpha()]
    if not ws:
        return 0.0
    per_sentence = len(ws) / max(1, len(sentences(text)))
    per_word = sum(syllables(w) for w in ws) / len(ws)
    return min(1.0, max(0.0, (206.835 - 1.015 * per_sentence - 84.6 * per_word) / 100))


def hedging(text: str) -> float:
    """Hedge phrases ("maybe", "I think", "it seems", ...) and questions, per sentence, capped at 1."""
    questions = text.count("?") if isinstance(text, str) else 0
    return _rate(count_phrases(text, HEDGES) + questions, text)


def confidence(text: str) -> float:
    """How committed the text sounds: 1 - hedging, plus 0.25 x the rate of assertive markers ("clearly", "the
    answer is", "therefore"), clipped to [0, 1]. A text with no words makes no claim: 0."""
    if not words(text):
        return 0.0
    return min(1.0, max(0.0, 1.0 - hedging(text) + 0.25 * _rate(count_phrases(text, ASSERTIONS), text)))


def technical_density(text: str) -> float:
    """Fraction of whitespace tokens that look technical: 10+ letters, an operator, or a ``_TECHNICAL`` match."""
    tokens = [t for t in text.split() if _WORD.search(t) or _OPERATOR.fullmatch(t)] if isinstance(text, str) else []
    if not tokens:
        return 0.0
    return sum(1 for t in tokens if _is_technical(t)) / len(tokens)


def _is_technical(token: str) -> bool:
    return bool(_TECHNICAL.search(token) or _OPERATOR.fullmatch(token)) or len(re.sub(r"\W", "", token)) >= 10


def expertise(text: str) -> float:
    """Expert register: 3 x technical density (a third of words technical saturates), times (1 - beginner-marker
    rate) ("imagine", "basically", "like a", "don't worry"), times (1 - hedging / 2). 0 for no words."""
    if not words(text):
        return 0.0
    technical = min(1.0, 3.0 * technical_density(text))
    beginner = _rate(count_phrases(text, BEGINNER_MARKERS), text)
    return technical * (1.0 - beginner) * (1.0 - hedging(text) / 2)


def beginner_friendliness(text: str) -> float:
    """Written for a beginner: the mean of readability, the example rate (two examples saturate), the
    beginner-marker rate and 1 - 3 x technical density."""
    if not words(text):
        return 0.0
    examples = min(1.0, count_phrases(text, EXAMPLE_MARKERS) / 2)
    beginner = _rate(count_phrases(text, BEGINNER_MARKERS), text)
    plain = max(0.0, 1.0 - 3.0 * technical_density(text))
    return (readability(text) + examples + beginner + plain) / 4


def repetition(text: str) -> float:
    """Fraction of sentences that repeat an earlier one (case and spacing ignored)."""
    found = [" ".join(s.lower().split()) for s in sentences(text)]
    return 0.0 if not found else 1.0 - len(set(found)) / len(found)


def conciseness(text: str, target_words: int = 60) -> float:
    """Brief and direct: brevity(target_words) x (1 - filler rate) x (1 - repetition). Filler phrases are
    "great question", "in other words", "it is important to note", "basically", "very", ... counted per sentence."""
    if not words(text):
        return 0.0
    filler = _rate(count_phrases(text, FILLERS), text)
    return brevity(text, target_words) * (1.0 - filler) * (1.0 - repetition(text))


def caveats(text: str) -> float:
    """Critical thinking markers ("however", "evidence", "depends", "assumption", ...) per sentence, capped at 1."""
    return _rate(count_phrases(text, CAVEATS), text)
