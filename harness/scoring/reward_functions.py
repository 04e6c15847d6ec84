"""Reward functions as plain Python callables: ``harness run --reward mymodule:fn`` (weight 1) or
``--reward mymodule:fn=0.5`` (repeatable; ``rewards = [...]`` in an experiment file). Each function becomes a
component of the task's reward vector, named after it (the part after the last dot of ``fn``), with its weight in
``reward_weights``: trainers train on it and best@k scalarises it as on the task's own components (weight 0:
reported only). The module is imported from the working directory, as ``python -c "import mymodule"`` there would.

The callable takes one of two forms, told apart by its signature:

    fn(prompt: str, completion: str, reference: str | None) -> float              # per answer
    fn(prompts: list, completions: list, **columns) -> list[float]              # a batch, as TRL's reward_funcs

Per answer, ``prompt`` is the problem as asked (``Problem.prompt``: no chat template, no format instruction),
``completion`` one answer's text (each of the M answers of a multi-answer rollout on its own), ``reference`` the
problem's reference answer (``Problem.answer``; None where the task has none). It returns a finite number: any real
number counts (bool, ``Fraction``, ``Decimal``, numpy's scalars, a 0-d or one-element array or tensor), taken as a
float by the one converter of plugins' numbers (``harness.failures.as_float``); an infinite value, one beyond a
float's range (``10**400``) or no number ends the run naming the function.

A function with a parameter named ``prompts`` or ``completions`` is the batch form, called by keyword as TRL calls
it, once per batch of answers the trainer or searcher scores together: ``prompts`` the problems' prompts (the data's
conversation where it gave one, else ``Problem.prompt``), ``completions`` the answers (each as
``[{"role": "assistant", "content": text}]`` where the prompt is a conversation, as TRL does), and every other column
of the data's rows by its own name, as a list (``Problem.columns``: tasks/chat_data.py; None where a row lacks it).
Without ``**kwargs`` it gets only the columns it names. It returns one finite number per completion.

TRL's contract beyond that: a function may return None (for an answer it does not apply to; per answer, or as
values of the batch's list): the value is NaN, "not applicable", left out of that component's mean and of the
weighted sum (``scalarize``: TRL's nansum across functions). An ``async def`` function is awaited (a batch's
per-answer calls together), in a loop of its own (another thread when one is already running, as in a notebook).
A batch function that names them (or takes ``**kwargs``) also gets ``completion_ids`` (each answer's sampled token
ids during training, EOS included; elsewhere its text tokenized by the policy's tokenizer) and ``trainer_state``
(``TrainerState``: ``global_step``, ``max_steps``, ``phase``), as TRL passes them.

A spec ``@name`` is a Python function registered in this process (harness/in_process.py: the Python API's
callables).

Mistakes are one line before the model loads: a module that does not import, a name that is not there or not
callable, a signature that takes neither form, a name the task's own components already use, a function that raises
or returns a non-number (or, batched, the wrong number of values) on an empty answer (each is called once on the
first eval problem with "", which is also what GRPO does to learn the components). A function that raises (or
returns a non-number, or the wrong number of values) during the run ends it as a failing plugin does
(``PluginFailed``, harness/failures.py): never silently scored 0. So does one that calls ``sys.exit`` or raises
``KeyboardInterrupt`` itself: exit 1 naming it, never the exit 0 ``sys.exit(0)`` once gave (a real ^C stays an
interrupt). A module that does so when imported is a one-line error, as any import error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import in_process
from harness.failures import as_float, blame, plugin_exit, reason
from harness.plugins.local import import_from_cwd
from harness.provenance import file_sha256
from harness.types import Checked, Problem, Score, TaskCapabilities, capabilities_of


@dataclass(frozen=True)
class TrainerState:
    """What TRL's reward functions read of ``trainer_state``: the optimizer step being scored (0 outside training)."""

    global_step: int = 0
    max_steps: int = 0
    phase: str = "eval"  # "train" while a trainer scores its rollouts; "eval" in evaluation


