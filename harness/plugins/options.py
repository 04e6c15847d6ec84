"""Plugin options: user values (CLI strings, config-file values) typed into a config dataclass, checked against a
factory's parameters, and the plugin built from its registry entry."""

from __future__ import annotations

import dataclasses
import inspect
import math
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


# ----------------------------------------------------------------------------------------------------------------
# Building a plugin from its registry entry
# ----------------------------------------------------------------------------------------------------------------


def factory_parameters(factory: Any) -> dict[str, inspect.Parameter]:
    """The keyword parameters a factory takes ({} when it cannot be inspected, e.g. a C builtin)."""
    try:
        return dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return {}


def check_options(kind: str, name: str, factory: Any, options: dict[str, Any], given_later: tuple[str, ...] = (),
                  positional: int = 0) -> None:
    """Refuse, in one line, options the factory does not take and required ones missing. ``given_later``: what the
    caller passes itself (an engine's policy); ``positional``: leading arguments passed by position (a family's
    member name)."""
    params = factory_parameters(factory)
    if not params:
        return
    named = [p for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)][positional:]
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(options) - {p.name for p in named})
        if unknown:
            known = [p.name for p in named if p.name not in ("plugins", *given_later)]
            raise ValueError(f"{kind} {name!r}: unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}")
    missing = [p.name for p in named if p.default is p.empty and p.name not in options and
               p.name not in ("plugins", *given_later)]
    if missing:
        raise ValueError(f"{kind} {name!r}: missing option(s) {', '.join(missing)} (--set {kind}.{missing[0]}=...)")


def check_finite(kind: str, name: str, options: dict[str, Any]) -> None:
    """Refuse, in one line, an option whose value reads as a number that is not finite (nan, inf, 1e999), whatever
    the plugin: a learning rate of inf trains to NaN weights in a run that still says complete, and no option of
    any built-in means anything at nan or inf. (A text option can therefore not be "nan".)"""
    for key, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            continue
        try:
            number = float(value)
        except (ValueError, OverflowError):
            continue
        if not math.isfinite(number):
            raise ValueError(f"{kind} {name!r}: option {key}={value!r} is not a finite number")


def build_plugin(plugins: Any, kind: str, name: str, options: dict[str, Any]) -> Any:
    """Construct plugin ``name`` of ``kind`` with ``options``; a factory that declares a ``plugins`` parameter also
    receives the registries (GRPO finds its advantage estimator there)."""
    entry = plugins[kind].get(name)
    factory = entry.load()
    check_options(kind, name, factory, options, positional=1 if entry.member is not None else 0)
    check_finite(kind, name, options)
    if "plugins" in factory_parameters(factory):
        options = {**options, "plugins": plugins}
    try:
        return entry.create(**options)
    except TypeError as exc:  # an option of the wrong kind: one line naming the plugin, not a traceback
        raise ValueError(f"{kind} {name!r}: {exc}") from exc
