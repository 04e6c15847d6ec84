"""Where things came from, for the manifest: package versions and content digests of files and folders. Tasks
record their data's provenance with these (tasks/provenance.py); the runner records the model's (harness/models.py).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path

# Bytes: a larger model folder is not hashed at every run (SmolLM2-135M's 0.54 GB took 0.45 s from the page cache
# on a 2-core machine; a cold disk is slower).
FOLDER_DIGEST_LIMIT = 2 << 30


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def file_digest(path: Path) -> str | None:
    """A short content hash of a local file: two runs on different files never look alike."""
    full = file_sha256(path)
    return None if full is None else "sha256:" + full[:16]


def file_sha256(path: Path) -> str | None:
    """A file's whole SHA-256 in hex, as `sha256sum` prints it (None: unreadable): for code a run executed, which
    someone may want to check a copy of."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def folder_digest(folder: Path, limit: int = FOLDER_DIGEST_LIMIT) -> tuple[str | None, int]:
    """(a short content hash of every file under ``folder``, names included, or None when they hold more than
    ``limit`` bytes or cannot be read; their total size). Hidden files (caches, locks) are left out."""
    files = sorted(
        p
        for p in Path(folder).rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    total = sum(p.stat().st_size for p in files)
    if total > limit:
        return None, total
    digest = hashlib.sha256()
    for path in files:
        content = file_digest(path)
        if content is None:
            return None, total
        digest.update(f"{path.relative_to(folder).as_posix()}\0{content}\n".encode())
    return "sha256:" + digest.hexdigest()[:16], total
