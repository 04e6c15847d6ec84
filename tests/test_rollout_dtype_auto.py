"""``--rollout-dtype auto``, the default (harness/runner/precision.py): training rollouts in bf16 only where the device
computes it natively, the engine can switch for one phase and the trainer recomputes the old log-probs; every
evaluation in the weights' precision; explicit values as before. And the vLLM engines' ``--rollout-dtype`` (vLLM's
``dtype``), with vLLM mocked: it is not installed here."""

from __future__ import annotations

import dataclasses
import importlib.machinery
import json
import sys
import threading
import types
import warnings
from dataclasses import replace
from http.server import ThreadingHTTPServer

import pytest
from tiny_runs import uppercase_step, with_uppercase_task

from harness.engine.transformers_engine import TransformersEngine
from harness.hookspecs import hookimpl
from harness.plugins import get_plugin_manager
from harness.run import RunConfig
from harness.runner import precision
from harness.runner.grid import cell_name
from harness.runner.plan import check_engine
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.rollout_precision import should_recompute
from harness.types import EngineCapabilities, TrainerCapabilities, capabilities_of


@pytest.fixture
def native(monkeypatch):
    """A machine whose device computes bf16 natively, whatever this one does."""
    monkeypatch.setattr(precision, "native_bf16", lambda device: (True, f"{device}: native bf16 (test)"))


class _FixedPrecisionEngine:  # an engine that cannot switch its precision per phase (as vLLM)
    capabilities = EngineCapabilities()


def test_auto_samples_only_training_in_bf16_and_only_where_it_is_native_and_safe(
    tiny_policy, plugins, native, monkeypatch
):
    engine, grpo = TransformersEngine(tiny_policy, progress=False), GRPOTrainer(plugins=plugins)
    chosen = precision.resolve("auto", "float32", "cpu", engine, grpo)
    assert (chosen.eval, chosen.train) == ("float32", "bfloat16")
    # where it is not safe or not possible: the weights' precision in every phase
    for weights, engine_, trainer in (
        ("float32", engine, GRPOTrainer(plugins=plugins, old_logprobs="sampler")),
        ("float32", engine, None),  # evaluation only
        ("float32", _FixedPrecisionEngine(), grpo),
        ("bfloat16", engine, grpo),
    ):
        chosen = precision.resolve("auto", weights, "cpu", engine_, trainer)
        assert chosen.eval == chosen.train == weights, chosen.why
    monkeypatch.setattr(precision, "native_bf16", lambda device: (False, "CPU: torch AVX2, no avx512_bf16"))
    chosen = precision.resolve("auto", "float32", "cpu", engine, grpo)
    assert chosen.eval == chosen.train == "float32" and "AVX2" in chosen.why
    # explicit values, and "" (runs from before auto), hold for every phase as before
    for setting, expected in (
        ("bfloat16", "bfloat16"),
        ("float16", "float16"),
        ("float32", "float32"),
        ("", "float32"),
    ):
        chosen = precision.resolve(setting, "float32", "cpu", engine, grpo)
        assert chosen.eval == chosen.train == expected


def test_native_bf16_needs_avx512_kernels_and_the_bf16_flags(monkeypatch):
    import torch

    for capability, flags, expected in (
        ("AVX512", {"avx512_bf16"}, True),
        ("AVX512", {"amx_bf16", "avx2"}, True),
        ("AVX512", {"avx512f"}, False),
        ("AVX2", {"amx_bf16"}, False),
    ):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda c=capability: c)
        monkeypatch.setattr(precision, "cpu_flags", lambda f=flags: f)
        assert precision.native_bf16.__wrapped__("cpu")[0] is expected, (capability, flags)
    assert precision.native_bf16.__wrapped__("mps") == (False, "device mps: not checked for bf16")


def test_the_engine_switches_precision_for_a_region_only(tiny_policy):
    engine = TransformersEngine(tiny_policy, progress=False)
    assert capabilities_of(engine, EngineCapabilities).phase_dtype
    with engine.sampling_in("bfloat16"):
        assert engine.rollout_dtype == "bfloat16"
        assert capabilities_of(engine, EngineCapabilities).sampling_dtype == "bfloat16"
    assert engine.rollout_dtype == "" and capabilities_of(engine, EngineCapabilities).sampling_dtype == ""
    fixed = TransformersEngine(tiny_policy, progress=False, rollout_dtype="float16")
    with fixed.sampling_in("float32"):  # the weights' own: as they are
        assert fixed.rollout_dtype == ""
    assert capabilities_of(fixed, EngineCapabilities).sampling_dtype == "float16"
    with pytest.raises(ValueError, match="rollout_dtype must be one of"), engine.sampling_in("int8"):
        pass
    assert engine.rollout_dtype == ""


