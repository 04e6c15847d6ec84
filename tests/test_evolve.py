"""The evolve searcher's loop: budgets, the solved-at-budget curve, failed children, evaluator feedback in the next
prompt, determinism, and a search killed with SIGKILL that resumes to the uninterrupted result losing nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.searchers.evolve import Evolve
from harness.store.run_folder import RunStore
from harness.testing import FakeEngine, FakeTask, hashed_answers
from harness.types import EngineCapabilities, Score

ROOT = Path(__file__).resolve().parents[1]
CODE_FIXTURES = ROOT / "tests" / "fixtures" / "code"


def search(evolve: Evolve, engine, task, tmp_path: Path, name: str = "run", limit: int = 4):
    store = RunStore.create(tmp_path, name)
    metrics = evolve.search(engine, task, task.problems("eval", limit=limit), phase="pre", store=store)
    samples = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
    return metrics, samples, store


def scripted(messages, sample_index, seed):
    """Seeds: "no idea" / "I think 7"; a child of add-i answers 2i (right) in generation 2 only."""
    text = messages[-1]["content"]
    if "## Current solution" not in text:
        return "I think 7" if sample_index % 2 else "no idea"
    return "The answer is 2" if "What is 1+1?" in text and "final answer: 3" in text else "The answer is 3"


def test_budget_curve_and_samples_hand_computed(tmp_path):
    engine = FakeEngine(scripted)
    metrics, samples, store = search(Evolve(seeds=2, children=2, calls=8, seed=0), engine, FakeTask(), tmp_path)
    # Per problem: calls 1-2 are the seeds, 3-4 generation 1 (both "3": the parent's feedback was not "3" yet),
    # 5-6 generation 2, where add-1's children see "final answer: 3" and answer 2 = 1+1 at call 5; 7-8 generation 3.
    # add-1 stops at its first success (stop_on_success); the other three spend the whole budget.
    assert metrics["solved@4"] == 0.0 and metrics["solved@8"] == 0.25 and "solved@5" not in metrics  # 1, 2, 4, 8
    assert metrics["success_rate"] == 0.25
    assert metrics["budget/calls"] == 8 * 3 + 6 and metrics["budget/candidates"] == 30
    assert metrics["children/seed"] == 8 and metrics["children/text"] == 22
    assert metrics["generations"] == (3 * 3 + 2) / 4
    assert len(samples) == 30 and len({(s["problem_id"], s["sample_index"]) for s in samples}) == 30
    add1 = [s for s in samples if s["problem_id"] == "add-1"]
    assert [s["call"] for s in add1] == [1, 2, 3, 4, 5, 6] and add1[4]["success"] and add1[4]["generation"] == 2
    assert add1[4]["parent"] is not None and add1[4]["how"] == "text"
    assert [s["text"] for s in add1[:2]] == ["no idea", "I think 7"]  # the seeds, as best-of-k would draw them
    # every row carries its question and reference answer, so it can be judged on its own
    assert all((s["prompt"], s["reference"]) == ("What is 1+1?", "2") for s in add1)
    assert all(s["reference"] == str(2 * int(s["problem_id"].split("-")[1])) for s in samples)
    curve = json.loads((store.dir / "evolve" / "pre" / "curve.json").read_text())
    assert curve["solved"][:8] == [0, 0, 0, 0, 0.25, 0.25, 0.25, 0.25] and curve["solved_at"]["add-1"] == 5
    # Engine calls: one for the seeds (n=2, 4 problems), then one per generation for every child of every problem
    # still searching (2 slots, on 2 islands: different prompts), seeded by (seed, generation).
    assert [(len(p), params.n) for p, params, _ in engine.calls] == [(4, 2), (8, 1), (8, 1), (6, 1)]
    assert len({params.seed for _, params, _ in engine.calls[1:]}) == 3


def test_the_seeds_are_best_of_ks_samples(tmp_path):
    """Same seed, n and sampling: the first candidates of evolve are exactly best-of-k's, so the two searchers are
    compared from the same start."""
    from harness.searchers.best_of_k import BestOfK

    task, engine = FakeTask(), FakeEngine(hashed_answers())
    _, evolve_samples, _ = search(Evolve(seeds=4, calls=4, seed=3), engine, task, tmp_path, "evolve")
    store = RunStore.create(tmp_path, "bok")
    BestOfK(n=4, k=1, seed=3, embedding_diversity=False).search(
        engine, task, task.problems("eval", limit=4), phase="pre", store=store
    )
    bok = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
    assert [s["text"] for s in evolve_samples] == [s["text"] for s in bok]


MULTI = "Give 2 different candidate answers"


def two_answers(messages, sample_index, seed):
    """An M = 2 policy. Seed rollout j writes answers 100 + j and j + 1, except rollout 2: one answer (malformed).
    A child writes two answers though asked for one: 0 first (right for add-0), then 5."""
    text = messages[-1]["content"]
    if "## Current solution" in text:
        assert MULTI not in text  # a child's prompt is evolve's own, not the M-answer format
        return "The answer is 0\n### next answer ###\nThe answer is 5"
    assert MULTI in text
    if sample_index == 2:
        return "The answer is 99"
    return f"The answer is {100 + sample_index}\n### next answer ###\nThe answer is {sample_index + 1}"


def test_a_multi_answer_policy_seeds_from_m_answer_rollouts(tmp_path):
    """M = 2: a seed rollout is one call yielding its answers as candidates; a malformed one yields what it has and
    is counted; solved@c counts calls; a child is one answer per call, with one answer's budget."""
    engine = FakeEngine(two_answers)
    evolve = Evolve(seeds=3, children=2, calls=5, seed=0, answers_per_rollout=2, max_new_tokens=36, islands=2)
    metrics, samples, _ = search(evolve, engine, FakeTask(), tmp_path, limit=2)
    # add-1 (answer 2) is solved by the 2nd answer of seed rollout 1: call 2, and stops; add-0 by its first child
    # (call 4), whose first answer, 0, is the one scored (the whole text's last number is 5).
    assert metrics["solved@1"] == 0.0 and metrics["solved@2"] == 0.5 and metrics["solved@4"] == 1.0
    assert metrics["budget/calls"] == 5 + 3  # add-0: 3 seed rollouts + 2 children; add-1: 3 seed rollouts
    assert metrics["budget/candidates"] == 2 * (2 + 2 + 1) + 2 == len(samples)
    assert metrics["malformed_rollouts"] == 2 and metrics["missing_answers"] == 2
    assert metrics["children/seed"] == 10 and metrics["children/text"] == 2
    seeds = [s for s in samples if s["problem_id"] == "add-0" and s["how"] == "seed"]
    assert [(s["call"], s["answer_index"], s["island"]) for s in seeds] == [
        (1, 0, 0),
        (1, 1, 1),
        (2, 0, 0),
        (2, 1, 1),
        (3, 0, 0),
    ]
    assert [s["text"] for s in seeds] == [
        "The answer is 100",
        "The answer is 1",
        "The answer is 101",
        "The answer is 2",
        "The answer is 99",
    ]
    children = [s for s in samples if s["problem_id"] == "add-0" and s["how"] != "seed"]
    assert [(s["call"], s["text"], s["success"]) for s in children] == [
        (4, "The answer is 0", True),
        (5, "The answer is 0", True),
    ]
    assert "answer_index" not in children[0]
    # One engine call for the seeds (3 rollouts per problem, the rollout budget), then one for add-0's 2 children
    # of one answer each (36 = 2 x 10 + 16 for the delimiter: 10 tokens per answer), on 2 islands: 2 prompts
    assert [(len(p), params.n, params.max_new_tokens) for p, params, _ in engine.calls] == [(2, 3, 36), (2, 1, 10)]


