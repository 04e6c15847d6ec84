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
