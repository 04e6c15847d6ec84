"""One GRPO step, ours against TRL's ``GRPOTrainer``, on the same model, prompts, group size and lengths; and the loss
value of both on identical inputs.

    .venv/bin/python bench/grpo_step_vs_trl.py [--model tiny-random | smollm2-135m] [--group-size 4] [--prompts 2]
        [--max-new-tokens 16] [--repeats 3] [--warmup 1] [--threads 2] [--loss grpo] [--beta 0] [--no-eos]
        [--skip loss step update] [--out bench/results/grpo_step_vs_trl.json]

Needs ``trl`` (``pip install -e '.[bench]'``). Three parts, in one process, so the ratios share the machine's load:

1. Loss agreement. One batch is sampled with our engine and reused (on a random model, which never samples EOS,
   each row is cut at a seeded length, so the sequence / token / constant normalisations give different numbers);
   the rewards are a deterministic function of the completion text, the same Python function for both. Ours is
   ``harness.trainers.grpo.GRPOTrainer.update``, the code a training step runs (``pad_completions``,
   ``sequence_logprobs``,
   ``clipped_surrogate``, ``k3_kl``, ``normalise``; advantages from the registered estimator), with an optimizer
   that does not step. TRL's is its own ``_generate_and_score_completions`` (tokenisation, padding, rewards ->
   advantages, reference log-probs) with only the generation replaced by our token ids (the prompt ids are checked
   equal to our engine's), then its ``compute_loss`` and a backward. Both get the same old log-probs: the engine's
   (what our trainer uses), those plus N(0, 0.3) noise (the ratio leaves 1 and the clip bites), or a forward pass of
   the policy ("ratio 1"). For the KL rows the policy is the loaded model with its last layer moved by weight noise
   (scaled to a k3 KL of ~0.1), the reference the loaded model (TRL reloads it from the model's folder). Reported
   per configuration: both losses, |difference|, the two gradients' difference relative to TRL's norm, the two
   advantage vectors' largest difference, the KL and the clip fraction. With group-centred advantages and ratio 1
   the GRPO (sequence-mean) loss is ~0 by construction, so there the gradient is the real check.
   Option mapping: loss_norm sequence / token / constant = TRL loss_type grpo / dapo (and bnpo, the same with one
   micro-batch) / dr_grpo; advantage grpo / dr_grpo = scale_rewards group / none; eps_low, eps_high = epsilon,
   epsilon_high; beta = beta, both the k3 estimator. TRL multiplies the KL term by the importance ratio
   (``use_bias_correction_kl``, on by default): the same value at ratio 1 but another gradient, and another value
   once the ratio moves; those rows are reported as known differences. With it off the configurations coincide.
2. One full step: generation + scoring + advantages + loss + backward + clip + optimizer step; our trainer's
   ``train`` with ``steps=1`` against TRL's ``GRPOTrainer.train()`` with ``max_steps=1`` (an in-memory dataset, a
   Python reward function, ``use_vllm=False``, fp32, no gradient checkpointing (TRL's default is on), AdamW at the
   same constant lr, grad clip 1.0, one micro-batch on both sides). Our time is the step's ``rollout_seconds +
   update_seconds``; TRL's runs from its ``on_step_begin`` to its ``on_step_end`` callback, split at
   ``_generate_and_score_completions``. Every repeat starts from a fresh copy of the same weights with the same
   seed, so each repeat of a side does the same work; the two sides sample different tokens, so their lengths
   differ unless ``--no-eos`` (EOS masked while generating, both sides: every completion is max-new-tokens long).
3. The update alone on one identical batch (the sampled one): our ``update`` against TRL's ``compute_loss`` +
   backward + clip + AdamW ``step`` on its own inputs for those token ids (plus its reference forward when beta > 0,
   which TRL does at generation time and we do in the update).

Timings: ours and TRL's alternate, warm-up repeats are dropped, and each figure is given as the min (the least
disturbed run: other processes share these CPUs) and the median, with ours/TRL as a ratio of mins, of medians, and
the median of the per-repeat ratios. Prints tables and writes the figures as JSON. Not a test
(tests/test_trl_agreement.py checks the agreement): no assertions on time.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import statistics
import tempfile
import time
import warnings
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from types import MethodType

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

import torch
import transformers
from transformers import PrinterCallback

from harness.engine.transformers_engine import TransformersEngine
from harness.models import load_policy
from harness.plugins import get_plugin_manager
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.losses import k3_kl
from harness.trainers.policy_gradient import pad_completions, sequence_logprobs
from harness.types import Problem, SamplingParams, Score

AGREE_LOSS = 1e-5  # |our loss - TRL's| below this, and
AGREE_GRAD = 1e-4  # |our gradient - TRL's| / |TRL's| below this: they agree (float32: ~4e-7 tiny, ~2e-5 SmolLM2)

# ---------------------------------------------------------------------------------------------------------------
# The shared pieces: prompts, a reward both trainers compute identically, an in-memory task for ours.
# ---------------------------------------------------------------------------------------------------------------


def text_reward(text: str) -> float:
    """A deterministic reward in {0, .25, .5, .75, 1} from the completion text: pseudo-random, so groups have
    variance on any model, and exactly the same number in both trainers (both decode with skip_special_tokens)."""
    return (zlib.crc32(text.encode()) % 5) / 4


def trl_reward(completions, **_) -> list[float]:
    """``text_reward`` as a TRL reward function (conversational completions are lists of messages)."""
    return [text_reward(c[-1]["content"] if isinstance(c, list) else c) for c in completions]


def make_problems(n: int) -> list[Problem]:
    return [
        Problem(id=f"add-{i}", prompt=f"What is {3 * i + 2} + {5 * i + 7}? Answer with a number.") for i in range(n)
    ]


class HashRewardTask:
    """The benchmark's task: the problems above, one reward component scored by ``text_reward``."""

    name = "hash-reward"
    version = "1"
    reward_weights = {"reward": 1.0}  # noqa: RUF012

    def __init__(self, problems: list[Problem]) -> None:
        self._problems = problems

    def problems(self, split, limit=None, seed=0):
        return self._problems[:limit]

    def messages(self, problem: Problem):
        return [{"role": "user", "content": problem.prompt}]

    def score(self, problem: Problem, completion: str) -> Score:
        return Score(rewards={"reward": text_reward(completion)}, primary="reward")

    def data_source(self):
        return {"source": "bench/grpo_step_vs_trl.py"}


