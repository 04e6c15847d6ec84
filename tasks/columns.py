"""Column mapping for a task's own data: which column of a user's dataset holds each field the task reads (math: the
question and the answer; mmlu-pro: question, options, answer; code: prompt, entry point, tests), and an
``answer_pattern``, a regular expression that cuts the reference answer out of its column: GSM8K's answers end in
"#### 72", and ``answer_pattern='#### (.+)'`` keeps "72" (the first group, or the whole match without groups).

Unset, every field is read from the column of its own name and no pattern applies: rows pass through untouched, so
the problems (ids, order, meta) and ``data_source()`` are exactly what they were before these options existed. Set,
``describe()`` goes into ``data_source()``, so a mapped source never looks like an unmapped one in a manifest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.tasks.chat_data import PROMPT

RAW_ANSWER = "raw_answer"  # where a pattern's input is kept in the problem's meta (GSM8K's worked solution)


@dataclass(frozen=True)
class Columns:
    task: str  # for messages: "math: ..."
    columns: dict[str, str]  # field -> the column that holds it
    defaults: dict[str, str]  # field -> the column it is read from when not mapped (the field's own name)
    pattern: re.Pattern[str] | None = None  # applied to the "answer" field
    options: dict[str, str] | None = None  # field -> the task option that maps it, where the two names differ

    @classmethod
    def build(
        cls,
        task: str,
        given: Mapping[str, Any],
        defaults: Mapping[str, str],
        answer_pattern: str | None = None,
        options: Mapping[str, str] | None = None,
    ) -> Columns:
        """Check the options: column names are non-empty strings, the pattern compiles (one line otherwise)."""
        columns = dict(defaults)
        for field, column in given.items():
            if not isinstance(column, str) or not column.strip():
                option = (options or {}).get(field, field)
                raise ValueError(f"{task}: option {option} names the column holding the {field}; got {column!r}")
            columns[field] = column.strip()
        pattern = None
        if answer_pattern not in (None, "", "none", "None"):
            if "answer" not in defaults:
                raise ValueError(f"{task}: answer_pattern needs an answer column, which this task does not read")
            try:
                pattern = re.compile(str(answer_pattern))
            except re.error as exc:
                raise ValueError(
                    f"{task}: answer_pattern {answer_pattern!r} is not a regular expression: {exc}"
                ) from None
        return cls(task, columns, dict(defaults), pattern, dict(options or {}))

    @property
    def mapped(self) -> bool:
        return self.columns != self.defaults or self.pattern is not None

    def describe(self) -> dict[str, Any]:
        """For ``data_source()``: the mapped columns and the pattern; nothing when unmapped (today's manifests)."""
        if not self.mapped:
            return {}
        changed = {self.option(f): c for f, c in self.columns.items() if c != self.defaults[f]}
        return {"columns": changed, "answer_pattern": self.pattern.pattern if self.pattern else None}

    def option(self, field: str) -> str:
        return (self.options or {}).get(field, field)

    def check(self, available: Iterable[str] | None, where: str, optional: Iterable[str] = ()) -> None:
        """Refuse, in one line, a dataset without a column a field needs (``optional``: fields the task can do
        without here, e.g. MATH's answer, read from its solution). ``available`` None: not known, nothing checked."""
        if available is None:
            return
        available = list(available)
        skip = set(optional)
        for field, column in self.columns.items():
            if field not in skip and column not in available and not self.reads_trl_prompt(field, available):
                raise ValueError(
                    f"{where}: no column {column!r} for the {self.option(field)} (columns: "
                    f"{', '.join(available) or 'none'}); map it with --set task.{self.option(field)}"
                    "=COLUMN"
                )

    def reads_trl_prompt(self, field: str, available: Iterable[str]) -> bool:
        """Whether the question's field, left unmapped, is read from TRL's ``prompt`` column instead
        (tasks/chat_data.py ``question_column``): the dataset has no column of the field's own name, but a prompt."""
        return (
            field in ("problem", "question")
            and self.columns[field] == self.defaults[field]
            and self.columns[field] not in available
            and PROMPT in available
        )

    def rows(
        self,
        rows: Iterable[Any],
        where: str,
        label: Callable[[int], str] = lambda i: f"row {i}",
        optional: Iterable[str] = (),
    ) -> tuple[list[Any], list[int], int]:
        """(the rows with every field under its own name, their indices in ``rows``, how many were dropped because
        the pattern found no answer in them). Unmapped, the rows are returned as they are."""
        rows = list(rows)
        if not self.mapped:
            return rows, list(range(len(rows))), 0
        kept, indices = [], []
        for i, row in enumerate(rows):
            out = self.row(row, f"{where} {label(i)}", optional)
            if out is not None:
                kept.append(out)
                indices.append(i)
        if rows and not kept:
            first = rows[0].get(self.columns["answer"]) if isinstance(rows[0], Mapping) else rows[0]
            raise ValueError(
                f"{self.task}: answer_pattern {self.pattern.pattern!r} matched no answer in {where} "
                f"({len(rows)} rows; the first: {_short(first)})"
            )
        return kept, indices, len(rows) - len(kept)

    def source_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A row that ``row()`` mapped, under the dataset's own column names again (the answer's column with its
        whole text): what a batch reward function receives, named as in the user's data."""
        if not self.mapped:
            return dict(row)
        out = {k: v for k, v in row.items() if k not in self.columns and k != RAW_ANSWER}
        for field, column in self.columns.items():
            if field in row:
                out[column] = row[RAW_ANSWER] if field == "answer" and RAW_ANSWER in row else row[field]
        return out

    def row(self, row: Any, at: str, optional: Iterable[str] = ()) -> Any:
        """One row with every field under its own name; None when the pattern finds no answer in it."""
        if not self.mapped or not isinstance(row, Mapping):
            return row  # the task's own row checker says what it expected
        skip = set(optional)
        # the question unmapped and only TRL's "prompt" there: the row keeps its prompt, which the task reads then
        missing = [
            c for f, c in self.columns.items() if c not in row and f not in skip and not self.reads_trl_prompt(f, row)
        ]
        if missing:
            raise ValueError(f"{at}: no column {missing[0]!r} (columns: {', '.join(map(str, row)) or 'none'})")
        used = set(self.columns.values())
        out = {k: v for k, v in row.items() if k not in used}  # the rest stays (a task keeps it as meta)
        out |= {field: row[column] for field, column in self.columns.items() if column in row}
        if self.pattern is not None and out.get("answer") is not None:
            raw = out["answer"]
            m = self.pattern.search(str(raw))
            value = (m.group(1) if self.pattern.groups else m.group(0)) if m else None
            if value is None or not value.strip():
                return None
            out["answer"], out[RAW_ANSWER] = value.strip(), raw
        return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
