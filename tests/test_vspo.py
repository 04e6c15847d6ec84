"""VSPO on the tiny model: steered rollouts, an update of the unsteered policy, reward r0 + alpha * beta; and
reward-shaped GRPO (a behaviour scorer as one more reward component)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.plugins.registry import PluginError
from harness.steering.vectors import Steering, SteeringVector, decoder_layers
from harness.store.run_folder import RunStore
from harness.tasks.behaviours import conciseness
from harness.testing import FakeEngine, FakeTask, UppercaseTask
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.policy_gradient import score_rollouts
from harness.trainers.vspo import VSPOTrainer
from harness.types import SamplingParams

BETAS = "-4,0,4,8"


@pytest.fixture
def vector_path(tmp_path):
    generator = torch.Generator().manual_seed(0)
    vector = SteeringVector(vector=torch.randn(64, generator=generator), layer=1, model="tiny-random", behaviour="test")
    path = tmp_path / "vector.safetensors"
    vector.save(path)
    return path


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _vspo(plugins, vector_path, **options):
    defaults = {
        "vector": str(vector_path),
        "betas": BETAS,
        "beta_unit": "absolute",
        "group_size": 4,
        "prompts_per_step": 2,
        "max_new_tokens": 6,
        "lr": 1e-3,
    }
    return VSPOTrainer(plugins=plugins, **{**defaults, **options})


def test_steering_changes_sampling_but_only_the_policy_trains(tiny_policy, plugins, vector_path, tmp_path):
    engine = TransformersEngine(tiny_policy, progress=False)
    task = UppercaseTask()
    messages = [task.messages(p) for p in task.problems("train")[:2]]
    params = SamplingParams(n=4, max_new_tokens=6, temperature=1.0, seed=3)
    vector = SteeringVector.load(vector_path, tiny_policy)
    plain = engine.generate(messages, params)
    steered = engine.generate(messages, params, steering=Steering(vector, [-4.0, 0.0, 4.0, 8.0]))
    assert [c.token_ids for c in plain if c.sample_index != 1] != [c.token_ids for c in steered if c.sample_index != 1]
    assert [c.token_ids for c in plain if c.sample_index == 1] == [
        c.token_ids for c in steered if c.sample_index == 1
    ]  # beta = 0

    file_bytes = vector_path.read_bytes()
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    store = RunStore(tmp_path, "run")
    _vspo(plugins, vector_path, steps=2).train(tiny_policy, engine, task, task.problems("train"), store=store)
    changed = [k for k, v in tiny_policy.model.state_dict().items() if not torch.equal(before[k], v)]
    assert len(changed) == len(before)
    assert vector_path.read_bytes() == file_bytes
    assert all(not layer._forward_hooks for layer in decoder_layers(tiny_policy.model))
    steps = _lines(store.dir / "steps.jsonl")
    assert len(steps) == 2
    for s in steps:
        assert abs(s["ratio_mean"] - 1.0) < 1e-3 and s["grad_norm"] > 0
        # logged; its sign over one small batch is chance (see the next test for the expectation)
        assert s["steer_logratio"] != 0.0
        assert s["reward/steering/beta"] == pytest.approx(2.0)  # the mean of the schedule
    samples = _lines(store.dir / "samples.jsonl")
    assert len(samples) == 2 * 2 * 4
    assert all(s["rewards"]["steering/beta"] == [-4.0, 0.0, 4.0, 8.0][s["sample_index"]] for s in samples)


def test_tokens_sampled_under_steering_are_likelier_steered_than_unsteered(tiny_policy, plugins, vector_path):
    """The mean of log pi_steered - log pi_unsteered over tokens sampled steered estimates KL(steered || unsteered)
    >= 0. A training step's few dozen tokens give a negative mean for about one seed in five on this model, so the
    sign is checked here on 2 prompts x 64 samples x 16 tokens (3.3 to 5.8 standard errors above 0 over seeds 0-7)."""
    engine = TransformersEngine(tiny_policy, progress=False)
    task = UppercaseTask()
    trainer = _vspo(plugins, vector_path)
    vector = SteeringVector.load(vector_path, tiny_policy)
    completions = engine.generate(
        [task.messages(p) for p in task.problems("train")[:2]],
        SamplingParams(n=64, max_new_tokens=16, seed=0),
        steering=Steering(vector, [-4.0, 0.0, 4.0, 8.0] * 16),
    )
    unsteered = trainer.unsteered_logprobs(tiny_policy.model, tiny_policy.tokenizer, completions)
    gaps = torch.tensor(
        [s - u for c, lp in zip(completions, unsteered, strict=True) for s, u in zip(c.logprobs, lp, strict=True)]
    )
    assert gaps.mean() > 2 * gaps.std() / len(gaps) ** 0.5


def test_the_update_uses_the_unsteered_policy_s_logprobs(tiny_policy, plugins, vector_path, monkeypatch):
    engine = TransformersEngine(tiny_policy, progress=False)
    task = UppercaseTask()
    trainer = _vspo(plugins, vector_path)
    vector = SteeringVector.load(vector_path, tiny_policy)
    completions = engine.generate(
        [task.messages(p) for p in task.problems("train")[:2]],
        SamplingParams(n=4, max_new_tokens=6, seed=1),
        steering=Steering(vector, trainer.betas),
    )
    seen = {}
    original = GRPOTrainer.update

    def spy(self, model, tok, optimizer, reference, completions, advantages):
        seen["completions"] = completions
        return original(self, model, tok, optimizer, reference, completions, advantages)

    monkeypatch.setattr(GRPOTrainer, "update", spy)
    # Reference: each completion alone, no padding, no hook.
    with torch.no_grad():
        plain = []
        for c in completions:
            ids = torch.tensor([c.prompt_ids + c.token_ids])
            logp = torch.log_softmax(tiny_policy.model(input_ids=ids).logits[0, :-1].float(), dim=-1)
            plain.append(logp[len(c.prompt_ids) - 1 :].gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0])
    advantages = torch.linspace(-1, 1, len(completions))
    optimizer = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-3)
    # once per batch, before the first pass: the old log-probs become the unsteered policy's
    corrected = trainer.rollout_correction(tiny_policy.model, tiny_policy.tokenizer, engine, completions)
    stats = trainer.update(tiny_policy.model, tiny_policy.tokenizer, optimizer, None, corrected.completions, advantages)

    used = seen["completions"]
    for c, u, p in zip(completions, used, plain, strict=True):
        assert torch.allclose(torch.tensor(u.logprobs), p, atol=1e-4)
        assert u.token_ids == c.token_ids
        if c.sample_index == 1:  # beta = 0: the steered log-probs were the unsteered ones already
            assert torch.allclose(torch.tensor(c.logprobs), p, atol=1e-4)
    assert any(
        not torch.allclose(torch.tensor(c.logprobs), p, atol=1e-2) for c, p in zip(completions, plain, strict=True)
    )
    assert abs(stats["ratio_mean"] - 1.0) < 1e-3 and "steer_logratio" in stats


def test_with_two_passes_the_second_clips_as_grpo_s_does(tiny_policy, plugins, vector_path, tmp_path):
    """The old log-probs are taken once per batch, so the second pass's ratio measures how far the first moved the
    policy; recomputing them on every pass kept the ratio at 1 and nothing was ever clipped."""
    engine = TransformersEngine(tiny_policy, progress=False)
    task = UppercaseTask()
    store = RunStore(tmp_path, "run")
    _vspo(plugins, vector_path, steps=1, num_iterations=2, lr=3e-2).train(
        tiny_policy, engine, task, task.problems("train"), store=store
    )
    (step,) = _lines(store.dir / "steps.jsonl")
    assert step["clip_fraction_last_pass"] > 0.1  # a large step: many tokens' ratios leave [0.8, 1.2]


def test_strength_reward_orders_advantages_by_beta(plugins, vector_path):
    """r0 is constant (every answer is the same correct one), so r = r0 + alpha * beta is ordered by beta alone,
    and group-relative advantages are (beta - mean) / std of the schedule."""
    trainer = _vspo(plugins, vector_path, alpha=0.1)
    assert trainer.shaping() == {"steering/beta": 0.1}
    task = FakeTask()
    problems = task.problems("train")[:2]
    completions = FakeEngine(["The answer is 42."]).generate([task.messages(p) for p in problems], SamplingParams(n=4))
    problems = [p for p in task.problems("train") if p.answer == "42"] * 2  # r0 = 1 + 0.5 for every answer
    components = list(task.score(problems[0], "").rewards)
    scored = trainer.add_shaping(
        score_rollouts(task, problems, completions, components), problems, completions, ["steering/beta"]
    )
    assert scored.rewards.shape == (8, 1, 3)
    assert scored.rewards[:, 0, -1].tolist() == [-4.0, 0.0, 4.0, 8.0] * 2
    weights = torch.tensor([task.reward_weights[c] for c in components] + [0.1])
    advantages = trainer.estimator(scored.rewards, torch.tensor([c.prompt_index for c in completions]), weights)
    std = torch.tensor([-4.0, 0.0, 4.0, 8.0]).std()
    expected = (torch.tensor([-4.0, 0.0, 4.0, 8.0]) - 2.0) * 0.1 / (0.1 * std + 1e-4)
    assert torch.allclose(advantages, expected.repeat(2), atol=1e-4)
    assert (advantages[1:4] > advantages[0:3]).all()


def test_bad_vspo_options_are_one_line_errors(plugins, vector_path, tiny_policy, tmp_path):
    cases = [
        ({"group_size": 8}, "group_size (8) must equal the number of betas (4"),
        ({"vector": ""}, "needs vector=PATH (a file from `harness steer`) or behaviour=NAME to build one"),
        ({"vector_prompts": 1}, "option vector_prompts=1 is out of its bounds (2..100000)"),
        ({"vector": str(tmp_path / "nowhere.safetensors")}, "not found"),
        ({"betas": "1,x,2,3"}, "comma-separated numbers"),
        ({"reward": "behaviour"}, "needs behaviour=NAME"),
        ({"reward": "vibes"}, "unknown reward"),
        ({"beta_unit": "furlongs"}, "beta_unit must be one of"),
    ]
    for options, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)) as err:
            _vspo(plugins, vector_path, **options)
        assert "\n" not in str(err.value)
    with pytest.raises(PluginError, match="unknown behaviour 'charm'"):
        _vspo(plugins, vector_path, reward="behaviour", behaviour="charm")

    narrow = tmp_path / "narrow.safetensors"
    SteeringVector(vector=torch.ones(32), layer=0, model="other", behaviour="test").save(narrow)
    task = UppercaseTask()
    with pytest.raises(ValueError, match="hidden size 32") as err:
        _vspo(plugins, narrow).train(
            tiny_policy,
            TransformersEngine(tiny_policy, progress=False),
            task,
            task.problems("train"),
            store=RunStore(tmp_path, "run"),
        )
    assert "\n" not in str(err.value)


def test_reward_shaped_grpo_adds_the_behaviour_component(tiny_policy, plugins, tmp_path):
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=1,
        prompts_per_step=1,
        group_size=2,
        max_new_tokens=4,
        behaviour="conciseness",
        behaviour_weight=0.5,
    )
    assert trainer.shaping() == {"behaviour/conciseness": 0.5}
    seen = {}
    estimator = trainer.estimator

    def spy(rewards, groups, weights, **context):
        seen.update(rewards=rewards, weights=weights)
        return estimator(rewards, groups, weights, **context)

    trainer.estimator = spy
    task = UppercaseTask()
    store = RunStore(tmp_path, "run")
    trainer.train(
        tiny_policy, TransformersEngine(tiny_policy, progress=False), task, task.problems("train"), store=store
    )
    assert seen["rewards"].shape == (2, 1, 2) and seen["weights"].tolist() == [1.0, 0.5]
    samples = _lines(store.dir / "samples.jsonl")
    for s, row in zip(samples, seen["rewards"], strict=True):
        assert s["rewards"]["behaviour/conciseness"] == pytest.approx(conciseness(s["text"]))
        assert float(row[0, 1]) == pytest.approx(conciseness(s["text"]))
    assert "reward/behaviour/conciseness" in _lines(store.dir / "steps.jsonl")[0]
    with pytest.raises(ValueError, match="behaviour_weight needs behaviour"):
        GRPOTrainer(plugins=plugins, behaviour_weight=0.5)


def test_behaviour_plugins_load_the_scorers(plugins):
    from harness.tasks.behaviours import BEHAVIOURS

    assert {name: plugins["behaviour"].get(name).load() for name in BEHAVIOURS} == BEHAVIOURS  # Behaviour objects


def test_without_a_vector_vspo_builds_one_into_the_run_folder(tiny_policy, plugins, tmp_path):
    """Stage 1 inside the run: pairs rewritten by the policy itself, the vector saved with the run, its cost
    recorded; then training is steered by that vector."""

    class SampledEngine(TransformersEngine):  # a random model's greedy answers come back empty: sample instead
        def generate(self, prompts, params, *, desc="", steering=None):
            return super().generate(prompts, replace(params, temperature=1.0), desc=desc, steering=steering)

    engine = SampledEngine(tiny_policy, progress=False)
    task = UppercaseTask()
    trainer = VSPOTrainer(
        plugins=plugins,
        behaviour="conciseness",
        betas="-0.2,0,0.2,0.4",
        group_size=4,
        prompts_per_step=1,
        steps=1,
        max_new_tokens=6,
        vector_prompts=3,
    )
    store = RunStore(tmp_path, "run")
    trainer.train(tiny_policy, engine, task, task.problems("train"), store=store)
    path = store.dir / "steering_vector.safetensors"
    vector = SteeringVector.load(path, tiny_policy)
    assert trainer.config.vector == str(path) and vector.behaviour == "conciseness"
    assert vector.provenance["teacher"] == "policy" and vector.provenance["prompts"] == 3
    assert abs(float(vector.vector.norm()) - 1.0) < 1e-4
    metrics = json.loads((store.dir / "metrics.json").read_text())
    assert metrics["vspo/vector_teacher_calls"] == 6  # two rewrites per prompt
    assert metrics["vspo/vector_layer"] == vector.layer
    steps = _lines(store.dir / "steps.jsonl")
    assert len(steps) == 1 and steps[0]["steer_logratio"] != 0


def test_vspo_s_in_run_vector_can_be_rewritten_by_another_teacher(tiny_policy, plugins, tmp_path):
    class SampledEngine(TransformersEngine):  # a random model's greedy answers come back empty: sample instead
        def generate(self, prompts, params, *, desc="", steering=None):
            return super().generate(prompts, replace(params, temperature=1.0), desc=desc, steering=steering)

    task = UppercaseTask()
    trainer = VSPOTrainer(
        plugins=plugins,
        behaviour="conciseness",
        betas="-0.2,0,0.2,0.4",
        group_size=4,
        prompts_per_step=1,
        steps=1,
        max_new_tokens=6,
        vector_prompts=3,
        teacher="tiny-random",
    )
    teacher = trainer.teacher_engine(tiny_policy)
    assert teacher is not None and teacher.policy.model is not tiny_policy.model  # a model of its own
    # the random teacher's greedy rewrites are empty too: it samples here, as the policy does
    trainer.teacher_engine = lambda policy: SampledEngine(teacher.policy, progress=False)
    store = RunStore(tmp_path, "run")
    trainer.train(tiny_policy, SampledEngine(tiny_policy, progress=False), task, task.problems("train"), store=store)
    vector = SteeringVector.load(store.dir / "steering_vector.safetensors", tiny_policy)
    assert vector.provenance["teacher"] == "tiny-random"


def test_a_second_run_reuses_the_cached_vector_and_changed_weights_rebuild_it(
    tiny_policy, plugins, tmp_path, monkeypatch, capsys
):
    """Same weights, prompts and options: the vector is copied from the cache, the teacher is never called, the
    run says so in one line and records ``vspo/vector_cached``. Other weights, or cache_vector=false: built."""
    import harness.teacher.rewrite as rewrite

    class SampledEngine(TransformersEngine):  # a random model's greedy answers come back empty: sample instead
        def generate(self, prompts, params, *, desc="", steering=None):
            return super().generate(prompts, replace(params, temperature=1.0), desc=desc, steering=steering)

    task = UppercaseTask()
    options = {
        "behaviour": "conciseness",
        "betas": "-0.2,0,0.2,0.4",
        "group_size": 4,
        "prompts_per_step": 1,
        "steps": 1,
        "max_new_tokens": 6,
        "vector_prompts": 3,
    }
    initial = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}

    def run(name, **extra):
        tiny_policy.model.load_state_dict(initial)  # training moved the weights: start every run from the same
        store = RunStore(tmp_path, name)
        VSPOTrainer(plugins=plugins, **options, **extra).train(
            tiny_policy, SampledEngine(tiny_policy, progress=False), task, task.problems("train"), store=store
        )
        metrics = json.loads((store.dir / "metrics.json").read_text())
        return (store.dir / "steering_vector.safetensors").read_bytes(), metrics

    built, first = run("first")
    assert first["vspo/vector_cached"] == 0

    def no_teacher(*args, **kwargs):
        raise AssertionError("a cached vector was built again")

    monkeypatch.setattr(rewrite, "contrastive_pairs", no_teacher)
    capsys.readouterr()
    reused, second = run("second")
    assert reused == built and second["vspo/vector_cached"] == 1
    assert second["vspo/vector_teacher_calls"] == first["vspo/vector_teacher_calls"]  # the build's one-off cost
    assert "reusing the steering vector" in capsys.readouterr().err
    with pytest.raises(AssertionError, match="built again"):
        run("off", cache_vector=False)
    with torch.no_grad():
        initial["model.norm.weight"] += 0.01  # other weights, another key
    with pytest.raises(AssertionError, match="built again"):
        run("other weights")


def test_the_steered_engine_declares_what_the_engine_samples_in(tiny_policy):
    """Before: the wrapper declared nothing, so a VSPO run sampling in bf16 looked like float32 sampling and its
    update never took autocast=auto's bf16 (its forward and backward 1.6x slower on an AVX-512 bf16 CPU)."""
    from harness.trainers.post_training import resolve_autocast
    from harness.trainers.rollout_precision import sampler_precision
    from harness.trainers.vspo import _SteeredEngine

    engine = TransformersEngine(tiny_policy, progress=False, rollout_dtype="bfloat16")
    vector = SteeringVector(
        torch.ones(tiny_policy.model.config.hidden_size), layer=0, model="tiny-random", behaviour="test"
    )
    steered = _SteeredEngine(engine, Steering(vector, [0.0]))
    assert sampler_precision(steered, tiny_policy.model) == "bfloat16"
    assert resolve_autocast("auto", sampler_precision(steered, tiny_policy.model), "float32") == "bfloat16"
