"""The "maze" task (one of VPO's four): walk from S to G on a small grid; the answer is a sequence of moves.

Mazes are generated here, not taken from reasoning-gym: its ``maze`` asks only for the number of steps (with random
characters for walls) and its ``shortest_path`` mixes in unsolvable grids; both stay reachable as ``rg:maze`` and
``rg:shortest_path``. Item i of the pool is drawn from its own ``Random("maze-<POOL_SEED>-<i>")``: a rows x cols grid
(each side uniform in [min_size, max_size]), each cell a wall with probability ``wall_density``, start and goal two
distinct open cells at BFS distance >= ``min_distance``; grids failing that are redrawn. Splits: tasks/splits.py.

The grid is shown as rows of cells ("S", "G", "#" wall, "." floor) separated by spaces; moves are U, D, L, R (row 1
is the top). Reward vector of an answer with moves m_1..m_n, walked from S until the first move into a wall or off
the grid, with d(x) the BFS distance from cell x to G and e the cell where that valid prefix ends:
    reaches_goal  1 if every move is valid and e == G (primary; passing through G and walking on does not count)
    valid_moves   (number of valid moves before the first invalid one) / n
    progress      max(0, 1 - d(e) / d(S))
    optimal       reaches_goal and n == d(S)
    format        the moves sit in a marked answer ("Path: ...", \\boxed{}, <answer>) holding nothing but moves
An answer with no moves at all scores 0 everywhere and is unparsed. Where chat models put a path: ``parse_moves``.
"""

from __future__ import annotations

import importlib.metadata
import random
import re
from collections import deque
from collections.abc import Sequence
from typing import Annotated, Any

from harness.plugins.option_help import Bounds
from harness.plugins.size_bounds import POOL
from harness.tasks.math_answers import boxed_contents
from harness.tasks.splits import POOL_SEED, digest, eval_split, split_by_content, take
from harness.types import Messages, Problem, Score, Split, TaskCapabilities

WALL, FLOOR, START, GOAL = "#", ".", "S", "G"
# a grid's side at most, rows and columns: a larger grid's path outgrows the task's answer budget
MAX_SIDE = 20
STEPS = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
# The example walks in a circle, so copying it never earns more than the format reward (an example such as
# "R R D" solves some mazes: SmolLM2-135M copied it).
INSTRUCTION = (
    "Think briefly if you need to, then end with one line that gives the path as move letters, "
    "for example:\nPath: U R D L"
)

Cell = tuple[int, int]


