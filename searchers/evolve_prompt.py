"""Prompts and child parsing for an evolutionary searcher (AlphaEvolve / OpenEvolve style): a small chat LM sees the
problem, a parent candidate with its scores and evaluator feedback, and a few other candidates (the best so far and
some with different trade-offs), and proposes a child, either as a complete rewrite or as SEARCH/REPLACE edits
against the parent's code.

Candidates are duck-typed: ``text`` (what the task scores: a completion with a ```python block for code, an answer
text for math), ``rewards`` (name -> value), ``fitness`` (scalar), ``feedback`` (evaluator output, may be empty) and
``id``. Standard library only: the searcher's loop, not this module, talks to the engine and the task.

The model's context is small (~2k tokens), so every shown text is cut to ``max_chars`` and only code is shown for
code candidates (the prose around it costs tokens and teaches nothing).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.types import Messages

MODES = ("rewrite", "diff")
FEEDBACK_CHARS = 300  # feedback is one line per failing test: the first few say enough
# Same shape as tasks/code.py's FENCE (an unclosed block runs to the end); searchers do not import tasks.
FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.S | re.M)
CODE_LANGS = ("", "python", "py", "python3")
# Small models miscount the marker characters, so any run of 5 or more is accepted.
DIFF_BLOCK = re.compile(
    r"^[ \t]*<{5,}[ \t]*SEARCH[ \t]*\n(.*?)^[ \t]*={5,}[ \t]*\n(.*?)"
    r"^[ \t]*>{5,}[ \t]*REPLACE[ \t]*$",
    re.S | re.M,
)
DIFF_FORMAT = "<<<<<<< SEARCH\nexact lines from the current solution\n=======\nreplacement lines\n>>>>>>> REPLACE"


# ----------------------------------------------------------------------------------------------------------------
# The prompt
# ----------------------------------------------------------------------------------------------------------------


def build_prompt(
    task_messages: Messages,
    parent: Any,
    top: Sequence[Any],
    diverse: Sequence[Any],
    *,
    mode: str = "rewrite",
    max_chars: int = 1500,
) -> Messages:
    """Chat messages asking for a child of ``parent``: the task's system messages, then one user message with the
    problem, the parent, the ``top`` and ``diverse`` candidates (each shown once, never the parent again) and the
    instruction for ``mode``."""
    if mode not in MODES:
        raise ValueError(f"evolve: unknown mode {mode!r}; available: {', '.join(MODES)}")
    systems = [dict(m) for m in task_messages if m["role"] == "system"]
    users = [m["content"] for m in task_messages if m["role"] == "user"]
    problem = users[-1] if users else ""  # the last user turn is the question (earlier ones are few-shot examples)

    shown = {parent.id}
    sections = [f"## Problem\n{problem.strip()}", f"## Current solution\n{_show(parent, max_chars)}"]
    for title, group in (("## Best solutions so far", top), ("## Other approaches (different trade-offs)", diverse)):
        picked = []
        for cand in group:
            if cand.id not in shown:
                shown.add(cand.id)
                picked.append(cand)
        if picked:  # an empty section is tokens for nothing
            sections.append(title + "\n" + "\n\n".join(_show(c, max_chars) for c in picked))
    sections.append(_instruction(mode, is_code=extract_code(parent.text) is not None))
    return [*systems, {"role": "user", "content": "\n\n".join(sections)}]


def format_rewards(rewards: dict[str, float]) -> str:
    """``correct=0 boxed=1``: integers without decimals, others to at most 3."""
    return " ".join(f"{name}={_num(value)}" for name, value in rewards.items())


def _num(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "\n..."


def _show(cand: Any, max_chars: int) -> str:
    lines = [f"Scores: {format_rewards(cand.rewards)} (fitness {cand.fitness:.3f})"]
    if cand.feedback and cand.feedback.strip():
        lines.append("Feedback: " + _cut(cand.feedback.strip(), FEEDBACK_CHARS))
    code = extract_code(cand.text)
    # Code alone, fenced: the diff applies to exactly these lines, so they are what the model must see.
    lines.append(f"```python\n{_cut(code, max_chars)}\n```" if code is not None else _cut(cand.text.strip(), max_chars))
    return "\n".join(lines)


def _instruction(mode: str, *, is_code: bool) -> str:
    if mode == "diff":
        # Placed last so it overrides a task instruction such as "reply with the complete solution".
        return (
            "## Task\nImprove the current solution so that it scores higher. Do not write the whole solution: "
            "reply only with one or more SEARCH/REPLACE blocks, each in this format:\n"
            f"{DIFF_FORMAT}\n"
            "The SEARCH part must copy lines of the current solution exactly; the blocks are applied in order."
        )
    if is_code:
        return (
            "## Task\nWrite an improved solution that fixes the feedback and scores higher. Reply with the "
            "complete solution in a single ```python code block."
        )
    return (
        "## Task\nWrite an improved answer that scores higher. Reply with the complete answer in the format "
        "asked for in the problem."
    )


# ----------------------------------------------------------------------------------------------------------------
# Parsing the child
# ----------------------------------------------------------------------------------------------------------------


def extract_code(text: str) -> str | None:
    """The content of the last non-empty ```python (or bare ```) block, without its final newline; None when there
    is none. An unclosed block runs to the end (a generation cut by the token budget still has its code)."""
    blocks = [m.group(2) for m in FENCE.finditer(text) if m.group(1).lower() in CODE_LANGS and m.group(2).strip()]
    return blocks[-1].rstrip("\n") if blocks else None


def parse_diff(completion: str) -> list[tuple[str, str]]:
    """The (search, replace) pairs of the completion's SEARCH/REPLACE blocks, in order."""
    return [(_strip_newline(m.group(1)), _strip_newline(m.group(2))) for m in DIFF_BLOCK.finditer(completion)]