@dataclass
class _Context:
    state: TrainerState = TrainerState()
    tokenizer: Any = None  # the policy's, set by the run once the model is loaded
    ids: dict[str, list[int]] | None = None  # an answer's text -> the token ids it was sampled as


_context = _Context()


@contextlib.contextmanager
def reward_context(
    *, state: TrainerState | None = None, tokenizer: Any = None, ids: dict[str, list[int]] | None = None
) -> Iterator[None]:
    """What the batch reward functions are passed inside: the trainer's state, the tokenizer, the sampled ids."""
    saved = dataclasses.replace(_context)
    if state is not None:
        _context.state = state
    if tokenizer is not None:
        _context.tokenizer = tokenizer
    if ids is not None:
        _context.ids = ids
    try:
        yield
    finally:
        _context.state, _context.tokenizer, _context.ids = saved.state, saved.tokenizer, saved.ids


def _completion_ids(text: str) -> list[int] | None:
    if _context.ids is not None and text in _context.ids:
        return list(_context.ids[text])
    if _context.tokenizer is not None:
        return list(_context.tokenizer(text, add_special_tokens=False)["input_ids"])
    return None


@dataclass(frozen=True)
class RewardFunction:
    spec: str  # "module:fn" as given, without the weight
    name: str  # the component's name
    weight: float
    fn: Callable[..., Any]
    batch: bool = False  # TRL's form: fn(prompts, completions, **columns) -> a list
    takes: frozenset[str] | None = None  # batch form: the keywords it names, None when it has **kwargs (takes all)

    def describe(self) -> dict[str, Any]:
        """For the manifest: what was asked for, and the file the function came from with its content digest."""
        module = inspect.getmodule(self.fn)
        code = getattr(self.fn, "__code__", None)  # a function from a file not imported as a module: its file
        path = getattr(module, "__file__", None) or getattr(code, "co_filename", None)
        described = {
            "spec": self.spec,
            "name": self.name,
            "weight": self.weight,
            "file": path,
            "sha256": file_sha256(Path(path)) if path and Path(path).is_file() else None,
        }
        if in_process.is_in_process(self.spec):  # a Python object: where it was defined
            owner = getattr(self.fn, "__module__", None) or getattr(module, "__name__", "?")
            described["function"] = f"{owner}.{getattr(self.fn, '__qualname__', type(self.fn).__name__)}"
        return described

    def value(self, problem: Problem, completion: str) -> float:
        """The function's value, as a float (NaN: None, not applicable); a non-number is an error (raised inside the
        caller's ``blame``)."""
        return self.values([problem], [completion])[0]

    def values(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[float]:
        """One value per answer: a batch function called once, TRL's way; a per-answer one answer by answer."""
        if not self.batch:
            out = [self.fn(p.prompt, c, p.answer) for p, c in zip(problems, completions, strict=True)]
            return [as_float(v) for v in _awaited(out)]
        names = list(dict.fromkeys(k for p in problems for k in p.columns))  # every row's columns, in order
        arguments = {name: [p.columns.get(name) for p in problems] for name in names}
        arguments |= {
            "prompts": [p.prompt if p.messages is None else p.messages for p in problems],
            "completions": [
                c if p.messages is None else [{"role": "assistant", "content": c}]
                for p, c in zip(problems, completions, strict=True)
            ],
        }
        wants = (lambda key: True) if self.takes is None else (lambda key: key in self.takes)
        if wants("completion_ids"):
            arguments["completion_ids"] = [_completion_ids(c) for c in completions]
        if wants("trainer_state"):
            arguments["trainer_state"] = _context.state
        if self.takes is not None:
            arguments = {k: v for k, v in arguments.items() if k in self.takes}
        out = self.fn(**arguments)
        if inspect.isawaitable(out):
            out = _awaited([out])[0]
        if isinstance(out, (str, bytes)) or not hasattr(out, "__len__"):
            raise TypeError(f"returned {type(out).__name__} {out!r:.60}, not a list of {len(completions)} numbers")
        if len(out) != len(completions):
            raise ValueError(f"returned {len(out)} values for {len(completions)} completions")
        return [as_float(v, f" for completion {i}") for i, v in enumerate(out)]


def parse_reward(text: str) -> RewardFunction:
    """``"module:fn"`` or ``"module:fn=WEIGHT"`` -> the imported function; every mistake is a one-line ValueError."""
    if not isinstance(text, str):
        raise ValueError(f"--reward {text!r}: expected MODULE:FUNCTION[=WEIGHT]")
    spec, eq, weight_text = text.strip().partition("=")
    module_name, colon, attr = spec.strip().partition(":")
    weight = 1.0
    if eq:
        try:
            weight = float(weight_text)
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight):
            raise ValueError(f"--reward {text}: the weight after '=' must be a number, got {weight_text!r}")
    if in_process.is_in_process(spec.strip()):  # a Python function registered in this process (the Python API)
        try:
            fn = in_process.function(spec.strip())
        except ValueError as exc:
            raise ValueError(f"--reward {text}: {exc}") from None
        return _reward(text, spec.strip(), spec.strip()[1:], weight, fn)
    if not colon or not module_name or not attr:
        raise ValueError(f"--reward {text}: expected MODULE:FUNCTION[=WEIGHT], e.g. --reward myrewards:brevity=0.5")
    try:
        obj: Any = import_from_cwd(module_name.strip())
    except BaseException as exc:  # ImportError, the module's own import-time error, or its sys.exit
        if not isinstance(exc, Exception) and not plugin_exit(exc):
            raise
        raise ValueError(f"--reward {text}: cannot import {module_name!r}: {reason(exc)}") from None
    for part in attr.strip().split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--reward {text}: {module_name} has no {attr.strip()!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"--reward {text}: {attr.strip()!r} is a {type(obj).__name__}, not a function")
    return _reward(text, spec.strip(), attr.strip().rsplit(".", 1)[-1], weight, obj)


