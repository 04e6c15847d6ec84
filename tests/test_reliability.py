"""The reliability claims of docs/design/reliability.md, as an adversarial user would test them, one test
each. Tiny model, `--threads 1`, real processes: a second writer runs while the first is held at an exact point
(``HARNESS_PAUSE``, harness/faults.py), so nothing waits on a guessed sleep; the time limits are ceilings against
hangs only.

The sections below: one writer per run folder and per grid cell; a resume verifies what it resumes, and nothing
says complete before every file is whole; `harness index` / `harness report` skip a bad folder and keep the old
index whole; SIGTERM, --threads on resume, loggers after a resume, a complete run missing from the index. (One-line
refusals up front: tests/test_bad_input.py; bounded batching: tests/test_engine.py.)
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from tiny_runs import CEILING, RUN, harness_env, only_run
from tiny_runs import harness as _harness
from tiny_runs import outcome as _outcome


def _start(args: list[str], **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        env=harness_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _held(process: subprocess.Popen, pause_file: Path) -> None:
    """Wait until ``process`` stands at its pause point (it wrote ``pause_file``)."""
    deadline = time.monotonic() + CEILING
    while not pause_file.exists():
        assert process.poll() is None, f"ended before its pause point: {process.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, "never reached its pause point"
        time.sleep(0.05)
    assert pause_file.read_text().strip() == str(process.pid)


def _finish(process: subprocess.Popen) -> tuple[int, str]:
    _, err = process.communicate(timeout=CEILING)
    return process.returncode, err


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, tiny_policy_spec):
    """An uninterrupted run: its folder, its outcome, and how often it reaches each fault point."""
    out = tmp_path_factory.mktemp("baseline")
    log = out / "points.log"
    done = _harness([*RUN, "--out", str(out / "runs")], HARNESS_FAULT_LOG=str(log))
    assert done.returncode == 0, done.stderr[-2000:]
    folder = only_run(out / "runs")
    return folder, _outcome(folder), Counter(log.read_text().split())


@pytest.fixture(scope="module")
def killed(tmp_path_factory, baseline):
    """A run SIGKILLed at its second optimizer step: a checkpoint (after step 0) and lines written after it."""
    out = tmp_path_factory.mktemp("killed")
    done = _harness([*RUN, "--out", str(out)], HARNESS_FAULT="optimizer_step:2")
    assert done.returncode == -signal.SIGKILL
    return only_run(out)


def _copy(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / "runs" / folder.name))


# -- two writers, one folder ------------------------------------------------------------------------------------


def test_a_second_writer_of_a_running_folder_is_refused_naming_the_first(tmp_path, baseline):
    """`--resume RUN` while RUN's process still runs: before, both exited 0 and the folder held 256 samples instead
    of 160. Now the second is refused in one line naming the first's pid, and the first ends as if alone."""
    _, expected, _ = baseline
    pause = tmp_path / "paused"
    first = _start([*RUN, "--out", str(tmp_path / "runs")], HARNESS_PAUSE=f"generate:3:{pause}")
    try:
        _held(first, pause)
        folder = only_run(tmp_path / "runs")
        second = _harness(["run", "--resume", str(folder), "--threads", "1"])
        assert second.returncode == 2 and len(_lines(second.stderr)) == 1, second.stderr
        assert f"pid {first.pid}" in second.stderr and str(folder) in second.stderr
    finally:
        pause.unlink(missing_ok=True)
    code, err = _finish(first)
    assert code == 0, err[-2000:]
    assert _outcome(folder) == expected


def test_a_grid_started_twice_shares_its_cells_and_both_exit_0(tmp_path, baseline):
    """Rerunning a grid that is still running: at first the second moved the live cell's folder aside and that cell
    died (`No such file ... samples.jsonl`); then it refused the cell and both exited 2 ("1 of 2 grid cells
    failed") though every cell ended complete. Now the second leaves the running cell alone, runs the other one,
    waits for the first's, and counts it done: both exit 0, and each cell ran once, where it was started."""
    experiment = tmp_path / "grid.toml"
    experiment.write_text(f'out = "{tmp_path / "grid"}"\nseed = [0, 1]\n')
    grid = [*RUN, "--config", str(experiment)]
    pause = tmp_path / "paused"
    first = _start(grid, HARNESS_PAUSE=f"generate:3:{pause}")
    try:
        _held(first, pause)
        log = tmp_path / "second.log"
        with open(log, "w") as out:
            second = subprocess.Popen(
                [sys.executable, "-m", "harness", *grid],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=harness_env(PYTHONUNBUFFERED="1"),
                text=True,
            )
        deadline = time.monotonic() + CEILING
        while f"waiting for pid {first.pid}" not in log.read_text():  # it ran the other cell, and now waits
            assert second.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the second grid never came to wait for the first's cell"
            time.sleep(0.1)
    finally:
        pause.unlink(missing_ok=True)
    code, err = _finish(first)
    assert code == 0, err[-2000:]
    assert second.wait(timeout=CEILING) == 0, log.read_text()[-2000:]
    said = log.read_text()
    assert f"running in another process (pid {first.pid})" in said and f"complete (run by pid {first.pid})" in said
    assert said.count(": running\n") == 1  # the second ran one cell; the first ran the other and skipped this one
    cells = [p for p in (tmp_path / "grid").iterdir() if p.is_dir()]
    assert len(cells) == 2 and not [c for c in cells if ".incomplete-" in c.name]
    assert all(json.loads((c / "manifest.json").read_text())["status"] == "complete" for c in cells)


