from __future__ import annotations

from harness.scoring.multi_answer import DELIMITER, instruct, join_answers, split_answers


def test_round_trip_and_malformed_rollouts():
    answers = ["first \\boxed{1}", "second \\boxed{2}", "third \\boxed{3}"]
    text = join_answers(answers)
    assert split_answers(text, 3) == answers
    assert split_answers(text, 2) == answers[:2]  # extra answers beyond M are dropped
    assert split_answers("only one answer", 3) == ["only one answer"]  # no delimiter: one answer, malformed
    assert split_answers(f"a\n{DELIMITER}\n\n{DELIMITER}\nb", 3) == ["a", "b"]  # empty parts are not answers
    assert split_answers("", 3) == []
    assert split_answers("x " + DELIMITER + " y", 1) == ["x " + DELIMITER + " y"]  # M=1: the text as it is


def test_instruct_appends_to_the_last_user_turn_without_mutating():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "Q?"}]
    out = instruct(messages, 4)
    assert messages[1]["content"] == "Q?"
    assert out[1]["content"].startswith("Q?") and "4 different" in out[1]["content"] and DELIMITER in out[1]["content"]
    assert instruct(messages, 1) == messages
