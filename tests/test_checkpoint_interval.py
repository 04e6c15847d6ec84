"""`--checkpoint-every`: by steps, or by minutes since the last checkpoint (the default, 10m), always after the last
step; bad values are one line before anything loads (tests/test_bad_input.py)."""

from __future__ import annotations

import pytest

from harness.runner.config import RunConfig
from harness.store import checkpoint
from harness.store.checkpoint import Checkpointer


def test_by_steps_every_nth_and_the_last(tmp_path):
    every_two = Checkpointer(tmp_path, 2)
    assert [every_two.due(s, 5) for s in range(5)] == [False, True, False, True, True]


def test_by_minutes_once_the_time_has_passed_since_the_last_save(tmp_path, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(checkpoint.time, "monotonic", lambda: now[0])
    ckpt = Checkpointer(tmp_path, "10m")
    assert not ckpt.due(0, 100)  # made at 1000 s: nothing has passed
    now[0] += 599
    assert not ckpt.due(1, 100)
    now[0] += 1
    assert ckpt.due(2, 100)  # 600 s = 10 minutes
    ckpt.last_save = now[0]  # what save() records
    now[0] += 300
    assert not ckpt.due(3, 100) and ckpt.due(99, 100)  # the last step always


def test_the_default_is_ten_minutes_and_values_are_checked():
    assert RunConfig().checkpoint_every == "10m"
    assert RunConfig(checkpoint_every="2.5m").checkpoint_every == "2.5m"
    assert RunConfig(checkpoint_every="3").checkpoint_every == 3
    for bad in ("-1", "0m", "xm", "1.5", "nanm"):
        with pytest.raises(ValueError, match="--checkpoint-every should be steps"):
            RunConfig(checkpoint_every=bad)


def test_a_short_run_at_the_default_interval_writes_one_state(tmp_path, monkeypatch):
    """A 3-step run that takes seconds writes its state once, after the last step (the old default wrote it after
    every step: 1.6 GB each on the default model, many GB for a 1.5B one)."""
    from tiny_runs import tiny_argv

    from harness.cli import main

    saves = []
    real_save = Checkpointer.save
    monkeypatch.setattr(
        Checkpointer, "save", lambda self, step, *a, **k: (saves.append(step), real_save(self, step, *a, **k))
    )
    default_interval = tiny_argv(steps=3)  # tiny_runs.RUN, at the default interval
    assert main([*default_interval, "--out", str(tmp_path)]) == 0
    assert saves == [2]


def test_save_every_keeps_a_loadable_model_per_interval_that_harness_run_evaluates(tmp_path):
    """--save-every 2 over 4 steps: step-2 and step-4, kept (the resume checkpoint is gone once the run completes);
    step-4 holds the weights the run ends with (its model/), and step-2 loads with `harness run --model`."""
    import json

    import torch
    from safetensors.torch import load_file
    from tiny_runs import RUN, tiny_argv

    from harness.cli import main

    assert (
        main([*RUN, "--steps", "4", "--save-every", "2", "--set", "trainer.lr=1e-2", "--out", str(tmp_path / "train")])
        == 0
    )
    (run_dir,) = (p for p in (tmp_path / "train").iterdir() if p.is_dir())
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-2", "step-4"]
    assert not (run_dir / "checkpoint").exists()
    last = load_file(run_dir / "checkpoints/step-4/model.safetensors")
    final = load_file(run_dir / "model/model.safetensors")
    assert last.keys() == final.keys() and all(torch.equal(last[k], final[k]) for k in last)
    step2 = run_dir / "checkpoints" / "step-2"
    evaluate = tiny_argv("none", model=step2, k=1, sets={"searcher.n": 1}, out=tmp_path / "eval")
    assert main(evaluate) == 0
    (eval_dir,) = (p for p in (tmp_path / "eval").iterdir() if p.is_dir())
    manifest = json.loads((eval_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["model"] == str(step2)


def test_save_every_is_checked_before_anything_loads():
    assert RunConfig(save_every="3").save_every == 3
    with pytest.raises(ValueError, match="--save-every should be an integer >= 0"):
        RunConfig(save_every="-1")
