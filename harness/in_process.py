"""Python objects a run uses by name: reward functions and ``datasets.Dataset`` objects handed to the Python API
(harness/api.py), which cannot be written into a manifest or imported from the working directory.

Each is registered in this process under a name that starts with ``@`` (``@accuracy``, ``@data-5f3c2a19e0b1``), and
the run's configuration records that name (``rewards = ["@accuracy"]``, ``task.data = "@data-..."``); the manifest
records what each was (a function's module and qualified name, a dataset's fingerprint and size). A run that used
them resumes only in a process that registers the same objects again: ``harness.train(..., resume=RUN_DIR)``.
"""

from __future__ import annotations

import hashlib
from typing import Any

PREFIX = "@"
RESUME_HINT = "a run given Python objects resumes only when they are passed again: harness.train(..., resume=RUN_DIR)"

_functions: dict[str, Any] = {}
_datasets: dict[str, Any] = {}


def is_in_process(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def register_function(name: str, fn: Any) -> str:
    """``fn`` under ``@name``; returns that name. A name taken by another object is taken over (a notebook cell
    run again redefines its function)."""
    key = name if is_in_process(name) else PREFIX + name
    _functions[key] = fn
    return key


def register_dataset(name: str, dataset: Any) -> str:
    key = name if is_in_process(name) else PREFIX + name
    _datasets[key] = dataset
    return key


def function(name: str) -> Any:
    if name not in _functions:
        raise ValueError(f"no Python function registered as {name!r} in this process; {RESUME_HINT}")
    return _functions[name]


def dataset(name: str) -> Any:
    if name not in _datasets:
        raise ValueError(f"no in-memory dataset registered as {name!r} in this process; {RESUME_HINT}")
    return _datasets[name]


def dataset_name(dataset: Any) -> str:
    """A dataset's registry name: its content fingerprint (``datasets`` derives it from the data, so the same rows
    give the same name in a later process), else its id in this process."""
    fingerprint = getattr(dataset, "_fingerprint", None)
    if fingerprint is None and isinstance(dataset, dict):  # a DatasetDict: its splits' fingerprints
        parts = "".join(f"{k}:{getattr(v, '_fingerprint', id(v))};" for k, v in sorted(dataset.items()))
        fingerprint = hashlib.sha256(parts.encode()).hexdigest()
    return f"{PREFIX}data-{str(fingerprint)[:16] if fingerprint else id(dataset)}"
