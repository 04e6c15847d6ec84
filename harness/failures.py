"""A plugin that raises during a run is named: ``blame`` turns any error of its block into ``PluginFailed`` ("searcher
'x' (plugin 'y') failed while ...: KeyError: ..."), which the runner records (harness/runner/phases.py) and the CLI
prints as one line.

``PluginFailed`` also means "stop the run": the places that forgive a scorer raising on one answer (one candidate lost,
counted) let it through, so a broken reward function (harness/scoring/reward_functions.py) ends the run instead of
silently scoring every answer as a failure. ``ScoreFailed`` is the opposite case: a task's scorer failed on one answer
(harness/scoring/task_guard.py). It names the task, the places that forgive one lost answer forgive it, and ``blame``
lets it through unchanged, so where nothing forgives it (a trainer reading a task's components) the line names the task,
not the built-in that called it.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # not a plugin's fault: the CLI says how to resume


class RunFailed(RuntimeError):
    """A run (or a grid's cell) started and ended failed: the CLI exits 1, not the 2 of a usage error."""


RUN_FOLDER = "harness_run_folder"  # the attribute an error raised once a run has its folder carries (the folder)


def mark_run_folder(exc: BaseException, folder: object) -> None:
    """Tag ``exc`` with the folder of the run it ended: the CLI then exits 1 (a run that failed) and an interrupt
    says the exact ``--resume`` command."""
    with contextlib.suppress(Exception):
        if getattr(exc, RUN_FOLDER, None) is None:
            setattr(exc, RUN_FOLDER, str(folder))


def run_folder_of(exc: BaseException) -> str | None:
    """The folder of the run ``exc`` ended (``mark_run_folder``), or None when it ended none (a usage error)."""
    folder = getattr(exc, RUN_FOLDER, None)
    return folder if isinstance(folder, str) else None


class PluginFailed(RuntimeError):
    """A plugin raised during a run; the message names it and what it was doing, the cause keeps the traceback."""


class ScoreFailed(RuntimeError):
    """A task's scorer raised, or returned no ``Score``, on one answer; the message names the task and the problem,
    ``reason`` is the error alone ("KeyError: 'x'")."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@contextlib.contextmanager
def blame(kind: str, name: str, plugin: str, doing: str) -> Iterator[None]:
    """Re-raise any error of the block as ``PluginFailed`` naming the plugin (a full disk and ^C pass through, and an
    error that already names its plugin)."""
    try:
        yield
    except (PluginFailed, ScoreFailed, KeyboardInterrupt):
        raise
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc
    except Exception as exc:
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc


def _line(kind: str, name: str, plugin: str, doing: str, exc: BaseException) -> str:
    return f"{kind} {name!r} (plugin {plugin!r}) failed while {doing}: {reason(exc)}"


def reason(exc: BaseException) -> str:
    """ "ExcType: the message's first line"."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"
