"""A report killed between indexing and renaming its index into place left its private index (and SQLite's -wal
and -shm) in --out for good. Now the next report removes a dead report's files and leaves a running one's alone.
Real processes: each report is held at its ``report`` pause point (after indexing, before rendering) while the
test kills it or starts another."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_runs import CEILING, EVAL, harness, harness_env, only_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_policy_spec) -> Path:
    out = tmp_path_factory.mktemp("good")
    done = harness([*EVAL, "--out", str(out / "runs")])
    assert done.returncode == 0, done.stderr[-2000:]
    shutil.copytree(only_run(out / "runs"), out / "runs" / "good-1")
    return out / "runs"


def _held_report(runs: Path, out: Path, pause: Path) -> subprocess.Popen:
    """`harness report` held after indexing: its private index is in ``out``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "report", str(runs), "--out", str(out)],
        env=harness_env(HARNESS_PAUSE=f"report:1:{pause}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + CEILING
    while not pause.exists():
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "never reached its pause point"
        time.sleep(0.05)
    return process


def _private(out: Path, pid: int) -> set[str]:
    return {p.name for p in out.iterdir() if p.name.startswith(f".results.sqlite.{pid}-")}


def test_the_next_report_removes_a_killed_reports_index_but_not_a_running_ones(runs, tmp_path):
    out = tmp_path / "report"
    killed = _held_report(runs, out, tmp_path / "paused-1")
    left = _private(out, killed.pid)
    assert any(name.endswith(".tmp") for name in left), sorted(p.name for p in out.iterdir())
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=CEILING)
    assert _private(out, killed.pid) == left  # nothing cleaned up after a SIGKILL

    running = _held_report(runs, out, tmp_path / "paused-2")
    try:
        assert _private(out, killed.pid) == set()  # removed when the next report started
        mine = _private(out, running.pid)
        assert mine
        third = harness(["report", str(runs), "--out", str(out)])
        assert third.returncode == 0, third.stderr[-2000:]
        assert _private(out, running.pid) == mine  # a live report's index is left alone
    finally:
        (tmp_path / "paused-2").unlink(missing_ok=True)
    _, err = running.communicate(timeout=CEILING)
    assert running.returncode == 0, err[-2000:]
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]
    rows = json.loads((out / "leaderboard.json").read_text())["rows"]
    assert {row["run"] for row in rows} == {only_run_name(runs), "good-1"}


def only_run_name(runs: Path) -> str:
    (name,) = [p.name for p in runs.iterdir() if p.is_dir() and p.name != "good-1"]
    return name
