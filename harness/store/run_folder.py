"""One folder per run: manifest.json, metrics.json, samples.jsonl, steps.jsonl.

JSON files are written atomically (temp file + rename) so a killed run never leaves a half-written file; JSONL
files are appended and flushed line by line, so everything computed before a crash is kept. An atomically written
file gets the permissions a plain ``open(path, "w")`` would give it (``new_file_mode``), not mkstemp's private 0600:
colleagues on a shared machine read each other's run folders.

The store also forwards every metric it records to the run's loggers (harness/store/loggers.py): all of them receive the
same stream, and the files above stay authoritative.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.failures import PluginFailed
from harness.faults import fault_point
from harness.store.loggers import logger_exits
from harness.store.reading import read_json, read_jsonl
from harness.store.run_identity import run_identity

# Files that grow by appending; JSON files are replaced whole. metrics.jsonl is the JSONL logger's stream.
APPENDED_FILES = ("samples.jsonl", "steps.jsonl", "metrics.jsonl")
# Linux's longest path, in bytes with its final NUL: a write to a longer one fails (ENAMETOOLONG), whatever its names.
PATH_MAX = 4096
# Bytes kept free under a folder for what is written in it: a run folder's name (at most 255) and the deepest
# file a run writes inside its folder (".checkpoint.tmp/.state.json.XXXXXXXX.tmp", a kept model's files, ...).
ROOM_UNDER_OUT = 512
ROOM_IN_RUN_FOLDER = 256


def _proc_umask() -> int | None:
    """The umask as Linux reports it (/proc/self/status, since 4.7): read without changing it. None elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_by_setting() -> int:
    # The umask can only be read portably by setting it, and it is process-wide: a file another thread created between
    # the two os.umask calls would get the temporary mask. So this runs at most once, when the module is imported
    # (before the harness starts threads of its own), and only where /proc cannot tell the umask without changing it.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = 0o022 if _proc_umask() is not None else _umask_by_setting()


def current_umask() -> int:
    """The process's umask, read without changing it (Linux: thread-safe, and it follows a later os.umask call);
    elsewhere the umask this module saw when it was imported."""
    mask = _proc_umask()
    return _UMASK_AT_IMPORT if mask is None else mask


def new_file_mode(path: Path | None = None) -> int:
    """The mode ``open(path, "w")`` leaves a file with: an existing file's own, else 0666 minus the umask."""
    if path is not None:
        try:
            return path.stat().st_mode & 0o7777
        except OSError:
            pass
    return 0o666 & ~current_umask()


def new_folder_mode() -> int:
    """The mode ``mkdir`` gives a folder (0777 minus the umask), for folders made private by ``tempfile.mkdtemp``
    and then published by a rename."""
    return 0o777 & ~current_umask()


def default_permissions(path: Path | str) -> None:
    """Give ``path`` (a file, or a folder and everything under it) the modes a plain ``open(..., "w")`` / ``mkdir``
    would have given it: for what other code writes privately (``tempfile.mkdtemp``: 0700; safetensors'
    ``save_file``: 0600, so every model.safetensors transformers saves) before it is published."""
    path = Path(path)
    file_mode, folder_mode = 0o666 & ~current_umask(), new_folder_mode()
    if not path.is_dir():
        os.chmod(path, file_mode)
        return
    os.chmod(path, folder_mode)
    for inner in path.rglob("*"):
        if not inner.is_symlink():
            os.chmod(inner, folder_mode if inner.is_dir() else file_mode)


