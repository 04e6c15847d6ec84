"""A plugin that raises during a run is named: ``blame`` turns any error of its block into ``PluginFailed`` ("searcher
'x' (plugin 'y') failed while ...: KeyError: ..."), which the runner records (harness/runner/phases.py) and the CLI
prints as one line.

``PluginFailed`` also means "stop the run": the places that forgive a scorer raising on one answer (one candidate
lost, counted) let it through, so a broken reward function (harness/reward_functions.py) ends the run instead of
silently scoring every answer as a failure.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # not a plugin's fault: the CLI says how to resume


class PluginFailed(RuntimeError):
    """A plugin raised during a run; the message names it and what it was doing, the cause keeps the traceback."""


@contextlib.contextmanager
def blame(kind: str, name: str, plugin: str, doing: str) -> Iterator[None]:
    """Re-raise any error of the block as ``PluginFailed`` naming the plugin (a full disk and ^C pass through)."""
    try:
        yield
    except (PluginFailed, KeyboardInterrupt):
        raise
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc
    except Exception as exc:
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc


def _line(kind: str, name: str, plugin: str, doing: str, exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{kind} {name!r} (plugin {plugin!r}) failed while {doing}: {type(exc).__name__}: {first}"
