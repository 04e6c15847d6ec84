"""The results store: an SQLite index of run folders that a leaderboard queries.

The run folders stay the record (manifest.json, metrics.json, samples.jsonl); this file only indexes them, so it
can be deleted and rebuilt from the folders at any time (`rebuild`). Several runs may finish at once and index into
the same file: WAL mode lets readers go on while one writer holds the lock, and each run is written in one
``BEGIN IMMEDIATE`` transaction with a long busy timeout, so concurrent writers wait their turn instead of failing.

A rebuild writes a new file beside the old one and renames it into place, so the old index stays whole until the new
one is: a rebuild that fails leaves it as it was (and one killed leaves a file the next removes:
harness/store/orphans.py). SQLite must never see its file swapped while a connection is open
(its -wal and -shm files go by name, and would then be shared by two databases), so every connection here holds a
shared flock on ``.<name>.lock`` beside the file and the swap takes it exclusively. A folder that cannot be read
is skipped with its reason (``UnreadableRun``: the file, and the line or field, and why); every value the index
takes is checked first (harness/store/run_record.py).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.faults import fault_point
from harness.store import reading
from harness.store.orphans import new_temp_file, remove_orphans
from harness.store.reading import (
    check_path_length,
    exists_in_folder,
    path_text,
    read_run_json,
    read_run_jsonl,
    shown,
    shown_name,
)
from harness.store.run_folder import check_writable_folder, new_file_mode
from harness.store.run_record import MAX_INT, check_manifest, check_metrics, check_sample

RESULTS_DB = "results.sqlite"
# What a sample record (samples.jsonl, written by a searcher through store.write_samples) must carry for the report
# to recompute pass@k (success) and best@k (scalar) per problem, and so their intervals; see docs/reference/hooks.md.
REQUIRED_SAMPLE_KEYS = ("problem_id", "phase", "success", "scalar")

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_dir TEXT PRIMARY KEY, name TEXT, status TEXT, task TEXT, trainer TEXT, searcher TEXT, model TEXT,
    seed INTEGER, preset TEXT, started TEXT, seconds REAL, manifest TEXT);
CREATE TABLE IF NOT EXISTS metrics (run_dir TEXT, key TEXT, value REAL, PRIMARY KEY (run_dir, key));
CREATE TABLE IF NOT EXISTS curves (run_dir TEXT, key TEXT, step INTEGER, value REAL, PRIMARY KEY (run_dir, key, step));
CREATE TABLE IF NOT EXISTS problems (run_dir TEXT, phase TEXT, problem_id TEXT, n INTEGER, successes INTEGER,
    scalars TEXT, outcomes TEXT, behaviours TEXT, held_out TEXT, PRIMARY KEY (run_dir, phase, problem_id));
CREATE TABLE IF NOT EXISTS examples (run_dir TEXT, phase TEXT, which TEXT, problem_id TEXT, text TEXT,
    extracted TEXT, scalar REAL, rewards TEXT, PRIMARY KEY (run_dir, phase, which));
"""
TABLES = ("runs", "metrics", "curves", "problems", "examples")
# Columns added after a table's first version: (table, column, type). A store written before them gets them on
# connect (NULL in its old rows, which a report reads as "not recorded"); `harness index` fills them.
ADDED_COLUMNS = (("problems", "outcomes", "TEXT"), ("problems", "behaviours", "TEXT"), ("problems", "held_out", "TEXT"))


def connect(db: Path | str) -> sqlite3.Connection:
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(db), timeout=120)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(SCHEMA)
        for table, column, kind in ADDED_COLUMNS:
            if column not in {r["name"] for r in conn.execute(f"PRAGMA table_info({table})")}:
                with contextlib.suppress(sqlite3.OperationalError):  # another process added it in between
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    except sqlite3.Error:
        conn.close()  # a full disk: no open file is left behind on it
        raise
    return conn


