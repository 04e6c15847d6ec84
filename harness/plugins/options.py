"""Plugin options: user values (``--set`` text, TOML and YAML values) typed by one converter, checked against what a
factory takes (harness/plugins/option_help.py describes it), and the plugin built from its registry entry."""

from __future__ import annotations

import ast
import datetime
import difflib
import enum
import inspect
import math
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from harness.plugins.aliases import Alias, aliases_of, resolve_aliases
from harness.plugins.option_help import Option, describe, describe_dataclass, takes_any, type_name

T = TypeVar("T")
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def make_config(
    cls: type[T],
    options: dict[str, Any],
    who: str,
    exclude: tuple[str, ...] = (),
    aliases: Sequence[Alias] = (),
) -> T:
    """``cls(**options)``: another library's names in ``aliases`` resolved first (harness/plugins/aliases.py), unknown
    keys refused in one line naming the closest known ones, each value typed by ``coerce`` to its field's type and
    checked against its declared bounds; ``exclude``: fields not set this way. A config that checks itself
    (``__post_init__``) and refuses is one line too."""
    options, _ = resolve_aliases(aliases, options, who)
    described = {o.name: o for o in describe_dataclass(cls, exclude)}
    unknown = sorted(set(options) - set(described))
    if unknown:
        raise ValueError(f"{who}: {unknown_options(unknown, list(described.values()), aliases=aliases_of(aliases))}")
    typed = {key: typed_value(described[key], value, who) for key, value in options.items()}
    try:
        return cls(**typed)
    except (AssertionError, TypeError) as exc:  # configs that check themselves with asserts; a wrong kind
        raise ValueError(f"{who}: invalid options: {_one_line(exc)}") from None


def typed_value(option: Option, value: Any, who: str) -> Any:
    """``value`` converted to ``option``'s type and checked against its bounds; a one-line ValueError naming it."""
    try:
        typed = coerce(value, option.default, option.hint)
    except (TypeError, ValueError, SyntaxError):
        raise ValueError(
            f"{who}: option {option.name}={value!r}: expected {option.type or type_name(option.hint)}"
        ) from None
    if option.bounds is not None and not option.bounds.check(typed):
        raise ValueError(f"{who}: option {option.name}={value!r} is out of its bounds ({option.bounds})")
    return typed


def typed_option(kind: str, name: str, factory: Any, key: str, value: Any) -> Any:
    """One option of ``factory`` typed and checked against its bounds, as ``check_options`` types them all, for a
    value the runner reads before the plugin is built (a trainer's answers_per_rollout: its rollout budget is M times
    the task's); a key the factory does not describe is returned as given."""
    described = {o.name: o for o in describe(factory, kind=kind)}
    return typed_value(described[key], value, f"{kind} {name!r}") if key in described else value


def coerce(value: Any, default: Any = None, hint: Any = None) -> Any:
    """The one converter of option values: ``value`` as type ``hint`` (else the type of ``default``: bool, int,
    float, str; else unchanged). Text (``--set``) is parsed by ``convert``; a TOML or YAML value of another type is
    checked by ``fit``. Raises ValueError or TypeError."""
    if hint is None and isinstance(default, SCALARS):
        hint = type(default)
    return fit(value, hint)  # no hint: unchanged; text: convert


SCALARS = (bool, int, float, str)