def test_multi_answer_seeds_are_best_of_ks_written_answers(tmp_path):
    from harness.searchers.best_of_k import BestOfK

    task, engine = FakeTask(), FakeEngine(two_answers)
    _, evolve_samples, _ = search(
        Evolve(seeds=3, calls=3, seed=3, answers_per_rollout=2), engine, task, tmp_path, "evolve"
    )
    store = RunStore.create(tmp_path, "bok")
    BestOfK(n=6, k=2, seed=3, answers_per_rollout=2, embedding_diversity=False).search(
        engine, task, task.problems("eval", limit=4), phase="pre", store=store
    )
    bok = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
    assert [s["text"] for s in evolve_samples] == [s["text"] for s in bok if not s.get("missing")]
    assert [(s["problem_id"], s["call"] - 1, s["answer_index"]) for s in evolve_samples] == [
        (s["problem_id"], s["rollout_index"], s["answer_index"]) for s in bok if not s.get("missing")
    ]
    assert [p for p, _, _ in engine.calls[0:1]] == [p for p, _, _ in engine.calls[1:2]]  # the same prompts


def test_failed_children_cost_calls_not_candidates(tmp_path):
    task = FakeTask()

    def respond(messages, sample_index, seed):
        return "" if "## Current solution" in messages[-1]["content"] else "7"  # every child comes back empty

    metrics, samples, _ = search(
        Evolve(seeds=1, children=3, calls=7, seed=0), FakeEngine(respond), task, tmp_path, limit=2
    )
    assert metrics["budget/calls"] == 14 and metrics["children/failed"] == 12
    assert metrics["budget/candidates"] == 2 and len(samples) == 2