@contextlib.contextmanager
def swap_lock(db: Path | str, exclusive: bool = False) -> Iterator[None]:
    """Shared: a connection to ``db`` may be open; exclusive: the file may be replaced (``publish``). Waits."""
    db = Path(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(db.parent / f".{db.name}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_index(db: Path | str) -> Iterator[sqlite3.Connection]:
    """A connection to the index ``db`` (made if missing), closed after the block; the file is not swapped under
    it meanwhile."""
    with swap_lock(db):
        conn = connect(db)
        try:
            yield conn
        finally:
            conn.close()


def index_run(db: Path | str, run_dir: Path | str) -> None:
    """(Re)index one run folder: its rows are replaced in one transaction, so a reader never sees half a run."""
    rows = read_run(Path(run_dir).resolve())
    with open_index(db) as conn:
        _insert(conn, Path(run_dir).resolve(), rows)


def is_indexed(db: Path | str, run_dir: Path | str) -> bool:
    """Whether ``run_dir`` has its row in the index ``db`` (a missing index holds nothing)."""
    if not Path(db).is_file():
        return False
    try:
        with open_index(db) as conn:
            key = run_key(Path(run_dir).resolve())
            return conn.execute("SELECT 1 FROM runs WHERE run_dir = ?", (key,)).fetchone() is not None
    except sqlite3.Error as exc:
        raise ValueError(
            f"{db}: not a readable results index ({exc}); rebuild it with `harness index {Path(db).parent}`"
        ) from None


def _insert(conn: sqlite3.Connection, run_dir: Path, rows: dict[str, Any]) -> None:
    try:
        conn.execute("BEGIN IMMEDIATE")
        key = run_key(run_dir)
        for table in TABLES:
            conn.execute(f"DELETE FROM {table} WHERE run_dir = ?", (key,))
        conn.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (key, *rows["run"]))
        conn.executemany("INSERT INTO metrics VALUES (?,?,?)", [(key, *m) for m in rows["metrics"]])
        conn.executemany("INSERT INTO curves VALUES (?,?,?,?)", [(key, *c) for c in rows["curves"]])
        conn.executemany(
            "INSERT INTO problems (run_dir, phase, problem_id, n, successes, scalars, outcomes, "
            "behaviours, held_out) VALUES (?,?,?,?,?,?,?,?,?)",
            [(key, *p) for p in rows["problems"]],
        )
        conn.executemany("INSERT INTO examples VALUES (?,?,?,?,?,?,?,?)", [(key, *e) for e in rows["examples"]])
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def rebuild(
    db: Path | str,
    run_dirs: Iterable[Path],
    skipped: list[tuple[Path, str]] | None = None,
    find: Callable[[], Iterable[Path]] | None = None,
) -> int:
    """Index every given run folder into a new file and rename it into place as ``db``; returns how many were
    indexed. With ``skipped``, a folder that cannot be read is added there as (folder, reason) instead of stopping
    the rebuild. Until the rename the old index is untouched. With ``find`` (the folders, found again), runs that
    completed or appeared during the rebuild are read again just before the rename (``catch_up``)."""
    tmp, count = build_index(Path(db), run_dirs, skipped)
    fault_point("index")
    caught: list[int] = []

    def last() -> None:
        caught.append(catch_up(tmp, find(), skipped))

    publish(tmp, Path(db), last if find else None)
    return count + sum(caught)


def build_index(db: Path, run_dirs: Iterable[Path], skipped: list[tuple[Path, str]] | None = None) -> tuple[Path, int]:
    """A new index of ``run_dirs`` in a private file beside ``db`` (to read before ``publish`` renames it), and
    how many runs it holds."""
    check_writable_folder(db.parent, "the results index's folder")
    db.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(db.parent, db.name)  # a killed report's or rebuild's private index; never a running one's
    tmp, count = new_temp_file(db.parent, db.name), 0
    try:
        conn = connect(tmp)
        try:
            for run_dir in run_dirs:
                try:
                    rows = read_run(Path(run_dir).resolve())
                except UnreadableRun as exc:
                    if skipped is None:
                        raise
                    skipped.append((run_dir, exc.reason))
                    continue
                _insert(conn, Path(run_dir).resolve(), rows)
                count += 1
            conn.execute("PRAGMA journal_mode=DELETE")  # folds the WAL in: the file alone is the whole index
        finally:
            conn.close()
    except BaseException:
        discard(tmp)
        raise
    return tmp, count


def publish(tmp: Path, db: Path, last: Callable[[], Any] | None = None) -> None:
    """Rename the index ``tmp`` into place as ``db``, while no connection to ``db`` is open; the old file's -wal
    and -shm (left only by a crash) go with it, or SQLite would apply them to the new file. ``last`` runs just
    before the rename, while no process can write ``db`` (a run indexing itself waits, then writes the new file)."""
    try:
        os.chmod(tmp, new_file_mode(db))
        with swap_lock(db, exclusive=True):
            if last is not None:
                last()
            os.replace(tmp, db)
            for suffix in ("-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    finally:
        discard(tmp)


def catch_up(tmp: Path, run_dirs: Iterable[Path], skipped: list[tuple[Path, str]] | None = None) -> int:
    """Read again into the new index ``tmp`` every folder whose manifest is not the one indexed there: a run that
    completed (and indexed itself into the old file, which the rename replaces) or appeared while the new index
    was built. Called under the swap lock, so no run is between indexing itself and the rename. Returns how many
    runs it added; a folder it can now read leaves ``skipped``."""
    conn = connect(tmp)
    added = 0
    try:
        indexed = {r["run_dir"]: r["manifest"] for r in conn.execute("SELECT run_dir, manifest FROM runs")}
        for run_dir in map(Path, run_dirs):
            key = run_key(run_dir.resolve())
            try:
                manifest = read_run_json(run_dir, "manifest.json", reading.MAX_MANIFEST_BYTES)
                if json.dumps(manifest, default=str) == indexed.get(key):
                    continue
                rows = read_run(run_dir.resolve())
            except ValueError:  # unreadable now: as the build found it (indexed, or skipped with its reason)
                continue
            _insert(conn, run_dir.resolve(), rows)
            added += key not in indexed
            if skipped is not None:
                skipped[:] = [(folder, why) for folder, why in skipped if Path(folder).resolve() != run_dir.resolve()]
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    return added


def discard(tmp: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def reindex(folder: Path | str, echo=print) -> int:
    """`harness index FOLDER`: rebuild FOLDER/results.sqlite from the run folders under it, saying which it
    skipped and why; returns how many it indexed."""
    check_path_length(Path(folder) / RESULTS_DB, "harness index")
    skipped: list[tuple[Path, str]] = []
    try:
        count = rebuild(
            Path(folder) / RESULTS_DB, find_runs([folder], skipped), skipped, find=lambda: find_runs([folder])
        )
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise ValueError(f"harness index: a path is too long for the system ({shown_name(exc.filename)})") from None
    for run_dir, why in sorted(skipped):
        echo(f"skipped {shown_name(run_dir)}: {shown_name(why)}")  # each one line, whatever the names hold
    return count


def find_runs(paths: Iterable[Path | str], skipped: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Run folders named directly or found one level below (a grid's or `--out`'s folder); sorted, deduplicated.
    Folders moved aside by a grid (``*.incomplete-*``) are not runs of the leaderboard. With ``skipped``, every
    folder passed over is added there as (folder, reason), so a report can say what it left out. A folder with a
    manifest.json of any kind (a link, a FIFO) is a run folder: reading it says what is wrong with it."""
    found: set[Path] = set()
    passed_over: dict[Path, str] = {}
    for path in map(Path, paths):
        check_path_length(path, "a runs folder")
        try:
            if not path.exists():
                raise FileNotFoundError(f"{shown_name(path)} does not exist")
            if not path.is_dir():
                raise ValueError(f"{shown_name(path)} is not a folder (of run folders)")
            candidates = [path] if exists_in_folder(path, "manifest.json") else sorted(path.iterdir())
        except OSError as exc:
            raise ValueError(f"{shown_name(path)}: cannot be read ({exc.strerror or exc})") from None
        for folder in candidates:
            try:
                if not folder.is_dir() or folder.name.startswith("."):  # files beside runs (results.sqlite), hidden
                    continue
                resolved = folder.resolve()
            except (OSError, RuntimeError):  # a link loop, a folder gone meanwhile: not a folder of runs
                continue
            if ".incomplete-" in folder.name:
                passed_over[resolved] = "moved aside by a grid rerun (*.incomplete-*)"
            elif not exists_in_folder(folder, "manifest.json"):
                passed_over[resolved] = "no manifest.json"
            else:
                found.add(resolved)
    if skipped is not None:
        skipped.extend(sorted(passed_over.items()))
    return sorted(found)


def run_key(run_dir: Path) -> str:
    """A run folder's key in the index (its ``run_dir``): its absolute path as text (``path_text``: bytes that
    are not UTF-8 escaped, which SQLite could not store)."""
    return path_text(run_dir)


class UnreadableRun(ValueError):
    """A run folder that cannot be indexed; ``reason`` says why (the file, and line), without the folder."""

    def __init__(self, run_dir: Path, reason: str) -> None:
        super().__init__(f"{run_dir}: {reason}")
        self.reason = reason


def read_run(run_dir: Path) -> dict[str, Any]:
    """Everything the index holds about one run, read from its folder by the reading rules
    (harness/store/reading.py: regular files inside the folder, bounded) and checked (harness/store/run_record.py)."""
    try:
        manifest = read_run_json(run_dir, "manifest.json", reading.MAX_MANIFEST_BYTES)
    except ValueError as exc:
        raise UnreadableRun(run_dir, f"unreadable manifest.json ({str(exc).removeprefix('manifest.json: ')})") from None
    try:
        check_manifest(manifest)
        has_metrics = exists_in_folder(run_dir, "metrics.json")
        metrics = read_run_json(run_dir, "metrics.json", reading.MAX_METRICS_BYTES) if has_metrics else {}
        check_metrics(metrics)
        # A last line cut by a crash mid-write was never whole: skipped. A bad line anywhere else skips the folder.
        samples = []
        lines = read_run_jsonl(run_dir, "samples.jsonl", reading.MAX_SAMPLES_BYTES, reading.MAX_LINE_BYTES)
        for line, record in lines if exists_in_folder(run_dir, "samples.jsonl") else ():
            check_sample(record, line)
            samples.append(_kept(record))
    except ValueError as exc:
        raise UnreadableRun(run_dir, str(exc)) from None
    cfg = manifest["config"]
    run = (
        path_text(run_dir.name),
        manifest.get("status"),
        cfg.get("task"),
        cfg.get("trainer"),
        cfg.get("searcher"),
        cfg.get("model"),
        manifest.get("seed", cfg.get("seed")),
        cfg.get("preset"),
        manifest.get("started"),
        manifest.get("seconds"),
        json.dumps(manifest, default=str),
    )
    scalars = [(k, float(v)) for k, v in metrics.items() if _number(v)]
    curves = [
        (k, step, float(v))
        for k, values in metrics.items()
        if isinstance(values, list)
        for step, v in enumerate(values)
        if _number(v)
    ]
    problems, examples = _read_samples(samples)
    return {"run": run, "metrics": scalars, "curves": curves, "problems": problems, "examples": examples}


# The fields of a samples.jsonl record the index reads (_read_samples); the rest (the prompt, the reference) is
# not kept in memory while the file is read.
KEPT_SAMPLE_KEYS = (
    "problem_id",
    "phase",
    "success",
    "scalar",
    "rollout_index",
    "call",
    "missing",
    "behaviours",
    "held_out",
    "text",
    "extracted",
    "rewards",
)


def _kept(record: dict[str, Any]) -> dict[str, Any]:
    """The fields the index reads, a text longer than a page shows cut (the index keeps only the best and worst
    one per phase, to show)."""
    kept = {k: record[k] for k in KEPT_SAMPLE_KEYS if k in record}
    if isinstance(kept.get("text"), str) and len(kept["text"]) > reading.SHOWN_TEXT:
        kept["text"] = shown(kept["text"])
    return kept


def _read_samples(records: list[dict]) -> tuple[list[tuple], list[tuple]]:
    """(phase, problem, n, successes, scalars, outcomes, behaviours, held_out) per problem and the best and worst
    candidate per phase.

    A scorer error (scalar None) is a failure for pass@k and takes the problem's lowest known value for best@k, as
    in best-of-k, so the numbers recomputed from here equal the ones the run printed. ``outcomes`` (JSON) lists,
    for each candidate in the order written, ``[rollout_index, success, call, missing]`` (None where the record has
    no such field; missing 0/1): the rollout lets a report score an M-answer rollout as one unit (set-level pass@k,
    where a missing answer is never a rollout's best), the model call at which it was made (evolve) gives each
    problem's solved@c. ``behaviours`` (JSON or None) holds, per behaviour a searcher scored (``--set
    searcher.behaviours``), [sum, count] over the problem's answers, so a report can pair behaviour scores by
    problem and check them against the run's ``behaviour/<name>``; ``held_out`` the same for the records'
    "held_out" scores (a behaviour's held-out evaluator), against ``heldout/<name>``."""
    by_problem: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in records:
        by_problem[(str(record.get("phase")), str(record.get("problem_id")))].append(record)
    problems, by_phase = [], defaultdict(list)
    for (phase, problem_id), records in by_problem.items():
        known = [r["scalar"] for r in records if _number(r.get("scalar"))]
        floor = min(known, default=0.0)
        values = [float(r["scalar"]) if _number(r.get("scalar")) else floor for r in records]
        outcomes = [
            [
                _whole(r.get("rollout_index")),
                int(bool(r.get("success"))),
                _whole(r.get("call")),
                int(bool(r.get("missing"))),
            ]
            for r in records
        ]
        problems.append(
            (
                phase,
                problem_id,
                len(records),
                sum(bool(r.get("success")) for r in records),
                json.dumps(values),
                json.dumps(outcomes),
                _behaviour_sums(records),
                _behaviour_sums(records, "held_out"),
            )
        )
        by_phase[phase].extend(r for r in records if _number(r.get("scalar")))
    examples = []
    for phase, records in by_phase.items():
        if not records:  # a phase whose candidates all lack a score has no best or worst
            continue
        for which, record in (
            ("best", max(records, key=lambda r: r["scalar"])),
            ("worst", min(records, key=lambda r: r["scalar"])),
        ):
            examples.append(
                (
                    phase,
                    which,
                    str(record.get("problem_id")),
                    record.get("text", ""),
                    shown(json.dumps(record.get("extracted"), default=str)),
                    float(record["scalar"]),
                    shown(json.dumps(record.get("rewards", {}), default=str)),
                )
            )
    return problems, examples


PROBLEM_COLUMNS = ("phase", "problem_id", "n", "successes", "scalars", "outcomes", "behaviours", "held_out")


def problem_records(samples: list[dict]) -> list[dict[str, Any]]:
    """The per-problem records the index's ``problems`` table would hold for these samples.jsonl records, as dicts
    keyed by its columns (what harness/report/data.py reads), in the order written: a run's own summary computes
    its intervals from exactly what a report will."""
    problems, _ = _read_samples(samples)
    return [dict(zip(PROBLEM_COLUMNS, p, strict=True)) for p in problems]


def _behaviour_sums(records: list[dict], key: str = "behaviours") -> str | None:
    """{name: [sum, count]} of the behaviour scores the records hold under ``key`` ("behaviours": the training
    scorers', "held_out": the held-out evaluators'), as JSON; None when they hold none."""
    sums: dict[str, list[float]] = {}
    for record in records:
        scores = record.get(key)
        for name, score in scores.items() if isinstance(scores, dict) else ():
            if _number(score):
                total = sums.setdefault(str(name), [0.0, 0])
                total[0] += float(score)
                total[1] += 1
    return json.dumps(sums) if sums else None


def _whole(value: Any) -> int | None:
    return int(value) if _number(value) and float(value).is_integer() else None


def _number(value: Any) -> bool:
    """A finite number a float holds: an int beyond 2^63 (which math.isfinite cannot even convert) is not one."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= MAX_INT
    return isinstance(value, float) and math.isfinite(value)