def _run(tmp_path, monkeypatch, **config) -> tuple[dict, list, dict]:
    """One GRPO step on the tiny model between two evaluations: its manifest, the engine's precision at every
    generate (with whether it was inside training) and the step's line."""
    from harness.run import run

    seen, training = [], []
    decode, train = TransformersEngine._decode, GRPOTrainer.train

    def recording_decode(self, *args, **kw):
        seen.append((bool(training), self.rollout_dtype or "float32"))
        return decode(self, *args, **kw)

    def flagged_train(self, *args, **kw):
        training.append(True)
        try:
            return train(self, *args, **kw)
        finally:
            training.clear()

    monkeypatch.setattr(TransformersEngine, "_decode", recording_decode)
    monkeypatch.setattr(GRPOTrainer, "train", flagged_train)
    plugins = with_uppercase_task()
    folder = run(uppercase_step(tmp_path, threads=1, **config), plugins=plugins, echo=lambda _: None)
    manifest = json.loads((folder / "manifest.json").read_text())
    step = json.loads((folder / "steps.jsonl").read_text().splitlines()[0])
    return manifest, seen, step


def test_a_default_run_trains_on_bf16_rollouts_where_native_and_evaluates_exactly(tmp_path, monkeypatch, native):
    manifest, seen, step = _run(tmp_path, monkeypatch)
    assert manifest["config"]["rollout_dtype"] == "auto"
    assert manifest["rollout_precision"]["eval"] == "float32"
    assert manifest["rollout_precision"]["train"] == "bfloat16"
    assert {dtype for inside, dtype in seen if inside} == {"bfloat16"}
    assert {dtype for inside, dtype in seen if not inside} == {"float32"}  # before and after
    assert [inside for inside, _ in seen].count(False) >= 2
    assert step["mismatch/abs_log_ratio_mean"] > 0  # the trainer recomputed the old log-probs in float32


def test_a_default_run_where_bf16_is_not_native_samples_as_before(tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "native_bf16", lambda device: (False, "CPU: torch AVX2, no avx512_bf16"))
    manifest, seen, step = _run(tmp_path, monkeypatch)
    assert {dtype for _, dtype in seen} == {"float32"}
    assert manifest["rollout_precision"]["train"] == "float32"
    assert step["mismatch/abs_log_ratio_mean"] == 0  # nothing recomputed: the engine's log-probs are the old ones


def test_an_explicit_rollout_dtype_holds_for_every_phase(tmp_path, monkeypatch, native):
    manifest, seen, _ = _run(tmp_path, monkeypatch, rollout_dtype="float32")
    assert {dtype for _, dtype in seen} == {"float32"}
    assert manifest["rollout_precision"] == {
        "setting": "float32",
        "eval": "float32",
        "train": "float32",
        "why": "given",
    }
    _, seen, _ = _run(tmp_path, monkeypatch, rollout_dtype="bfloat16")
    assert {dtype for _, dtype in seen} == {"bfloat16"}  # evaluations too, as the user asked


def test_auto_keeps_grid_cells_and_older_manifests_resume_in_the_weights_precision(tmp_path):
    default = RunConfig(out=str(tmp_path))
    assert default.rollout_dtype == "auto"
    assert (
        cell_name(default)
        == cell_name(replace(default, rollout_dtype=""))
        == cell_name(replace(default, rollout_dtype="float32"))
    )
    assert cell_name(replace(default, rollout_dtype="bfloat16")) != cell_name(default)
    with pytest.raises(ValueError, match="choose one of auto, float32"):
        RunConfig(rollout_dtype="fastest")
    from harness.cli import build_parser

    assert build_parser().parse_args(["run", "--rollout-dtype", "auto"]).rollout_dtype == "auto"


def test_auto_asks_nothing_of_the_engine(tmp_path):
    """The default must work with every engine: "auto" sets no engine option (the runner switches the phase)."""
    plugins = get_plugin_manager(extra_plugins=(_PlainEnginePlugin(),), autoload=False)
    cfg = RunConfig(out=str(tmp_path), engine="plain")
    assert check_engine(cfg, plugins, TrainerCapabilities()) == {}
    with pytest.raises(ValueError, match="--rollout-dtype: engine 'plain' has no rollout dtype"):
        check_engine(replace(cfg, rollout_dtype="bfloat16"), plugins, TrainerCapabilities())


