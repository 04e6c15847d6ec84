"""Training checkpoints: everything a killed run needs to continue as if it had never stopped.

One folder, ``<run>/checkpoint/``: model.pt (the trained weights: the parameters that train, so a LoRA run's holds
its adapters and none of the frozen base, which a resume loads from the model's source as the run did),
optimizer.pt (AdamW's moments and step counts), reference.pt (the frozen KL reference, when there is one: it is
the policy *before* training, which a resumed process no longer has), state.json (the step just finished, torch's
RNG state, the trainer's own counters, and a snapshot of the run folder: each appended file's size and the metrics
at that moment).

Written to ``.checkpoint.tmp/`` and published by renames, so there is always one complete checkpoint: a crash before
the swap leaves the previous one, a crash between the two renames leaves it as ``.checkpoint.old/``, which ``load``
falls back to. Only the latest checkpoint is kept, and none once the run is complete. A save that fails (a full
disk) removes its ``.checkpoint.tmp/`` and raises an OSError naming the file; the previous checkpoint stays.
state.json records each file's size and SHA-256, so a resume refuses, before the model loads, a checkpoint whose files
were cut, lost or changed (bytes flipped in model.pt once resumed silently into NaN gradients), and its store snapshot
records what the run was and the SHA-256 of each appended file up to that moment (harness/store/run_folder.py
``snapshot``), so a manifest or a step line edited since is refused too. A checkpoint folder, or a file in it, that
is a symbolic link is refused: it is published and retired by renames and removed whole, and is the run's own.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from pathlib import Path
from typing import Any

from harness.faults import fault_point
from harness.interrupts import deferred_interrupts
from harness.provenance import file_sha256
from harness.store.reading import read_json
from harness.store.run_folder import write_json_atomic

NAME = "checkpoint"


class Checkpointer:
    """``every``: after every N-th step (an int >= 1), or once the minutes in "10m" have passed since the last
    checkpoint (or since the checkpointer was made, at the start of training); always after the last step."""

    def __init__(self, run_dir: Path | str, every: int | str = 1) -> None:
        self.run_dir = Path(run_dir)
        self.minutes = float(every[:-1]) if isinstance(every, str) and every.endswith("m") else None
        self.every = 0 if self.minutes is not None else int(every)
        if (self.every < 1) if self.minutes is None else not self.minutes > 0:
            raise ValueError(f"checkpoint_every must be >= 1 steps or > 0 minutes, got {every!r}")
        self.last_save = time.monotonic()

    @property
    def folder(self) -> Path | None:
        """The complete checkpoint to resume from, if any."""
        for name in (NAME, f".{NAME}.old"):
            path = self.run_dir / name
            if (path / "state.json").is_file():
                return path
        return None

    def due(self, step: int, steps: int) -> bool:
        """After every ``every``-th step or once ``minutes`` have passed, and after the last (so a kill during the
        final evaluation redoes no training)."""
        if step + 1 == steps:
            return True
        if self.minutes is not None:
            return time.monotonic() - self.last_save >= self.minutes * 60
        return (step + 1) % self.every == 0

    def state(self) -> dict[str, Any] | None:
        folder = self.folder
        return read_json(folder / "state.json") if folder else None

    def check(self) -> None:
        """Refuse, in one line naming the file, a checkpoint folder (or a file in it) that is a symbolic link, and a
        checkpoint whose files are missing, not the size or SHA-256 it recorded, or that holds a weights file it
        did not write (``restore`` would load it)."""
        for name in (NAME, f".{NAME}.old", f".{NAME}.tmp"):
            path = self.run_dir / name
            if path.is_symlink():  # published and retired by renames and removed whole: a folder of the run's own
                raise ValueError(
                    f"cannot resume {self.run_dir}: the checkpoint folder {name} is a symbolic link (to "
                    f"{os.path.realpath(path)}); a checkpoint is the run folder's own: move it back in its place"
                )
        folder = self.folder
        if folder is None:
            return
        for path in sorted(folder.iterdir()):
            if path.is_symlink():
                raise ValueError(
                    f"cannot resume {self.run_dir}: the checkpoint's {path.name} is a symbolic link (to "
                    f"{os.path.realpath(path)}); a checkpoint holds its own files"
                )
        state = self.state()
        if not isinstance(state, dict):
            raise ValueError(f"cannot resume {self.run_dir}: the checkpoint's state.json holds no checkpoint state")
        recorded = state.get("files")
        if isinstance(recorded, dict):
            stray = sorted(p.name for p in folder.glob("*.pt") if p.name not in recorded)
            if stray:
                raise ValueError(
                    f"cannot resume {self.run_dir}: the checkpoint holds {stray[0]}, which it was not written with "
                    f"({folder / stray[0]})"
                )
        files = recorded if isinstance(recorded, dict) else {"model.pt": None, "optimizer.pt": None}
        for name, size in files.items():
            path = folder / name
            if not path.is_file():
                raise ValueError(f"cannot resume {self.run_dir}: the checkpoint's {name} is missing ({path})")
            if size is not None and path.stat().st_size != size:
                raise ValueError(
                    f"cannot resume {self.run_dir}: the checkpoint's {name} has "
                    f"{path.stat().st_size} bytes, not the {size} it recorded ({path})"
                )
            digest = state.get("sha256", {}).get(name)
            if digest is not None and file_sha256(path) != digest:  # same size, other bytes: flipped or replaced
                raise ValueError(
                    f"cannot resume {self.run_dir}: the checkpoint's {name} is not the file it wrote "
                    f"(its SHA-256 differs from the one recorded; {path})"
                )

    def save(
        self, step: int, model, optimizer_state: dict[str, Any], trainer_state: dict[str, Any], store, reference=None
    ) -> None:
        """``optimizer_state``: the optimizer's ``state_dict()``, gathered whole in a sharded run."""
        with deferred_interrupts():  # a signal mid-write ends the run "interrupted" after it, not as a failure
            self._save(step, model, optimizer_state, trainer_state, store, reference)

    def _save(
        self, step: int, model, optimizer_state: dict[str, Any], trainer_state: dict[str, Any], store, reference=None
    ) -> None:
        import torch  # here, not at the top: `harness run` refuses bad names before torch loads

        tmp = self.run_dir / f".{NAME}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        parts = {
            "model.pt": trained_weights(model),
            "optimizer.pt": optimizer_state,
            "reference.pt": reference.state_dict() if reference is not None else None,
        }
        try:
            for name, part in parts.items():
                if part is not None:
                    _save(part, tmp / name)
            write_json_atomic(
                tmp / "state.json",
                {
                    "step": step,
                    "torch_rng": torch.get_rng_state().tolist(),
                    "trainer": trainer_state,
                    "store": store.snapshot(),
                    "files": {p.name: p.stat().st_size for p in tmp.glob("*.pt")},
                    "sha256": {p.name: file_sha256(p) for p in tmp.glob("*.pt")},
                },
            )
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # a full disk must not keep a partial copy of the weights
            raise
        fault_point("checkpoint")
        final, old = self.run_dir / NAME, self.run_dir / f".{NAME}.old"
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        self.last_save = time.monotonic()

    def remove(self) -> None:
        for name in (NAME, f".{NAME}.old", f".{NAME}.tmp"):
            shutil.rmtree(self.run_dir / name, ignore_errors=True)

    def restore_model(self, model) -> None:
        """Only the weights: a run killed after training, during its final evaluation."""
        import torch  # here, not at the top: `harness run` refuses bad names before torch loads

        load_trained_weights(model, torch.load(self.folder / "model.pt", map_location="cpu", weights_only=True))

    def restore(self, model, optimizer, reference=None) -> dict[str, Any] | None:
        """Load the latest checkpoint into ``model``, ``optimizer`` (and ``reference``); returns its state, or None
        when there is none (a fresh start)."""
        import torch  # here, not at the top: `harness run` refuses bad names before torch loads

        folder = self.folder
        if folder is None:
            return None
        state = read_json(folder / "state.json")
        load_trained_weights(model, torch.load(folder / "model.pt", map_location="cpu", weights_only=True))
        optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location="cpu", weights_only=True))
        if reference is not None and (folder / "reference.pt").exists():
            reference.load_state_dict(torch.load(folder / "reference.pt", map_location="cpu", weights_only=True))
        torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
        return state


