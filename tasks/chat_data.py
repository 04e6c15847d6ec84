"""Own data in TRL's dataset formats, for the math, mmlu-pro and code tasks: a row's question is a string (TRL's
standard format) or a conversation, a list of {"role", "content"} messages with system, user and (few-shot) assistant
turns (the conversational format), and a ``completion`` column, a string or the assistant's messages, is the row's
reference completion: SFT's target (trainers/sft.py).

A conversation is asked as the data wrote it: its system turns survive, and the task adds no instruction of its own,
since the data's author wrote the prompt they want (TRL sends it unchanged). Its last user turn is the problem's
``prompt``: ids, the split by content, a misleading hint and per-answer reward functions read that, and ``ask`` puts
the (possibly hinted) prompt back into that turn. The row's other columns, under the dataset's own names, go to
``Problem.columns``: a batch reward function receives each of them by name, as TRL's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.types import Messages, Problem

ROLES = ("system", "user", "assistant")
COMPLETION = "completion"  # TRL's name for the column of reference completions
PROMPT = "prompt"  # TRL's name for the question's column


def question_column(row: Mapping[str, Any], field: str) -> str:
    """The column holding a row's question: the task's own name (``field``), else TRL's ``prompt``, so a dataset
    made for TRL is read without ``--set task.question=prompt``."""
    return field if field in row or PROMPT not in row else PROMPT


def read_prompt(value: Any, at: str, field: str) -> tuple[str, Messages | None]:
    """(the question's text, the conversation or None): a string as it is, or a list of messages whose last turn is
    the user's; anything else is a one-line ValueError naming the row and ``field``."""
    if isinstance(value, str) and value.strip():
        return value.strip(), None
    if isinstance(value, (list, tuple)) and value:
        messages = _messages(value, at, field, ROLES)
        if messages[-1]["role"] == "user":
            return messages[-1]["content"].strip(), messages
        raise ValueError(
            f"{at}: '{field}' is a conversation whose last turn is {messages[-1]['role']!r}; it must end "
            "with the user's turn, the one the model answers"
        )
    raise ValueError(
        f"{at}: '{field}' must be a non-empty string or a list of chat messages ({{'role', 'content'}}), "
        f"got {_short(value)}"
    )


def read_completion(value: Any, at: str) -> str | None:
    """A row's reference completion: a string, or assistant messages (their contents joined); None when absent."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and value:
        return "\n".join(m["content"] for m in _messages(value, at, COMPLETION, ("assistant",)))
    raise ValueError(f"{at}: '{COMPLETION}' must be a string or a list of assistant messages, got {_short(value)}")


def ask(problem: Problem, text: str) -> Messages:
    """What the engine is sent: the problem's own conversation with its prompt in the last user turn, or one user
    turn holding ``text`` (the task's prompt with its instruction) when the data gave a plain question."""
    if problem.messages is None:
        return [{"role": "user", "content": text}]
    return [*problem.messages[:-1], {"role": "user", "content": problem.prompt}]


def other_columns(row: Mapping[str, Any], *used: str) -> dict[str, Any]:
    """The row's columns but the question's and the completion's: what TRL passes a reward function by name."""
    return {k: v for k, v in row.items() if k not in (*used, COMPLETION)}


def _messages(value: Any, at: str, field: str, roles: tuple[str, ...]) -> Messages:
    out = []
    for i, message in enumerate(value):
        role = message.get("role") if isinstance(message, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if role not in roles or not isinstance(content, str):
            raise ValueError(
                f"{at}: '{field}' message {i} must be {{'role': {' | '.join(roles)}, 'content': "
                f"string}}, got {_short(message)}"
            )
        out.append({"role": role, "content": content})
    return out


def _short(value: Any) -> str:
    text = repr(value)  # repr keeps the message on one line
    return text if len(text) <= 60 else text[:57] + "..."
