"""The evolutionary searcher's database: reward-vector MAP-Elites cells, strict elite replacement, ring migration from
the pre-migration state, seeded parent sampling, and exact checkpoint round trips (RNG included). Expectations are
worked out by hand in the comments."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from harness.searchers.evolve_db import Candidate, Database

TESTS = ["test_0", "test_1", "test_2"]


def vec(*passed: float) -> dict[str, float]:
    return {f"test_{i}": float(v) for i, v in enumerate(passed)}


def ids(cands: list[Candidate]) -> list[int]:
    return [c.id for c in cands]


# ----------------------------------------------------------------------------------------------------------------
# Cells
# ----------------------------------------------------------------------------------------------------------------


def test_cell_follows_the_reward_vector() -> None:
    db = Database(TESTS, bins=2)
    assert db.cell(vec(1, 0, 1)) == (1, 0, 1)
    assert db.cell(vec(0.5, 0.49, 0.99)) == (1, 0, 1)  # floor(0.5*2)=1, floor(0.98)=0, floor(1.98)=1
    assert db.cell({**vec(0, 1, 0), "format": 1.0}) == (0, 1, 0)  # components outside `features` are ignored

    db3 = Database(TESTS, bins=3)
    assert db3.cell(vec(0.5, 0.33, 0.34)) == (1, 0, 1)  # floor(1.5)=1, floor(0.99)=0, floor(1.02)=1
    assert db3.cell(vec(1.0, 0.0, 0.7)) == (2, 0, 2)  # 1.0 goes in the top bin, not a bin 3 of its own
    assert db3.cell(vec(1.7, -0.2, 0.66)) == (2, 0, 1)  # clipped to [0, 1]; floor(1.98)=1

    assert Database(TESTS, bins=1).cell(vec(1, 0.5, 0)) == (0, 0, 0)


def test_cell_missing_component_names_it() -> None:
    db = Database(TESTS)
    with pytest.raises(ValueError, match="test_2"):
        db.cell({"test_0": 1.0, "test_1": 0.0})
    with pytest.raises(ValueError, match="test_1"):
        db.add("x", {"test_0": 1.0, "test_2": 0.0}, 0.5, island=0)
    assert db.candidates == []  # a rejected vector leaves nothing behind


def test_different_test_subsets_occupy_different_cells() -> None:
    db = Database(TESTS, islands=1)
    a = db.add("a", vec(1, 1, 0), 2.0, island=0)
    b = db.add("b", vec(0, 0, 1), 1.0, island=0)  # lower fitness, but passes the test `a` fails: kept as an elite
    assert db.cell(a.rewards) != db.cell(b.rewards)
    assert db.elites[0] == {(1, 1, 0): a.id, (0, 0, 1): b.id}


# ----------------------------------------------------------------------------------------------------------------
# Elites
# ----------------------------------------------------------------------------------------------------------------


def test_elite_replaced_only_by_strictly_better_fitness() -> None:
    db = Database(TESTS, islands=2)
    cell = (1, 0, 0)
    first = db.add("first", vec(1, 0, 0), 0.5, island=0)
    assert db.elites[0] == {cell: first.id}
    db.add("equal", vec(1, 0, 0), 0.5, island=0)
    assert db.elites[0][cell] == first.id  # a tie keeps the incumbent
    db.add("lower", vec(1, 0, 0), 0.4, island=0)
    assert db.elites[0][cell] == first.id
    higher = db.add("higher", vec(0.9, 0, 0), 0.6, island=0)
    assert db.elites[0][cell] == higher.id
    assert db.elites[1] == {}  # other islands are untouched

    assert [c.text for c in db.candidates] == ["first", "equal", "lower", "higher"]  # none dropped
    assert ids(db.candidates) == [0, 1, 2, 3]


def test_add_records_lineage_and_rejects_bad_arguments() -> None:
    db = Database(TESTS, islands=2)
    p = db.add("p", vec(0, 0, 0), 0.0, island=1)
    c = db.add("c", vec(1, 0, 0), 1.0, island=1, parent=p.id, generation=3, feedback="test_1 failed", success=True)
    assert (c.island, c.parent, c.generation, c.feedback, c.success) == (1, 0, 3, "test_1 failed", True)
    for kwargs in ({"island": 2}, {"island": -1}, {"island": 0, "parent": 5}):
        with pytest.raises(ValueError, match=r"^evolve: "):
            db.add("x", vec(0, 0, 0), 0.0, **kwargs)
    with pytest.raises(ValueError, match=r"^evolve: fitness"):
        db.add("x", vec(0, 0, 0), float("nan"), island=0)
    assert len(db.candidates) == 2


def test_top_and_best() -> None:
    db = Database(TESTS, islands=2)
    assert db.best() is None
    db.add("a", vec(1, 0, 0), 0.5, island=0)  # 0
    db.add("b", vec(0, 1, 0), 0.9, island=0)  # 1
    db.add("c", vec(0, 0, 1), 0.5, island=0)  # 2: ties with 0, so ranked after it
    db.add("d", vec(1, 1, 1), 0.9, island=1)  # 3: ties with 1 on another island
    assert ids(db.top(0, 5)) == [1, 0, 2]
    assert ids(db.top(0, 2)) == [1, 0]
    assert db.top(0, 0) == []
    assert db.best().id == 1  # highest fitness over all islands, ties to the lower id


def test_diverse_picks_distinct_cells_outside_the_excluded_ones() -> None:
    db = Database(["test_0", "test_1"], islands=2, bins=2)
    for i, cell in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        db.add(f"c{i}", {"test_0": cell[0], "test_1": cell[1]}, float(i), island=0)
    db.add("elsewhere", {"test_0": 0, "test_1": 0}, 9.0, island=1)  # 4: another island's elite, never offered

    picked = db.diverse(0, 5, exclude=[3])  # 3 sits in (1, 1): the other three cells remain
    assert sorted(ids(picked)) == [0, 1, 2]
    picked = db.diverse(0, 2, exclude=[4, 3])  # 4's cell (0, 0) is excluded too, even though 4 lives on island 1
    assert sorted(ids(picked)) == [1, 2]
    picked = db.diverse(0, 2)
    assert len(picked) == 2 and len({db.cell(c.rewards) for c in picked}) == 2
    assert db.diverse(1, 3, exclude=[0]) == []  # island 1's only elite shares candidate 0's cell

    # Seeded: the same state draws the same picks.
    twin = Database.from_state(json.loads(json.dumps(db.state_dict())))
    assert [ids(db.diverse(0, 2)) for _ in range(10)] == [ids(twin.diverse(0, 2)) for _ in range(10)]


# ----------------------------------------------------------------------------------------------------------------
# Migration
# ----------------------------------------------------------------------------------------------------------------


def test_migration_ring_keeps_better_elites() -> None:
    db = Database(TESTS, islands=3, migrants=1)
    a = db.add("a", vec(1, 0, 0), 0.9, island=0)  # island 0's best
    db.add("a2", vec(0, 1, 0), 0.5, island=0)
    c = db.add("c", vec(1, 0, 0), 0.95, island=1)  # island 1 holds a's cell with a better elite
    d = db.add("d", vec(0, 0, 1), 0.3, island=2)
    before1 = dict(db.elites[1])

    # a -> island 1: its cell holds c (0.95 > 0.9), not placed. c -> island 2: empty cell, placed.
    # d -> island 0 (the ring wraps): empty cell, placed.
    assert db.migrate() == 2
    assert db.elites[1] == before1
    assert db.elites[2] == {(1, 0, 0): c.id, (0, 0, 1): d.id}
    assert db.elites[0][(0, 0, 1)] == d.id
    assert db.elites[0][(1, 0, 0)] == a.id
    assert len(db.candidates) == 4  # migrants keep their id; nothing is copied

    # A second migration: a is still blocked by c on island 1; island 1's best c is already island 2's elite there;
    # island 2's best is now c, which goes round the ring to island 0 and replaces a there (0.95 > 0.9).
    assert db.migrate() == 1
    assert db.elites[0] == {(1, 0, 0): c.id, (0, 1, 0): 1, (0, 0, 1): d.id}
    assert db.migrate() == 0  # settled: every offer is already in place or blocked


def test_migration_replaces_a_worse_elite_and_uses_the_pre_migration_state() -> None:
    db = Database(TESTS, islands=3, migrants=1)
    a = db.add("a", vec(1, 1, 0), 0.9, island=0)
    weak = db.add("weak", vec(1, 1, 0), 0.1, island=1)
    b = db.add("b", vec(0, 0, 1), 0.4, island=1)
    assert ids(db.top(1, 1)) == [b.id]

    # Offers from the state before: a -> island 1 (replaces weak, 0.9 > 0.1), b -> island 2. Visiting islands in
    # order and updating as we go would instead make a island 1's best and send a on to island 2 as well.
    assert db.migrate() == 2
    assert db.elites[1] == {(1, 1, 0): a.id, (0, 0, 1): b.id}
    assert weak.id not in db.elites[1].values() and weak in db.candidates
    assert db.elites[2] == {(0, 0, 1): b.id}
    assert db.elites[0] == {(1, 1, 0): a.id}  # island 2 was empty: nothing to send round the ring


def test_migrants_count_and_single_island() -> None:
    db = Database(TESTS, islands=2, migrants=2)
    for i, v in enumerate([vec(1, 0, 0), vec(0, 1, 0), vec(0, 0, 1)]):
        db.add(f"c{i}", v, float(i), island=0)
    assert db.migrate() == 2  # the best two (2 then 1) go to island 1
    assert sorted(db.elites[1].values()) == [1, 2]

    solo = Database(TESTS, islands=1)
    solo.add("x", vec(1, 0, 0), 1.0, island=0)
    assert solo.migrate() == 0  # the ring is one island: offering x to itself places nothing


def test_maybe_migrate_on_the_interval() -> None:
    db = Database(TESTS, islands=2, migration_interval=4)
    db.add("x", vec(1, 0, 0), 1.0, island=0)
    for generation in (0, 1, 3, 5):
        assert db.maybe_migrate(generation) == 0
    assert db.elites[1] == {}
    assert db.maybe_migrate(4) == 1
    assert db.elites[1] == {(1, 0, 0): 0}


# ----------------------------------------------------------------------------------------------------------------
# Sampling
# ----------------------------------------------------------------------------------------------------------------


def populated(**config: float) -> Database:
    db = Database(TESTS, islands=2, seed=7, **config)
    db.add("a", vec(1, 0, 0), 0.5, island=0)  # 0
    db.add("b", vec(0, 1, 0), 0.8, island=0)  # 1: island 0's best
    db.add("c", vec(0, 0, 1), 0.8, island=0)  # 2: ties with 1, loses on id
    db.add("d", vec(1, 1, 0), 0.9, island=1)  # 3
    db.add("e", vec(0, 1, 1), 0.2, island=1)  # 4
    return db


def test_sampling_proportions_follow_the_configuration() -> None:
    db = populated(exploit=0.5, explore=0.3, random=0.2)
    n = 20000
    kinds: Counter[str] = Counter()
    by_kind: dict[str, set[int]] = {"exploit": set(), "explore": set(), "random": set()}
    for _ in range(n):
        parent, kind = db.sample_parent(0)
        kinds[kind] += 1
        by_kind[kind].add(parent.id)
    for kind, p in (("exploit", 0.5), ("explore", 0.3), ("random", 0.2)):
        assert abs(kinds[kind] / n - p) <= 0.02, (kind, kinds[kind] / n)
    assert by_kind["exploit"] == {1}
    assert by_kind["explore"] == {0, 1, 2}  # only island 0's elites
    assert by_kind["random"] == {0, 1, 2, 3, 4}  # any island's


def test_exploit_only_always_returns_the_island_best() -> None:
    db = populated(exploit=1.0, explore=0.0, random=0.0)
    assert {(p.id, k) for p, k in (db.sample_parent(0) for _ in range(200))} == {(1, "exploit")}
    assert {(p.id, k) for p, k in (db.sample_parent(1) for _ in range(200))} == {(3, "exploit")}


def test_random_kind_counts_a_migrant_once() -> None:
    db = Database(TESTS, islands=2, exploit=0.0, explore=0.0, random=1.0)
    x = db.add("x", vec(1, 0, 0), 1.0, island=0)
    assert db.migrate() == 1  # x is now an elite on both islands
    db.add("y", vec(0, 1, 0), 0.5, island=1)
    n = 4000
    share = sum(db.sample_parent(0)[0].id == x.id for _ in range(n)) / n
    assert abs(share - 0.5) <= 0.03  # distinct ids {x, y}: 1/2 each, not 2/3 for x as three grid entries would give


def test_empty_island_falls_back_to_all_elites_and_empty_database_raises() -> None:
    db = Database(TESTS, islands=3, exploit=1.0, explore=0.0, random=0.0)
    with pytest.raises(ValueError, match=r"^evolve: .*empty"):
        db.sample_parent(0)
    db.add("a", vec(1, 0, 0), 0.3, island=0)
    db.add("b", vec(0, 1, 0), 0.7, island=1)
    parent, kind = db.sample_parent(2)  # island 2 is empty: the best over all islands
    assert (parent.id, kind) == (1, "exploit")
    with pytest.raises(ValueError, match=r"^evolve: island 3"):
        db.sample_parent(3)


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------------------------


def draws(db: Database, n: int = 50) -> list[tuple[int, str, int]]:
    return [(p.id, kind, island) for island in (0, 1) for p, kind in (db.sample_parent(island) for _ in range(n // 2))]


def assert_same(a: Database, b: Database) -> None:
    assert b.candidates == a.candidates
    assert b.elites == a.elites
    assert b.config() == a.config()
    assert draws(b) == draws(a)  # the RNG resumes where it was: the same parents, in the same order


def test_state_dict_json_round_trip() -> None:
    db = populated()
    db.migrate()
    draws(db, 10)  # advance the RNG past its seed, so the round trip must carry its state, not re-seed
    state = json.loads(json.dumps(db.state_dict()))
    assert state["elites"][0][0] == [[0, 0, 1], 2]  # cells as lists, sorted
    twin = Database.from_state(state)
    assert all(isinstance(cell, tuple) for grid in twin.elites for cell in grid)
    assert_same(db, twin)

    fresh = Database.from_state(json.loads(json.dumps(populated().state_dict())))
    assert draws(fresh) != draws(Database.from_state(state))  # the state, not the seed, decides the draws


def test_save_load_round_trip_is_atomic(tmp_path, monkeypatch) -> None:
    db = populated()
    draws(db, 6)
    path = tmp_path / "db.json"
    db.save(path)
    db.add("later", vec(1, 1, 1), 2.0, island=1)
    db.save(path)  # overwrites in place
    assert os.listdir(tmp_path) == ["db.json"]  # no temp file left behind
    assert_same(db, Database.load(path))

    # A failed rename leaves the previous checkpoint intact and removes the temp file.
    db.add("lost", vec(0, 0, 0), 0.0, island=0)

    def boom(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk gone"):
        db.save(path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["db.json"]
    assert len(Database.load(path).candidates) == len(db.candidates) - 1


def test_from_state_rejects_a_broken_checkpoint() -> None:
    state = json.loads(json.dumps(populated().state_dict()))
    with pytest.raises(ValueError, match=r"^evolve: unsupported"):
        Database.from_state({**state, "format": 99})
    bad = json.loads(json.dumps(state))
    bad["elites"][0][0][0] = [1, 1, 1]  # candidate 2 does not belong in that cell
    with pytest.raises(ValueError, match=r"^evolve: elite 2"):
        Database.from_state(bad)


# ----------------------------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("features", "config", "word"),
    [
        (TESTS, {"islands": 0}, "islands"),
        (TESTS, {"bins": 0}, "bins"),
        (TESTS, {"exploit": -0.1, "explore": 0.9, "random": 0.2}, "exploit"),
        (TESTS, {"exploit": 0.5, "explore": 0.3, "random": 0.1}, "sum to 1"),
        (TESTS, {"migration_interval": 0}, "migration_interval"),
        (TESTS, {"migrants": 0}, "migrants"),
        ([], {}, "features"),
        ("test_0", {}, "features"),
        (["a", "a"], {}, "duplicate"),
    ],
)
def test_invalid_config_is_a_one_line_error(features, config, word) -> None:
    with pytest.raises(ValueError) as err:
        Database(features, **config)
    message = str(err.value)
    assert message.startswith("evolve: ") and word in message and "\n" not in message


def test_candidate_dict_round_trip() -> None:
    c = Candidate(
        id=3,
        text="```python\nx = 1\n```",
        rewards={"test_0": 1.0},
        fitness=1.0,
        island=2,
        parent=1,
        generation=4,
        feedback="ok",
        success=True,
    )
    assert Candidate.from_dict(json.loads(json.dumps(c.to_dict()))) == c
