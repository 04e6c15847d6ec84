"""A task plugin's mistakes are named (harness/scoring/task_guard.py, harness/plugins/contract.py ``check_score``): a
scorer returning a plain float is refused before the model loads, a run whose answers mostly fail to score ends
``failed``, an error inside the task's method names the task rather than the trainer that called it, and a missing data
file names the task. Through the CLI in fresh processes on the tiny model, and the pieces in process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import CEILING, harness_env, tiny_argv

from harness import testing
from harness.failures import PluginFailed, ScoreFailed
from harness.plugins import contract
from harness.scoring.batch import score_all
from harness.scoring.task_guard import GuardedTask
from harness.testing import FakeTask
from harness.types import Score

PLUGIN = '''
from harness.hookspecs import hookimpl
from harness.testing import FakeTask


class Floaty(FakeTask):
    """Returns the reward alone, a plain float."""

    def score(self, problem, completion):
        return float(problem.answer in completion)


class Picky(FakeTask):
    """Scores its reference and the empty answer; raises on anything a model writes."""

    def score(self, problem, completion):
        if completion not in ("", problem.answer):
            raise KeyError("no idea")
        return super().score(problem, completion)


class EmptyTrain(FakeTask):
    """Raises on an empty answer to a train problem: what GRPO scores to learn the reward's components."""

    def score(self, problem, completion):
        if not completion and int(problem.id.split("-")[1]) >= self.size:
            raise KeyError("empty")
        return super().score(problem, completion)


@hookimpl
def harness_register_tasks(registry):
    registry.add("floaty", Floaty, "scores a float")
    registry.add("picky", Picky, "raises on real answers")
    registry.add("empty-train", EmptyTrain, "raises on an empty train answer")
