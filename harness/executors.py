"""Map a function over items, results in input order, on local threads or on a Ray cluster.

    executor = make_executor("ray", workers=2, owner="evolve")  # or "local" (the default everywhere)
    verdicts = executor.map(check, task, items)  # == [check(task, item) for item in items]

Both backends call the same function with the same arguments, so exceptions behave the same: one the function
catches is counted however it counts it (evolve's ``_check`` turns a raising scorer into a skipped candidate); one
that escapes fails the map (a thread pool re-raises it; Ray re-raises it in the caller as an instance of the same
exception class).

- ``local``: ``workers`` threads. They mostly wait: the work is in the sandbox's processes. They are daemon
  threads, waited on in the main thread, so a ^C or SIGTERM there ends the map at once: items not started are
  dropped, calls still running (a reward function that never returns) are abandoned with a one-line note and end
  with the process (a thread pool's shutdown, and Python's exit, waited for them: a run SIGTERMed in a hung reward
  function was still running 30 s later, a second SIGTERM too).
- ``ray``: one Ray task per item. ``shared`` (the task, with its loaded problems) goes into the object store once
  per map; items travel with their Ray task. The cluster is ``RAY_ADDRESS`` (Ray's own convention, as for
  ``ray.init(address=...)``); when it is unset, the first map starts a local Ray instance, which lasts until the
  process exits. Concurrency is the cluster's (one CPU per Ray task); ``workers`` is not used. The function travels
  by reference, so every node must have this project installed (same version).

Untrusted code never runs in a Ray worker's interpreter: the mapped function (a task's ``check``) calls
harness.sandbox on the worker, which starts its own launcher server there, exactly as in the harness process.

Ray is imported only by ``RayExecutor`` (constructed when a plugin is given ``executor="ray"``, before any model
loads, so a missing package is one line at once, not a traceback after the model loads).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

EXECUTORS = ("local", "ray")
RAY_INSTALL_HINT = "pip install 'vector-harness[ray]'"


class Executor(Protocol):
    def map(self, function: Callable[[Any, Any], Any], shared: Any, items: Iterable[Any]) -> list[Any]: ...


def make_executor(kind: str, *, workers: int, owner: str) -> Executor:
    """The backend named ``kind``; ``owner`` (a plugin's name) starts any error message."""
    if kind == "local":
        return LocalExecutor(workers, owner)
    if kind == "ray":
        return RayExecutor(owner)
    raise ValueError(f"{owner}: unknown executor {kind!r}; available: {', '.join(EXECUTORS)}")


class LocalExecutor:
    """``workers`` daemon threads in this process, started per map; ``owner`` names them in the note an interrupt
    leaves when calls are still running."""

    def __init__(self, workers: int, owner: str = "") -> None:
        self.workers = max(1, int(workers))
        self.owner = owner

    def map(self, function: Callable[[Any, Any], Any], shared: Any, items: Iterable[Any]) -> list[Any]:
        items = list(items)
        if not items:
            return []
        work = _Map(functools.partial(function, shared), len(items))
        try:  # in the main thread, a ^C or SIGTERM raises here: while the threads start, or while they work
            for i in range(min(self.workers, len(items))):
                name = f"{self.owner or 'executor'}-{i}"
                threading.Thread(target=work.run, args=(items,), name=name, daemon=True).start()
            work.finished.wait()
        except BaseException:
            running = work.abandon()
            if running:
                who = f"{self.owner}: " if self.owner else ""
                print(
                    f"{who}interrupted while {running} call(s) had not returned (a plugin call that hangs?); "
                    "left running, they end with the process",
                    file=sys.stderr,
                )
            raise
        return work.outcome()


class _Map:
    """One map's shared state: the next item, results in input order, the first error by position."""

    def __init__(self, call: Callable[[Any], Any], size: int) -> None:
        self.call = call
        self.results: list[Any] = [None] * size
        self.errors: dict[int, BaseException] = {}
        self.lock = threading.Lock()
        self.next = 0
        self.running = 0
        self.stopped = False  # an item failed or the caller was interrupted: start no more
        self.finished = threading.Event()

    def run(self, items: list[Any]) -> None:
        while True:
            with self.lock:
                if self.stopped or self.next >= len(items):
                    return
                i, self.next = self.next, self.next + 1
                self.running += 1
            try:
                result, error = self.call(items[i]), None
            except BaseException as exc:  # re-raised in the caller's thread, as a thread pool's map does
                result, error = None, exc
            with self.lock:
                self.running -= 1
                self.results[i] = result
                if error is not None:
                    self.errors[i] = error
                    self.stopped = True  # the items not started will not be: the caller raises
                if not self.running and (self.stopped or self.next >= len(items)):  # nothing more will finish
                    self.finished.set()

    def abandon(self) -> int:
        """Start no more items; how many calls are still running."""
        with self.lock:
            self.stopped = True
            return self.running

    def outcome(self) -> list[Any]:
        if self.errors:
            raise self.errors[min(self.errors)]
        return self.results


class RayExecutor:
    """One Ray task per item on the cluster at ``RAY_ADDRESS``, or on a local instance started on first use.

    Holds no Ray object, so a task that keeps one of these (the code task) can itself be sent to a worker."""

    def __init__(self, owner: str) -> None:
        try:
            import ray  # noqa: F401  (checked now: the run must fail before its model loads, not after)
        except ImportError as exc:
            raise ValueError(
                f"{owner}: executor 'ray' needs Ray, which cannot be imported ({exc}); install it with "
                f"{RAY_INSTALL_HINT}"
            ) from None

    def map(self, function: Callable[[Any, Any], Any], shared: Any, items: Iterable[Any]) -> list[Any]:
        import ray

        items = list(items)
        if not items:
            return []
        if not ray.is_initialized():
            # No address: Ray starts a local instance. The dashboard needs packages plain `ray` lacks, and a port.
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False)
        bundle = ray.put((function, shared))  # once per map; each Ray task receives it by reference
        return ray.get([_remote_apply().remote(bundle, item) for item in items])  # ray.get keeps the list's order


def _apply(bundle: tuple[Callable[[Any, Any], Any], Any], item: Any) -> Any:
    """What runs on a Ray worker (Ray has already fetched ``bundle`` from the object store)."""
    function, shared = bundle
    return function(shared, item)


@functools.cache
def _remote_apply() -> Any:
    """``_apply`` as a Ray remote function, made once per process: Ray exports a function to the cluster the first
    time it is called (and again after a new ``ray.init``), so one object avoids re-exporting it on every map."""
    import ray

    return ray.remote(_apply)
