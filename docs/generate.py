"""Every generated page of the documentation, written from the code by one command, so no page can drift from it.

    python docs/generate.py            rewrite every generated page (make docs)
    python docs/generate.py --check    exit 1 naming each stale page, one line each; 0 when all are current

PAGES lists each page with the function that renders it: ``render(the page's current text) -> its text now``. A
page is generated whole (docs/reference/options.md) or between marker lines ``<!-- generated: NAME -->`` and
``<!-- end generated: NAME -->``, the rest of it hand-written and kept as it is (``sections``). A new generated page
is one line in PAGES. The output depends only on the source: no dates, no paths of this machine, no terminal width.

The generator lives outside the package because the pages are not shipped with it; the package keeps what its own
code uses (``harness options`` prints harness/plugins/options_reference.py's text, GRPO takes
trainers/trl_names.py's aliases). The tests that keep the pages true (tests/test_docs_generated.py,
test_cli_documented.py, test_hooks_documented.py, test_options_documented.py, test_trl_names.py) call ``stale``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from unittest import mock

from harness import hookspecs, types
from harness.cli import build_parser
from harness.plugins.option_help import Option, describe_entry, show
from harness.plugins.options_reference import KINDS, aliases_note, default_preset, notes, run_default
from harness.trainers.trl_names import TRL_GRPO_ALIASES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docs/results_pages.py, beside this file
import results_pages  # the results pages and the README's demo excerpt, from bench/results/
from page_sections import sections

ROOT = Path(__file__).resolve().parents[1]
FIX = "python docs/generate.py"  # the command that rewrites a stale page (also: make docs)


def _cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|")


# ---------------------------------------------------------------------------------------------------------------
# docs/reference/cli.md: `harness --help` and each command's, at a fixed width of 100 columns
# ---------------------------------------------------------------------------------------------------------------

WIDTH = 100


def commands(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, in the order `harness --help` lists them."""
    parser = parser or build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option string a parser takes (``--help`` aside)."""
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"]


def _help(parser: argparse.ArgumentParser) -> str:
    with mock.patch.dict(os.environ, {"COLUMNS": str(WIDTH)}):  # argparse wraps at the terminal's width
        return parser.format_help().rstrip()


def cli_commands() -> str:
    parser = build_parser()
    parts = [f"### `harness`\n\n```text\n{_help(parser)}\n```\n"]
    parts += [f"### `harness {name}`\n\n```text\n{_help(sub)}\n```\n" for name, sub in commands(parser).items()]
    return "\n".join(parts)


def cli_page(text: str) -> str:
    return sections(text, {"commands": cli_commands})


# ---------------------------------------------------------------------------------------------------------------
# docs/reference/hooks.md: the hookspecs (harness/hookspecs.py) and the capability fields (harness/types.py)
# ---------------------------------------------------------------------------------------------------------------

CAPABILITIES = (types.TaskCapabilities, types.EngineCapabilities, types.SearcherCapabilities, types.TrainerCapabilities)


def hook_names() -> list[str]:
    """Every hookspec, in the order harness/hookspecs.py defines them."""
    specs = [f for name, f in vars(hookspecs).items() if name.startswith("harness_") and callable(f)]
    return [f.__name__ for f in sorted(specs, key=lambda f: f.__code__.co_firstlineno)]


def hook_specs() -> str:
    """Each hook's signature and docstring."""
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
    the one at the end of the field's line plus the comment-only lines that continue it (the comments are the
    documentation, so they are read rather than repeated)."""
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
        annotation = ast.get_source_segment(source, node.annotation)
        fields.append((node.target.id, annotation, default, " ".join(c for c in comment if c)))
    return fields


def capabilities() -> str:
    """Each capabilities dataclass: its docstring, then its fields."""
    parts = []
    for cls in CAPABILITIES:
        doc = " ".join(inspect.getdoc(cls).split())
        rows = "\n".join(
            f"- `{name}: {kind} = {default}`: {comment}" for name, kind, default, comment in capability_fields(cls)
        )
        parts.append(f"### `{cls.__name__}`\n\n{doc}\n\n{rows}\n")
    return "\n".join(parts)


def hooks_page(text: str) -> str:
    return sections(text, {"hooks": hook_specs, "capabilities": capabilities})


# ---------------------------------------------------------------------------------------------------------------
# docs/reference/options.md: every built-in plugin's options (harness/plugins/option_help.py), the page whole
# ---------------------------------------------------------------------------------------------------------------


def _options_table(options: list[Option], presets: dict[str, dict[str, Any]]) -> str:
    rows = ["| option | type | default (a default run's) | help |", "|---|---|---|---|"]
    for o in options:
        bounds = f" ({o.bounds})" if o.bounds else ""
        value, said = run_default(o, presets)
        said = f" ({_cell(said)})" if said else ""
        rows.append(
            f"| `{o.name}` | `{_cell(o.type or '?')}` | `{_cell(show(value))}`{said}{bounds} | {_cell(o.help)} |"
        )
    return "\n".join(rows)


def options_reference(plugins: Any = None) -> str:
    """Every built-in plugin's options, kind by kind, as ``harness options KIND NAME`` prints each."""
    if plugins is None:
        from harness.plugins.manager import get_plugin_manager

        plugins = get_plugin_manager(autoload=False)
    intro = (
        "Every option of every built-in plugin: its type, default and help, as `harness options KIND NAME` "
        "prints them. Set one with `--set KIND.KEY=VALUE` or in an experiment file's `[set.KIND]` table; text "
        "is converted to the option's type (harness/plugins/options.py `coerce`). Presets set some of them "
        f"first (`--preset`; a run without one gets `{default_preset()}`, whose value the default column shows, "
        "with the option's own default beside it); the run's flags (`--seed`, `--steps`, `--k`) too, and a "
        "task's generation budget replaces the preset's `max_new_tokens`. Help is the comment written "
        "beside each option ([write a plugin](../guide/write-a-plugin.md#options-and-their-help))."
    )
    parts = [
        "# Plugin options",
        "",
        f"<!-- generated by `{FIX}` from the code: do not edit -->",
        "",
        *textwrap.wrap(intro, 116, break_on_hyphens=False),
        "",
    ]
    for kind in KINDS:
        entries = [e for e in plugins[kind] if e.plugin.startswith("builtin:")]
        parts += [f"## {kind.capitalize()}s", ""]
        for entry in entries:
            options = describe_entry(kind, entry)
            parts += [f"### {kind} `{entry.name}`", "", entry.description, ""]
            parts += [_options_table(options, entry.presets) if options else "No options.", ""]
            listed = notes(kind, entry) + aliases_note(entry)
            parts += [f"- {line}" for line in listed]
            if listed:
                parts.append("")
    return "\n".join(parts).rstrip("\n") + "\n"


