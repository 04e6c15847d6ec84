"""`harness index` rebuilds results.sqlite in a new file and renames it into place. Before, a run that completed
while the rebuild was under way indexed itself into the old file, which the rename then replaced: the complete run
was missing from the index until the next rebuild. Now the rebuild reads again, just before the rename and while no
run can index itself, every folder that completed or appeared meanwhile. Real processes: the rebuild is held at its
``index`` pause point (folders read, new index not yet renamed) while a run completes beside it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tiny_runs import CEILING, EVAL, harness, harness_env


def test_a_run_completed_during_a_rebuild_is_in_the_index_after_it(tmp_path, tiny_policy_spec):
    runs = tmp_path / "runs"
    first = harness([*EVAL, "--out", str(runs)])
    assert first.returncode == 0, first.stderr[-2000:]
    pause = tmp_path / "paused"
    rebuild = subprocess.Popen(
        [sys.executable, "-m", "harness", "index", str(runs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=harness_env(HARNESS_PAUSE=f"index:1:{pause}"),
    )
    try:
        deadline = time.monotonic() + CEILING
        while not pause.exists():
            assert rebuild.poll() is None, rebuild.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the rebuild never reached its pause point"
            time.sleep(0.05)
        second = harness([*EVAL, "--seed", "1", "--out", str(runs)])  # completes, and indexes itself
        assert second.returncode == 0, second.stderr[-2000:]
    finally:
        pause.unlink(missing_ok=True)
    out, err = rebuild.communicate(timeout=CEILING)
    assert rebuild.returncode == 0, err[-2000:]
    assert "indexed 2 runs" in out
    conn = sqlite3.connect(runs / "results.sqlite")
    indexed = {Path(r[0]).name: r[1] for r in conn.execute("SELECT run_dir, status FROM runs")}
    conn.close()
    folders = {p.name for p in runs.iterdir() if p.is_dir()}
    assert len(folders) == 2 and indexed == dict.fromkeys(folders, "complete")
