"""A plugin that raises during a run is named: ``blame`` turns any error of its block into ``PluginFailed`` ("searcher
'x' (plugin 'y') failed while ...: KeyError: ..."), which the runner records (harness/runner/phases.py) and the CLI
prints as one line.

``PluginFailed`` also means "stop the run": the places that forgive a scorer raising on one answer (one candidate lost,
counted) let it through, so a broken reward function (harness/scoring/reward_functions.py) ends the run instead of
silently scoring every answer as a failure. ``ScoreFailed`` is the opposite case: a task's scorer failed on one answer
(harness/scoring/task_guard.py). It names the task, the places that forgive one lost answer forgive it, and ``blame``
lets it through unchanged, so where nothing forgives it (a trainer reading a task's components) the line names the task,
not the built-in that called it.

Plugin code that tries to end the process is a plugin failure too: ``SystemExit`` (``sys.exit(0)`` in a reward function
once ended a run with exit 0) and a ``KeyboardInterrupt`` the code raised itself (``plugin_exit``). A ^C or SIGTERM is
not: harness/interrupts.py's handler raises its own ``Interrupted``, which every guard lets through (exit 130).

``as_float`` is the one converter of a plugin's numbers (reward functions, a task's ``Score``, behaviour scorers): any
real number becomes a float, anything else is a one-line error the caller's guard names.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import numbers
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from harness.interrupts import from_signal

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
    """Re-raise any error of the block as ``PluginFailed`` naming the plugin, and any attempt of its code to end the
    process (``plugin_exit``: ``sys.exit``, a ``KeyboardInterrupt`` it raised); a full disk, ^C or SIGTERM pass
    through, and so does an error that already names its plugin."""
    try:
        yield
    except (PluginFailed, ScoreFailed):
        raise
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc
    except Exception as exc:
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc
    except BaseException as exc:
        if not plugin_exit(exc):
            raise
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc


@contextlib.contextmanager
def exits_named(kind: str, name: str, plugin: str, doing: str) -> Iterator[None]:
    """Only the block's attempts to end the process (``plugin_exit``) become ``PluginFailed`` naming the plugin; its
    errors pass unchanged, for a caller with its own policy for them (a logger's error drops the logger)."""
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, Exception) or not plugin_exit(exc):
            raise
        raise PluginFailed(_line(kind, name, plugin, doing, exc)) from exc


def exits_named_in(fn: Callable[..., Any], kind: str, name: str, plugin: str, doing: str) -> Callable[..., Any]:
    """``fn`` (a behaviour's scorer) with its attempts to end the process named, as ``exits_named`` does: for a caller
    that forgives its errors (a behaviour's value left out) but must let ``PluginFailed`` through."""

    @functools.wraps(fn)
    def called(*args: Any, **kwargs: Any) -> Any:
        with exits_named(kind, name, plugin, doing):
            return fn(*args, **kwargs)

    return called


def plugin_exit(exc: BaseException) -> bool:
    """Whether ``exc`` is plugin code ending the process: ``SystemExit`` (``sys.exit``), or a ``KeyboardInterrupt`` no
    signal delivered (harness/interrupts.py ``from_signal``: a ^C or SIGTERM stays an interrupt, exit 130)."""
    if isinstance(exc, SystemExit):
        return True
    return isinstance(exc, KeyboardInterrupt) and not from_signal(exc)


def _line(kind: str, name: str, plugin: str, doing: str, exc: BaseException) -> str:
    return f"{kind} {name!r} (plugin {plugin!r}) failed while {doing}: {reason(exc)}"


def reason(exc: BaseException) -> str:
    """ "ExcType: the message's first line"; plugin code ending the process says what it raised and that it must
    not ("SystemExit(0): plugin code may not end the process; raise an exception instead")."""
    if isinstance(exc, SystemExit):
        return f"{_call(exc)}: plugin code may not end the process; raise an exception instead"
    if isinstance(exc, KeyboardInterrupt):
        return f"{_call(exc)} raised by plugin code, not by ^C: raise an exception instead"
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"


def _call(exc: BaseException) -> str:
    """``SystemExit(0)``, ``SystemExit('bye')``, ``KeyboardInterrupt()``: what the code raised, cut to one line."""
    shown = ", ".join(_shown(arg) for arg in exc.args)
    return f"{type(exc).__name__}({shown})"


def as_float(value: Any, where: str = "") -> float:
    """A plugin's number (a reward, a score's component, a behaviour's value) as a float, the one converter of them:
    any real number (``numbers.Real``: int, bool, float, Fraction, numpy's scalars), a ``Decimal``, or a 0-d or
    one-element array or tensor (numpy's ``np.array([[0.5]])``, torch's) is taken; None and NaN are NaN ("not
    applicable", as TRL's None). Anything else is a one-line error for the caller's guard to name: TypeError for
    what is no real number (a string, a list, a complex), ValueError for an infinity or a value beyond a float's
    range (``10**400``, ``Decimal('1e400')``). ``where`` follows the value in the message (" for completion 2")."""
    if value is None:
        return math.nan
    if type(value) is float:  # the common case, fast
        if math.isinf(value):
            raise ValueError(f"returned {value}{where}, not a finite number (None: not applicable)")
        return value
    given = value
    if not isinstance(value, (str, bytes, numbers.Number)) and hasattr(value, "shape") and hasattr(value, "item"):
        try:  # numpy's arrays and bool_, torch's tensors: one element, as the Python number it holds
            size = math.prod(int(n) for n in value.shape)
        except (TypeError, ValueError):
            size = -1
        if size != 1:
            raise TypeError(
                f"returned {type(value).__name__} of shape {tuple(getattr(value, 'shape', ()))}{where}, not one number"
            )
        value = value.item()
        if value is None:
            return math.nan
    if isinstance(value, (str, bytes, bytearray)) or (
        isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real)
    ):
        raise TypeError(f"returned {_described(given)}{where}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an int or Fraction past 1.8e308
        raise ValueError(f"returned {_described(given)}{where}, beyond a float's range") from None
    except (TypeError, ValueError):  # no number (a list, an object), Decimal's signalling NaN
        raise TypeError(f"returned {_described(given)}{where}, not a number") from None
    if math.isinf(number):
        if isinstance(value, Decimal) and value.is_finite():  # float() of Decimal('1e400') is inf, not an error
            raise ValueError(f"returned {_described(given)}{where}, beyond a float's range")
        raise ValueError(f"returned {_described(given)}{where}, not a finite number (None: not applicable)")
    return number


def _described(value: Any) -> str:
    kind, shown = type(value).__name__, _shown(value)
    plain = kind in shown.partition("(")[0] or kind in ("int", "float", "bool", "str", "bytes")  # says its type
    return shown if plain else f"{kind} {shown}"


def _shown(value: Any, width: int = 60) -> str:
    """``repr(value)`` on one line, cut to ``width`` characters (an int too long to print as such is described)."""
    try:
        text = repr(value)
    except Exception:  # an int past Python's 4300-digit limit for str(), or a repr that raises
        bits = value.bit_length() if isinstance(value, int) else None
        return f"an integer of {bits} bits" if bits is not None else f"a {type(value).__name__}"
    text = " ".join(text.split())
    if isinstance(value, int) and not isinstance(value, bool) and len(text) > width:
        return f"an integer of {len(text.lstrip('-'))} digits"
    return text if len(text) <= width else text[: width - 3] + "..."
