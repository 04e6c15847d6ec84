"""Generate the reference parts of docs/reference/hooks.md from the code, so the page cannot drift from it.

docs/reference/hooks.md is hand-written except between marker lines ``<!-- generated: NAME -->`` and
``<!-- end generated: NAME -->``, which this module rewrites:

- ``hooks``: every ``harness_*`` hookspec in harness/hookspecs.py, in file order: its signature and docstring;
- ``capabilities``: every ``*Capabilities`` dataclass in harness/types.py: each field with its type, default and the
  comment beside it in the source (the comments are the documentation, so they are read rather than repeated).

``python -m harness.plugins.hook_reference`` rewrites the page; ``--check`` exits 1 when it is out of date (the
test tests/test_hooks_documented.py does the same). The output depends only on the source: no dates, no paths.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from pathlib import Path

from harness import hookspecs, types

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "hooks.md"
CAPABILITIES = (types.TaskCapabilities, types.EngineCapabilities, types.SearcherCapabilities, types.TrainerCapabilities)


def hook_names() -> list[str]:
    """Every hookspec, in the order harness/hookspecs.py defines them."""
    specs = [f for name, f in vars(hookspecs).items() if name.startswith("harness_") and callable(f)]
    return [f.__name__ for f in sorted(specs, key=lambda f: f.__code__.co_firstlineno)]


def render_hooks() -> str:
    parts = []
    for name in hook_names():
        function = getattr(hookspecs, name)
        # Annotations are strings here (from __future__ import annotations): shown as written, never evaluated.
        params = ", ".join(
            f"{p.name}: {p.annotation}" if p.annotation is not p.empty else p.name
            for p in inspect.signature(function).parameters.values()
        )
        returns = inspect.signature(function).return_annotation
        parts.append(
            f"### `{name}`\n\n```python\n{name}({params}) -> {returns}\n```\n\n"
            f"{inspect.getdoc(function) or '(undocumented)'}\n"
        )
    return "\n".join(parts)


def capability_fields(cls: type) -> list[tuple[str, str, str, str]]:
    """(name, type, default, comment) per field of a capabilities dataclass, read from its source: the comment is
    the one at the end of the field's line plus the comment-only lines that continue it."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    fields = []
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        comment = [lines[node.end_lineno - 1][node.end_col_offset :].strip().removeprefix("#").strip()]
        for line in lines[node.end_lineno :]:
            if not line.strip().startswith("#"):
                break
            comment.append(line.strip().removeprefix("#").strip())
        default = ast.get_source_segment(source, node.value) if node.value is not None else ""  # as written
        fields.append(
            (
                node.target.id,
                ast.get_source_segment(source, node.annotation),
                default,
                " ".join(c for c in comment if c),
            )
        )
    return fields


def render_capabilities() -> str:
    parts = []
    for cls in CAPABILITIES:
        doc = " ".join(inspect.getdoc(cls).split())
        rows = "\n".join(
            f"- `{name}: {kind} = {default}`: {comment}" for name, kind, default, comment in capability_fields(cls)
        )
        parts.append(f"### `{cls.__name__}`\n\n{doc}\n\n{rows}\n")
    return "\n".join(parts)


SECTIONS = {"hooks": render_hooks, "capabilities": render_capabilities}


def update(page: str) -> str:
    """The page with every generated section rewritten; the hand-written text around them is kept as it is."""
    for name, render in SECTIONS.items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n).*?(<!-- end generated: {name} -->)", re.S)
        if not pattern.search(page):
            raise ValueError(
                f"docs/reference/hooks.md has no section <!-- generated: {name} --> ... <!-- end generated: {name} -->"
            )
        page = pattern.sub(lambda m, r=render: f"{m[1]}\n{r()}\n{m[2]}", page)
    return page


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    current = PAGE.read_text()
    fresh = update(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{PAGE} is out of date: run python -m harness.plugins.hook_reference", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
