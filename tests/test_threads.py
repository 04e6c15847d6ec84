"""Threads per phase (harness/runner/threads.py): ``--threads N`` pins every phase to N; without it a run decodes and
updates at the counts ``choose`` picks from torch's default, restoring the count after each phase; outside a run
nothing changes. No wall-clock assertion: only which count each phase ran at."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_runs import tiny_config, with_uppercase_task

from harness.engine.transformers_engine import TransformersEngine
from harness.runner import threads
from harness.trainers.grpo import GRPOTrainer


@pytest.fixture
def two_threads(monkeypatch):
    """torch's count at 2 (the default this module's rule was measured at) on a quiet machine, whatever this one is,
    and a plan whose phases differ (1 thread decoding, 2 updating), so each phase's switch shows; the run's plan and
    the count put back after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "busy_cores", lambda: 0)
    monkeypatch.setattr(threads, "choose", lambda cores, busy: {"decode": 1, "update": 2})
    yield
    threads.reset()
    torch.set_num_threads(before)


def test_the_rule_gives_every_phase_the_free_cores():
    assert threads.choose(2, 0) == {"decode": 2, "update": 2}  # a quiet 2-core machine
    assert threads.choose(2, 1) == threads.choose(2, 4) == {"decode": 1, "update": 1}  # any other job on it
    assert threads.choose(16, 3) == {"decode": 13, "update": 13}
    assert threads.choose(1, 0) == {"decode": 1, "update": 1}


def test_busy_cores_counts_other_processes_now_and_falls_back_to_the_load_average(monkeypatch):
    import subprocess
    import sys

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert threads.busy_cores(window=0.5) >= 1  # it, plus whatever else this machine runs
    finally:
        spinner.kill()
        spinner.wait()

    def no_proc_stat():
        raise OSError("no /proc/stat")

    monkeypatch.setattr(threads, "_all_cpu_seconds", no_proc_stat)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (3.2, 1.0, 0.5))
    assert threads.busy_cores() == 3


def test_without_threads_each_phase_runs_at_its_chosen_count_and_the_count_is_restored(two_threads):
    plan = threads.configure(None, "cpu")
    assert plan.counts == {"decode": 1, "update": 2}
    with threads.phase_threads("decode"):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with threads.phase_threads("update"):
        assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError), threads.phase_threads("decode"):  # restored on the way out of a failure too
        raise RuntimeError
    assert torch.get_num_threads() == 2
    assert plan.describe() == {"setting": None, "decode": 1, "update": 2, "why": plan.why}


def test_pinned_threads_never_change(two_threads):
    plan = threads.configure(1)
    assert torch.get_num_threads() == 1
    for phase in threads.PHASES:
        with threads.phase_threads(phase):
            assert torch.get_num_threads() == 1
    assert plan.describe()["decode"] == plan.describe()["update"] == 1


def test_outside_a_run_off_the_cpu_and_on_resume_the_counts_are_not_chosen(two_threads, monkeypatch):
    for phase in threads.PHASES:  # nothing configured: the library used directly
        with threads.phase_threads(phase):
            assert torch.get_num_threads() == 2
    threads.configure(None, "meta")  # a model on another device: torch's default for every phase
    with threads.phase_threads("decode"):
        assert torch.get_num_threads() == 2
    threads.configure(None, "cpu", {"decode": 2, "update": 1})  # a resume keeps the killed run's counts
    assert threads.current().counts == {"decode": 2, "update": 1}
    with threads.phase_threads("decode"):
        assert torch.get_num_threads() == 2
    threads.configure(None, "cpu", {"setting": 2, "decode": None})  # a pinned run's record is no per-phase count
    assert threads.current().counts == {"decode": 1, "update": 2}
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)  # what vLLM's CPU backend does once it has started
    with threads.phase_threads("decode"):
        pass
    assert calls == []
    with pytest.raises(ValueError, match="unknown phase"), threads.phase_threads("prefill"):
        pass


def _tiny_run(tmp_path, **config) -> dict:
    """One GRPO step on the tiny model between two evaluations; its manifest."""
    from harness.run import run

    plugins = with_uppercase_task()
    folder = run(
        tiny_config(
            task="uppercase",
            train_limit=2,
            k=1,
            out=str(tmp_path),
            save_model=False,
            **config,
            sets={
                "trainer.group_size": "2",
                "trainer.prompts_per_step": None,
                "trainer.max_new_tokens": "4",
                "searcher.n": "1",
                "searcher.max_new_tokens": "4",
            },
        ),
        plugins=plugins,
        echo=lambda _: None,
    )
    assert threads.current() is None  # the run forgot its plan
    return json.loads((folder / "manifest.json").read_text())


