"""Every size a built-in plugin takes has an upper end, checked by the converter before the model loads
(harness/plugins/size_bounds.py says why each end is what it is). Found with the command line as a real process:
`--set trainer.group_size=1e12`, evolve's `searcher.seeds=1e12` and `searcher.islands=1e9` grew past 3 GB in ten
seconds; `searcher.seed=1e23` was accepted and the run completed, while `trainer.seed=1e23` failed after the model
had loaded."""

from __future__ import annotations

import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

from harness.plugins import get_plugin_manager, options_reference
from harness.plugins.option_help import Bounds, Option, describe_entry
from harness.plugins.options import coerce, make_config, typed_value
from harness.plugins.size_bounds import COUNT, MAX_SEED, SEED, STEPS, THREADS, TOKENS
from harness.runner import config, run_settings
from harness.searchers import best_of_k
from harness.trainers.grpo import GRPOConfig
from harness.trainers.vpo import VPOConfig

ROOT = Path(__file__).resolve().parents[1]

# Int options of built-ins with no upper end of their own, each with why. Keep it short: a new size option declares
# Bounds (harness/plugins/size_bounds.py) instead of coming here. (reasoning-gym's dataset fields, `harness options
# task rg:NAME`, are that library's own, with its checks; they are not the built-ins' and not listed here.)
EXEMPT = {
    # the k of pass@k / best@k: a list of counts, each checked against n (1..n, and n is at most COUNT)
    ("searcher", "best-of-k", "k"),
    # call counts reported as solved@c: numbers in the report, nothing is sized by them
    ("searcher", "evolve", "k"),
}


def _described(kind: str, name: str) -> dict[str, Option]:
    return {o.name: o for o in describe_entry(kind, get_plugin_manager(autoload=False)[kind].get(name))}


def _builtin_options() -> list[tuple[str, str, Option]]:
    plugins = get_plugin_manager(autoload=False)
    return [
        (kind, entry.name, option)
        for kind in options_reference.KINDS
        for entry in plugins[kind]
        if entry.plugin.startswith("builtin:")
        for option in describe_entry(kind, entry)
    ]


OPTIONS = _builtin_options()


def _takes_int(hint: typing.Any) -> bool:
    """int, int | None, or a union or sequence that holds an int (k: Sequence[int] | str | int)."""
    if hint is int:
        return True
    return any(_takes_int(arg) for arg in typing.get_args(hint)) and typing.get_origin(hint) is not typing.Literal


def _is_seed(name: str) -> bool:
    return name == "seed" or name.endswith("_seed")  # evolve's `seeds` is a count of first samples, not a seed


def test_every_int_option_of_every_built_in_has_an_upper_end():
    ints = [(kind, name, o) for kind, name, o in OPTIONS if _takes_int(o.hint)]
    assert len(ints) > 60  # the registry was read (trainers, searchers, tasks, engines)
    unbounded = sorted(
        f"{kind} {name}: {o.name}"
        for kind, name, o in ints
        if (kind, name, o.name) not in EXEMPT and (o.bounds is None or o.bounds.high is None)
    )
    assert unbounded == [], "declare Bounds(low, high) (harness/plugins/size_bounds.py) or add it to EXEMPT, saying why"
    stale = sorted(EXEMPT - {(kind, name, o.name) for kind, name, o in ints})
    assert stale == [], "an exemption names no int option any more: remove it"
    for kind, name, o in ints:  # a default outside its own bounds would refuse a run that sets nothing
        if o.bounds is not None and isinstance(o.default, int):
            assert o.bounds.check(o.default), f"{kind} {name}: {o.name}={o.default} outside {o.bounds}"


def test_every_seed_option_has_the_run_seeds_range():
    seeds = {(kind, name, o.name): o.bounds for kind, name, o in OPTIONS if _is_seed(o.name)}
    assert {("trainer", "grpo", "seed"), ("searcher", "evolve", "seed"), ("task", "rg:", "pool_seed")} <= set(seeds)
    assert {key: b for key, b in seeds.items() if b != SEED} == {}
    assert Bounds(0, 2**32 - 1) == SEED and run_settings.MAX_SEED == MAX_SEED  # --seed's range is the options'


def test_the_shared_ends_are_the_flags_and_the_searchers():
    assert STEPS == config.MAX_STEPS and THREADS == config.MAX_THREADS
    assert best_of_k.MAX_N == COUNT and best_of_k.MAX_NEW_TOKENS == TOKENS


