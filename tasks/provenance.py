"""Where a task's data came from, for `data_source()`: package versions, file digests, hub commits."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from pathlib import Path
from typing import Any


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def file_digest(path: Path) -> str | None:
    """A short content hash of a local data file: two runs on different files never look alike."""
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def resolved_revision(table: Any) -> str | None:
    """The hub commit a dataset was read from: datasets records its files as hf://datasets/<id>@<commit>/<path>."""
    checksums = getattr(getattr(table, "info", None), "download_checksums", None) or {}
    for url in checksums:
        m = re.match(r"hf://datasets/[^@]+@([0-9a-f]{40})/", str(url))
        if m:
            return m.group(1)
    return None
