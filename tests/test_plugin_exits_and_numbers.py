"""Plugin code that ends the process: ``sys.exit(0)`` in a reward function ended a run with exit 0, and
``raise SystemExit('...')`` with exit 1 and no error line. Now ``SystemExit``, and a ``KeyboardInterrupt`` plugin code
raises itself, from a task, a reward function, a behaviour scorer or a logger is a plugin failure naming it (exit 1,
manifest ``failed``, one line), while a real ^C stays an interrupt (exit 130): harness/interrupts.py's handler
raises its own ``Interrupted``, which every guard lets through (harness/failures.py ``plugin_exit``).

Numbers are numbers: every value a plugin gives as a reward, a score's component or a behaviour's value goes through
one converter (harness/failures.py ``as_float``): numpy's scalars and one-element arrays, ``Decimal``, ``Fraction``
and bool are floats; an infinite value or one beyond a float's range is one line naming the plugin, and NaN (None)
stays "not applicable" as before."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from tiny_runs import CEILING, foreground, harness_env, only_run, tiny_argv

from harness.types import Problem, Score

PROBLEM = Problem(id="p1", prompt="What is 1+1?", answer="2")


# ----------------------------------------------------------------------------------------------------------------
# The one converter
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (0.5, 0.5),
        (-2, -2.0),
        (True, 1.0),
        (False, 0.0),
        (Fraction(1, 4), 0.25),
        (Fraction(10**400 + 1, 10**400), 1.0),  # huge terms, a small value
        (Decimal("0.125"), 0.125),
        (Decimal("-3"), -3.0),
        (np.float32(0.5), 0.5),
        (np.float16(0.25), 0.25),
        (np.float64(0.75), 0.75),
        (np.int64(7), 7.0),
        (np.uint8(255), 255.0),
        (np.bool_(True), 1.0),
        (np.bool_(False), 0.0),
        (np.array(0.5), 0.5),
        (np.array(True), 1.0),
        (np.array([0.75]), 0.75),
        (np.array([[0.5]]), 0.5),  # numpy 2 refuses float() of it
        (np.array([[[2]]], dtype=np.int32), 2.0),
    ],
    ids=lambda value: repr(value)[:40],
)
def test_every_kind_of_real_number_is_taken_as_a_float(value, expected):
    from harness.failures import as_float

    number = as_float(value)
    assert type(number) is float and number == expected


def test_a_torch_tensor_of_one_element_is_a_float():
    torch = pytest.importorskip("torch")
    from harness.failures import as_float

    assert as_float(torch.tensor(0.5)) == 0.5 and as_float(torch.tensor([[1.5]])) == 1.5
    with pytest.raises(TypeError, match=r"^returned Tensor of shape \(2,\), not one number$"):
        as_float(torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("value", [None, math.nan, float("nan"), np.nan, np.float32("nan"), Decimal("NaN")], ids=repr)
def test_none_and_nan_stay_not_applicable(value):
    from harness.failures import as_float

    assert math.isnan(as_float(value))


@pytest.mark.parametrize(
    "value, message",
    [
        (10**400, "returned an integer of 401 digits, beyond a float's range"),
        (-(10**400), "returned an integer of 401 digits, beyond a float's range"),
        (Decimal("1e400"), "returned Decimal('1E+400'), beyond a float's range"),
        (Fraction(10**400, 3), "beyond a float's range"),
        (math.inf, "returned inf, not a finite number (None: not applicable)"),
        (-math.inf, "returned -inf, not a finite number (None: not applicable)"),
        (np.float32("inf"), "returned np.float32(inf), not a finite number (None: not applicable)"),
        (np.array([[math.inf]]), "returned ndarray array([[inf]]), not a finite number (None: not applicable)"),
    ],
    ids=lambda value: repr(value)[:40],
)
def test_an_infinite_value_or_one_beyond_a_float_s_range_is_one_line(value, message):
    from harness.failures import as_float

    with pytest.raises(ValueError) as err:
        as_float(value)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "value, message",
    [
        ("0.5", "returned '0.5', not a number"),
        (b"1", "returned b'1', not a number"),
        ([0.5], "returned list [0.5], not a number"),
        ({"a": 1}, "returned dict {'a': 1}, not a number"),
        (1j, "returned complex 1j, not a number"),
        (np.array([0.5, 0.6]), "returned ndarray of shape (2,), not one number"),
        (np.array([]), "returned ndarray of shape (0,), not one number"),
        (np.array(["0.5"]), "returned ndarray array(['0.5'], dtype='<U3'), not a number"),
        (Decimal("sNaN"), "returned Decimal('sNaN'), not a number"),
    ],
    ids=lambda value: repr(value)[:40],
)
def test_what_is_no_real_number_is_one_line(value, message):
    from harness.failures import as_float

    with pytest.raises(TypeError) as err:
        as_float(value)
    assert str(err.value) == message


# ----------------------------------------------------------------------------------------------------------------
# Where plugins' numbers are read: reward functions, a task's Score, the plan's check, behaviours
# ----------------------------------------------------------------------------------------------------------------

NUMBERS = [np.float32(0.5), np.bool_(True), np.array(0.25), np.array([[0.5]]), Decimal("0.125"), Fraction(3, 4), True]
FLOATS = [0.5, 1.0, 0.25, 0.5, 0.125, 0.75, 1.0]


def test_a_reward_function_s_numbers_of_every_kind_are_floats():
    """Before: np.array([[0.5]]) failed the run ("returned ndarray ..., not a number")."""
    from harness.scoring.reward_functions import RewardFunction

    values = iter(NUMBERS)
    per_answer = RewardFunction("m:f", "f", 1.0, lambda prompt, completion, reference: next(values))
    got = per_answer.values([PROBLEM] * len(NUMBERS), ["x"] * len(NUMBERS))
    assert got == FLOATS and all(type(v) is float for v in got)
    takes = frozenset({"prompts", "completions"})
    batch = RewardFunction("m:g", "g", 1.0, lambda prompts, completions: list(NUMBERS), batch=True, takes=takes)
    got = batch.values([PROBLEM] * len(NUMBERS), ["x"] * len(NUMBERS))
    assert got == FLOATS and all(type(v) is float for v in got)


@pytest.mark.parametrize("value", [10**400, Decimal("1e400")], ids=repr)
def test_a_reward_beyond_a_float_s_range_fails_the_run_naming_the_function(value):
    """Before: 10**400 was an OverflowError ("int too large to convert to float")."""
    from harness.failures import PluginFailed
    from harness.scoring.reward_functions import RewardFunction, WithRewards
    from harness.testing import FakeTask

    huge = RewardFunction("m:huge", "huge", 1.0, lambda prompt, completion, reference: value)
    task = WithRewards(FakeTask(), [huge])
    with pytest.raises(PluginFailed) as err:
        task.score(PROBLEM, "2")
    line = str(err.value)
    assert line.startswith("reward 'huge' (plugin 'm:huge') failed while scoring problem 'p1': ValueError: returned ")
    assert line.endswith(", beyond a float's range") and "\n" not in line


class NumpyTask:
    """A task whose Score holds numpy's, Decimal's and Fraction's numbers, or whatever ``rewards`` says."""

    name, version, reward_weights = "numpy-task", "1", {"correct": 1.0, "style": 0.5}

    def __init__(self, rewards=None, exit_with=None):
        self.rewards = rewards or {"correct": np.float32(1.0), "style": Decimal("0.5"), "extra": Fraction(1, 4)}
        self.exit_with = exit_with

    def problems(self, split, limit=None, seed=0):
        return [PROBLEM]

    def messages(self, problem):
        return [{"role": "user", "content": problem.prompt}]

    def data_source(self):
        return {"source": "test"}

    def score(self, problem, completion):
        if self.exit_with is not None:
            raise self.exit_with
        return Score(rewards=dict(self.rewards), primary="correct", extracted="2")


