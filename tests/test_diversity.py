"""Diversity metrics on hand-made candidates (numbers worked out in the comments); one test loads MiniLM offline."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics.diversity import (
    distinct_answer_fraction,
    distinct_answers,
    distinct_n,
    embedding_diversity,
    mean_pairwise_cosine_distance,
    reward_coverage,
)

REPO = Path(__file__).resolve().parents[1]


def test_distinct_answers_leave_out_the_unparsed_but_count_them_in_the_fraction() -> None:
    extracted = ["4", "4", None, "5", None]
    assert distinct_answers(extracted) == 2  # "4" and "5"; None is no answer
    assert distinct_answer_fraction(extracted) == pytest.approx(2 / 5)
    assert distinct_answers(["4", " 4"]) == 2  # exact strings: normalising is the task's extractor's job
    assert distinct_answers([None, None]) == 0 and distinct_answer_fraction([None, None]) == 0.0
    assert distinct_answer_fraction([]) == 0.0


def test_distinct_n_pools_texts_without_crossing_them() -> None:
    texts = ["The cat sat", "the cat ran"]
    # unigrams: the cat sat the cat ran -> 4 unique of 6 (lowercased)
    assert distinct_n(texts, 1) == pytest.approx(4 / 6)
    # bigrams: (the cat) (cat sat) (the cat) (cat ran) -> 3 of 4; (sat the) would appear if texts were joined
    assert distinct_n(texts, 2) == pytest.approx(3 / 4)
    assert distinct_n(["a  b\n c"], 1) == 1.0  # any whitespace separates words
    assert distinct_n(["", "one"], 2) == 0.0  # no bigram at all: no diversity to show
    assert distinct_n([], 1) == 0.0
    with pytest.raises(ValueError, match="n >= 1"):
        distinct_n(texts, 0)


def test_mean_pairwise_cosine_distance_by_hand() -> None:
    assert mean_pairwise_cosine_distance([[1, 0], [0, 1]]) == pytest.approx(1.0)  # orthogonal
    assert mean_pairwise_cosine_distance([[1, 0], [2, 0]]) == pytest.approx(0.0)  # same direction, any length
    assert mean_pairwise_cosine_distance([[1, 0], [-1, 0]]) == pytest.approx(2.0)  # opposite
    # pairs: (x, y) cos 0, (x, x+y) and (y, x+y) cos 1/sqrt(2): mean distance (1 + 2 (1 - 1/sqrt 2)) / 3
    expected = (3 - math.sqrt(2)) / 3
    assert mean_pairwise_cosine_distance([[1, 0], [0, 1], [1, 1]]) == pytest.approx(expected)
    assert mean_pairwise_cosine_distance([[0, 0], [1, 0]]) == pytest.approx(1.0)  # a zero vector: cosine 0
    assert mean_pairwise_cosine_distance([[3, 4]]) == 0.0 and mean_pairwise_cosine_distance([]) == 0.0


def _naive(vectors: list[list[float]]) -> float:
    """The definition, pair by pair."""

    def cos(u: list[float], v: list[float]) -> float:
        nu, nv = math.hypot(*u), math.hypot(*v)
        return sum(a * b for a, b in zip(u, v, strict=True)) / (nu * nv) if nu and nv else 0.0

    pairs = [(i, j) for i in range(len(vectors)) for j in range(i + 1, len(vectors))]
    return sum(1 - cos(vectors[i], vectors[j]) for i, j in pairs) / len(pairs)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.floats(-10, 10, allow_subnormal=False), min_size=3, max_size=3), min_size=2, max_size=6))
def test_the_sum_trick_equals_the_pairwise_definition(vectors: list[list[float]]) -> None:
    vectors = [[0.0 if abs(x) < 1e-3 else x for x in v] for v in vectors]  # tiny norms are rounding, not geometry
    assert mean_pairwise_cosine_distance(vectors) == pytest.approx(_naive(vectors), abs=1e-9)


def test_reward_coverage_leaves_out_the_primary() -> None:
    rewards = [{"correct": 1.0, "format": 1.0, "boxed": 0.0}, {"correct": 0.0, "format": 0.0, "boxed": 1.0}]
    assert reward_coverage(rewards, "correct") == 1.0  # format by the first, boxed by the second
    assert reward_coverage(rewards[:1], "correct") == 0.5  # format only
    continuous = [{"any": 1.0, "expert": 0.9, "teacher": 0.4}, {"any": 0.0, "expert": 0.2, "teacher": 0.7}]
    assert reward_coverage(continuous, "any") == 0.0  # nothing reaches full credit
    assert reward_coverage(continuous, "any", threshold=0.8) == 0.5  # expert by the first; teacher never
    assert reward_coverage(continuous, None, threshold=0.8) == pytest.approx(2 / 3)  # no primary: all three
    assert reward_coverage([{"correct": 1.0}], "correct") is None  # nothing besides the primary
    assert reward_coverage([], "correct") is None


def test_import_loads_no_model() -> None:
    code = "import sys, harness.metrics.diversity; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_embedding_diversity_with_the_packaged_model() -> None:
    from harness.metrics.embeddings import embed

    cat, kitten, earnings = "A cat sits on the mat.", "A kitten rests on a rug.", "Quarterly earnings rose by 4%."
    paraphrases, unrelated = embedding_diversity([cat, kitten]), embedding_diversity([cat, earnings])
    assert 0.0 < paraphrases < 0.6 < 0.8 < unrelated <= 1.2
    v = embed([cat, kitten])
    assert paraphrases == pytest.approx(1 - float(v[0] @ v[1]), abs=1e-5)
    assert embedding_diversity([cat]) == 0.0 and embedding_diversity([cat, cat]) == pytest.approx(0.0, abs=1e-5)
