"""Generate the command reference in docs/reference/cli.md from the argparse parser, so the page says what
``harness --help`` says.

The page is hand-written except between the marker lines ``<!-- generated: commands -->`` and
``<!-- end generated: commands -->``, which this module rewrites with ``harness --help`` and each command's
``--help``, at a fixed width of 100 columns (whatever the terminal). ``python -m harness.cli_reference`` rewrites
the page; ``--check`` exits 1 when it is out of date. tests/test_cli_documented.py checks that every command and
every flag of the parser is on the page.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from unittest import mock

from harness.cli import build_parser

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"
WIDTH = 100
MARKERS = ("<!-- generated: commands -->", "<!-- end generated: commands -->")


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


def render() -> str:
    parser = build_parser()
    parts = [f"### `harness`\n\n```text\n{_help(parser)}\n```\n"]
    parts += [f"### `harness {name}`\n\n```text\n{_help(sub)}\n```\n" for name, sub in commands(parser).items()]
    return "\n".join(parts)


def update(page: str) -> str:
    """The page with its generated section rewritten; the hand-written text around it is kept as it is."""
    start, end = map(re.escape, MARKERS)
    pattern = re.compile(rf"({start}\n).*?({end})", re.S)
    if not pattern.search(page):
        raise ValueError(f"docs/reference/cli.md has no section {MARKERS[0]} ... {MARKERS[1]}")
    return pattern.sub(lambda m: f"{m[1]}\n{render()}\n{m[2]}", page)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    current = PAGE.read_text()
    fresh = update(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{PAGE} is out of date: run python -m harness.cli_reference", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
