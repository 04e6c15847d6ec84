"""Shared fixtures. Model fixtures are session-scoped: building or converting a model is paid once per test run."""

from __future__ import annotations

import os

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
