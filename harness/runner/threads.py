"""Threads per phase: torch's CPU thread count for the engine's decoding loop and for the trainer's update, chosen
when the user gives no ``--threads``.

The two phases are different work. Decoding is hundreds of small matrix products per rollout (one token of a batch
at a time) and every step waits for its slowest thread, so a thread that shares its core with another job stalls
every step. The update is a few large forward and backward passes. Measured with bench/threads_probe.py (SmolLM2-135M,
2 cores, 3 other CPU-bound jobs on the machine; docs/reference/performance.md): decoding ran at 44 tokens/s on 1
thread and 3.0 on 2, the update took 9.4 s on 1 thread and 32 s on 2; with one more busy process, 12.1 against 1.7
tokens/s and 22 s against 84 s. So the count follows the cores other work leaves free, measured when the run starts
(the CPU time other processes use over one second, ``busy_cores``; then ``choose``): both phases take every free
core. An earlier rule left decoding one core fewer, so that one preempted thread would not stall each step; on a
quiet 2-core machine that cost a fifth of the decoding speed (bench/rollout_throughput.py: 112 tokens/s at 2
threads, 90 at 1), and with the busy cores measured now, a core another job uses is not counted free in the first
place.

The counts follow the load. One second of load at the start once put a whole 10-minute run on 1 of 2 idle cores
(another job had just ended), so without ``--threads`` the counts are decided again from the CPU time other
processes used since the last look (``LoadMeter``: no sleep, nothing paid but reading /proc/stat): at the start of
every run phase (``run_phase``: before, train, after), on entering decoding or an update, and every
``RECHECK_SECONDS`` inside a long one (the engine's decoding loop and the trainers call ``follow_load``, which costs
a clock read until a look is due). Each change is recorded with the run phase, the time into the run and the busy
cores that decided it (the manifest's ``thread_changes``); the manifest's ``threads`` are the counts it started with.

``--threads N`` pins every phase to N, exactly as before this module existed. Results depend on the thread count
through float rounding (measured on SmolLM2-135M: a decoding step's logits differ by up to 3e-5 between 1 and 2
threads, a full forward pass not at all), so a run that follows the load is reproducible to that rounding, not bit
for bit; ``--threads N`` gives bit-identical reruns and resumes (every resume and fault test pins it). A resume
starts from the killed run's recorded counts and follows the load from there. Outside a run (the library used
directly, tests) nothing is configured and ``phase_threads`` changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

PHASES = ("decode", "update")
RECHECK_SECONDS = 30.0  # how often a long decoding call or update looks at the load again
# torch.set_num_threads as this module found it: vLLM's CPU backend replaces it with a no-op that warns once it has
# bound the process's threads, and then the phases leave the count alone.
_SET_NUM_THREADS = torch.set_num_threads


@dataclass(frozen=True)
class ThreadPlan:
    """What a run does with torch's thread count: ``pinned`` (``--threads N``) for every phase, or ``counts`` per
    phase; ``why`` goes into the manifest with them."""

    pinned: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    why: str = ""
    cores: int = 0  # > 0: the counts follow the load on this many cores (no --threads, model on the CPU)

    def describe(self) -> dict[str, Any]:
        counts = dict.fromkeys(PHASES, self.pinned) if self.pinned else self.counts
        return {"setting": self.pinned, **counts, "why": self.why}


_active: ThreadPlan | None = None  # None: no run configured threads; phase_threads changes nothing


class LoadMeter:
    """The cores other processes kept busy since the last look, without waiting: CPU time of every process
    (/proc/stat) less this process's own and its ended children's, over the wall-clock time between two looks."""

    def __init__(self) -> None:
        self.last = self._now()

    @staticmethod
    def _now() -> tuple[float, float, float]:
        return _all_cpu_seconds(), _own_cpu_seconds(), time.monotonic()

    def busy(self) -> int | None:
        """Busy cores since the last look (None when under half a second has passed: too short to say)."""
        now = self._now()
        elapsed = now[2] - self.last[2]
        if elapsed < 0.5:
            return None
        used = (now[0] - self.last[0]) - (now[1] - self.last[1])
        self.last = now
        return max(0, round(used / elapsed))


@dataclass
class _Following:
    """A run's look at the load: the meter, when it last looked, the run phase, and every change made."""

    meter: LoadMeter
    started: float
    looked: float
    run_phase: str = "start"
    inside: str | None = None  # the phase_threads phase being run now, whose count a change applies at once
    changes: list[dict[str, Any]] = field(default_factory=list)


_following: _Following | None = None


def choose(cores: int, busy: int) -> dict[str, int]:
    """Threads per phase on ``cores`` (torch's default count) with ``busy`` of them taken by other work: every phase
    at the free cores, at least 1. On 2 cores: 2 on a quiet machine, 1 with any other job. Measured at 2 cores only
    (the module docstring); larger machines follow the same rule unmeasured."""
    free = max(1, cores - max(0, busy))
    return {"decode": free, "update": free}


