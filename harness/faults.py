"""Fault injection for the reliability tests: with ``HARNESS_FAULT=POINT:N`` in the environment the process SIGKILLs
itself the N-th time it reaches ``fault_point(POINT)``. Points: ``generate`` (a decoding step), ``optimizer_step``
(between backward and the optimizer's step), ``json_write`` (inside an atomic JSON write, before the rename),
``jsonl_write`` (half-way through a JSONL line), ``checkpoint`` (between writing a checkpoint and publishing it),
``report`` (after `harness report` has indexed its runs, before it renders them), ``index`` (after a rebuild of
the index has read the folders, before it renames the new index into place).

With ``HARNESS_PAUSE=POINT:N:FILE`` the process instead writes its pid to FILE the N-th time it reaches POINT and
waits there until FILE is deleted: how a test holds a writer at an exact place while a second process tries the
same folder, with no sleeps to guess at.

Without the variables a point costs two dictionary lookups. SIGKILL, not an exception: nothing gets to clean up, which
is what a crash, an OOM kill or a pre-empted machine looks like.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ENV = "HARNESS_FAULT"
LOG_ENV = "HARNESS_FAULT_LOG"  # a file each point reached is appended to: how a test learns where it can kill
PAUSE_ENV = "HARNESS_PAUSE"
POINTS = ("generate", "optimizer_step", "json_write", "jsonl_write", "checkpoint", "report", "index")
_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a") as f:
            f.write(name + "\n")
    kill, pause = os.environ.get(ENV), os.environ.get(PAUSE_ENV)
    if not kill and not pause:
        return
    _hits[name] = _hits.get(name, 0) + 1
    point, _, count = (kill or "").partition(":")
    if point == name and _hits[name] == int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
    point, _, rest = (pause or "").partition(":")
    count, _, file = rest.partition(":")
    if point == name and _hits[name] == int(count or 1):
        _wait_until_deleted(Path(file))


def _wait_until_deleted(file: Path) -> None:
    """Say where we are (the pid, written whole by a rename) and wait for the test to let us go on."""
    tmp = file.with_name(file.name + ".tmp")
    tmp.write_text(f"{os.getpid()}\n")
    os.replace(tmp, file)
    while file.exists():
        time.sleep(0.02)
