"""RunConfig is the one source of `harness run`'s settings: each field declares its flag (or that it has none), its
help, and whether it names a grid cell or changes the work; the parser, the flags -> RunConfig mapping, the cell's
identity (grid.NOT_IN_IDENTITY) and the measured defaults (expected_time.WORK) are all read from the fields."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from harness import cli
from harness.cli import build_parser, main
from harness.runner import expected_time, grid, run_settings
from harness.runner.config import (
    Flag,
    RunConfig,
    add_flags,
    field_names,
    flag,
    flag_of,
    given_settings,
    option_string,
)

# What grid.NOT_IN_IDENTITY and expected_time.WORK listed by hand before the fields declared it (old run folders
# are named by the identity: these must stay out of it, or every grid's cells would be run again)
NOT_IN_IDENTITY_BEFORE = {
    "out",
    "threads",
    "name",
    "loggers",
    "checkpoint_every",
    "engine_url",
    "engine_weights_dir",
    "save_model",
    "push_to_hub",
    "batch_size",
    "save_every",
    "shard",
    "eval_every",
    "eval_every_limit",
    "log_completions_every",
}
WORK_BEFORE = {
    "model",
    "preset",
    "steps",
    "limit",
    "train_limit",
    "k",
    "dtype",
    "rollout_dtype",
    "engine",
    "batch_size",
    "rewards",
    "model_revision",
}
# `harness run`'s flags that are no field: what to run (a file, its sizes and arms, a folder to resume), --set
# (which fills `options`), and the flags every command takes
NOT_FIELDS = {"--config", "--size", "--arm", "--resume", "--set", "--debug", "--quiet", "--help"}


def _run_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices["run"]


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings if s.startswith("--")}


def test_every_field_is_a_run_flag_or_declared_file_only():
    actions = _actions(_run_parser())
    for f in dataclasses.fields(RunConfig):
        spec = flag_of(f)
        assert isinstance(spec, Flag) and spec.help.strip(), f.name
        if spec.cli:
            action = actions.get(option_string(f))
            assert action is not None, f"{f.name}: no flag {option_string(f)} in `harness run`"
            assert (action.dest, action.help, action.default) == (f.name, spec.help, None), f.name
        else:
            assert all(a.dest != f.name or s == "--arm" for s, a in actions.items()), f.name
    assert set(field_names(cli=False)) == {"options", "name", "arm"}
    # every other flag of `harness run` is a field's, generated
    generated = {option_string(f) for f in dataclasses.fields(RunConfig) if flag_of(f).cli}
    assert set(actions) - generated == NOT_FIELDS | {"--no-save-model"}


def test_a_field_declared_without_flag_is_refused():
    @dataclasses.dataclass
    class Bare(RunConfig):
        extra: int = 0

    with pytest.raises(TypeError, match="'extra' is declared without flag"):
        add_flags(argparse.ArgumentParser(), Bare)


def test_each_flag_given_reaches_the_settings_and_none_given_is_none():
    run_p = _run_parser()
    assert given_settings(run_p.parse_args([])) == {}  # a file's values stay unless a flag is given
    for f in dataclasses.fields(RunConfig):
        spec = flag_of(f)
        if spec.cli:
            text = spec.choices[0] if spec.choices else "2"
            args = run_p.parse_args([option_string(f)] if f.type == "bool" else [option_string(f), text])
            assert getattr(args, f.name) not in (None, "", []), f.name
            assert given_settings(args) == {f.name: getattr(args, f.name)}, f.name


def test_flags_keep_their_conversions():
    run_p = _run_parser()
    args = run_p.parse_args(["--steps", "3", "--seed", "0,1", "--batch-size", "8", "--no-save-model", "--log", "x"])
    assert (args.steps, args.seed, args.batch_size, args.save_model, args.loggers) == (3, "0,1", "8", False, "x")
    with pytest.raises(SystemExit):
        run_p.parse_args(["--steps", "many"])
    with pytest.raises(SystemExit):
        run_p.parse_args(["--dtype", "float64"])
    assert run_p.parse_args(["--reward", "a:f", "--reward", "b:g"]).rewards == ["a:f", "b:g"]


def test_identity_and_work_are_read_from_the_fields():
    declared = {f.name: flag_of(f) for f in dataclasses.fields(RunConfig)}
    assert set(grid.NOT_IN_IDENTITY) == {name for name, spec in declared.items() if not spec.identity}
    assert set(expected_time.WORK) == {name for name, spec in declared.items() if spec.work}
    assert set(grid.NOT_IN_IDENTITY) == NOT_IN_IDENTITY_BEFORE
    assert set(expected_time.WORK) == WORK_BEFORE | {"options"}  # options were checked apart before


def test_work_and_identity_follow_the_declarations():
    cfg = RunConfig()
    assert expected_time.at_defaults(cfg)
    assert not expected_time.at_defaults(dataclasses.replace(cfg, steps=3))
    assert not expected_time.at_defaults(dataclasses.replace(cfg, options={**cfg.options, "trainer": {"lr": "1"}}))
    assert expected_time.at_defaults(dataclasses.replace(cfg, options={**cfg.options, "engine": {}}))
    assert expected_time.at_defaults(dataclasses.replace(cfg, threads=3))  # not declared work
    assert grid.cell_name(dataclasses.replace(cfg, threads=3)) == grid.cell_name(cfg)
    assert grid.cell_name(dataclasses.replace(cfg, steps=3)) != grid.cell_name(cfg)


@dataclasses.dataclass
class Extended(RunConfig):
    """RunConfig with settings added the one way a setting is added: a field declaring its flag."""

    warmup_steps: int | None = flag(None, work=True, help="steps of warm-up before the first update")
    tags: list[str] = flag(  # noqa: RUF009 (flag() is dataclasses.field())
        default_factory=list, identity=False, option="--tag", metavar="TAG", help="a label"
    )
    fast: bool = flag(False, help="go fast")


def test_a_new_field_is_a_flag_and_reaches_the_run_from_the_command_line(monkeypatch, capsys):
    monkeypatch.setattr(cli, "RunConfig", Extended)
    monkeypatch.setattr(run_settings, "RunConfig", Extended)  # the run settings are built there
    run_p = _run_parser()
    help_text = run_p.format_help()
    assert "--warmup-steps WARMUP_STEPS" in help_text and "--tag TAG" in help_text and "--fast, --no-fast" in help_text
    assert "steps of warm-up before the first update" in help_text
    ran: list[RunConfig] = []
    monkeypatch.setattr("harness.run.run", lambda cfg: ran.append(cfg))
    argv = ["run", "--model", "tiny-random", "--warmup-steps", "3", "--tag", "a", "--tag", "b", "--fast"]
    assert main(argv) == 0, capsys.readouterr().err
    (cfg,) = ran
    assert isinstance(cfg, Extended)
    assert (cfg.warmup_steps, cfg.tags, cfg.fast, cfg.model) == (3, ["a", "b"], True, "tiny-random")
    # and it joins the cell's identity as declared: warm-up names the cell, the tags do not
    base = Extended()
    assert grid.cell_name(dataclasses.replace(base, warmup_steps=3)) != grid.cell_name(base)
    assert grid.cell_name(dataclasses.replace(base, tags=["x"])) == grid.cell_name(base)
    with pytest.raises(SystemExit):  # typed from the field: int
        main(["run", "--warmup-steps", "soon"])
    assert "--warmup-steps: invalid int value" in capsys.readouterr().err


def test_the_generated_flags_keep_the_order_of_harness_run_help():
    order = [s for a in _run_parser()._actions for s in a.option_strings if s.startswith("--") and s != "--help"]
    assert order[:3] == ["--debug", "--quiet", "--task"]
    assert order.index("--resume") == order.index("--out") + 1
    shard = order.index("--shard")
    assert order[shard + 1 : shard + 5] == ["--config", "--size", "--arm", "--threads"]
    assert order[-3:] == ["--set", "--reward", "--plugin"]


def test_resume_takes_the_output_flags_and_names_the_others_as_typed(monkeypatch, capsys):
    resumed = []
    monkeypatch.setattr("harness.run.resume", lambda run_dir, threads=None: resumed.append((run_dir, threads)))
    assert main(["run", "--resume", "runs/x", "--quiet", "--threads", "2"]) == 0  # how it runs, not what it runs
    assert resumed == [("runs/x", 2)]
    assert main(["run", "--resume", "runs/x", "--log", "tensorboard", "--set", "trainer.lr=1"]) == 2
    err = capsys.readouterr().err
    assert "drop --log, --set" in err and "--loggers" not in err
