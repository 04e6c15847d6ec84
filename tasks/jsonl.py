"""A task's own JSONL file, read one way by every task that takes one (math, mmlu-pro, code, persona).

One row per non-blank line, each a JSON value; the task checks what a row holds. Every mistake in the file itself is
one ValueError naming it: an unreadable file ("PATH: cannot read: ..."), a line that is not JSON ("PATH row R (line
N): invalid JSON: ...", R counting rows from 0 and N lines from 1) or a file with no rows ("PATH: no rows").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["jsonl_rows", "read_jsonl"]


def jsonl_rows(path: Path) -> Iterator[tuple[int, int, Any]]:
    """(row, line, value) for each row of ``path`` in order, parsed as it is consumed: a task that checks each row
    as it comes names the first bad row, whether its JSON or its content is what is wrong. "no rows" is raised once
    the file is exhausted without one."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None
    row = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} row {row} (line {number}): invalid JSON: {exc.msg}") from None
        yield row, number, value
        row += 1
    if not row:
        raise ValueError(f"{path}: no rows")


def read_jsonl(path: Path) -> tuple[list[Any], list[int]]:
    """Every row of ``path`` and the line number of each (``jsonl_rows``, read whole)."""
    rows, numbers = [], []
    for _, number, value in jsonl_rows(path):
        rows.append(value)
        numbers.append(number)
    return rows, numbers