def _reward(text: str, spec: str, name: str, weight: float, obj: Any) -> RewardFunction:
    """The function's form, from its signature: per answer, or TRL's batch form; neither is one line."""
    if not callable(obj):
        raise ValueError(f"--reward {text}: a {type(obj).__name__}, not a function")
    try:
        parameters = inspect.signature(obj).parameters
    except ValueError:  # a builtin without a signature: the per-answer form; it will say so when called
        return RewardFunction(spec, name, weight, obj)
    if "prompts" in parameters or "completions" in parameters:  # TRL's batch form, called by keyword
        if any(p.kind is p.POSITIONAL_ONLY for p in parameters.values()):
            raise ValueError(
                f"--reward {text}: a batch reward function is called by keyword (prompts=, "
                "completions=, columns=), so it can take no positional-only parameter"
            )
        kinds = {p.kind for p in parameters.values()}
        takes = None if inspect.Parameter.VAR_KEYWORD in kinds else frozenset(parameters)
        return RewardFunction(spec, name, weight, obj, batch=True, takes=takes)
    try:
        inspect.signature(obj).bind("prompt", "completion", "reference")
    except TypeError as exc:
        raise ValueError(
            f"--reward {text}: must take (prompt, completion, reference), or TRL's (prompts, "
            f"completions, **columns): {exc}"
        ) from None
    return RewardFunction(spec, name, weight, obj)


def load_rewards(specs: Sequence[str]) -> list[RewardFunction]:
    rewards = [parse_reward(spec) for spec in specs]
    names = [r.name for r in rewards]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"--reward: two functions named {', '.join(twice)}; each component needs its own name")
    return rewards


