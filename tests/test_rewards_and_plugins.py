"""Rewards and plugins without packaging, from a plain folder as a user has one: ``--reward mymodule:fn[=W]``
(harness/scoring/reward_functions.py) and ``--plugin ./file.py`` (harness/plugins/local.py), through the CLI on the tiny
model. Every mistake is one line; a reward function that raises mid-run fails the run as a failing plugin does."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from tiny_runs import tiny_argv

from harness.cli import main

RUN = tiny_argv("none", k=1, threads=None)

REWARDS = """
def brevity(prompt, completion, reference):
    return 1.0 / (1 + len(completion))

def mentions_reference(prompt, completion, reference):
    return reference is not None and reference in prompt + completion  # a bool counts as a number

def sulks(prompt, completion, reference):
    if completion:
        raise ZeroDivisionError("no answers today")
    return 0.0

def says_yes(prompt, completion, reference):
    return "yes"

def correct(prompt, completion, reference):
    return 1.0

def one_argument(completion):
    return 1.0

CALLS = []  # the batch sizes batch_brevity was called with

def batch_brevity(prompts, completions, **columns):  # TRL's form
    CALLS.append(len(completions))
    return [1.0 / (1 + len(c)) for c in completions]

def too_few(prompts, completions, **columns):
    return [0.0]  # right for one answer (the check before the model loads), wrong for a batch

def batch_words(completions, **columns):
    return ["many" for _ in completions]

NOT_A_FUNCTION = 3
"""

PLUGIN = '''
from harness.hookspecs import hookimpl
from harness.testing import FakeTask


class Doubles(FakeTask):
    """FakeTask's "What is i+i?" under its own name."""

    name = "doubles"


@hookimpl
def harness_register_tasks(registry):
    registry.add("doubles", Doubles, "doubling sums, from a local file")