def test_budget_in_tokens_and_generations(tmp_path):
    task = FakeTask()
    engine = FakeEngine(hashed_answers(1000))  # 4 tokens per answer ("The answer is N"), never right
    metrics, _, _ = search(Evolve(seeds=2, children=2, calls=0, tokens=17, seed=0), engine, task, tmp_path, "t")
    # 8 tokens after the seeds, 16 after generation 1 (< 17: go on), 24 after generation 2: stop (overrun <= one
    # generation, as documented).
    assert metrics["budget/tokens"] == 4 * 24 and metrics["generations"] == 2
    metrics, _, _ = search(Evolve(seeds=2, children=2, calls=0, generations=3, seed=0), engine, task, tmp_path, "g")
    assert metrics["budget/calls"] == 4 * 8 and metrics["generations"] == 3


def test_code_feedback_reaches_the_next_prompt(tmp_path):
    """On the code task (sandboxed), a child's prompt shows the parent's failing test and the child that fixes it
    passes every test."""
    from harness.tasks.code import CodeTask

    task = CodeTask(source="jsonl", path=str(CODE_FIXTURES / "tiny.jsonl"), eval_fraction=1.0, test_slots=3)
    square = next(p for p in task.problems("eval") if p.id == "square")
    wrong = "```python\ndef square(x):\n    return x + x\n```"
    right = "```python\ndef square(x):\n    return x * x\n```"
    prompts = []

    def respond(messages, sample_index, seed):
        text = messages[-1]["content"]
        prompts.append(text)
        return right if "## Current solution" in text and "AssertionError" in text else wrong

    store = RunStore.create(tmp_path, "code")
    metrics = Evolve(seeds=2, children=2, calls=6, seed=0, workers=2, k="2,3").search(
        FakeEngine(respond), task, [square], phase="pre", store=store
    )
    assert "assert candidate(1) == 1  -> AssertionError" in prompts[2]  # seeds are prompts 0-1
    assert metrics["solved@3"] == 1.0 and metrics["solved@2"] == 0.0 and metrics["best/all_pass"] == 1.0
    assert metrics["budget/calls"] == 4  # stopped at the first success