def test_a_task_s_score_components_become_floats():
    """Before: a Score's np.float32 and Decimal went on as they were: samples.jsonl (json's default=str) held the
    string "1.0", not the number."""
    from harness.scoring.task_guard import GuardedTask

    score = GuardedTask(NumpyTask(), "numpy-task", "tests").score(PROBLEM, "2")
    assert score.rewards == {"correct": 1.0, "style": 0.5, "extra": 0.25}
    assert all(type(v) is float for v in score.rewards.values())
    assert json.loads(json.dumps(score.rewards, default=str)) == {"correct": 1.0, "style": 0.5, "extra": 0.25}
    assert score.success and score.extracted == "2"


@pytest.mark.parametrize(
    "value, said",
    [(math.inf, "returned inf as component 'style', not a finite number"), (10**400, "beyond a float's range")],
    ids=lambda value: repr(value)[:40],
)
def test_a_task_s_infinite_component_fails_that_answer_naming_the_task(value, said):
    """Before: an infinite component went on into the means. Now the answer is refused as one whose scorer raised
    (``ScoreFailed``: forgiven per answer, counted by ``tally``)."""
    from harness.failures import PluginFailed, ScoreFailed
    from harness.scoring.batch import score_all
    from harness.scoring.task_guard import GuardedTask

    task = GuardedTask(NumpyTask({"correct": 1.0, "style": value}), "numpy-task", "tests")
    with pytest.raises(ScoreFailed) as err:
        task.score(PROBLEM, "2")
    assert str(err.value).startswith("task 'numpy-task' (plugin 'tests') failed while scoring problem 'p1': ")
    assert said in str(err.value)
    task = GuardedTask(NumpyTask({"correct": 1.0, "style": value}), "numpy-task", "tests")
    with pytest.raises(PluginFailed, match="failed to score 1 of the 1 answers"):  # every answer lost: the run ends
        score_all(task, [(PROBLEM, "2")])


