"""Reading a run folder's files (JSON, and the JSONL files samples.jsonl, steps.jsonl, metrics.jsonl): every error
is a ValueError naming the file (and line), so "Expecting ',' delimiter" or "'utf-8' codec can't decode byte" never
reaches a user without saying where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path | str, upto: int | None = None, cut_tail: bool = False) -> list[dict[str, Any]]:
    """The records of ``path`` (its first ``upto`` bytes when given), each a JSON object on a line of its own.

    A last line with no newline is a line cut by a crash mid-write: skipped with ``cut_tail`` (a folder a run may
    still be writing, or died writing), an error otherwise. Any other bad line raises ValueError
    "PATH line N: ..."."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read() if upto is None else f.read(upto)
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the data ends with a newline
    if tail and not cut_tail:
        raise ValueError(f"{path} line {len(lines) + 1}: cut short (no newline at its end)")
    records = []
    for number, raw in enumerate(lines, 1):
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path} line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except ValueError as exc:
            raise ValueError(f"{path} line {number}: not valid JSON ({exc})") from None
        except RecursionError:
            raise ValueError(f"{path} line {number}: not valid JSON (nested too deeply)") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path} line {number}: a JSON {type(record).__name__}, not an object")
        records.append(record)
    return records


def read_json(path: Path | str) -> Any:
    """A JSON file's value; an unreadable or invalid file is one ValueError naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:  # Python's parser recurses per bracket: a file of 100,000 "[" is not a stack overflow
        raise ValueError(f"{path}: not valid JSON (nested too deeply)") from None
