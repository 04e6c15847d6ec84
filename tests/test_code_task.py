"""The code task: extraction on model habits, HumanEval's checks cut into asserts, hub schemas on fixtures, the
reward vector, and HumanEval's canonical solutions (all must pass) scored through the sandbox."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest

from harness.tasks import code as code_module
from harness.tasks import code_data
from harness.tasks.code import LCB, MBPP, CodeTask, build_program, extract_code, outputs_match, slot_values
from harness.tasks.code_tests import split_check
from harness.types import Problem, Task, scalarize

FIXTURES = Path(__file__).parent / "fixtures" / "code"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Problem]:
    task = CodeTask(eval_fraction=1.0)
    return {p.id: p for p in task.problems("eval")}


# ----------------------------------------------------------------------------------------------------------------
# Extraction
# ----------------------------------------------------------------------------------------------------------------

FUNCTION = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (f"```python\n{FUNCTION}```", FUNCTION),
        (f"Sure! Here is the function:\n\n```py\n{FUNCTION}```\n\nIt adds two numbers.", FUNCTION),
        (f"```python\nimport math\n```\nThen:\n```python\n{FUNCTION}```\n```python\nprint(add(1, 2))\n```", FUNCTION),
        (f"```\n{FUNCTION}```", FUNCTION),  # a fence without a language
        (f"```python\n{FUNCTION}", FUNCTION),  # cut at max_new_tokens before the closing fence
        (f"```bash\npip install nothing\n```\n```python\n{FUNCTION}```", FUNCTION),
        (f"Here is my solution:\n\n{FUNCTION}\nThis returns the sum of a and b.", FUNCTION),  # no fences
        ("    return a + b\n", "    return a + b\n"),  # a body, as a completion model continues the prompt
        ("    pass", "    pass\n"),
    ],
    ids=[
        "fenced",
        "prose-around",
        "block-defining-it",
        "bare-fence",
        "unclosed",
        "other-language",
        "unfenced",
        "body",
        "pass",
    ],
)
def test_extract_code_on_model_habits(completion: str, expected: str) -> None:
    assert extract_code(completion, "add") == expected


@pytest.mark.parametrize("completion", ["", "I am not sure how to do this.", "Here is the code:", "```text\nhi\n```"])
def test_no_code_is_none(completion: str) -> None:
    assert extract_code(completion, "add") is None


def test_last_block_when_none_defines_the_function() -> None:
    assert extract_code("```python\nx = 1\n```\n```python\ny = 2\n```", "add") == "y = 2\n"


def test_whole_function_or_body_becomes_a_program() -> None:
    prompt = 'from typing import List\n\n\ndef add(a: int, b: int) -> int:\n    """Add."""\n'
    whole = build_program(f"```python\n{FUNCTION}```", "add", prompt)
    assert whole is not None and whole.startswith(prompt.rstrip()) and whole.endswith(FUNCTION)
    assert build_program("return a + b", "add", prompt) == prompt + "    return a + b\n"  # re-indented body
    assert build_program("        return a + b", "add", prompt) == prompt + "    return a + b\n"
    assert build_program("no code at all", "add", prompt) is None
    nested = "    def twice(x):\n        return 2 * x\n    return twice(a) + b\n"  # a body with a helper inside
    assert build_program(nested, "add", prompt) == prompt + nested
    misnamed = build_program("def plus(a, b):\n    return a + b\n", "add", prompt)
    assert misnamed == prompt.rstrip() + "\n\n\ndef plus(a, b):\n    return a + b\n"  # a module, not a body
    assert build_program(f"```python\n{FUNCTION}```", "add", None) == FUNCTION


# ----------------------------------------------------------------------------------------------------------------
# HumanEval's checks, cut into asserts
# ----------------------------------------------------------------------------------------------------------------


def test_every_humaneval_check_is_split(humaneval: dict[str, Problem]) -> None:
    assert len(humaneval) == 164 and all(p.meta["split"] for p in humaneval.values())
    assert len(humaneval["HumanEval/0"].meta["tests"]) == 7


def test_split_keeps_setup_before_each_assert(humaneval: dict[str, Problem]) -> None:
    # /32: imports and a seeded generator before one loop of asserts: one test that carries its setup.
    (loop,) = humaneval["HumanEval/32"].meta["tests"]
    assert loop.startswith("import math\nimport random\nrng = random.Random(42)\nimport copy\nfor _ in range(100):")
    # /53: five asserts after `import random`, then a loop: six tests, each with the import.
    tests = humaneval["HumanEval/53"].meta["tests"]
    assert len(tests) == 6 and all(t.startswith("import random\n") for t in tests)
    # /151: `lst = ...` and `odd_sum = ...` belong to the last assert only.
    tests = humaneval["HumanEval/151"].meta["tests"]
    assert "odd_sum" in tests[-1] and all("odd_sum" not in t for t in tests[:-1])
    # /38's helper encode_cyclic is defined again on the test's side (a program cannot redefine it away).
    assert "def encode_cyclic" in humaneval["HumanEval/38"].meta["setup"]


def test_split_rules_on_small_checks() -> None:
    cut = split_check("def check(candidate):\n    assert True, 'debugging'\n    x = candidate(5)\n    assert x == 3\n")
    assert cut.split and cut.tests == ["x = candidate(5)\nassert x == 3"]  # assert True is no test
    early = split_check("def check(candidate):\n    assert candidate(1)\n    return\n    assert candidate(2)\n")
    assert not early.split and early.tests == ["check(candidate)"]  # a return would make later asserts vacuous
    assert not split_check("def check(candidate:\n").split
    assert not split_check("def other(candidate):\n    assert candidate(1)\n").split


# ----------------------------------------------------------------------------------------------------------------
# Scoring
# ----------------------------------------------------------------------------------------------------------------


def test_every_canonical_humaneval_solution_passes(humaneval: dict[str, Problem]) -> None:
    task = CodeTask(workers=2)
    problems = list(humaneval.values())
    scores = task.score_many(problems, [p.answer or "" for p in problems])
    failing = [p.id for p, s in zip(problems, scores, strict=True) if s.rewards["all_pass"] != 1.0]
    assert failing == []
    assert all(s.rewards["pass_fraction"] == 1.0 and not s.unparsed for s in scores)


def test_an_empty_body_fails(humaneval: dict[str, Problem]) -> None:
    score = CodeTask().score(humaneval["HumanEval/0"], "```python\n    pass\n```")
    assert not score.unparsed and score.rewards["all_pass"] == 0.0 and score.rewards["pass_fraction"] == 0.0


def test_reward_hacks_fail(humaneval: dict[str, Problem]) -> None:
    task = CodeTask()
    always_equal = (
        "class Anything:\n    def __eq__(self, other):\n        return True\n\n"
        "def has_close_elements(numbers, threshold):\n    return Anything()\n"
    )
    assert task.score(humaneval["HumanEval/0"], always_equal).rewards["pass_fraction"] == 0.0
    # /32 checks |poly(xs, x)| < 1e-4 with the prompt's poly: redefining poly must not help.
    redefined = "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n"
    assert task.score(humaneval["HumanEval/32"], redefined).rewards["all_pass"] == 0.0
    leave = "import sys\nsys.exit(0)\n\ndef has_close_elements(numbers, threshold):\n    return False\n"
    assert task.score(humaneval["HumanEval/0"], leave).rewards["pass_fraction"] == 0.0


def test_no_code_is_unparsed_and_never_runs(humaneval: dict[str, Problem], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code_module, "run_tests", lambda *a, **k: pytest.fail("ran the sandbox"))
    score = CodeTask().score(humaneval["HumanEval/0"], "I cannot help with that.")
    assert score.unparsed and score.extracted is None and set(score.rewards.values()) == {0.0}


def test_two_answers_trade_off_across_components() -> None:
    task = CodeTask(source="jsonl", path=str(FIXTURES / "tiny.jsonl"), eval_fraction=1.0, test_slots=3)
    square = next(p for p in task.problems("eval") if p.id == "square")  # tests: square(1), square(2), square(3)
    first_two = task.check(square, "```python\ndef square(x):\n    return x * x if x < 3 else 0\n```")
    third = task.check(square, "```python\ndef square(x):\n    return 9 if x == 3 else 0\n```")
    a, b = first_two.score.rewards, third.score.rewards
    assert [a["test_0"], a["test_1"], a["test_2"]] == [1.0, 1.0, 0.0]
    assert [b["test_0"], b["test_1"], b["test_2"]] == [0.0, 0.0, 1.0]
    assert a["all_pass"] == b["all_pass"] == 0.0
    assert scalarize(a, task.reward_weights) == pytest.approx(1 / 3) and scalarize(b, task.reward_weights) > 0
    assert third.feedback == [
        "assert candidate(1) == 1  -> AssertionError",
        "assert candidate(2) == 4  -> AssertionError",
    ]


def test_the_reward_vector_is_the_same_for_every_problem(humaneval: dict[str, Problem]) -> None:
    task = CodeTask()
    names = {tuple(task.score(p, "").rewards) for p in list(humaneval.values())[:20]}
    assert names == {("all_pass", "pass_fraction", *(f"test_{j}" for j in range(8)))}
    assert set(task.reward_weights) == set(next(iter(names)))
    assert sum(task.reward_weights.values()) == pytest.approx(1.5)


def test_slot_values() -> None:
    assert slot_values([True, False, True], 3) == [1.0, 0.0, 1.0]
    assert slot_values([True, False], 4) == [1.0, 1.0, 0.0, 0.0]  # each test repeated
    assert slot_values([True, True, False, False, True, False], 3) == [1.0, 0.0, 0.5]  # contiguous groups
    assert slot_values([], 2) == [0.0, 0.0]


def test_outputs_match_like_livecodebench() -> None:
    assert outputs_match("3\n", "3") and outputs_match("  1 2 \n\n", "1 2\n")
    assert outputs_match("1.500\n", "1.5") and not outputs_match("1.5001", "1.5")
    assert not outputs_match("3\n4\n", "3") and not outputs_match(None, "3") and not outputs_match("x", "3")


# ----------------------------------------------------------------------------------------------------------------
# Sources, splits, protocol
# ----------------------------------------------------------------------------------------------------------------


def test_humaneval_splits_are_disjoint_by_content_and_deterministic() -> None:
    task = CodeTask()
    train, evaluation = task.problems("train"), task.problems("eval")
    assert len(train) + len(evaluation) == 164 and train and evaluation
    assert not {p.prompt for p in train} & {p.prompt for p in evaluation}
    assert [p.id for p in task.problems("eval", limit=5, seed=3)] == [
        p.id for p in CodeTask().problems("eval", limit=5, seed=3)
    ]
    assert task.data_source()["split"] == "content-hash" and task.data_source()["tests_split"] == 164
    assert CodeTask(eval_fraction=1.0).problems("train") == []


def test_task_protocol_and_budget() -> None:
    task = CodeTask()
    assert isinstance(task, Task) and task.name == "code" and CodeTask.capabilities.max_new_tokens == 384
    problem = task.problems("eval", limit=1)[0]
    assert problem.meta["code_prompt"] in task.messages(problem)[0]["content"]


@pytest.mark.parametrize(
    "options",
    [
        {"source": "nope"},
        {"source": "jsonl"},
        {"source": "hub", "hub_id": "x/y"},
        {"eval_fraction": 0},
        {"test_slots": 0},
    ],
)
def test_bad_options_fail_at_construction(options: dict) -> None:
    with pytest.raises(ValueError, match="code"):
        CodeTask(**options)


def test_jsonl_source() -> None:
    task = CodeTask(source="jsonl", path=str(FIXTURES / "tiny.jsonl"), eval_fraction=1.0)
    problems = {p.id: p for p in task.problems("eval")}
    square = problems["square"]
    assert square.meta["code_prompt"] and task.score(square, "    return x * x").rewards["all_pass"] == 1.0
    shout = next(p for p in problems.values() if p.id != "square")
    assert shout.id.startswith("tiny-") and shout.meta["code_prompt"] is None
    assert shout.meta["tests"] == ["assert candidate('a') == 'A!'", "assert candidate('hi') == 'HI!'"]
    answer = "```python\ndef shout(s):\n    return s.upper() + '!'\n```"
    assert task.score(shout, answer).rewards["all_pass"] == 1.0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "def f(): pass", "entry_point": "f", "tests": []}', "'tests'"),
        ('{"prompt": "def f(): pass", "tests": ["assert f() is None"]}', "'entry_point'"),
        ('{"prompt": 3, "entry_point": "f", "tests": ["assert f() is None"]}', "'prompt'"),
        ('["def f(): pass"]', "expected an object"),
        ('{"prompt": "def f(): pass", ', "invalid JSON"),
    ],
)
def test_malformed_jsonl_row_names_file_and_row(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "def f(): pass", "entry_point": "f", "tests": ["assert f() is None"]}\n\n' + line)
    with pytest.raises(ValueError) as error:
        CodeTask(source="jsonl", path=str(path)).problems("eval")
    text = str(error.value)
    assert "\n" not in text and str(path) in text and "row 1 (line 3)" in text and message in text


# ----------------------------------------------------------------------------------------------------------------
# Hub sources, on fixtures in the hub's schemas (the real datasets JSON builder reads them)
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple]:
    """datasets.load_dataset served from tests/fixtures/code/<dataset>/[<config>/]<split>.jsonl, and hf:// files
    (LiveCodeBench's jsonl) from tests/fixtures/code/<repo name>/<file>."""
    import datasets

    real_load_dataset = datasets.load_dataset
    folders = {"openai_humaneval": FIXTURES / "openai_humaneval", MBPP: FIXTURES / "mbpp"}
    text, texts, number = datasets.Value("string"), datasets.Sequence(datasets.Value("string")), datasets.Value("int32")
    features = {  # the hub's own column types
        ("openai_humaneval", ""): {k: text for k in ("task_id", "prompt", "canonical_solution", "test", "entry_point")},
        (MBPP, "full"): {
            "task_id": number,
            "text": text,
            "code": text,
            "test_list": texts,
            "test_setup_code": text,
            "challenge_test_list": texts,
        },
        (MBPP, "sanitized"): {
            "source_file": text,
            "task_id": number,
            "prompt": text,
            "code": text,
            "test_imports": texts,
            "test_list": texts,
        },
    }
    calls: list[tuple] = []

    def load_dataset(path: str, name: str | None = None, **kwargs):
        if path == "json":  # hf://datasets/<repo>@<revision>/<file>
            urls = kwargs["data_files"]["test"]
            calls.append(("json", tuple(urls)))
            local = [str(FIXTURES / url.split("@", 1)[0].rsplit("/", 1)[1] / url.rsplit("/", 1)[1]) for url in urls]
            return real_load_dataset(
                "json", data_files={"test": local}, features=kwargs.get("features"), cache_dir=str(tmp_path / "cache")
            )
        calls.append((path, name, kwargs.get("revision")))
        if path not in folders:
            raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)\nmore detail")
        config = name or ("full" if path == MBPP else "")
        files = {f.stem: str(f) for f in sorted((folders[path] / config).glob("*.jsonl"))}
        return real_load_dataset(
            "json",
            data_files=files,
            features=datasets.Features(features[path, config]),
            cache_dir=str(tmp_path / "cache"),
        )

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_hub_openai_humaneval(fake_hub: list[tuple]) -> None:
    task = CodeTask(source="hub", hub_id="openai_humaneval", eval_fraction=1.0, hub_revision=COMMIT)
    problems = task.problems("eval")
    assert fake_hub == [("openai_humaneval", None, COMMIT)] and len(problems) == 3
    assert all(task.score(p, p.answer or "").rewards["all_pass"] == 1.0 for p in problems)
    assert task.data_source()["version"] == COMMIT


