"""A task's ``hub_id``, read through ``datasets``: a Hugging Face hub id, or a local copy that ``datasets`` wrote or
reads: a folder written by ``save_to_disk`` (read by ``load_from_disk``), one data file (.parquet, .json, .jsonl,
.csv: read by that format's builder, as one split "train"), or a folder of such files (``load_dataset(folder)``,
which names splits after the files: train.parquet, test.parquet, ...).

A local path is recognised by existing, as ``datasets.load_dataset`` itself does; its ``data_source()`` version is
a digest of its content, since it has no hub commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.provenance import file_digest, folder_digest

BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv", ".arrow": "arrow"}


def local_path(hub_id: str) -> Path | None:
    path = Path(str(hub_id)).expanduser()
    return path if path.exists() else None


def load_splits(hub_id: str, config: str | None = None, revision: str | None = None) -> dict[str, Any]:
    """{split name: Dataset}; a bare Dataset (one file, or save_to_disk of a Dataset) is the split "all"."""
    import datasets  # imported here: a task's other sources (and scoring) never need it

    path = local_path(hub_id)
    if path is None:
        loaded = datasets.load_dataset(hub_id, config, revision=revision)
    elif path.is_dir() and ((path / "dataset_dict.json").exists() or (path / "state.json").exists()):
        loaded = datasets.load_from_disk(str(path))
    elif path.is_file():
        builder = BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise ValueError(f"{path}: not a data file datasets reads (suffixes: {', '.join(BUILDERS)})")
        loaded = datasets.load_dataset(builder, data_files=str(path))
    else:
        loaded = datasets.load_dataset(str(path), config)
    return {"all": loaded} if isinstance(loaded, datasets.Dataset) else dict(loaded)


def local_version(path: Path) -> str:
    """The content digest of a local file or folder (the folder's is skipped above harness.provenance's limit)."""
    if path.is_file():
        return file_digest(path) or "unreadable"
    digest, size = folder_digest(path)
    return digest or f"not hashed ({size} bytes)"


def id_prefix(hub_id: str) -> str:
    """The prefix of generated problem ids: a hub id's name ("openai/gsm8k" -> "gsm8k"), a local path's stem."""
    path = local_path(hub_id)
    return (path.stem if path is not None else str(hub_id).rsplit("/", 1)[-1]).lower()