def test_results_do_not_depend_on_batching(tmp_path):
    task, engine = FakeTask(), FakeEngine(hashed_answers())
    runs = [
        search(
            Evolve(seeds=2, children=3, calls=11, seed=5, batch_prompts=b, stop_on_success=False),
            engine,
            task,
            tmp_path,
            f"b{b}",
            limit=5,
        )
        for b in (1, 2, 5)
    ]
    assert runs[0][0] == runs[1][0] == runs[2][0]
    assert runs[0][1] == runs[1][1] == runs[2][1]
    other_seed = search(
        Evolve(seeds=2, children=3, calls=11, seed=6, stop_on_success=False), engine, task, tmp_path, "s6", limit=5
    )
    assert other_seed[1] != runs[0][1]


def test_children_with_the_same_prompt_are_samples_of_it(tmp_path):
    """One seed: every child of a generation sees the same parent and context, so a problem's 4 children are 4
    samples of one prompt (prefilled once by a real engine), all problems in one engine call."""
    engine = FakeEngine(hashed_answers(1000))
    _, samples, _ = search(
        Evolve(seeds=1, children=4, calls=5, seed=0, stop_on_success=False), engine, FakeTask(), tmp_path, limit=3
    )
    assert [(len(p), params.n) for p, params, _ in engine.calls] == [(3, 1), (3, 1)]
    assert engine.sample_counts == [None, [4, 4, 4]]
    children = [s for s in samples if s["problem_id"] == "add-1" and s["generation"] == 1]
    assert [s["call"] for s in children] == [2, 3, 4, 5] and len({s["text"] for s in children}) == 4


class PlainEngine(FakeEngine):
    """An engine that gives every prompt of a call the same number of samples (no ``samples=``)."""

    capabilities = EngineCapabilities()


def test_an_engine_without_samples_per_prompt_gives_the_same_search(tmp_path):
    """Children grouped by size into one call per size give exactly the search of one call with ``samples=``."""
    options = {"seeds": 2, "children": 4, "calls": 14, "seed": 1, "islands": 1, "stop_on_success": False}
    task = FakeTask()
    one, plain = FakeEngine(hashed_answers()), PlainEngine(hashed_answers())
    runs = [
        search(Evolve(**options), engine, task, tmp_path, name, limit=5)
        for engine, name in ((one, "one"), (plain, "plain"))
    ]
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    assert len(one.calls) == 4 and len(plain.calls) > 4  # group sizes differed within a generation
    assert all(counts is None for counts in plain.sample_counts)


def test_a_scorer_that_raises_costs_one_candidate(tmp_path):
    class Flaky(FakeTask):
        def score(self, problem, completion) -> Score:
            if "7" in completion:
                raise RuntimeError("scorer bug")
            return super().score(problem, completion)

    metrics, samples, _ = search(Evolve(seeds=2, calls=2, seed=0), FakeEngine(["7", "4"]), Flaky(), tmp_path)
    assert metrics["num_skipped"] == 4 and metrics["budget/candidates"] == 8 and len(samples) == 4


@pytest.mark.parametrize(
    "options, message",
    [
        ({"calls": 0}, "set calls, tokens or generations"),
        ({"candidates": 5, "calls": 0}, "set calls, tokens or generations"),
        ({"mode": "mutate"}, "unknown mode 'mutate'"),
        ({"islands": 0}, "islands must be >= 1"),
        ({"exploit": 0.9}, "must sum to 1"),
        ({"seeds": 0}, "must be >= 1"),
        ({"answers_per_rollout": 0}, "must be >= 1"),
        ({"answers_per_rollout": 2, "delimiter": " "}, "delimiter must not be blank"),
        ({"child_max_new_tokens": -1}, "child_max_new_tokens must be >= 0"),
        ({"resume": "/nonexistent/run"}, "resume folder '/nonexistent/run' not found"),
        ({"behaviours": "sarcasm"}, "unknown behaviour 'sarcasm'"),
    ],
)
def test_bad_options_fail_at_construction(options, message):
    with pytest.raises(ValueError, match=message):
        Evolve(**options)


