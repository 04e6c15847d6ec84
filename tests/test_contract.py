"""The plugin contract checks (harness/plugins/contract.py) and their assertion wrappers in harness.testing: each
catches what it should, in one line naming what is wrong, and passes every built-in plugin."""

from __future__ import annotations

import gc

import pytest

from harness import testing
from harness.plugins import contract
from harness.plugins.registry import PluginError
from harness.testing import FakeEngine, FakeStore, FakeTask, hashed_answers, run_searcher
from harness.types import EngineCapabilities, Score, SearcherCapabilities, TaskCapabilities, TrainerCapabilities


class _Task(FakeTask):
    """FakeTask follows the protocol; subclasses below break it one way each."""


class _NoDataSource:
    name, version = "t", "1"
    reward_weights = {"correct": 1.0}  # noqa: RUF012

    def problems(self, split, limit=None, seed=0):
        return []

    def messages(self, problem):
        return []

    def score(self, problem, completion):
        return Score({"correct": 0.0}, "correct")


# -- tasks -------------------------------------------------------------------------------------------------------


def test_a_task_missing_a_method_is_named_in_one_line():
    assert contract.check_task(_NoDataSource(), "t") == ["missing data_source()"]
    with pytest.raises(PluginError) as err:
        contract.require(contract.check_task(_NoDataSource(), "mytask"), "task", "mytask", "my-dist:mytask")
    assert str(err.value) == (
        "task 'mytask' (plugin 'my-dist:mytask') does not follow the Task protocol: missing data_source()"
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"name": None}, "missing name"),
        ({"version": 2}, "version should be a non-empty str, got int 2"),
        ({"reward_weights": None}, "missing reward_weights"),
        (
            {"reward_weights": {"correct": "1"}},
            "reward_weights should be a dict of str -> number, got dict {'correct': '1'}",
        ),
        (
            {"reward_weights": {"correct": True}},  # a bool is not a weight, though Python calls it an int
            "reward_weights should be a dict of str -> number, got dict {'correct': True}",
        ),
        ({"capabilities": {"batch_scoring": True}}, "_Task.capabilities should be a TaskCapabilities, got dict"),
        (
            {"capabilities": TaskCapabilities(batch_scoring=True)},
            "declares TaskCapabilities(batch_scoring=True) but has no score_many()",
        ),
        (
            {"capabilities": TaskCapabilities(feedback=True)},
            "declares TaskCapabilities(feedback=True) but has no check()",
        ),
        (
            {"capabilities": TaskCapabilities(reference_completions=True)},
            "declares TaskCapabilities(reference_completions=True) but has no reference_completion()",
        ),
    ],
)
def test_task_attribute_and_capability_problems(change, expected):
    task = _Task(size=2)
    for attr, value in change.items():
        setattr(task, attr, value)
    assert contract.check_task(task, "t") == [expected]


def test_a_task_method_with_the_wrong_signature():
    class OldProblems(_Task):
        def problems(self, split):  # no limit or seed: the runner passes both
            return []

    (problem,) = contract.check_task(OldProblems(), "t")
    assert problem == (
        "problems(..., limit=..., seed=...) does not fit problems(split): got an unexpected keyword argument 'limit'"
    )


def test_a_declared_capability_with_its_method_passes():
    class Batched(_Task):
        capabilities = TaskCapabilities(batch_scoring=True)

        def score_many(self, problems, completions):
            return [self.score(p, c) for p, c in zip(problems, completions, strict=True)]

    assert contract.check_task(Batched(), "t") == []


@pytest.mark.parametrize("name", ["math", "maze"])
def test_builtin_tasks_pass(plugins, name):
    task = plugins["task"].get(name).create()  # constructing builds no problems: cheap
    assert contract.check_task(task, name) == []
    testing.check_task(task)


# -- searchers, trainers, engines --------------------------------------------------------------------------------


