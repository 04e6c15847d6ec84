"""docs/generate.py, the one generator of the documentation's generated pages: every page it lists is what it writes
now, `--check` names each stale page in one line with the command that fixes it (exit 1) and is quiet when all are
current (exit 0), and a page is one line of its list. The pages' own tests (test_cli_documented.py,
test_hooks_documented.py, test_options_documented.py, test_trl_names.py) check their page through it too."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from docs_generator import PATH, generate

ROOT = PATH.parents[1]


def test_every_generated_page_is_current():
    assert len(generate.PAGES) >= 4
    assert generate.stale() == []


def test_a_stale_page_is_named_in_one_line_with_its_fix_and_rewritten(tmp_path):
    for path, _ in generate.PAGES:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((ROOT / path).read_text())
    page = tmp_path / "docs/reference/trl-options.md"
    page.write_text(page.read_text().replace("| `learning_rate` | 1e-6 | `lr` |", "| `learning_rate` | 1e-6 | `lrr` |"))
    (tmp_path / "docs/reference/options.md").unlink()  # a page generated whole is written from nothing
    assert generate.stale(root=tmp_path) == [
        "docs/reference/options.md is stale: run python docs/generate.py (or make docs)",
        "docs/reference/trl-options.md is stale: run python docs/generate.py (or make docs)",
    ]
    assert generate.write(root=tmp_path) == ["docs/reference/options.md", "docs/reference/trl-options.md"]
    assert generate.stale(root=tmp_path) == [] and generate.write(root=tmp_path) == []
    assert page.read_text() == (ROOT / "docs/reference/trl-options.md").read_text()


def test_a_page_is_one_line_of_the_list(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    page = "# New\n\nhand-written\n\n<!-- generated: n -->\nold\n<!-- end generated: n -->\n"
    (tmp_path / "docs/new.md").write_text(page)
    new = ("docs/new.md", lambda text: generate.sections(text, {"n": lambda: "new"}))
    monkeypatch.setattr(generate, "PAGES", [new])
    assert generate.stale(root=tmp_path) == ["docs/new.md is stale: run python docs/generate.py (or make docs)"]
    generate.write(root=tmp_path)
    assert (tmp_path / "docs/new.md").read_text() == (
        "# New\n\nhand-written\n\n<!-- generated: n -->\n\nnew\n\n<!-- end generated: n -->\n"
    )
    (tmp_path / "docs/new.md").write_text("# New, its markers lost\n")
    with pytest.raises(ValueError, match=r"^docs/new.md: no section <!-- generated: n --> \.\.\. "):
        generate.stale(root=tmp_path)
    with pytest.raises(ValueError, match=r"^not a generated page: docs/other\.md"):
        generate.stale(["docs/other.md"])


@pytest.mark.runs  # the command itself, in a fresh process
def test_the_command_checks_and_exits_0_when_current():
    result = subprocess.run(
        [sys.executable, str(PATH), "--check"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def _edited(page: str) -> str:
    """The page with a line added where the generator writes: in its first generated section, or anywhere in a page
    generated whole."""
    marker = re.search(r"<!-- generated: [\w-]+ -->\n", page)
    return page[: marker.end()] + "an edit\n" + page[marker.end() :] if marker else page + "an edit\n"


def test_check_exits_1_listing_each_stale_page_and_the_command_rewrites_them(tmp_path, monkeypatch, capsys):
    for path, _ in generate.PAGES:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(_edited((ROOT / path).read_text()))
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    assert generate.main(["--check"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path} is stale: run python docs/generate.py (or make docs)" for path, _ in generate.PAGES
    ]
    assert generate.main([]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {path}" for path, _ in generate.PAGES]
    assert generate.main(["--check"]) == 0 and capsys.readouterr().err == ""
