"""What a run folder's files must hold before the index takes them: every value the index stores or a report reads,
checked for its type and range, so a folder someone else wrote (or edited) is skipped in one line naming the file
and the field, never a crash. A report renders only from the index, so it meets only values checked here.

The checks follow what the readers need: SQLite stores integers up to 2^63 - 1 (a larger seed was an
OverflowError), a report groups and sorts by the names (a list there is unhashable, a null sorts beside nothing),
counts and seconds are formatted as numbers, and no string or nesting is so large that rendering it is the
problem. A value a run may legitimately hold (a path-like task name, markup in a warning) passes: the pages escape
it and plot names are sanitised (harness/report/plots.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

MAX_INT = (1 << 63) - 1  # SQLite's largest integer
MAX_NAME = 4096  # a task, trainer, searcher, model (a path), status: a name, at most a path's length
MAX_TEXT = 65_536  # any other string in a manifest (an error line, a data source's field)
MAX_DEPTH = 32  # a manifest nests 5 deep; deeper is not a run's record
MAX_ANSWERS = 100_000  # answers per rollout: searcher.n's own bound
MAX_VALUE = 1e100  # a number a report adds, squares or averages: beyond it a sum of a few would overflow a float
MAX_K = 10**9  # the k of pass@k, best@k, the c of solved@c: a report computes with it (10^400 was an OverflowError)
_HEADLINE_K = re.compile(r"(?:^|/)(?:pass|best|solved)@(\d+)$")

Check = Callable[[Any], str]  # "" when the value is fine, else why not


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        return "should be a non-empty string"
    return f"longer than {MAX_NAME} characters" if len(value) > MAX_NAME else ""


def _text(value: Any) -> str:
    return "" if value is None or isinstance(value, str) else "should be a string"


def _texts(value: Any) -> str:
    if value is None:
        return ""
    ok = isinstance(value, list) and all(isinstance(line, str) for line in value)
    return "" if ok else "should be a list of strings"


def _object(value: Any) -> str:
    return "" if isinstance(value, dict) else "should be an object"


def _object_or_null(value: Any) -> str:
    return "" if value is None else _object(value)


def _seed(value: Any) -> str:
    return _integer(value, 0, MAX_INT)


def _seed_or_null(value: Any) -> str:
    return "" if value is None else _seed(value)


def _count(value: Any) -> str:
    return "" if value is None else _integer(value, 0, MAX_INT)


def _seconds(value: Any) -> str:
    if value is None:
        return ""
    ok = _is_number(value) and math.isfinite(value) and value >= 0
    return "" if ok else "should be a finite number of seconds >= 0"


def _answers(value: Any) -> str:
    """A resolved option: an integer, or the string of one, as `--set` passed it."""
    if value is None:
        return ""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return _integer(value, 1, MAX_ANSWERS)


def _integer(value: Any, low: int, high: int) -> str:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    return "" if ok else f"should be an integer in [{low}, {_power(high)}]"


def _power(high: int) -> str:
    return "2^63 - 1" if high == MAX_INT else f"{high:,}"


# Every manifest field the index stores or a report reads, and its check; a field under a missing or null parent
# is not looked for (the parent's check decides). Required: present, whatever the check allows.
MANIFEST_FIELDS: dict[str, tuple[Check, bool]] = {
    "status": (_name, True),
    "config": (_object, True),
    "config.task": (_name, True),
    "config.trainer": (_name, True),
    "config.searcher": (_name, True),
    "config.model": (_name, True),
    "config.seed": (_seed_or_null, False),
    "config.preset": (_text, False),
    "config.arm": (_text, False),
    "config.engine": (_text, False),
    "config.k": (_text, False),
    "config.threads": (_count, False),
    "config.options": (_object_or_null, False),
    "config.options.searcher": (_object_or_null, False),
    "started": (_text, False),
    "seconds": (_seconds, False),
    "error": (_text, False),
    "warnings": (_texts, False),
    "processes": (_count, False),
    "harness_version": (_text, False),
    "task": (_object_or_null, False),
    "task.name": (_text, False),
    "task.version": (_text, False),
    "task.eval_problems": (_count, False),
    "model": (_object_or_null, False),
    "model.spec": (_text, False),
    "model.source": (_text, False),
    "model.dtype": (_text, False),
    "model.parameters": (_count, False),
    "packages": (_object_or_null, False),
    "resolved_options": (_object_or_null, False),
    "resolved_options.task": (_object_or_null, False),
    "resolved_options.searcher": (_object_or_null, False),
    "resolved_options.searcher.answers_per_rollout": (_answers, False),
}


def check_manifest(manifest: Any) -> None:
    """Raise ValueError "manifest.json: FIELD: VALUE should be ..." for the first value the index cannot take."""
    if not isinstance(manifest, dict):
        raise ValueError(f"manifest.json: holds a {type(manifest).__name__}, not an object")
    _check_tree(manifest, "manifest.json")
    for field, (check, required) in MANIFEST_FIELDS.items():
        found, value = _lookup(manifest, field)
        if not found and required:
            raise ValueError(f"manifest.json: {field}: missing")
        if found and (why := check(value)):
            raise ValueError(f"manifest.json: {field}: {_show(value)} {why}")
    seed = manifest.get("seed", manifest["config"].get("seed"))  # what the index stores: an older run has no "seed"
    if why := _seed(seed):
        raise ValueError(f"manifest.json: seed: {_show(seed)} {why}")


def check_metrics(metrics: Any) -> None:
    """metrics.json: an object of numbers and lists of them (a curve); names bounded, integers SQLite's, the k of a
    pass@k, best@k or solved@c in [1, MAX_K] (a report computes with it)."""
    if not isinstance(metrics, dict):
        raise ValueError(f"metrics.json: holds a {type(metrics).__name__}, not an object")
    for key, value in metrics.items():
        if len(key) > MAX_NAME:
            raise ValueError(f"metrics.json: key {_show(key)} is longer than {MAX_NAME} characters")
        if (k := _HEADLINE_K.search(key)) and not 1 <= int(k[1]) <= MAX_K:
            raise ValueError(f"metrics.json: key {_show(key)}: k should be in [1, {MAX_K:,}]")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_INT:
                raise ValueError(f"metrics.json: {_show(key)}: {_show(item)} is beyond a 64-bit integer")
            if why := _bounded(item):
                raise ValueError(f"metrics.json: {_show(key)}: {_show(item)} {why}")


def check_sample(record: dict[str, Any], line: int) -> None:
    """A samples.jsonl record, the fields the index reads: scalar a number or null, rollout_index and call
    integers or null, text a string, problem_id and phase a name or an integer, behaviours and held_out objects of
    numbers within a float's range (others are not scores), extracted and rewards no deeper than MAX_DEPTH."""
    where = f"samples.jsonl line {line}"
    scalar = record.get("scalar")
    if scalar is not None and not (isinstance(scalar, bool) or _is_number(scalar)):
        raise ValueError(f"{where}: scalar: {_show(scalar)} should be a number or null")
    if why := _bounded(scalar):
        raise ValueError(f"{where}: scalar: {_show(scalar)} {why}")
    for field in ("rollout_index", "call"):
        value = record.get(field)
        if value is not None and (why := _integer(_whole(value), 0, MAX_INT)):
            raise ValueError(f"{where}: {field}: {_show(value)} {why}")
    if why := _text(record.get("text")):
        raise ValueError(f"{where}: text: {_show(record.get('text'))} {why}")
    for field in ("problem_id", "phase"):
        value = record.get(field)
        if value is not None and (why := _key(value)):
            raise ValueError(f"{where}: {field}: {_show(value)} {why}")
    for field in ("behaviours", "held_out"):
        scores = record.get(field)
        for name, score in scores.items() if isinstance(scores, dict) else ():
            if len(name) > MAX_NAME:
                raise ValueError(f"{where}: {field}: a name longer than {MAX_NAME} characters")
            if isinstance(score, int) and not isinstance(score, bool) and abs(score) > MAX_INT:
                raise ValueError(f"{where}: {field}.{_show(name)}: {_show(score)} is beyond a 64-bit integer")
            if why := _bounded(score):
                raise ValueError(f"{where}: {field}.{_show(name)}: {_show(score)} {why}")
    for field in ("extracted", "rewards"):
        _check_tree(record.get(field), f"{where}: {field}", text_limit=None)


