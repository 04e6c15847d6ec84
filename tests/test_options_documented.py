"""One description of every plugin's options (harness/plugins/option_help.py): help read from the comments beside
each option, `harness options KIND NAME`, docs/reference/options.md generated from it (docs/generate.py), one
converter for --set, TOML and YAML values, and an unknown option answered with the closest known ones."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
from docs_generator import generate

from harness.cli import main
from harness.plugins import get_plugin_manager, options_reference
from harness.plugins.option_help import Bounds, describe, describe_entry
from harness.plugins.options import check_options, coerce, make_config
from harness.trainers.grpo import GRPOConfig

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------------------------
# Every built-in option has help, and the page says what the code says
# ----------------------------------------------------------------------------------------------------------------


def _builtin_entries():
    plugins = get_plugin_manager(autoload=False)
    return [
        (kind, entry)
        for kind in options_reference.KINDS
        for entry in plugins[kind]
        if entry.plugin.startswith("builtin:")
    ]


@pytest.mark.parametrize(("kind", "entry"), _builtin_entries(), ids=lambda x: getattr(x, "name", x))
def test_every_built_in_option_has_help(kind, entry):
    options = describe_entry(kind, entry)
    assert [o.name for o in options if not o.help] == [], f"{kind} {entry.name}: write a # comment beside each option"
    assert len({o.name for o in options}) == len(options)


PATH = "docs/reference/options.md"


def test_docs_options_md_is_up_to_date():
    assert generate.stale([PATH]) == []
    page = (generate.ROOT / PATH).read_text()
    lr = "| `lr` | `float` | `5e-05` (preset quick, a default run's; own default 3e-05; preset full: 1e-06) | AdamW"
    assert lr in page and "### searcher `best-of-k`" in page


def test_a_stale_page_is_found(tmp_path):
    stale = tmp_path / PATH
    stale.parent.mkdir(parents=True)
    stale.write_text(generate.options_reference().replace("AdamW learning rate", "the learning rate"))
    assert generate.stale([PATH], root=tmp_path) == [f"{PATH} is stale: run python docs/generate.py (or make docs)"]
    assert generate.write([PATH], root=tmp_path) == [PATH] and generate.stale([PATH], root=tmp_path) == []


def test_harness_options_trainer_grpo_lists_every_field_with_its_help():
    result = subprocess.run(
        [sys.executable, "-m", "harness", "options", "trainer", "grpo"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    listed = {}
    for index, line in enumerate(lines):
        if line.startswith("  ") and not line.startswith("   ") and ": " in line:
            listed[line.split(":")[0].strip()] = lines[index + 1].strip()
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(listed) == fields
    assert all(help_ and help_ != "(no help written)" for help_ in listed.values()), listed
    assert listed["lr"].startswith("AdamW learning rate")
    # the lr a default run gets (the quick preset's), labelled, with the option's own default beside it
    assert "  lr: float = 5e-05 (preset quick, a default run's; own default 3e-05; preset full: 1e-06)" in lines
    assert "preset quick: steps=10" in result.stdout


def test_harness_options_for_a_family_member_and_an_unknown_kind(capsys):
    assert main(["options", "task", "rg:basic_arithmetic"]) == 0
    out = capsys.readouterr().out
    assert "  pool_size: int = 500" in out and "  max_terms: int = 6" in out  # the task's, then the dataset's
    assert main(["options", "logger", "jsonl"]) == 0 and "no options" in capsys.readouterr().out
    assert main(["options", "task", "nope"]) == 2 and "unknown task 'nope'" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------------
# A third party's options: the same comments, the same command
# ----------------------------------------------------------------------------------------------------------------

PLUGIN = """
from dataclasses import dataclass, field
from typing import Annotated

from harness.hookspecs import hookimpl
from harness.plugins.option_help import Bounds
from harness.plugins.options import make_config


class EchoTask:
    def __init__(
        self,
        *,
        size: Annotated[int, Bounds(1, 100)] = 20,  # problems in the pool
        # the text each prompt ends with,
        # said over two lines
        suffix: str = "Answer:",
        a: int = 1, b: int = 2,  # a comment two parameters share belongs to neither
    ) -> None:
        self.size = size


@dataclass
class ToyConfig:
    steps: int = 10  # optimizer steps
    lr: float = field(default=1e-5, metadata={"help": "AdamW learning rate", "bounds": Bounds(0, 1)})  # not this
    # a block above
    seed: int = 0


class ToyTrainer:
    config_class = ToyConfig

    def __init__(self, **options) -> None:
        self.config = make_config(ToyConfig, options, "toy")


@hookimpl
def harness_register_tasks(registry):
    registry.add("echo", EchoTask, "echoes")


@hookimpl
def harness_register_trainers(registry):
    registry.add("toy", ToyTrainer, "a toy")
