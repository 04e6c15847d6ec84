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
problem's reference answer (``Problem.answer``; None where the task has none). It returns a finite number (bool and
numpy scalars count).

A function with a parameter named ``prompts`` or ``completions`` is the batch form, called by keyword as TRL calls
it, once per batch of answers the trainer or searcher scores together: ``prompts`` the problems' prompts (the data's
conversation where it gave one, else ``Problem.prompt``), ``completions`` the answers (each as
``[{"role": "assistant", "content": text}]`` where the prompt is a conversation, as TRL does), and every other column
of the data's rows by its own name, as a list (``Problem.columns``: tasks/chat_data.py; None where a row lacks it).
Without ``**kwargs`` it gets only the columns it names. It returns one finite number per completion.

Mistakes are one line before the model loads: a module that does not import, a name that is not there or not
callable, a signature that takes neither form, a name the task's own components already use, a function that raises
or returns a non-number (or, batched, the wrong number of values) on an empty answer (each is called once on the
first eval problem with "", which is also what GRPO does to learn the components). A function that raises (or
returns a non-number, or the wrong number of values) during the run ends it as a failing plugin does
(``PluginFailed``, harness/failures.py): never silently scored 0.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.failures import blame
from harness.plugins.local import import_from_cwd
from harness.provenance import file_sha256
from harness.types import Checked, Problem, Score, TaskCapabilities, capabilities_of


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
        path = getattr(module, "__file__", None)
        return {
            "spec": self.spec,
            "name": self.name,
            "weight": self.weight,
            "file": path,
            "sha256": file_sha256(Path(path)) if path else None,
        }

    def value(self, problem: Problem, completion: str) -> float:
        """The function's value, as a float; a non-number is an error (raised inside the caller's ``blame``)."""
        return _number(self.fn(problem.prompt, completion, problem.answer))

    def values(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[float]:
        """One value per answer: a batch function called once, TRL's way; a per-answer one answer by answer."""
        if not self.batch:
            return [self.value(p, c) for p, c in zip(problems, completions, strict=True)]
        names = list(dict.fromkeys(k for p in problems for k in p.columns))  # every row's columns, in order
        arguments = {name: [p.columns.get(name) for p in problems] for name in names}
        arguments |= {
            "prompts": [p.prompt if p.messages is None else p.messages for p in problems],
            "completions": [
                c if p.messages is None else [{"role": "assistant", "content": c}]
                for p, c in zip(problems, completions, strict=True)
            ],
        }
        if self.takes is not None:
            arguments = {k: v for k, v in arguments.items() if k in self.takes}
        out = self.fn(**arguments)
        if isinstance(out, (str, bytes)) or not hasattr(out, "__len__"):
            raise TypeError(f"returned {type(out).__name__} {out!r:.60}, not a list of {len(completions)} numbers")
        if len(out) != len(completions):
            raise ValueError(f"returned {len(out)} values for {len(completions)} completions")
        return [_number(v, f" for completion {i}") for i, v in enumerate(out)]


def parse_reward(text: str) -> RewardFunction:
    """``"module:fn"`` or ``"module:fn=WEIGHT"`` -> the imported function; every mistake is a one-line ValueError."""
    if not isinstance(text, str):
        raise ValueError(f"--reward {text!r}: expected MODULE:FUNCTION[=WEIGHT]")
    spec, eq, weight_text = text.strip().partition("=")
    module_name, colon, attr = spec.strip().partition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"--reward {text}: expected MODULE:FUNCTION[=WEIGHT], e.g. --reward myrewards:brevity=0.5")
    weight = 1.0
    if eq:
        try:
            weight = float(weight_text)
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight):
            raise ValueError(f"--reward {text}: the weight after '=' must be a number, got {weight_text!r}")
    try:
        obj: Any = import_from_cwd(module_name.strip())
    except Exception as exc:  # ImportError, or the module's own import-time error
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ValueError(f"--reward {text}: cannot import {module_name!r}: {type(exc).__name__}: {first}") from None
    for part in attr.strip().split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--reward {text}: {module_name} has no {attr.strip()!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"--reward {text}: {attr.strip()!r} is a {type(obj).__name__}, not a function")
    name = attr.strip().rsplit(".", 1)[-1]
    try:
        parameters = inspect.signature(obj).parameters
    except ValueError:  # a builtin without a signature: the per-answer form; it will say so when called
        return RewardFunction(spec.strip(), name, weight, obj)
    if "prompts" in parameters or "completions" in parameters:  # TRL's batch form, called by keyword
        if any(p.kind is p.POSITIONAL_ONLY for p in parameters.values()):
            raise ValueError(
                f"--reward {text}: a batch reward function is called by keyword (prompts=, "
                "completions=, columns=), so it can take no positional-only parameter"
            )
        kinds = {p.kind for p in parameters.values()}
        takes = None if inspect.Parameter.VAR_KEYWORD in kinds else frozenset(parameters)
        return RewardFunction(spec.strip(), name, weight, obj, batch=True, takes=takes)
    try:
        inspect.signature(obj).bind("prompt", "completion", "reference")
    except TypeError as exc:
        raise ValueError(
            f"--reward {text}: must take (prompt, completion, reference), or TRL's (prompts, "
            f"completions, **columns): {exc}"
        ) from None
    return RewardFunction(spec.strip(), name, weight, obj)


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


def _number(value: Any, where: str = "") -> float:
    """``value`` as a finite float; anything else a one-line TypeError or ValueError."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"returned {value!r}{where}, not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"returned {type(value).__name__} {value!r:.60}{where}, not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"returned {number}{where}, not a finite number")
    return number
