"""Built-in tasks, registered through the same hook as third-party ones.

Only "module:attr" strings are registered, so ``import tasks`` imports no task code (and never torch, datasets or
math-verify): a task module is imported when the task is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.registry import Registry


@hookimpl
def harness_register_tasks(registry: Registry) -> None:
    registry.add("math", "tasks.math:MathTask",
                 description="Maths problems with a boxed final answer checked by math-verify (reward: correct, boxed,"
                             " strict); sources gym-arithmetic (default), champ, jsonl, hub (MATH)")
