"""Shared fixtures. Model fixtures are session-scoped: building or converting a model is paid once per test run."""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Never reach for the hub from tests: the machine has no network, and retries cost ~20 s each.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Property tests check values, never speed: hypothesis's default 200 ms deadline per example failed one of them on
# a machine busy with two model runs (324 ms once, 0.7 ms on the retry), so no example has a deadline.
settings.register_profile("no-deadline", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("no-deadline")


@pytest.fixture(autouse=True)
def own_vector_cache(tmp_path_factory, monkeypatch):
    """Each test its own steering-vector cache (harness/steering/cache.py; subprocesses inherit the variable), so
    no test reuses a vector another built and every in-run build is exercised."""
    monkeypatch.setenv("HARNESS_VECTOR_CACHE", str(tmp_path_factory.mktemp("vectors")))


@pytest.fixture(scope="session")
def plugins():
    from harness.plugins import get_plugin_manager

    return get_plugin_manager(autoload=False)


@pytest.fixture(scope="session")
def tiny_policy_spec(plugins):
    from harness.models import resolve

    return resolve("tiny-random", plugins["model"])


@pytest.fixture
def tiny_policy(plugins, tiny_policy_spec):
    """A fresh tiny random Llama (2 layers, hidden 64) with SmolLM2's tokenizer; each test may change it."""
    import torch

    from harness.models import load_policy

    torch.manual_seed(0)
    return load_policy("tiny-random", plugins["model"])


@pytest.fixture(scope="session")
def smollm2_policy_loader(plugins):
    """Loads the real default model (slow tests only); a new copy per call, since trainers change it."""
    from harness.models import load_policy

    return lambda: load_policy("smollm2-135m", plugins["model"])


@pytest.fixture(scope="session")
def wide_head_folder(tmp_path_factory, tiny_policy_spec):
    """A 2-layer random Llama (hidden 64, 2 heads of 32, 1 KV head) with tiny-random's tokenizer, for the vLLM tests
    (tests/test_engine_vllm.py, tests/test_engine_vllm_server.py): vLLM's CPU attention has no kernel for
    tiny-random's 16-wide heads. Skips where vLLM is not installed."""
    pytest.importorskip("vllm")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-llama-head32")
    tokenizer = AutoTokenizer.from_pretrained(tiny_policy_spec)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


# --- The `runs` marker: tests that start a whole `harness run` or the harness CLI in a fresh process ----------------
# `pytest -m "not slow and not runs"` is the quick lane (README, "Development"). Rather than a decorator on each of some
# hundreds of tests, collection looks at what each test calls: its own source, the functions of tests/ it calls (one
# module's helpers, tiny_runs.py's) and the fixtures of tests/ it uses, followed to any depth. A test is marked when
# that code starts the CLI in a subprocess (`-m harness`, tiny_runs.harness/harness_env), runs the CLI's `run` in
# process (`main(["run", ...])`, `main([*RUN, ...])`, `main(tiny_argv(...))`) or calls harness.run.run/resume (on
# `RunConfig(...)`, `tiny_config(...)`, ...) or the Python API's train/evaluate. A module may also say
# `pytestmark = pytest.mark.runs` for what the scan cannot see.
_TESTS = Path(__file__).resolve().parent
_RUN_SIGNS = re.compile(
    r"""["']-m["'],\s*["']harness["']"""  # python -m harness ...
    r"""|\bmain\(\s*(\[\s*(["']run["']|\*)|tiny_argv\()"""  # main(["run", ...]), main([*RUN, ...]), main(tiny_argv(
    r"""|\b(run|resume)\(\s*(RunConfig|cfg|config|replace|tiny_config)\b"""  # harness.run.run(RunConfig(...))
    r"""|\bharness\.(train|evaluate)\("""  # the Python API, a whole run
    r"""|\bharness_env\("""  # tiny_runs: the environment of a CLI subprocess
)
_RUNNERS = ("harness.run:run", "harness.run:resume", "harness.api:train", "harness.api:evaluate", "tiny_runs:harness")


def _ours(obj) -> bool:
    """A function (or fixture) defined in a file under tests/."""
    code = getattr(obj, "__code__", None)
    return code is not None and Path(code.co_filename).resolve().is_relative_to(_TESTS)


def _names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def _starts_runs(func, seen: set) -> bool:
    func = inspect.unwrap(func)
    if func in seen or not _ours(func):
        return False
    seen.add(func)
    try:
        if _RUN_SIGNS.search(inspect.getsource(func)):
            return True
    except (OSError, TypeError):
        pass
    for name in _names(func.__code__):
        target = func.__globals__.get(name)
        if callable(target) and f"{getattr(target, '__module__', '')}:{getattr(target, '__name__', '')}" in _RUNNERS:
            return True
        if inspect.isfunction(target) and _starts_runs(target, seen):
            return True
        if isinstance(target, str) and _RUN_SIGNS.search(target):  # a program for `python -c` kept in a constant
            return True
    return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("runs") or not isinstance(item, pytest.Function):
            continue
        seen: set = set()
        fixtures = [d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs]
        if any(_starts_runs(f, seen) for f in (item.obj, *fixtures)):
            item.add_marker(pytest.mark.runs)