def test_hub_mbpp_keeps_its_splits(fake_hub: list[tuple]) -> None:
    task = CodeTask(source="hub", hub_id="mbpp")
    train, evaluation = task.problems("train"), task.problems("eval")
    assert fake_hub == [(MBPP, None, None)]
    assert sorted(p.id for p in evaluation) == ["mbpp/13", "mbpp/2", "mbpp/4"]
    assert sorted(p.id for p in train) == ["mbpp/1", "mbpp/11", "mbpp/511"]  # mbpp/12 repeats mbpp/13's text
    remove = next(p for p in train if p.id == "mbpp/11")
    assert remove.meta["entry_point"] == "remove_Occ" and len(remove.meta["tests"]) == 3  # no challenge tests
    assert "Your code should pass these tests" in remove.prompt and 'remove_Occ("hello"' in remove.prompt
    for problem in train + evaluation:
        assert task.score(problem, f"```python\n{problem.answer}\n```").rewards["all_pass"] == 1.0, problem.id
    assert task.score(remove, "```python\ndef remove_Occ(s, ch):\n    return s\n```").rewards["all_pass"] == 0.0


def test_hub_mbpp_sanitized(fake_hub: list[tuple]) -> None:
    task = CodeTask(source="hub", hub_id=MBPP, hub_config="sanitized", eval_fraction=1.0)
    problems = {p.id: p for p in task.problems("eval")}
    assert set(problems) == {"mbpp/2", "mbpp/3"} and problems["mbpp/3"].meta["setup"] == "import math"
    assert all(task.score(p, p.answer or "").rewards["all_pass"] == 1.0 for p in problems.values())


