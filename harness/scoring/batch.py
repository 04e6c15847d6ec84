"""Scoring many answers at once: the seam through which a task may parallelise its own scoring."""

from __future__ import annotations

from harness.failures import PluginFailed
from harness.scoring.task_guard import GuardedTask
from harness.types import Problem, Score, Task, TaskCapabilities, capabilities_of


def score_all(task: Task, pairs: list[tuple[Problem, str]]) -> list[Score | Exception]:
    """Each (problem, answer)'s score, or the exception its scorer raised. A task with ``score_many`` (code: its
    sandboxes in parallel threads, or on Ray with ``task.executor=ray``) scores the whole batch in one call; if that
    raises, the answers are scored one by one, so only the answer whose scorer raises is lost. ``PluginFailed`` (a
    reward function that raised: harness/failures.py) is not one answer's loss but the run's end, and passes. The
    run's task (harness/scoring/task_guard.py) counts each batch: most answers failing to score ends the run."""
    out = _scores(task, pairs)
    if isinstance(task, GuardedTask):
        task.tally(out)
    return out


def _scores(task: Task, pairs: list[tuple[Problem, str]]) -> list[Score | Exception]:
    if capabilities_of(task, TaskCapabilities).batch_scoring and pairs:
        try:
            return list(task.score_many([p for p, _ in pairs], [t for _, t in pairs]))
        except PluginFailed:
            raise
        except Exception:
            pass
    out: list[Score | Exception] = []
    for problem, text in pairs:
        try:
            out.append(task.score(problem, text))
        except PluginFailed:
            raise
        except Exception as exc:  # ScoreFailed too: the task's scorer on this answer (harness/scoring/task_guard.py)
            out.append(exc)
    return out
