"""Turning user options (CLI strings, config-file values) into a plugin's typed config dataclass."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def make_config(cls: type[T], options: dict[str, Any], who: str) -> T:
    """``cls(**options)`` with unknown keys refused in one line and strings converted to each field's default type."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise ValueError(f"{who}: unknown option(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    typed = {}
    for key, value in options.items():
        default = fields[key].default
        try:
            typed[key] = coerce(value, default)
        except (TypeError, ValueError):
            raise ValueError(f"{who}: option {key}={value!r} should be a {type(default).__name__}") from None
    return cls(**typed)


def coerce(value: Any, default: Any) -> Any:
    """Convert ``value`` to the type of ``default`` (bool, int, float, str); other types pass through."""
    if default is None or default is dataclasses.MISSING or isinstance(value, type(default)):
        return value
    if isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.lower() in ("1", "true", "yes", "on")
        raise ValueError(value)
    if isinstance(default, int):
        number = float(value)
        if number != int(number):
            raise ValueError(value)
        return int(number)
    if isinstance(default, (float, str)):
        return type(default)(value)
    return value