def test_hub_livecodebench(fake_hub: list[tuple]) -> None:
    task = CodeTask(source="hub", hub_id=LCB, eval_fraction=1.0)
    problems = {p.id: p for p in task.problems("eval")}
    assert fake_hub == [("json", (f"hf://datasets/{LCB}@main/test.jsonl",))]  # release_v1: the first file only
    assert set(problems) == {"lcb/abc300_a", "lcb/2999", "lcb/abc301_a"}

    plus = problems["lcb/abc300_a"]  # stdin tests, the private ones base64(zlib(pickle(json)))
    assert plus.meta["kind"] == "stdio" and plus.meta["inputs"] == ["1 2\n", "10 20\n", "-5 5\n"]
    assert "standard input" in task.messages(plus)[0]["content"]
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert task.score(plus, right).rewards["all_pass"] == 1.0
    wrong = task.check(plus, "```python\na, b = map(int, input().split())\nprint(a - b if a > 0 else a + b)\n```")
    assert wrong.score.rewards["pass_fraction"] == pytest.approx(1 / 3)
    assert wrong.feedback[0] == "input '1 2\\n': expected '3\\n', got '-1\\n'"
    half = problems["lcb/abc301_a"]
    assert task.score(half, "```python\nprint(f'{int(input()) / 2:.3f}')\n```").rewards["all_pass"] == 1.0

    average = problems["lcb/2999"]  # functional tests on a LeetCode-style class
    assert average.meta["kind"] == "function" and average.meta["target"] == "Solution().averageValue"
    assert "class Solution" in task.messages(average)[0]["content"]
    solution = (
        "```python\nclass Solution:\n    def averageValue(self, nums: List[int], k: int) -> List[float]:\n"
        "        return (round(sum(nums[:k]) / k, 2), len(nums))\n```"
    )  # a tuple counts as a list
    assert task.score(average, solution).rewards["all_pass"] == 1.0