class NullStore:
    """What ``GRPOTrainer.train`` writes to, kept in memory."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.checkpointer = None  # GRPOTrainer.train reads it (nothing to resume from, nothing saved)
        self.step_models = None  # and this (no --save-every)

    def warn(self, line):
        pass

    def log_step(self, step, metrics, stage="train") -> None:
        self.steps.append({"step": step, **metrics})

    def write_samples(self, records) -> None:
        list(records)


class NoStep:
    """An optimizer that does not step: the loss and gradients of ``update`` are read, the weights stay."""

    def __init__(self, params) -> None:
        self.params = list(params)
        self.param_groups = [{"params": self.params, "lr": 0.0}]  # the trainer reads the scheduled rate here

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------------------------
# Configurations: ours <-> TRL.
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Pairing:
    name: str
    ours: dict  # GRPOTrainer options
    trl: dict  # trl.GRPOConfig options
    # old log-probs: "engine" (the sampler's, what our trainer uses: ratio 1 up to float rounding), "noisy" (those
    # + N(0, 0.3): the clip bites), "self" (a forward pass of the policy being updated: ratio exactly 1)
    old: str = "engine"
    moved: bool = False  # the policy is the reference plus small weight noise, so the KL term is not zero
    coincide: bool = True  # False: a known difference, reported but not expected to agree
    why: str = ""


def loss_options(eps_high_dapo: float = 0.28) -> dict[str, tuple[dict, dict]]:
    """Our GRPOTrainer options and TRL's GRPOConfig options for the same loss, by TRL's loss_type name."""
    return {
        "grpo": ({"loss_norm": "sequence", "advantage": "grpo"}, {"loss_type": "grpo", "scale_rewards": "group"}),
        "dapo": (
            {"loss_norm": "token", "advantage": "grpo", "eps_high": eps_high_dapo},
            {"loss_type": "dapo", "scale_rewards": "group", "epsilon_high": eps_high_dapo},
        ),
        "bnpo": ({"loss_norm": "token", "advantage": "grpo"}, {"loss_type": "bnpo", "scale_rewards": "group"}),
        "dr_grpo": (
            {"loss_norm": "constant", "advantage": "dr_grpo"},
            {"loss_type": "dr_grpo", "scale_rewards": "none"},
        ),
    }


def pairings(beta: float = 0.04) -> list[Pairing]:
    losses = loss_options()
    grpo, dapo = losses["grpo"], losses["dapo"]
    kl_ours = {"beta": beta}
    kl_trl = {"beta": beta, "use_bias_correction_kl": False}
    kl_trl_default = {"beta": beta, "use_bias_correction_kl": True}
    return [
        *(Pairing(f"{name}, ratio != 1 (clip active)", *pair, old="noisy") for name, pair in losses.items()),
        Pairing("grpo, engine old log-probs (ratio ~1)", *grpo),
        Pairing("dapo, engine old log-probs (ratio ~1)", *dapo),
        Pairing(f"grpo + KL {beta}, ratio 1", {**grpo[0], **kl_ours}, {**grpo[1], **kl_trl}, old="self", moved=True),
        Pairing(
            f"dapo + KL {beta}, ratio != 1", {**dapo[0], **kl_ours}, {**dapo[1], **kl_trl}, old="noisy", moved=True
        ),
        Pairing(
            f"grpo + KL {beta}, TRL bias-corr., ratio 1",
            {**grpo[0], **kl_ours},
            {**grpo[1], **kl_trl_default},
            old="self",
            moved=True,
            coincide=False,
            why="TRL multiplies the KL by the (differentiable) ratio: same value at ratio 1, other gradient",
        ),
        Pairing(
            f"grpo + KL {beta}, TRL bias-corr., ratio != 1",
            {**grpo[0], **kl_ours},
            {**grpo[1], **kl_trl_default},
            old="noisy",
            moved=True,
            coincide=False,
            why="TRL's KL term is k3 x ratio, ours is k3: values differ once the ratio leaves 1",
        ),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Building either side.
# ---------------------------------------------------------------------------------------------------------------


def fresh_model(model):
    """An independent copy of the same weights, in eval mode (as loaded)."""
    clone = copy.deepcopy(model)
    clone.eval()
    return clone


def our_trainer(plugins, rows: int, group_size: int, max_new_tokens: int, options: dict, **more) -> GRPOTrainer:
    return GRPOTrainer(
        plugins=plugins,
        prompts_per_step=rows // group_size,
        group_size=group_size,
        max_new_tokens=max_new_tokens,
        micro_batch=rows,
        **{**options, **more},
    )


def trl_trainer(
    model,
    tokenizer,
    problems,
    rows: int,
    group_size: int,
    max_new_tokens: int,
    options: dict,
    out_dir: str,
    *,
    lr: float = 3e-5,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    callbacks=(),
):
    from datasets import Dataset
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer as TRLTrainer

    settings = dict(  # ``options`` may override any of these (bench/e2e_vs_trl.py: max_steps, bf16)
        output_dir=out_dir,
        per_device_train_batch_size=rows,
        num_generations=group_size,
        gradient_accumulation_steps=1,
        max_completion_length=max_new_tokens,
        max_steps=1,
        learning_rate=lr,
        lr_scheduler_type="constant",
        optim="adamw_torch",
        weight_decay=0.0,
        max_grad_norm=max_grad_norm,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=seed,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    )
    args = TRLConfig(**{**settings, **options})
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p.prompt}]} for p in problems])
    trainer = TRLTrainer(
        model=model,
        reward_funcs=trl_reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    trainer.remove_callback(PrinterCallback)  # it prints every log dict (disable_tqdm=True puts it there)
    return trainer


def trl_batch(trainer, problems, completions, group_size: int) -> dict:
    """TRL's own inputs for ``compute_loss`` (its tokenisation, padding, rewards, advantages, reference log-probs),
    with its generation replaced by our completions' token ids (prompt-major, as its sampler repeats prompts)."""
    token_ids = [list(c.token_ids) for c in completions]
    seen_prompts: list[list[int]] = []

    def fixed_generation(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        seen_prompts.extend(list(p) for p in prompt_ids)
        return token_ids, None

    trainer._generate_single_turn = MethodType(fixed_generation, trainer)
    rows = [{"prompt": [{"role": "user", "content": p.prompt}]} for p in problems for _ in range(group_size)]
    trainer.model.eval()
    inputs = trainer._generate_and_score_completions(rows)
    ours = [list(c.prompt_ids) for c in completions]
    if seen_prompts != ours:
        raise RuntimeError("TRL tokenised the prompts differently from our engine: the inputs would not be identical")
    return inputs


def vary_lengths(completions, tokenizer, seed: int = 0) -> list:
    """The completions as sampled if their lengths differ; else (a random model never samples EOS) each cut at a
    seeded length between a quarter and all of it, as if EOS had come there. Equal lengths would make the sequence,
    token and constant normalisations proportional, so a wrong mapping between ours and TRL's would go unseen."""
    if len({len(c.token_ids) for c in completions}) > 1:
        return list(completions)
    generator = torch.Generator().manual_seed(seed)
    out = []
    for c in completions:
        n = len(c.token_ids)
        keep = int(torch.randint(max(1, n // 4), n + 1, (), generator=generator))
        ids = list(c.token_ids[:keep])
        out.append(
            replace(
                c,
                token_ids=ids,
                logprobs=list(c.logprobs[:keep]),
                text=tokenizer.decode(ids, skip_special_tokens=True),
                finished=keep < n,
            )
        )
    return out


def pad_rows(values: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros((len(values), width))
    for r, v in enumerate(values):
        out[r, : len(v)] = torch.tensor(v)
    return out


def flat_grad(model) -> torch.Tensor:
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).flatten().double() for p in model.parameters()]
    )


# ---------------------------------------------------------------------------------------------------------------
# Part 1: loss agreement.
# ---------------------------------------------------------------------------------------------------------------


def moved_copy(model, scale: float, seed: int = 0):
    """The model with its last decoder layer's weights moved by ``scale`` x their std x N(0, 1). One layer only, so
    the distance stays moderate on a deep model too (noise in all 30 layers of SmolLM2 gave a KL of ~1e14)."""
    moved = fresh_model(model)
    layers = [int(m.group(1)) for name, _ in moved.named_parameters() if (m := re.search(r"layers\.(\d+)\.", name))]
    last = f"layers.{max(layers)}." if layers else ""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in moved.named_parameters():
            if last in name:
                p.add_(scale * p.float().std().nan_to_num(0.0) * torch.randn(p.shape, generator=generator))
    return moved


def moved_policy(model, completions, pad_id: int, target_kl: float = 0.1, seed: int = 0):
    """A policy some way from its reference (the loaded model), so the KL term has a value and a gradient: the
    weight noise is scaled once so that the mean k3 KL over the batch's tokens is about ``target_kl``."""
    batch = pad_completions(completions, pad_id)
    mask = batch["completion_mask"].float()

    def mean_kl(moved) -> float:
        with torch.no_grad():
            args = (batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]))
            kl = k3_kl(sequence_logprobs(moved, *args), sequence_logprobs(model, *args))
        return float((kl * mask).sum() / mask.sum())

    scale = 0.5
    moved = moved_copy(model, scale, seed)
    kl = mean_kl(moved)
    for _ in range(3):  # the KL grows about as the square of the noise, until the model falls apart
        if kl <= 0 or 0.5 < kl / target_kl < 2 or scale >= 2.0:
            break
        scale = min(2.0, scale * (target_kl / kl) ** 0.5)
        moved = moved_copy(model, scale, seed)
        kl = mean_kl(moved)
    return moved, {"weight_noise": scale, "mean_k3_kl": kl}


