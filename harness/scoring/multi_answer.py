"""Multi-answer rollouts (VPO): one completion carries M candidate answers separated by a delimiter line.

Later answers see earlier ones, which is the point: the policy can learn to spread its M answers over different
trade-offs. The format is shared by the trainer (VPO), its SFT warm-up and the searchers that evaluate such a
policy, so it lives in the core.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.types import Messages

DELIMITER = "### next answer ###"
DELIMITER_TOKENS = 16  # generation budget per delimiter line, on top of M answers' own budgets


def rollout_budget(per_answer: int, m: int) -> int:
    """The generation budget of a rollout of M answers: M answers' budgets plus room for the M - 1 delimiters."""
    return int(per_answer) * m + DELIMITER_TOKENS * (m - 1)


def answer_budget(per_rollout: int, m: int) -> int:
    """One answer's budget, from a rollout's (``rollout_budget``'s inverse, at least 1 token)."""
    return max(1, (int(per_rollout) - DELIMITER_TOKENS * (m - 1)) // m)


def instruct(messages: Messages, m: int, delimiter: str = DELIMITER) -> Messages:
    """The task's messages with the request for M different answers appended to the last user turn."""
    if m <= 1:
        return messages
    request = (
        f"\n\nGive {m} different candidate answers. Each must be complete on its own, in the format asked "
        f"for above. Put a line containing only {delimiter} between consecutive answers."
    )
    out = [dict(msg) for msg in messages]
    last_user = max(i for i, msg in enumerate(out) if msg["role"] == "user")
    out[last_user]["content"] = out[last_user]["content"] + request
    return out


def join_answers(answers: Sequence[str], delimiter: str = DELIMITER) -> str:
    return f"\n{delimiter}\n".join(a.strip() for a in answers)


def split_answers(text: str, m: int, delimiter: str = DELIMITER) -> list[str]:
    """Up to M non-empty answers, in order. A rollout with fewer answers (no delimiter, empty parts) yields fewer:
    the caller scores what is there and counts the rollout as malformed; answers beyond the M-th are dropped."""
    if m <= 1:
        return [text]
    parts = [part.strip() for part in text.split(delimiter)]
    return [part for part in parts if part][:m]