def test_the_plan_s_check_of_a_score_takes_every_kind_of_number():
    """Before: Decimal and numpy's bool_ were "not a finite number", and 10**400 an OverflowError out of the check."""
    from harness.plugins.contract import check_score

    assert check_score(NumpyTask({"correct": np.bool_(True), "style": Decimal("0.5")}), PROBLEM) == []
    (line,) = check_score(NumpyTask({"correct": 1.0, "style": 10**400}), PROBLEM)
    assert "reward 'style' is int " in line and line.endswith("not a finite number")
    (line,) = check_score(NumpyTask({"correct": math.nan, "style": 0.5}), PROBLEM)  # NaN: never in the primary
    assert "reward 'correct' is float nan" in line


def test_a_behaviour_s_value_is_a_float_and_nan_is_left_out():
    """Before: np.array([[0.5]]) from a behaviour scorer was lost (None) and NaN went into the mean."""
    from harness.searchers.best_of_k import _behaviour_score
    from harness.types import _unit

    assert _behaviour_score(lambda text, problem: np.array([[0.5]]), "x", PROBLEM) == 0.5
    assert _behaviour_score(lambda text, problem: Decimal("0.25"), "x", PROBLEM) == 0.25
    assert _behaviour_score(lambda text, problem: math.nan, "x", PROBLEM) is None
    assert _behaviour_score(lambda text, problem: math.inf, "x", PROBLEM) is None
    assert _unit(np.array([[0.5]])) == 0.5 and _unit(10**400) is None and _unit(math.inf) is None


# ----------------------------------------------------------------------------------------------------------------
# Plugin code ending the process, in process
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def cli_signals():
    """SIGINT and SIGTERM raise harness/interrupts.py's ``Interrupted``, as under the CLI, restored afterwards.
    (Not ``terminate_as_interrupt``: its watchdog would end this pytest process after a signal; no test here sends
    one in process, the CLI tests below do.)"""
    from harness.interrupts import _raise_interrupt

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in saved:
        signal.signal(s, _raise_interrupt)
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


@pytest.mark.parametrize(
    "raised, said",
    [
        (SystemExit(0), "SystemExit(0): plugin code may not end the process; raise an exception instead"),
        (SystemExit("bye"), "SystemExit('bye'): plugin code may not end the process"),
        (KeyboardInterrupt(), "KeyboardInterrupt() raised by plugin code, not by ^C"),
    ],
    ids=lambda value: repr(value)[:40],
)
def test_a_task_ending_the_process_is_a_plugin_failure_naming_it(cli_signals, raised, said):
    """Before: SystemExit went through every guard (and ended the CLI with its code); so did a KeyboardInterrupt,
    as if the user had pressed ^C. score_all does not forgive it as one answer: the run ends."""
    from harness.failures import PluginFailed
    from harness.scoring.batch import score_all
    from harness.scoring.task_guard import GuardedTask

    task = GuardedTask(NumpyTask(exit_with=raised), "numpy-task", "tests")
    caught = None
    try:  # not pytest.raises: a KeyboardInterrupt let through would stop the whole session, not fail this test
        score_all(task, [(PROBLEM, "2")])
    except BaseException as exc:
        caught = exc
    assert isinstance(caught, PluginFailed), repr(caught)
    line = str(caught)
    assert line.startswith("task 'numpy-task' (plugin 'tests') failed while scoring problem 'p1': ") and said in line
    assert caught.__cause__ is raised


