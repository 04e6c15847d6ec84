"""One writer per run folder (and per grid cell): an exclusive ``flock`` on a lock file, held for the writer's life.

The kernel releases a flock when its process dies, however it dies (SIGKILL, OOM, a lost machine), so a lock file
left behind by a dead writer is stale and never blocks a resume: only a live holder refuses a second writer. The
file keeps the holder's pid, so the refusal can name it. A flock belongs to an open file, not a process: a process
that locks the same file twice refuses itself, which is what it should do.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"  # inside a run folder


class FolderBusy(RuntimeError):
    """Another live process holds the lock; the message names it, ``holder`` is its pid (or "unknown")."""

    def __init__(self, message: str, holder: str = "unknown") -> None:
        super().__init__(message)
        self.holder = holder


class WriterLock:
    """``WriterLock(path, what)`` takes the lock on file ``path`` or raises ``FolderBusy`` at once (no waiting):
    "WHAT is being written by another process (pid N)"; with ``wait``, it waits for the holder to let go instead.
    ``release()`` (or the process's end) lets it go."""

    def __init__(self, path: Path | str, what: str, wait: bool = False) -> None:
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = _read_pid(self._fd)
            self.release()
            raise FolderBusy(
                f"{what} is being written by another process (pid {holder}); wait for it to end, or stop it first",
                holder,
            ) from None
        except BaseException:
            self.release()
            raise
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        """Let the lock go (closing the file releases the flock). The file stays: deleting it could let a third
        process lock a new file while a second still holds the old one."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def lock_run_folder(folder: Path | str, wait: bool = False) -> WriterLock:
    """The lock of one run folder (``<folder>/.lock``): held by ``harness run`` and ``--resume`` writing it."""
    return WriterLock(Path(folder) / LOCK_FILE, f"run folder {folder}", wait)


def lock_grid_cell(out: Path | str, name: str, wait: bool = False) -> WriterLock:
    """The lock of a grid cell, beside its folder (``<out>/.<name>.lock``): the cell's folder may be moved aside
    and made again while the lock is held, so the lock cannot live inside it."""
    return WriterLock(Path(out) / f".{name}.lock", f"grid cell {name} (under {out})", wait)


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
    except OSError:
        return "unknown"
