"""The rg: bridge: reasoning-gym datasets as tasks, scored by their own scorers through our answer extraction."""

from __future__ import annotations

import json
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.plugins.options import convert
from harness.tasks.reasoning_gym_bridge import ReasoningGymTask, extract_answer
from harness.tasks.splits import normalise
from harness.types import Task

# Numeric answers, text answers, a list, a path and rg's own maze (step counts): different scorers.
DATASETS = ["basic_arithmetic", "leg_counting", "chain_sum", "spell_backward", "word_sorting", "shortest_path", "maze"]


@pytest.fixture(scope="module")
def tasks() -> dict[str, ReasoningGymTask]:
    return {name: ReasoningGymTask(name, pool_size=60) for name in DATASETS}


@pytest.mark.parametrize("name", DATASETS)
def test_reference_answers_score_correct_and_wrong_ones_do_not(tasks: dict, name: str) -> None:
    task = tasks[name]
    for problem in task.problems("eval", limit=5) + task.problems("train", limit=5):
        right = task.score(problem, f"Let me think step by step.\nThe answer is <answer>{problem.answer}</answer>.")
        assert right.rewards == {"correct": 1.0, "score": 1.0, "format": 1.0} and right.success
        assert right.extracted == problem.answer and not right.unparsed
        wrong = task.score(problem, "Hmm.\nThe answer is <answer>no idea 12345</answer>.")
        assert wrong.rewards["correct"] == 0.0 and wrong.rewards["format"] == 1.0 and not wrong.success


@pytest.mark.parametrize("name", ["basic_arithmetic", "leg_counting", "chain_sum"])
def test_untagged_answers_are_found_but_earn_no_format_reward(tasks: dict, name: str) -> None:
    problem = tasks[name].problems("eval", limit=1)[0]
    for completion in (
        f"So the answer is {problem.answer}.",
        f"**Answer:** {problem.answer}",
        f"Thinking...\n\\boxed{{{problem.answer}}}",
        f"Let me add.\n{problem.answer}",
    ):
        score = tasks[name].score(problem, completion)
        assert score.rewards["correct"] == 1.0 and score.rewards["format"] == 0.0, completion


@pytest.mark.parametrize(
    ("completion", "answer", "tagged"),
    [
        ("The answer is <answer>42</answer>.", "42", True),
        ("<answer>1</answer> no, wait: <answer> 2 </answer>", "2", True),  # the last pair, stripped
        ("<answer>\nright right down\n</answer>", "right right down", True),
        ("<answer></answer>", "", True),  # reasoning-gym reads empty tags as the empty answer
        ("I am sure it is <answer>17", "17", False),  # cut off at max_new_tokens
        ("So $\\boxed{-3}$.", "-3", False),
        ("The final answer is: 256 legs. Done!", "256", False),
        ("Step 1 ...\nStep 2 ...\n8", "8", False),
        ("The answer to this arithmetic problem is 60.", "60", False),  # SmolLM2-135M's habits, seen in samples
        ("Here it is: 29 - 90 = -61", "-61", False),  # worked arithmetic: the result
        ("Answer: A=1,B=2", "A=1,B=2", False),  # but not an answer that is made of equations
        ("", None, False),
        ("x" * 150, None, False),  # a long last line is prose, not an answer
    ],
)
def test_extract_answer(completion: str, answer: str | None, tagged: bool) -> None:
    assert extract_answer(completion) == (answer, tagged)