def self_logprobs(model, completions, pad_id: int) -> list[list[float]]:
    """log pi(token) of each completion token under ``model`` (one forward pass, no gradient)."""
    batch = pad_completions(completions, pad_id)
    with torch.no_grad():
        logp = sequence_logprobs(model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]))
    return [logp[r, : len(c.token_ids)].tolist() for r, c in enumerate(completions)]


def loss_agreement(
    policy,
    plugins,
    problems,
    completions,
    group_size: int,
    max_new_tokens: int,
    pairs: list[Pairing],
    out_dir: str,
    seed: int = 0,
) -> list[dict]:
    rows = len(completions)
    rewards = torch.tensor([[[text_reward(c.text)]] for c in completions])
    groups = torch.tensor([c.prompt_index for c in completions])
    noise = torch.Generator().manual_seed(seed)
    noisy = [[lp + 0.3 * float(torch.randn((), generator=noise)) for lp in c.logprobs] for c in completions]
    moved, moved_info = (
        moved_policy(policy.model, completions, policy.tokenizer.pad_token_id, seed=seed)
        if any(p.moved for p in pairs)
        else (None, {})
    )
    figures = []
    for pair in pairs:
        start = moved if pair.moved else policy.model  # the weights both sides update
        olds = {"engine": [list(c.logprobs) for c in completions], "noisy": noisy}.get(pair.old)
        if olds is None:
            olds = self_logprobs(start, completions, policy.tokenizer.pad_token_id)
        batch = [copy.copy(c) for c in completions]
        for c, lp in zip(batch, olds, strict=True):
            c.logprobs = lp

        ours = our_trainer(plugins, rows, group_size, max_new_tokens, pair.ours, max_grad_norm=1e9)
        model = fresh_model(start)
        advantages = ours.estimator(rewards, groups, torch.tensor([1.0]))
        # the reference is the loaded model, as TRL's (it reloads it from the model's folder)
        reference = fresh_model(policy.model).requires_grad_(False) if ours.config.beta > 0 else None
        stats = ours.update(model, policy.tokenizer, NoStep(model.parameters()), reference, batch, advantages)
        our_grad = flat_grad(model)

        trl_model = fresh_model(start)
        trl = trl_trainer(
            trl_model,
            policy.tokenizer,
            problems,
            rows,
            group_size,
            max_new_tokens,
            pair.trl,
            out_dir,
            max_grad_norm=1e9,
            seed=seed,
        )
        inputs = trl_batch(trl, problems, batch, group_size)
        inputs["old_per_token_logps"] = pad_rows(olds, inputs["completion_ids"].shape[1])
        trl.current_gradient_accumulation_steps = 1
        trl.model.train()
        trl_model.zero_grad(set_to_none=True)
        trl_loss = trl.compute_loss(trl.model, inputs)
        trl_loss.backward()
        trl_grad = flat_grad(trl_model)

        adv_diff = float((advantages - inputs["advantages"].cpu()).abs().max())
        diff = abs(stats["loss"] - float(trl_loss.detach()))
        grad_rel = float((our_grad - trl_grad).norm() / trl_grad.norm().clamp(min=1e-30))
        figures.append(
            {
                "config": pair.name,
                "ours": pair.ours,
                "trl": pair.trl,
                "old_logps": pair.old,
                "moved": moved_info if pair.moved else None,
                "our_loss": stats["loss"],
                "trl_loss": float(trl_loss.detach()),
                "abs_diff": diff,
                "our_kl": stats["kl"],
                "advantage_max_abs_diff": adv_diff,
                "grad_rel_diff": grad_rel,
                "our_grad_norm": float(our_grad.norm()),
                "trl_grad_norm": float(trl_grad.norm()),
                "clip_fraction": stats["clip_fraction"],
                "coincide": pair.coincide,
                "why": pair.why,
                "agree": diff < AGREE_LOSS and grad_rel < AGREE_GRAD,
            }
        )
        del model, trl_model, trl, reference
    return figures


