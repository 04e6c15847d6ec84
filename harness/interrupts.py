"""SIGTERM handled as ^C: a scheduler's `kill`, `timeout` or a pre-empted job then ends a run the way an
interrupt does (the manifest says "interrupted", loggers are flushed, the folder's lock is let go, one line on
stderr), where Python's default would end the process on the spot with no message and no cleanup."""

from __future__ import annotations

import signal
import threading


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises KeyboardInterrupt in the main thread (a no-op from another thread, where Python
    cannot set handlers)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