def test_a_real_interrupt_passes_every_guard(cli_signals):
    """^C or SIGTERM (the handler's ``Interrupted``) stays an interrupt through blame and the task's guard; and where
    the CLI's handler is not installed (the Python API), every KeyboardInterrupt is taken as the user's."""
    from harness.failures import blame
    from harness.interrupts import Interrupted
    from harness.scoring.task_guard import GuardedTask

    with pytest.raises(Interrupted), blame("reward", "r", "m:r", "scoring"):
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # what ^C does in the reward function's code
    task = GuardedTask(NumpyTask(exit_with=Interrupted("signal SIGTERM")), "numpy-task", "tests")
    with pytest.raises(Interrupted):
        task.score(PROBLEM, "2")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a notebook
    with pytest.raises(KeyboardInterrupt) as err, blame("reward", "r", "m:r", "scoring"):
        raise KeyboardInterrupt
    assert type(err.value) is KeyboardInterrupt


def test_a_behaviour_scorer_ending_the_process_is_a_plugin_failure_naming_it():
    """Before: best-of-k's and evolve's "a scorer that raises loses its value" let SystemExit through, which ended
    the CLI with its code; now the behaviour is named and the run ends, where any other error still loses the value
    alone."""
    from harness.failures import PluginFailed
    from harness.hookspecs import hookimpl
    from harness.plugins import get_plugin_manager
    from harness.searchers.best_of_k import BestOfK, _behaviour_score
    from harness.searchers.evolve import _behaviour_scorers, _safe
    from harness.types import Behaviour

    def quits(text, problem):
        if text == "raise":
            raise ValueError("a scorer's own error")
        sys.exit(0)

    class Plugin:
        @hookimpl
        def harness_register_behaviours(self, registry):
            registry.add("quitter", Behaviour("quitter", quits, "towards", "away", "judge?"), "exits when scoring")

    plugins = get_plugin_manager(extra_plugins=(Plugin(),), autoload=False)
    searcher = BestOfK(n=1, k=1, behaviours="quitter", plugins=plugins)
    scorers, _ = _behaviour_scorers("quitter", plugins)
    for scored in (
        lambda text: _behaviour_score(searcher.behaviours["quitter"], text, PROBLEM),
        lambda text: _safe(scorers["quitter"], text, PROBLEM),
    ):
        assert scored("raise") is None
        caught = None  # not the first scorer's, should the second raise nothing
        try:  # not pytest.raises: what it lets through must fail this test, not end the session
            scored("x")
        except BaseException as exc:
            caught = exc
        assert isinstance(caught, PluginFailed), repr(caught)
        line = str(caught)
        assert line.startswith("behaviour 'quitter' (plugin '") and "scoring an answer: SystemExit(0)" in line


class Exiting:
    """A logger whose log() (or close()) calls sys.exit(0)."""

    name = "exiting"

    def __init__(self, run_dir, config, on="log"):
        self.on = on

    def log(self, metrics, step, stage):
        if self.on == "log":
            sys.exit(0)

    def close(self):
        if self.on == "close":
            sys.exit(0)


def test_a_logger_ending_the_process_ends_the_run_naming_it(tmp_path, capsys):
    """Before: its SystemExit went past the store's "drop a failing logger" (``except Exception``) and ended the
    process. Receiving an event: PluginFailed naming it; closing: one warning, as any close that fails."""
    from harness.failures import PluginFailed
    from harness.store.run_folder import RunStore

    store = RunStore(tmp_path, "run")
    store.attach_loggers([Exiting(store.dir, {})])
    with pytest.raises(PluginFailed) as err:
        store.update_metrics({"eval/pass@1": 0.5})
    line = str(err.value)
    assert line.startswith("logger 'exiting' (plugin '") and "failed while receiving log(): SystemExit(0)" in line
    store = RunStore(tmp_path, "run2")
    store.attach_loggers([Exiting(store.dir, {}, on="close")])
    store.update_metrics({"eval/pass@1": 0.5})
    store.close()
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith("warning: logger 'exiting': close() raised PluginFailed: ") and "SystemExit(0)" in warning


