"""The small types every plugin speaks. Plain dataclasses and Protocols: no base classes to inherit.

Each plugin kind has a required protocol (``Task``, ``Engine``, ``Searcher``, ``Trainer``) and, next to it, a frozen
dataclass of *capabilities*: what a plugin may do beyond the protocol (score a batch at once, write M answers per
rollout, steer, run data-parallel, ...). A plugin declares them as an attribute ``capabilities = XCapabilities(...)``
(a class attribute, or set in ``__init__`` when they depend on options); the runner, trainers and searchers read them
through ``capabilities_of`` and never probe a plugin with ``hasattr`` (tests/test_layout.py finds no probe in the
runner). A plugin that declares nothing has the defaults: the plain protocol. A capability that comes with a method
(``batch_scoring`` -> ``score_many``, ``prepares_policy`` -> ``prepare_policy``) names the method beside it, and
``harness.plugins.contract`` checks that the method exists before a model loads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from harness.failures import as_float

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
    # Own data in TRL's formats (tasks/chat_data.py). ``messages``: the conversation the data asks, system turns
    # included, its last user turn being ``prompt`` (None: the task writes the messages). ``completion``: the data's
    # reference completion, SFT's target. ``columns``: the data row's other columns under their own names, what a
    # batch reward function receives by name (harness/scoring/reward_functions.py), as TRL's reward functions do.
    messages: Messages | None = None
    completion: str | None = None
    columns: dict[str, Any] = field(default_factory=dict)


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
    """The weighted sum w . r over the components named in ``weights`` (best@k and scalar trainers use this). A NaN
    component (a reward function's None: not applicable) is left out, as TRL's nansum across functions does."""
    return float(sum(w * rewards[name] for name, w in weights.items() if not math.isnan(rewards[name])))


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


class DataCard(Protocol):
    """Optional beside ``Task``: the data in three fields, what a run's summary, the leaderboard's ``dataset`` column
    and the plots' legends show. A task without it gets ``default_data_card`` (its name, "unknown")."""

    def data_card(self) -> dict[str, Any]:
        """{"name": the dataset id or file path as given (or the offline package's own name, e.g. "MMLU (offline,
        4 options)"), "split": the split the eval problems are drawn from, "size": the rows in it}."""
        ...


def default_data_card(task: Any) -> dict[str, Any]:
    """The card of a task that describes no data: its name, and "unknown"."""
    return {"name": f"{task.name} (unknown data)", "split": "unknown", "size": "unknown"}


def data_card_of(task: Any) -> dict[str, Any]:
    """The task's ``data_card()`` (``DataCard``), or ``default_data_card`` for a task that has none; the three keys
    always present (a missing one "unknown"), values as text or a whole number."""
    method = getattr(task, "data_card", None)
    card = method() if callable(method) else default_data_card(task)
    if not isinstance(card, dict):
        raise TypeError(f"data_card() should return a dict, got {type(card).__name__}")
    out = {key: card.get(key, "unknown") for key in ("name", "split", "size")}
    return {k: v if isinstance(v, int) and not isinstance(v, bool) else str(v) for k, v in out.items()}


def data_card_line(card: Any) -> str:
    """A recorded data card as the text a report shows: "NAME; SPLIT; SIZE rows" (what is known of it); "" when
    there is none."""
    if not isinstance(card, dict) or not card.get("name"):
        return ""
    parts = [str(card["name"])]
    if card.get("split") not in (None, "", "unknown"):
        parts.append(str(card["split"]))
    if isinstance(card.get("size"), int) and not isinstance(card.get("size"), bool):
        parts.append(f"{card['size']} rows")
    return "; ".join(parts)


@dataclass(frozen=True)
class TaskCapabilities:
    """What a task may offer beyond ``Task``."""

    max_new_tokens: int | None = None  # tokens one answer needs (code: 384); replaces the preset's generation budget
    # of the trainer and searcher (times M for M answers per rollout); None: the preset's
    batch_scoring: bool = False  # has ``score_many`` (BatchScoring): a batch scored in one call (parallel sandboxes)
    feedback: bool = False  # has ``check`` (Feedback): a score plus feedback lines (failed tests) that evolve shows
    reference_completions: bool = False  # has ``reference_completion`` (ReferenceCompletions), for SFT on references
    # the format warm-up's targets where the trainer leaves it to the task (warmup_targets=auto): "worked" (the
    # policy's own text, its answer put in the task's form: the default with reference completions), "extracted"
    # (the answers alone, short: for a task whose own answers ramble past the budget, as maze's do) or "self"
    warmup_targets: str = ""
    misleading_hints: bool = False  # takes the option ``misleading_hint=True``: each problem carries a wrong hint
    # (the robustness behaviour's prompts)
    takes_reward_functions: bool = False  # its reward vector is the run's reward functions (the prompts task): the
    # runner passes their specs (--reward) as its option ``rewards`` instead of adding them after its own
    # components, and reads the loaded ones from its attribute ``reward_functions`` (for the manifest)


class BatchScoring(Protocol):
    def score_many(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Score]:
        """``[score(p, c) for p, c in zip(problems, completions)]``, computed together (and faster)."""
        ...


@dataclass(frozen=True)
class Checked:
    score: Score
    feedback: list[str]  # lines a person (or a model rewriting the answer) can act on, e.g. a failed test


class Feedback(Protocol):
    def check(self, problem: Problem, completion: str) -> Checked:
        """The score and why: feedback lines for a search that shows the model its previous attempts."""
        ...


class ReferenceCompletions(Protocol):
    def reference_completion(self, problem: Problem) -> str | None:
        """A full model answer built from the reference (None: this problem has none)."""
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


@dataclass(frozen=True)
class EngineCapabilities:
    """What an engine may offer beyond ``Engine``. An engine factory is called as ``factory(policy, **options)``:
    the loaded policy (model + tokenizer), ``main_process`` (False on data-parallel ranks other than 0: no progress
    bars, no pushes) and the engine's own options (``--set engine.KEY=VALUE``)."""

    steering: bool = False  # ``generate(..., steering=Steering)`` adds steering vectors per row (VSPO needs it)
    own_weights: bool = False  # holds its own copy of the weights: has ``sync_weights(model)`` (WeightSync), called
    # once before training, after every optimizer step and before the final evaluation
    shared_by_ranks: bool = False  # one engine serves every data-parallel rank (a server): rank 0 alone pushes
    requires: str = ""  # a module it needs (e.g. "vllm"), looked for before the model loads
    versions: str = ""  # the versions of that module's distribution it supports (a PEP 440 specifier, ">=0.32,<0.34"),
    # checked before the model loads; "": any
    passthrough: str = ""  # "module:Class", a dataclass whose fields the factory's **kwargs take (vLLM's EngineArgs):
    # any other option is refused before the model loads; "": the factory's own parameters only
    install: str = ""  # how to install that module, said when it is missing
    batch_size: str = ""  # the name of its own option that ``--batch-size`` sets (how many sequences it decodes
    # together); "": it has none, and ``--batch-size`` is refused before the model loads
    rollout_dtype: str = ""  # the name of its own option that ``--rollout-dtype`` sets (the precision it samples and
    # evaluates in); "": it has none, and ``--rollout-dtype`` is refused before the model loads
    sampling_dtype: str = ""  # the precision its forward passes run in when not the policy weights' own (an
    # instance sets it from its options); a trainer computing in another one recomputes the old log-probs
    samples_per_prompt: bool = False  # ``generate(..., samples=[k_0, k_1, ...])`` gives prompt p k_p samples (sample
    # j the same as with n > j) instead of ``params.n`` each: one call for prompts wanting different counts (evolve)
    sleeps: bool = False  # has ``sleep()`` (Sleeps): frees its GPU memory for the trainer's update until its next
    # generate or weight sync, which wake it; the GRPO loop calls it before each update
    phase_dtype: bool = False  # has ``sampling_in(dtype)`` (PhaseDtype): a context manager inside which it samples
    # in ``dtype`` (``sampling_dtype`` following); ``--rollout-dtype auto`` samples only the training phase in bf16


class WeightSync(Protocol):
    def sync_weights(self, model: Any) -> None:
        """Copy the policy's current weights into the engine's own copy."""
        ...


class Sleeps(Protocol):
    def sleep(self) -> None:
        """Free the memory the engine holds (its KV cache; its weights moved off the GPU) until it is next used."""
        ...


class PhaseDtype(Protocol):
    def sampling_in(self, dtype: str) -> AbstractContextManager[None]:
        """Sample in ``dtype`` ("float32", "bfloat16", ...; the weights' own: as they are) inside, and declare it as
        ``capabilities.sampling_dtype``; what the engine was built with again after."""
        ...


# ----------------------------------------------------------------------------------------------------------------
# Trainers and searchers
# ----------------------------------------------------------------------------------------------------------------


@runtime_checkable
class Searcher(Protocol):
    def search(
        self, engine: Engine, task: Task, problems: Sequence[Problem], *, phase: str, store: RunStore
    ) -> dict[str, float]:
        """Spend the inference budget on ``problems``; write every candidate with ``store.write_samples``;
        return flat metrics (e.g. {"pass@1": 0.25, "best@4": 0.8}); the caller prefixes them with the phase."""
        ...


@runtime_checkable
class Trainer(Protocol):
    def train(self, policy: Any, engine: Engine, task: Task, problems: Sequence[Problem], *, store: RunStore) -> None:
        """Update ``policy`` in place; log per-step metrics with ``store.log_step``."""
        ...


@dataclass(frozen=True)
class SearcherCapabilities:
    """Run-level options a searcher takes, so the runner can hand them over without knowing the searcher."""

    answers_per_rollout: bool = False  # takes ``answers_per_rollout=M``: evaluates a policy that writes M answers
    # per rollout in that format (the trainer's TrainerCapabilities.answers_per_rollout)
    behaviours: bool = False  # takes ``behaviours="a,b"``: reports ``behaviour/<name>`` over its candidates (the
    # trainer's TrainerCapabilities.behaviour, unless set by the user)
    resume: bool = False  # takes ``resume=<run folder>``: continues its own checkpoints when a killed run resumes
    # every rank of torchrun / accelerate launch calls ``search`` and takes its share of the problems; the figures
    # are one process's (rank 0's store writes; the others' is a no-op). Without it, rank 0 evaluates alone
    data_parallel: bool = False


@dataclass(frozen=True)
class TrainerCapabilities:
    """What the runner must know of a trainer; set in ``__init__`` when it depends on the trainer's options."""

    answers_per_rollout: int = 1  # M: answers the trained policy writes per rollout; evaluation uses that format
    behaviour: str = ""  # a registered behaviour the trainer targets: evaluated before and after training
    steering: bool = False  # samples under steering vectors: needs an engine with EngineCapabilities.steering
    data_parallel: bool = False  # its loop splits over the processes of torchrun / accelerate launch
    save_merged: bool = False  # the saved policy also gets <run>/model-merged/: a LoRA policy's adapters merged in
    prepares_policy: bool = False  # has ``prepare_policy(policy)`` (LoRA adapters): called before a resumed run
    # restores the trained weights of its checkpoint, which need the adapters in place
    recomputes_old_logprobs: bool = False  # recomputes the old policy's log-probs in its own precision when the
    # engine samples in another (trainers/rollout_precision.py): ``--rollout-dtype auto`` may then sample its
    # rollouts in bf16
    # its budget, said before the model loads (0: not declared): optimizer steps, and the SFT steps at most of a
    # format warm-up before them, which stops early once warmup_target_rate of checked rollouts are well formed
    steps: int = 0
    warmup_steps: int = 0
    warmup_target_rate: float = 0.0


Capabilities = TypeVar("Capabilities", TaskCapabilities, EngineCapabilities, SearcherCapabilities, TrainerCapabilities)


def capabilities_of(plugin: object, kind: type[Capabilities]) -> Capabilities:
    """A plugin's declared capabilities (its ``capabilities`` attribute), or ``kind()``'s defaults when it declares
    none. A class works too (its class attribute). A declaration of the wrong type is a one-line error."""
    declared = getattr(plugin, "capabilities", None)
    if declared is None:
        return kind()
    if not isinstance(declared, kind):
        raise TypeError(
            f"{type(plugin).__name__}.capabilities should be a {kind.__name__}, got {type(declared).__name__}"
        )
    return declared


# ----------------------------------------------------------------------------------------------------------------
# Behaviours
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Behaviour:
    """A behaviour a policy can be scored on, steered towards and judged on: one registered object
    (``harness_register_behaviours``) carries all three, so VSPO, RLAIF, SFT's rewrites and every searcher use a
    third-party behaviour exactly as a built-in one.

    ``score`` is the training scorer: VSPO and reward-shaped GRPO add it to the reward and SFT filters its rewrites
    with it, so a figure from it favours the methods that optimised it. ``held_out`` is an evaluator no trainer may
    call: a different measurement of the same behaviour, which searchers report beside it (``heldout/<name>``) so a
    comparison of methods is not judged only on the signal one side trained on. None: the behaviour has none, and
    the report says so where it shows the training score."""

    name: str
    score: Callable[[str, Problem | None], float]  # (answer, its problem or None) -> [0, 1]; must not raise
    towards: str  # how a teacher is asked to rewrite an answer towards it ("concisely: the shortest answer ...")
    away: str  # ... and away from it ("verbosely: ...")
    judge_question: str  # what a judge's rating of 5 answers "fully yes" to (RLAIF)
    misleading_hint: bool = False  # its prompts carry a misleading hint: tasks are built with misleading_hint=True
    # The held-out evaluator, (answer, its problem or None) -> [0, 1], never raising; no trainer may use it
    held_out: Callable[[str, Problem | None], float] | None = None
    # Its batch form, (answers, their problems) -> one value each, where one call is cheaper than many (embeddings)
    held_out_many: Callable[[Sequence[str], Sequence[Problem | None]], Sequence[float]] | None = None
    held_out_doc: str = ""  # what the held-out evaluator measures, in a line ("MiniLM: nearer expert exemplars")
    # Its measure is about answer length (conciseness): a steering vector built for it keeps the length direction,
    # which VSPO removes from every other behaviour's (harness/steering/build.py without_length)
    about_length: bool = False

    @property
    def has_held_out(self) -> bool:
        return self.held_out is not None or self.held_out_many is not None

    def held_out_scores(self, texts: Sequence[str], problems: Sequence[Problem | None]) -> list[float | None]:
        """The held-out evaluator on each (text, problem), in one batch call where it has a batch form (else one
        call each); None where it raised, and [] for a behaviour without one."""
        if not self.has_held_out:
            return []
        if self.held_out_many is not None:
            try:
                values = [_unit(v) for v in self.held_out_many(list(texts), list(problems))]
                if len(values) == len(texts):
                    return values
            except Exception:
                pass
            if self.held_out is None:
                return [None] * len(texts)
        out: list[float | None] = []
        for text, problem in zip(texts, problems, strict=True):
            try:
                out.append(_unit(self.held_out(text, problem)))  # type: ignore[misc]
            except Exception:
                out.append(None)
        return out


def _unit(value: Any) -> float | None:
    """A held-out value as a float, None when it is not a finite number (left out of a mean, like a raise)."""
    try:
        number = as_float(value)  # the one converter of plugins' numbers (harness/failures.py)
    except ValueError:  # infinite, or beyond a float's range
        return None
    return number if math.isfinite(number) else None
