"""Data-parallel training (harness/runner/distributed.py) on this CPU machine: two processes, gloo backend.

- One GRPO step on the tiny model as two `torchrun` ranks leaves the parameters bit-identical across the ranks and
  equal (up to float rounding) to one process's step on the whole (concatenated) batch, which moved them.
- `accelerate launch -m harness run` writes one run folder, once, with the same training curves and samples as the
  same command in one process; killed mid-training, `--resume` under the launcher ends with the uninterrupted
  results.
- Under `--shard fsdp` (the training state split over the ranks, FSDP2): two GRPO steps, with and without LoRA,
  leave the ranks' parameters identical and within 1e-5 of one process's; a sharded run SIGKILLed mid-training and
  resumed from its checkpoint ends with the uninterrupted sharded run's results.
- Trainers whose loop is not split over processes, grids, sharding in one process and accelerate's own FSDP /
  DeepSpeed configs are refused in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from launchers import accelerate, check, env, only_run, torchrun
from tiny_runs import tiny_argv

from harness.cli import main

STEP_SCRIPT = Path(__file__).parent / "fixtures" / "distributed" / "grpo_step.py"
# Every test here starts ranks as processes (gloo, torchrun, accelerate launch): the quick lane skips them all
pytestmark = pytest.mark.runs
RUN = tiny_argv(
    task="math",
    steps=3,
    threads=None,
    sets={"trainer.prompts_per_step": 2, "trainer.max_new_tokens": 6, "searcher.max_new_tokens": 6},
)


def test_two_gloo_ranks_take_the_step_one_process_takes_on_the_whole_batch(tmp_path, tiny_policy_spec):
    single, two = tmp_path / "single", tmp_path / "two"
    single.mkdir(), two.mkdir()
    check([sys.executable, str(STEP_SCRIPT), str(single)])
    check(torchrun(str(STEP_SCRIPT), str(two)))

    rank0, rank1 = torch.load(two / "rank0.pt"), torch.load(two / "rank1.pt")
    alone, initial = torch.load(single / "rank0.pt"), torch.load(two / "initial.pt")
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)  # one all-reduced gradient, one optimizer step
    moved = max(float((rank0[k] - initial[k]).abs().max()) for k in rank0)
    assert moved > 5e-4  # lr 1e-3: AdamW's first step moves a weight by up to lr
    # The whole batch's gradient summed from two ranks' parts (different micro-batches, different addition order)
    # equals one process's to float rounding; AdamW's first step divides by |g|, which magnifies that rounding for
    # weights whose gradient is ~0, so the bound is 1% of the step, not 1e-7.
    assert max(float((rank0[k] - alone[k]).abs().max()) for k in rank0) < 1e-5

    logs = [json.loads((d / f"rank{r}.json").read_text()) for d, r in ((single, 0), (two, 0), (two, 1))]
    assert [log["world_size"] for log in logs] == [1, 2, 2]
    assert all(log["samples"] == 16 for log in logs)  # 4 prompts x G=4: every rank holds the whole batch
    one, first, second = (
        {k: v for k, v in step.items() if "seconds" not in k and "time/" not in k}
        for log in logs
        for step in log["steps"]
    )  # one step each
    assert first == second  # every rank logs the same (gathered, all-reduced) figures
    assert first["reward_mean"] == one["reward_mean"] > 0  # the same samples: the engine's seeds are per prompt
    assert first["completion_tokens_mean"] == one["completion_tokens_mean"]
    assert first["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
    assert first["ratio_mean"] == pytest.approx(one["ratio_mean"], abs=1e-6)


def _outcome(folder: Path) -> dict:
    def clean(row):  # wall-clock fields differ between any two runs
        return {k: v for k, v in row.items() if "seconds" not in k and "time/" not in k}

    samples = [clean(json.loads(x)) for x in (folder / "samples.jsonl").read_text().splitlines()]
    steps = [clean(json.loads(x)) for x in (folder / "steps.jsonl").read_text().splitlines()]
    metrics = clean(json.loads((folder / "metrics.json").read_text()))
    return {"samples": samples, "steps": steps, "metrics": metrics}


@pytest.fixture(scope="module")
def launched(tmp_path_factory, tiny_policy_spec):
    """The same short GRPO run in one process and under `accelerate launch` with two processes."""
    out = tmp_path_factory.mktemp("dp")
    check([sys.executable, "-m", "harness", *RUN, "--out", str(out / "one")])
    check(accelerate(*RUN, "--out", str(out / "two")))
    return out


def test_accelerate_launch_writes_one_folder_equal_to_one_process(launched):
    one, two = only_run(launched / "one"), only_run(launched / "two")
    manifest = json.loads((two / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["processes"] == 2
    assert not (two / "checkpoint").exists()
    single, parallel = _outcome(one), _outcome(two)
    # Written once: 3 steps, 3 x 2 prompts x 2 samples training rollouts, not twice that.
    assert len(parallel["steps"]) == 3
    assert sum(s["phase"] == "train" for s in parallel["samples"]) == 12
    # Same rollouts (per-prompt seeds), same rewards, same evaluation before training.
    assert [s["text"] for s in parallel["samples"]] == [s["text"] for s in single["samples"]]
    assert [s["reward_mean"] for s in parallel["steps"]] == [s["reward_mean"] for s in single["steps"]]
    assert {k: v for k, v in parallel["metrics"].items() if k.startswith("before/")} == {
        k: v for k, v in single["metrics"].items() if k.startswith("before/")
    }


def test_a_killed_data_parallel_run_resumes_to_the_uninterrupted_results(launched, tmp_path):
    expected = _outcome(only_run(launched / "two"))
    killed = subprocess.run(
        accelerate(*RUN, "--out", str(tmp_path)),
        env=env(HARNESS_FAULT="optimizer_step:2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode != 0  # both ranks SIGKILLed at the second step's optimizer step
    folder = only_run(tmp_path)
    assert json.loads((folder / "manifest.json").read_text())["status"] == "running"
    check(accelerate("run", "--resume", str(folder)))
    assert _outcome(folder) == expected


def test_a_plugin_without_a_split_is_refused_naming_those_with_one():
    import types

    from harness.plugins import get_plugin_manager
    from harness.plugins.options import build_plugin
    from harness.runner.plan import check_data_parallel
    from harness.types import TrainerCapabilities, capabilities_of

    class OneProcess:  # a plugin's trainer or searcher that declares nothing: not split over processes
        def __init__(self, **_):
            pass

    plugins = get_plugin_manager(autoload=False)  # a fresh one: the plugins added here stay in this test
    plugins["trainer"].add("one-process", OneProcess, "a plugin's trainer")
    plugins["searcher"].add("one-process", OneProcess, "a plugin's searcher")

    def caps(name):
        options = {"behaviour": "conciseness"} if name in ("vspo", "rlaif") else {}
        return capabilities_of(build_plugin(plugins, "trainer", name, options), TrainerCapabilities)

    def cfg(trainer, searcher="best-of-k"):
        return types.SimpleNamespace(trainer=trainer, searcher=searcher)

    with pytest.raises(ValueError) as err:
        check_data_parallel(plugins, cfg("one-process"), caps("one-process"), True, 2)
    assert str(err.value) == (
        "trainer 'one-process' does not run data-parallel (WORLD_SIZE=2); launch it as one process, "
        "or use a trainer that does: grpo, rlaif, sft, vpo, vspo"
    )
    for name in ("grpo", "vpo", "vspo", "sft", "rlaif"):  # every built-in trainer splits its loop
        check_data_parallel(plugins, cfg(name), caps(name), False, 2)  # (its evaluation on rank 0 alone)
    with pytest.raises(ValueError) as err:  # evaluation alone: the searcher must split
        check_data_parallel(plugins, cfg("none", "one-process"), None, False, 2)
    assert str(err.value) == (
        "searcher 'one-process' does not run data-parallel (WORLD_SIZE=2); launch it as one process, "
        "or use a searcher that does: best-of-k, evolve"
    )
    check_data_parallel(plugins, cfg("none", "evolve"), None, True, 2)


def test_a_grid_under_a_launcher_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["run", "--model", "tiny-random", "--trainer", "grpo,sft", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "harness: error: a grid runs its cells one after another in one process; launch each cell with torchrun / "
        "accelerate launch on its own"
    ]


def test_accelerates_own_sharding_configs_are_refused_in_one_line(monkeypatch):
    """accelerate's FSDP cannot start on CPU (it refuses FSDP's module-state sync there), so the refusal that a GPU
    launch with such a config meets is checked against accelerate's own answer, faked."""
    import types

    import accelerate

    from harness.runner.distributed import SHARDING_ERROR, Parallel

    for kind in ("FSDP", "DEEPSPEED"):
        fake = types.SimpleNamespace(process_index=1, distributed_type=types.SimpleNamespace(name=kind))
        monkeypatch.setattr(accelerate, "Accelerator", lambda fake=fake, **_: fake)
        monkeypatch.setenv("WORLD_SIZE", "2")
        with pytest.raises(ValueError) as err:
            Parallel()
        assert str(err.value) == SHARDING_ERROR
        assert "--shard fsdp" in SHARDING_ERROR  # the way that works is named


