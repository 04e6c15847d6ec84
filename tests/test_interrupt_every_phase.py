"""Every moment of a run is interruptible and resumable (docs/design/reliability.md): SIGTERM through a real process
at each phase boundary and inside each phase (the first evaluation, the format warm-up, training, the last
evaluation, the report step) ends the run `interrupted`, exit 130, within seconds, and `--resume` then ends with the
results of a run never interrupted (tests/tiny_runs.py's comparer). A reward function that hangs in evolve's scoring
threads, or in the main thread where no signal reaches it, does not keep the process alive; a file-size limit
(RLIMIT_FSIZE) hit while samples.jsonl is written is one line, and the folder resumes once the limit is lifted.

No sleeps to guess at: a run is held where it is to be interrupted by a fault point (``HARNESS_PAUSE``,
harness/faults.py: a decoding step, a phase's start, every phase done, a JSON write) or by a reward function that
writes a file when it starts to hang; the test waits for that file, then signals."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tiny_runs import CEILING, harness, harness_env, only_run, tiny_argv
from tiny_runs import outcome as _outcome

STOPS_WITHIN = 20.0  # seconds from the signal to the process's end: "a few", with room for a busy machine

# The tests' reward functions: harmless until a test creates the file its variable names.
REWARDS = '''
import os, signal, threading, time


def odd(prompt, completion, reference):
    """The warm-up's format component: about half of tiny-random's answers earn it, so the warm-up takes SFT steps."""
    return float(len(completion) % 2)


def stall(prompt, completion, reference):
    """Hangs in evolve's scoring threads (never the main thread) while $STALL exists."""
    flag = os.environ.get("STALL", "")
    if flag and os.path.exists(flag) and threading.current_thread() is not threading.main_thread():
        open(flag + ".reached", "w").close()
        time.sleep(1000)
    return float(len(completion) % 3) / 2


def deaf(prompt, completion, reference):
    """While $DEAF exists: a call in the main thread that no signal interrupts (as a C library blocked in a call that
    retries on EINTR), the signals left to the process's other threads. Not on the empty answer the run's plan
    checks every reward function with (before its folder exists)."""
    flag = os.environ.get("DEAF", "")
    if flag and os.path.exists(flag) and completion:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        open(flag + ".reached", "w").close()
        time.sleep(1000)
    return float(len(completion) % 2)