KILLED_SEARCH = textwrap.dedent("""
    import os, signal, sys
    from harness.store.run_folder import RunStore
    from harness.testing import FakeEngine, FakeTask, hashed_answers
    from harness.searchers.evolve import Evolve

    answer, rows = hashed_answers(), [0]

    def respond(messages, sample_index, seed):
        if "## Current solution" in messages[-1]["content"]:
            rows[0] += 1
            if rows[0] == int(sys.argv[2]):  # in the middle of a generation's engine call
                os.kill(os.getpid(), signal.SIGKILL)
        return answer(messages, sample_index, seed)

    task = FakeTask()
    store = RunStore.create(sys.argv[1], "killed")
    print(store.dir, flush=True)
    Evolve(seeds=2, children=3, calls=14, seed=7, batch_prompts=3, stop_on_success=False).search(
        FakeEngine(respond), task, task.problems("eval", limit=6), phase="pre", store=store)
""")


def test_a_search_killed_with_sigkill_resumes_to_the_same_result(tmp_path):
    options = {"seeds": 2, "children": 3, "calls": 14, "seed": 7, "batch_prompts": 3, "stop_on_success": False}
    task, engine = FakeTask(), FakeEngine(hashed_answers())
    full_metrics, full_samples, _ = search(Evolve(**options), engine, task, tmp_path, "full", limit=6)

    # 3 problems per batch x 3 children per generation = 9 child rows per generation: row 25 is generation 3 of
    # the first batch, mid-call, after two generations were checkpointed.
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_SEARCH, str(tmp_path / "killed"), "25"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr
    killed_dir = Path(proc.stdout.strip())
    saved = {p.name: json.loads(p.read_text()) for p in (killed_dir / "evolve" / "pre").glob("add-*.json")}
    assert len(saved) == 3 and all(s["generation"] == 2 and not s["done"] for s in saved.values())
    assert not (killed_dir / "samples.jsonl").exists()  # nothing was finished, so nothing was written yet

    metrics, samples, store = search(
        Evolve(**options, resume=str(killed_dir)), engine, task, tmp_path, "resumed", limit=6
    )
    assert metrics == full_metrics and samples == full_samples
    for name, state in saved.items():  # every candidate evaluated before the kill is in the final database
        final = json.loads((store.dir / "evolve" / "pre" / name).read_text())
        assert len(state["db"]["candidates"]) == 2 + 2 * 3
        assert final["db"]["candidates"][:8] == state["db"]["candidates"]
        assert final["done"] and final["calls"] == 14


def test_behaviours_are_reported_with_their_held_out_evaluator_where_they_have_one(tmp_path):
    """``behaviour/<name>`` (the training scorer) and, for a behaviour with a held-out evaluator, ``heldout/<name>``
    over every candidate; each record carries both."""
    from harness.plugins.registry import Registry
    from harness.types import Behaviour

    registry = Registry("behaviour")
    registry.add("shouting", Behaviour("shouting", lambda t, p=None: float(t.isupper()), "loudly", "quietly", "?"))
    calls = []

    def many(texts, problems):
        calls.append(len(texts))
        return [min(1.0, len(t.split()) / 4) for t in texts]

    registry.add(
        "long",
        Behaviour("long", lambda t, p=None: min(1.0, len(t) / 100), "long", "short", "?", held_out_many=many),
    )
    evolve = Evolve(seeds=2, children=2, calls=4, seed=0, behaviours="shouting,long", plugins={"behaviour": registry})
    metrics, samples, _ = search(evolve, FakeEngine(scripted), FakeTask(), tmp_path, limit=2)
    assert all(set(s["behaviours"]) == {"shouting", "long"} and set(s["held_out"]) == {"long"} for s in samples)
    assert all(s["held_out"]["long"] == min(1.0, len(s["text"].split()) / 4) for s in samples)
    assert metrics["heldout/long"] == pytest.approx(sum(s["held_out"]["long"] for s in samples) / len(samples))
    assert "behaviour/shouting" in metrics and "heldout/shouting" not in metrics
    assert calls == [4, 4]  # one batch per problem, over its candidates