def test_sharding_one_process_is_refused_before_the_model_loads(tmp_path, capsys):
    assert (
        main(["run", "--model", "no-such-model", "--trainer", "grpo", "--shard", "fsdp", "--out", str(tmp_path)]) == 2
    )
    assert capsys.readouterr().err.strip().splitlines() == [
        "harness: error: --shard fsdp splits the training state over processes: launch with torchrun "
        "--nproc_per_node N (N >= 2)"
    ]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("lora", ["0", "4"])
def test_two_sharded_ranks_take_the_steps_one_process_takes(tmp_path, tiny_policy_spec, lora):
    single, two = tmp_path / "single", tmp_path / "two"
    single.mkdir(), two.mkdir()
    args = ["--steps", "2", "--lora", lora]
    check([sys.executable, str(STEP_SCRIPT), str(single), *args])
    check(torchrun(str(STEP_SCRIPT), str(two), *args, "--shard", "fsdp"))

    rank0, rank1 = torch.load(two / "rank0.pt"), torch.load(two / "rank1.pt")
    alone, initial = torch.load(single / "rank0.pt"), torch.load(two / "initial.pt")
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)  # every rank gathered the same update
    trained = [k for k in rank0 if lora == "0" or "lora_" in k]
    assert max(float((rank0[k] - initial[k]).abs().max()) for k in trained) > 1e-3  # two AdamW steps at lr 1e-3
    frozen = [k for k in rank0 if k not in trained]
    assert all(torch.equal(rank0[k], initial[k]) for k in frozen)  # a LoRA run's sharded base stays as loaded
    assert max(float((rank0[k] - alone[k]).abs().max()) for k in rank0) < 1e-5

    one, sharded = (json.loads((d / "rank0.json").read_text())["steps"] for d in (single, two))
    assert [s["reward_mean"] for s in sharded] == [s["reward_mean"] for s in one]
    for a, b in zip(sharded, one, strict=True):
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5)  # the norm over every rank's shard


def test_a_killed_sharded_run_resumes_from_its_checkpoint_to_the_uninterrupted_results(tmp_path, tiny_policy_spec):
    sharded = [*RUN, "--shard", "fsdp", "--checkpoint-every", "1"]
    check(accelerate(*sharded, "--out", str(tmp_path / "whole")))
    expected = _outcome(only_run(tmp_path / "whole"))
    killed = subprocess.run(
        accelerate(*sharded, "--out", str(tmp_path / "killed")),
        env=env(HARNESS_FAULT="optimizer_step:2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode != 0  # both ranks SIGKILLed at the second step's optimizer step
    folder = only_run(tmp_path / "killed")
    state = json.loads((folder / "checkpoint" / "state.json").read_text())
    assert state["step"] == 0  # it resumes from step 0's checkpoint: weights and the gathered AdamW moments
    check(accelerate("run", "--resume", str(folder)))
    assert _outcome(folder) == expected
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["shard"] == "fsdp"
