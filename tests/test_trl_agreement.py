"""Our GRPO loss equals TRL's GRPOTrainer loss on identical inputs, where the configurations coincide.

Identical inputs: the tiny random model's weights, prompt and completion token ids (completions of different lengths,
so the sequence / token / constant normalisations are told apart), rewards, old log-probs (perturbed, so the ratio
leaves 1 and the clip is active). Ours is ``GRPOTrainer.update`` (what a training step runs); TRL's is its own
``_generate_and_score_completions`` (tokenisation, padding, rewards -> advantages, reference log-probs) with the
generation replaced by our token ids, then ``compute_loss``. bench/grpo_step_vs_trl.py reports more configurations.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from types import MethodType

import pytest
import torch

pytest.importorskip("trl")

from harness.trainers.grpo import GRPOTrainer
from harness.types import Completion

PROMPTS = ["What is 2 + 7?", "Name a prime number."]
G = 4
MAX_NEW = 8
REWARDS = [0.0, 1.0, 0.5, 1.0, 0.25, 0.0, 1.0, 0.75]  # by row, prompt-major

# ours (GRPOTrainer options) <-> TRL (GRPOConfig options)
PAIRS = {
    "grpo": ({"loss_norm": "sequence", "advantage": "grpo"}, {"loss_type": "grpo", "scale_rewards": "group"}),
    "dapo": (
        {"loss_norm": "token", "advantage": "grpo", "eps_high": 0.28},
        {"loss_type": "dapo", "scale_rewards": "group", "epsilon_high": 0.28},
    ),
    "dr_grpo": ({"loss_norm": "constant", "advantage": "dr_grpo"}, {"loss_type": "dr_grpo", "scale_rewards": "none"}),
    "grpo+kl": (
        {"loss_norm": "sequence", "advantage": "grpo", "beta": 0.04},
        {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.04, "use_bias_correction_kl": False},
    ),
    "mask_truncated": (
        {"loss_norm": "token", "advantage": "grpo", "mask_truncated": True},
        {"loss_type": "dapo", "scale_rewards": "group", "mask_truncated_completions": True},
    ),
    "gspo": (
        {"loss_norm": "sequence", "advantage": "grpo", "importance_sampling_level": "sequence"},
        {"loss_type": "grpo", "scale_rewards": "group", "importance_sampling_level": "sequence"},
    ),
}


class NoStep:
    def __init__(self, params) -> None:
        self.params = list(params)
        self.param_groups = [{"params": self.params, "lr": 0.0}]  # the trainer reads and sets the rate here

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        pass


@pytest.fixture(scope="module")
def batch():
    """A fixed batch: our tokenisation of the prompts, random completion ids of lengths 2..8, rewards, and old
    log-probs that are not the policy's (so ratios differ from 1)."""
    from harness.models import load_policy
    from harness.plugins import get_plugin_manager

    plugins = get_plugin_manager(autoload=False)
    policy = load_policy("tiny-random", plugins["model"])
    tok = policy.tokenizer
    generator = torch.Generator().manual_seed(0)
    completions = []
    for p, prompt in enumerate(PROMPTS):
        prompt_ids = list(
            tok.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
        )
        for j in range(G):
            n = 2 + (3 * p + 2 * j) % (MAX_NEW - 1)
            ids = torch.randint(100, 5000, (n,), generator=generator).tolist()
            if n < MAX_NEW:  # a finished completion ends in EOS, as the engine returns it (TRL reads truncation so)
                ids[-1] = tok.eos_token_id
            completions.append(
                Completion(
                    prompt_index=p,
                    sample_index=j,
                    prompt_ids=prompt_ids,
                    token_ids=ids,
                    logprobs=[],
                    text=tok.decode(ids, skip_special_tokens=True),
                    finished=n < MAX_NEW,
                )
            )
    assert len({len(c.token_ids) for c in completions}) > 3
    # old log-probs: the policy's own plus noise
    from harness.trainers.policy_gradient import pad_completions, sequence_logprobs

    padded = pad_completions(completions, tok.pad_token_id)
    with torch.no_grad():
        logp = sequence_logprobs(
            policy.model, padded["input_ids"], padded["attention_mask"], int(padded["prompt_width"])
        )
    completions = [
        replace(
            c,
            logprobs=[
                float(x) + 0.3 * float(torch.randn((), generator=generator)) for x in logp[r, : len(c.token_ids)]
            ],
        )
        for r, c in enumerate(completions)
    ]
    return plugins, policy, completions


