"""Where a task's data came from, for `data_source()`: package versions, file digests, hub commits."""

from __future__ import annotations

import re
from typing import Any

from harness.provenance import file_digest, package_version

__all__ = ["file_digest", "package_version", "resolved_revision"]


def resolved_revision(table: Any) -> str | None:
    """The hub commit a dataset was read from: datasets records its files as hf://datasets/<id>@<commit>/<path>."""
    checksums = getattr(getattr(table, "info", None), "download_checksums", None) or {}
    for url in checksums:
        m = re.match(r"hf://datasets/[^@]+@([0-9a-f]{40})/", str(url))
        if m:
            return m.group(1)
    return None