def fit(value: Any, hint: Any) -> Any:
    """A TOML or YAML value (not text) as type ``hint``: kept when it is one, else converted where nothing is lost: a
    whole float fills an int, an int a float, a number a str, a list of scalars a str as "a,b" (the form --set takes
    it in), a scalar a one-item list. A value of another shape (a mapping or a list where a number is expected, a
    bool for a count, a mapping for a list) raises ValueError; a type the converter does not know (a class of the
    plugin's) takes what is given."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is None:
        return value
    if isinstance(value, str):
        return convert(value, hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        members = [a for a in args if a is not type(None)]
        for arg in members:  # a value that already is one of the types, as it is (8 for Sequence[int] | str | int)
            if arg in SCALARS and type(value) is arg:
                return value
        containers = [a for a in members if typing.get_origin(a) in (list, tuple, Sequence, Iterable)]
        others = sorted((a for a in members if a not in containers), key=lambda a: a is str)  # str takes anything
        # a list fills a list member before a str ("+-" or ["+", "-"]); a number a scalar before a one-item list
        for arg in containers + others if isinstance(value, (list, tuple)) else others + containers:
            try:
                return fit(value, arg)
            except (TypeError, ValueError, SyntaxError):
                continue
        raise ValueError(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(value)
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():  # 1e3 from YAML; not nan or inf
            return int(value)
        raise ValueError(value)
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ValueError(value)
    if hint is str:
        if isinstance(value, bool):  # kept: a text option read as a switch (vspo's remove_length) reads str(value)
            return value
        if isinstance(value, (int, float)):
            return str(value)
        if isinstance(value, (list, tuple)) and all(isinstance(v, SCALARS) for v in value):  # betas = [-1, 0, 1]
            return ",".join(str(v) for v in value)
        raise ValueError(value)
    if hint is type(None):
        if value is None:
            return None
        raise ValueError(value)
    if origin is typing.Literal:
        if value in args:
            return value
        raise ValueError(value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value if isinstance(value, hint) else hint(value)
    if origin in (list, tuple, Sequence, Iterable) or hint in (list, tuple):
        if isinstance(value, SCALARS):  # one item, as --set reads "8"
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ValueError(value)
        if origin is tuple and len(args) > 1 and args[1] is not Ellipsis:  # a fixed tuple[int, str]
            return tuple(fit(v, a) for v, a in zip(value, args, strict=True))
        element = args[0] if args else Any
        values = [fit(v, element) for v in value]
        return tuple(values) if tuple in (origin, hint) else values
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, dict):
            raise ValueError(value)
        return value
    return value


def convert(text: str, hint: Any) -> Any:
    """Text as a value of type ``hint``: int, float, bool, str, Optional, unions, Literal, Enum, dates, and
    lists/tuples of those ("+,-" or "['+', '-']"). A union that takes str keeps the text (after "none" / "null" /
    "" for None), for the plugin to read. Raises ValueError (or TypeError) when it does not fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is str:
        return text
    text = text.strip()
    if hint is Any:
        return _literal_or_text(text)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.lower() in ("none", "null", ""):
            return None
        if str in args:
            return text
        for arg in (a for a in args if a is not type(None)):
            try:
                return convert(text, arg)
            except (TypeError, ValueError, SyntaxError):
                continue
        raise ValueError(text)
    if origin is typing.Literal:
        for arg in args:
            if str(arg) == text:
                return arg
        raise ValueError(text)
    if hint is bool:
        if text.lower() in (*TRUE, *FALSE):
            return text.lower() in TRUE
        raise ValueError(text)
    if hint is int:
        try:
            return int(text)
        except ValueError:
            number = float(text)  # "1e3"
        if not number.is_integer():  # 1.5, nan, inf
            raise ValueError(text)
        return int(number)
    if hint is float:
        return float(text)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        for member in hint:
            if text.lower() in (member.name.lower(), str(member.value).lower()):
                return member
        raise ValueError(text)
    if hint in (datetime.date, datetime.time, datetime.datetime):
        return hint.fromisoformat(text)
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        items = _items(text)
        element = args[0] if args else Any
        if origin is tuple and len(args) > 1 and args[1] is not Ellipsis:  # a fixed tuple[int, str]
            return tuple(convert(str(v), a) for v, a in zip(items, args, strict=True))
        values = [convert(str(v), element) if isinstance(v, str) or element is not Any else v for v in items]
        return tuple(values) if tuple in (origin, hint) else values
    raise TypeError(f"cannot set a {type_name(hint)} from text")


def _items(text: str) -> list[Any]:
    """ "[1, 2]" or "(1, 2)" as a Python literal; otherwise comma-separated words ("+,-")."""
    if text[:1] in "[(":
        value = ast.literal_eval(text)
        return list(value) if isinstance(value, (list, tuple)) else [value]
    return [part.strip() for part in text.split(",") if part.strip()]


