"""The candidate database of an evolutionary searcher (AlphaEvolve / FunSearch / OpenEvolve style): islands, each with
a MAP-Elites grid whose axes are components of the task's reward vector.

Why the reward vector: a code task's vector has one component per unit test, so a candidate that passes a different
subset of tests lands in its own cell and survives even when its scalar fitness is lower. That keeps partial
solutions with different strengths around as parents, instead of letting one local optimum take every slot.

- ``candidates`` holds every evaluated candidate in evaluation order (``id`` is the index) and is never pruned: a
  checkpoint must lose nothing, and ``best()`` looks at all of them, not only at current elites.
- ``elites[i]`` maps a cell to the id of the best candidate there on island ``i``. A cell's elite is replaced only by
  a strictly higher fitness, so ties keep the incumbent (older, already shown in prompts) and runs stay stable.
- Islands evolve apart and exchange their best ``migrants`` elites along a ring every ``migration_interval``
  generations (FunSearch's islands, OpenEvolve's ring). A migrant keeps its id: one candidate, several grids.
- Parent sampling mixes exploit (the island's best), explore (a random elite of the island) and random (a random
  elite of any island) with configured probabilities, drawn from the database's own seeded ``random.Random``, whose
  state is checkpointed so a resumed run draws the same parents as an uninterrupted one.

Deterministic orders (so a seed fixes everything): an island's elites are listed by cell (sorted), the "random" kind
draws from the distinct ids over all islands (sorted), so a migrant on two islands is not twice as likely.
Standard library only: the searcher's loop, not this module, talks to the engine and the task.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from random import Random
from typing import Any

from harness.store.run_folder import write_json_atomic

KINDS = ("exploit", "explore", "random")
FORMAT = 1  # bump when state_dict's layout changes


@dataclass
class Candidate:
    id: int  # index in Database.candidates (evaluation order)
    text: str  # the candidate as the task scores it (e.g. a completion with a ```python fence)
    rewards: dict[str, float]  # the reward vector; fitness stays a vector, the scalar is only for selection
    fitness: float  # scalar used for selection (the caller computes it, e.g. a weighted sum)
    island: int  # island it was created on
    parent: int | None = None
    generation: int = 0
    feedback: str = ""  # evaluator feedback (failing test, error) shown in later prompts
    success: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Candidate:
        return cls(
            id=int(d["id"]),
            text=str(d["text"]),
            rewards={str(k): float(v) for k, v in d["rewards"].items()},
            fitness=float(d["fitness"]),
            island=int(d["island"]),
            parent=None if d.get("parent") is None else int(d["parent"]),
            generation=int(d.get("generation", 0)),
            feedback=str(d.get("feedback", "")),
            success=bool(d.get("success", False)),
        )


class Database:
    def __init__(
        self,
        features: Sequence[str],
        *,
        islands: int = 4,
        bins: int = 2,
        seed: int = 0,
        exploit: float = 0.5,
        explore: float = 0.3,
        random: float = 0.2,
        migration_interval: int = 4,
        migrants: int = 1,
    ) -> None:
        # A lone string is a Sequence too; "abc" would silently become three features a, b, c.
        if isinstance(features, str) or not features:
            raise ValueError(f"evolve: features must be a non-empty list of reward component names, got {features!r}")
        if len(set(features)) != len(features):
            raise ValueError(f"evolve: duplicate feature names in {list(features)}")
        if islands < 1:
            raise ValueError(f"evolve: islands must be >= 1, got {islands}")
        if bins < 1:
            raise ValueError(f"evolve: bins must be >= 1, got {bins}")
        probs = {"exploit": exploit, "explore": explore, "random": random}
        for name, p in probs.items():
            if not p >= 0:  # also catches NaN
                raise ValueError(f"evolve: {name} probability must be >= 0, got {p}")
        if abs(sum(probs.values()) - 1.0) > 1e-9:
            raise ValueError(f"evolve: exploit + explore + random must sum to 1, got {sum(probs.values())}")
        if migration_interval < 1:
            raise ValueError(f"evolve: migration_interval must be >= 1, got {migration_interval}")
        if migrants < 1:
            raise ValueError(f"evolve: migrants must be >= 1, got {migrants}")
        self.features = list(features)
        self.islands = islands
        self.bins = bins
        self.seed = seed
        self.exploit, self.explore, self.random = exploit, explore, random
        self.migration_interval = migration_interval
        self.migrants = migrants
        self.rng = Random(seed)
        self.candidates: list[Candidate] = []
        self.elites: list[dict[tuple[int, ...], int]] = [{} for _ in range(islands)]

    # ------------------------------------------------------------------------------------------------------------
    # The grid
    # ------------------------------------------------------------------------------------------------------------

    def cell(self, rewards: Mapping[str, float]) -> tuple[int, ...]:
        """One bin per feature: [0, 1] cut into ``bins`` equal parts, 1.0 in the top bin (not a bin of its own)."""
        out = []
        for name in self.features:
            if name not in rewards:
                raise ValueError(f"evolve: reward component {name!r} missing (have {sorted(rewards)})")
            value = float(rewards[name])
            if math.isnan(value):
                raise ValueError(f"evolve: reward component {name!r} is NaN")
            out.append(min(self.bins - 1, math.floor(min(1.0, max(0.0, value)) * self.bins)))
        return tuple(out)

    def add(
        self,
        text: str,
        rewards: Mapping[str, float],
        fitness: float,
        *,
        island: int,
        parent: int | None = None,
        generation: int = 0,
        feedback: str = "",
        success: bool = False,
    ) -> Candidate:
        self._check_island(island)
        fitness = float(fitness)
        # NaN compares false both ways (it would never lose its cell) and neither NaN nor inf is valid JSON.
        if not math.isfinite(fitness):
            raise ValueError(f"evolve: fitness must be finite, got {fitness}")
        if parent is not None and not 0 <= parent < len(self.candidates):
            raise ValueError(f"evolve: parent {parent} is not a candidate id (have {len(self.candidates)})")
        cell = self.cell(rewards)  # before appending, so a bad vector leaves the database unchanged
        cand = Candidate(
            id=len(self.candidates),
            text=text,
            rewards={k: float(v) for k, v in rewards.items()},
            fitness=fitness,
            island=island,
            parent=parent,
            generation=generation,
            feedback=feedback,
            success=success,
        )
        self.candidates.append(cand)
        self._place(island, cell, cand.id)
        return cand

    def _place(self, island: int, cell: tuple[int, ...], cid: int) -> bool:
        """Make ``cid`` the elite of ``cell`` if the cell is empty or ``cid`` is strictly fitter (ties: incumbent)."""
        grid = self.elites[island]
        incumbent = grid.get(cell)
        if incumbent is not None and self.candidates[cid].fitness <= self.candidates[incumbent].fitness:
            return False
        grid[cell] = cid
        return True

    # ------------------------------------------------------------------------------------------------------------
    # Selection
    # ------------------------------------------------------------------------------------------------------------

    def island_elites(self, island: int) -> list[Candidate]:
        """The island's elites ordered by cell, so draws depend on the seed only, not on insertion history."""
        self._check_island(island)
        grid = self.elites[island]
        return [self.candidates[grid[c]] for c in sorted(grid)]

    def all_elites(self) -> list[Candidate]:
        """Distinct elites over all islands by id: a migrant held by two islands counts once."""
        return [self.candidates[i] for i in sorted({cid for grid in self.elites for cid in grid.values()})]

    def sample_parent(self, island: int) -> tuple[Candidate, str]:
        """A parent for the next child on ``island`` and the kind of draw that chose it."""
        pool = self.island_elites(island)
        if not pool:  # an island that has not produced anything yet borrows from the others
            pool = self.all_elites()
        if not pool:
            raise ValueError("evolve: cannot sample a parent from an empty database")
        r = self.rng.random()
        if r < self.exploit:
            return _ranked(pool)[0], "exploit"
        if r < self.exploit + self.explore:
            return self.rng.choice(pool), "explore"
        return self.rng.choice(self.all_elites()), "random"

    def top(self, island: int, k: int) -> list[Candidate]:
        """The island's best ``k`` elites, fitness descending, ties by lower id (older first)."""
        return _ranked(self.island_elites(island))[: max(0, k)]

    def diverse(self, island: int, k: int, exclude: Collection[int] = ()) -> list[Candidate]:
        """Up to ``k`` elites of the island from cells that none of ``exclude`` occupies, drawn by ``self.rng``.

        An island holds one elite per cell, so the picks come from distinct cells: a prompt shows different
        trade-offs (different tests passed), not near-copies of the parent or of the best.
        """
        for cid in exclude:
            if not 0 <= cid < len(self.candidates):
                raise ValueError(f"evolve: exclude id {cid} is not a candidate id (have {len(self.candidates)})")
        skip = {self.cell(self.candidates[cid].rewards) for cid in exclude}
        pool = [c for c in self.island_elites(island) if self.cell(c.rewards) not in skip]
        return self.rng.sample(pool, min(max(0, k), len(pool)))

    def best(self) -> Candidate | None:
        """The fittest candidate ever evaluated (ties: lowest id), elite or not; None when empty."""
        return _ranked(self.candidates)[0] if self.candidates else None

    # ------------------------------------------------------------------------------------------------------------
    # Migration
    # ------------------------------------------------------------------------------------------------------------

    def migrate(self) -> int:
        """Offer each island's best ``migrants`` elites to the next island on the ring; returns how many were placed.

        All offers are taken from the state before any is placed, so island i's fresh arrivals do not travel on to
        island i+2 in the same migration and the result does not depend on the order islands are visited.
        """
        offers = [((i + 1) % self.islands, c.id) for i in range(self.islands) for c in self.top(i, self.migrants)]
        # A candidate already holding the cell is not strictly fitter than itself, so it is not counted again.
        return sum(self._place(dest, self.cell(self.candidates[cid].rewards), cid) for dest, cid in offers)

    def maybe_migrate(self, generation: int) -> int:
        if generation > 0 and generation % self.migration_interval == 0:
            return self.migrate()
        return 0

    # ------------------------------------------------------------------------------------------------------------
    # Checkpoints
    # ------------------------------------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "islands": self.islands,
            "bins": self.bins,
            "seed": self.seed,
            "exploit": self.exploit,
            "explore": self.explore,
            "random": self.random,
            "migration_interval": self.migration_interval,
            "migrants": self.migrants,
        }

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable: config, every candidate, each island's grid (cells as lists) and the RNG state."""
        version, internal, gauss_next = self.rng.getstate()
        return {
            "format": FORMAT,
            "config": self.config(),
            "candidates": [c.to_dict() for c in self.candidates],
            "elites": [[[list(cell), cid] for cell, cid in sorted(grid.items())] for grid in self.elites],
            "rng": [version, list(internal), gauss_next],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Database:
        if state.get("format") != FORMAT:
            raise ValueError(f"evolve: unsupported database format {state.get('format')!r} (expected {FORMAT})")
        db = cls(**state["config"])
        db.candidates = [Candidate.from_dict(d) for d in state["candidates"]]
        for i, c in enumerate(db.candidates):
            if c.id != i:
                raise ValueError(f"evolve: candidate at position {i} has id {c.id}")
        if len(state["elites"]) != db.islands:
            raise ValueError(f"evolve: {len(state['elites'])} elite grids for {db.islands} islands")
        db.elites = [{tuple(int(b) for b in cell): int(cid) for cell, cid in grid} for grid in state["elites"]]
        for grid in db.elites:
            for cell, cid in grid.items():
                if not 0 <= cid < len(db.candidates) or db.cell(db.candidates[cid].rewards) != cell:
                    raise ValueError(f"evolve: elite {cid} does not belong in cell {list(cell)}")
        version, internal, gauss_next = state["rng"]
        db.rng.setstate((version, tuple(internal), gauss_next))
        return db

    def save(self, path: str | os.PathLike[str]) -> None:
        """Atomic: a temp file in the same folder (same filesystem, so the rename is atomic), fsynced, then renamed
        over ``path``; a crash mid-write leaves the previous checkpoint intact."""
        write_json_atomic(Path(path), self.state_dict())  # NaN/inf fitness is refused by add(), never saved

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Database:
        with open(path) as f:
            return cls.from_state(json.load(f))

    def _check_island(self, island: int) -> None:
        if not 0 <= island < self.islands:
            raise ValueError(f"evolve: island {island} out of range (have {self.islands})")


def _ranked(cands: Sequence[Candidate]) -> list[Candidate]:
    return sorted(cands, key=lambda c: (-c.fitness, c.id))
