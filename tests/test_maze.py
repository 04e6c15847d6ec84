"""The maze task: hand-computed rewards on a hand-built maze, extraction on chat-model habits, splits, generation."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.tasks.maze import MazeTask, distances_to_goal, maze_problem, parse_moves
from harness.tasks.splits import normalise
from harness.types import Task, scalarize

# S at (0, 0), G at (2, 0); the only way round the walls is R R D D L L (6 moves).
GRID = ["S...", "##.#", "G..."]
PROBLEM = maze_problem(GRID)


def _rewards(completion: str) -> dict[str, float]:
    return MazeTask().score(PROBLEM, completion).rewards


def test_hand_built_maze() -> None:
    assert PROBLEM.answer == "R R D D L L" and PROBLEM.meta["distance"] == 6
    assert distances_to_goal(GRID)[(0, 3)] == 5  # a dead end one step past the turn
    assert "S . . ." in PROBLEM.prompt and "3 rows and 4 columns" in PROBLEM.prompt


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        # optimal: every component is 1
        ("Path: R R D D L L", {"reaches_goal": 1, "valid_moves": 1, "progress": 1, "optimal": 1, "format": 1}),
        # valid but long (into the dead end and back): reaches the goal, not optimal
        ("Path: R R R L D D L L", {"reaches_goal": 1, "valid_moves": 1, "progress": 1, "optimal": 0, "format": 1}),
        # hits a wall at the first move: nothing valid, no progress
        ("Path: D", {"reaches_goal": 0, "valid_moves": 0, "progress": 0, "optimal": 0, "format": 1}),
        # off the grid
        ("Path: U U", {"reaches_goal": 0, "valid_moves": 0, "progress": 0, "optimal": 0, "format": 1}),
        # hits a wall at move 4 from (1, 2), 3 steps from G: 3/4 valid, progress 1 - 3/6
        ("Path: R R D L", {"reaches_goal": 0, "valid_moves": 0.75, "progress": 0.5, "optimal": 0, "format": 1}),
        # stops short at (1, 2)
        ("Path: R R D", {"reaches_goal": 0, "valid_moves": 1, "progress": 0.5, "optimal": 0, "format": 1}),
        # walks through G and on to (2, 1): not a solution, but close
        ("Path: R R D D L L R", {"reaches_goal": 0, "valid_moves": 1, "progress": 5 / 6, "optimal": 0, "format": 1}),
        # the optimal path, unmarked: reaches the goal without the format reward
        ("I would go R R D D L L", {"reaches_goal": 1, "valid_moves": 1, "progress": 1, "optimal": 1, "format": 0}),
        # marked but with prose inside: the moves count, the format does not
        (
            "Path: go right, right, then down, down, left, left",
            {"reaches_goal": 1, "valid_moves": 1, "progress": 1, "optimal": 1, "format": 0},
        ),
    ],
)
def test_hand_computed_rewards(completion: str, expected: dict[str, float]) -> None:
    rewards = _rewards(completion)
    assert list(rewards) == ["reaches_goal", "valid_moves", "progress", "optimal", "format"]
    assert rewards == pytest.approx({k: float(v) for k, v in expected.items()})


@pytest.mark.parametrize("completion", ["", "I don't know.", "The maze is hard.", "Path: ???", "\\boxed{}"])
def test_no_moves_is_unparsed(completion: str) -> None:
    score = MazeTask().score(PROBLEM, completion)
    assert score.unparsed and score.extracted is None and not score.success
    assert set(score.rewards.values()) == {0.0}


def test_two_paths_trade_off_across_components() -> None:
    bold = _rewards("Path: R R D L")  # gets halfway, then walks into a wall
    timid = _rewards("Path: R R R")  # every move valid, but into the dead end
    assert bold["progress"] > timid["progress"] and timid["valid_moves"] > bold["valid_moves"]
    # Which is better depends on the weighting: exactly what a vector reward leaves open.
    assert scalarize(bold, {"progress": 1.0}) > scalarize(timid, {"progress": 1.0})
    assert scalarize(timid, {"valid_moves": 1.0}) > scalarize(bold, {"valid_moves": 1.0})
    # And the format component against reaching the goal.
    unmarked_right, marked_wrong = _rewards("R R D D L L"), _rewards("Path: D")
    assert unmarked_right["reaches_goal"] > marked_wrong["reaches_goal"]
    assert marked_wrong["format"] > unmarked_right["format"]


@pytest.mark.parametrize(
    ("completion", "moves", "marked"),
    [
        ("Path: R R D", "RRD", True),
        ("**Path:** R, R, D.", "RRD", True),
        ("The path is: right, right, down", "RRD", True),
        ("Moves: RRD", "RRD", True),
        ("So the answer is \\boxed{R, R, D}", "RRD", True),
        ("<answer>U D</answer>", "UD", True),
        ("Path:\n1. Right\n2. Right\n3. Down", "RRD", True),
        ("Path: r, r, d", "RRD", True),  # small letters count inside a marked answer
        ("Path: R -> R -> D", "RRD", True),  # arrows between moves are separators
        ("Path: → → ↓", "RRD", True),  # arrows alone are the moves
        ("First I try U. That hits a wall.\nPath: R R D", "RRD", True),  # the last marked answer wins
        ("Go east, east, then south.", "RRD", False),
        ("I think:\n- Right\n- Right\n- Down", "RRD", False),  # an unmarked list of moves
        ("R R D\n\nThat should work!", "RRD", False),  # the last line with moves
        ("```\nRRD\n```", "RRD", False),
    ],
)
def test_extraction_copes_with_chat_model_habits(completion: str, moves: str, marked: bool) -> None:
    found, was_marked, _ = parse_moves(completion)
    assert "".join(found or []) == moves and was_marked == marked


def test_messages_ask_for_a_path_line() -> None:
    messages = MazeTask().messages(PROBLEM)
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert messages[0]["content"].startswith(PROBLEM.prompt) and "Path: U R D L" in messages[0]["content"]


_FRAGMENTS = [
    "Path:",
    "path is",
    "R",
    "L",
    "U",
    "D",
    "up",
    "down",
    "left",
    "right",
    "→",
    "↓",
    " ",
    ",",
    "\n",
    "1. ",
    "- ",
    "\\boxed{",
    "}",
    "<answer>",
    "</answer>",
    "**",
    "dull",
    "x",
    "7",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(_FRAGMENTS), max_size=40).map("".join)))
def test_score_never_raises_and_rewards_are_consistent(completion: str) -> None:
    score = MazeTask().score(PROBLEM, completion)
    r = score.rewards
    assert all(0.0 <= v <= 1.0 for v in r.values())
    assert score.unparsed == (score.extracted is None)
    assert r["optimal"] <= r["reaches_goal"] <= min(r["valid_moves"], r["progress"])


# ----------------------------------------------------------------------------------------------------------------
# Generated pool
# ----------------------------------------------------------------------------------------------------------------


def test_splits_are_disjoint_by_content_and_deterministic() -> None:
    task = MazeTask(pool_size=300)
    assert isinstance(task, Task) and task.name == "maze" and task.version and task.capabilities.max_new_tokens > 0
    train, evaluation = task.problems("train"), task.problems("eval")
    assert train and evaluation and len(train) + len(evaluation) <= 300
    assert not {normalise(p.prompt) for p in train} & {normalise(p.prompt) for p in evaluation}
    assert not {p.id for p in train} & {p.id for p in evaluation}
    assert len({p.id for p in train}) == len(train)
    # A fresh instance (a new run) gives the same problems; the seed only orders them; a bigger pool keeps them.
    assert MazeTask(pool_size=300).problems("eval", limit=10, seed=4) == task.problems("eval", limit=10, seed=4)
    assert {p.id for p in task.problems("eval", seed=1)} == {p.id for p in evaluation}
    assert {p.id for p in evaluation} <= {p.id for p in MazeTask(pool_size=600).problems("eval")}
    assert task.problems("train", limit=0) == [] and len(task.problems("train", limit=7)) == 7


def test_generated_mazes_respect_options_and_their_answers_solve_them() -> None:
    task = MazeTask(min_size=4, max_size=5, min_distance=4, pool_size=100)
    for p in task.problems("train", limit=30):
        grid = p.meta["grid"]
        assert 4 <= len(grid) <= 5 and all(4 <= len(row) <= 5 for row in grid)
        assert p.meta["distance"] >= 4 and len(p.answer.split()) == p.meta["distance"]
        score = task.score(p, f"Path: {p.answer}")
        assert score.success and score.rewards["optimal"] == 1.0 and score.extracted == p.answer
    source = task.data_source()
    assert source["source"] == "generated" and source["params"]["min_distance"] == 4 and source["params"]["seed"]


def test_options_from_the_command_line_are_strings() -> None:
    task = MazeTask(min_size="3", max_size="3", wall_density="0", pool_size="20")
    assert all(len(p.meta["grid"]) == 3 for p in task.problems("train"))


@pytest.mark.parametrize(
    "options",
    [
        {"min_size": 5, "max_size": 4},
        {"min_size": 1},
        {"wall_density": 0.9},
        {"min_distance": 11},
        {"pool_size": 0},
        {"eval_fraction": 0},
    ],
)
def test_bad_options_fail_at_construction(options: dict) -> None:
    with pytest.raises(ValueError, match="maze"):
        MazeTask(**options)


def test_unsolvable_hand_built_maze_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be reached"):
        maze_problem(["S#G"])


def test_maze_is_registered_lazily() -> None:
    from harness import tasks
    from harness.plugins.registry import Registry

    registry = Registry("task")
    tasks.harness_register_tasks(registry=registry)
    assert isinstance(registry.get("maze").create(pool_size="50"), MazeTask)


@pytest.mark.parametrize("grid", [["S.", "G"], ["S.G", "S.."], ["S.x", "..G"], ["S..", "..."], []])
def test_malformed_hand_built_maze_is_refused(grid: list[str]) -> None:
    with pytest.raises(ValueError, match="maze"):
        maze_problem(grid)