def test_searcher_problems():
    class NoSearch:
        pass

    class PositionalStore:
        def search(self, engine, task, problems, phase):  # no store: the runner passes it by keyword
            return {}

    class WrongCapabilities:
        capabilities = TaskCapabilities()

        def search(self, engine, task, problems, *, phase, store):
            return {}

    assert contract.check_searcher(NoSearch(), "s") == ["missing search()"]
    assert contract.check_searcher(PositionalStore(), "s") == [
        "search(..., ..., ..., phase=..., store=...) does not fit search(engine, task, problems, phase): got an "
        "unexpected keyword argument 'store'"
    ]
    assert contract.check_searcher(WrongCapabilities(), "s") == [
        "WrongCapabilities.capabilities should be a SearcherCapabilities, got TaskCapabilities"
    ]


@pytest.mark.parametrize("name", ["best-of-k", "evolve"])
def test_builtin_searchers_pass(plugins, name):
    searcher = plugins["searcher"].get(name).create(plugins=plugins)
    assert contract.check_searcher(searcher, name) == []
    testing.check_searcher(searcher)


def test_trainer_problems_and_a_builtin_trainer(plugins):
    class NoStore:
        def train(self, policy, engine, task, problems):
            pass

    assert contract.check_trainer(object(), "x") == ["missing train()"]
    assert contract.check_trainer(NoStore(), "x")[0].startswith("train(..., ..., ..., ..., store=...) does not fit")
    assert contract.check_trainer(plugins["trainer"].get("grpo").create(), "grpo") == []


def test_a_trainer_that_declares_prepares_policy_must_have_it():
    """The runner calls ``prepare_policy(policy)`` on a resume only when declared, so the declaration promises it."""

    class Declared:
        capabilities = TrainerCapabilities(prepares_policy=True)

        def train(self, policy, engine, task, problems, *, store):
            pass

    class WrongArity(Declared):
        def prepare_policy(self):
            pass

    assert contract.check_trainer(Declared(), "x") == [
        "declares TrainerCapabilities(prepares_policy=True) but has no prepare_policy()"
    ]
    assert contract.check_trainer(WrongArity(), "x")[0].startswith(
        "declares TrainerCapabilities(prepares_policy=True) but prepare_policy(...) does not fit"
    )
    undeclared = type("Undeclared", (), {"train": Declared.train})  # a third party's trainer: the defaults
    assert contract.check_trainer(undeclared(), "x") == []


def test_engine_factory_problems_and_the_builtin_engines(plugins):
    class NoMainProcess:
        def __init__(self, policy):
            pass

        def generate(self, prompts, params, *, desc=""):
            return []

    class ClaimsSteering(NoMainProcess):
        capabilities = EngineCapabilities(steering=True, own_weights=True, samples_per_prompt=True, phase_dtype=True)

        def __init__(self, policy, main_process=True):
            pass

    assert contract.check_engine_factory("transformers", "e") == [
        "the factory should be callable, got str 'transformers'"
    ]
    assert contract.check_engine_factory(NoMainProcess, "e") == [
        "factory(..., main_process=...) does not fit factory(policy): got an unexpected keyword argument 'main_process'"
    ]
    assert contract.check_engine_factory(ClaimsSteering, "e") == [
        "declares EngineCapabilities(own_weights=True) but has no sync_weights()",
        "declares EngineCapabilities(phase_dtype=True) but has no sampling_in()",
        "declares EngineCapabilities(steering=True) but generate() takes no steering",
        "declares EngineCapabilities(samples_per_prompt=True) but generate() takes no samples",
    ]
    for name in ("transformers", "vllm", "vllm-server"):  # classes only: nothing is imported beyond their modules
        assert contract.check_engine_factory(plugins["engine"].get(name).load(), name) == [], name


# -- advantage estimators ----------------------------------------------------------------------------------------