"""


@pytest.fixture()
def toy_plugin(tmp_path, monkeypatch):
    path = tmp_path / "toy_options_plugin.py"
    path.write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield str(path)
    sys.modules.pop("toy_options_plugin", None)


def test_a_plugins_comments_are_its_help(toy_plugin, capsys):
    plugins = get_plugin_manager(autoload=False, local=[toy_plugin])
    task = {o.name: o for o in describe_entry("task", plugins["task"].get("echo"))}
    assert task["size"].help == "problems in the pool" and task["size"].bounds == Bounds(1, 100)
    assert task["size"].type == "int" and task["size"].default == 20
    assert task["suffix"].help == "the text each prompt ends with, said over two lines"
    assert task["a"].help == "" and task["b"].help == ""
    trainer = {o.name: o for o in describe_entry("trainer", plugins["trainer"].get("toy"))}
    assert [trainer[n].help for n in ("steps", "lr", "seed")] == [
        "optimizer steps",
        "AdamW learning rate",
        "a block above",
    ]
    assert main(["options", "trainer", "toy", "--plugin", toy_plugin]) == 0
    out = capsys.readouterr().out
    assert "  lr: float = 1e-05  [0..1]\n      AdamW learning rate" in out


def test_declared_bounds_are_enforced(toy_plugin):
    plugins = get_plugin_manager(autoload=False, local=[toy_plugin])
    factory = plugins["task"].get("echo").load()
    assert check_options("task", "echo", factory, {"size": "7"}) == {"size": 7}
    with pytest.raises(ValueError, match=r"^task 'echo': option size='0' is out of its bounds \(1..100\)$"):
        check_options("task", "echo", factory, {"size": "0"})
    config = plugins["trainer"].get("toy").load().config_class
    with pytest.raises(ValueError, match=r"^toy: option lr=2 is out of its bounds \(0..1\)$"):
        make_config(config, {"lr": 2}, "toy")


# ----------------------------------------------------------------------------------------------------------------
# An unknown option: the closest ones, with their help, in one line
# ----------------------------------------------------------------------------------------------------------------


def test_an_unknown_option_names_the_closest_with_its_help():
    with pytest.raises(ValueError) as error:
        make_config(GRPOConfig, {"lrr": "1"}, "trainer 'grpo'")
    assert str(error.value) == "trainer 'grpo': unknown option lrr; did you mean lr (AdamW learning rate)?"
    plugins = get_plugin_manager(autoload=False)
    best_of_k = plugins["searcher"].get("best-of-k").load()
    with pytest.raises(ValueError) as error:
        check_options("searcher", "best-of-k", best_of_k, {"tmperature": "1", "zzz": 1})
    message = str(error.value)
    assert message.startswith(
        "searcher 'best-of-k': unknown options tmperature, zzz; for tmperature did you mean "
        "temperature (sampling temperature)?"
    )
    assert message.endswith("(`harness options searcher best-of-k` lists the 12 options)") and "\n" not in message
    assert "max_new_tokens" not in message  # not every name


def test_the_cli_answers_an_unknown_option_in_one_line(tmp_path, capsys):
    assert main(["run", "--model", "tiny-random", "--out", str(tmp_path), "--set", "trainer.lrr=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["harness: error: trainer 'grpo': unknown option lrr; did you mean lr (AdamW learning rate)?"]


# ----------------------------------------------------------------------------------------------------------------
# One converter
# ----------------------------------------------------------------------------------------------------------------


def test_there_is_one_make_config():
    needle = "def " + "make_config"  # spelt apart, so that grep finds only the definition
    found = [
        str(p.relative_to(ROOT))
        for folder in ("harness", "tasks", "trainers", "searchers")
        for p in (ROOT / folder).rglob("*.py")
        if needle in p.read_text()
    ]
    assert found == ["harness/plugins/options.py"]
    from harness.plugins import options
    from harness.tasks import reasoning_gym_bridge

    assert reasoning_gym_bridge.make_config is options.make_config


@pytest.mark.parametrize(
    ("text", "toml", "hint", "expected"),
    [
        ("3", 3.0, int, 3),
        ("1e-5", 1e-5, float, 1e-5),
        ("2", 2, float, 2.0),
        ("false", False, bool, False),
        ("1,4,16", [1, 4, 16], list[int], [1, 4, 16]),
        ("none", None, int | None, None),
        ("+-", "+-", str | list[str], "+-"),  # a union that takes text keeps it, for the plugin to read
    ],
)
def test_set_text_and_config_values_convert_alike(text, toml, hint, expected):
    assert coerce(text, None, hint) == expected == coerce(toml, None, hint)


def test_the_converter_types_by_the_default_without_an_annotation_and_refuses_what_does_not_fit():
    assert coerce("4", 8) == 4 and coerce("0.5", 1.0) == 0.5 and coerce("yes", True) is True
    assert coerce("keep me", None) == "keep me"
    for value, default in (("4.5", 8), ("maybe", True), (2.5, 1)):
        with pytest.raises(ValueError):
            coerce(value, default)


def test_a_run_s_options_reach_a_keyword_factory_typed(toy_plugin):
    """--set text and a config file's number reach the factory as the same int, through build_plugin."""
    from harness.plugins.options import build_plugin

    plugins = get_plugin_manager(autoload=False, local=[toy_plugin])
    assert build_plugin(plugins, "task", "echo", {"size": "12"}).size == 12
    assert build_plugin(plugins, "task", "echo", {"size": 12.0}).size == 12


def test_describe_takes_a_plain_function_and_annotated_bounds():
    def factory(
        n: Annotated[int, Bounds(1, None)] = 8,  # candidates
        plugins=None,
    ):
        return n

    (option,) = describe(factory)
    assert (option.name, option.type, option.help, str(option.bounds)) == ("n", "int", "candidates", ">= 1")
    assert option.summary == "candidates"
