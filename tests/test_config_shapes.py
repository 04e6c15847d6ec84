"""An experiment file's value of the wrong type is one line naming its key (harness/runner/experiment_file.py checks
each setting against its RunConfig field's type; a plugin option's value is typed by the converter, which names the
option). Found with the command line as a real process: `task: 7` in a YAML file passed to `harness run --config`
was a traceback (AttributeError: 'int' object has no attribute 'partition')."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[1]

# (the file's text, its suffix, the key the line must name, what it must say)
SHAPES = [
    ("task: 7", "yaml", "task", "task should be a name or a list of names, got 7"),
    ("task: [math, 7]", "yaml", "task", "task: a list of names holds 7"),
    ("task: []", "yaml", "task", "task should be a name or a list of names, got []"),
    ("trainer: {grpo: 1}", "yaml", "trainer", "trainer should be a name or a list of names"),
    ("seed: [[1]]", "yaml", "seed", "seed should be an integer or a list of integers, got [[1]]"),
    ("seed: true", "yaml", "seed", "seed should be an integer or a list of integers, got True"),
    ("seed: 1.5", "yaml", "seed", "seed should be an integer or a list of integers, got 1.5"),
    ('steps: "many"', "yaml", "steps", "steps should be an integer, got 'many'"),
    ("steps: {a: 1}", "yaml", "steps", "steps should be an integer, got {'a': 1}"),  # a mapping for a number
    ("limit: [4]", "yaml", "limit", "limit should be an integer, got [4]"),
    ("eval_every: {a: 1}", "yaml", "eval_every", "eval_every should be an integer"),
    ("batch_size: [8]", "yaml", "batch_size", "batch_size should be a positive integer"),
    ("model: [a, b]", "yaml", "model", "model should be a string, got ['a', 'b']"),  # a list for a string
    ("engine: {a: 1}", "yaml", "engine", "engine should be a string"),
    ("model:", "yaml", "model", "model has no value"),
    ("save_model: 3", "yaml", "save_model", "save_model should be true or false, got 3"),
    ("k: {a: 1}", "yaml", "k", "k should be a list of integers or a string like 1,4,16"),
    ("checkpoint_every: [1]", "yaml", "checkpoint_every", "checkpoint_every should be steps (an integer) or minutes"),
    ("rewards: 5", "yaml", "rewards", "rewards should be a list of strings, got 5"),
    ("plugins: [1]", "yaml", "plugins", "plugins should be a list of strings, got [1]"),
    ("set: 5", "yaml", "set", "'set' must hold tables named task, trainer or searcher, got 5"),
    ("set: [trainer]", "yaml", "set", "'set' must hold tables named task, trainer or searcher"),
    ("set: {engine: {}}", "yaml", "set", "'set' must hold tables named task, trainer or searcher, not 'engine'"),
    ("set: {trainer: 5}", "yaml", "set.trainer", "set.trainer should be a table of options (KEY = VALUE), got 5"),
    ("set: {trainer: {1: 2}}", "yaml", "set.trainer", "set.trainer: an option's name should be a string, got 1"),
    ("arm: 3", "yaml", "arm", "'arm' must be [[arm]] tables, each with a name and a trainer, got 3"),
    ("arm: [{name: a, trainer: [grpo]}]", "yaml", "trainer", "arm 1 (a): 'trainer' must name a trainer"),
    ("arm: [{name: a, trainer: grpo, steps: many}]", "yaml", "steps", "arm 1 (a): steps should be an integer"),
    ("arm: [{name: a, trainer: grpo, set: {trainer: 5}}]", "yaml", "set.trainer", "set.trainer should be a table"),
    ("size: 5", "yaml", "size", "'size' must hold tables of settings"),
    ("size: {cpu: {steps: [1]}}", "yaml", "steps", "[size.cpu]: steps should be an integer, got [1]"),
    ("[1, 2]", "yaml", "top level", "expected a table of settings at the top level"),
    # a plugin option's value: typed by the converter when the grid's cells are checked, naming the option
    ("set: {trainer: {group_size: {a: 1}}}", "yaml", "group_size", "option group_size={'a': 1}: expected int"),
    ("set: {trainer: {group_size: true}}", "yaml", "group_size", "option group_size=True: expected int"),
    ("set: {searcher: {temperature: [1]}}", "yaml", "temperature", "option temperature=[1]: expected float"),
    ("set: {trainer: {behaviour: {a: 1}}}", "yaml", "behaviour", "option behaviour={'a': 1}: expected str"),
    ("set: {trainer: {group_size: 1.0e+12}}", "yaml", "group_size", "group_size=1000000000000.0 is out of its bounds"),
    # the same through TOML
    ("task = 7", "toml", "task", "task should be a name or a list of names, got 7"),
    ("seed = [[1]]", "toml", "seed", "seed should be an integer or a list of integers, got [[1]]"),
    ("model = 2024-01-01", "toml", "model", "model should be a string"),
    ("[set]\ntrainer = 5", "toml", "set.trainer", "set.trainer should be a table of options"),
    ("[set.trainer]\nlr = {a = 1}", "toml", "lr", "option lr={'a': 1}: expected float"),
]


@pytest.fixture
def no_model_load(monkeypatch):
    """Every shape here is refused before a model loads: loading one fails the test."""
    from transformers import AutoModelForCausalLM

    def refuse(*_, **__):
        raise AssertionError("the model was loaded before the file was refused")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)


@pytest.mark.parametrize(("text", "suffix", "key", "expected"), SHAPES, ids=[f"{s[1]}:{s[0]}" for s in SHAPES])
def test_a_value_of_the_wrong_type_is_one_line_naming_its_key(
    text, suffix, key, expected, tmp_path, capsys, no_model_load
):
    path = tmp_path / f"experiment.{suffix}"
    path.write_text(text + "\n")
    assert main(["run", "--config", str(path), "--model", "tiny-random", "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and key in err[0], err
    assert "Traceback" not in err[0] and not list(tmp_path.glob("runs/*/manifest.json"))


def test_task_7_in_a_yaml_file_is_one_line_from_the_command(tmp_path):
    """The finding as the user met it: `harness run --config file.yaml` with `task: 7`, a real process."""
    path = tmp_path / "experiment.yaml"
    path.write_text("task: 7\ntrainer: none\n")
    result = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--config", str(path), "--model", "tiny-random"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"harness: error: {path}: task should be a name or a list of names, got 7"
    ], result.stderr
    assert not (tmp_path / "runs").exists()
