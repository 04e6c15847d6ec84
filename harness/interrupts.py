"""SIGTERM handled as ^C: a scheduler's `kill`, `timeout` or a pre-empted job then ends a run the way an
interrupt does (the manifest says "interrupted", loggers are flushed, the folder's lock is let go, one line on
stderr), where Python's default would end the process on the spot with no message and no cleanup."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises KeyboardInterrupt in the main thread (a no-op from another thread, where Python
    cannot set handlers)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """^C and SIGTERM wait until the block is done, then interrupt as usual; a second signal interrupts at once.
    For writes a signal must not cut: torch.save interrupted mid-file raised a RuntimeError from its C++ writer
    ("unexpected pos"), and the run ended "failed" as a plugin failure instead of "interrupted", exit 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: object) -> None:
        if pending:  # the second: the user means it
            _raise_interrupt(signum, frame)
        pending.append(signum)

    saved = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    if pending:
        _raise_interrupt(pending[0], None)