def moved(model):
    """The model some way from itself as loaded (TRL's reference is reloaded from the model's folder)."""
    out = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in out.parameters():
            p.add_(0.5 * p.std().nan_to_num(0.0) * torch.randn(p.shape, generator=generator))
    return out


def our_loss(plugins, policy, completions, options, start):
    trainer = GRPOTrainer(
        plugins=plugins,
        prompts_per_step=len(PROMPTS),
        group_size=G,
        max_new_tokens=MAX_NEW,
        micro_batch=len(completions),
        max_grad_norm=1e9,
        **options,
    )
    model = copy.deepcopy(start)
    rewards = torch.tensor(REWARDS).view(-1, 1, 1)
    advantages = trainer.estimator(rewards, torch.tensor([c.prompt_index for c in completions]), torch.tensor([1.0]))
    reference = copy.deepcopy(policy.model).requires_grad_(False) if trainer.config.beta > 0 else None
    stats = trainer.update(model, policy.tokenizer, NoStep(model.parameters()), reference, completions, advantages)
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    return stats["loss"], grad, advantages


def trl_loss(policy, completions, options, start, out_dir):
    from datasets import Dataset
    from trl import GRPOConfig
    from trl import GRPOTrainer as TRLTrainer

    by_text = {}
    for c, r in zip(completions, REWARDS, strict=True):
        by_text.setdefault(c.text, r)
    assert len(by_text) == len(completions)

    def reward(completions, **_):
        return [by_text[c[-1]["content"]] for c in completions]

    args = GRPOConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=len(completions),
        num_generations=G,
        max_completion_length=MAX_NEW,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        **options,
    )
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS])
    model = copy.deepcopy(start)
    trainer = TRLTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=policy.tokenizer
    )
    seen = []

    def fixed_generation(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        seen.extend(list(p) for p in prompt_ids)
        return [list(c.token_ids) for c in completions], None

    trainer._generate_single_turn = MethodType(fixed_generation, trainer)
    model.eval()
    inputs = trainer._generate_and_score_completions(
        [{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS for _ in range(G)]
    )
    assert seen == [c.prompt_ids for c in completions], "TRL tokenised the prompts differently"
    old = torch.zeros_like(inputs["completion_mask"], dtype=torch.float32)
    for r, c in enumerate(completions):
        old[r, : len(c.logprobs)] = torch.tensor(c.logprobs)
    inputs["old_per_token_logps"] = old
    trainer.current_gradient_accumulation_steps = 1
    model.train()
    loss = trainer.compute_loss(model, inputs)
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    return float(loss.detach()), grad, inputs["advantages"]


@pytest.mark.parametrize("name", list(PAIRS))
def test_our_loss_equals_trls(batch, name, tmp_path):
    plugins, policy, completions = batch
    ours_options, trl_options = PAIRS[name]
    start = moved(policy.model) if ours_options.get("beta") else policy.model
    ours, our_grad, our_adv = our_loss(plugins, policy, completions, ours_options, start)
    theirs, trl_grad, trl_adv = trl_loss(policy, completions, trl_options, start, tmp_path)
    assert torch.allclose(our_adv, trl_adv, atol=1e-6)
    assert abs(ours) > 1e-3  # not a vacuous agreement at zero
    assert ours == pytest.approx(theirs, abs=1e-6)
    assert float((our_grad - trl_grad).norm() / trl_grad.norm()) < 1e-5


def test_the_normalisations_are_told_apart(batch):
    """The batch's lengths differ, so a wrong mapping (our token mean against TRL's sequence mean) would show."""
    plugins, policy, completions = batch
    values = {
        norm: our_loss(plugins, policy, completions, {"loss_norm": norm}, policy.model)[0]
        for norm in ("sequence", "token", "constant")
    }
    assert len({round(v, 6) for v in values.values()}) == 3