@pytest.fixture
def seen(monkeypatch):
    """torch's thread count inside every decoding loop and every update micro-batch of a run."""
    seen = {"decode": [], "update": []}
    decode, micro_batch = TransformersEngine._decode, GRPOTrainer._micro_batch

    def counting_decode(self, *args, **kw):
        seen["decode"].append(torch.get_num_threads())
        return decode(self, *args, **kw)

    def counting_micro_batch(self, *args, **kw):
        seen["update"].append(torch.get_num_threads())
        return micro_batch(self, *args, **kw)

    monkeypatch.setattr(TransformersEngine, "_decode", counting_decode)
    monkeypatch.setattr(GRPOTrainer, "_micro_batch", counting_micro_batch)
    return seen


def test_a_run_without_threads_decodes_and_updates_at_the_chosen_counts(tmp_path, two_threads, seen):
    manifest = _tiny_run(tmp_path)
    assert seen["decode"] and set(seen["decode"]) == {1}  # before, train and after: every generate
    assert seen["update"] and set(seen["update"]) == {2}
    assert torch.get_num_threads() == 2
    assert manifest["threads"]["decode"] == 1 and manifest["threads"]["update"] == 2
    assert manifest["threads"]["setting"] is None


def test_a_run_with_threads_keeps_that_count_in_every_phase(tmp_path, two_threads, seen):
    manifest = _tiny_run(tmp_path, threads=2)
    assert set(seen["decode"]) == set(seen["update"]) == {2}
    assert manifest["threads"] == {"setting": 2, "decode": 2, "update": 2, "why": manifest["threads"]["why"]}


def test_the_counts_follow_the_load_and_each_change_is_recorded(monkeypatch):
    """Without --threads the counts are decided again at each run phase and every RECHECK_SECONDS inside a long
    one, from the busy cores since the last look; a change applies to the phase being run at once."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    load = iter([0, 1, 1, 0])  # busy cores at each look after the first
    monkeypatch.setattr(threads, "busy_cores", lambda: 0)
    monkeypatch.setattr(threads.LoadMeter, "busy", lambda self: next(load))
    clock = [100.0]
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock[0])
    try:
        plan = threads.configure(None, "cpu")
        assert plan.counts == {"decode": 2, "update": 2}
        threads.run_phase("before")  # a quiet machine still: no change
        assert threads.current().counts == {"decode": 2, "update": 2}
        with threads.phase_threads("decode"):
            assert torch.get_num_threads() == 2
            clock[0] += 10
            threads.follow_load()  # under RECHECK_SECONDS since the last look: not looked at
            assert torch.get_num_threads() == 2
            clock[0] += threads.RECHECK_SECONDS
            threads.follow_load()  # another job took a core: the decoding in progress drops to 1 thread
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2  # torch's count as the phase found it
        clock[0] += 5
        threads.run_phase("train")  # still busy: stays at 1
        with threads.phase_threads("update"):
            assert torch.get_num_threads() == 1
        clock[0] += 5
        threads.run_phase("after")  # the job ended: back to 2
        assert threads.current().counts == {"decode": 2, "update": 2}
        assert threads.take_changes() == [
            {"run_phase": "before", "seconds": 40.0, "busy": 1, "decode": 1, "update": 1},
            {"run_phase": "after", "seconds": 50.0, "busy": 0, "decode": 2, "update": 2},
        ]
        assert threads.take_changes() == []  # each change is taken once (into the manifest at a phase's end)
        assert plan.describe()["decode"] == 2  # the manifest's `threads`: the counts the run started with
        threads.configure(1)  # --threads 1: pinned, nothing followed
        threads.run_phase("before")
        assert threads.take_changes() == [] and torch.get_num_threads() == 1
    finally:
        threads.reset()
        torch.set_num_threads(before)


def test_a_run_records_the_thread_changes_its_load_caused(tmp_path, monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "busy_cores", lambda: 0)
    busy = iter([1, 0, 1, 0, 1, 0] * 50)  # the load alternates at every look
    monkeypatch.setattr(threads.LoadMeter, "busy", lambda self: next(busy))
    try:
        manifest = _tiny_run(tmp_path)
    finally:
        torch.set_num_threads(before)
    changes = manifest["thread_changes"]
    assert [c["run_phase"] for c in changes[:3]] == ["before", "train", "after"]  # decided again at each
    assert [c["decode"] for c in changes[:3]] == [1, 2, 1]
    assert manifest["threads"]["decode"] == 2  # what it started with
