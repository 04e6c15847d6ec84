"""Property-based tests (hypothesis) of the parsers the harness feeds untrusted text to: model output (answer
splitting, diffs, code extraction), the command line's --set, experiment files, and run folders a crash may have
cut. Each either parses or refuses in the documented way; none raises anything else."""

from __future__ import annotations

import ast
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import parse_overrides
from harness.runner.experiment_file import load_experiment
from harness.scoring.multi_answer import DELIMITER, join_answers, split_answers
from harness.searchers.evolve_prompt import apply_diff, child_text
from harness.store.reading import read_jsonl
from harness.store.results_db import _read_samples
from harness.tasks.code import extract_code

answer = st.text(min_size=1).filter(lambda a: a.strip() and DELIMITER not in a)


@given(st.lists(answer, min_size=1, max_size=6))
def test_split_answers_inverts_join(answers: list[str]) -> None:
    text = join_answers(answers)
    assert split_answers(text, len(answers)) == [a.strip() for a in answers]
    assert split_answers(text, 1) == [text]  # M = 1: the completion is the answer, untouched


@given(st.text(), st.integers(min_value=1, max_value=8))
def test_split_answers_never_returns_more_than_m_or_blanks(text: str, m: int) -> None:
    parts = split_answers(text, m)
    assert len(parts) <= m and (m == 1 or all(p.strip() for p in parts))


@given(st.lists(st.text(alphabet="abcdef \n()=:", min_size=1, max_size=12), min_size=1, max_size=6), st.data())
def test_a_diff_whose_search_is_in_the_code_applies_exactly(lines: list[str], data) -> None:
    code = "\n".join(lines)
    start = data.draw(st.integers(0, len(code) - 1))
    search = code[start : start + data.draw(st.integers(1, len(code) - start))]
    if not search.strip():
        return
    diff = f"<<<<<<< SEARCH\n{search}\n=======\nREPLACED\n>>>>>>> REPLACE\n"
    assert apply_diff(code, diff) == code.replace(search, "REPLACED", 1)


@given(st.text(), st.text(), st.sampled_from(["diff", "rewrite"]))
def test_child_text_never_raises(parent: str, completion: str, mode: str) -> None:
    text, how = child_text(parent, completion, mode=mode)
    assert how in ("diff", "rewrite", "text", "failed") and (text is None) == (how == "failed")


@given(st.text(), st.text(alphabet="abcxyz +-*", max_size=20), st.text(alphabet="abc .,!", max_size=40))
def test_code_extraction_never_raises_and_finds_fenced_code(prose: str, expression: str, after: str) -> None:
    assert extract_code(prose, "f") is None or extract_code(prose, "f").endswith("\n")
    code = f"def f(a, b, c):\n    return {expression.strip() or 'a'}\n"
    try:
        ast.parse(code)
    except SyntaxError:
        return
    fenced = f"{prose.replace('`', '')}\n```python\n{code}```\n{after}"
    assert extract_code(fenced, "f") == code


@given(st.lists(st.text(), max_size=5))
def test_overrides_parse_or_refuse_in_one_line(items: list[str]) -> None:
    try:
        options = parse_overrides(items)
    except ValueError as exc:
        assert "\n" not in str(exc) and "KIND.KEY=VALUE" in str(exc)
    else:
        assert set(options) == {"task", "trainer", "searcher"}


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(st.text())
def test_experiment_files_load_or_refuse_with_a_value_error(tmp_path, text: str) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    try:
        settings_ = load_experiment(path)
    except ValueError as exc:
        assert str(path) in str(exc)
    else:
        assert "options" in settings_


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(
    st.lists(
        st.one_of(
            st.text(),
            st.builds(
                lambda pid, ok, x: json.dumps({"problem_id": pid, "phase": "eval", "success": ok, "scalar": x}),
                st.sampled_from("abc"),
                st.booleans(),
                st.one_of(st.none(), st.floats(allow_nan=True)),
            ),
        ),
        max_size=20,
    )
)
def test_samples_cut_or_garbled_are_read_or_refused_naming_the_line(tmp_path, lines: list[str]) -> None:
    """A last line cut by a crash is skipped; any other bad line is a ValueError naming the file and the line (the
    index then skips the folder, saying so), never another exception."""
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(line.replace("\n", " ") for line in lines))
    try:
        records = read_jsonl(samples, cut_tail=True)
    except ValueError as exc:
        assert str(exc).startswith(f"{samples} line "), exc
        return
    problems, _ = _read_samples(records)
    for _phase, _pid, n, successes, scalars, _outcomes, behaviours, held_out in problems:
        assert 0 <= successes <= n == len(json.loads(scalars))
        assert behaviours is None and held_out is None  # these records hold no behaviour scores