def test_a_dead_writers_lock_never_blocks_a_resume(killed, tmp_path, baseline):
    """The lock file stays behind a SIGKILLed writer, naming it; the kernel released the lock itself."""
    folder = _copy(killed, tmp_path)
    assert (folder / ".lock").read_text().strip().isdigit()
    done = _harness(["run", "--resume", str(folder)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert _outcome(folder) == baseline[1]


# -- a resume verifies what it resumes ---------------------------------------------------------------------------


def _recorded(folder: Path, name: str) -> int:
    return json.loads((folder / "checkpoint" / "state.json").read_text())["store"]["files"][name]


def _damage_samples_cut_short(folder: Path) -> str:
    with open(folder / "samples.jsonl", "r+b") as f:
        f.truncate(_recorded(folder, "samples.jsonl") // 2)
    return "samples.jsonl has"


def _damage_steps_deleted(folder: Path) -> str:
    (folder / "steps.jsonl").unlink()
    return "steps.jsonl is missing"


def _damage_samples_line_broken(folder: Path) -> str:
    data = (folder / "samples.jsonl").read_bytes()
    second = data.index(b"\n") + 1
    (folder / "samples.jsonl").write_bytes(data[:second] + b"{oops" + data[second + 5 :])
    return "samples.jsonl line 2: not valid JSON"


def _damage_checkpoint_weights_cut(folder: Path) -> str:
    with open(folder / "checkpoint" / "model.pt", "r+b") as f:
        f.truncate(1000)
    return "the checkpoint's model.pt has 1000 bytes"


def _damage_checkpoint_weights_flipped(folder: Path) -> str:
    """4,096 bytes inverted inside model.pt, its size unchanged: resumed silently before, into NaN gradients."""
    path = folder / "checkpoint" / "model.pt"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(b ^ 0xFF for b in data[middle : middle + 4096])
    path.write_bytes(bytes(data))
    return "the checkpoint's model.pt is not the file it wrote"


@pytest.mark.parametrize(
    "damage",
    [
        _damage_samples_cut_short,
        _damage_steps_deleted,
        _damage_samples_line_broken,
        _damage_checkpoint_weights_cut,
        _damage_checkpoint_weights_flipped,
    ],
    ids=lambda f: f.__name__[len("_damage_") :],
)
def test_resume_refuses_a_folder_that_no_longer_matches_its_checkpoint(killed, tmp_path, damage):
    """Before: samples.jsonl cut shorter than the checkpoint recorded was cut back further and the run marked
    complete with 54 of 96 training samples; steps.jsonl deleted gave a complete run with 3 of 6 step lines. Now:
    one line naming the file, exit 2, before the model loads, and the folder is left as it was."""
    folder = _copy(killed, tmp_path)
    expected = damage(folder)

    def sizes():
        return {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file() and p.name != ".lock"}

    before = sizes()
    done = _harness(["run", "--resume", str(folder)])
    assert done.returncode == 2 and len(_lines(done.stderr)) == 1, done.stderr
    assert expected in done.stderr and "loading model" not in done.stdout, done.stderr
    assert sizes() == before
    assert json.loads((folder / "manifest.json").read_text())["status"] == "running"


def test_nothing_is_complete_until_every_file_is_whole(tmp_path, baseline):
    """A line broken while the run goes on (here by hand, during the last evaluation): before, the manifest said
    complete and then a bare `Expecting value` ended the process. Now the run ends failed, naming file and line."""
    pause = tmp_path / "paused"
    last_generate = baseline[2]["generate"]
    process = _start([*RUN, "--out", str(tmp_path / "runs")], HARNESS_PAUSE=f"generate:{last_generate}:{pause}")
    try:
        _held(process, pause)
        folder = only_run(tmp_path / "runs")
        lines = (folder / "samples.jsonl").read_text().splitlines(keepends=True)
        (folder / "samples.jsonl").write_text("".join([lines[0], "{broken\n", *lines[1:]]))
    finally:
        pause.unlink(missing_ok=True)
    code, err = _finish(process)
    assert code == 1 and "samples.jsonl line 2: not valid JSON" in _lines(err)[-1], err[-2000:]
    assert json.loads((folder / "manifest.json").read_text())["status"] == "failed"


# -- report and index survive a bad folder ---------------------------------------------------------------------


def _runs_with_bad_ones(baseline, tmp_path: Path) -> Path:
    """Three good runs (copies of the baseline) and two bad ones: metrics.json with a non-UTF-8 byte, samples.jsonl
    with a broken line in a complete run."""
    runs = tmp_path / "runs"
    for i in range(3):
        shutil.copytree(baseline[0], runs / f"good-{i}")
    for name in ("bad-metrics", "bad-samples"):
        shutil.copytree(baseline[0], runs / name)
    (runs / "bad-metrics" / "metrics.json").write_bytes(b'{"before/pass@1": 0.\xb9}')
    samples = runs / "bad-samples" / "samples.jsonl"
    samples.write_text("{}\n" + "not json\n" + samples.read_text())
    return runs


def test_index_and_report_skip_a_bad_folder_naming_it_and_why(baseline, tmp_path):
    """Before: one bad folder ended `harness report` and `harness index` with "'utf-8' codec can't decode byte
    0xb9" or "Expecting value: line 1 column 1", naming no file, and the index was left with no tables."""
    runs = _runs_with_bad_ones(baseline, tmp_path)
    done = _harness(["index", str(runs)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "indexed 3 runs" in done.stdout
    assert "bad-metrics: metrics.json: not UTF-8" in done.stdout
    assert "bad-samples: samples.jsonl line 2: not valid JSON" in done.stdout
    conn = sqlite3.connect(runs / "results.sqlite")
    assert sorted(Path(r[0]).name for r in conn.execute("SELECT run_dir FROM runs")) == ["good-0", "good-1", "good-2"]
    conn.close()
    report = _harness(["report", str(runs), "--out", str(tmp_path / "report")])
    assert report.returncode == 0, report.stderr[-2000:]
    assert "bad-metrics: metrics.json: not UTF-8" in report.stdout
    assert "bad-samples: samples.jsonl line 2: not valid JSON" in report.stdout
    rows = json.loads((tmp_path / "report" / "leaderboard.json").read_text())["rows"]
    assert {row["run"] for row in rows} == {"good-0", "good-1", "good-2"}


def test_a_failed_rebuild_leaves_the_old_index_whole(baseline, tmp_path, monkeypatch):
    from harness.store import results_db

    runs = tmp_path / "runs"
    for i in range(3):
        shutil.copytree(baseline[0], runs / f"good-{i}")
    assert results_db.reindex(runs, echo=lambda _: None) == 3
    real = results_db.read_run
    monkeypatch.setattr(results_db, "read_run", lambda run_dir: real(run_dir) if run_dir.name != "good-1" else 1 / 0)
    with pytest.raises(ZeroDivisionError):
        results_db.reindex(runs, echo=lambda _: None)
    conn = sqlite3.connect(runs / "results.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
    conn.close()
    assert [p.name for p in runs.iterdir() if p.name.endswith(".tmp")] == []


def test_a_report_renders_its_own_index_while_another_rewrites_the_out(baseline, tmp_path):
    """Two reports on one --out: the first is held after indexing its 3 runs while a second writes a report of
    1 run there; the first then still reports its 3 (it reads the index it built, renamed into place only at the
    end), and every output it leaves is whole. (Before, the index was shared and deleted under a reader.)"""
    runs = tmp_path / "runs"
    for i in range(3):
        shutil.copytree(baseline[0], runs / f"good-{i}")
    out = tmp_path / "report"
    pause = tmp_path / "paused"
    first = _start(["report", str(runs), "--out", str(out)], HARNESS_PAUSE=f"report:1:{pause}")
    try:
        _held(first, pause)
        second = _harness(["report", str(runs / "good-0"), "--out", str(out)])
        assert second.returncode == 0, second.stderr[-2000:]
    finally:
        pause.unlink(missing_ok=True)
    code, err = _finish(first)
    assert code == 0, err[-2000:]
    rows = json.loads((out / "leaderboard.json").read_text())["rows"]
    assert {row["run"] for row in rows} == {"good-0", "good-1", "good-2"}
    conn = sqlite3.connect(out / "results.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
    conn.close()
    assert not [p for p in out.rglob("*.tmp")]


# -- signals, threads, loggers, the index --------------------------------------------------------------------------


def test_sigterm_ends_a_run_like_an_interrupt(tmp_path):
    """Before: SIGTERM ended the process on the spot, no message, the manifest still "running"."""
    pause = tmp_path / "paused"
    process = _start([*RUN, "--out", str(tmp_path / "runs")], HARNESS_PAUSE=f"generate:3:{pause}")
    _held(process, pause)
    process.send_signal(signal.SIGTERM)
    code, err = _finish(process)
    said = [line for line in err.splitlines() if line.startswith("harness:")]  # progress bars aside
    folder = only_run(tmp_path / "runs")
    assert code == 130 and said == [
        f"harness: error: interrupted; everything written so far is kept in {folder}; resume it with "
        f"`harness run --resume {folder}`"
    ], err[-2000:]
    assert json.loads((folder / "manifest.json").read_text())["status"] == "interrupted"


def test_sigterm_during_a_checkpoint_write_is_an_interrupt_after_the_write(tmp_path, baseline):
    """Before: a SIGTERM that landed inside torch.save ended the run "failed" as a plugin failure (RuntimeError
    "unexpected pos" from the C++ writer), exit 2. Now a signal during the write waits for it: the checkpoint is
    published whole, then the run ends "interrupted", exit 130, and resumes to the uninterrupted run's results."""
    pause = tmp_path / "paused"
    process = _start([*RUN, "--out", str(tmp_path / "runs")], HARNESS_PAUSE=f"checkpoint:2:{pause}")
    try:
        _held(process, pause)  # inside the second checkpoint's write: files written, not yet published
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
    finally:
        pause.unlink(missing_ok=True)
    code, err = _finish(process)
    assert code == 130 and "interrupted" in _lines(err)[-1], err[-2000:]
    folder = only_run(tmp_path / "runs")
    assert json.loads((folder / "manifest.json").read_text())["status"] == "interrupted"
    assert json.loads((folder / "checkpoint" / "state.json").read_text())["step"] == 1  # the write finished
    assert _harness(["run", "--resume", str(folder)]).returncode == 0
    assert _outcome(folder) == baseline[1]


def test_resume_keeps_the_recorded_threads(killed, tmp_path):
    """Before: `--resume RUN --threads 2` of a run made with 1 thread was accepted, changed the results and
    overwrote the recorded count."""
    folder = _copy(killed, tmp_path)
    done = _harness(["run", "--resume", str(folder), "--threads", "2"])
    assert done.returncode == 2 and len(_lines(done.stderr)) == 1 and "--threads 1" in done.stderr, done.stderr
    assert json.loads((folder / "manifest.json").read_text())["config"]["threads"] == 1


def _tensorboard_points(folder: Path) -> Counter:
    """(tag, step) -> how many times TensorBoard received it, over every event file of the run."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    points: Counter = Counter()
    for path in sorted((folder / "tensorboard").glob("events.*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                points[(value.tag, event.step)] += 1
    return points


def test_loggers_get_no_duplicate_points_after_a_resume(tmp_path):
    """Before: the steps redone after a resume reached TensorBoard (and MLflow) a second time."""
    pytest.importorskip("tensorboard")
    logged = [*RUN, "--log", "tensorboard", "--checkpoint-every", "0"]  # no checkpoint: training is redone whole
    killed = _harness([*logged, "--out", str(tmp_path / "runs")], HARNESS_FAULT="optimizer_step:3")
    assert killed.returncode == -signal.SIGKILL
    folder = only_run(tmp_path / "runs")
    assert _tensorboard_points(folder)[("train/loss", 1)] == 1  # two steps logged before the kill
    done = _harness(["run", "--resume", str(folder)])
    assert done.returncode == 0, done.stderr[-2000:]
    points = _tensorboard_points(folder)
    assert {step for tag, step in points if tag == "train/loss"} == {0, 1, 2}
    assert [point for point, count in points.items() if count > 1] == []


def test_a_complete_run_missing_from_the_index_is_indexed_on_resume(baseline, tmp_path):
    """A run killed just after writing "complete": before, `--resume` said "already complete" and it stayed out of
    results.sqlite for good."""
    folder = _copy(baseline[0], tmp_path)  # complete, and no results.sqlite beside it
    done = _harness(["run", "--resume", str(folder)])
    assert done.returncode == 0 and "indexed it" in done.stdout, done.stderr
    conn = sqlite3.connect(folder.parent / "results.sqlite")
    assert [Path(r[0]).name for r in conn.execute("SELECT run_dir FROM runs")] == [folder.name]
    conn.close()
    again = _harness(["run", "--resume", str(folder)])
    assert again.returncode == 2 and "already complete" in again.stderr
