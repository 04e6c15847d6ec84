"""Every relative link in README.md and docs/**/*.md points to a file that exists (anchors are not checked): a page
moved or renamed takes its links with it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# [text](target) and ![alt](target), the target up to a space (an optional "title") or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def relative_links(page: Path) -> list[str]:
    """The page's link targets that name a file of this repository: not a URL, a mail address or an anchor of the
    page itself; links inside code (fenced blocks, `spans`) are text, not links."""
    text = CODE.sub("", FENCE.sub("", page.read_text()))
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^([a-z][a-z0-9+.-]*:|#)", t, re.I)]


def test_the_pages_are_found_and_have_links():
    assert len(pages()) > 20
    assert sum(len(relative_links(p)) for p in pages()) > 100


def test_every_relative_link_points_to_an_existing_file():
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages()
        for target in relative_links(page)
        if not (page.parent / target.split("#", 1)[0]).exists()
    ]
    assert broken == []


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "[a](missing.md#x) [b](https://example.com) [c](#here) `[d](in-code.md)`\n"
        '```\n[e](in-fence.md)\n```\n![f](page.md "title")\n'
    )
    assert relative_links(page) == ["missing.md#x", "page.md"]