# ---------------------------------------------------------------------------------------------------------------
# Part 2: one full step.
# ---------------------------------------------------------------------------------------------------------------


def eos_ids(model, tokenizer) -> list[int]:
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids |= set(configured) if isinstance(configured, (list, tuple)) else {configured}
    return sorted(i for i in ids if i is not None)


class NoEos:
    """While active, the LM head's output gives EOS a logit of -inf: every completion runs to the generation budget,
    so both trainers generate exactly rows x max_new_tokens tokens (the same work, whatever they sample). Used around
    generation only: TRL's training forward never calls the LM head module (its fused head reads the weight), ours
    does, so the hook is removed before any loss is computed."""

    def __init__(self, model, tokenizer, active: bool = True) -> None:
        self.head = model.get_output_embeddings()
        self.ids = torch.tensor(eos_ids(model, tokenizer))
        self.active = active
        self.handle = None

    def __enter__(self):
        if self.active:
            self.handle = self.head.register_forward_hook(
                lambda module, args, out: out.index_fill(-1, self.ids.to(out.device), float("-inf"))
            )
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


class RecordingEngine:
    """Our engine, recording the completions of each call (lengths for the table), optionally without EOS."""

    def __init__(self, engine: TransformersEngine, no_eos: bool) -> None:
        self.engine = engine
        self.no_eos = no_eos
        self.completions: list = []

    def generate(self, prompts, params, **kw):
        policy = self.engine.policy
        with NoEos(policy.model, policy.tokenizer, self.no_eos):
            out = self.engine.generate(prompts, params, **kw)
        self.completions.extend(out)
        return out


