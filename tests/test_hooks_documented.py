"""Meta-tests of the plugin contract (after datasette's): every hook has a docstring, docs/reference/hooks.md is what
the generator writes from the code, every hook has a test of its own, and the page's worked example is right."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest
from docs_generator import generate

from harness import hookspecs
from harness.plugins.manager import KINDS

TESTS = Path(__file__).parent
PATH = "docs/reference/hooks.md"
PAGE = generate.ROOT / PATH
HOOKS = generate.hook_names()


def test_the_hooks_are_found_and_each_fills_a_registry():
    assert len(HOOKS) >= 8 and HOOKS[0] == "harness_register_tasks"
    assert sorted(HOOKS) == sorted(KINDS.values())  # a new hook the manager never calls would be dead


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_docstring(hook):
    doc = getattr(hookspecs, hook).__doc__
    assert doc and len(doc.split()) >= 8, f"hookspec {hook} needs a docstring saying what its factory gets and returns"


def test_docs_hooks_md_is_up_to_date():
    assert generate.stale([PATH]) == []
    page = PAGE.read_text()
    for hook in HOOKS:
        assert f"### `{hook}`" in page
    assert "- `batch_scoring: bool = False`: has ``score_many``" in page  # a field comment from harness/types.py


def test_a_changed_docstring_makes_the_page_stale(monkeypatch, capsys):
    monkeypatch.setattr(hookspecs.harness_register_models, "__doc__", "Add model aliases; a changed docstring.")
    assert generate.stale([PATH]) == [f"{PATH} is stale: run python docs/generate.py (or make docs)"]
    assert generate.main(["--check"]) == 1
    assert capsys.readouterr().err == f"{PATH} is stale: run python docs/generate.py (or make docs)\n"
    with pytest.raises(ValueError, match=r"^no section <!-- generated: hooks -->"):
        generate.hooks_page("# a page without markers\n")


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test_of_its_own(hook):
    files = [p.name for p in sorted(TESTS.glob("test_*.py")) if p.name != Path(__file__).name and hook in p.read_text()]
    assert files, f"no test mentions {hook}: add one (tests/test_plugins.py has one per registration hook)"


def test_the_pages_worked_example_is_right():
    blocks = re.findall(r"^```python\n(>>> .*?)^```", PAGE.read_text(), re.S | re.M)
    test = doctest.DocTestParser().get_doctest("".join(blocks), {}, PATH, str(PAGE), 0)
    assert len(test.examples) == 3
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test)
    assert result.failed == 0