def _literal_or_text(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def closest(name: str, known: list[str], cutoff: float = 0.6) -> list[str]:
    """The known names spelled like ``name``, best first: a few typed letters off (an edit distance, swaps counted
    once, of at most a sixth of the name's length, and at least 1; difflib's ratio >= ``cutoff`` too), at most 3,
    the nearest ones only. A different word that shares a prefix and a suffix is not a typo: ``num_generations`` is
    not ``num_iterations``, ``repetition_penalty`` not ``overlong_penalty``."""
    limit = max(1, len(name) // 6)
    distances = {
        k: d
        for k in known
        if (d := edit_distance(name.lower(), k.lower())) <= limit
        and difflib.SequenceMatcher(None, name, k).ratio() >= cutoff
    }
    if not distances:
        return []
    best = min(distances.values())
    return sorted((k for k, d in distances.items() if d <= best + 1), key=lambda k: (distances[k], k))[:3]


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment): insertions, deletions, substitutions, adjacent swaps."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


def unknown_options(
    unknown: list[str], known: list[Option], listed_by: str = "", aliases: dict[str, Alias] | None = None
) -> str:
    """ "unknown option lrr; did you mean lr (AdamW learning rate)?": the names spelled closest, with their help, in
    one line, instead of every name; ``aliases`` (another library's names the plugin understands) are candidates
    too ("num_generationz; did you mean num_generations (TRL's name for group_size)?"). ``listed_by``: the command
    that lists them all, said when some has none close."""
    names = {o.name: o.summary for o in known}
    for alias in (aliases or {}).values():
        names.setdefault(alias.name, f"{alias.library}'s name" + (f" for {alias.target}" if alias.target else ""))
    guesses = {}
    for name in unknown:
        close = closest(name, list(names))
        if close:
            guesses[name] = " or ".join(f"{c} ({names[c]})" if names[c] else c for c in close)
    if len(unknown) == 1:
        text = f"unknown option {unknown[0]}" + (f"; did you mean {guesses[unknown[0]]}?" if guesses else "")
    else:
        text = f"unknown options {', '.join(unknown)}" + "".join(
            f"; for {name} did you mean {guess}?" for name, guess in guesses.items()
        )
    if listed_by and len(guesses) < len(unknown):
        text += f" (`{listed_by}` lists the {len(known)} options)" if known else " (it takes no options)"
    return text


# ----------------------------------------------------------------------------------------------------------------
# Building a plugin from its registry entry
# ----------------------------------------------------------------------------------------------------------------


def factory_parameters(factory: Any) -> dict[str, inspect.Parameter]:
    """The keyword parameters a factory takes ({} when it cannot be inspected, e.g. a C builtin)."""
    try:
        return dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return {}


def check_options(
    kind: str,
    name: str,
    factory: Any,
    options: dict[str, Any],
    given_later: tuple[str, ...] = (),
    positional: int = 0,
    member: str | None = None,
) -> dict[str, Any]:
    """Resolve the names of another library's the factory declares (``option_aliases``: TRL's for GRPO), then refuse,
    in one line, options it does not take (naming the closest it does, with their help) and required ones missing;
    return ``options`` typed by ``coerce``. ``given_later``: what the caller passes itself
    (an engine's policy); ``positional``: leading arguments passed by position (a family's member name)."""
    options, _ = resolve_aliases(aliases_of(factory), options, f"{kind} {name!r}")
    if not factory_parameters(factory):
        return dict(options)
    described = [o for o in describe(factory, kind=kind, member=member, skip=positional) if o.name not in given_later]
    by_name = {o.name: o for o in described}
    unknown = sorted(set(options) - set(by_name))
    if unknown and not takes_any(factory, member):
        listed_by = f"harness options {kind} {name}"
        raise ValueError(f"{kind} {name!r}: {unknown_options(unknown, described, listed_by, aliases_of(factory))}")
    missing = [o.name for o in described if o.required and o.name not in options]
    if missing:
        raise ValueError(f"{kind} {name!r}: missing option(s) {', '.join(missing)} (--set {kind}.{missing[0]}=...)")
    return {
        key: typed_value(by_name[key], value, f"{kind} {name!r}") if key in by_name else value
        for key, value in options.items()
    }


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
    check_finite(kind, name, options)
    options = check_options(
        kind, name, factory, options, positional=1 if entry.member is not None else 0, member=entry.member
    )
    if "plugins" in factory_parameters(factory):
        options = {**options, "plugins": plugins}
    try:
        return entry.create(**options)
    except TypeError as exc:  # an option of the wrong kind: one line naming the plugin, not a traceback
        raise ValueError(f"{kind} {name!r}: {exc}") from exc