def test_estimator_problems():
    import torch

    def per_answer(rewards, groups, weights, **_):  # forgot to reduce over answers and components
        return rewards

    def integers(rewards, groups, weights, **_):
        return groups

    def no_context(rewards, groups, weights):  # takes none of the keyword context a trainer passes
        return rewards.sum((1, 2))

    assert contract.check_estimator(42, "x") == ["should be callable, got int 42"]
    assert contract.check_estimator(per_answer, "x") == ["returned shape [4, 1, 2] for B=4 rollouts, expected [4]"]
    assert contract.check_estimator(integers, "x") == ["returned dtype torch.int64, expected a float tensor"]
    assert contract.check_estimator(lambda *a, **k: [0.0] * 4, "x") == [
        "should return a tensor of advantages [B], got list [0.0, 0.0, 0.0, 0.0]"
    ]
    assert contract.check_estimator(lambda *a, **k: torch.full((4,), float("nan")), "x") == [
        "returned NaN or infinite advantages"
    ]
    (problem,) = contract.check_estimator(no_context, "x")
    assert problem.startswith("raised TypeError on rewards [4, 1, 2], groups [4], weights [2]: ")
    assert "unexpected keyword argument" in problem


def test_every_registered_estimator_passes(plugins):
    names = plugins["advantage"].names()
    assert {"grpo", "dr_grpo", "vpo", "multi_rlvr", "random_weights", "pkpo"} <= set(names)
    for name in names:
        assert contract.check_estimator(plugins["advantage"].get(name).load(), name) == [], name
        testing.check_estimator(plugins["advantage"].get(name).load())


# -- harness.testing: assertions, the store in memory, a searcher run ------------------------------------------


def test_testing_wrappers_list_every_problem():
    with pytest.raises(AssertionError) as err:
        testing.check_task(_NoDataSource())
    assert str(err.value) == "_NoDataSource does not follow the Task protocol:\n  - missing data_source()"

    def flat(rewards, groups, weights, **_):
        return rewards

    with pytest.raises(
        AssertionError,
        match=r"^flat does not follow the advantage estimator contract:\n  - returned "
        r"shape \[4, 1, 2\]",
    ):
        testing.check_estimator(flat)
    with pytest.raises(AssertionError, match="missing search"):
        testing.check_searcher(object())


def test_fake_store_mirrors_the_run_store(tmp_path):
    store = FakeStore(tmp_path / "run")
    store.write_samples([{"problem_id": "p0", "phase": "eval"}])
    store.log_step(0, {"loss": 1.0})
    store.log_step(1, {"loss": 0.5})
    store.log_step(0, {"loss": 2.0}, stage="warmup")
    store.update_metrics({"before/pass@1": 0.25})
    assert store.samples == [{"problem_id": "p0", "phase": "eval"}]
    assert store.steps[1] == {"stage": "train", "step": 1, "loss": 0.5}
    assert store.metrics == {"train/loss": [1.0, 0.5], "warmup/loss": [2.0], "before/pass@1": 0.25}
    assert store.dir.is_dir() and store.checkpointer is None
    temporary = FakeStore()
    folder = temporary.dir
    assert folder.is_dir()
    del temporary
    gc.collect()
    assert not folder.exists()  # a temporary folder goes with its store


def test_run_searcher_runs_a_builtin_searcher_without_a_model(plugins):
    task = FakeTask(size=3)
    searcher = plugins["searcher"].get("best-of-k").create(n=4, k="1,4", embedding_diversity=False)
    metrics, store = run_searcher(searcher, task, task.problems("eval"), FakeEngine(hashed_answers(modulus=3)))
    assert len(store.samples) == 12 and {r["phase"] for r in store.samples} == {"eval"}
    assert 0.0 <= metrics["pass@1"] <= metrics["pass@4"] <= 1.0


def test_run_searcher_refuses_records_the_report_cannot_use():
    class Sloppy:
        capabilities = SearcherCapabilities()

        def search(self, engine, task, problems, *, phase, store):
            store.write_samples([{"problem_id": p.id, "text": "x"} for p in problems])
            return {"majority@1": 0.0}

    task = FakeTask(size=1)
    with pytest.raises(
        AssertionError,
        match=r"^a sample record lacks phase, success, scalar \(the report needs "
        r"them\)",
    ):
        run_searcher(Sloppy(), task, task.problems("eval"))
