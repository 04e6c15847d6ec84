"""One folder per run: manifest.json, metrics.json, samples.jsonl, steps.jsonl.

JSON files are written atomically (temp file + rename) so a killed run never leaves a half-written file; JSONL
files are appended and flushed line by line, so everything computed before a crash is kept.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunStore:
    """Writes one run's folder. ``metrics`` is one flat object, rewritten after every update."""

    def __init__(self, root: Path | str, name: str) -> None:
        self.dir = Path(root) / name
        self.dir.mkdir(parents=True, exist_ok=False)
        self.metrics: dict[str, Any] = {}  # flat: "before/pass@1": 0.2, "train/reward_mean": [..]

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

    def update_metrics(self, metrics: dict[str, float]) -> None:
        self.metrics.update(metrics)
        write_json_atomic(self.dir / "metrics.json", self.metrics)

    def write_samples(self, records: Iterable[dict[str, Any]]) -> None:
        """Append candidate records (problem_id, phase, text, extracted, unparsed, rewards, ...) to samples.jsonl."""
        self._append("samples.jsonl", records)

    def log_step(self, step: int, metrics: dict[str, float], stage: str = "train") -> None:
        """Per-step training metrics: a line in steps.jsonl, and the list ``<stage>/<key>`` (one value per step) in
        metrics.json. A warm-up before the main training logs under its own stage (e.g. "warmup")."""
        self._append("steps.jsonl", [{"stage": stage, "step": step, **metrics}])
        for key, value in metrics.items():
            self.metrics.setdefault(f"{stage}/{key}", []).append(value)
        write_json_atomic(self.dir / "metrics.json", self.metrics)

    def _append(self, filename: str, records: Iterable[dict[str, Any]]) -> None:
        with open(self.dir / filename, "a") as f:
            for record in records:
                f.write(json.dumps(record, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
