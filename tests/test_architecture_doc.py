"""docs/architecture.md, the map, stays true where it names files: its "Where each thing lives" table has one
row per module of harness/, tasks/, trainers/ and searchers/ (a new module needs its row; a removed one loses it),
and every repository path it and the other design notes (docs/design/*.md) mention exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
NOTES = [PAGE, *sorted((ROOT / "docs" / "design").glob("*.md"))]
PACKAGES = ("harness", "tasks", "trainers", "searchers")
TOP = ("harness", "tasks", "trainers", "searchers", "tests", "bench", "experiments", "docs")


def _table() -> list[str]:
    """The first cell of each row of the table under "## Where each thing lives", without its backticks."""
    section = PAGE.read_text().split("\n## Where each thing lives\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [re.match(r"\| `([^`]+)` \|", row).group(1) for row in rows]


def test_every_module_has_one_row_and_every_row_names_a_real_path():
    named = _table()
    assert len(named) > 100  # the table was found and read
    assert sorted(p for p in named if named.count(p) > 1) == []
    assert [p for p in named if not (ROOT / p).exists()] == []
    modules = {
        str(p.relative_to(ROOT))
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert sorted(modules - set(named)) == []


def _mentioned(page: Path) -> set[str]:
    return set(re.findall(rf"(?<![\w/.~-])((?:{'|'.join(TOP)})/[\w./-]*\w)", page.read_text()))


def test_every_path_the_page_mentions_exists():
    mentioned = _mentioned(PAGE)
    assert len(mentioned) > 50
    assert sorted(p for p in mentioned if not (ROOT / p).exists()) == []


def test_every_path_the_design_notes_mention_exists():
    assert len(NOTES) > 15
    missing = [f"{page.name}: {p}" for page in NOTES for p in sorted(_mentioned(page)) if not (ROOT / p).exists()]
    assert missing == []