'''

PROMPTS = [f"Say something about the number {i}." for i in range(12)]
# A training run through every phase: the first evaluation, a format warm-up that takes SFT steps (the prompts task
# and `odd` as its format), 2 GRPO steps with a checkpoint after each, the last evaluation, the report step.
WARMUP = {
    "trainer.warmup_steps": 2,
    "trainer.warmup_samples": 2,
    "trainer.warmup_problems": 2,
    "trainer.warmup_check_problems": 2,
    "trainer.warmup_check_every": 1,
    "trainer.warmup_format": "odd",
    "trainer.warmup_target_rate": 1.0,
}
# Evolve on math, its candidates scored by 2 threads, `stall` a component of their reward.
EVOLVE_SIZES = {"searcher.seeds": 2, "searcher.children": 2, "searcher.calls": 4, "searcher.max_new_tokens": 4}
EVOLVE = tiny_argv("none", searcher="evolve", reward="rewards:stall", sets=EVOLVE_SIZES)
# An evaluation whose samples.jsonl (96 samples, ~40 KB) outgrows every other file of its folder (manifest ~7 KB).
EVAL = tiny_argv("none", limit=12, reward="rewards:deaf", sets={"searcher.n": 8})
FILE_SIZE_LIMIT = 20_000  # bytes: reached by samples.jsonl half-way through the evaluation


def training_argv(data: Path) -> list[str]:
    sets = {"task.data": str(data), **WARMUP}
    return tiny_argv(task="prompts", reward="rewards:odd", steps=2, checkpoint_every=1, sets=sets)


# Where the training run is interrupted, one after another: each kill is in the process that resumed the one before,
# so its counts start there (a resumed process skips the phases done: its first decoding steps are the phase redone).
# Two chains, run side by side: (what, HARNESS_PAUSE's POINT:N, the phases done after the kill).
FIRST_HALF = [
    ("inside the first evaluation", "generate:2", []),
    ("between the first evaluation and training", "train_start:1", ["before"]),
    # decoding steps 1-4: the rate checked, 5-8: the targets sampled, then an SFT step, then 9-12: the rate again
    ("inside the format warm-up, after its first SFT step", "generate:10", ["before"]),
    # the warm-up redone, GRPO's step 1 and its checkpoint, then step 2 between backward and the optimizer's step
    ("inside training, after its first checkpoint", "optimizer_step:2", ["before"]),
]
SECOND_HALF = [
    ("between training and the last evaluation", "after_start:1", ["before", "train"]),
    ("inside the last evaluation", "generate:2", ["before", "train"]),
    ("after every phase, before the report step", "phases_done:1", ["before", "train", "after"]),
    # JSON writes of a resume with every phase done: metrics.json cut back, the manifest, then "complete"'s
    ("inside the report step, writing the complete manifest", "json_write:3", ["before", "train", "after"]),
]


@pytest.fixture(scope="module")
def plugins_dir(tmp_path_factory) -> Path:
    """The reward module and the prompts file every run here uses (the module found through PYTHONPATH)."""
    folder = tmp_path_factory.mktemp("plugins")
    (folder / "rewards.py").write_text(REWARDS)
    (folder / "prompts.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    return folder


@pytest.fixture(scope="module")
def runs(plugins_dir, tmp_path_factory, tiny_policy_spec):
    """Every run of this file, started at once, three at a time (each is one thread: --threads 1): the interrupted
    ones and the uninterrupted ones they must end equal to. ``runs[name].result()`` waits for one: what it returns,
    or the assertion that failed in it."""
    out = tmp_path_factory.mktemp("runs")
    data = plugins_dir / "prompts.jsonl"
    work = {  # the longest first
        "first half": lambda: _interrupted_in_turn(plugins_dir, training_argv(data), FIRST_HALF, out / "first"),
        "second half": lambda: _interrupted_in_turn(plugins_dir, training_argv(data), SECOND_HALF, out / "second"),
        "evolve hangs": lambda: _hung_in_scoring_threads(plugins_dir, out / "hang"),
        "deaf": lambda: _deaf_main_thread(plugins_dir, out / "deaf"),
        "file size": lambda: _file_size_limit(plugins_dir, out / "fsize"),
        "training": lambda: _uninterrupted(plugins_dir, training_argv(data), out / "training"),
        "evolve": lambda: _uninterrupted(plugins_dir, EVOLVE, out / "evolve"),
        "eval": lambda: _uninterrupted(plugins_dir, EVAL, out / "eval"),
    }
    pool = ThreadPoolExecutor(3)
    yield {name: pool.submit(run) for name, run in work.items()}
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.runs
def test_a_run_interrupted_at_every_phase_resumes_to_the_uninterrupted_results(runs):
    """Before: SIGTERM during the first evaluation left a folder `--resume` refused, exit 2 ("cannot resume ...:
    manifest.json no longer matches the start: torch '2...' (recorded None), ..."): the start recorded no versions
    and every package counted as changed; so did any kill before a phase was done. A SIGTERM in the report step,
    before the manifest said complete, left it "running"."""
    expected = runs["training"].result()
    for half in ("first half", "second half"):
        got = runs[half].result()
        for part in ("metrics", "samples.jsonl", "steps.jsonl"):
            assert got[part] == expected[part], f"{half}: {part} differs from the uninterrupted run's"


@pytest.mark.runs
def test_sigterm_while_a_reward_function_hangs_in_evolves_scoring_threads(runs):
    """Before: the run was still going 30 s after SIGTERM, and after a second one: the thread pool's shutdown, then
    Python's exit, waited for the hung calls. Now the calls are abandoned with one line, the run ends interrupted."""
    assert runs["evolve hangs"].result() == runs["evolve"].result()


@pytest.mark.runs
def test_a_main_thread_that_never_returns_is_ended_after_a_second_sigterm(runs):
    """A call in the main thread that no signal interrupts (here a reward function with SIGTERM blocked in its
    thread: the signal goes to another thread, Python's handler never runs): before, nothing but SIGKILL ended the
    run. Now the watchdog (harness/interrupts.py) ends it 2 s after a second SIGTERM, in one line, the manifest
    "interrupted" (a folder left so resumes as a killed run's does: tests/test_faults.py)."""
    assert runs["deaf"].result() < 10


@pytest.mark.runs
def test_a_file_size_limit_is_one_line_and_the_folder_resumes_once_lifted(runs):
    """RLIMIT_FSIZE reached while samples.jsonl is written, half-way through the only phase. Before: the line said
    "no space left", and `--resume` then refused the folder (exit 2, "manifest.json no longer matches the start").
    Now the write fails with EFBIG (SIGXFSZ ignored), the run ends failed in one line naming the file and the limit,
    and resumes once the limit is lifted."""
    assert runs["file size"].result() == runs["eval"].result()


def test_local_threads_keep_input_order_and_raise_the_first_failure_by_position():
    from harness.executors import LocalExecutor

    executor = LocalExecutor(3, "owner")
    assert executor.map(lambda shared, x: shared + x, 10, range(7)) == list(range(10, 17))

    def check(shared, x):
        if x in (2, 4):
            time.sleep(0.05 if x == 2 else 0)
            raise ValueError(f"item {x}")
        return x

    with pytest.raises(ValueError, match="item 2"):
        executor.map(check, None, range(6))


def test_an_interrupt_abandons_a_call_that_never_returns_with_one_line(capsys):
    """Before: a thread pool's map, interrupted, waited for its running calls on the way out (the `with` block's
    shutdown), so a hung one held the process; now the caller gets the interrupt at once, and a line."""
    import threading

    from harness.executors import LocalExecutor

    release, started = threading.Event(), threading.Event()

    def hang(shared, x):
        if x == 0:
            started.set()
            release.wait(60)  # never set in time: a call that does not return
        return x

    def interrupt() -> None:  # a signal to the main thread, whose handler raises KeyboardInterrupt, as ^C's does
        started.wait(10)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)  # not SIGINT: no watchdog counts it

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    saved = signal.signal(signal.SIGUSR1, raise_interrupt)
    threading.Thread(target=interrupt, daemon=True).start()
    began = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            LocalExecutor(2, "evolve").map(hang, None, range(4))
        assert time.monotonic() - began < 10
    finally:
        release.set()
        signal.signal(signal.SIGUSR1, saved)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evolve: interrupted while ") and "had not returned" in err[0], err


# -- the runs ------------------------------------------------------------------------------------------------------


def _uninterrupted(plugins_dir: Path, argv: list[str], out: Path) -> dict:
    done = harness([*argv, "--out", str(out)], **_env(plugins_dir))
    assert done.returncode == 0, f"an uninterrupted run: {done.stderr[-2000:]}"
    return outcome(only_run(out))


def _interrupted_in_turn(plugins_dir: Path, argv: list[str], kills: list, out: Path) -> dict:
    """The run started, held and SIGTERMed at each of ``kills`` in turn (each in the resume of the one before),
    then resumed to its end: its outcome."""
    folder = None
    for i, (where, point, done) in enumerate(kills):
        pause, log = out.parent / f"{out.name}-paused-{i}", out.parent / f"{out.name}-points-{i}.log"
        env = _env(plugins_dir, HARNESS_PAUSE=f"{point}:{pause}", HARNESS_FAULT_LOG=str(log))
        with _running([*argv, "--out", str(out)] if folder is None else ["run", "--resume", str(folder)], env) as p:
            _reached(p, pause, where)
            reached = log.read_text().split()  # held where it was meant to be: the report step's after phases_done
            assert reached[-1] == point.split(":")[0], f"{where}: held at {reached[-1]}"
            assert ("phases_done" in reached[:-1]) == (point == "json_write:3"), f"{where}: {reached}"
            err, took = _interrupt(p, where)
        folder = folder or only_run(out)
        assert _said(err) == [
            f"harness: error: interrupted; everything written so far is kept in {folder}; resume it with "
            f"`harness run --resume {folder}`"
        ], f"{where}: {err[-2000:]}"
        manifest = _manifest(folder)
        assert manifest["status"] == "interrupted", f"{where}: the manifest says {manifest['status']}"
        assert manifest["phases_done"] == done, f"{where}: {manifest['phases_done']} done"
        print(f"{where} ({point}): interrupted in {took:.1f} s")
    assert folder is not None
    _resume(folder, _env(plugins_dir))
    assert len(_manifest(folder)["resumed"]) == len(kills)
    return outcome(folder)


def _hung_in_reward(
    plugins_dir: Path, argv: list[str], out: Path, variable: str, where: str, signals: int = 1
) -> tuple[str, float, Path, dict[str, str]]:
    """The run started with the file $VARIABLE names in place, SIGTERMed (``signals`` times) once its reward
    function hangs: its stderr, how long it took to end, the file and the run's environment."""
    flag = out.parent / f"{out.name}-{variable.lower()}"
    flag.touch()
    env = _env(plugins_dir, **{variable: str(flag)})
    with _running([*argv, "--out", str(out)], env) as process:
        _reached(process, Path(f"{flag}.reached"), where)
        err, took = _interrupt(process, where, signals=signals)
    return err, took, flag, env


def _hung_in_scoring_threads(plugins_dir: Path, out: Path) -> dict:
    where = "a reward function hanging in a scoring thread"
    err, took, flag, env = _hung_in_reward(plugins_dir, EVOLVE, out, "STALL", where)
    notes = [line for line in err.splitlines() if line.startswith("evolve: interrupted while")]
    assert len(notes) == 1 and "left running" in notes[0], err[-2000:]
    said = _said(err)
    assert len(said) == 1 and "interrupted; everything written so far is kept" in said[0], err[-2000:]
    folder = only_run(out)
    assert _manifest(folder)["status"] == "interrupted"
    print(f"{where}: interrupted in {took:.1f} s")
    flag.unlink()
    _resume(folder, env)
    return outcome(folder)


def _deaf_main_thread(plugins_dir: Path, out: Path) -> float:
    where = "a main thread deaf to signals"
    err, took, _, _ = _hung_in_reward(plugins_dir, EVAL, out, "DEAF", where, signals=2)
    folder = only_run(out)
    said = _said(err)
    assert len(said) == 1 and "ended at once" in said[0] and f"harness run --resume {folder}" in said[0], err[-2000:]
    assert took < 10, f"took {took:.1f} s: the second signal did not shorten the wait"
    assert _manifest(folder)["status"] == "interrupted"  # said by the watchdog: the main thread never returned
    print(f"{where}: ended {took:.1f} s after the first of two signals")
    return took


def _file_size_limit(plugins_dir: Path, out: Path) -> dict:
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))

    with _running([*EVAL, "--out", str(out)], _env(plugins_dir), preexec_fn=limited) as process:
        _, err = process.communicate(timeout=CEILING)
    folder = only_run(out)
    said = _said(err)
    assert process.returncode == 1 and len(said) == 1, f"rc {process.returncode}: {err[-2000:]}"
    assert "file-size limit" in said[0] and str(folder / "samples.jsonl") in said[0], said
    assert f"harness run --resume {folder}" in said[0], said
    assert (folder / "samples.jsonl").stat().st_size == FILE_SIZE_LIMIT  # the write stopped at the limit
    manifest = _manifest(folder)
    assert manifest["status"] == "failed" and manifest["phases_done"] == [], manifest
    _resume(folder, _env(plugins_dir))
    return outcome(folder)


# -- helpers -------------------------------------------------------------------------------------------------------


def outcome(folder: Path) -> dict:
    """tests/tiny_runs.py's, for a run that trained or not (an evaluation writes no steps.jsonl)."""
    if (folder / "steps.jsonl").exists():
        return _outcome(folder)
    (folder / "steps.jsonl").touch()
    try:
        return _outcome(folder)
    finally:
        (folder / "steps.jsonl").unlink()


def _env(plugins_dir: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(plugins_dir), os.environ.get("PYTHONPATH", "")) if p)
    return harness_env(PYTHONPATH=path, **extra)


@contextlib.contextmanager
def _running(argv: list[str], env: dict[str, str], preexec_fn=None) -> Iterator[subprocess.Popen]:
    """`harness ARGV` in a fresh process, killed if the block leaves it running (a test that failed)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _reached(process: subprocess.Popen, marker: Path, where: str) -> None:
    """Wait until ``process`` stands where it is to be interrupted (it wrote ``marker``)."""
    deadline = time.monotonic() + CEILING
    while not marker.exists():
        if process.poll() is not None:
            raise AssertionError(f"{where}: ended (rc {process.returncode}) first: {process.communicate()[1][-2000:]}")
        assert time.monotonic() < deadline, f"{where}: never reached"
        time.sleep(0.05)


def _interrupt(process: subprocess.Popen, where: str, signals: int = 1) -> tuple[str, float]:
    """SIGTERM (``signals`` of them, half a second apart); the process's stderr and how long it took to end, which
    must be under STOPS_WITHIN seconds, with exit 130."""
    sent = time.monotonic()
    for i in range(signals):
        if i:
            time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=STOPS_WITHIN)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"{where}: still running {STOPS_WITHIN:g} s after SIGTERM: {err[-2000:]}") from None
    took = time.monotonic() - sent
    assert process.returncode == 130, f"{where}: rc {process.returncode}: {err[-2000:]}"
    return err, took


def _said(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("harness:")]


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _resume(folder: Path, env: dict[str, str]) -> None:
    done = harness(["run", "--resume", str(folder)], **env)
    assert done.returncode == 0, f"the last resume: {done.stderr[-2000:]}"
    assert _manifest(folder)["status"] == "complete"