def check_path_length(path: Path | str, what: str, room: int = ROOM_UNDER_OUT) -> Path:
    """``path`` unless a name in it is over 255 bytes (NAME_MAX) or it is so long, made absolute, that the files
    written under it (``room`` bytes more) would pass PATH_MAX: then one line naming ``what`` (e.g. "--out").
    Checked before the path is ever looked at: looking at a path over PATH_MAX is itself an OSError (36)."""
    path = Path(path)
    too_long = next((part for part in path.parts if len(os.fsencode(part)) > 255), None)
    if too_long is not None:  # the file system's limit (NAME_MAX): every write under it would fail
        raise ValueError(
            f"{what}: a folder name of {len(os.fsencode(too_long))} bytes is longer than the 255 a "
            f"file system allows ({too_long[:40]}...)"
        )
    length = len(os.fsencode(os.path.abspath(path)))
    if length + room >= PATH_MAX:
        raise ValueError(
            f"{what}: a path of {length} bytes (made absolute) leaves no room under the {PATH_MAX} bytes a path "
            f"may have (PATH_MAX) for the {room} bytes of what is written in it; choose a shorter one "
            f"({os.fsdecode(os.fsencode(str(path))[:40])}...)"
        )
    return path


def check_writable_folder(path: Path | str, what: str, room: int = ROOM_UNDER_OUT) -> Path:
    """``path`` if it is (or can be made as) a folder this process can write in, ``room`` bytes of path left under
    it (``check_path_length``); otherwise one line naming ``what`` (e.g. "--out"), said before anything expensive
    starts. Nothing is created: a run refused later (its model not found) leaves no empty folder."""
    path = check_path_length(path, what, room)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{what} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):  # also says EROFS: a read-only mount refuses even root
        raise ValueError(f"{what} {path}: cannot write in {existing} (read-only, or no permission)")
    return path