class StepClock:
    """A TRL callback: the wall time from ``on_step_begin`` to ``on_step_end``."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        clock = self

        class _Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                clock.begin = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                clock.seconds.append(time.perf_counter() - clock.begin)

        self.callback = _Callback()
        self.begin = 0.0
        self.seconds: list[float] = []


def our_step(policy, plugins, problems, group_size, max_new_tokens, options, lr, seed, no_eos=False) -> dict:
    model = fresh_model(policy.model)
    step_policy = copy.copy(policy)
    step_policy.model = model
    engine = RecordingEngine(TransformersEngine(step_policy, progress=False), no_eos)
    trainer = our_trainer(
        plugins, len(problems) * group_size, group_size, max_new_tokens, options, steps=1, lr=lr, seed=seed
    )
    store = NullStore()
    started = time.perf_counter()
    trainer.train(step_policy, engine, HashRewardTask(problems), problems, store=store)
    wall = time.perf_counter() - started
    m = store.steps[0]
    lengths = [len(c.token_ids) for c in engine.completions]
    return {
        "step_s": m["rollout_seconds"] + m["update_seconds"],
        "rollout_s": m["rollout_seconds"],
        "update_s": m["update_seconds"],
        "train_call_s": wall,
        "tokens_mean": sum(lengths) / len(lengths),
        "tokens_max": max(lengths),
        "loss": m["loss"],
        "reward_mean": m["reward_mean"],
    }


def trl_step(policy, problems, group_size, max_new_tokens, options, lr, seed, out_dir, no_eos=False) -> dict:
    model = fresh_model(policy.model)
    clock = StepClock()
    trainer = trl_trainer(
        model,
        policy.tokenizer,
        problems,
        len(problems) * group_size,
        group_size,
        max_new_tokens,
        options,
        out_dir,
        lr=lr,
        seed=seed,
        callbacks=[clock.callback],
    )
    original = trainer._generate_and_score_completions
    generate = trainer._generate_single_turn
    rollout: dict[str, float] = {}

    def timed(inputs):  # generation + scoring + advantages: what our step calls rollout_seconds
        t0 = time.perf_counter()
        out = original(inputs)
        rollout["seconds"] = time.perf_counter() - t0
        lengths = out["completion_mask"].sum(-1).float()
        rollout["tokens_mean"], rollout["tokens_max"] = float(lengths.mean()), int(lengths.max())
        return out

    def generate_without_eos(*args, **kw):
        with NoEos(model, policy.tokenizer, no_eos):
            return generate(*args, **kw)

    trainer._generate_and_score_completions = timed
    trainer._generate_single_turn = generate_without_eos
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    step = clock.seconds[0]
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {
        "step_s": step,
        "rollout_s": rollout["seconds"],
        "update_s": step - rollout["seconds"],
        "train_call_s": wall,
        "tokens_mean": rollout["tokens_mean"],
        "tokens_max": rollout["tokens_max"],
        "loss": losses[0] if losses else None,
        "reward_mean": rewards[0] if rewards else None,
    }


# ---------------------------------------------------------------------------------------------------------------
# Part 3: the update alone, on identical batches.
# ---------------------------------------------------------------------------------------------------------------


def our_update(policy, plugins, completions, group_size, max_new_tokens, options, lr, repeats, warmup) -> list[float]:
    rows = len(completions)
    trainer = our_trainer(plugins, rows, group_size, max_new_tokens, options, lr=lr)
    model = fresh_model(policy.model)
    reference = fresh_model(policy.model).requires_grad_(False) if trainer.config.beta > 0 else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    rewards = torch.tensor([[[text_reward(c.text)]] for c in completions])
    advantages = trainer.estimator(rewards, torch.tensor([c.prompt_index for c in completions]), torch.tensor([1.0]))
    times = []
    for _ in range(warmup + repeats):
        t0 = time.perf_counter()
        trainer.update(model, policy.tokenizer, optimizer, reference, completions, advantages)
        times.append(time.perf_counter() - t0)
    return times[warmup:]


def trl_update(
    policy, problems, completions, group_size, max_new_tokens, options, lr, repeats, warmup, out_dir
) -> list[float]:
    rows = len(completions)
    model = fresh_model(policy.model)
    trainer = trl_trainer(model, policy.tokenizer, problems, rows, group_size, max_new_tokens, options, out_dir, lr=lr)
    inputs = trl_batch(trainer, problems, completions, group_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    trainer.current_gradient_accumulation_steps = 1
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    times = []
    for _ in range(warmup + repeats):
        t0 = time.perf_counter()
        if trainer.beta != 0.0:  # TRL takes the reference log-probs at generation time; ours in the update
            with torch.no_grad():
                inputs["ref_per_token_logps"] = trainer._get_per_token_logps_and_entropies(
                    trainer.ref_model, ids, mask, inputs["completion_ids"].shape[1], batch_size=rows
                )[0]
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(model, inputs)
        trainer.accelerator.backward(loss)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        times.append(time.perf_counter() - t0)
    return times[warmup:]


# ---------------------------------------------------------------------------------------------------------------


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-random", help="tiny-random (quick) or smollm2-135m (the real figure)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed repeats first, per side")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument(
        "--loss",
        default="grpo",
        choices=["grpo", "dapo", "bnpo", "dr_grpo"],
        help="the configuration the step and update timings use",
    )
    parser.add_argument("--beta", type=float, default=0.0, help="KL coefficient of the timed configuration")
    parser.add_argument(
        "--no-eos",
        action="store_true",
        help="suppress EOS while generating (both sides): every completion is max-new-tokens long, so "
        "both generate the same number of tokens whatever they sample",
    )
    parser.add_argument("--skip", nargs="*", default=[], choices=["loss", "step", "update"])
    parser.add_argument("--out", default="bench/results/grpo_step_vs_trl.json")
    args = parser.parse_args()

    import trl

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    plugins = get_plugin_manager(autoload=False)
    workdir = tempfile.TemporaryDirectory(prefix="grpo-vs-trl-")
    policy = load_policy(args.model, plugins["model"])
    problems = make_problems(args.prompts)
    task = HashRewardTask(problems)
    load_start = os.getloadavg()

    # The fixed batch: sampled once with our engine, reused by every comparison.
    engine = TransformersEngine(policy, progress=False)
    completions = engine.generate(
        [task.messages(p) for p in problems],
        SamplingParams(n=args.group_size, max_new_tokens=args.max_new_tokens, seed=1234),
    )
    lengths = [len(c.token_ids) for c in completions]
    print(
        f"model {args.model}, {args.prompts} prompts x G={args.group_size}, max {args.max_new_tokens} new tokens "
        f"(sampled lengths {min(lengths)}-{max(lengths)}), threads {args.threads}; torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {trl.__version__}; load {load_start[0]:.2f}"
    )
    report: dict = {
        "model": args.model,
        "prompts": args.prompts,
        "group_size": args.group_size,
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "threads": args.threads,
        "lr": args.lr,
        "no_eos": args.no_eos,
        "timed_loss": args.loss,
        "timed_beta": args.beta,
        "sampled_lengths": lengths,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }

    with workdir as tmp:
        out_dir = str(Path(tmp) / "trl")
        if "loss" not in args.skip:
            varied = vary_lengths(completions, policy.tokenizer)
            figures = loss_agreement(
                policy, plugins, problems, varied, args.group_size, args.max_new_tokens, pairings(), out_dir
            )
            report["agreement"] = figures
            report["agreement_lengths"] = [len(c.token_ids) for c in varied]
            print(
                f"\n{'configuration':44s} {'ours':>12s} {'TRL':>12s} {'|diff|':>8s} {'grad rel':>8s} "
                f"{'adv diff':>8s} {'KL':>7s} {'clip':>4s}  agree"
            )
            for f in figures:
                agree = "yes" if f["agree"] else "no"
                note = "" if f["coincide"] else f"  (known: {f['why']})"
                print(
                    f"{f['config']:44s} {f['our_loss']:12.8f} {f['trl_loss']:12.8f} {f['abs_diff']:8.1e} "
                    f"{f['grad_rel_diff']:8.1e} {f['advantage_max_abs_diff']:8.1e} {f['our_kl']:7.4f} "
                    f"{f['clip_fraction']:4.2f}  {agree}{note}"
                )

        timed_ours, timed_trl = loss_options()[args.loss]
        ours_opts = {**timed_ours, "beta": args.beta}
        trl_opts = {**timed_trl, "beta": args.beta}  # TRL's defaults otherwise (bias-corrected KL when beta > 0)

        if "step" not in args.skip:
            runs: dict[str, list[dict]] = {"ours": [], "trl": []}
            for i in range(args.warmup + args.repeats):  # interleaved, so both sides see the same load
                torch.set_num_threads(args.threads)
                o = our_step(
                    policy, plugins, problems, args.group_size, args.max_new_tokens, ours_opts, args.lr, 0, args.no_eos
                )
                torch.set_num_threads(args.threads)
                t = trl_step(
                    policy, problems, args.group_size, args.max_new_tokens, trl_opts, args.lr, 0, out_dir, args.no_eos
                )
                if i >= args.warmup:
                    runs["ours"].append(o)
                    runs["trl"].append(t)
            keys = ("step_s", "rollout_s", "update_s")
            summary = {
                side: {k: median([r[k] for r in rs]) for k in (*keys, "train_call_s", "tokens_mean")}
                for side, rs in runs.items()
            }
            fastest = {side: {k: min(r[k] for r in rs) for k in keys} for side, rs in runs.items()}
            ratios = {k: summary["ours"][k] / summary["trl"][k] for k in keys}
            ratios_min = {k: fastest["ours"][k] / fastest["trl"][k] for k in keys}
            # each repeat's ours/TRL, from back-to-back runs: steadier than a ratio of medians when the load moves
            paired = {k: median([o[k] / t[k] for o, t in zip(runs["ours"], runs["trl"], strict=True)]) for k in keys}
            report["step"] = {
                "no_eos": args.no_eos,
                "runs": runs,
                "median": summary,
                "min": fastest,
                "ratio_ours_over_trl": ratios,
                "ratio_of_mins": ratios_min,
                "paired_ratio_median": paired,
            }
            print(
                f"\none full step ({args.loss}, beta {args.beta}{', EOS suppressed' if args.no_eos else ''}), "
                f"{args.repeats} repeats, seconds as min / median:"
            )
            print(f"{'':16s} {'step':>15s} {'generate+score':>15s} {'update':>15s} {'tokens/row':>10s} {'longest':>7s}")
            for side in ("ours", "trl"):
                m, f = summary[side], fastest[side]
                cells = " ".join(f"{f[k]:7.3f}/{m[k]:7.3f}" for k in keys)
                longest = max(r["tokens_max"] for r in runs[side])
                print(f"{side:16s} {cells} {m['tokens_mean']:10.1f} {longest:7d}")
            for label, r in (
                ("ours/TRL, mins", ratios_min),
                ("ours/TRL, medians", ratios),
                ("ours/TRL, paired", paired),
            ):
                print(f"{label:16s} " + " ".join(f"{r[k]:15.2f}" for k in keys))

        if "update" not in args.skip:
            ours_t, trl_t = [], []
            for _ in range(args.repeats):  # interleaved rounds of (warm-up + 1)
                torch.set_num_threads(args.threads)
                ours_t += our_update(
                    policy,
                    plugins,
                    completions,
                    args.group_size,
                    args.max_new_tokens,
                    ours_opts,
                    args.lr,
                    1,
                    args.warmup,
                )
                torch.set_num_threads(args.threads)
                trl_t += trl_update(
                    policy,
                    problems,
                    completions,
                    args.group_size,
                    args.max_new_tokens,
                    trl_opts,
                    args.lr,
                    1,
                    args.warmup,
                    out_dir,
                )
            upd = {
                "ours_s": ours_t,
                "trl_s": trl_t,
                "ours_median_s": median(ours_t),
                "trl_median_s": median(trl_t),
                "ours_min_s": min(ours_t),
                "trl_min_s": min(trl_t),
                "ratio_ours_over_trl": median(ours_t) / median(trl_t),
                "ratio_of_mins": min(ours_t) / min(trl_t),
                "paired_ratio_median": median([o / t for o, t in zip(ours_t, trl_t, strict=True)]),
            }
            report["update"] = upd
            print(
                f"\nloss + backward + clip + AdamW step on the identical batch ({len(completions)} rows, "
                f"{sum(lengths)} completion tokens), {args.repeats} repeats, seconds as min / median:"
            )
            print(
                f"ours {upd['ours_min_s']:.3f} / {upd['ours_median_s']:.3f}   TRL {upd['trl_min_s']:.3f} / "
                f"{upd['trl_median_s']:.3f}   ours/TRL: mins {upd['ratio_of_mins']:.2f}, medians "
                f"{upd['ratio_ours_over_trl']:.2f}, paired {upd['paired_ratio_median']:.2f}"
            )

    report["loadavg_start"] = load_start
    report["loadavg_end"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"load average {load_start[0]:.2f} -> {report['loadavg_end'][0]:.2f}; wrote {out}")


if __name__ == "__main__":
    main()