def _key(value: Any) -> str:
    """A problem id or phase: a name (a string of at most MAX_NAME characters) or an integer SQLite stores."""
    if isinstance(value, str):
        return f"longer than {MAX_NAME} characters" if len(value) > MAX_NAME else ""
    if isinstance(value, int) and not isinstance(value, bool):
        return _integer(value, -MAX_INT, MAX_INT)
    return "should be a string or an integer"


def _check_tree(tree: Any, where: str, text_limit: int | None = MAX_TEXT) -> None:
    """Every string (and key) at most ``text_limit`` characters, every integer SQLite's, no deeper than MAX_DEPTH;
    walked without recursion. An error names the field (cut to 200 characters: a key may be long)."""
    stack: list[tuple[Any, str, int]] = [(tree, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        at = f"{where}: {path if len(path) <= 200 else path[:197] + '...'}" if path else where
        if depth > MAX_DEPTH:
            raise ValueError(f"{at}: nested deeper than {MAX_DEPTH}")
        if text_limit is not None and isinstance(value, str) and len(value) > text_limit:
            raise ValueError(f"{at}: a string longer than {text_limit:,} characters")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            raise ValueError(f"{at}: {_show(value)} is beyond a 64-bit integer")
        if isinstance(value, dict):
            if text_limit is not None and any(len(k) > text_limit for k in value):
                raise ValueError(f"{at}: a key longer than {text_limit:,} characters")
            stack += [(v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]


def _lookup(manifest: dict, field: str) -> tuple[bool, Any]:
    """(found, value) of a dotted field; not found where a parent is missing or not an object."""
    value: Any = manifest
    for key in field.split("."):
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _whole(value: Any) -> Any:
    """An integer-valued float as its integer (a JSON writer may write 3.0), anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _bounded(value: Any) -> str:
    """ "" unless ``value`` is a finite number beyond MAX_VALUE (a report's sums and squares of it would overflow);
    NaN, infinities and other types are for the field's own check (the index leaves out a non-finite figure)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    if isinstance(value, int) and abs(value) > MAX_INT:
        return ""  # the 64-bit check names it
    return f"is beyond ±{MAX_VALUE:.0e}" if math.isfinite(value) and abs(value) > MAX_VALUE else ""


def _is_number(value: Any) -> bool:
    """An int or float that converts to a float (a 400-digit integer does not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, float) or abs(value) <= MAX_INT


def _show(value: Any) -> str:
    """A value in a skip line: its repr, cut to 40 characters (a 100,000-character string is not repeated)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
