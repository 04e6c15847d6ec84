"""Test helpers for plugin authors and our own tests: an engine without a model, a task small enough to score by
eye, a run store in memory, and the contract checks the runner applies before a model loads, as assertions
(``check_task``, ``check_searcher``, ``check_trainer``, ``check_engine_factory``, ``check_estimator``).
Standard library only (``check_estimator`` imports torch when called), so tests that use them start in milliseconds.

A plugin author's test can be as short as::

    from harness.testing import FakeTask, check_searcher, run_searcher

    def test_my_searcher():
        searcher = MySearcher(n=4)
        check_searcher(searcher)
        metrics, store = run_searcher(searcher, FakeTask(size=3), FakeTask(size=3).problems("eval"))
        assert metrics["majority@4"] >= 0 and len(store.samples) == 12
"""

from __future__ import annotations

import re
import shutil
import tempfile
import weakref
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.plugins import contract
from harness.store.results_db import REQUIRED_SAMPLE_KEYS
from harness.types import Completion, EngineCapabilities, Messages, Problem, SamplingParams, Score, Split

Responder = Callable[[Messages, int, int], str]  # (messages, sample_index, seed) -> completion text


def fake_token_ids(text: str) -> list[int]:
    """One stable fake id per whitespace-separated word (the same word always gets the same id)."""
    return [zlib.crc32(word.encode()) % 50_000 for word in text.split()]


def hashed_answers(modulus: int = 12) -> Responder:
    """A responder that answers "The answer is N", N drawn from a hash of (prompt, sample index, seed) mod
    ``modulus``: pseudo-random like a sampled model, the same in every process (``hash()`` is salted per process,
    so it is not used), and different for a different seed or prompt."""

    def respond(messages: Messages, sample_index: int, seed: int) -> str:
        key = repr((messages, sample_index, seed)).encode()
        return f"The answer is {zlib.crc32(key) % modulus}"

    return respond


class FakeEngine:
    """The Engine protocol without a model. ``responses`` is a function ``(messages, sample_index, seed) -> str``,
    or a list whose entry ``sample_index % len`` answers every prompt. Tokens are whitespace words: a completion
    longer than ``max_new_tokens`` words is cut there and marked unfinished, as a real engine would. Every call is
    kept in ``calls`` as (prompts, params, desc) so tests can check batching and sampling options, and the
    ``samples=`` it was given (per-prompt sample counts, ``EngineCapabilities.samples_per_prompt``; None when not)
    in ``sample_counts``."""

    capabilities = EngineCapabilities(samples_per_prompt=True)

    def __init__(self, responses: Responder | Sequence[str]) -> None:
        if callable(responses):
            self._respond: Responder = responses
        else:
            texts = list(responses)
            if not texts:
                raise ValueError("FakeEngine needs at least one response")
            self._respond = lambda messages, sample_index, seed: texts[sample_index % len(texts)]
        self.calls: list[tuple[list[Messages], SamplingParams, str]] = []
        self.sample_counts: list[list[int] | None] = []

    def generate(
        self,
        prompts: Sequence[Messages],
        params: SamplingParams,
        *,
        desc: str = "",
        samples: Sequence[int] | None = None,
    ) -> list[Completion]:
        self.calls.append((list(prompts), params, desc))
        self.sample_counts.append(None if samples is None else list(samples))
        counts = [params.n] * len(prompts) if samples is None else list(samples)
        out = []
        for p, messages in enumerate(prompts):
            prompt_ids = fake_token_ids(" ".join(m["content"] for m in messages))
            for j in range(counts[p]):
                response = self._respond(messages, j, params.seed)
                words = response.split()
                finished = len(words) <= params.max_new_tokens
                text = response if finished else " ".join(words[: params.max_new_tokens])  # code keeps its lines
                token_ids = fake_token_ids(text)
                out.append(
                    Completion(
                        prompt_index=p,
                        sample_index=j,
                        prompt_ids=prompt_ids,
                        token_ids=token_ids,
                        logprobs=[0.0] * len(token_ids),
                        text=text,
                        finished=finished,
                    )
                )
        return out