def test_hub_livecodebench_versions_pick_files(fake_hub: list[tuple]) -> None:
    task = CodeTask(source="hub", hub_id=LCB, hub_config="release_v2", hub_revision=COMMIT, eval_fraction=1.0)
    assert {p.id for p in task.problems("eval")} == {"lcb/abc300_a", "lcb/2999", "lcb/abc301_a", "lcb/1850A"}
    assert fake_hub == [("json", tuple(f"hf://datasets/{LCB}@{COMMIT}/{f}" for f in ("test.jsonl", "test2.jsonl")))]
    only_v2 = CodeTask(source="hub", hub_id=LCB, hub_config="v2", eval_fraction=1.0)
    assert [p.id for p in only_v2.problems("eval")] == ["lcb/1850A"]
    with pytest.raises(ValueError, match="unknown LiveCodeBench version"):
        CodeTask(source="hub", hub_id=LCB, hub_config="v9").problems("eval")


@pytest.mark.parametrize(
    ("convert", "row", "message"),
    [
        (code_data.humaneval_problem, {"task_id": "HumanEval/0", "prompt": "def f():\n", "test": ""}, "'test'"),
        (code_data.humaneval_problem, ["not", "a", "row"], "expected an object"),
        (
            code_data.mbpp_problem,
            {"text": "Add.", "code": "def add(a, b): return a + b", "test_list": []},
            "'test_list'",
        ),
        (code_data.mbpp_problem, {"text": "Add.", "code": "x = 1", "test_list": ["assert True"]}, "which function"),
        (
            code_data.lcb_problem,
            {"question_content": "Q", "question_id": "1", "public_test_cases": "[{"},
            "unreadable test cases",
        ),
        (
            code_data.lcb_problem,
            {"question_content": "Q", "question_id": "1", "public_test_cases": "[]", "private_test_cases": "[]"},
            "no test cases",
        ),
    ],
)
def test_malformed_hub_rows_name_source_and_row(convert, row, message: str) -> None:
    with pytest.raises(ValueError) as error:
        convert(row, "hub x split test row 7")
    text = str(error.value)
    assert text.startswith("hub x split test row 7: ") and message in text and "\n" not in text