def write_atomic(path: Path, content: str | bytes) -> None:
    """Replace ``path`` whole: a reader (or a second writer) sees the old file or the new one, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = new_file_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = new_file_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)  # mkstemp's 0600 would hide the file from everyone else
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        fault_point("json_write")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunStore:
    """Writes one run's folder. ``metrics`` is one flat object, rewritten after every update.

    Loggers (``attach_loggers``) receive each metric as ``log(metrics, step, stage)`` where ``f"{stage}/{key}"`` is
    the value's key in metrics.json: a step logs ``(metrics, step, stage)``; one-off values are split at their first
    "/" and logged with step None (``"before/pass@1"`` -> ``log({"pass@1": ..}, None, "before")``). So metrics.json
    can be rebuilt from any logger's stream: stepped values append to a list, one-off values set a key."""

    def __init__(self, root: Path | str, name: str, existing: bool = False) -> None:
        """A new folder ``root/name`` (it must not exist), or with ``existing`` one to resume into: its metrics are
        those of its metrics.json until ``rollback``."""
        self.dir = Path(root) / name
        self.metrics: dict[str, Any] = {}  # flat: "before/pass@1": 0.2, "train/reward_mean": [..]
        self.loggers: list[Any] = []
        self.checkpointer: Any = None  # the runner's Checkpointer for a training run (harness/store/checkpoint.py)
        self.step_models: Any = None  # --save-every's StepModels (harness/store/step_models.py), else None
        # --eval-every's evaluation (harness/runner/during_training.py), called with the steps taken after each
        # training step's line, so every trainer that logs its steps gets it; None: none
        self.after_train_step: Any = None
        self.lock: Any = None  # the folder's WriterLock (harness/store/lock.py), held while this process writes it
        # Events a resume will send again (they came after its snapshot): loggers whose stream is not cut back with
        # the folder (TensorBoard, MLflow, W&B) already have them, so they skip this many (see ``rollback``).
        self.replayed_events = 0
        self._replaying = False  # whether the last event was one of those (then so are its step's completions)
        # --log-completions-every N: a table of every N-th training step's completions to each logger that takes
        # one (``log_completions``); 0: none
        self.completions_every = 0
        # One-line warnings of what went wrong without failing the run (a trainer that stopped at a collapse):
        # the manifest's "warnings" when the run completes; kept in snapshots, so a resume keeps them too.
        self.warnings: list[str] = []
        # The manifest's trainer, seed and versions (harness/store/run_identity.py), once written: each snapshot
        # records them, so a resume can refuse a manifest edited since.
        self.identity: dict[str, Any] | None = None
        # Each appended file's SHA-256 so far, by name: (bytes hashed, the hash), so a snapshot hashes only what was
        # appended since the last one (``snapshot``).
        self._hashed: dict[str, tuple[int, Any]] = {}
        if not existing:
            self.dir.mkdir(parents=True, exist_ok=False)
        elif (self.dir / "metrics.json").exists():
            self.metrics = read_json(self.dir / "metrics.json")

    @classmethod
    def create(cls, root: Path | str, label: str) -> RunStore:
        """A new, unique folder ``<root>/<YYYYmmdd-HHMMSS>-<label>[-N]``."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for i in range(1000):
            name = f"{stamp}-{label}" + (f"-{i}" if i else "")
            try:
                return cls(root, name)
            except FileExistsError:
                continue
        raise RuntimeError(f"could not create a run folder under {root}")

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.dir / "manifest.json", manifest)
        self.identity = run_identity(manifest)

    def attach_loggers(self, loggers: Iterable[Any]) -> None:
        """Forward every metric recorded from now on to ``loggers`` too (``harness.store.loggers.open_loggers``)."""
        self.loggers.extend(loggers)

    def update_metrics(self, metrics: dict[str, float]) -> None:
        """One-off values ("before/pass@1", a trainer's "sft/..." summary): set in metrics.json. Loggers receive one
        event per prefix, with step None; a key without "/" comes with stage ""."""
        self.metrics.update(metrics)
        write_json_atomic(self.dir / "metrics.json", self.metrics)
        by_stage: dict[str, dict[str, Any]] = {}
        for key, value in metrics.items():
            stage, name = key.split("/", 1) if "/" in key else ("", key)
            by_stage.setdefault(stage, {})[name] = value
        for stage, values in by_stage.items():
            self._forward(values, None, stage)

    def record_intervals(self, intervals: dict[str, list[float]]) -> None:
        """95% intervals of evaluation figures, ``{"eval/pass@1": [low, high]}``: kept under the one key
        ``intervals`` of metrics.json, beside the figures (which stay plain numbers; the index reads numbers and
        lists, so it passes this object by). Not sent to the loggers, which take numbers."""
        self.metrics.setdefault("intervals", {}).update(intervals)
        write_json_atomic(self.dir / "metrics.json", self.metrics)

    def warn(self, line: str) -> None:
        """Record a one-line warning for the manifest (the caller shows it on the terminal)."""
        self.warnings.append(line)

    def write_samples(self, records: Iterable[dict[str, Any]]) -> None:
        """Append candidate records (problem_id, phase, text, extracted, unparsed, rewards, ...) to samples.jsonl;
        a training step's, every ``completions_every`` steps, also go to the loggers that take completions."""
        records = list(records)
        self._append("samples.jsonl", records)
        steps = {r.get("step") for r in records if r.get("phase") == "train"}
        if (
            self.completions_every
            and len(steps) == 1
            and isinstance(step := steps.pop(), int)
            and (step + 1) % self.completions_every == 0
        ):
            self._forward_completions([r for r in records if r.get("phase") == "train"], step)

    def log_step(self, step: int, metrics: dict[str, float], stage: str = "train") -> None:
        """Per-step training metrics: a line in steps.jsonl, and the list ``<stage>/<key>`` (one value per step) in
        metrics.json. A warm-up before the main training logs under its own stage (e.g. "warmup")."""
        self._append("steps.jsonl", [{"stage": stage, "step": step, **metrics}])
        for key, value in metrics.items():
            self.metrics.setdefault(f"{stage}/{key}", []).append(value)
        write_json_atomic(self.dir / "metrics.json", self.metrics)
        self._forward(metrics, step, stage)
        if stage == "train" and self.after_train_step is not None:  # before the trainer checkpoints this step
            self.after_train_step(step + 1)

    def close(self) -> None:
        """Close the loggers (a failing close is warned about, not raised: the run's own files are complete)."""
        loggers, self.loggers = self.loggers, []
        for logger in loggers:
            try:
                with logger_exits(logger, "closing"):  # its sys.exit: warned about too (harness/store/loggers.py)
                    logger.close()
            except Exception as exc:
                _warn(logger, f"close() raised {type(exc).__name__}: {exc}")

    def _forward(self, metrics: dict[str, Any], step: int | None, stage: str) -> None:
        # A logger is a convenience, not the record: one that fails must not end a run that may have trained for
        # hours, so it is dropped after one warning and the store's own files carry on.
        replayed, self.replayed_events = self.replayed_events > 0, max(0, self.replayed_events - 1)
        self._replaying = replayed
        # a copy each, so no logger sees another's changes
        self._send("log", lambda logger: logger.log(dict(metrics), step, stage))

    def _forward_completions(self, rows: list[dict[str, Any]], step: int) -> None:
        # A step's samples follow its line: after a resume, those of a replayed step went out before the kill.
        self._send("log_completions", lambda logger: logger.log_completions([dict(r) for r in rows], step, "train"))

    def _send(self, method: str, call: Any) -> None:
        for logger in list(self.loggers):
            if (self._replaying and not getattr(logger, "rolled_back", False)) or not hasattr(logger, method):
                continue
            try:
                with logger_exits(logger, f"receiving {method}()"):  # its sys.exit ends the run, named
                    call(logger)
            except PluginFailed:
                raise
            except Exception as exc:
                self.loggers.remove(logger)
                _warn(logger, f"{method}() raised {type(exc).__name__}: {exc}; dropped for the rest of the run")
                with contextlib.suppress(Exception):  # release its files or processes if it still can
                    logger.close()

    def _append(self, filename: str, records: Iterable[dict[str, Any]]) -> None:
        try:
            with open(self.dir / filename, "a") as f:
                for record in records:
                    line = json.dumps(record, default=str) + "\n"
                    f.write(line[: len(line) // 2])
                    f.flush()
                    fault_point("jsonl_write")  # a kill here leaves half a line: what a resume must cut away
                    f.write(line[len(line) // 2 :])
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # a full disk or a file-size limit (EFBIG): the one line names the file
            if exc.filename is None:
                exc.filename = str(self.dir / filename)
            raise

    # -- resuming ------------------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """What the folder holds now: each appended file's size and the SHA-256 of those bytes, the metrics (and
        what the run is: ``run``). Saved with each checkpoint and at the end of each phase, so a resume can cut the
        files back to a moment whose work it will not redo, and refuse files changed before that moment."""
        sizes = {name: (self.dir / name).stat().st_size if (self.dir / name).exists() else 0 for name in APPENDED_FILES}
        return {
            "files": sizes,
            "sha256": {name: self._prefix_sha256(name, size) for name, size in sizes.items()},
            "metrics": json.loads(json.dumps(self.metrics, default=str)),
            "warnings": list(self.warnings),
        } | ({"run": self.identity} if self.identity else {})

    def _prefix_sha256(self, name: str, size: int) -> str:
        """The SHA-256 of the first ``size`` bytes of ``name``, reading only the bytes after those hashed last time
        (the files only grow between two snapshots; ``rollback`` forgets what was hashed)."""
        done, digest = self._hashed.get(name, (0, None))
        if digest is None or done > size:
            done, digest = 0, hashlib.sha256()
        if size > done:
            with open(self.dir / name, "rb") as f:
                f.seek(done)
                _hash_into(digest, f, size - done)
        self._hashed[name] = (size, digest)
        return digest.hexdigest()

    def check_snapshot(self, snapshot: dict[str, Any] | None, moment: str) -> None:
        """Refuse, in one line naming the file, to resume from ``snapshot`` (taken at ``moment``, e.g. "the
        checkpoint") unless every appended file it recorded is present, at least as long as recorded, and whole
        JSON lines up to that length: cutting back a file that lost lines would silently drop work."""
        for name, size in (snapshot or {}).get("files", {}).items():
            path = self.dir / name
            if not size:
                continue
            if not path.is_file():
                raise ValueError(f"cannot resume {self.dir}: {name} is missing ({moment} recorded {size} bytes)")
            if path.stat().st_size < size:
                raise ValueError(
                    f"cannot resume {self.dir}: {name} has {path.stat().st_size} bytes, fewer than the "
                    f"{size} {moment} recorded"
                )
            try:
                read_jsonl(path, upto=size)
            except ValueError as exc:
                raise ValueError(
                    f"cannot resume {self.dir}: {exc} (within the {size} bytes {moment} recorded)"
                ) from None
            recorded = ((snapshot or {}).get("sha256") or {}).get(name)  # none: a snapshot from before digests
            if recorded is not None and prefix_sha256(path, size) != recorded:
                raise ValueError(
                    f"cannot resume {self.dir}: {name} is not what {moment} recorded: its first {size} bytes "
                    "have another SHA-256 (edited since); put back the file it wrote, or start a new run"
                )

    def check_links(self) -> None:
        """Refuse, in one line naming it, a symbolic link in the folder that resolves outside it: a resume reads,
        cuts back and appends to the folder's files, and would do it to a file elsewhere (another run's)."""
        root = os.path.realpath(self.dir)
        for folder, dirs, files in os.walk(self.dir):  # symlinked folders are listed, never entered
            for name in (*dirs, *files):
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    continue
                target = os.path.realpath(path)
                if os.path.commonpath([root, target]) != root:
                    raise ValueError(
                        f"cannot resume {self.dir}: {os.path.relpath(path, self.dir)} is a symbolic link to "
                        f"{target}, outside the run folder; a resume uses only the folder's own files: move it back"
                    )

    def check_complete(self) -> None:
        """Every appended file is whole JSON lines, end to end: checked before a run says it is complete."""
        for name in APPENDED_FILES:
            if (self.dir / name).exists():
                read_jsonl(self.dir / name)

    def rollback(self, snapshot: dict[str, Any] | None) -> None:
        """Cut every appended file back to its size in ``snapshot`` (None: empty; checked by ``check_snapshot``)
        and restore its metrics: lines written after it (by work the resume redoes) would otherwise be duplicated,
        and a half line kept. The logger events cut from metrics.jsonl are the ones the resume will send again."""
        files = (snapshot or {}).get("files", {})
        for name in APPENDED_FILES:
            path = self.dir / name
            if path.exists():
                with open(path, "r+b") as f:
                    if name == "metrics.jsonl":  # one line per event
                        self.replayed_events = f.read().count(b"\n") - _lines(path, files.get(name, 0))
                    f.truncate(min(files.get(name, 0), path.stat().st_size))  # never grown with zeros
                    f.flush()
                    os.fsync(f.fileno())
        self._hashed = {}  # the files were cut back: hash them again from the start
        self.metrics = json.loads(json.dumps((snapshot or {}).get("metrics", {})))
        self.warnings = list((snapshot or {}).get("warnings", []))
        write_json_atomic(self.dir / "metrics.json", self.metrics)


class FollowerStore:
    """The run folder as ranks other than 0 of a data-parallel run see it: its checkpoint to restore from on resume;
    every write is rank 0's, which holds the same whole batch (harness/runner/distributed.py), so these are no-ops."""

    def __init__(self, run_dir: Path | str, checkpointer: Any = None) -> None:
        self.dir = Path(run_dir)
        self.checkpointer = checkpointer
        self.step_models = None  # rank 0 saves them

    def update_metrics(self, metrics: dict[str, float]) -> None:
        pass

    def write_samples(self, records: Iterable[dict[str, Any]]) -> None:
        pass

    def log_step(self, step: int, metrics: dict[str, float], stage: str = "train") -> None:
        pass

    def warn(self, line: str) -> None:
        pass

    def close(self) -> None:
        pass


def prefix_sha256(path: Path, size: int) -> str:
    """The SHA-256 of the first ``size`` bytes of ``path`` (fewer if it is shorter)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        _hash_into(digest, f, size)
    return digest.hexdigest()


def _hash_into(digest: Any, f: Any, size: int) -> None:
    while size > 0 and (chunk := f.read(min(size, 1 << 20))):
        digest.update(chunk)
        size -= len(chunk)


def _lines(path: Path, size: int) -> int:
    with open(path, "rb") as f:
        return f.read(size).count(b"\n")


def _warn(logger: Any, message: str) -> None:
    name = getattr(logger, "name", type(logger).__name__)
    print(f"warning: logger {name!r}: {message}", file=sys.stderr)