class FakeTask:
    """Problems "What is i+i?" with answer 2i. Eval uses i = 0..size-1 and train i = size..2*size-1 (disjoint).
    Rewards: "correct" (the last integer in the answer equals 2i; the primary) and "format" (an integer was found)."""

    name = "fake-add"
    version = "1"

    def __init__(self, size: int = 20) -> None:
        self.size = size
        self.reward_weights: dict[str, float] = {"correct": 1.0, "format": 0.5}

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        # seed is unused: the order is fixed, which keeps hand-computed expectations in tests simple
        start = 0 if split == "eval" else self.size
        items = [
            Problem(id=f"add-{i}", prompt=f"What is {i}+{i}?", answer=str(2 * i))
            for i in range(start, start + self.size)
        ]
        return items[:limit] if limit is not None else items

    def messages(self, problem: Problem) -> Messages:
        return [{"role": "user", "content": f"{problem.prompt} Answer with a number."}]

    def score(self, problem: Problem, completion: str) -> Score:
        numbers = re.findall(r"-?\d+", completion)
        extracted = numbers[-1] if numbers else None
        rewards = {
            "correct": float(extracted is not None and extracted == problem.answer),
            "format": float(extracted is not None),
        }
        return Score(rewards=rewards, primary="correct", extracted=extracted, unparsed=extracted is None)

    def data_source(self) -> dict[str, Any]:
        return {"source": "harness.testing", "version": self.version}


class UppercaseTask:
    """Reward: the fraction of letters that are upper case. A random model emits both kinds of token, so groups
    have variance, and the reward is learnable by shifting the output distribution alone."""

    name = "uppercase"
    version = "1"
    reward_weights = {"upper": 1.0}  # noqa: RUF012

    def problems(self, split, limit=None, seed=0):
        return [Problem(id=f"p{i}", prompt=f"Say something, {i}.") for i in range(4)]

    def messages(self, problem):
        return [{"role": "user", "content": problem.prompt}]

    def score(self, problem, completion):
        letters = [ch for ch in completion if ch.isalpha()]
        upper = sum(ch.isupper() for ch in letters) / len(letters) if letters else 0.0
        return Score(rewards={"upper": upper}, primary="upper")

    def data_source(self):
        return {"source": "test"}


class BrevityTask:
    """Reward 1 - tokens / budget on small-talk prompts: a real chat model's answers to these run 10-40 tokens, so
    every group has variance and the reward is learnable within a few steps on the real model (a format-only signal,
    like `boxed`, is much sparser). The learnable-reward check of the slow tests and of bench/."""

    name = "brevity"
    version = "1"
    reward_weights = {"short": 1.0}  # noqa: RUF012
    questions = (
        "What is your name?",
        "Say hello.",
        "What colour is the sky?",
        "Name a fruit.",
        "How are you?",
        "What is 2+2?",
    )

    def __init__(self, tokenizer: Any, max_tokens: int = 40) -> None:
        self.tokenizer, self.max_tokens = tokenizer, max_tokens

    def problems(self, split, limit=None, seed=0):
        return [Problem(id=str(i), prompt=q) for i, q in enumerate(self.questions)]

    def messages(self, problem):
        return [{"role": "user", "content": problem.prompt}]

    def score(self, problem, completion):
        tokens = len(self.tokenizer(completion)["input_ids"])
        return Score(rewards={"short": max(0.0, 1 - tokens / self.max_tokens)}, primary="short")

    def data_source(self):
        return {"source": "harness.testing"}


# ----------------------------------------------------------------------------------------------------------------
# The plugin contract as assertions, a store in memory, and a searcher run without a model
# ----------------------------------------------------------------------------------------------------------------


