"""Toy tasks and a toy model for the known-outcome checks (tests/test_known_outcomes.py). Test-only.

The model is a 2-layer Llama over a 9-word vocabulary (``WORDS``): a random one samples every word with a
substantial probability, so a reward on which word comes first has signal from the first step, and a few dozen RL
steps at a high learning rate move it. The chat template writes the messages' text; words outside the vocabulary
become <unk>. The trainers' tasks give every problem the prompt "Q", so the policy cannot tell problems apart (what
the PKPO check needs). Evolve's task is answered by a scripted engine (``fixing_responder``), not by the model.
"""

from __future__ import annotations

import random
import re
import zlib
from pathlib import Path

from harness.types import Checked, Problem, Score, TaskCapabilities

WORDS = ["<pad>", "<eos>", "<unk>", "Q", "a", "b", "c", "d", "|"]
DELIMITER = "|"  # VPO's answer delimiter: one word of the vocabulary


def save_toy_model(folder: Path, seed: int = 0) -> str:
    """Write a random 2-layer Llama (hidden 32) and a word-level tokenizer over ``WORDS`` to ``folder``, loadable
    with ``harness.models.load_policy(str(folder), ...)`` like any local model folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    config = LlamaConfig(
        vocab_size=len(WORDS),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=vocab["<eos>"],
        pad_token_id=vocab["<pad>"],
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def first_word(text: str) -> str:
    words = text.split()
    return words[0] if words else ""


class _Toy:
    """What every toy task shares: ``size`` problems with the prompt "Q" (train and eval alike)."""

    name = "toy"
    version = "1"
    size = 4

    def problems(self, split, limit=None, seed=0):
        items = [Problem(id=f"{split}-{i}", prompt="Q") for i in range(self.size)]
        return items[:limit] if limit is not None else items

    def messages(self, problem):
        return [{"role": "user", "content": problem.prompt}]

    def data_source(self):
        return {"source": "tests/known_outcome_tasks.py"}


class TradeOffTask(_Toy):
    """Components a, b, c: an answer scores 1 on the component named by its first word, so no answer scores on two
    of them (they trade off completely). The weights are slightly unequal, so a scalar reward has one best answer
    ("a ...") for a single-answer policy to collapse onto, while a set of answers can cover all three."""

    name = "toy-trade-off"
    reward_weights = {"a": 1.0, "b": 0.9, "c": 0.8}  # noqa: RUF012

    def score(self, problem, completion):
        first = first_word(completion)
        return Score(
            rewards={c: float(first == c) for c in self.reward_weights},
            primary="a",
            extracted=first or None,
            unparsed=not first,
        )


class AnythingTask(_Toy):
    """One component, "answered", 1 for every answer: a task reward that prefers nothing, so whatever VSPO's
    policy learns comes from its steering reward alone."""

    name = "toy-anything"
    reward_weights = {"answered": 1.0}  # noqa: RUF012

    def score(self, problem, completion):
        return Score(rewards={"answered": 1.0}, primary="answered")


class HedgeTask(_Toy):
    """Answers are judged by their first word. "a" is the safe answer, worth 0.6 on every problem; each problem has
    one right word among b, c, d (by its index), worth 1.0, and the prompt ("Q" for all) does not say which. A policy
    maximising the mean reward writes "a" (0.6 against 1/3 for any of b, c, d); one maximising max@4, the best of 4
    samples, keeps b, c and d (and some "a"): about 0.84 against 0.6 for "a" alone."""

    name = "toy-hedge"
    size = 3
    reward_weights = {"value": 1.0}  # noqa: RUF012
    RIGHT = ("b", "c", "d")

    def score(self, problem, completion):
        first = first_word(completion)
        right = self.RIGHT[int(problem.id.rsplit("-", 1)[1]) % len(self.RIGHT)]
        value = 1.0 if first == right else 0.6 if first == "a" else 0.0
        return Score(rewards={"value": value}, primary="value", extracted=first or None, unparsed=not first)


class MissingWordsTask(_Toy):
    """An answer should contain each of the words in ``REQUIRED``; one component per word (1 when present), weighed
    equally, and "complete" (weight 0, the primary) when all are. ``check`` names the first missing word, so the
    feedback says exactly which edit improves the answer (evolve's check)."""

    name = "toy-missing-words"
    size = 8
    capabilities = TaskCapabilities(feedback=True)
    REQUIRED = ("a", "b", "c", "d", "e", "f")
    reward_weights = dict.fromkeys(REQUIRED, 1 / len(REQUIRED))

    def problems(self, split, limit=None, seed=0):
        # distinct prompts: the scripted engine's random stream depends on the prompt, as a real engine's does
        items = [Problem(id=f"{split}-{i}", prompt=f"Write the words ({split} {i}).") for i in range(self.size)]
        return items[:limit] if limit is not None else items

    def score(self, problem, completion):
        present = set(completion.split())
        rewards = {word: float(word in present) for word in self.REQUIRED}
        return Score(rewards={**rewards, "complete": float(all(rewards.values()))}, primary="complete")

    def check(self, problem, completion):
        missing = [word for word in self.REQUIRED if word not in completion.split()]
        return Checked(self.score(problem, completion), [f"missing word {missing[0]}"] if missing else [])


# What evolve's child prompt shows of the parent (harness/searchers/evolve_prompt.py: build_prompt): its scores, its
# feedback when there is any, then its text, up to the next section.
_PARENT = re.compile(r"## Current solution\nScores: [^\n]*\n(?:Feedback: ([^\n]*)\n)?(.*?)(?:\n\n## |\Z)", re.S)
_FIX = re.compile(r"missing word (\w+)")
FIX_PROBABILITY = 0.5


def fixing_responder(messages, sample_index: int, seed: int) -> str:
    """A scripted engine for ``MissingWordsTask`` (``harness.testing.FakeEngine(fixing_responder)``): shown a parent
    whose feedback names a missing word, it returns the parent with that word added, with probability
    ``FIX_PROBABILITY``; otherwise (and for the task's own prompt) a fresh answer: each required word with
    probability 1/2, plus a filler word. Random choices are seeded by (messages, sample index, seed), as a real
    engine's are."""
    rng = random.Random(zlib.crc32(repr((messages, sample_index, seed)).encode()))
    parent = _PARENT.search(messages[-1]["content"])
    fix = _FIX.search(parent.group(1) or "") if parent else None
    if fix and rng.random() < FIX_PROBABILITY:
        return f"{parent.group(2).strip()} {fix.group(1)}"
    return " ".join([w for w in MissingWordsTask.REQUIRED if rng.random() < 0.5] + ["x"])
