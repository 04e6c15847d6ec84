"""The plugin contract, checked: does an object follow its protocol (harness/types.py)?

Each ``check_*`` returns a list of one-line problems (empty: fine). The runner calls them on every plugin it built,
before the model loads, and turns problems into one error with ``require``; ``harness.testing`` wraps them as
assertions for plugin authors' own tests. The checks look at the object only (attributes, methods and whether a
call would bind to their signatures), never run a task or a search; only ``check_estimator`` calls its plugin, once,
on a tiny tensor, because an estimator's contract is about the shape of what it returns, and ``check_score`` scores
one of a task's problems, because a scorer's is about what it returns.

``name`` (the registered name) is accepted by every check so each reads ``check_x(obj, name)`` like the registry;
problems leave it out, because ``require`` starts the line with the kind, the name and the plugin.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any

from harness.failures import PluginFailed, as_float, plugin_exit, reason
from harness.plugins.registry import PluginError
from harness.types import (
    EngineCapabilities,
    Problem,
    Score,
    SearcherCapabilities,
    TaskCapabilities,
    TrainerCapabilities,
    capabilities_of,
)

# What each kind's problems are measured against, for require()'s message.
CONTRACTS = {
    "task": "the Task protocol",
    "searcher": "the Searcher protocol",
    "trainer": "the Trainer protocol",
    "engine": "the Engine factory contract",
    "advantage": "the advantage estimator contract",
}

# A capability that comes with a method (harness/types.py): the flag, then the method it promises.
TASK_METHODS = {"batch_scoring": "score_many", "feedback": "check", "reference_completions": "reference_completion"}

_PROBLEM = Problem(id="contract-check", prompt="1+1?", answer="2")  # only bound to signatures, never scored
_ANY = object()  # a stand-in argument: binding a signature never looks at values


def require(problems: list[str], kind: str, name: str, plugin: str) -> None:
    """Raise PluginError with one line naming the plugin and every problem; do nothing when there are none."""
    if problems:
        contract = CONTRACTS.get(kind, f"the {kind} contract")
        raise PluginError(f"{kind} {name!r} (plugin {plugin!r}) does not follow {contract}: {'; '.join(problems)}")


def check_task(task: object, name: str = "") -> list[str]:
    problems = [p for attr in ("name", "version") if (p := _text_attribute(task, attr))]
    weights = getattr(task, "reward_weights", None)
    if weights is None:
        problems.append("missing reward_weights")
    elif not (isinstance(weights, dict) and all(isinstance(k, str) and _number(v) for k, v in weights.items())):
        problems.append(f"reward_weights should be a dict of str -> number, got {_short(weights)}")
    problems += _method(task, "problems", "eval", limit=1, seed=0)
    problems += _method(task, "messages", _PROBLEM)
    problems += _method(task, "score", _PROBLEM, "an answer")
    problems += _method(task, "data_source")
    capabilities, wrong = _capabilities(task, TaskCapabilities)
    if capabilities is not None:
        # A declared capability promises its method: the runner and searchers call it without looking first.
        problems += [
            f"declares TaskCapabilities({flag}=True) but has no {method}()"
            for flag, method in TASK_METHODS.items()
            if getattr(capabilities, flag) and not callable(getattr(task, method, None))
        ]
    return problems + wrong


def check_score(task: Any, problem: Problem, name: str = "") -> list[str]:
    """Score one of the task's own problems against its reference (its reference completion, else its answer, else an
    empty answer): the result must be a ``Score`` whose rewards are finite numbers holding its primary and every
    component ``reward_weights`` names. Unlike the checks above, this one runs the task (the runner: on the first
    eval problem, before the model loads), so a scorer that returns a plain float fails here, not mid-run."""
    what = "an empty answer"
    try:
        reference = ""
        if capabilities_of(task, TaskCapabilities).reference_completions:
            reference, what = task.reference_completion(problem) or "", "its reference completion"
        if not reference and problem.answer:
            reference, what = problem.answer, "its reference answer"
        score = task.score(problem, reference)
    except PluginFailed:  # a --reward function's own failure, which names it
        raise
    except BaseException as exc:  # its sys.exit too (harness/failures.py plugin_exit), not a ^C
        if not isinstance(exc, Exception) and not plugin_exit(exc):
            raise
        return [f"score(problem {problem.id!r}, {what}) raised {reason(exc)}"]
    call = f"score(problem {problem.id!r}, {what})"
    if not isinstance(score, Score):
        return [f"{call} returned {_short(score)}, not a Score"]
    if not isinstance(score.rewards, dict) or not score.rewards:
        return [f"{call} returned a Score whose rewards are {_short(score.rewards)}, not a dict of str -> number"]
    problems = [  # NaN is "not applicable" (a reward function's None), except in the primary, which pass@k counts
        f"{call}: reward {k!r} is {_short(v)}, not a finite number"
        for k, v in score.rewards.items()
        if not _finite(v, nan_ok=k != score.primary)
    ]
    weights = getattr(task, "reward_weights", None)
    missing = [k for k in weights if k not in score.rewards] if isinstance(weights, dict) else []
    if missing:
        problems.append(
            f"{call} gave no {', '.join(map(repr, missing))}, which reward_weights names (its rewards: "
            f"{', '.join(map(str, score.rewards))})"
        )
    if score.primary not in score.rewards:
        problems.append(f"{call}: its primary {score.primary!r} is not one of its rewards")
    return problems


def check_searcher(searcher: object, name: str = "") -> list[str]:
    # The runner calls search(engine, task, problems, phase=..., store=...): phase and store by keyword.
    problems = _method(searcher, "search", _ANY, _ANY, [], phase="eval", store=_ANY)
    return problems + _capabilities(searcher, SearcherCapabilities)[1]


def check_trainer(trainer: object, name: str = "") -> list[str]:
    problems = _method(trainer, "train", _ANY, _ANY, _ANY, [], store=_ANY)
    capabilities, wrong = _capabilities(trainer, TrainerCapabilities)
    if capabilities is not None and capabilities.prepares_policy:  # the runner calls prepare_policy(policy)
        problems += [
            "declares TrainerCapabilities(prepares_policy=True) but " + problem.replace("missing", "has no")
            for problem in _method(trainer, "prepare_policy", _ANY)
        ]
    return problems + wrong


def check_engine_factory(factory: object, name: str = "") -> list[str]:
    """The runner calls ``factory(policy, main_process=bool, **engine options)`` after the model loads. Options the
    user did not give may be required (a server's url): only the policy and main_process are checked here."""
    if not callable(factory):
        return [f"the factory should be callable, got {_short(factory)}"]
    problems = _binds(factory, "factory", _ANY, main_process=True, partial=True)
    capabilities, wrong = _capabilities(factory, EngineCapabilities)
    if capabilities is not None and inspect.isclass(factory):  # a function factory's engine is only seen once built
        if capabilities.own_weights and not callable(getattr(factory, "sync_weights", None)):
            problems.append("declares EngineCapabilities(own_weights=True) but has no sync_weights()")
        if capabilities.phase_dtype and not callable(getattr(factory, "sampling_in", None)):
            problems.append("declares EngineCapabilities(phase_dtype=True) but has no sampling_in()")
        generate = getattr(factory, "generate", None)
        if not callable(generate):
            problems.append("missing generate()")
        else:
            for flag, keyword in (("steering", "steering"), ("samples_per_prompt", "samples")):
                if getattr(capabilities, flag) and not _takes_keyword(generate, keyword):
                    problems.append(f"declares EngineCapabilities({flag}=True) but generate() takes no {keyword}")
    return problems + wrong


def check_estimator(estimator: object, name: str = "") -> list[str]:
    """Call the estimator once as a policy-gradient trainer does: 2 prompts x 2 rollouts, 1 answer each, 2 reward
    components; it must return a float tensor of shape [B] = [4]."""
    if not callable(estimator):
        return [f"should be callable, got {_short(estimator)}"]
    import torch  # only here: listing and checking other plugins never imports torch

    rewards = torch.tensor([[[1.0, 1.0]], [[0.0, 1.0]], [[0.0, 0.0]], [[1.0, 0.0]]])  # [B=4, M=1, N=2]
    groups = torch.tensor([0, 0, 1, 1])
    try:
        out = estimator(
            rewards,
            groups,
            torch.tensor([1.0, 0.5]),
            present=torch.ones(4, 1, dtype=torch.bool),
            draws=4,
            k=2,
            generator=torch.Generator().manual_seed(0),
        )
    except Exception as exc:
        return [f"raised {type(exc).__name__} on rewards [4, 1, 2], groups [4], weights [2]: {_first_line(exc)}"]
    if not isinstance(out, torch.Tensor):
        return [f"should return a tensor of advantages [B], got {_short(out)}"]
    problems = []
    if tuple(out.shape) != (4,):
        problems.append(f"returned shape {list(out.shape)} for B=4 rollouts, expected [4]")
    if not out.is_floating_point():
        problems.append(f"returned dtype {out.dtype}, expected a float tensor")
    elif not bool(torch.isfinite(out).all()):
        problems.append("returned NaN or infinite advantages")
    return problems


# -- helpers -------------------------------------------------------------------------------------------------------


def _text_attribute(obj: object, attr: str) -> str | None:
    value = getattr(obj, attr, None)
    if value is None:
        return f"missing {attr}"
    if not isinstance(value, str) or not value:
        return f"{attr} should be a non-empty str, got {_short(value)}"
    return None


def _method(obj: object, method: str, *args: Any, **kwargs: Any) -> list[str]:
    """ "missing X()" or "X() ..." when ``obj.X(*args, **kwargs)`` would not bind; [] when it would."""
    function = getattr(obj, method, None)
    if not callable(function):
        return [f"missing {method}()"]
    return _binds(function, method, *args, **kwargs)


def _binds(function: Callable[..., Any], label: str, *args: Any, partial: bool = False, **kwargs: Any) -> list[str]:
    """[] when ``function(*args, **kwargs)`` would bind (``partial``: other required arguments may be missing)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or C callable without a signature: nothing to check
        return []
    try:
        (signature.bind_partial if partial else signature.bind)(*args, **kwargs)
    except TypeError as exc:
        call = ", ".join(["..."] * len(args) + [f"{k}=..." for k in kwargs])
        return [f"{label}({call}) does not fit {label}{signature}: {exc}"]
    return []


def _takes_keyword(function: Callable[..., Any], keyword: str) -> bool:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return True  # no signature to read: give it the benefit of the doubt
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _capabilities(obj: object, kind: type) -> tuple[Any, list[str]]:
    """(the declared capabilities or None when of the wrong type, [that problem])."""
    try:
        return capabilities_of(obj, kind), []
    except TypeError as exc:
        return None, [str(exc)]


def _finite(value: object, nan_ok: bool) -> bool:
    """A reward value the one converter takes (harness/failures.py ``as_float``: numpy's, Decimal, Fraction, bool),
    NaN (or None) only where ``nan_ok``."""
    try:
        return not math.isnan(as_float(value)) or nan_ok
    except (TypeError, ValueError):
        return False


def _number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _short(value: object) -> str:
    text = f"{type(value).__name__} {value!r}"
    return text if len(text) <= 60 else text[:57] + "..."


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
