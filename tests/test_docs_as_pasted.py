"""Docs that failed as pasted, and the small fixes that came with them: the plugin page's package (a stray runs/
packaged instead of its module), the own-data page's one-row example (no eval problem, no hint; a reward that never
fired), TRL's `prompt` with only the answer mapped, VSPO and `harness steer` on tiny-random, VPO's warm-up that
never reached its stop rule, train and eval problems that overlap, exit codes, and the resume command an interrupt
prints."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from guide_blocks import GUIDE, page_blocks, write_file
from test_readme_plugin import readme_files
from tiny_runs import CEILING, foreground, harness, harness_env, only_run, tiny_argv

TINY = ["--model", "tiny-random", "--threads", "1"]


# -- the plugin page: its package holds its module, whatever lies beside it ----------------------------------------


def test_the_plugin_page_s_package_installs_its_module_beside_a_runs_folder(tmp_path):
    """Before: with a runs/ folder in harness-echo/ (left by the page's own `--plugin` commands, run there),
    setuptools' discovery packaged nothing of the module, pip said nothing, and `harness list` showed `broken plugin
    ... No module named 'harness_echo'`. The page's pyproject now names its module."""
    package = tmp_path / "harness-echo"
    (package / "runs" / "20261207-math-grpo-best-of-k").mkdir(parents=True)
    (package / "runs" / "20261207-math-grpo-best-of-k" / "manifest.json").write_text("{}")
    for name, text in readme_files().items():
        (package / name).write_text(text)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(package)],
        check=True,
        timeout=300,
    )
    assert (site / "harness_echo.py").is_file() and not (site / "runs").exists()


def test_a_package_installed_without_its_module_says_how_to_name_it():
    from importlib.metadata import EntryPoint

    from harness.plugins.manager import _missing_module_hint

    ep = EntryPoint(name="echo", value="harness_echo", group="harness")
    hint = _missing_module_hint(ep, ModuleNotFoundError("No module named 'harness_echo'", name="harness_echo"))
    assert 'py-modules = ["harness_echo"]' in hint
    assert _missing_module_hint(ep, ModuleNotFoundError("No module named 'numpyy'", name="numpyy")) == ""
    assert _missing_module_hint(ep, ImportError("cannot import name x")) == ""


# -- the own-data page: its data give eval problems, its reward fires; a run without eval problems says why -------


def _page_folder(tmp_path: Path, page: str) -> Path:
    """The page's Python blocks run (and its files written) in a folder, as a reader would."""
    folder = tmp_path / "page"
    folder.mkdir()
    for block in page_blocks(GUIDE / page):
        if block.file is not None:
            write_file(block, folder)
        elif block.lang == "python" and block.real_model_only is None:
            subprocess.run([sys.executable, "-c", block.code], cwd=folder, check=True, timeout=120)
    return folder


def test_the_own_data_page_s_dataset_has_eval_problems_and_its_batch_reward_fires(tmp_path, monkeypatch):
    from harness.plugins import get_plugin_manager

    folder = _page_folder(tmp_path, "own-data-and-rewards.md")
    task = (
        get_plugin_manager(autoload=False)["task"]
        .get("math")
        .load()(source="hub", hub_id=str(folder / "sums.parquet"), answer="solution")
    )  # the question unmapped: TRL's "prompt"
    evaluation, train = task.problems("eval"), task.problems("train")
    assert evaluation and train and not {p.id for p in evaluation} & {p.id for p in train}
    monkeypatch.syspath_prepend(str(folder))
    from myrewards import by_difficulty  # the page's function, on the page's rows

    difficulty = [p.columns["difficulty"] for p in train]
    values = by_difficulty([p.prompt for p in train], ["\\boxed{4}"] * len(train), difficulty)
    assert any(v > 0 for v in values) and any(v == 0 for v in values)  # "easy" rows earn it, "hard" ones do not
    sys.modules.pop("myrewards", None)


def test_a_one_row_file_says_why_it_gave_no_eval_problems(tmp_path, capsys):
    import datasets

    from harness.cli import main

    rows = [{"prompt": [{"role": "user", "content": "What is 4 + 4?"}], "solution": "8"}]
    datasets.Dataset.from_list(rows).to_parquet(tmp_path / "one.parquet")
    argv = ["run", *TINY, "--trainer", "none", "--out", str(tmp_path / "runs")]
    argv += ["--set", "task.source=hub", "--set", f"task.hub_id={tmp_path / 'one.parquet'}"]
    assert main([*argv, "--set", "task.answer=solution"]) == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("harness:")]  # bars aside
    assert "gave no eval problems: its data's 1 problem(s) are cut into train and eval by a hash" in line, line
    assert "give it more rows" in line and "task.eval_fraction" in line


def test_trl_s_prompt_is_read_when_only_the_answer_column_is_mapped():
    """`row()` lacked the fallback `check()` had: with task.answer mapped, a row without `problem` but with TRL's
    `prompt` was refused ("no column 'problem'")."""
    from harness.tasks.columns import Columns

    columns = Columns.build("math", {"answer": "solution"}, {"problem": "problem", "answer": "answer"})
    row = {"prompt": [{"role": "user", "content": "What is 4 + 4?"}], "solution": "8", "difficulty": "easy"}
    columns.check(row, "here")
    out = columns.row(row, "here row 0")
    assert out["answer"] == "8" and out["prompt"] == row["prompt"] and out["difficulty"] == "easy"
    assert columns.source_row(out) == row  # a batch reward function gets the data's own names back
    with pytest.raises(ValueError, match="no column 'problem'"):  # neither the field nor a prompt: still refused
        columns.row({"question": "x", "solution": "8"}, "here row 1")


# -- VSPO and `harness steer` on a model whose greedy answers are empty ------------------------------------------


def test_contrastive_pairs_sample_again_when_greedy_decoding_leaves_too_few():
    from harness.tasks.behaviours import conciseness
    from harness.teacher.rewrite import contrastive_pairs
    from harness.testing import FakeEngine

    class GreedyIsNewlines(FakeEngine):  # tiny-random: greedy decoding writes only newlines
        def generate(self, prompts, params, **kwargs):
            out = super().generate(prompts, params, **kwargs)
            if params.temperature == 0:
                for c in out:
                    c.text = "\n\n\n"
            return out

    behaviour = conciseness_behaviour()
    engine = GreedyIsNewlines(["Four, since two and two make four."])
    pairs = contrastive_pairs(engine, None, ["What is 2+2?", "What is 3+1?", "What is 1+1?"], behaviour)
    assert len(pairs.positive) == 3 and pairs.resampled == 3 and pairs.provenance()["resampled_pairs"] == 3
    assert [call[1].temperature for call in engine.calls] == [0, 0, 1.0, 1.0]
    assert pairs.teacher_calls == 12  # both rounds' rewrites are counted
    writes = FakeEngine(["Four, since two and two make four."])  # a model that writes text greedily: one round
    assert contrastive_pairs(writes, None, ["What is 2+2?", "What is 3+1?"], behaviour).resampled == 0
    assert len(writes.calls) == 2 and conciseness("Four.") >= 0


def conciseness_behaviour():
    from harness.plugins import get_plugin_manager

    return get_plugin_manager(autoload=False)["behaviour"].get("conciseness").load()


def test_vspo_builds_its_vector_in_the_run_on_tiny_random(tmp_path):
    """Before: `vspo: only 0 usable contrastive pairs from 16 problems` after the before-evaluation."""
    out = tmp_path / "runs"
    sets = {"searcher.n": 1, "trainer.vector_prompts": 4}
    done = harness(tiny_argv("vspo", limit=1, train_limit=None, k=1, out=out, sets=sets))  # the preset's train problems
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((only_run(out) / "manifest.json").read_text())["status"] == "complete"


def test_harness_steer_builds_a_vector_on_tiny_random(tmp_path):
    vector = tmp_path / "vectors" / "conciseness.safetensors"
    done = harness(
        [
            "steer",
            *TINY,
            "--behaviour",
            "conciseness",
            "--task",
            "math",
            "--out",
            str(vector),
            "--prompts",
            "4",
            "--eval-prompts",
            "2",
            "--max-new-tokens",
            "8",
        ]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert vector.is_file()


# -- VPO's format warm-up on a model that cannot learn the format ------------------------------------------------


def test_the_warm_up_takes_no_step_when_no_target_is_well_formed(tmp_path):
    """Before: `--steps 2` of VPO on tiny-random ran 7 minutes of warm-up: 48 SFT steps and 7 checks of 16
    rollouts, the rate at 0% throughout (a random model's text, in which the task reads no answer, is all its
    targets hold), so neither the target rate nor the plateau rule (which waits for a rate above 0) ever stopped it.
    Now the warm-up checks its targets against the stop rule's own test first, and with none well formed says so
    in one line and takes no step."""
    out = tmp_path / "runs"
    started = time.monotonic()
    done = harness(["run", *TINY, "--trainer", "vpo", "--steps", "2", "--limit", "2", "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 240  # minutes before; about 25 s on 2 busy cores
    skipped = [line for line in done.stderr.splitlines() if "format warm-up skipped" in line]
    assert len(skipped) == 1 and "none of its 16 targets is itself well formed" in skipped[0], done.stderr[-3000:]
    metrics = json.loads((only_run(out) / "metrics.json").read_text())
    assert metrics["warmup/steps"] == 0 and metrics["warmup/targets_well_formed"] == 0


def test_a_target_is_well_formed_by_the_stop_rule_s_own_test():
    from harness.testing import FakeTask
    from harness.trainers.format_warmup import WarmupPlan, well_formed_target
    from harness.trainers.sft import Example

    task = FakeTask()
    problem = task.problems("eval")[0]
    plan = WarmupPlan(
        m=2, delimiter="###", max_new_tokens=8, temperature=1.0, max_steps=8, check_every=4, target_rate=0.9,
        samples_per_problem=2, lr=1e-4, batch_size=2, micro_batch=2, seed=0,
    )  # fmt: skip

    def target(text: str) -> Example:
        return Example(problem, [], text, text.split("###"), [None])

    assert well_formed_target(task, target("it is 4\n###\nor 5"), plan)  # two answers, each read
    assert not well_formed_target(task, target("no number\n###\nnone here"), plan)  # the task reads nothing
    assert not well_formed_target(task, target("just 4"), plan)  # one answer where M is 2


# -- train and eval problems that overlap --------------------------------------------------------------------------

OVERLAPPING = """
from harness.hookspecs import hookimpl
from harness.types import Problem, Score


class Same:
    name, version, reward_weights = "same", "1", {"exact": 1.0}

    def problems(self, split, limit=None, seed=0):
        return [Problem(id=f"p{i}", prompt=f"Say {i}", answer=str(i)) for i in range(4)][:limit]

    def messages(self, problem):
        return [{"role": "user", "content": problem.prompt}]

    def score(self, problem, completion):
        return Score(rewards={"exact": float(completion.strip() == problem.answer)}, primary="exact")

    def data_source(self):
        return {"source": "same"}


@hookimpl
def harness_register_tasks(registry):
    registry.add("same", Same, "train and eval are one list")
"""


def test_a_task_whose_train_and_eval_problems_overlap_is_warned_about_in_one_line(tmp_path):
    (tmp_path / "same_plugin.py").write_text(OVERLAPPING)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--plugin",
            "./same_plugin.py",
            "--task",
            "same",
            "--model",
            "no-such-model",
            "--out",
            str(tmp_path / "runs"),
        ],
        cwd=tmp_path,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=CEILING,
    )
    warned = [line for line in done.stdout.splitlines() if "also among its" in line]
    assert warned == [
        "warning: task 'same': 4 of its 4 eval problems are also among its 4 train problems (e.g. 'p0'); the "
        "after-training figures measure them as trained on, not held out"
    ], done.stdout + done.stderr
    assert done.stdout.index(warned[0]) < done.stdout.index("loading model")  # said before the model loads


def test_disjoint_problems_give_no_warning():
    from harness.runner.plan import overlap_warning
    from harness.testing import FakeTask

    task = FakeTask()
    assert overlap_warning("fake", task.problems("eval"), task.problems("train")) == ""
    assert overlap_warning("fake", task.problems("eval"), []) == ""  # nothing trained on
    assert "1 of its" in overlap_warning("fake", task.problems("eval")[:3], task.problems("eval")[2:3])


# -- exit codes and the resume command -----------------------------------------------------------------------------


def test_exit_codes_tell_a_usage_error_from_a_failed_run():
    from harness.cli import exit_code
    from harness.failures import PluginFailed, RunFailed, mark_run_folder

    assert exit_code(ValueError("unknown option lrr")) == 2  # refused before anything ran, as argparse's own
    failed = PluginFailed("searcher 'x' failed while evaluating (eval): KeyError: 'votes'")
    mark_run_folder(failed, "runs/x")
    assert exit_code(failed) == 1  # the run had its folder: it started, then failed
    assert exit_code(RunFailed("1 of 2 grid cells failed")) == 1


def test_an_interrupted_run_prints_the_exact_command_that_resumes_it(tmp_path):
    """Before: "interrupted; everything written so far is kept in the run folder", naming neither."""
    from tiny_runs import RUN

    pause = tmp_path / "paused"
    out = tmp_path / "runs"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *RUN, "--out", str(out)],
        env=harness_env(HARNESS_PAUSE=f"checkpoint:2:{pause}"),  # in training, its first step checkpointed
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=foreground,  # ^C reaches it wherever the suite runs
    )
    deadline = time.monotonic() + CEILING
    while not pause.exists():
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    pause.unlink()  # the checkpoint's write goes on, then the interrupt ends the run
    _, err = process.communicate(timeout=CEILING)
    assert process.returncode == 130, err[-2000:]
    said = [line for line in err.splitlines() if line.startswith("harness:")]
    folder = only_run(out)
    assert len(said) == 1 and said[0].endswith(f"resume it with `harness run --resume {folder}`"), said
    command = re.search(r"`(harness run --resume [^`]+)`", said[0]).group(1).split()
    resumed = harness(command[1:])  # the printed command, as given
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads((folder / "manifest.json").read_text())["status"] == "complete"
