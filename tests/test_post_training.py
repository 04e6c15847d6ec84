"""Post-training a real model: LoRA adapters, the KL reference as adapters-off, autocast and bf16 log-probs, gradient
checkpointing, the learning-rate schedule, several passes per batch, and the trained policy saved and reloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_runs import OWN_SIZES, tiny_config, with_uppercase_task

from harness.engine.transformers_engine import TransformersEngine
from harness.hookspecs import hookimpl
from harness.models import load_policy
from harness.plugins import get_plugin_manager
from harness.run import run
from harness.store.policy_export import push_to_hub, save_policy
from harness.store.run_folder import RunStore
from harness.testing import UppercaseTask
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.policy_gradient import pad_completions, sequence_logprobs
from harness.trainers.post_training import (
    AdaptersOff,
    PostTrainingOptions,
    lr_factor,
    prepare_policy,
    resolve_autocast,
)
from harness.trainers.post_training import checkpointing as is_checkpointing
from harness.types import SamplingParams, TrainerCapabilities, capabilities_of

pytest.importorskip("peft")


def _rollouts(policy, n: int = 4, tokens: int = 8):
    task = UppercaseTask()
    engine = TransformersEngine(policy, progress=False)
    return engine.generate(
        [task.messages(p) for p in task.problems("train")],
        SamplingParams(n=n, max_new_tokens=tokens, temperature=1.0, seed=3),
    )


def _logp(model, completions, pad_id, **autocast):
    batch = pad_completions(completions, pad_id)
    with torch.no_grad(), torch.autocast("cpu", **autocast) if autocast else torch.no_grad():
        logp = sequence_logprobs(model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]))
    return logp, batch["completion_mask"].bool()


def _plain_logp(model, completions, pad_id):
    """The reference computation: one completion at a time, no padding, full float32 log-softmax."""
    rows = []
    for c in completions:
        ids = torch.tensor([c.prompt_ids + c.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids.to(next(model.parameters()).device)).logits.float()
        logp = logits[0, len(c.prompt_ids) - 1 : -1].log_softmax(-1)
        rows.append(logp.gather(-1, ids[0, len(c.prompt_ids) :, None]).squeeze(-1))
    return rows


def test_lora_trains_only_the_adapters_and_its_kl_reference_is_the_adapters_off(tiny_policy, plugins, tmp_path):
    base = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=2,
        prompts_per_step=2,
        group_size=4,
        max_new_tokens=8,
        lr=1e-2,
        beta=0.04,
        lora_r=4,
        lora_alpha=8,
    )
    engine = TransformersEngine(tiny_policy, progress=False)
    store = RunStore(tmp_path, "run")
    trainer.train(tiny_policy, engine, UppercaseTask(), UppercaseTask().problems("train"), store=store)
    after = tiny_policy.model.state_dict()
    lora = [k for k in after if "lora_" in k]
    assert lora, "the policy should hold LoRA layers in place"
    for key, value in after.items():  # peft renames a wrapped Linear's weight to <name>.base_layer.weight
        original = key.replace(".base_layer", "")
        if "lora_" not in key:
            assert torch.equal(value, base[original]), f"{key} is frozen under LoRA"
    assert any(not torch.equal(after[k], torch.zeros_like(after[k])) for k in lora if "lora_B" in k)
    steps = [json.loads(line) for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    assert steps[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # step 0: the policy is the reference
    assert steps[1]["kl"] > 1e-6 and all(s["grad_norm"] > 0 for s in steps)
    # the reference is the model before training: adapters off == the untouched base weights
    completions = _rollouts(tiny_policy)
    pad = tiny_policy.tokenizer.pad_token_id
    off, mask = _logp(AdaptersOff(tiny_policy.adapter), completions, pad)
    fresh = load_policy("tiny-random", plugins["model"])
    assert torch.allclose(off[mask], _logp(fresh.model, completions, pad)[0][mask], atol=1e-5)
    on, _ = _logp(tiny_policy.model, completions, pad)
    assert not torch.allclose(on[mask], off[mask], atol=1e-3)


def test_a_lora_update_moves_probability_towards_positive_advantages(tiny_policy, plugins):
    prepare_policy(tiny_policy, PostTrainingOptions(lora_r=8, lora_alpha=16))
    task = UppercaseTask()
    completions = _rollouts(tiny_policy, n=8)
    rewards = torch.tensor([[[task.score(None, c.text).rewards["upper"]]] for c in completions])
    trainer = GRPOTrainer(plugins=plugins, lr=1e-2, max_new_tokens=8)
    advantages = trainer.estimator(rewards, torch.tensor([c.prompt_index for c in completions]), torch.tensor([1.0]))
    pad = tiny_policy.tokenizer.pad_token_id

    def sequence_logp():
        logp, mask = _logp(tiny_policy.model, completions, pad)
        return (logp * mask).sum(-1)

    before = sequence_logp()
    optimizer = torch.optim.AdamW([p for p in tiny_policy.model.parameters() if p.requires_grad], lr=1e-2)
    trainer.update(tiny_policy.model, tiny_policy.tokenizer, optimizer, None, completions, advantages)
    delta = sequence_logp() - before
    assert delta[advantages > 0].mean() > delta[advantages < 0].mean() + 0.05


@pytest.mark.parametrize("precision", ["autocast-bfloat16", "weights-bfloat16"])
def test_log_probs_in_low_precision_agree_with_a_plain_float32_forward(plugins, precision):
    """What enters the loss, however computed, stays close to a plain fp32 forward of each sequence alone; the
    bound is what bf16's 8-bit mantissa allows over a 2-layer model (measured max ~0.02), far below the ~1 nat a
    wrong token or position would cost."""
    policy = load_policy("tiny-random", plugins["model"])
    completions = _rollouts(policy)
    pad = policy.tokenizer.pad_token_id
    plain = _plain_logp(policy.model, completions, pad)
    if precision == "weights-bfloat16":
        low = load_policy("tiny-random", plugins["model"], dtype="bfloat16")
        logp, mask = _logp(low.model, completions, pad)
    else:
        logp, mask = _logp(policy.model, completions, pad, dtype=torch.bfloat16)
    assert logp.dtype == torch.float32
    full, _ = _logp(policy.model, completions, pad)
    worst = max(float((logp[r][mask[r]] - plain[r]).abs().max()) for r in range(len(completions)))
    exact = max(float((full[r][mask[r]] - plain[r]).abs().max()) for r in range(len(completions)))
    assert exact < 1e-4  # the batched fp32 computation is the plain one
    assert 0 < worst < 0.1


def test_gradient_checkpointing_gives_the_same_gradients(plugins):
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        policy = load_policy("tiny-random", plugins["model"])
        prepare_policy(policy, PostTrainingOptions(gradient_checkpointing=checkpointing))
        assert is_checkpointing(policy.model) == checkpointing
        completions = _rollouts(policy)
        batch = pad_completions(completions, policy.tokenizer.pad_token_id)
        policy.model.train()
        logp = sequence_logprobs(policy.model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]))
        (logp * batch["completion_mask"]).sum().backward()
        grads.append({n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        assert torch.allclose(grad, grads[1][name], atol=1e-5), name


def test_learning_rate_schedules_by_hand():
    options = PostTrainingOptions(lr_scheduler="linear", warmup_ratio=0.2)
    # 10 steps, ceil(0.2 * 10) = 2 warm-up steps at 1/3, 2/3; then 1 - (s - 2) / 8
    assert [round(lr_factor(s, 10, options), 4) for s in range(10)] == [
        0.3333,
        0.6667,
        1.0,
        0.875,
        0.75,
        0.625,
        0.5,
        0.375,
        0.25,
        0.125,
    ]
    cosine = PostTrainingOptions(lr_scheduler="cosine")
    assert lr_factor(0, 8, cosine) == 1.0 and lr_factor(4, 8, cosine) == pytest.approx(0.5)
    assert lr_factor(7, 8, cosine) == pytest.approx(0.5 * (1 + torch.cos(torch.tensor(7 / 8 * torch.pi)).item()))
    assert all(lr_factor(s, 5, PostTrainingOptions()) == 1.0 for s in range(5))
    with pytest.raises(ValueError, match="lr_scheduler"):
        GRPOTrainer(lr_scheduler="exponential")
    with pytest.raises(ValueError, match="autocast"):
        GRPOTrainer(autocast="int8")


def test_the_schedule_and_several_passes_per_batch_reach_the_optimizer(tiny_policy, plugins, tmp_path):
    trainer = GRPOTrainer(
        plugins=plugins,
        steps=2,
        prompts_per_step=2,
        group_size=4,
        max_new_tokens=8,
        lr=1e-2,
        num_iterations=2,
        lr_scheduler="linear",
        warmup_ratio=0.5,
    )
    store = RunStore(tmp_path, "run")
    trainer.train(
        tiny_policy,
        TransformersEngine(tiny_policy, progress=False),
        UppercaseTask(),
        UppercaseTask().problems("train"),
        store=store,
    )
    steps = [json.loads(line) for line in (store.dir / "steps.jsonl").read_text().splitlines()]
    assert [s["lr"] for s in steps] == pytest.approx([1e-2 * 0.5, 1e-2 * 1.0])
    # the second pass sees a policy the first pass moved: its ratios leave 1 and the mean over passes shows it
    assert all(s["ratio_mean"] != pytest.approx(1.0, abs=1e-4) for s in steps)
    assert all("clip_fraction_last_pass" in s for s in steps)


def test_autocast_auto_trains_in_the_rollouts_bf16_only_over_float32_weights():
    assert resolve_autocast("auto", "bfloat16", "float32") == "bfloat16"
    assert resolve_autocast("auto", "float32", "float32") == ""  # e.g. an AVX2 CPU: fp32 rollouts, fp32 update
    assert resolve_autocast("auto", "bfloat16", "bfloat16") == ""  # bf16 weights compute in bf16 already
    assert resolve_autocast("auto", "float16", "float32") == ""  # fp16 autocast without a loss scaler: never implied
    assert resolve_autocast("", "bfloat16", "float32") == ""  # explicit settings stay as they are
    assert resolve_autocast("float16", "float32", "float32") == "float16"


@pytest.mark.parametrize("rollout_dtype", ["bfloat16", None])
def test_a_trainer_resolves_autocast_auto_from_the_engine_it_trains_with(tiny_policy, plugins, tmp_path, rollout_dtype):
    trainer = GRPOTrainer(plugins=plugins, steps=1, prompts_per_step=1, group_size=2, max_new_tokens=4)
    assert trainer.config.autocast == "auto"
    before = [p.detach().clone() for p in tiny_policy.model.parameters()]
    engine = TransformersEngine(tiny_policy, progress=False, rollout_dtype=rollout_dtype)
    trainer.train(
        tiny_policy, engine, UppercaseTask(), UppercaseTask().problems("train"), store=RunStore(tmp_path, "run")
    )
    assert trainer.config.autocast == ("bfloat16" if rollout_dtype else "")
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.model.parameters(), strict=True))


@pytest.mark.parametrize("lora", [False, True])
def test_the_trained_policy_is_saved_and_evaluates_to_the_after_metrics(tmp_path, lora):
    plugins = with_uppercase_task()
    evaluation = {**OWN_SIZES, "searcher.n": "2"}  # the task's own budgets
    lora_sets = {"trainer.lora_r": "4", "trainer.save_merged": "true"} if lora else {}
    common = dict(task="uppercase", out=str(tmp_path), seed=3)
    folder = run(
        tiny_config(**common, steps=2, sets={**evaluation, "trainer.lr": "1e-2", **lora_sets}),
        plugins=plugins,
        echo=lambda _: None,
    )
    saved = folder / "model"
    weights = "adapter_model.safetensors" if lora else "model.safetensors"
    assert (saved / weights).exists() and (saved / "tokenizer.json").exists()
    assert (saved / "generation_config.json").exists()
    card = (saved / "README.md").read_text()
    metrics = json.loads((folder / "metrics.json").read_text())
    assert f"| pass@1 | {metrics['before/pass@1']:.3f} | {metrics['after/pass@1']:.3f} |" in card
    assert ("library_name: peft" in card) == lora
    assert (saved / weights).stat().st_mode & 0o044 == 0o044  # readable by colleagues, whatever safetensors did
    # the saved policy differs from the base model and reproduces the run's after-training evaluation
    trained = load_policy(str(saved), plugins["model"])
    base = load_policy("tiny-random", plugins["model"])
    completions = _rollouts(base)
    pad = base.tokenizer.pad_token_id
    assert not torch.allclose(_logp(trained.model, completions, pad)[0], _logp(base.model, completions, pad)[0])
    again = run(
        tiny_config("none", **common, model=str(saved), sets=evaluation),
        plugins=plugins,
        echo=lambda _: None,
    )
    evaluated = json.loads((again / "metrics.json").read_text())
    after = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("after/")}
    for key in ("pass@1", "pass@2", "best@1", "best@2", "mean_reward/upper"):
        assert evaluated[f"eval/{key}"] == pytest.approx(after[key], abs=1e-9), key
    if lora:  # the merged folder loads as a plain model, with the adapters folded in
        merged = load_policy(str(folder / "model-merged"), plugins["model"])
        assert merged.adapter is None and not any("lora_" in k for k in merged.model.state_dict())
        assert torch.allclose(
            _logp(merged.model, completions, pad)[0], _logp(trained.model, completions, pad)[0], atol=1e-4
        )


def test_push_to_hub_uploads_the_saved_folder(tmp_path):
    calls = []

    class FakeApi:
        def create_repo(self, repo_id, private, exist_ok):
            calls.append(("create", repo_id, private, exist_ok))

        def upload_folder(self, folder_path, repo_id, commit_message):
            calls.append(("upload", Path(folder_path).name, repo_id))
            return type("Commit", (), {"commit_url": f"https://hub/{repo_id}/commit/1"})()

    (tmp_path / "run" / "model").mkdir(parents=True)
    assert push_to_hub(tmp_path / "run", "me/policy", api=FakeApi()) == "https://hub/me/policy/commit/1"
    assert calls == [("create", "me/policy", True, True), ("upload", "model", "me/policy")]
    with pytest.raises(FileNotFoundError, match="nothing to push"):
        push_to_hub(tmp_path / "other", "me/policy", api=FakeApi())


def test_save_policy_replaces_an_earlier_save(tiny_policy, tmp_path):
    save_policy(tiny_policy, tmp_path)
    (tmp_path / "model" / "stale.txt").write_text("from an earlier save")
    save_policy(tiny_policy, tmp_path)
    assert not (tmp_path / "model" / "stale.txt").exists() and (tmp_path / "model" / "config.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temporary folder left behind


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_engine_is_sent_the_lora_policy_as_plain_merged_weights(plugins, dtype):
    """What vLLM (in process or a server) loads from a LoRA policy: the plain architecture's names, each adapted
    layer merged, so a plain model loaded from them computes what the adapted policy computes."""
    from transformers import AutoModelForCausalLM

    from harness.engine.weights import serving_weights

    policy = load_policy("tiny-random", plugins["model"], dtype=dtype)
    prepare_policy(policy, PostTrainingOptions(lora_r=4, lora_alpha=8))
    torch.manual_seed(1)
    with torch.no_grad():  # lora_B starts at zero (the adapters are a no-op): give them a real effect
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    plain = AutoModelForCausalLM.from_pretrained(policy.source, dtype=getattr(torch, dtype))
    weights = dict(serving_weights(policy.model))
    assert set(weights) == set(plain.state_dict())  # no lora_ or base_layer names
    plain.load_state_dict(weights, strict=True)
    ids = torch.tensor([[1, 5, 9, 200, 31, 7]])
    with torch.no_grad():
        adapted, served = policy.model(input_ids=ids).logits, plain(input_ids=ids).logits
        untouched = AutoModelForCausalLM.from_pretrained(policy.source, dtype=getattr(torch, dtype))(input_ids=ids)
    assert (adapted - untouched.logits).abs().max() > 0.5  # the adapters change the output ...
    assert torch.allclose(adapted.float(), served.float(), atol=1e-4 if dtype == "float32" else 5e-2)  # ... as merged
    # a model without adapters is sent its own state dict, unchanged
    assert all(torch.equal(a, b) for (_, a), b in zip(serving_weights(plain), plain.state_dict().values(), strict=True))


def test_a_lora_run_resumed_after_training_evaluates_its_trained_adapters(tmp_path):
    """The runner calls the trainer's declared ``prepare_policy`` (TrainerCapabilities.prepares_policy) before it
    restores the checkpoint of a run whose training is done: the after evaluation of the resumed run is the one the
    failed run would have reported."""
    from harness.run import resume
    from harness.searchers.best_of_k import BestOfK

    seen: dict[str, dict] = {}

    class FailsAfterOnce(BestOfK):
        def search(self, engine, task, problems, *, phase, store):
            metrics = super().search(engine, task, problems, phase=phase, store=store)
            if phase == "after" and "after" not in seen:  # the trained adapters' figures, then a failure
                seen["after"] = metrics
                raise RuntimeError("the after evaluation failed once")
            return metrics

    class Plugin:
        @hookimpl
        def harness_register_tasks(self, registry):
            registry.add("uppercase", "harness.testing:UppercaseTask", "upper-case letters (tests)")

        @hookimpl
        def harness_register_searchers(self, registry):
            registry.add("fails-after-once", FailsAfterOnce, "best-of-k whose first after evaluation fails (tests)")

    plugins = get_plugin_manager(extra_plugins=(Plugin(),), autoload=False)
    assert capabilities_of(plugins["trainer"].get("grpo").create(lora_r="4"), TrainerCapabilities).prepares_policy
    sets = {**OWN_SIZES, "trainer.lr": "1e-2", "trainer.lora_r": "4", "searcher.n": "2"}
    cfg = tiny_config(
        task="uppercase", searcher="fails-after-once", steps=2, out=str(tmp_path), seed=3, save_model=False, sets=sets
    )
    with pytest.raises(Exception, match="the after evaluation failed once"):
        run(cfg, plugins=plugins, echo=lambda _: None)
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((folder / "manifest.json").read_text())["phases_done"] == ["before", "train"]
    resume(folder, plugins=plugins, echo=lambda _: None)
    metrics = json.loads((folder / "metrics.json").read_text())
    for key, value in seen["after"].items():
        assert metrics[f"after/{key}"] == pytest.approx(value, abs=1e-9), key
    assert seen["after"]["mean_reward/upper"] != pytest.approx(metrics["before/mean_reward/upper"], abs=1e-9)


def test_a_lora_checkpoint_holds_the_adapters_only_and_resumes_to_the_same_policy(plugins, tmp_path):
    from harness.store.checkpoint import Checkpointer

    def train(policy, existing=False):
        trainer = GRPOTrainer(
            plugins=plugins,
            steps=2,
            prompts_per_step=2,
            group_size=4,
            max_new_tokens=8,
            lr=1e-2,
            lora_r=4,
            lora_alpha=8,
            seed=0,
        )
        store = RunStore(tmp_path, "run", existing=existing)
        store.checkpointer = Checkpointer(store.dir, 1)
        trainer.train(
            policy,
            TransformersEngine(policy, progress=False),
            UppercaseTask(),
            UppercaseTask().problems("train"),
            store=store,
        )
        return store.dir / "checkpoint"

    torch.manual_seed(0)
    trained = load_policy("tiny-random", plugins["model"])
    folder = train(trained)
    saved = torch.load(folder / "model.pt", weights_only=True)
    assert saved and all("lora_" in key for key in saved)  # no base weight: a resume loads those from the source
    assert set(saved) == {n for n, p in trained.model.named_parameters() if p.requires_grad}
    full = sum(t.numel() for t in trained.model.state_dict().values())
    assert sum(t.numel() for t in saved.values()) < full / 5
    # a fresh process: the base from the source, the adapters from the checkpoint, nothing left to train. The
    # checkpoint's adapters are doubled first, so the resumed policy can only have them by loading them.
    marked = {k: v * 2 for k, v in saved.items()}
    torch.save(marked, folder / "model.pt")
    torch.manual_seed(1)
    resumed = load_policy("tiny-random", plugins["model"])
    train(resumed, existing=True)
    for name, value in resumed.model.state_dict().items():
        expected = marked.get(name, trained.model.state_dict()[name])
        assert torch.equal(value, expected), name