class _PlainEngine:
    def __init__(self, policy, main_process=True) -> None:
        pass

    def generate(self, prompts, params, *, desc=""):
        return []


class _PlainEnginePlugin:
    @hookimpl
    def harness_register_engines(self, registry):
        registry.add("plain", _PlainEngine, "an engine with no options (tests)")


# ------------------------------------------------------------------------------------------------------------------
# vLLM engines: --rollout-dtype is vLLM's dtype
# ------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_vllm(monkeypatch):
    """A ``vllm`` module whose ``LLM`` records the options it was built with (vLLM is not installed here)."""
    built = []

    class LLM:
        def __init__(self, **options) -> None:
            built.append(options)

        def collective_rpc(self, *args, **kw):
            return []

        def reset_prefix_cache(self) -> None:
            pass

    @dataclasses.dataclass
    class EngineArgs:  # the fields vllm.LLM takes (vllm.engine.arg_utils), as few as the engine passes here
        dtype: str = "auto"

    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM = LLM
    arg_utils = types.ModuleType("vllm.engine.arg_utils")
    arg_utils.EngineArgs = EngineArgs
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.engine", types.ModuleType("vllm.engine"))
    monkeypatch.setitem(sys.modules, "vllm.engine.arg_utils", arg_utils)
    return built


def test_vllm_engine_samples_in_the_rollout_dtype_and_declares_it(tiny_policy, plugins, fake_vllm, tmp_path):
    from harness.engine.vllm_engine import VLLMEngine

    cfg = RunConfig(out=str(tmp_path), engine="vllm", rollout_dtype="bfloat16")
    options = check_engine(cfg, plugins, TrainerCapabilities())
    assert options == {"dtype": "bfloat16"}
    engine = VLLMEngine(tiny_policy, progress=False, **options)
    assert fake_vllm[-1]["dtype"] == "bfloat16"
    caps = capabilities_of(engine, EngineCapabilities)
    assert caps.sampling_dtype == "bfloat16" and not caps.phase_dtype  # fixed when vLLM starts
    assert should_recompute("auto", engine, tiny_policy.model, GRPOTrainer(plugins=plugins).config)
    # the default (auto) sets nothing: vLLM computes in the policy's dtype, in every phase
    assert check_engine(replace(cfg, rollout_dtype="auto"), plugins, TrainerCapabilities()) == {}
    plain = VLLMEngine(tiny_policy, progress=False)
    assert fake_vllm[-1]["dtype"] == "float32" and capabilities_of(plain, EngineCapabilities).sampling_dtype == ""
    chosen = precision.resolve("auto", "float32", "cuda", plain, GRPOTrainer(plugins=plugins))
    assert chosen.eval == chosen.train == "float32"


def _fake_server(dtype: str):
    from test_engine_vllm_server import _FakeVLLM

    info = {"vllm_config": {"model_config": {"logprobs_mode": "processed_logprobs", "dtype": f"torch.{dtype}"}}}
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_FakeVLLM,), {"answers": {"/server_info": info}}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_vllm_server_engine_checks_the_servers_dtype_against_the_rollout_dtype(tiny_policy, plugins, tmp_path):
    from harness.engine.vllm_server_engine import ServerError, VLLMServerEngine

    cfg = RunConfig(out=str(tmp_path), engine="vllm-server", engine_url="http://127.0.0.1:9", rollout_dtype="bfloat16")
    assert check_engine(cfg, plugins, TrainerCapabilities())["dtype"] == "bfloat16"
    server, url = _fake_server("bfloat16")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # asked for: no warning
            engine = VLLMServerEngine(tiny_policy, url, dtype="bfloat16", main_process=False, progress=False)
        assert capabilities_of(engine, EngineCapabilities).sampling_dtype == "bfloat16"
        with pytest.warns(UserWarning, match="the trainer recomputes the old log-probs"):
            engine = VLLMServerEngine(tiny_policy, url, main_process=False, progress=False)
        assert capabilities_of(engine, EngineCapabilities).sampling_dtype == "bfloat16"  # declared all the same
        with pytest.raises(
            ServerError,
            match=r"computes in bfloat16, not float32 \(--rollout-dtype\): start it with "
            "--dtype float32",
        ):
            VLLMServerEngine(tiny_policy, url, dtype="float32", main_process=False, progress=False)
    finally:
        server.shutdown()
    server, url = _fake_server("float32")
    try:
        engine = VLLMServerEngine(tiny_policy, url, dtype="float32", main_process=False, progress=False)
        assert capabilities_of(engine, EngineCapabilities).sampling_dtype == ""
    finally:
        server.shutdown()