def test_unparsed_and_scorer_failures_score_zero(tasks: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    task = tasks["basic_arithmetic"]
    problem = task.problems("eval", limit=1)[0]
    unparsed = task.score(problem, "")
    assert unparsed.unparsed and unparsed.rewards == {"correct": 0.0, "score": 0.0, "format": 0.0}

    def broken(answer, entry):
        raise KeyError("metadata")

    monkeypatch.setattr(task._generator, "score_answer", broken)
    assert task.score(problem, f"<answer>{problem.answer}</answer>").rewards["correct"] == 0.0


def test_partial_credit_is_reported_as_score_not_as_correct(tasks: dict) -> None:
    task = tasks["shortest_path"]
    # A valid path that is not the shortest: reasoning-gym gives 0.5. Find one by walking there and back.
    problem = next(p for p in task.problems("train") if p.answer != "infeasible")
    back = {"up": "down", "down": "up", "left": "right", "right": "left"}
    first = problem.answer.split()[0]
    detour = f"{first} {back[first]} {problem.answer}"
    score = task.score(problem, f"<answer>{detour}</answer>")
    assert score.rewards == {"correct": 0.0, "score": 0.5, "format": 1.0}


def test_datasets_without_a_single_reference_use_their_checker() -> None:
    task = ReasoningGymTask("propositional_logic", pool_size=30)
    problem = task.problems("eval", limit=1)[0]
    assert problem.answer is None
    example = problem.meta["metadata"]["example_answer"]
    assert task.score(problem, f"<answer>{example}</answer>").success


# ----------------------------------------------------------------------------------------------------------------
# Pool and splits
# ----------------------------------------------------------------------------------------------------------------


def test_reasoning_gym_seeds_overlap_which_is_why_there_is_one_pool() -> None:
    import reasoning_gym

    a, b = (
        reasoning_gym.create_dataset("leg_counting", seed=7, size=5),
        reasoning_gym.create_dataset("leg_counting", seed=8, size=5),
    )
    assert a[1]["question"] == b[0]["question"]  # item i+1 of seed s is item i of seed s+1


@pytest.mark.parametrize("name", ["basic_arithmetic", "leg_counting", "spell_backward", "maze"])
def test_splits_are_disjoint_by_content_and_deterministic(tasks: dict, name: str) -> None:
    task = tasks[name]
    train, evaluation = task.problems("train"), task.problems("eval")
    assert train and evaluation
    assert not {normalise(p.prompt) for p in train} & {normalise(p.prompt) for p in evaluation}
    assert len({p.id for p in train + evaluation}) == len(train) + len(evaluation)
    fresh = ReasoningGymTask(name, pool_size=60)
    assert fresh.problems("eval", limit=5, seed=3) == task.problems("eval", limit=5, seed=3)
    # A bigger pool only adds problems: the split of a question never changes.
    bigger = ReasoningGymTask(name, pool_size=120)
    assert {p.id for p in evaluation} <= {p.id for p in bigger.problems("eval")}
    assert not {p.id for p in evaluation} & {p.id for p in bigger.problems("train")}


def test_duplicates_are_dropped_and_reported() -> None:
    task = ReasoningGymTask(
        "basic_arithmetic",
        pool_size=200,
        min_terms="2",
        max_terms="2",
        max_digits="1",
        operators="+",
        allow_negation="false",
        allow_parentheses="false",
    )
    n = len(task.problems("train")) + len(task.problems("eval"))
    source = task.data_source()
    assert source["duplicates_dropped"] == 200 - n > 0  # only 11 x 11 one-digit sums exist
    assert source["n_train"] + source["n_eval"] == n


def test_task_protocol_messages_and_data_source(tasks: dict) -> None:
    task = tasks["leg_counting"]
    assert isinstance(task, Task) and task.name == "rg:leg_counting" and task.version
    assert task.capabilities.max_new_tokens
    problem = task.problems("eval", limit=1)[0]
    content = task.messages(problem)[0]["content"]
    assert content.startswith(problem.prompt) and "<answer>" in content and "</answer>" in content
    source = task.data_source()
    assert source["source"] == "reasoning-gym" and source["version"] and source["dataset"] == "leg_counting"
    assert source["pool_seed"] == source["config"]["seed"] and source["pool_size"] == 60
    json.dumps(source)  # goes into the manifest


# ----------------------------------------------------------------------------------------------------------------
# Names and options
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "hint"), [("leg_countin", "leg_counting"), ("no_such_thing", "basic_arithmetic"), ("", "rg:<name>")]
)
def test_unknown_dataset_is_a_one_line_error_listing_names(name: str, hint: str) -> None:
    with pytest.raises(ValueError) as error:
        ReasoningGymTask(name)
    assert "\n" not in str(error.value) and hint in str(error.value)