def busy_cores(window: float = 1.0) -> int:
    """Cores other work keeps busy now: the CPU time every process used over ``window`` seconds (/proc/stat) less
    this process's own, per second, rounded. Not the 1-minute load average: it lags by a minute or more, so a run
    started just after another job ended counted that job as still running (measured: a quiet machine read as 1.7
    busy cores of 2, and the run decoded and updated at 1 thread). Where /proc/stat is missing, the load average."""
    try:
        before, own, started = _all_cpu_seconds(), _own_cpu_seconds(), time.monotonic()
        time.sleep(window)
        used = _all_cpu_seconds() - before - (_own_cpu_seconds() - own)
        return max(0, round(used / (time.monotonic() - started)))
    except (OSError, ValueError):
        try:
            return round(os.getloadavg()[0])
        except OSError:  # not measurable here: assume a quiet machine
            return 0


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and of its children that ended (the code task's sandboxed programs): the run's
    own work, which must not count as other work's load."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _all_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used (the aggregate line of /proc/stat, idle and iowait left
    out)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # user..steal, less idle, iowait


def configure(threads: int | None, device: Any = "cpu", recorded: dict | None = None) -> ThreadPlan:
    """Set a run's threads and return the plan (the manifest records it). ``threads`` (``--threads N``): torch's count
    is N now and every phase keeps it. None: a count per phase; ``recorded`` (the killed run's, on resume) if it has
    them, else ``choose`` from torch's default and the load now, for a model on the CPU; torch's default for every
    phase for a model on another device (its CPU threads then run little of the work)."""
    global _active
    default = torch.get_num_threads()
    if threads:
        if default != threads:  # (once vLLM has bound the threads, setting them only warns)
            torch.set_num_threads(threads)
        _active = ThreadPlan(pinned=threads, why="--threads: every phase")
    elif recorded and all(isinstance(recorded.get(p), int) and recorded[p] > 0 for p in PHASES):
        _active = ThreadPlan(counts={p: recorded[p] for p in PHASES}, why="kept from the run being resumed")
    elif torch.device(device).type != "cpu":
        _active = ThreadPlan(
            counts=dict.fromkeys(PHASES, default),
            why=f"model on {torch.device(device).type}: torch's default for every phase",
        )
    else:
        busy = busy_cores()
        _active = ThreadPlan(
            counts=choose(default, busy),
            why=f"no --threads: {default} cores (torch's default), {busy} busy with other work "
            "(CPU time over 1 s) when the run started; then following the load",
            cores=default,
        )
    if _active.why.startswith("kept") and torch.device(device).type == "cpu":
        _active = replace(_active, cores=default, why=_active.why + "; then following the load")
    global _following
    _following = _Following(LoadMeter(), time.monotonic(), time.monotonic()) if _active.cores else None
    return _active


def run_phase(name: str) -> None:
    """A run phase (before, train, after, eval) starts: the counts are decided again for it."""
    if _following is not None:
        _following.run_phase = name
        follow_load(now=True)


def follow_load(now: bool = False) -> None:
    """Decide the counts again from the load since the last look, when threads follow it and ``RECHECK_SECONDS``
    have passed (``now``: at once); a change to the phase being run applies immediately. A clock read otherwise."""
    global _active
    following, plan = _following, _active
    if following is None or plan is None or not plan.cores or torch.set_num_threads is not _SET_NUM_THREADS:
        return  # (vLLM's CPU backend has bound the threads: nothing would change, so nothing is recorded)
    clock = time.monotonic()
    if not now and clock - following.looked < RECHECK_SECONDS:
        return
    busy = following.meter.busy()
    if busy is None:
        return
    following.looked = clock
    counts = choose(plan.cores, busy)
    if counts == plan.counts:
        return
    _active = replace(plan, counts=counts)
    following.changes.append(
        {"run_phase": following.run_phase, "seconds": round(clock - following.started, 1), "busy": busy, **counts}
    )
    if following.inside is not None:
        torch.set_num_threads(counts[following.inside])


def take_changes() -> list[dict[str, Any]]:
    """The changes of thread counts not yet taken (the manifest's ``thread_changes`` gets them at each phase's end)."""
    if _following is None:
        return []
    taken, _following.changes = _following.changes, []
    return taken


def reset() -> None:
    """Forget the run's plan (a run calls it when it ends): later library calls change no thread count."""
    global _active, _following
    _active = _following = None


def current() -> ThreadPlan | None:
    return _active


@contextlib.contextmanager
def phase_threads(phase: str) -> Iterator[None]:
    """Run the inside at the run's thread count for ``phase`` ("decode" or "update"), then restore torch's count.
    Does nothing when threads are pinned, when no run configured them, or once vLLM has taken over the count."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; choose one of {', '.join(PHASES)}")
    following = _following
    if following is not None and following.inside is not None:  # nested (an update's own decoding): as it is
        yield
        return
    follow_load()
    plan = _active
    want = plan.counts.get(phase) if plan is not None and not plan.pinned else None
    before = torch.get_num_threads()
    if want is None or torch.set_num_threads is not _SET_NUM_THREADS:
        yield
        return
    if following is not None:
        following.inside = phase
    if want != before:
        torch.set_num_threads(want)
    try:
        yield
    finally:
        if following is not None:
            following.inside = None
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