class MazeTask:
    """Grid mazes scored by walking the answer's moves. Options are keyword arguments; all have defaults."""

    name = "maze"
    version = "maze-v1"  # bump on any change of data, prompt, extraction or scoring
    # max_new_tokens: a short plan and a path of up to ~15 moves; reference completions: the path line alone
    # warm-up targets: the path alone; the policy's own maze answers ramble past the budget (docs/reference/trainers.md)
    capabilities = TaskCapabilities(max_new_tokens=160, reference_completions=True, warmup_targets="extracted")

    def __init__(
        self,
        *,
        min_size: Annotated[int, Bounds(2, MAX_SIDE)] = 4,  # fewest rows (and columns) of a grid
        max_size: Annotated[int, Bounds(2, MAX_SIDE)] = 6,  # most rows (and columns) of a grid
        wall_density: float = 0.3,  # chance that a cell is a wall
        min_distance: Annotated[int, Bounds(1, 2 * (MAX_SIDE - 1))] = 3,  # fewest moves from start to goal
        pool_size: Annotated[int, Bounds(1, POOL)] = 2000,  # mazes generated before the split
        eval_fraction: float = 0.2,  # the pool's share of eval mazes, by content hash
    ) -> None:
        self.min_size, self.max_size = int(min_size), int(max_size)
        self.wall_density, self.min_distance = float(wall_density), int(min_distance)
        self.pool_size, self.eval_fraction = int(pool_size), float(eval_fraction)
        if not 2 <= self.min_size <= self.max_size <= MAX_SIDE:
            raise ValueError(f"maze: need 2 <= min_size <= max_size <= {MAX_SIDE}, got {min_size}, {max_size}")
        if not 0.0 <= self.wall_density <= 0.6:  # denser grids rarely connect S and G: generation would crawl
            raise ValueError(f"maze: wall_density must be in [0, 0.6], got {wall_density}")
        # Corner to corner of an open grid; longer needs rare winding grids, and generation would crawl.
        if not 1 <= self.min_distance <= 2 * (self.max_size - 1):
            raise ValueError(f"maze: min_distance must be in [1, {2 * (self.max_size - 1)}], got {min_distance}")
        if self.pool_size < 1 or not 0.0 < self.eval_fraction <= 1.0:
            raise ValueError("maze: need pool_size >= 1 and 0 < eval_fraction <= 1")
        # A weak model rarely reaches the goal: progress and format give its GRPO groups variance to learn from.
        self.reward_weights = {"reaches_goal": 1.0, "progress": 0.5, "format": 0.25}
        self._splits: dict[str, list[Problem]] | None = None

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        if split not in ("train", "eval"):
            raise ValueError(f"maze: split must be 'train' or 'eval', got {split!r}")
        if self._splits is None:
            self._splits = split_by_content((self._generate(i) for i in range(self.pool_size)), self.eval_fraction)
        return take(self._splits[split], limit, seed)

    def messages(self, problem: Problem) -> Messages:
        return [{"role": "user", "content": f"{problem.prompt}\n\n{INSTRUCTION}"}]

    def score(self, problem: Problem, completion: str) -> Score:
        moves, marked, clean = parse_moves(completion)
        rewards = walk(problem.meta["grid"], moves or [])
        rewards["format"] = float(bool(moves) and marked and clean)
        return Score(
            rewards=rewards, primary="reaches_goal", extracted=" ".join(moves) if moves else None, unparsed=not moves
        )

    def reference_completion(self, problem: Problem) -> str:
        """The reference path (a shortest one) as the one line the instruction asks for."""
        return f"Path: {problem.answer}"

    def data_card(self) -> dict[str, Any]:
        """The data in three fields (harness.types.DataCard): the generator, the eval split, its rows."""
        self.problems("eval", limit=0)  # generates the pool
        return {
            "name": f"generated mazes ({self.min_size}-{self.max_size} cells a side, pool of {self.pool_size})",
            "split": eval_split(None, self.eval_fraction),
            "size": len((self._splits or {}).get("eval", [])),
        }

    def data_source(self) -> dict[str, Any]:
        try:
            version = importlib.metadata.version("vector-harness")
        except importlib.metadata.PackageNotFoundError:
            version = None
        splits = self._splits or {}
        return {
            "source": "generated",
            "generator": f"harness.tasks.maze ({self.version})",
            "harness_version": version,
            "params": {
                "min_size": self.min_size,
                "max_size": self.max_size,
                "wall_density": self.wall_density,
                "min_distance": self.min_distance,
                "seed": POOL_SEED,
                "size": self.pool_size,
            },
            "eval_fraction": self.eval_fraction,
            "split": "content-hash",
            **{f"n_{k}": len(v) for k, v in splits.items()},
        }

    def _generate(self, index: int) -> Problem:
        rng = random.Random(f"maze-{POOL_SEED}-{index}")  # one stream per item: item i never depends on pool_size
        for _ in range(10_000):
            rows, cols = rng.randint(self.min_size, self.max_size), rng.randint(self.min_size, self.max_size)
            grid = [[WALL if rng.random() < self.wall_density else FLOOR for _ in range(cols)] for _ in range(rows)]
            open_cells = [(r, c) for r in range(rows) for c in range(cols) if grid[r][c] == FLOOR]
            if len(open_cells) < 2:
                continue
            (sr, sc), (gr, gc) = rng.sample(open_cells, 2)
            grid[sr][sc], grid[gr][gc] = START, GOAL
            rows_text = ["".join(row) for row in grid]
            if distances_to_goal(rows_text).get((sr, sc), -1) >= self.min_distance:
                return maze_problem(rows_text, source_index=index)
        raise ValueError(f"maze: could not draw a maze with these options (item {index})")


# ----------------------------------------------------------------------------------------------------------------
# Mazes as data: a grid is a list of row strings over "S", "G", "#", "."
# ----------------------------------------------------------------------------------------------------------------


