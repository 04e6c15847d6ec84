"""Scoring a maths answer leaves the terminal alone: math-verify's "Timeout is disabled as parsing_timeout is None"
notice (logged the first time parse / verify run without a timeout, which tasks/math_answers.py does on purpose off
the main thread) is dropped, and the verdicts are math-verify's as before."""

from __future__ import annotations

import logging
import threading
import warnings

import math_verify.grader
import math_verify.parser
import pytest

from harness.tasks.math_answers import answers_match, is_checkable

CASES = [
    ("1/2", "0.5", True),
    ("\\frac{1}{2}", "0.50", True),
    ("x + 1", "1 + x", True),
    ("3", "4", False),
    ("\\{1, 2\\}", "\\{2, 1\\}", True),
]


def _verdicts() -> list[bool]:
    return [answers_match(reference, answer) for reference, answer, _ in CASES] + [is_checkable("x + 1")]


@pytest.mark.parametrize("where", ["main thread", "worker thread"])
def test_scoring_a_maths_answer_logs_and_warns_nothing(where, caplog, monkeypatch):
    # the notice is shown once per process: make this the first time, as in a fresh scoring process
    monkeypatch.setattr(math_verify.parser, "TIMEOUT_WARNING_SHOWN", False)
    monkeypatch.setattr(math_verify.grader, "TIMEOUT_WARNING_SHOWN", False)
    got: list[list[bool]] = []
    with caplog.at_level(logging.DEBUG, logger="math_verify"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if where == "main thread":
            got.append(_verdicts())
        else:  # timeout None: the case that logged the notice
            worker = threading.Thread(target=lambda: got.append(_verdicts()))
            worker.start()
            worker.join()
    assert got == [[expected for _, _, expected in CASES] + [True]]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("math_verify")] == []
    assert [str(w.message) for w in caught] == []


def test_other_math_verify_records_still_get_through(caplog):
    """Only the timeout notice is filtered: a record math-verify logs for anything else is kept."""
    answers_match("1/2", "0.5")  # installs the filter
    with caplog.at_level(logging.WARNING, logger="math_verify"):
        logging.getLogger("math_verify.parser").warning("Timeout during parsing: 9^{9^9}")
        logging.getLogger("math_verify.grader").warning("Timeout is disabled as timeout_seconds is None or <= 0")
    assert [r.getMessage() for r in caplog.records] == ["Timeout during parsing: 9^{9^9}"]
