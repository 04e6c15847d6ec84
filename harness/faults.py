"""Fault injection for the reliability tests: with ``HARNESS_FAULT=POINT:N`` in the environment the process SIGKILLs
itself the N-th time it reaches ``fault_point(POINT)``. Points: ``generate`` (a decoding step), ``optimizer_step``
(between backward and the optimizer's step), ``json_write`` (inside an atomic JSON write, before the rename),
``jsonl_write`` (half-way through a JSONL line), ``checkpoint`` (between writing a checkpoint and publishing it).

Without the variables a point costs two dictionary lookups. SIGKILL, not an exception: nothing gets to clean up, which
is what a crash, an OOM kill or a pre-empted machine looks like.
"""

from __future__ import annotations

import os
import signal

ENV = "HARNESS_FAULT"
LOG_ENV = "HARNESS_FAULT_LOG"  # a file each point reached is appended to: how a test learns where it can kill
POINTS = ("generate", "optimizer_step", "json_write", "jsonl_write", "checkpoint")
_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a") as f:
            f.write(name + "\n")
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, count = spec.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