def check_task(task: Any) -> None:
    """Raise AssertionError listing every way ``task`` breaks the Task protocol (and its declared capabilities); a
    task that follows it then scores its first eval problem against its reference, as the runner does before the
    model loads (``contract.check_score``: a Score, with every component its reward_weights names)."""
    problems = contract.check_task(task)
    if not problems:
        drawn = task.problems("eval", limit=1, seed=0)
        problems = contract.check_score(task, drawn[0]) if drawn else []
    _assert_follows(problems, "task", task)


def check_searcher(searcher: Any) -> None:
    _assert_follows(contract.check_searcher(searcher), "searcher", searcher)


def check_trainer(trainer: Any) -> None:
    _assert_follows(contract.check_trainer(trainer), "trainer", trainer)


def check_engine_factory(factory: Any) -> None:
    _assert_follows(contract.check_engine_factory(factory), "engine", factory)


def check_estimator(estimator: Any) -> None:
    """Call the advantage estimator once on a tiny batch (imports torch) and check what it returns."""
    _assert_follows(contract.check_estimator(estimator), "advantage", estimator)


def _assert_follows(problems: list[str], kind: str, plugin: Any) -> None:
    if problems:
        what = getattr(plugin, "__name__", None) or type(plugin).__name__
        raise AssertionError(
            f"{what} does not follow {contract.CONTRACTS[kind]}:\n" + "\n".join(f"  - {p}" for p in problems)
        )


class FakeStore:
    """What a trainer or searcher sees of a run's store (harness/store/run_folder.py ``RunStore``), in memory:
    ``samples`` holds every record given to ``write_samples``, ``steps`` every ``log_step`` as the line steps.jsonl
    would get, and ``metrics`` the flat metrics.json (a stepped value is a list, one entry per step). ``dir`` is a
    real folder for plugins that keep files of their own (evolve's checkpoints): the given path, or a temporary
    folder removed when the store is garbage-collected. ``checkpointer`` and ``step_models`` are None: nothing is
    checkpointed."""

    def __init__(self, dir: Path | str | None = None) -> None:
        if dir is None:
            dir = tempfile.mkdtemp(prefix="harness-fake-store-")
            weakref.finalize(self, shutil.rmtree, dir, ignore_errors=True)
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.samples: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.metrics: dict[str, Any] = {}
        self.warnings: list[str] = []  # ``warn`` lines (a trainer that stopped at a collapse)
        self.checkpointer: Any = None
        self.step_models: Any = None  # --save-every's StepModels: none here

    def write_samples(self, records: Iterable[dict[str, Any]]) -> None:
        self.samples.extend(dict(r) for r in records)

    def log_step(self, step: int, metrics: dict[str, float], stage: str = "train") -> None:
        self.steps.append({"stage": stage, "step": step, **metrics})
        for key, value in metrics.items():
            self.metrics.setdefault(f"{stage}/{key}", []).append(value)

    def update_metrics(self, metrics: dict[str, float]) -> None:
        self.metrics.update(metrics)

    def warn(self, line: str) -> None:
        self.warnings.append(line)

    def close(self) -> None:
        pass


def run_searcher(
    searcher: Any, task: Any, problems: Sequence[Problem], engine: Any = None, phase: str = "eval"
) -> tuple[dict[str, float], FakeStore]:
    """Check the searcher's contract, run it as the runner does (default engine: ``FakeEngine(hashed_answers())``)
    and check what came back: a flat dict of metrics, and sample records carrying what the report's intervals
    need (``harness.store.results_db.REQUIRED_SAMPLE_KEYS``). Returns (metrics, store)."""
    check_searcher(searcher)
    store = FakeStore()
    metrics = searcher.search(engine or FakeEngine(hashed_answers()), task, problems, phase=phase, store=store)
    assert isinstance(metrics, dict) and all(isinstance(k, str) for k in metrics), (
        f"search() should return a dict of metric name -> number, got {type(metrics).__name__}"
    )
    for record in store.samples:
        missing = [key for key in REQUIRED_SAMPLE_KEYS if key not in record]
        assert not missing, f"a sample record lacks {', '.join(missing)} (the report needs them): {record}"
    return metrics, store