def test_livecodebench_pickles_may_hold_data_only() -> None:
    class Boom:
        def __reduce__(self):
            return (print, ("ran code while loading",))

    hostile = base64.b64encode(zlib.compress(pickle.dumps(Boom()))).decode()
    row = json.loads((FIXTURES / "code_generation_lite" / "test.jsonl").read_text().splitlines()[0])
    with pytest.raises(ValueError, match=r"^hub row 0: unreadable test cases: refusing to load builtins.print$"):
        code_data.lcb_problem({**row, "private_test_cases": hostile}, "hub row 0")


def test_hub_failure_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai_humaneval' on the Hub (LocalEntryNotFoundError)\nmore detail")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ValueError, match=r"^hub dataset 'openai_humaneval' .*Couldn't reach[^\n]*$"):
        CodeTask(source="hub", hub_id="openai_humaneval").problems("eval")


def test_the_stdio_crosscheck_set_reads_as_livecodebench_rows_and_scores_as_written() -> None:
    """tests/fixtures/code/stdio_crosscheck.jsonl, the project's stdin/stdout set that bench/humaneval_crosscheck.py
    --dataset stdio compares with LiveCodeBench's rule: every row is a valid LiveCodeBench row, and (a sample of it
    here; the bench runs all) its canonical solutions pass and its wrong ones fail through the code task."""
    rows = [json.loads(line) for line in (FIXTURES / "stdio_crosscheck.jsonl").read_text().splitlines()]
    problems = {r["question_id"]: code_data.lcb_problem(r, r["question_id"]) for r in rows}
    assert len(rows) >= 12 and all(p.meta["kind"] == "stdio" and len(p.meta["inputs"]) == 3 for p in problems.values())
    task = CodeTask(timeout_s=60)
    for row in rows:
        if row["question_id"] in ("vh_exit", "vh_average", "vh_spaces"):  # none loops until its timeout
            problem = problems[row["question_id"]]
            assert task.score(problem, f"```python\n{row['canonical_solution']}\n```").rewards["all_pass"] == 1.0
            for wrong in row["wrong_solutions"]:
                assert task.score(problem, f"```python\n{wrong}\n```").rewards["all_pass"] == 0.0, wrong