def test_a_logger_ending_the_process_as_it_starts_is_named(tmp_path):
    from harness.failures import PluginFailed
    from harness.hookspecs import hookimpl
    from harness.plugins import get_plugin_manager
    from harness.store.loggers import open_loggers

    class Plugin:
        @hookimpl
        def harness_register_loggers(self, registry):
            registry.add("quits", lambda run_dir, config: sys.exit("no"), "exits as it starts")

    registry = get_plugin_manager(extra_plugins=(Plugin(),), autoload=False)["logger"]
    with pytest.raises(
        PluginFailed, match=r"^logger 'quits' \(plugin '.*'\) failed while starting: SystemExit\('no'\)"
    ):
        open_loggers(["quits"], registry, tmp_path, {})


# ----------------------------------------------------------------------------------------------------------------
# Through the CLI, as a real process
# ----------------------------------------------------------------------------------------------------------------

REWARDS = """
import os, sys, time

CALLS = []


def mid_run():  # the first call is the check on an empty answer before the model loads; the next, the evaluation
    CALLS.append(1)
    return len(CALLS) > 1


def exits(prompt, completion, reference):
    if mid_run():
        sys.exit(0)
    return 0.0


def exits_saying(prompt, completion, reference):
    if mid_run():
        raise SystemExit("enough of this")
    return 0.0


def interrupts(prompt, completion, reference):
    if mid_run():
        raise KeyboardInterrupt
    return 0.0


def sleeps(prompt, completion, reference):
    if mid_run():
        open(os.environ["REWARD_STARTED"], "w").close()
        time.sleep(CEILING)
    return 0.0


CEILING = 300
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "rewards.py").write_text(REWARDS)
    return tmp_path


def _argv(work: Path, reward: str) -> list[str]:
    return [sys.executable, "-m", "harness", *tiny_argv("none", k=1), "--reward", reward, "--out", str(work / "runs")]


def _run(work: Path, reward: str) -> tuple[int, list[str], dict]:
    done = subprocess.run(
        _argv(work, reward), cwd=work, env=harness_env(), capture_output=True, text=True, timeout=CEILING
    )
    said = [line for line in done.stderr.splitlines() if line.startswith("harness:")]
    manifest = json.loads((only_run(work / "runs") / "manifest.json").read_text())
    return done.returncode, said, manifest


@pytest.mark.parametrize(
    "reward, raised",
    [
        ("exits", "SystemExit(0)"),  # before: exit 0, no line
        ("exits_saying", "SystemExit('enough of this')"),  # before: exit 1, "enough of this" alone
        ("interrupts", "KeyboardInterrupt()"),  # before: exit 130, "interrupted; ... resume it"
    ],
)
def test_a_reward_function_ending_the_process_fails_the_run_naming_it(work, reward, raised):
    code, said, manifest = _run(work, f"rewards:{reward}")
    assert code == 1, said
    (line,) = said
    assert line.startswith(f"harness: error: reward '{reward}' (plugin 'rewards:{reward}') failed while scoring ")
    assert raised in line
    assert manifest["status"] == "failed" and raised in manifest["error"]


def test_a_real_interrupt_while_a_reward_function_runs_is_still_an_interrupt(work):
    started = work / "started"
    process = subprocess.Popen(
        _argv(work, "rewards:sleeps"),
        cwd=work,
        env=harness_env(REWARD_STARTED=str(started)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=foreground,  # ^C reaches it wherever the suite runs
    )
    try:
        deadline = time.monotonic() + CEILING
        while not started.exists():
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=CEILING)
    finally:
        if process.poll() is None:
            process.kill()
    said = [line for line in err.splitlines() if line.startswith("harness:")]
    folder = only_run(work / "runs")
    assert process.returncode == 130 and said == [
        f"harness: error: interrupted; everything written so far is kept in {folder}; resume it with "
        f"`harness run --resume {folder}`"
    ], err[-2000:]
    assert json.loads((folder / "manifest.json").read_text())["status"] == "interrupted"