'''


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A plain folder holding the user's modules, as the working directory; what importing them adds to sys.path and
    sys.modules is undone afterwards."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "myrewards.py").write_text(REWARDS)
    (work / "my_plugin.py").write_text(PLUGIN)
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in ("myrewards", "my_plugin", "plugin_module"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield work
    for name in ("myrewards", "my_plugin", "plugin_module"):
        sys.modules.pop(name, None)


def _run_folder(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def _samples(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------------------------------------------
# --reward
# ----------------------------------------------------------------------------------------------------------------


def test_reward_functions_become_weighted_components_of_the_reward_vector(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    assert (
        main([*RUN, "--reward", "myrewards:brevity=0.5", "--reward", "myrewards:mentions_reference", "--out", str(out)])
        == 0
    )
    run = _run_folder(out)
    samples = _samples(run)
    assert len(samples) == 4
    for s in samples:
        rewards = s["rewards"]
        assert list(rewards)[-2:] == ["brevity", "mentions_reference"]  # after the task's own components
        assert rewards["brevity"] == pytest.approx(1 / (1 + len(s["text"])))
        assert rewards["mentions_reference"] == float(s["reference"] in s["prompt"] + s["text"])
        # best@k's scalar: math's weights (correct 1, boxed 0.5, lenient_correct 0) plus brevity's 0.5 and 1
        by_hand = rewards["correct"] + 0.5 * rewards["boxed"] + 0.5 * rewards["brevity"] + rewards["mentions_reference"]
        assert s["scalar"] == pytest.approx(by_hand)
    metrics = json.loads((run / "metrics.json").read_text())
    mean = sum(1 / (1 + len(s["text"])) for s in samples) / len(samples)
    assert metrics["eval/mean_reward/brevity"] == pytest.approx(mean)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["rewards"] == ["myrewards:brevity=0.5", "myrewards:mentions_reference"]
    assert manifest["task"]["reward_weights"] == {
        "correct": 1.0,
        "boxed": 0.5,
        "lenient_correct": 0.0,
        "brevity": 0.5,
        "mentions_reference": 1.0,
    }
    first, second = manifest["task"]["reward_functions"]
    digest = hashlib.sha256((folder / "myrewards.py").read_bytes()).hexdigest()
    assert first == {
        "spec": "myrewards:brevity",
        "name": "brevity",
        "weight": 0.5,
        "file": str(folder / "myrewards.py"),
        "sha256": digest,
    }
    assert second["spec"] == "myrewards:mentions_reference" and second["weight"] == 1.0


def test_grpo_trains_on_a_reward_function(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    argv = tiny_argv(limit=1, train_limit=2, k=1, threads=None, no_save_model=True, sets={"searcher.n": 1})
    assert main([*argv, "--reward", "myrewards:brevity", "--out", str(out)]) == 0
    run = _run_folder(out)
    train = [s for s in _samples(run) if s["phase"] == "train"]
    assert len(train) == 2
    (step,) = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    mean = sum(1 / (1 + len(s["text"])) for s in train) / 2
    assert step["reward/brevity"] == pytest.approx(mean)
    assert all(s["rewards"]["brevity"] == pytest.approx(1 / (1 + len(s["text"]))) for s in train)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("myrewards", "expected MODULE:FUNCTION[=WEIGHT]"),
        ("nosuchmodule:fn", "cannot import 'nosuchmodule': ModuleNotFoundError"),
        ("myrewards:missing", "myrewards has no 'missing'"),
        ("myrewards:NOT_A_FUNCTION", "'NOT_A_FUNCTION' is a int, not a function"),
        ("myrewards:one_argument", "must take (prompt, completion, reference), or TRL's (prompts, completions"),
        (
            "myrewards:batch_words",
            "reward 'batch_words' (plugin 'myrewards:batch_words') failed while scoring problem 'gym-arith-",
        ),
        ("myrewards:batch_words", "TypeError: returned 'many' for completion 0, not a number"),
        ("myrewards:brevity=heavy", "the weight after '=' must be a number, got 'heavy'"),
        ("myrewards:correct", "task 'math' already has a component named correct"),
        ("myrewards:says_yes", "reward 'says_yes' (plugin 'myrewards:says_yes') failed while scoring problem"),
    ],
)
def test_a_reward_mistake_is_one_line_before_the_model_loads(
    folder: Path, tmp_path: Path, capsys, spec: str, message: str
) -> None:
    out = tmp_path / "runs"
    assert main([*RUN, "--reward", spec, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("harness: error: ") and message in line, line
    assert "loading model" not in captured.out and not out.exists()


def test_two_rewards_of_one_name_are_refused(folder: Path, tmp_path: Path, capsys) -> None:
    (folder / "other.py").write_text("def brevity(prompt, completion, reference):\n    return 0.0\n")
    assert main([*RUN, "--reward", "myrewards:brevity", "--reward", "other:brevity", "--out", str(tmp_path)]) == 2
    assert "two functions named brevity" in capsys.readouterr().err
    sys.modules.pop("other", None)


def test_a_reward_function_raising_mid_run_fails_the_run_as_a_plugin_does(folder: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs"
    assert main([*RUN, "--reward", "myrewards:sulks", "--out", str(out)]) == 1  # fine on "", raises on answers
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "harness: error" in line]
    assert "reward 'sulks' (plugin 'myrewards:sulks') failed while scoring problem 'gym-arith-" in line
    assert "ZeroDivisionError: no answers today" in line
    run = _run_folder(out)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "ZeroDivisionError" in manifest["error"]
    assert "no answers today" in (run / "error.txt").read_text()


def test_a_batch_reward_function_scores_each_batch_in_one_call(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    assert main([*RUN, "--reward", "myrewards:batch_brevity=0.5", "--out", str(out)]) == 0
    samples = _samples(_run_folder(out))
    assert len(samples) == 4
    assert all(s["rewards"]["batch_brevity"] == pytest.approx(1 / (1 + len(s["text"]))) for s in samples)
    # one call before the model loads (the empty answer), then the 2 problems x 2 answers of the eval together
    assert sys.modules["myrewards"].CALLS == [1, 4]


def test_a_batch_reward_returning_the_wrong_number_of_values_fails_the_run_naming_it(
    folder: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "runs"
    assert main([*RUN, "--reward", "myrewards:too_few", "--out", str(out)]) == 1  # started, then failed
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "harness: error" in line]
    assert "reward 'too_few' (plugin 'myrewards:too_few') failed while scoring 4 answers (" in line
    assert "ValueError: returned 1 values for 4 completions" in line
    assert json.loads((_run_folder(out) / "manifest.json").read_text())["status"] == "failed"


def test_reward_functions_keep_the_task_s_capabilities(folder: Path) -> None:
    """Code scores a batch at once (score_many) and gives feedback (check): both keep working, extended."""
    from harness.scoring.reward_functions import WithRewards, load_rewards
    from harness.tasks.code import CodeTask
    from harness.types import TaskCapabilities, capabilities_of

    fixtures = Path(__file__).parent / "fixtures" / "code" / "tiny.jsonl"
    task = WithRewards(
        CodeTask(source="jsonl", path=str(fixtures), eval_fraction=1.0, test_slots=1),
        load_rewards(["myrewards:brevity=0.25"]),
    )
    assert capabilities_of(task, TaskCapabilities) == CodeTask.capabilities
    assert task.reward_weights == {"all_pass": 1.0, "pass_fraction": 0.0, "test_0": 0.5, "brevity": 0.25}
    square = next(p for p in task.problems("eval") if p.id == "square")
    right, wrong = "```python\ndef square(x):\n    return x * x\n```", "```python\ndef square(x):\n    return x\n```"
    scores = task.score_many([square, square], [right, wrong])
    assert [s.rewards["all_pass"] for s in scores] == [1.0, 0.0]
    assert [s.rewards["brevity"] for s in scores] == [1 / (1 + len(right)), 1 / (1 + len(wrong))]
    checked = task.check(square, wrong)
    assert checked.feedback and checked.score.rewards["brevity"] == 1 / (1 + len(wrong))
    assert checked.result is not None  # code's own CodeCheck, not a bare Checked


def test_an_experiment_file_takes_rewards_and_they_name_the_cell(folder: Path, tmp_path: Path) -> None:
    from harness.runner.experiment_file import load_experiment
    from harness.runner.grid import cell_name, cells_for

    path = tmp_path / "exp.toml"
    path.write_text('rewards = ["myrewards:brevity=0.5"]\nplugins = ["./my_plugin.py"]\n')
    settings = load_experiment(path)
    (cell,) = cells_for(settings, {}, {"task": {}, "trainer": {}, "searcher": {}})
    assert cell.rewards == ["myrewards:brevity=0.5"] and cell.plugins == ["./my_plugin.py"]
    (plain,) = cells_for({"options": {}}, {}, {"task": {}, "trainer": {}, "searcher": {}})
    assert cell.name != plain.name and cell_name(plain) == plain.name
    path.write_text('rewards = "myrewards:brevity"\n')
    with pytest.raises(ValueError, match=r"exp.toml: rewards should be a list of strings"):
        load_experiment(path)


# ----------------------------------------------------------------------------------------------------------------
# --plugin
# ----------------------------------------------------------------------------------------------------------------


def test_a_plugin_file_s_task_is_listed_and_runs(folder: Path, tmp_path: Path, capsys) -> None:
    assert main(["list", "--plugin", "./my_plugin.py"]) == 0
    listed = capsys.readouterr().out
    assert re.search(r"^  doubles +doubling sums, from a local file  \[local:\./my_plugin\.py\]$", listed, re.M)
    out = tmp_path / "runs"
    assert main([*RUN, "--plugin", "./my_plugin.py", "--task", "doubles", "--out", str(out)]) == 0
    run = _run_folder(out)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["plugins"]["task"] == {"name": "doubles", "plugin": "local:./my_plugin.py"}
    assert manifest["plugins"]["local"] == [
        {
            "plugin": "local:./my_plugin.py",
            "path": str(folder / "my_plugin.py"),
            "sha256": hashlib.sha256(PLUGIN.encode()).hexdigest(),
        }
    ]
    assert manifest["task"]["name"] == "doubles" and manifest["config"]["plugins"] == ["./my_plugin.py"]
    assert {s["problem_id"] for s in _samples(run)} == {"add-0", "add-1"}  # FakeTask's problems, as Doubles'


def test_the_guide_s_plugin_works_from_its_file_without_installing(folder: Path, capsys) -> None:
    """docs/guide/write-a-plugin.md: `--plugin harness-echo/harness_echo.py` (the example's module, verbatim, not
    installed)."""
    readme = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "write-a-plugin.md").read_text()
    assert "--plugin harness-echo/harness_echo.py --task echo" in readme
    (module,) = re.findall(r"^`harness-echo/harness_echo\.py`:\n```python\n(.*?)^```", readme, re.S | re.M)
    (folder / "harness-echo").mkdir()
    (folder / "harness-echo" / "harness_echo.py").write_text(module)
    try:
        assert main(["list", "--plugin", "harness-echo/harness_echo.py"]) == 0
    finally:
        sys.modules.pop("harness_echo", None)
    assert re.search(
        r"^\s+echo\s+Repeat a word back\s+\[local:harness-echo/harness_echo\.py\]$", capsys.readouterr().out, re.M
    )


def test_a_plugin_module_importable_from_the_working_directory(folder: Path, capsys) -> None:
    (folder / "plugin_module.py").write_text(PLUGIN.replace('"doubles"', '"doubles-module"'))
    assert main(["list", "--plugin", "plugin_module"]) == 0
    assert "[local:plugin_module]" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--plugin ./broken.py: no such file"),
        ("import nothing_of_the_kind\n", "--plugin ./broken.py: importing it raised ModuleNotFoundError"),
        ("def oops(:\n", "--plugin ./broken.py: importing it raised SyntaxError"),
        (
            "from harness.hookspecs import hookimpl\n@hookimpl\ndef harness_register_task(registry):\n    pass\n",
            "--plugin ./broken.py: unknown hook(s) harness_register_task (misspelt?",
        ),
        ("def harness_register_tasks(registry):\n    pass\n", "--plugin ./broken.py: implements no hook"),
        (
            "from harness.hookspecs import hookimpl\n@hookimpl\ndef harness_register_tasks(registry):\n"
            "    registry.add('math', object)\n",
            "duplicate task 'math': registered by both 'builtin:harness.tasks' and 'local:./broken.py'",
        ),
        (
            "from harness.hookspecs import hookimpl\n@hookimpl\ndef harness_register_tasks(registry):\n"
            "    raise KeyError('x')\n",
            "plugin 'local:./broken.py': harness_register_tasks raised KeyError",
        ),
    ],
)
@pytest.mark.parametrize("command", [["list"], RUN])
def test_a_plugin_mistake_is_one_line(
    folder: Path, tmp_path: Path, capsys, content: str | None, message: str, command: list[str]
) -> None:
    if content is not None:
        (folder / "broken.py").write_text(textwrap.dedent(content))
    out = tmp_path / "runs"
    assert main([*command, "--plugin", "./broken.py", *(["--out", str(out)] if command == RUN else [])]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("harness: error: ") and message in line, line
    assert "loading model" not in captured.out and not out.exists()
    sys.modules.pop("broken", None)
