"""SIGTERM handled as ^C: a scheduler's `kill`, `timeout` or a pre-empted job then ends a run the way an
interrupt does (the manifest says "interrupted", loggers are flushed, the folder's lock is let go, one line on
stderr), where Python's default would end the process on the spot with no message and no cleanup.

Both signals raise ``Interrupted``, a KeyboardInterrupt of this module's own, so a KeyboardInterrupt that plugin code
raises itself is told apart from the user's (``from_signal``): the first is a plugin failure (harness/failures.py),
the second an interrupt.

Every moment of a run is interruptible (docs/design/reliability.md): a signal is raised in the main thread, so what
waits there on other threads (evolve's scoring threads, harness/executors.py) stops waiting and abandons them, with a
one-line note. What cannot be interrupted is bounded by a watchdog (``terminate_as_interrupt`` starts it): a thread
that sees each signal as it arrives, even while the main thread is stuck in a call that never returns to Python; if
the process has not ended ``GRACE_S`` seconds after the first signal (a checkpoint write being finished excepted:
``deferred_interrupts``), or ``SECOND_GRACE_S`` after a second one, it marks the run interrupted (``last_words``),
says so in one line and ends the process with exit 130. (A call that never releases Python's lock, a C loop, stops
every thread, this one too: only SIGKILL ends it.)

A file-size limit (``ulimit -f``, RLIMIT_FSIZE) sends SIGXFSZ, whose default ends the process on the spot with a core
dump and no word. Python ignores it from the start, and ``terminate_as_interrupt`` makes sure (an embedding or a
library may have restored the default): the write that passes the limit fails with OSError EFBIG instead, the run
ends ``failed`` in one line, and everything written before it is kept and resumable once the limit is lifted."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

GRACE_S = 10.0  # after the first ^C or SIGTERM, the process has this long to end on its own
SECOND_GRACE_S = 2.0  # after a second one, this long
EXIT_INTERRUPTED = 130


class Interrupted(KeyboardInterrupt):
    """^C or SIGTERM, raised by this module's handler: the user's interrupt, never a plugin's."""


def terminate_as_interrupt() -> None:
    """From now on SIGTERM, and ^C unless it is ignored, raise ``Interrupted`` in the main thread (a no-op from another
    thread, where Python cannot set handlers)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _raise_interrupt)
        if hasattr(signal, "SIGXFSZ"):  # a file-size limit: the write fails with EFBIG instead of a core dump
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _watchdog.start()


def from_signal(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is the user's (^C, SIGTERM) rather than one that code raised itself. Where ^C is
    not this module's to raise (the Python API, a library that took the handler), every one is taken as the user's;
    where ^C is ignored (a shell's background job), none but ours can be."""
    if isinstance(exc, Interrupted):
        return True
    try:
        handler = signal.getsignal(signal.SIGINT)
    except Exception:  # no signal module state to ask: the user's, to be safe
        return True
    return handler is not _raise_interrupt and handler is not signal.SIG_IGN


def _raise_interrupt(signum: int, frame: object) -> None:
    _watchdog.signalled = True
    raise Interrupted(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """^C and SIGTERM wait until the block is done, then interrupt as usual; a second signal interrupts at once.
    For writes a signal must not cut: torch.save interrupted mid-file raised a RuntimeError from its C++ writer
    ("unexpected pos"), and the run ended "failed" as a plugin failure instead of "interrupted", exit 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _watchdog.deferring():
        yield from _deferred()


def _deferred() -> Iterator[None]:
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


@contextlib.contextmanager
def last_words(say: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``say`` is what the watchdog calls before it ends a process that did not stop in time
    (the runner's: the manifest says "interrupted"); best-effort, bounded by a second."""
    _watchdog.last_words.append(say)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _watchdog.last_words.remove(say)


def where(folder: object) -> None:
    """The run folder the process is writing (None: none), for the watchdog's line."""
    _watchdog.folder = None if folder is None else str(folder)


class _Watchdog:
    """Sees every ^C and SIGTERM as it arrives (``signal.set_wakeup_fd``: written by the C-level handler, so even
    while the main thread is stuck outside Python) and ends the process if it has not ended in time."""

    def __init__(self) -> None:
        self.started = False
        self.deferred = 0  # deferred_interrupts blocks running: a checkpoint write is let finish
        self.last_words: list[Callable[[], None]] = []
        self.folder: str | None = None
        self.signalled = False  # a signal raised Interrupted

    def start(self) -> None:
        if self.started:
            return
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except (ValueError, OSError):  # not the main thread, or no wakeup fd here: the handlers alone
            os.close(read)
            os.close(write)
            return
        self.started = True
        threading.Thread(target=self._watch, args=(read,), name="harness-interrupt-watchdog", daemon=True).start()
        atexit.register(self._exiting)

    def _exiting(self) -> None:
        """Python's last act after a signal: its teardown collects every object the model, torch and transformers
        made, which took 5 to 20 s on a busy machine after the run had said "interrupted", and no thread (this
        watchdog included) runs meanwhile. Frozen, those objects are left to the process's end."""
        if self.signalled:
            gc.freeze()

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        self.deferred += 1
        try:
            yield
        finally:
            self.deferred -= 1

    def _watch(self, read: int) -> None:
        signals, deadline = 0, None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if select.select([read], [], [], wait)[0]:
                for number in os.read(read, 64):
                    if number in (signal.SIGINT, signal.SIGTERM):
                        signals += 1
                        now = time.monotonic()
                        deadline = now + GRACE_S if deadline is None else min(deadline, now + SECOND_GRACE_S)
                continue
            if deadline is not None and time.monotonic() >= deadline:
                if signals == 1 and self.deferred:  # a checkpoint write: it finishes, then the grace starts again
                    deadline = time.monotonic() + GRACE_S
                    continue
                self._end(signals)

    def _end(self, signals: int) -> None:
        waited = GRACE_S if signals == 1 else SECOND_GRACE_S
        for say in list(self.last_words):
            done = threading.Thread(target=say, daemon=True)
            done.start()
            done.join(1.0)
        where = (
            f"everything written so far is kept in {self.folder}; resume it with `harness run --resume {self.folder}`"
            if self.folder
            else "nothing to resume"
        )
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.write(
                f"\nharness: error: interrupted, and the process had not ended {waited:g} s after the "
                f"{'second ' if signals > 1 else ''}signal (a call that does not return), so it was ended at once; "
                f"{where}\n"
            )
            sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)


_watchdog = _Watchdog()