'''

TINY = tiny_argv(train_limit=2, k=1, no_save_model=True, out="runs")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "tasks_plugin.py").write_text(PLUGIN)
    return tmp_path


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=CEILING,
    )


def _error(done: subprocess.CompletedProcess) -> str:
    (line,) = [line for line in done.stderr.splitlines() if "harness: error:" in line]
    return line.split("harness: error: ", 1)[1]


def test_a_task_scoring_a_plain_float_is_refused_before_the_model_loads(work: Path) -> None:
    done = _cli([*TINY, "--plugin", "./tasks_plugin.py", "--task", "floaty"], work)
    assert done.returncode == 2
    assert _error(done) == (
        "task 'floaty' (plugin 'local:./tasks_plugin.py') does not follow the Task protocol: "
        "score(problem 'add-0', its reference answer) returned float 1.0, not a Score"
    )
    assert "loading model" not in done.stdout and not (work / "runs").exists()


def test_a_run_whose_answers_mostly_fail_to_score_ends_failed_naming_the_task(work: Path) -> None:
    done = _cli([*TINY, "--plugin", "./tasks_plugin.py", "--task", "picky"], work)
    assert done.returncode == 1  # a run that started and failed (2: refused before it ran)
    assert _error(done).startswith(
        "task 'picky' (plugin 'local:./tasks_plugin.py') failed to score 4 of the 4 "
        "answers scored so far (the first: KeyError: 'no idea')"
    )
    (run,) = (work / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"].startswith("task 'picky'")
    assert "KeyError: 'no idea'" in (run / "error.txt").read_text()  # the scorer's own traceback


def test_a_task_raising_inside_grpo_is_named_not_grpo(work: Path) -> None:
    done = _cli([*TINY, "--plugin", "./tasks_plugin.py", "--task", "empty-train"], work)
    assert done.returncode == 1  # a run that started and failed
    line = _error(done)
    assert re.match(
        r"task 'empty-train' \(plugin 'local:\./tasks_plugin\.py'\) failed while scoring problem "
        r"'add-\d+': KeyError: 'empty'$",
        line,
    ), line
    assert "grpo" not in line
    (run,) = (work / "runs").iterdir()
    assert json.loads((run / "manifest.json").read_text())["status"] == "failed"


def test_a_missing_data_file_names_the_task(work: Path) -> None:
    done = _cli([*TINY, "--set", "task.source=jsonl", "--set", "task.path=nope.jsonl"], work)
    assert done.returncode == 2
    assert _error(done).startswith(
        "task 'math' (plugin 'builtin:harness.tasks') failed while loading its eval "
        "problems: ValueError: nope.jsonl: cannot read: [Errno 2]"
    )
    assert "loading model" not in done.stdout


# -- in process ---------------------------------------------------------------------------------------------------


class _Flaky(FakeTask):
    """Raises on the answers listed in ``bad``."""

    def __init__(self, bad: set[str]) -> None:
        super().__init__(size=4)
        self.bad = bad

    def score(self, problem: object, completion: str) -> Score:
        if completion in self.bad:
            raise ValueError(f"cannot read {completion!r}")
        return super().score(problem, completion)


def test_one_answer_failing_is_forgiven_most_failing_ends_the_run() -> None:
    task = GuardedTask(_Flaky({"x"}), "flaky", "local:flaky")
    problems = task.problems("eval")
    results = score_all(task, [(problems[0], "x"), *((p, "4") for p in problems[1:])])
    assert isinstance(results[0], ScoreFailed) and all(isinstance(r, Score) for r in results[1:])
    assert (
        str(results[0]) == "task 'flaky' (plugin 'local:flaky') failed while scoring problem 'add-0': "
        "ValueError: cannot read 'x'"
    )
    score_all(task, [(problems[0], "x"), (problems[1], "x"), (problems[2], "4")])  # 3 failed of 7: fine
    with pytest.raises(
        PluginFailed,
        match=r"^task 'flaky' \(plugin 'local:flaky'\) failed to score 5 of the 9 "
        r"answers scored so far \(the first: ValueError: cannot read 'x'\)",
    ):
        score_all(task, [(problems[0], "x"), (problems[1], "x")])


def test_the_guard_names_the_task_for_a_non_score_and_for_its_other_methods() -> None:
    class Broken(FakeTask):
        def score(self, problem, completion):
            return 0.5

        def messages(self, problem):
            raise KeyError("template")

    task = GuardedTask(Broken(size=2), "broken", "dist:broken")
    (problem, _) = task.problems("eval")
    with pytest.raises(
        ScoreFailed,
        match=r"^task 'broken' \(plugin 'dist:broken'\) failed while scoring problem "
        r"'add-0': returned float 0.5, not a Score$",
    ):
        task.score(problem, "4")
    with pytest.raises(
        PluginFailed,
        match=r"^task 'broken' \(plugin 'dist:broken'\) failed while writing the prompt "
        r"of problem 'add-0': KeyError: 'template'$",
    ):
        task.messages(problem)


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (lambda p, c: 1.0, "score(problem 'add-0', its reference answer) returned float 1.0, not a Score"),
        (
            lambda p, c: Score({"correct": 1.0}, "correct"),
            "score(problem 'add-0', its reference answer) gave no 'format', which reward_weights names (its rewards: "
            "correct)",
        ),
        (
            lambda p, c: Score({"correct": float("nan"), "format": 1.0}, "correct"),
            "score(problem 'add-0', its reference answer): reward 'correct' is float nan, not a finite number",
        ),
        (
            lambda p, c: Score({"correct": 1.0, "format": 1.0}, "right"),
            "score(problem 'add-0', its reference answer): its primary 'right' is not one of its rewards",
        ),
        (lambda p, c: {}["x"], "score(problem 'add-0', its reference answer) raised KeyError: 'x'"),
    ],
)
def test_check_score_and_check_task_catch_a_wrong_score(score, expected: str) -> None:
    task = FakeTask(size=2)
    task.score = score
    assert contract.check_score(task, task.problems("eval")[0]) == [expected]
    with pytest.raises(AssertionError, match="does not follow the Task protocol"):
        testing.check_task(task)


@pytest.mark.parametrize("name", ["math", "maze", "persona", "rg:leg_counting"])
def test_builtin_tasks_score_their_own_reference(plugins, name: str) -> None:
    task = plugins["task"].get(name).create()
    assert contract.check_score(task, task.problems("eval", limit=1)[0]) == []