def test_string_options_are_converted_to_the_config_types() -> None:
    task = ReasoningGymTask(
        "basic_arithmetic",
        min_terms="2",
        max_terms="3",
        operators="+,-",
        allow_negation="false",
        whitespace="no_space",
        pool_size="40",
        eval_fraction="0.5",
    )
    config = task.config
    assert (config.min_terms, config.max_terms, config.operators) == (2, 3, ["+", "-"])
    assert config.allow_negation is False and config.whitespace == "no_space"
    assert (config.seed, config.size) == (task.pool_seed, 40)
    for p in task.problems("train", limit=10):
        assert "*" not in p.prompt and "/" not in p.prompt and "- -" not in p.prompt
    # Enums by name or value, Optional "none", Python-literal lists.
    assert ReasoningGymTask("word_sorting", transformation="uppercase").config.transformation.value == "uppercase"
    assert ReasoningGymTask("calendar_arithmetic", tasks="['count_days']").config.tasks == ["count_days"]
    assert convert("none", typing.Optional[int]) is None  # noqa: UP045 (reasoning-gym's configs spell it so)
    assert convert("3", int | None) == 3 and convert("null", int | None) is None
    assert convert("[(1, 2)]", list[tuple[float, float]]) == [(1.0, 2.0)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_terms": "many"}, "max_terms='many': expected int"),
        ({"whitespace": "lots"}, "whitespace='lots'"),
        ({"bogus": "1"}, "unknown option bogus"),
        ({"max_term": "1"}, "unknown option max_term; did you mean max_terms"),
        ({"seed": "3"}, "use pool_seed"),
        ({"min_terms": "5", "max_terms": "3"}, "invalid options"),  # the config's own check
        ({"eval_fraction": "0"}, "eval_fraction"),
    ],
)
def test_bad_options_are_one_line_errors(options: dict, message: str) -> None:
    with pytest.raises(ValueError) as error:
        ReasoningGymTask("basic_arithmetic", **options)
    assert "\n" not in str(error.value) and message in str(error.value)


def test_family_registration_passes_the_dataset_name() -> None:
    from harness import tasks as builtin_tasks
    from harness.plugins.registry import Registry

    registry = Registry("task")
    builtin_tasks.harness_register_tasks(registry=registry)
    task = registry.get("rg:leg_counting").create(max_animals="3", pool_size="20")
    assert isinstance(task, ReasoningGymTask) and task.name == "rg:leg_counting" and task.config.max_animals == 3


_FRAGMENTS = [
    "<answer>",
    "</answer>",
    "\\boxed{",
    "}",
    "The answer is ",
    "Answer:",
    "42",
    "-7",
    ".",
    "\n",
    " ",
    "legs",
    "**",
    "$",
    "[1, 2]",
    "x" * 120,
]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(_FRAGMENTS), max_size=30).map("".join)))
def test_score_never_raises(tasks: dict, completion: str) -> None:
    task = tasks["leg_counting"]
    problem = task.problems("eval", limit=1)[0]
    score = task.score(problem, completion)
    assert all(0.0 <= v <= 1.0 for v in score.rewards.values())
    assert score.unparsed == (score.extracted is None)
    assert score.rewards["correct"] <= score.rewards["score"]


def test_untagged_numeric_answer_inside_a_sentence_is_reduced_to_its_number():
    """Seen from SmolLM2-135M on leg_counting: the phrase fallback found a sentence; its first number counts."""
    task = ReasoningGymTask("leg_counting", pool_size=20)
    problem = task.problems("eval")[0]
    reference = problem.meta.get("rg_answer", problem.answer)
    completion = f"{reference} Explanation of the answer: There are {reference} legs in total, among which 15 are ..."
    score = task.score(problem, completion)
    assert score.extracted == str(reference) and score.rewards["correct"] == 1.0
