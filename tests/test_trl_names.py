"""TRL's GRPOConfig names, understood (trainers/trl_names.py, harness/plugins/aliases.py): every alias resolves to
the harness's option, every refused name says its equivalent in one line, a known TRL name never gets a "did you
mean" for a different knob, and the table in docs/reference/trl-options.md is the code's (docs/generate.py)."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from docs_generator import generate

from harness.cli import main
from harness.plugins.aliases import resolve_aliases
from harness.plugins.options import build_plugin, closest, make_config
from harness.plugins.registry import PluginError
from harness.runner.config import RunConfig
from harness.runner.plan import build_plugins
from harness.trainers.grpo import GRPOConfig
from harness.trainers.trl_names import TRL_GRPO_ALIASES

FIELDS = {f.name: f for f in dataclasses.fields(GRPOConfig)}
SAMPLE = {  # a valid value per target option, as --set text
    "lr": "1e-5",
    "lr_scheduler": "linear",
    "steps": "3",
    "group_size": "4",
    "max_new_tokens": "16",
    "eps_low": "0.25",
    "eps_high": "0.28",
    "mask_truncated": "true",
    "tis_cap": "3.0",
}


def _grpo(options):
    return make_config(GRPOConfig, options, "grpo", aliases=TRL_GRPO_ALIASES)


def test_every_alias_sets_options_the_trainer_has():
    for alias in TRL_GRPO_ALIASES:
        assert alias.name not in FIELDS, f"{alias.name} is an option of its own: it needs no alias"
        if alias.target:
            assert alias.target in FIELDS, alias.name
        for value, result in alias.values.items():
            if not isinstance(result, str):
                assert set(result) <= set(FIELDS), (alias.name, value)


@pytest.mark.parametrize("alias", [a for a in TRL_GRPO_ALIASES if a.target], ids=lambda a: a.name)
def test_every_renamed_alias_resolves(alias):
    config = _grpo({alias.name: SAMPLE[alias.target]})
    default = FIELDS[alias.target].default
    assert getattr(config, alias.target) == type(default)(
        SAMPLE[alias.target] if not isinstance(default, bool) else SAMPLE[alias.target] == "true"
    )


@pytest.mark.parametrize(
    ("alias", "value"),
    [(a, v) for a in TRL_GRPO_ALIASES for v, r in a.values.items() if not isinstance(r, str)],
    ids=lambda x: getattr(x, "name", str(x)),
)
def test_every_mapped_value_resolves(alias, value):
    text = {True: "true", False: "false"}.get(value, str(value))
    config = _grpo({alias.name: text})
    for key, expected in alias.values[value].items():
        assert getattr(config, key) == expected, (alias.name, value, key)


@pytest.mark.parametrize("alias", [a for a in TRL_GRPO_ALIASES if a.refused], ids=lambda a: a.name)
def test_every_refused_name_says_its_equivalent_in_one_line(alias):
    value = {bool: "true" if False in alias.accepts else "false", float: "7"}.get(alias.kind, "something")
    with pytest.raises(ValueError) as error:
        _grpo({alias.name: value})
    message = str(error.value)
    assert "\n" not in message and alias.refused in message and message.startswith(f"grpo: {alias.name}")
    assert "did you mean" not in message
    for accepted in alias.accepts:  # what the harness does anyway: taken, nothing set
        text = ("true" if accepted else "false") if isinstance(accepted, bool) else str(accepted).lower()
        assert _grpo({alias.name: text}) == GRPOConfig()


def test_the_names_from_the_issue():
    config = _grpo(
        {
            "learning_rate": "1e-6",
            "num_generations": "4",
            "max_completion_length": "64",
            "loss_type": "dapo",
            "scale_rewards": "none",
            "bf16": "true",
        }
    )
    assert (config.lr, config.group_size, config.max_new_tokens) == (1e-6, 4, 64)
    assert (config.loss_norm, config.advantage, config.autocast) == ("token", "dr_grpo", "bfloat16")
    assert _grpo({"scale_rewards": True}).advantage == "grpo"  # a TOML / API boolean too
    assert (_grpo({"epsilon": 0.3}).eps_low, _grpo({"epsilon": 0.3}).eps_high) == (0.3, 0.3)
    assert _grpo({"epsilon": 0.3, "epsilon_high": 0.28}).eps_high == 0.28
    for name in ("per_device_train_batch_size", "gradient_accumulation_steps"):
        with pytest.raises(ValueError, match=r"prompts_per_step x group_size.*micro_batch"):
            _grpo({name: "8"})
    with pytest.raises(ValueError, match="scale_rewards=batch: not supported"):
        _grpo({"scale_rewards": "batch"})
    with pytest.raises(ValueError, match="no component is normalised on its own"):
        _grpo({"multi_objective_aggregation": "normalize_then_sum"})
    assert _grpo({"multi_objective_aggregation": "sum_then_normalize"}) == GRPOConfig()


def test_num_generations_is_group_size_and_no_known_name_is_misread():
    assert resolve_aliases(TRL_GRPO_ALIASES, {"num_generations": 2}, "grpo")[0] == {"group_size": 2}
    # spelling alone never offers a different knob for these
    assert closest("num_generations", list(FIELDS)) == []
    assert closest("repetition_penalty", list(FIELDS)) == []
    assert closest("num_train_epochs", list(FIELDS)) == []
    assert closest("lrr", list(FIELDS)) == ["lr"] and closest("group_szie", list(FIELDS)) == ["group_size"]


def test_repetition_penalty_never_suggests_overlong_penalty(plugins):
    with pytest.raises(ValueError) as error:
        build_plugin(plugins, "trainer", "grpo", {"repetition_penalty": "1.2"})
    message = str(error.value)
    assert "overlong_penalty" not in message and "did you mean" not in message
    assert message.startswith("trainer 'grpo': repetition_penalty=1.2: not supported")
    # without the table (a plugin that declares no aliases) it is just unknown, with nothing misleading offered
    with pytest.raises(ValueError) as error:
        make_config(GRPOConfig, {"repetition_penalty": 1.2}, "grpo")
    assert "overlong_penalty" not in str(error.value)


def test_a_typo_of_a_trl_name_is_offered_the_trl_name(plugins):
    with pytest.raises(ValueError, match=r"did you mean num_generations \(TRL's name for group_size\)"):
        build_plugin(plugins, "trainer", "grpo", {"num_generationz": "2"})


def test_an_alias_and_its_option_together_are_refused(plugins):
    with pytest.raises(ValueError, match=r"learning_rate .*and lr set the same option; give one"):
        build_plugin(plugins, "trainer", "grpo", {"learning_rate": "1e-5", "lr": "1e-4"})


def test_loss_norm_takes_dapo_as_the_name_of_token():
    assert GRPOConfig(loss_norm="dapo").loss_norm == "token"
    assert GRPOConfig(loss_norm="dr_grpo").loss_norm == "constant"
    with pytest.raises(ValueError, match=r"token \(dapo\)"):
        GRPOConfig(loss_norm="nope")


def test_an_alias_beats_the_preset_as_its_option_does(plugins):
    cfg = RunConfig(options={"task": {}, "trainer": {"learning_rate": "1e-5"}, "searcher": {}})
    _, trainer, _, options = build_plugins(cfg, plugins, with_task=False)
    assert options["trainer"]["lr"] == "1e-5" and "learning_rate" not in options["trainer"]
    assert trainer.config.lr == 1e-5  # not the quick preset's 5e-5


def test_unknown_plugin_names_get_did_you_mean(plugins):
    for kind, typo, meant in (
        ("task", "mathz", "math"),
        ("trainer", "gpro", "grpo"),
        ("searcher", "best-of-kk", "best-of-k"),
    ):
        with pytest.raises(PluginError) as error:
            plugins[kind].get(typo)
        assert str(error.value).startswith(f"unknown {kind} {typo!r}; did you mean {meant}? available: ")
    with pytest.raises(PluginError) as error:
        plugins["engine"].get("sglang")
    assert "did you mean" not in str(error.value)


def test_harness_options_shows_the_lr_a_default_run_gets(capsys):
    assert main(["options", "trainer", "grpo"]) == 0
    out = capsys.readouterr().out
    assert "  lr: float = 5e-05 (preset quick, a default run's; own default 3e-05; preset full: 1e-06)" in out
    assert "also takes 50 of TRL's names" in out and "learning_rate -> lr" in out


def test_the_doc_table_is_the_codes():
    page = "docs/reference/trl-options.md"
    assert generate.stale([page]) == []
    text = (generate.ROOT / page).read_text()
    hand = text.split("## Every TRL name")[0]
    known = {a.name for a in TRL_GRPO_ALIASES} | set(FIELDS)
    written = set()
    for line in hand.splitlines():
        if line.startswith("| `"):
            written |= set(re.findall(r"`([a-z_0-9]+)`", line.split(" | ")[0].split("(")[0]))
    # every GRPOConfig field of TRL's the hand-written table names is understood here
    from trl import GRPOConfig as TRLConfig

    trl_fields = {f.name for f in dataclasses.fields(TRLConfig)}
    assert written & trl_fields <= known, sorted((written & trl_fields) - known)


def test_a_cli_run_with_trl_names_records_the_harness_names(tmp_path, capsys, tiny_policy_spec):
    argv = [
        "run",
        "--model",
        "tiny-random",
        "--trainer",
        "grpo",
        "--steps",
        "1",
        "--limit",
        "1",
        "--train-limit",
        "2",
        "--k",
        "1",
        "--threads",
        "1",
        "--out",
        str(tmp_path),
        "--set",
        "trainer.learning_rate=1e-5",
        "--set",
        "trainer.num_generations=2",
        "--set",
        "trainer.max_completion_length=8",
        "--set",
        "trainer.prompts_per_step=1",
        "--set",
        "searcher.n=1",
        "--set",
        "searcher.max_new_tokens=4",
        "--no-save-model",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "trainer 'grpo': TRL's names translated: learning_rate -> lr=1e-5, num_generations -> group_size=2" in out
    (manifest_file,) = tmp_path.glob("*/manifest.json")
    manifest = json.loads(manifest_file.read_text())
    assert manifest["status"] == "complete"
    trainer = manifest["resolved_options"]["trainer"]
    assert (trainer["lr"], trainer["group_size"], trainer["max_new_tokens"]) == ("1e-5", "2", "8")
    assert not {"learning_rate", "num_generations", "max_completion_length"} & set(trainer)
    assert manifest["translated_options"]["trainer"] == {
        "learning_rate": "lr=1e-5",
        "num_generations": "group_size=2",
        "max_completion_length": "max_new_tokens=8",
    }
    steps = [json.loads(line) for line in (manifest_file.parent / "steps.jsonl").read_text().splitlines()]
    assert steps[0]["lr"] == pytest.approx(1e-5)