def maze_problem(grid: Sequence[str], **meta: Any) -> Problem:
    """A Problem for a grid given as row strings (also how tests build hand-made mazes). Needs a path S -> G."""
    grid = [str(row) for row in grid]
    cells = "".join(grid)
    if (
        not grid
        or len({len(row) for row in grid}) != 1
        or set(cells) - {WALL, FLOOR, START, GOAL}
        or cells.count(START) != 1
        or cells.count(GOAL) != 1
    ):
        raise ValueError("maze: a grid is equal-length rows of '#', '.', one 'S' and one 'G'")
    start, goal = find(grid, START), find(grid, GOAL)
    distance = distances_to_goal(grid).get(start)
    if distance is None:
        raise ValueError("maze: the goal cannot be reached from the start")
    rows, cols = len(grid), len(grid[0])
    picture = "\n".join(" ".join(row) for row in grid)
    prompt = (
        f"Find a path through this maze from S (start) to G (goal). It has {rows} rows and {cols} columns; "
        f"# is a wall and . is open floor.\n\n{picture}\n\n"
        "Each move goes one cell up (U), down (D), left (L) or right (R). "
        "You cannot move into a wall or off the grid."
    )
    # The id hashes the rows with their breaks (digest() ignores whitespace: a 4x6 and a 6x4 grid would collide).
    return Problem(
        id=f"maze-{digest('|'.join(grid))[:12]}",
        prompt=prompt,
        answer=" ".join(shortest_path(grid)),
        meta={"grid": grid, "start": list(start), "goal": list(goal), "distance": distance, **meta},
    )


def find(grid: Sequence[str], mark: str) -> Cell:
    for r, row in enumerate(grid):
        if mark in row:
            return r, row.index(mark)
    raise ValueError(f"maze: no {mark!r} in the grid")


def _open(grid: Sequence[str], cell: Cell) -> bool:
    r, c = cell
    return 0 <= r < len(grid) and 0 <= c < len(grid[r]) and grid[r][c] != WALL


def distances_to_goal(grid: Sequence[str]) -> dict[Cell, int]:
    """BFS distance to G of every open cell that can reach it."""
    goal = find(grid, GOAL)
    dist = {goal: 0}
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in STEPS.values():
            nxt = (r + dr, c + dc)
            if nxt not in dist and _open(grid, nxt):
                dist[nxt] = dist[(r, c)] + 1
                queue.append(nxt)
    return dist


def shortest_path(grid: Sequence[str]) -> list[str]:
    """One BFS-optimal move list from S to G (the reference answer; any other optimal path scores the same)."""
    dist = distances_to_goal(grid)
    cell, moves = find(grid, START), []
    while dist[cell]:
        move, cell = next(
            (m, (cell[0] + dr, cell[1] + dc))
            for m, (dr, dc) in STEPS.items()
            if dist.get((cell[0] + dr, cell[1] + dc)) == dist[cell] - 1
        )
        moves.append(move)
    return moves


def walk(grid: Sequence[str], moves: Sequence[str]) -> dict[str, float]:
    """The reward components other than format (formulas in the module doc)."""
    dist = distances_to_goal(grid)
    start = cell = find(grid, START)
    valid = 0
    for move in moves:
        dr, dc = STEPS[move]
        nxt = (cell[0] + dr, cell[1] + dc)
        if not _open(grid, nxt):
            break
        cell, valid = nxt, valid + 1
    reaches = bool(moves) and valid == len(moves) and dist[cell] == 0
    return {
        "reaches_goal": float(reaches),
        "valid_moves": valid / len(moves) if moves else 0.0,
        "progress": max(0.0, 1.0 - dist[cell] / dist[start]) if moves else 0.0,
        "optimal": float(reaches and len(moves) == dist[start]),
    }


# ----------------------------------------------------------------------------------------------------------------
# Extraction: where chat models put a path
# ----------------------------------------------------------------------------------------------------------------