def _strip_newline(part: str) -> str:
    return part[:-1] if part.endswith("\n") else part


def apply_diff(parent_code: str, completion: str) -> str | None:
    """The parent's code with the completion's SEARCH/REPLACE blocks applied in order, each to the first occurrence
    of its search text in the code as edited so far. None (a failed diff) when there are no blocks or a block's
    search text is empty or not found, even ignoring trailing whitespace on each line."""
    blocks = parse_diff(completion)
    if not blocks:
        return None
    code = parent_code
    for search, replace in blocks:
        if not search.strip():  # an empty search matches anywhere: it says nothing about where to edit
            return None
        if search in code:
            code = code.replace(search, replace, 1)
            continue
        edited = _replace_lines_loosely(code, search, replace)
        if edited is None:
            return None
        code = edited
    return code


def _replace_lines_loosely(code: str, search: str, replace: str) -> str | None:
    """Replace the first run of whole lines equal to the search lines up to trailing whitespace (models often drop
    or add trailing spaces when they copy code)."""
    lines = code.split("\n")
    wanted = [line.rstrip() for line in search.split("\n")]
    n = len(wanted)
    for start in range(len(lines) - n + 1):
        if [line.rstrip() for line in lines[start : start + n]] == wanted:
            return "\n".join([*lines[:start], *replace.split("\n"), *lines[start + n :]])
    return None


def child_text(parent_text: str, completion: str, *, mode: str) -> tuple[str | None, str]:
    """What the task will score for this completion, and how it was obtained:

    - "diff": mode "diff" and the completion's blocks applied to the parent's code; the text is that code in a
      ```python block (a parent without a code block is edited as text and returned as text);
    - "rewrite": the completion has a fenced code block: the completion unchanged, so the task's own extractor sees
      what the model wrote;
    - "text": no fenced code in the completion and none in the parent (a math-style answer), or in mode "rewrite"
      none in the completion: the completion unchanged, for the task to judge;
    - "failed" (text None): an empty completion, a diff that did not apply, or in mode "diff" a code parent and a
      completion with neither blocks nor code.

    In mode "diff" a completion with no SEARCH/REPLACE blocks but a fenced block is taken as a rewrite."""
    if mode not in MODES:
        raise ValueError(f"evolve: unknown mode {mode!r}; available: {', '.join(MODES)}")
    if not completion.strip():
        return None, "failed"
    parent_code = extract_code(parent_text)
    if mode == "diff" and parse_diff(completion):
        new = apply_diff(parent_text if parent_code is None else parent_code, completion)
        if new is None:
            return None, "failed"
        if parent_code is None:
            return new, "diff"
        return "```python\n" + new.rstrip("\n") + "\n```", "diff"
    if extract_code(completion) is not None:
        return completion, "rewrite"
    if mode == "diff" and parent_code is not None:
        return None, "failed"  # asked for edits to code, got neither edits nor code
    return completion, "text"
