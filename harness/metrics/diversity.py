"""Diversity of one problem's candidates: how different the n answers a searcher drew are from each other.

pass@k and best@k only reward diversity indirectly; these say it directly, so a policy trained for diversity (VPO)
can be seen to spread its answers, and one that collapses onto a single answer can be seen to collapse. All are
pure functions of one problem's candidates (the searcher averages them over problems); only
``embedding_diversity`` loads a model (MiniLM, harness/metrics/embeddings.py), and no function imports torch otherwise.

Conventions: a set with nothing to compare (no n-grams, fewer than two texts) shows no diversity: 0.0. Reward
coverage is None when the task has no component besides the primary: then it is a property of the task, not of
the candidates, and the searcher leaves such problems out of its mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def distinct_answers(extracted: Sequence[str | None]) -> int:
    """The number of distinct final answers, compared as the task's extractor returned them (exact strings: the
    task owns normalisation). None (unparsed, scorer error, missing) is no answer and is not counted."""
    return len({answer for answer in extracted if answer is not None})


def distinct_answer_fraction(extracted: Sequence[str | None]) -> float:
    """distinct_answers / number of candidates, unparsed ones included in the denominator: 1.0 only when every
    candidate has an answer and no two agree, so a policy cannot look diverse by failing to answer."""
    return distinct_answers(extracted) / len(extracted) if extracted else 0.0


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Unique n-grams / total n-grams, pooled over the texts (Li et al. 2016's distinct-n). Tokens are lowercased
    whitespace words; n-grams do not cross from one text into the next. 0.0 when there is no n-gram at all."""
    if n < 1:
        raise ValueError(f"distinct-n needs n >= 1, got {n}")
    grams: list[tuple[str, ...]] = []
    for text in texts:
        words = text.lower().split()
        grams.extend(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return len(set(grams)) / len(grams) if grams else 0.0


def mean_pairwise_cosine_distance(vectors: Sequence[Sequence[float]]) -> float:
    """Mean over pairs i < j of 1 - cos(v_i, v_j); 0.0 for fewer than two vectors. A zero vector has cosine 0
    with everything.

    With u_i = v_i / |v_i|, sum_{i != j} u_i . u_j = |sum_i u_i|^2 - sum_i |u_i|^2: O(n d) instead of O(n^2 d),
    in plain Python, for any n."""
    count = len(vectors)
    if count < 2:
        return 0.0
    units = []
    for v in vectors:
        norm = math.sqrt(math.fsum(x * x for x in v))
        units.append([x / norm for x in v] if norm > 0 else [0.0] * len(v))
    total = [math.fsum(column) for column in zip(*units, strict=True)]
    self_terms = math.fsum(x * x for u in units for x in u)  # n, less one per zero vector
    mean_cos = (math.fsum(x * x for x in total) - self_terms) / (count * (count - 1))
    return 1.0 - mean_cos


def embedding_diversity(texts: Sequence[str], embedding_model: str | None = None) -> float:
    """Mean pairwise cosine distance of the texts' sentence embeddings (all-MiniLM-L6-v2 unless named): about 0.9
    for unrelated texts, near 0 for paraphrases. Loads the model on first use (seconds)."""
    if len(texts) < 2:
        return 0.0
    from harness.metrics.embeddings import embed

    return mean_pairwise_cosine_distance(embed(list(texts), embedding_model).tolist())


def reward_coverage(
    rewards: Sequence[Mapping[str, float]], primary: str | None, threshold: float = 1.0
) -> float | None:
    """The fraction of reward components, the primary excluded, on which at least one candidate scores >= threshold.

    The primary is left out because pass@k already reports it and it is usually a summary of the others (all tests
    pass, some persona is pleased); coverage asks whether the set, between its members, meets each of the other
    criteria. The default threshold 1.0 is full credit: a passed test slot, a boxed answer, a reached goal. A
    continuous component that never reaches 1 is never covered; give such a task its own threshold (the persona
    task's success threshold is 0.8). Components are those named by any candidate (a scorer that raised named none);
    None when there is none besides the primary."""
    components = list(dict.fromkeys(name for r in rewards for name in r if name != primary))
    if not components:
        return None
    covered = sum(any(r.get(name, -math.inf) >= threshold for r in rewards) for name in components)
    return covered / len(components)
