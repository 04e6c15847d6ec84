"""What options a plugin takes, each with its type, default, bounds and one line of help, read from where the
option is written: a factory's keyword parameters, or the fields of the config dataclass it builds
(``config_class``). One description serves ``harness options``, docs/reference/options.md, the converter and the
unknown-option message (harness/plugins/options.py).

Help is written beside the option, as tyro and simple-parsing read field docstrings:

- a dataclass field's ``metadata={"help": ...}``, if given;
- else the ``#`` comment at the end of the option's line (a field, or a parameter alone on its line of the
  signature);
- else the ``#`` comment lines right above it.

Bounds, where declared: ``metadata={"bounds": Bounds(1, None)}`` on a field, ``Annotated[int, Bounds(1, None)]``
on a parameter (inclusive; None: open). The converter refuses a value outside them. A subclass that overrides a
field's default keeps the bounds its base declares (VPO's ``answers_per_rollout``). The built-ins' shared upper ends,
with why each is that number: harness/plugins/size_bounds.py.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
import typing
from collections.abc import Callable
from typing import Any

REQUIRED = dataclasses.MISSING  # the default of an option that has none
# What the harness passes a factory itself, by kind: never a user's option.
SUPPLIED = {"engine": ("policy", "main_process", "progress"), "logger": ("run_dir", "config")}
ALWAYS_SUPPLIED = ("plugins",)


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Inclusive bounds of a number option; None leaves that side open."""

    low: float | None = None
    high: float | None = None

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low}..{self.high}"
        return f">= {self.low}" if self.low is not None else f"<= {self.high}"

    def check(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    type: str  # as written in the source ("int", "str | None")
    default: Any  # REQUIRED when it has none
    help: str  # one line; "" when none is written
    bounds: Bounds | None = None
    hint: Any = None  # the resolved type the converter uses; None: unknown (the value passes as given)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def summary(self) -> str:
        """The help's first clause, for a one-line message: "AdamW learning rate" of "AdamW learning rate (...)"."""
        text = self.help
        cuts = sorted(i for stop in (" (", "; ", ": ", ". ") for i in _find_all(text, stop))
        for cut in cuts:  # the first clause long enough to say something, outside any parentheses
            head = text[:cut]
            if len(head.split()) >= 2 and head.count("(") == head.count(")"):
                text = head
                break
        return text if len(text) <= 80 else text[:77] + "..."


def _find_all(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def describe_entry(kind: str, entry: Any) -> list[Option]:
    """The options of a registry entry: a family's (``rg:``) factory takes the member's name first."""
    family = entry.member is not None or entry.name.endswith(":")
    return describe(entry.load(), kind=kind, member=entry.member, skip=1 if family else 0)


def describe(factory: Any, *, kind: str = "", member: str | None = None, skip: int = 0) -> list[Option]:
    """The options of ``factory`` as a user sets them: its named parameters (less what the harness passes itself
    and the first ``skip``: a family's member name), then the fields of its ``config_class`` dataclass (a
    trainer's options), then, for a family member, what ``factory.options_for(member)`` adds (reasoning-gym's)."""
    supplied = (*ALWAYS_SUPPLIED, *SUPPLIED.get(kind, ()))
    options = [o for o in describe_parameters(factory, skip) if o.name not in supplied]
    config = getattr(factory, "config_class", None)
    if dataclasses.is_dataclass(config):
        options += [o for o in describe_dataclass(config) if o.name not in {p.name for p in options}]
    if member is not None and callable(getattr(factory, "options_for", None)):
        options += factory.options_for(member)
    return options


def takes_any(factory: Any, member: str | None = None) -> bool:
    """Whether ``factory`` takes keyword arguments ``describe`` does not list: a ``**kwargs`` that is neither its
    config dataclass's fields nor, for a family member, what ``options_for`` describes."""
    if dataclasses.is_dataclass(getattr(factory, "config_class", None)):
        return False
    if member is not None and callable(getattr(factory, "options_for", None)):
        return False
    return any(p.kind is p.VAR_KEYWORD for p in _signature(factory).values())


def describe_dataclass(cls: type, exclude: tuple[str, ...] = ()) -> list[Option]:
    """Every init field of dataclass ``cls``, its own fields first, then its bases' (GRPO's before the LoRA options
    it inherits); help from each field's metadata or the comments of the class that declares it (a subclass that
    overrides a field documents its own default)."""
    hints = _hints(cls)
    comments: dict[type, dict[str, str]] = {}
    options = []
    owners = {
        f.name: next((c for c in cls.__mro__ if f.name in vars(c).get("__annotations__", {})), cls)
        for f in dataclasses.fields(cls)
    }
    for f in sorted(dataclasses.fields(cls), key=lambda f: cls.__mro__.index(owners[f.name])):
        if not f.init or f.name in exclude:
            continue
        owner = owners[f.name]
        if owner not in comments:
            comments[owner] = _field_comments(owner)
        default = f.default
        if default is REQUIRED and f.default_factory is not REQUIRED:
            default = f.default_factory()
        hint = hints.get(f.name, None)
        hint, bounds = _unwrap(hint, f.metadata.get("bounds") or _inherited_bounds(cls, f.name))
        help_text = f.metadata.get("help") or comments[owner].get(f.name, "")
        options.append(Option(f.name, _written(f.type, hint), default, " ".join(str(help_text).split()), bounds, hint))
    return options


def _inherited_bounds(cls: type, name: str) -> Bounds | None:
    """The bounds a base of ``cls`` declares on field ``name`` (a subclass that only changes its default keeps
    them)."""
    for base in cls.__mro__[1:]:
        declared = getattr(base, "__dataclass_fields__", {}).get(name)
        if declared is not None and isinstance(declared.metadata.get("bounds"), Bounds):
            return declared.metadata["bounds"]
    return None


def describe_parameters(function: Callable[..., Any], skip: int = 0) -> list[Option]:
    """The named parameters of ``function`` (a class: its ``__init__``), less the first ``skip`` positional ones;
    help from the comments in its signature."""
    params = [p for p in _signature(function).values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)][skip:]
    target = function.__init__ if isinstance(function, type) else function
    comments = _parameter_comments(target)
    globals_ = getattr(inspect.unwrap(target), "__globals__", {})
    options = []
    for p in params:
        hint = _resolve(p.annotation, globals_) if p.annotation is not p.empty else None
        if hint is None and p.default not in (p.empty, None):
            hint = type(p.default) if isinstance(p.default, (bool, int, float, str)) else None
        hint, bounds = _unwrap(hint, None)
        default = REQUIRED if p.default is p.empty else p.default
        written = "" if p.annotation is p.empty else p.annotation
        options.append(Option(p.name, _written(written, hint), default, comments.get(p.name, ""), bounds, hint))
    return options


def show(value: Any) -> str:
    """A default as a user would write it: true / false, none, "text", [1, 4, 8], numbers as they are."""
    if value is REQUIRED:
        return "(required)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(getattr(value, "value", value)) if hasattr(value, "name") and hasattr(value, "value") else str(value)


# ----------------------------------------------------------------------------------------------------------------
# Reading the comments from the source
# ----------------------------------------------------------------------------------------------------------------


def _source(obj: Any) -> tuple[ast.AST, dict[int, tuple[str, bool]]] | None:
    """The parsed source of ``obj`` and its comments: line -> (text, whether the line holds only the comment)."""
    try:
        text = textwrap.dedent(inspect.getsource(obj))
        tree = ast.parse(text)
        comments = {}
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                row, col = token.start
                comments[row] = (token.string.lstrip("#").strip(), not token.line[:col].strip())
    except (OSError, TypeError, SyntaxError, tokenize.TokenError, IndentationError):
        return None
    return tree, comments


def _comment_for(comments: dict[int, tuple[str, bool]], first: int, last: int) -> str:
    """The comment at the end of line ``last``, else the comment-only lines right above line ``first``."""
    trailing = comments.get(last)
    if trailing and not trailing[1]:
        return trailing[0]
    block = []
    row = first - 1
    while row in comments and comments[row][1]:
        block.insert(0, comments[row][0])
        row -= 1
    return " ".join(" ".join(block).split())


def _field_comments(cls: type) -> dict[str, str]:
    parsed = _source(cls)
    if parsed is None:
        return {}
    tree, comments = parsed
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    return {
        node.target.id: _comment_for(comments, node.lineno, node.end_lineno)
        for node in body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def _parameter_comments(function: Any) -> dict[str, str]:
    """Per parameter of a ``def``: the comment ending its line when no other parameter shares that line, else the
    comment lines above it when it is the first parameter on its line."""
    parsed = _source(function)
    if (
        parsed is None
        or not parsed[0].body
        or not isinstance(parsed[0].body[0], (ast.FunctionDef, ast.AsyncFunctionDef))
    ):
        return {}
    tree, comments = parsed
    args = tree.body[0].args
    positional = [*args.posonlyargs, *args.args]
    defaults: dict[str, ast.AST] = dict(
        zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults, strict=True)
    )
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
    spans = [
        (a.arg, a.lineno, max(a.end_lineno, getattr(defaults.get(a.arg), "end_lineno", 0)))
        for a in (*positional, *args.kwonlyargs)
    ]  # in the signature's order
    out = {}
    for index, (name, first, last) in enumerate(spans):
        others = spans[:index] + spans[index + 1 :]
        trailing = comments.get(last)
        if trailing and not trailing[1]:  # at the end of its line: its own only if no other parameter is there
            alone = not any(o_first <= last <= o_last for _, o_first, o_last in others)
            out[name] = trailing[0] if alone else ""
        elif first != tree.body[0].lineno and not any(o_last >= first for _, _, o_last in spans[:index]):
            out[name] = _comment_for(comments, first, -1)  # the first on its line: the comment lines above
    return {k: v for k, v in out.items() if v}


# ----------------------------------------------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------------------------------------------


def _signature(function: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return {}


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # an annotation that does not resolve (a name imported only for type checking): one by one
        module = inspect.getmodule(cls)
        return {f.name: _resolve(f.type, vars(module) if module else {}) for f in dataclasses.fields(cls)}


def _resolve(annotation: Any, globals_: dict[str, Any]) -> Any:
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, dict(globals_), {"typing": typing})  # the plugin's own annotation, as typing does
    except Exception:
        return None


def _unwrap(hint: Any, bounds: Bounds | None) -> tuple[Any, Bounds | None]:
    """``Annotated[int, Bounds(...)]`` -> (int, the bounds)."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *extras = typing.get_args(hint)
        return base, bounds or next((e for e in extras if isinstance(e, Bounds)), None)
    return hint, bounds


def _written(annotation: Any, hint: Any) -> str:
    """The type as the source writes it (an ``Annotated`` shows its base type)."""
    if isinstance(annotation, str) and annotation:
        if annotation.startswith("Annotated["):
            return type_name(hint)
        return annotation.replace("typing.", "")
    return type_name(hint) if hint is not None else ""


def type_name(hint: Any) -> str:
    if hint is None:
        return ""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("NoneType", "None")
