"""Progress, for a terminal and for a log file: the one helper every harness bar goes through.

- On a terminal (stderr a TTY) a bar is tqdm's, redrawn in place.
- Elsewhere (a file, a pipe, a scheduler's log) a bar is a plain line every ``LINE_EVERY_FRACTION`` of its total or
  every ``LINE_EVERY_SECONDS``, whichever comes first, and one when it ends: no carriage returns, no redraws.
- ``--quiet`` (``HARNESS_QUIET=1``) or ``TQDM_DISABLE=1``: no bar at all, and no third-party bar either.

A bar counts a whole phase: a searcher opens one for all its samples (``bar(...)``) and the engine's own bar for
each ``generate`` call (``bar(..., inner=True)``) then adds to it instead of starting again at 0 per chunk. An inner
bar inside an outer one of another unit (a trainer's steps, the format warm-up's SFT steps) is drawn only on a
terminal, where it replaces itself; in a log file the outer bar's lines say how far the run is.

``quiet_libraries()`` silences transformers', the hub's and datasets' bars (a model loaded mid-run: the
embedding model of the diversity metrics); the runner calls it once the policy is loaded, and at once when no bar
may be drawn.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

QUIET_ENV = "HARNESS_QUIET"
LINE_EVERY_FRACTION = 0.1  # a plain line at each further 10% of the total ...
LINE_EVERY_SECONDS = 30.0  # ... or after this long without one

_stack: list[Bar] = []  # the open outer bars, innermost last


def quiet() -> bool:
    """Whether no progress may be drawn: ``--quiet`` (``HARNESS_QUIET``) or ``TQDM_DISABLE`` set to a true value."""
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in (QUIET_ENV, "TQDM_DISABLE")
    )


def quiet_requested() -> bool:
    """``--quiet`` alone (``HARNESS_QUIET``): the run's progress chatter ("loading model ...") goes too; TQDM_DISABLE
    only takes the bars."""
    return os.environ.get(QUIET_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def set_quiet(on: bool = True) -> None:
    """``--quiet``: no bars from here on (this process and the ones it starts)."""
    if on:
        os.environ[QUIET_ENV] = "1"
        quiet_libraries()


def on_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def quiet_libraries() -> None:
    """No progress bars from transformers, the hub or datasets (the ones already imported; none is imported here)."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # for the libraries not imported yet
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()


class Bar:
    """One progress bar: ``update(n)``, ``close()``, a context manager. See the module docstring for how it shows."""

    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str = "it",
        *,
        initial: int = 0,
        disable: bool = False,
        inner: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.stream = stream or sys.stderr
        self.postfix = ""
        self.parent: Bar | None = None
        self._tqdm: Any = None
        self._plain = False
        self._outer = not inner
        parent = _stack[-1] if _stack else None
        if disable or quiet():
            mode = "off"
        elif inner and parent is not None:
            # inside a phase's bar: counted there when it counts the same thing, else shown only on a terminal
            if parent.unit == unit:
                self.parent, mode = parent, "parent"
            else:
                mode = "tqdm" if on_terminal(self.stream) else "off"
        else:
            mode = "tqdm" if on_terminal(self.stream) else "plain"
        self.mode = mode
        if mode == "tqdm":
            from tqdm.auto import tqdm

            # removed when it ends, as the harness's bars always were: the summary says what was done
            self._tqdm = tqdm(total=total, desc=desc, unit=unit, initial=initial, leave=False, file=self.stream)
        elif mode == "plain":
            self._plain = True
            self._started = self._last_time = time.monotonic()
            self._last_fraction = (initial / total) if total else 0.0
        if self._outer and mode != "parent":
            _stack.append(self)

    def update(self, n: int = 1) -> None:
        if n <= 0:
            return
        self.n += n
        if self.parent is not None:
            self.parent.update(n)
        elif self._tqdm is not None:
            self._tqdm.update(n)
        elif self._plain:
            now = time.monotonic()
            fraction = self.n / self.total if self.total else 0.0
            if (
                self.total and fraction - self._last_fraction >= LINE_EVERY_FRACTION - 1e-9
            ) or now - self._last_time >= LINE_EVERY_SECONDS:
                self._line(now)

    def _line(self, now: float, done: bool = False) -> None:
        self._last_time = now
        self._last_fraction = self.n / self.total if self.total else 0.0
        of = f"/{self.total}" if self.total else ""
        share = f" ({self.n / self.total:.0%})" if self.total else ""
        took = now - self._started
        rate = f", {self.n / took:.2f} {self.unit}/s" if took > 0 and self.n else ""
        end = " done" if done else ""
        tail = f", {self.postfix}" if self.postfix else ""
        print(
            f"{self.desc}: {self.n}{of} {self.unit}{share}{end} [{_clock(took)}{rate}{tail}]",
            file=self.stream,
            flush=True,
        )

    def set_postfix(self, **values: Any) -> None:
        """Figures shown after the count (tqdm's postfix; a plain line's tail)."""
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())
        if self._tqdm is not None:
            self._tqdm.set_postfix(values)

    def write(self, line: str) -> None:
        """A line of text that does not break a bar on a terminal."""
        if self._tqdm is not None:
            self._tqdm.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self in _stack:
            _stack.remove(self)
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        elif self._plain:
            self._plain = False
            if self.n and (not self.total or self._last_fraction < 1.0):
                self._line(time.monotonic(), done=True)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def bar(
    total: int | None,
    desc: str,
    unit: str = "it",
    *,
    initial: int = 0,
    disable: bool = False,
    inner: bool = False,
) -> Bar:
    """A bar for ``total`` units (see ``Bar``). ``inner``: a bar of one call within a phase (the engine's
    ``generate``), counted into the phase's bar where there is one."""
    return Bar(total, desc, unit, initial=initial, disable=disable, inner=inner)


def track(
    iterable: Iterable[Any], total: int | None, desc: str, unit: str = "it", *, initial: int = 0, disable: bool = False
) -> Iterator[Any]:
    """``iterable``'s items, one ``update`` after each (a trainer's steps)."""
    with bar(total, desc, unit, initial=initial, disable=disable) as b:
        for item in iterable:
            yield item
            b.update(1)


def write(line: str) -> None:
    """A line on stderr that does not break a bar on a terminal (tqdm.write when tqdm draws one)."""
    if "tqdm" in sys.modules and on_terminal():
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{s:02d}" if hours else f"{minutes}:{s:02d}"