def test_a_subclass_that_changes_a_default_keeps_its_bounds():
    vpo = _described("trainer", "vpo")  # VPOConfig sets answers_per_rollout = 4, warmup_steps = 64, nothing more
    assert vpo["answers_per_rollout"].bounds == Bounds(1, COUNT) and vpo["warmup_steps"].bounds == Bounds(0, STEPS)
    with pytest.raises(ValueError, match=r"^vpo: option answers_per_rollout=0 is out of its bounds \(1..100000\)$"):
        make_config(VPOConfig, {"answers_per_rollout": 0}, "vpo")


@pytest.mark.parametrize("value", ["1e12", 1e12, 10**12])  # --set text, a YAML or TOML float, an int
def test_a_whole_float_is_an_int_and_its_bounds_refuse_it_in_one_line(value):
    option = _described("trainer", "grpo")
    assert coerce(value, None, int) == 10**12 and type(coerce(value, None, int)) is int
    with pytest.raises(ValueError) as err:
        typed_value(option["group_size"], value, "trainer 'grpo'")
    assert str(err.value) == f"trainer 'grpo': option group_size={value!r} is out of its bounds (1..100000)"
    with pytest.raises(ValueError, match=r"option group_size=.* is out of its bounds \(1..100000\)"):
        make_config(GRPOConfig, {"group_size": value}, "grpo")


def test_a_value_of_the_wrong_shape_is_refused_naming_the_option():
    option = _described("trainer", "grpo")
    for value in ({"a": 1}, [8], True, None, 8.5):
        with pytest.raises(ValueError, match=r"^trainer 'grpo': option group_size=.*: expected int$"):
            typed_value(option["group_size"], value, "trainer 'grpo'")
    for value, expected in ((8, 8), (8.0, 8), ("8", 8)):
        assert typed_value(option["group_size"], value, "trainer 'grpo'") == expected
    with pytest.raises(ValueError, match=r"option lr=.*: expected float"):
        typed_value(option["lr"], {"a": 1}, "trainer 'grpo'")
    assert coerce([-1, 0.5], "") == "-1,0.5"  # vspo's betas as a TOML list: the text --set takes
    assert coerce(8, None, typing.Sequence[int] | str | int) == 8 and coerce([1, 4], None, list[int]) == [1, 4]
    assert coerce(4, None, list[int]) == [4] and coerce(None, None, int | None) is None
    # a union: a list fills its list member (math's operators), a whole number its int before str or a list
    assert coerce(["+", "-"], None, str | typing.Iterable[str]) == ["+", "-"]
    assert coerce(8.0, None, typing.Sequence[int] | str | int) == 8


# ----------------------------------------------------------------------------------------------------------------
# The findings, through the command line as a real process: refused in one line before the model loads
# ----------------------------------------------------------------------------------------------------------------

# the CLI in a process of its own, with loading a model made fatal: a refusal must come before it
NO_MODEL = """
import sys
from transformers import AutoModelForCausalLM

def refuse(*_, **__):
    sys.stderr.write("the model was loaded before the input was refused\\n")
    raise SystemExit(3)

AutoModelForCausalLM.from_pretrained = refuse
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--set", "trainer.group_size=1e12"],
            "trainer 'grpo': option group_size='1e12' is out of its bounds (1..100000)",
        ),
        (
            ["--searcher", "evolve", "--set", "searcher.seeds=1e12"],
            "searcher 'evolve': option seeds='1e12' is out of its bounds (1..100000)",
        ),
        (
            ["--searcher", "evolve", "--set", "searcher.islands=1e9"],
            "searcher 'evolve': option islands='1e9' is out of its bounds (1..100000)",
        ),
        (
            ["--set", "searcher.seed=1e23"],
            "searcher 'best-of-k': option seed='1e23' is out of its bounds (0..4294967295)",
        ),
        (["--set", "trainer.seed=1e23"], "trainer 'grpo': option seed='1e23' is out of its bounds (0..4294967295)"),
        (
            ["--trainer", "vpo", "--set", "trainer.answers_per_rollout=1e12"],  # read by the plan before any plugin
            "trainer 'vpo': option answers_per_rollout='1e12' is out of its bounds (1..100000)",
        ),
    ],
    ids=["group_size", "evolve-seeds", "evolve-islands", "searcher-seed", "trainer-seed", "vpo-answers"],
)
def test_an_absurd_size_is_one_line_before_the_model_loads(argv, expected, tmp_path):
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", NO_MODEL, "run", "--model", "tiny-random", "--out", str(tmp_path / "runs"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    elapsed = time.monotonic() - started
    err = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert err == [f"harness: error: {expected}"], err
    assert "Traceback" not in result.stderr and not list(tmp_path.glob("runs/*"))
    assert elapsed < 60, f"{elapsed:.0f} s: refused only after something grew"