class WithRewards:
    """The task, its reward vector extended by the reward functions' components (after its own). Everything else
    (problems, prompts, data source, capabilities, any other attribute) is the task's."""

    def __init__(self, task: Any, rewards: Sequence[RewardFunction]) -> None:
        self._task = self.unwrapped = task
        self.rewards = list(rewards)
        self.name, self.version = task.name, task.version
        self.capabilities = capabilities_of(task, TaskCapabilities)
        if any(r.batch for r in self.rewards):  # a batch function sees each batch at once (scoring.score_all)
            self.capabilities = dataclasses.replace(self.capabilities, batch_scoring=True)
        self._refuse_clashes(task.reward_weights)
        self.reward_weights = {**task.reward_weights, **{r.name: r.weight for r in self.rewards}}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_task":  # copy / pickle probe these before __init__ has run
            raise AttributeError(name)
        return getattr(self._task, name)

    def problems(self, split: Any, limit: int | None = None, seed: int = 0) -> list[Problem]:
        return self._task.problems(split, limit=limit, seed=seed)

    def messages(self, problem: Problem) -> Any:
        return self._task.messages(problem)

    def data_source(self) -> dict[str, Any]:
        return self._task.data_source()

    def score(self, problem: Problem, completion: str) -> Score:
        return self._extend(problem, completion, self._task.score(problem, completion))

    def score_many(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Score]:
        if capabilities_of(self._task, TaskCapabilities).batch_scoring:  # its own batch (parallel sandboxes) first
            scores = self._task.score_many(problems, completions)
        else:  # if one raises, score_all scores the batch answer by answer: only that answer is lost
            scores = [self._task.score(p, c) for p, c in zip(problems, completions, strict=True)]
        return self._extend_all(problems, completions, scores)

    def check(self, problem: Problem, completion: str) -> Any:
        checked = self._task.check(problem, completion)  # feedback (code's failed tests) stays the task's
        score = self._extend(problem, completion, checked.score)
        if dataclasses.is_dataclass(checked):  # code's CodeCheck keeps its sandbox result too
            return dataclasses.replace(checked, score=score)
        return Checked(score, list(checked.feedback))

    def reference_completion(self, problem: Problem) -> str | None:
        return self._task.reference_completion(problem)

    def check_components(self, problem: Problem) -> None:
        """Before the model loads: no function shares a name with the task's components, and each one gives a
        number for an empty answer (one line otherwise)."""
        self._refuse_clashes(self._task.score(problem, "").rewards)
        self.score(problem, "")

    def _refuse_clashes(self, components: Any) -> None:
        taken = [r.spec for r in self.rewards if r.name in components]
        if taken:
            raise ValueError(
                f"--reward {', '.join(taken)}: task {self.name!r} already has a component named "
                f"{', '.join(r.name for r in self.rewards if r.name in components)} (its components: "
                f"{', '.join(components)}); rename the function"
            )

    def _extend(self, problem: Problem, completion: str, score: Score) -> Score:
        return self._extend_all([problem], [completion], [score])[0]

    def _extend_all(
        self, problems: Sequence[Problem], completions: Sequence[str], scores: Sequence[Score]
    ) -> list[Score]:
        extra: list[dict[str, float]] = [{} for _ in problems]
        ids = ", ".join(dict.fromkeys(repr(p.id) for p in problems))
        doing = f"scoring problem {ids}" if len(problems) == 1 else f"scoring {len(problems)} answers ({ids:.200})"
        for reward in self.rewards:
            with blame("reward", reward.name, reward.spec, doing):
                for row, value in zip(extra, reward.values(problems, completions), strict=True):
                    row[reward.name] = value
        return [dataclasses.replace(s, rewards={**s.rewards, **e}) for s, e in zip(scores, extra, strict=True)]


def _awaited(values: list[Any]) -> list[Any]:
    """``values`` with every awaitable among them awaited, together, in an event loop of their own: this thread's
    when none is running, else a fresh thread's (a notebook runs one)."""
    if not any(inspect.isawaitable(v) for v in values):
        return values

    async def gather() -> list[Any]:
        async def done(value: Any) -> Any:
            return value

        return list(await asyncio.gather(*(v if inspect.isawaitable(v) else done(v) for v in values)))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(gather())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, gather()).result()
