"""The small types every plugin speaks. Plain dataclasses and Protocols: no base classes to inherit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from harness.store.run_folder import RunStore

Split = Literal["train", "eval"]
Messages = list[dict[str, str]]  # chat messages: [{"role": "user", "content": "..."}]


# ----------------------------------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    id: str  # stable across runs: the same problem always has the same id
    prompt: str  # the question as the user would ask it (no chat template, no format instruction)
    answer: str | None = None  # the reference final answer, when there is one
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Score:
    """One answer, scored. The reward stays a named vector; scalars are derived only where one is needed."""

    rewards: dict[str, float]  # component name -> value; insertion order is the component order
    primary: str  # the component that pass@k counts; success means its value is >= 1
    extracted: str | None = None  # the final answer the extractor found (None when unparsed)
    unparsed: bool = False  # no final answer could be found: reported apart from "wrong"

    @property
    def success(self) -> bool:
        return self.rewards[self.primary] >= 1.0


def scalarize(rewards: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """The weighted sum w . r over the components named in ``weights`` (best@k and scalar trainers use this)."""
    return float(sum(w * rewards[name] for name, w in weights.items()))


@runtime_checkable
class Task(Protocol):
    name: str
    version: str  # bump whenever data, prompt, extraction or scoring changes; it goes into every manifest
    reward_weights: dict[str, float]  # how the reward vector is scalarised for best@k and scalar trainers

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        """Problems of a split; train and eval are disjoint by content. Deterministic for a seed."""
        ...

    def messages(self, problem: Problem) -> Messages:
        """The chat messages that ask the problem (format instructions included)."""
        ...

    def score(self, problem: Problem, completion: str) -> Score:
        """Score one completion. Must not raise on any string."""
        ...

    def data_source(self) -> dict[str, Any]:
        """Which source the problems come from and its version, e.g. {"source": "reasoning-gym", "version": ...}."""
        ...


# ----------------------------------------------------------------------------------------------------------------
# Rollout engine
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1  # samples per prompt
    max_new_tokens: int = 128
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 means no top-k cut
    seed: int = 0


@dataclass
class Completion:
    prompt_index: int  # index into the prompts given to generate()
    sample_index: int  # 0..n-1 within its prompt
    prompt_ids: list[int]
    token_ids: list[int]  # generated tokens, EOS included when the model stopped
    logprobs: list[float]  # log p(token) under the sampling distribution (the policy at the sampling temperature,
    # steered when steering was given), one per token_ids entry
    text: str  # decoded token_ids without special tokens
    finished: bool  # True when the model emitted EOS; False when cut at max_new_tokens


@runtime_checkable
class Engine(Protocol):
    def generate(self, prompts: Sequence[Messages], params: SamplingParams, *, desc: str = "") -> list[Completion]:
        """Completions for every prompt, prompt-major: all n samples of prompt 0, then prompt 1, ..."""
        ...


# ----------------------------------------------------------------------------------------------------------------
# Trainers and searchers
# ----------------------------------------------------------------------------------------------------------------


@runtime_checkable
class Searcher(Protocol):
    def search(self, engine: Engine, task: Task, problems: Sequence[Problem], *, phase: str,
               store: RunStore) -> dict[str, float]:
        """Spend the inference budget on ``problems``; write every candidate with ``store.write_samples``;
        return flat metrics (e.g. {"pass@1": 0.25, "best@4": 0.8}); the caller prefixes them with the phase."""
        ...


@runtime_checkable
class Trainer(Protocol):
    def train(self, policy: Any, engine: Engine, task: Task, problems: Sequence[Problem], *,
              store: RunStore) -> None:
        """Update ``policy`` in place; log per-step metrics with ``store.log_step``."""
        ...
