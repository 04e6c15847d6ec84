"""Reward functions as plain Python callables: ``harness run --reward mymodule:fn`` (weight 1) or
``--reward mymodule:fn=0.5`` (repeatable; ``rewards = [...]`` in an experiment file). Each function becomes a
component of the task's reward vector, named after it (the part after the last dot of ``fn``), with its weight in
``reward_weights``: trainers train on it and best@k scalarises it as on the task's own components (weight 0:
reported only). The module is imported from the working directory, as ``python -c "import mymodule"`` there would.

The callable::

    fn(prompt: str, completion: str, reference: str | None) -> float

``prompt`` is the problem as asked (``Problem.prompt``: no chat template, no format instruction), ``completion``
one answer's text (each of the M answers of a multi-answer rollout on its own), ``reference`` the problem's
reference answer (``Problem.answer``; None where the task has none). It returns a finite number (bool and numpy
scalars count). TRL's ``reward_funcs`` take lists (``prompts, completions, **columns``) and return a list; the
per-answer form is the same function applied to one row, with ``reference`` the dataset's answer column.

Mistakes are one line before the model loads: a module that does not import, a name that is not there or not
callable, a signature that cannot take the three arguments, a name the task's own components already use, a
function that raises or returns a non-number on an empty answer (each is called once on the first eval problem
with "", which is also what GRPO does to learn the components). A function that raises (or returns a non-number)
during the run ends it as a failing plugin does (``PluginFailed``, harness/failures.py): never silently scored 0.
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
    fn: Callable[[str, str, str | None], Any]

    def describe(self) -> dict[str, Any]:
        """For the manifest: what was asked for, and the file the function came from with its content digest."""
        module = inspect.getmodule(self.fn)
        path = getattr(module, "__file__", None)
        return {"spec": self.spec, "name": self.name, "weight": self.weight, "file": path,
                "sha256": file_sha256(Path(path)) if path else None}

    def value(self, problem: Problem, completion: str) -> float:
        """The function's value, as a float; a non-number is an error (raised inside the caller's ``blame``)."""
        value = self.fn(problem.prompt, completion, problem.answer)
        if isinstance(value, (str, bytes)):
            raise TypeError(f"returned {value!r}, not a number")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"returned {type(value).__name__} {value!r:.60}, not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"returned {number}, not a finite number")
        return number


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
    try:
        inspect.signature(obj).bind("prompt", "completion", "reference")
    except TypeError as exc:
        raise ValueError(f"--reward {text}: must take (prompt, completion, reference): {exc}") from None
    except ValueError:  # a builtin without a signature: it will say so when called
        pass
    return RewardFunction(spec.strip(), attr.strip().rsplit(".", 1)[-1], weight, obj)


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
        self._task = task
        self.rewards = list(rewards)
        self.name, self.version = task.name, task.version
        self.capabilities = capabilities_of(task, TaskCapabilities)
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
        scores = self._task.score_many(problems, completions)  # the task's own batch (parallel sandboxes) first
        return [self._extend(p, c, s) for p, c, s in zip(problems, completions, scores, strict=True)]

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
            raise ValueError(f"--reward {', '.join(taken)}: task {self.name!r} already has a component named "
                             f"{', '.join(r.name for r in self.rewards if r.name in components)} (its components: "
                             f"{', '.join(components)}); rename the function")

    def _extend(self, problem: Problem, completion: str, score: Score) -> Score:
        extra = {}
        for reward in self.rewards:
            with blame("reward", reward.name, reward.spec, f"scoring problem {problem.id!r}"):
                extra[reward.name] = reward.value(problem, completion)
        return dataclasses.replace(score, rewards={**score.rewards, **extra})