_WORDS = {"up": "U", "north": "U", "down": "D", "south": "D", "left": "L", "west": "L", "right": "R", "east": "R"}
_ARROWS = {"↑": "U", "⬆": "U", "↓": "D", "⬇": "D", "←": "L", "⬅": "L", "→": "R", "➡": "R"}
# Words in any case; letter runs ("RRDL", "R R D") in capitals only outside a marked answer ("dull" is English).
_STRICT_TOKEN = re.compile(r"(?i:\b(up|down|left|right|north|south|east|west)\b)|\b([UDLR]+)\b|([↑↓←→⬆⬇⬅➡])")
_LOOSE_TOKEN = re.compile(r"(?i:\b(up|down|left|right|north|south|east|west)\b|\b([udlr]+)\b)|([↑↓←→⬆⬇⬅➡])")
_LABEL = re.compile(r"\b(?:path|moves|answer|solution)\b\**(?:\s+is\b|\s*[:=])[* \t:]*", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+", re.MULTILINE)  # "1. ", "2) ", "- " before a list item
MAX_MOVES = 400  # a longer "path" is a degenerate loop; cap the work


def _moves_in(region: str, loose: bool) -> tuple[list[str], bool]:
    """(moves, clean): the moves in a piece of text; clean when nothing but moves and separators is there.
    Arrows between letters or words are separators ("R → R → D"); on their own they are the moves."""
    pattern = _LOOSE_TOKEN if loose else _STRICT_TOKEN
    found = list(pattern.finditer(region))
    named = [m for m in found if not m.group(3)]
    moves: list[str] = []
    for m in named or found:
        word, letters, arrow = m.groups()
        moves += [_WORDS[word.lower()]] if word else list(letters.upper()) if letters else [_ARROWS[arrow]]
    rest = _LIST_MARK.sub(" ", pattern.sub(" ", region))
    return moves[:MAX_MOVES], not re.search(r"[^\W_]", rest)  # no letters or digits left over


def _after_label(text: str, loose: bool) -> tuple[list[str], bool] | None:
    """The last "Path: ..." with moves: the rest of its line, or the list right under an empty label line."""
    for m in reversed(list(_LABEL.finditer(text))):
        line = text[m.end() :].split("\n", 1)[0]
        moves, clean = _moves_in(line, loose)
        if moves:
            return moves, clean
        if not line.strip():  # "Path:\n1. right\n2. down": the lines that follow, up to a blank line
            block = text[m.end() :].strip("\n").split("\n\n", 1)[0]
            moves, clean = _moves_in(block, loose)
            if moves:
                return moves, clean
    return None


def parse_moves(text: str) -> tuple[list[str] | None, bool, bool]:
    """(moves or None, found in a marked answer, nothing but moves there). Never raises.

    Marked answers first: the last \\boxed{} with moves, the last <answer>...</answer>, the last "Path:" /
    "Moves:" / "Answer:" / "the path is"; then, unmarked, the last line made mostly of moves (capital letters,
    direction words, arrows), with the list items just above it: a numbered list of moves is a path."""
    if not isinstance(text, str):
        return None, False, False
    for box in reversed(boxed_contents(text)):
        moves, clean = _moves_in(box, loose=True)
        if moves:
            return moves, True, clean
    for tag in reversed(_ANSWER_TAG.findall(text)):
        moves, clean = _moves_in(tag, loose=True)
        if moves:
            return moves, True, clean
    labelled = _after_label(text, loose=True)
    if labelled:
        return labelled[0], True, labelled[1]
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if _mostly_moves(lines[i]):
            first = i
            while (
                first > 0
                and _LIST_MARK.match(lines[i])
                and _LIST_MARK.match(lines[first - 1])
                and _mostly_moves(lines[first - 1])
            ):
                first -= 1
            return _moves_in("\n".join(lines[first : i + 1]), loose=False)[0], False, False
    return None, False, False


def _mostly_moves(line: str) -> bool:
    """An unmarked line counts as a path only when its moves are at least as many as its other words: prose that
    mentions "D" or "left" in passing is not an answer ("It has a L for each row" would be a lucky guess)."""
    moves = len(_STRICT_TOKEN.findall(line))
    return moves > 0 and moves >= len(re.findall(r"[^\W\d_]+", _STRICT_TOKEN.sub(" ", line)))
