"""The run's task, its failures named: what a task plugin gets wrong is said in one line naming the task (and its
plugin), never blamed on the built-in trainer or searcher that happened to call it.

- Loading problems, writing prompts, describing its data: any error is ``PluginFailed`` naming the task (a missing
  data file: "task 'math' (plugin 'vector-harness:math') failed while loading its eval problems: ValueError: ...").
- Scoring: an error, or a result that is not a ``Score`` (a plain float), is ``ScoreFailed`` naming the task and the
  problem. The places that forgive one answer's scorer (``harness.scoring.batch.score_all``, evolve) forgive it, one
  answer lost; elsewhere it ends the run, named.
- A score's components are numbers: each value is taken as a float by ``harness.failures.as_float`` (numpy's
  scalars, ``Decimal``, ``Fraction``, bool; NaN and None: not applicable); an infinite one, one beyond a float's range
  or no number is ``ScoreFailed`` like a scorer's error, so no ``np.float32`` reaches samples.jsonl as a string.
- Code that ends the process (``sys.exit``, a ``KeyboardInterrupt`` it raised itself) from any method is
  ``PluginFailed`` naming the task: the run ends ``failed``, never with exit 0; a real ^C stays an interrupt.
- ``tally``: a run in which more than half the answers scored so far failed to score ends ``failed`` (PluginFailed),
  checked after every batch ``score_all`` scores: a broken scorer does not run to "complete" with pass@1 0.

The runner wraps every task (harness/runner/plan.py), with any --reward functions inside it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.failures import PluginFailed, ScoreFailed, as_float, blame, exits_named, reason
from harness.types import Checked, Problem, Score, TaskCapabilities, capabilities_of, data_card_of


class GuardedTask:
    """The task, every call of its methods named (module docstring); any other attribute is the task's."""

    def __init__(self, task: Any, name: str, plugin: str) -> None:
        self._task, self._label = task, f"task {name!r} (plugin {plugin!r})"
        self._kind = ("task", name, plugin)
        self.name, self.version, self.reward_weights = task.name, task.version, task.reward_weights
        self.capabilities = capabilities_of(task, TaskCapabilities)
        self.scored = self.failed = 0  # answers scored through score_all, and how many of them failed
        self.first_failure = ""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_task":  # copy / pickle probe these before __init__ has run
            raise AttributeError(name)
        return getattr(self._task, name)

    def problems(self, split: Any, limit: int | None = None, seed: int = 0) -> list[Problem]:
        with blame(*self._kind, f"loading its {split} problems"):
            return self._task.problems(split, limit=limit, seed=seed)

    def messages(self, problem: Problem) -> Any:
        with blame(*self._kind, f"writing the prompt of problem {problem.id!r}"):
            return self._task.messages(problem)

    def data_source(self) -> dict[str, Any]:
        with blame(*self._kind, "describing its data"):
            return self._task.data_source()

    def data_card(self) -> dict[str, Any]:
        """The task's data card (``harness.types.DataCard``), its default where it has none."""
        with blame(*self._kind, "describing its data"):
            return data_card_of(self._task)

    def reference_completion(self, problem: Problem) -> str | None:
        with blame(*self._kind, f"writing the reference completion of problem {problem.id!r}"):
            return self._task.reference_completion(problem)

    def score(self, problem: Problem, completion: str) -> Score:
        score = self._scored(problem, f"scoring problem {problem.id!r}", self._task.score, problem, completion)
        return self._checked(problem, score)

    def score_many(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Score]:
        doing = f"scoring {len(problems)} answers"
        scores = self._scored(problems[0], doing, lambda: list(self._task.score_many(problems, completions)))
        if len(scores) != len(problems):
            raise self._failed(problems[0], f"score_many returned {len(scores)} scores for {len(problems)} answers")
        return [self._checked(p, s) for p, s in zip(problems, scores, strict=True)]

    def check(self, problem: Problem, completion: str) -> Any:
        checked = self._scored(problem, f"scoring problem {problem.id!r}", self._task.check, problem, completion)
        score = self._checked(problem, getattr(checked, "score", None))  # a Checked, or a dataclass with its score
        if score is not checked.score:  # its components made floats; code's CodeCheck keeps its sandbox result too
            is_dataclass = dataclasses.is_dataclass(checked)
            checked = dataclasses.replace(checked, score=score) if is_dataclass else Checked(score, checked.feedback)
        return checked

    def tally(self, results: Sequence[Score | Exception]) -> None:
        """Count a batch's answers; more than half of all so far failing to score ends the run, naming the task."""
        failures = [r for r in results if isinstance(r, Exception)]
        self.scored += len(results)
        self.failed += len(failures)
        if failures and not self.first_failure:
            self.first_failure = failures[0].reason if isinstance(failures[0], ScoreFailed) else reason(failures[0])
        if 2 * self.failed > self.scored:
            raise PluginFailed(
                f"{self._label} failed to score {self.failed} of the {self.scored} answers scored so "
                f"far (the first: {self.first_failure}); a task's score() must return a Score for "
                "any answer"
            )

    def _checked(self, problem: Problem, score: Any) -> Score:
        """The score, its components floats (the same object when they are already); a non-Score, or a component
        that is no finite number, fails this answer."""
        if not isinstance(score, Score):
            raise self._failed(problem, f"returned {type(score).__name__} {score!r:.40}, not a Score")
        if not isinstance(score.rewards, Mapping):
            kind = type(score.rewards).__name__
            raise self._failed(problem, f"returned a Score whose rewards are a {kind}, not a dict")
        if all(type(v) is float and abs(v) != math.inf for v in score.rewards.values()):  # nothing to convert
            return score
        rewards: dict[str, float] = {}
        for name, value in score.rewards.items():
            try:
                rewards[name] = as_float(value, f" as component {name!r}")
            except (TypeError, ValueError) as exc:
                raise self._failed(problem, str(exc)) from None
        return dataclasses.replace(score, rewards=rewards)

    def _scored(self, problem: Problem, doing: str, scorer: Callable[..., Any], *args: Any) -> Any:
        """``scorer(*args)``, the task's: its error is ``ScoreFailed`` on ``problem``, its attempt to end the process
        ``PluginFailed``; either, raised already, passes."""
        try:
            with exits_named(*self._kind, doing):
                return scorer(*args)
        except (PluginFailed, ScoreFailed):
            raise
        except Exception as exc:
            raise self._failed(problem, reason(exc)) from exc

    def _failed(self, problem: Problem, why: str) -> ScoreFailed:
        return ScoreFailed(f"{self._label} failed while scoring problem {problem.id!r}: {why}", why)
