"""Map a function over items, results in input order, on local threads or on a Ray cluster.

    executor = make_executor("ray", workers=2, owner="evolve")  # or "local" (the default everywhere)
    verdicts = executor.map(check, task, items)  # == [check(task, item) for item in items]

Both backends call the same function with the same arguments, so exceptions behave the same: one the function
catches is counted however it counts it (evolve's ``_check`` turns a raising scorer into a skipped candidate); one
that escapes fails the map (a thread pool re-raises it; Ray re-raises it in the caller as an instance of the same
exception class).

- ``local``: a pool of ``workers`` threads. They mostly wait: the work is in the sandbox's processes.
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
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

EXECUTORS = ("local", "ray")
RAY_INSTALL_HINT = "pip install 'vector-harness[ray]'"


class Executor(Protocol):
    def map(self, function: Callable[[Any, Any], Any], shared: Any, items: Iterable[Any]) -> list[Any]: ...


def make_executor(kind: str, *, workers: int, owner: str) -> Executor:
    """The backend named ``kind``; ``owner`` (a plugin's name) starts any error message."""
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(owner)
    raise ValueError(f"{owner}: unknown executor {kind!r}; available: {', '.join(EXECUTORS)}")


class LocalExecutor:
    """``workers`` threads in this process."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, int(workers))

    def map(self, function: Callable[[Any, Any], Any], shared: Any, items: Iterable[Any]) -> list[Any]:
        items = list(items)
        if not items:
            return []
        with ThreadPoolExecutor(min(self.workers, len(items))) as pool:
            return list(pool.map(functools.partial(function, shared), items))


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
