"""BestOfK on FakeEngine + FakeTask with a real RunStore: numbers checked by hand, every candidate stored."""

from __future__ import annotations

import json

import pytest

from harness.metrics import best_at_k, pass_at_k
from harness.registry import Registry
from harness.store import RunStore
from harness.testing import FakeEngine, FakeTask
from harness.types import Searcher
from searchers import harness_register_searchers
from searchers.best_of_k import BestOfK

FIELDS = {"problem_id", "phase", "sample_index", "text", "extracted", "unparsed", "rewards", "primary", "success",
          "scalar", "num_tokens", "finished"}


def answer(messages, sample_index, seed):
    """Problem i: sample 0 is right, sample 1 is wrong by one, samples 2 and 3 have no number; problem 0 is right
    on every parsed sample (0+0 = 0 and "wrong by one" is written as 0 too)."""
    i = int(messages[0]["content"].split()[2].split("+")[0])
    right = "the answer is " + str(2 * i)
    return [right, f"it is {2 * i + (1 if i else 0)}", "no idea", "hmm"][sample_index]


def read_samples(store):
    return [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]


def test_metrics_and_samples_match_hand_computation(tmp_path):
    task, store = FakeTask(), RunStore(tmp_path, "run")
    problems = task.problems("eval", limit=3)  # i = 0, 1, 2
    engine = FakeEngine(answer)
    searcher = BestOfK(n=4, k="1,2,4", batch_prompts=2, max_new_tokens=16)
    assert isinstance(searcher, Searcher)

    metrics = searcher.search(engine, task, problems, phase="before", store=store)

    # successes per problem: i=0 -> 2 of 4, i=1, i=2 -> 1 of 4
    for k in (1, 2, 4):
        assert metrics[f"pass@{k}"] == pytest.approx((pass_at_k(4, 2, k) + 2 * pass_at_k(4, 1, k)) / 3)
    # scalar = correct + 0.5 * format: right 1.5, wrong 0.5, unparsed 0
    for k in (1, 2, 4):
        expected = (best_at_k([1.5, 1.5, 0, 0], k) + 2 * best_at_k([1.5, 0.5, 0, 0], k)) / 3
        assert metrics[f"best@{k}"] == pytest.approx(expected)
    assert metrics["pass@1"] == pytest.approx(4 / 12)
    assert metrics["best@1"] == pytest.approx((3.0 + 2 * 2.0) / 12)
    assert metrics["mean_reward/correct"] == pytest.approx(4 / 12)
    assert metrics["mean_reward/format"] == pytest.approx(6 / 12)
    assert metrics["unparsed_rate"] == pytest.approx(6 / 12)
    assert metrics["wrong_rate"] == pytest.approx(2 / 12)  # parsed but wrong: counted apart from unparsed
    assert metrics["success_rate"] == pytest.approx(4 / 12)
    assert metrics["num_candidates"] == 12
    assert metrics["num_skipped"] == 0
    # tokens are whitespace words: "the answer is N" 4, "it is N" 3, "no idea" 2, "hmm" 1
    assert metrics["num_tokens"] == 3 * (4 + 3 + 2 + 1)

    # two generate calls (batch_prompts=2), each with the searcher's sampling options
    assert [len(prompts) for prompts, _, _ in engine.calls] == [2, 1]
    params, desc = engine.calls[0][1], engine.calls[0][2]
    assert (params.n, params.max_new_tokens, params.temperature, desc) == (4, 16, 1.0, "before best-of-k")

    records = read_samples(store)
    assert len(records) == 12
    assert all(set(r) == FIELDS for r in records)
    for problem in problems:
        mine = [r for r in records if r["problem_id"] == problem.id]
        assert sorted(r["sample_index"] for r in mine) == [0, 1, 2, 3]
    first = records[0]
    assert first == {"problem_id": "add-0", "phase": "before", "sample_index": 0, "text": "the answer is 0",
                     "extracted": "0", "unparsed": False, "rewards": {"correct": 1.0, "format": 1.0},
                     "primary": "correct", "success": True, "scalar": 1.5, "num_tokens": 4, "finished": True}


def test_k_above_n_is_rejected():
    with pytest.raises(ValueError, match="n=4"):
        BestOfK(n=4, k=[1, 8])
    with pytest.raises(ValueError):
        BestOfK(n=4, k="0,2")
    assert BestOfK(n=16, k="16, 1,4").ks == [1, 4, 16]
    assert BestOfK().ks == [1, 4, 8]


class FlakyTask(FakeTask):
    def score(self, problem, completion):
        if completion == "boom":
            raise RuntimeError("scorer broke")
        return super().score(problem, completion)


def test_a_raising_scorer_is_recorded_and_skipped(tmp_path):
    task, store = FlakyTask(), RunStore(tmp_path, "run")
    problems = task.problems("eval", limit=2)
    engine = FakeEngine(lambda messages, j, seed: ["boom", "it is 2", "nothing"][j])
    metrics = BestOfK(n=3, k=[1, 3]).search(engine, task, problems, phase="after", store=store)

    records = read_samples(store)
    assert len(records) == 6
    errors = [r for r in records if "error" in r]
    assert len(errors) == 2 and all(r["sample_index"] == 0 for r in errors)
    assert errors[0]["error"] == "RuntimeError: scorer broke"
    assert errors[0]["success"] is False and errors[0]["scalar"] is None
    assert metrics["num_skipped"] == 2
    assert metrics["num_candidates"] == 6
    # problem add-1 (answer 2) is solved by "it is 2"; add-0 never: the broken sample counts as a failure
    assert metrics["pass@1"] == pytest.approx((0 + 1 / 3) / 2)
    assert metrics["success_rate"] == pytest.approx(1 / 6)
    assert metrics["unparsed_rate"] == pytest.approx(2 / 4)  # over the 4 scored samples
    # add-0 scalars: skipped -> the lowest scored (0.0), 0.5, 0.0; add-1: skipped -> 0.0, 1.5, 0.0
    assert metrics["best@3"] == pytest.approx((0.5 + 1.5) / 2)


def test_fake_engine_cuts_at_max_new_tokens():
    from harness.types import SamplingParams

    out = FakeEngine(["a b c d", "e"]).generate([[{"role": "user", "content": "q"}]], SamplingParams(n=3,
                                                                                                    max_new_tokens=2))
    assert [(c.text, c.finished, len(c.token_ids), c.logprobs) for c in out] == [
        ("a b", False, 2, [0.0, 0.0]), ("e", True, 1, [0.0]), ("a b", False, 2, [0.0, 0.0])]


def test_registration_is_lazy():
    registry = Registry("searcher")
    harness_register_searchers(registry)
    entry = registry.get("best-of-k")
    assert entry.factory == "searchers.best_of_k:BestOfK"
    assert isinstance(entry.create(n=2, k=[1, 2]), BestOfK)
