"""docs/reference/cli.md names every command and flag of `harness` (its generated section is the parser's --help:
python -m harness.cli_reference rewrites it)."""

from __future__ import annotations

import pytest

from harness import cli_reference
from harness.cli import build_parser

PAGE = cli_reference.PAGE.read_text()
COMMANDS = cli_reference.commands()


def test_the_commands_are_found():
    assert {"run", "report", "index", "steer", "memory", "list"} <= set(COMMANDS)
    assert "--resume" in cli_reference.flags(COMMANDS["run"])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_and_its_flags_are_on_the_page(command):
    section = PAGE.split(f"### `harness {command}`\n", 1)
    assert len(section) == 2, f"no section for `harness {command}`: python -m harness.cli_reference"
    text = section[1].split("\n### ", 1)[0]
    missing = [f for f in cli_reference.flags(COMMANDS[command]) if f not in text]
    assert missing == [], (
        f"`harness {command}` flags missing from docs/reference/cli.md: python -m harness.cli_reference"
    )


def test_the_generated_help_does_not_depend_on_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    narrow = cli_reference.render()
    monkeypatch.setenv("COLUMNS", "200")
    assert cli_reference.render() == narrow
    assert "usage: harness run" in narrow and build_parser().prog == "harness"


def test_a_page_without_markers_is_refused():
    with pytest.raises(ValueError, match="no section <!-- generated: commands -->"):
        cli_reference.update("# a page without markers\n")
