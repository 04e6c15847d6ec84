"""FakeEngine's scripted completions as a real engine would return them for the tiny model: token ids inside its
vocabulary and the policy's own log-probs of them, so a trainer can update on scripted rollouts (their lengths,
rewards and truncation chosen by the test) with its first ratio 1.

FakeEngine's ids are crc32 % 50,000 per word, and tiny-random's vocabulary has 49,152 entries, so a word may fall
outside it; here every id is folded into 100..1099."""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.testing import FakeEngine
from harness.trainers.policy_gradient import pad_completions, sequence_logprobs


def _fold(ids: list[int]) -> list[int]:
    return [100 + t % 1000 for t in ids]


class SmallVocabEngine(FakeEngine):
    def __init__(self, policy, responses) -> None:
        super().__init__(responses)
        self.policy = policy

    def generate(self, prompts, params, *, desc: str = "", samples=None):
        out = [
            replace(c, prompt_ids=_fold(c.prompt_ids), token_ids=_fold(c.token_ids))
            for c in super().generate(prompts, params, desc=desc, samples=samples)
        ]
        batch = pad_completions(out, self.policy.tokenizer.pad_token_id)
        with torch.no_grad():
            logp = sequence_logprobs(
                self.policy.model,
                batch["input_ids"],
                batch["attention_mask"],
                int(batch["prompt_width"]),
                params.temperature,
            )
        return [replace(c, logprobs=logp[r, : len(c.token_ids)].tolist()) for r, c in enumerate(out)]
