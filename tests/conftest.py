"""Shared fixtures. Model fixtures are session-scoped: building or converting a model is paid once per test run."""

from __future__ import annotations

import os

import pytest

# Never reach for the hub from tests: the machine has no network, and retries cost ~20 s each.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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
