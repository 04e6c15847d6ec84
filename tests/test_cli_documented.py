"""docs/reference/cli.md names every command and flag of `harness` (its generated section is the parser's --help:
python docs/generate.py rewrites it)."""

from __future__ import annotations

import pytest
from docs_generator import generate

from harness.cli import build_parser

PATH = "docs/reference/cli.md"
PAGE = (generate.ROOT / PATH).read_text()
COMMANDS = generate.commands()


def test_the_commands_are_found():
    assert {"run", "report", "index", "steer", "memory", "list"} <= set(COMMANDS)
    assert "--resume" in generate.flags(COMMANDS["run"])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_and_its_flags_are_on_the_page(command):
    section = PAGE.split(f"### `harness {command}`\n", 1)
    assert len(section) == 2, f"no section for `harness {command}`: {generate.FIX}"
    text = section[1].split("\n### ", 1)[0]
    missing = [f for f in generate.flags(COMMANDS[command]) if f not in text]
    assert missing == [], f"`harness {command}` flags missing from docs/reference/cli.md: {generate.FIX}"


def test_the_page_is_what_the_generator_writes():
    assert generate.stale([PATH]) == []


def test_the_generated_help_does_not_depend_on_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    narrow = generate.cli_commands()
    monkeypatch.setenv("COLUMNS", "200")
    assert generate.cli_commands() == narrow
    assert "usage: harness run" in narrow and build_parser().prog == "harness"


def test_a_page_without_markers_is_refused():
    with pytest.raises(ValueError, match="no section <!-- generated: commands -->"):
        generate.cli_page("# a page without markers\n")
