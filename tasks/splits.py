"""Train/eval splits of a generated pool, disjoint by content.

Procedural generators (reasoning-gym, the maze task) seed item i with ``seed + i``, so two seeds overlap almost
entirely (seed s item i+1 is seed s+1 item i; tests/test_reasoning_gym_bridge.py shows it). The generated tasks
therefore draw ONE pool with one
fixed seed, drop repeated questions, and send each question to train or eval by a hash of its normalised text: the
same text always lands in the same split, whatever the pool size or the run seed.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable

from harness.types import Problem

POOL_SEED = 20_250_101  # the one seed of every generated pool; part of the data, so changing it bumps task versions


def normalise(text: str) -> str:
    """What counts as "the same question": case and whitespace are ignored."""
    return " ".join(text.lower().split())


def digest(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()


def bucket(text: str) -> float:
    """A number in [0, 1) fixed by the text's content: the same text always falls in the same split."""
    return int(digest(text)[-8:], 16) / 2**32


def dedupe(problems: Iterable[Problem]) -> list[Problem]:
    """The first problem of each distinct (normalised) prompt, in order."""
    seen: set[str] = set()
    out = []
    for p in problems:
        key = normalise(p.prompt)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def split_by_content(problems: Iterable[Problem], eval_fraction: float) -> dict[str, list[Problem]]:
    """{"train": [...], "eval": [...]}: deduplicated, each prompt in the split its content hash picks."""
    pool = dedupe(problems)
    return {
        "train": [p for p in pool if bucket(p.prompt) >= eval_fraction],
        "eval": [p for p in pool if bucket(p.prompt) < eval_fraction],
    }


def take(problems: list[Problem], limit: int | None, seed: int) -> list[Problem]:
    """A seeded shuffle of a split, cut to ``limit``: the run seed picks and orders problems, never splits them."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    items = list(problems)
    random.Random(seed).shuffle(items)
    return items if limit is None else items[:limit]


def eval_split(method: str | None, eval_fraction: float | None) -> str:
    """A data card's ``split``: where the eval problems come from. "test" for a source's own test split (the
    loaders' "native ..."), else the share of one pool that the content hash sends to eval."""
    if method and method.startswith("native"):
        return "test"
    return f"eval ({eval_fraction:g} of the pool by content hash)" if eval_fraction is not None else "eval"
