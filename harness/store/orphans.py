"""Temporary files that carry their writer's pid, so the next process can remove what a killed one left without
touching those of one still running.

A report builds its index in a private file beside ``results.sqlite`` and renames it into place at the end; a
report killed in between (SIGKILL, OOM) left that file, with SQLite's -wal and -shm, in --out for good. The name
``.<prefix>.<pid>-<random>.tmp`` says whose it is: a later report removes the ones whose process is gone and
leaves a concurrent report's alone. A pid reused by an unrelated process keeps its file until that one ends
too: a leftover kept a while is the safe mistake, a live report's file deleted under it is not.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")  # SQLite's files beside a database


def new_temp_file(folder: Path, prefix: str) -> Path:
    """A new empty file ``<folder>/.<prefix>.<pid>-<random>.tmp``, this process's."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=f".{prefix}.{os.getpid()}-", suffix=".tmp")
    os.close(fd)
    return Path(name)


def remove_orphans(folder: Path, prefix: str) -> list[Path]:
    """Remove the temporary files (and SQLite's beside them) that ``new_temp_file(folder, prefix)`` made in a
    process no longer running; returns them."""
    pattern = re.compile(rf"\.{re.escape(prefix)}\.(\d+)-[^/]+\.tmp(?:{'|'.join(map(re.escape, SQLITE_SUFFIXES))})$")
    removed = []
    for path in folder.iterdir() if folder.is_dir() else ():
        match = pattern.fullmatch(path.name)
        if match and not _running(int(match[1])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # no signal sent: only whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