def trained_weights(model) -> dict[str, Any]:
    """The parameters that train (``requires_grad``), by name: every weight in a full fine-tune, the adapters of a
    LoRA policy. The rest is the model as loaded, which a resume loads again."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def load_trained_weights(model, weights: dict[str, Any]) -> None:
    """``trained_weights`` back into ``model``; a checkpoint from before them (the whole state dict) loads too. Refuses
    one that lacks a parameter the model trains, or names one it does not have."""
    missing, unexpected = model.load_state_dict(weights, strict=False)
    lacking = sorted(set(trained_weights(model)) & set(missing))
    if lacking or unexpected:
        raise ValueError(
            f"the checkpoint's model.pt does not fit this model: missing {lacking[:3]}, unexpected "
            f"{sorted(unexpected)[:3]}"
        )


def _save(obj: Any, path: Path) -> None:
    """torch.save through our own file, so a failed write (a full disk) is an OSError naming the file: torch's own
    writer swallows the write's error and says only "[enforce fail at inline_container.cc:672] unexpected pos"."""
    import torch

    with open(path, "wb") as f:
        watched = _WatchedFile(f)
        try:
            torch.save(obj, watched)
            f.flush()
            os.fsync(f.fileno())
        except (OSError, RuntimeError) as exc:
            error = watched.error or exc
            if not isinstance(error, OSError):
                raise
            raise OSError(error.errno or errno.EIO, error.strerror or str(error), str(path)) from exc


class _WatchedFile:
    """A file that keeps the first OSError its writes raised (torch turns it into a RuntimeError)."""

    def __init__(self, file: Any) -> None:
        self.file, self.error = file, None

    def write(self, data: bytes) -> int:
        try:
            return self.file.write(data)
        except OSError as exc:
            self.error = self.error or exc
            raise

    def flush(self) -> None:
        self.file.flush()