def options_page(text: str) -> str:
    return options_reference()


# ---------------------------------------------------------------------------------------------------------------
# docs/reference/trl-options.md: "Every TRL name", from the aliases GRPO declares (trainers/trl_names.py)
# ---------------------------------------------------------------------------------------------------------------


def trl_names_table() -> str:
    """Every TRL name, its default, what it is here."""
    mapped = sum(1 for a in TRL_GRPO_ALIASES if a.sets_option)
    rows = [
        f"{len(TRL_GRPO_ALIASES)} TRL names: {mapped} set an option here (a value without an equivalent is "
        f"refused), {len(TRL_GRPO_ALIASES) - mapped} are refused with what to use instead (a value that means "
        "what the harness does anyway is taken, with nothing to set).",
        "",
        "| TRL name (`--set trainer.NAME=VALUE`) | TRL default | here |",
        "|---|---|---|",
    ]
    rows += [f"| `{a.name}` | {_cell(a.default)} | {_cell(a.summary())} |" for a in TRL_GRPO_ALIASES]
    return "\n".join(rows)


def trl_options_page(text: str) -> str:
    return sections(text, {"trl-names": trl_names_table})


# ---------------------------------------------------------------------------------------------------------------
# The pages, and the command
# ---------------------------------------------------------------------------------------------------------------

PAGES: list[tuple[str, Callable[[str], str]]] = [
    ("docs/reference/cli.md", cli_page),
    ("docs/reference/hooks.md", hooks_page),
    ("docs/reference/options.md", options_page),
    ("docs/reference/trl-options.md", trl_options_page),
    *results_pages.PAGES,
]


def _chosen(paths: Iterable[str] | None) -> list[tuple[str, Callable[[str], str]]]:
    if paths is None:
        return list(PAGES)
    known = dict(PAGES)
    unknown = [p for p in paths if p not in known]
    if unknown:
        raise ValueError(f"not a generated page: {', '.join(unknown)} (docs/generate.py PAGES lists them)")
    return [(p, known[p]) for p in paths]


def render(path: str, root: Path | None = None) -> tuple[str, str]:
    """(the page's text now, what the generator writes for it); a page not yet written reads as empty."""
    file = (root or ROOT) / path
    current = file.read_text() if file.exists() else ""
    try:
        return current, dict(PAGES)[path](current)
    except ValueError as error:  # a page without its markers, say
        raise ValueError(f"{path}: {error}") from None


def stale(paths: Iterable[str] | None = None, root: Path | None = None) -> list[str]:
    """One line per generated page (of ``paths``, or every one) that is not what the generator writes now, with the
    command that rewrites it."""
    lines = []
    for path, _ in _chosen(paths):
        current, fresh = render(path, root)
        if fresh != current:
            lines.append(f"{path} is stale: run {FIX} (or make docs)")
    return lines


def write(paths: Iterable[str] | None = None, root: Path | None = None) -> list[str]:
    """Rewrite each stale page; the pages written."""
    written = []
    for path, _ in _chosen(paths):
        current, fresh = render(path, root)
        if fresh != current:
            file = (root or ROOT) / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(fresh)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/generate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale page")
    args = parser.parse_args(argv)
    if args.check:
        lines = stale()
        for line in lines:
            print(line, file=sys.stderr)
        return 1 if lines else 0
    written = write()
    print("\n".join(f"wrote {path}" for path in written) or f"all {len(PAGES)} generated pages are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
