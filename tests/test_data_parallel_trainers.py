"""VSPO, SFT and RLAIF data-parallel on CPU ranks (gloo), as GRPO is in tests/test_data_parallel.py.

For each trainer, on the tiny model: the run in one process, then the same run under `accelerate launch` with two
processes, SIGKILLed at its second optimizer step and resumed from its step-0 checkpoint under the launcher. The
resumed two-rank run must end where the one-process run ended: the same training rollouts (or SFT targets), the
same per-step figures to float rounding, the same evaluation before training, and trained weights within 1e-5.

What each trainer's split exercises: VSPO builds its steering vector in the run on rank 0 alone and sends it to the
other rank (its resume takes the vector back from the checkpoint); SFT samples its targets (`targets=self`) with
each rank drawing its share of the problems, then splits every step's batch; RLAIF's judge rates each rank's own
rollouts and the teacher's cost counters are summed over the ranks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from launchers import accelerate, check, env, only_run
from safetensors.torch import load_file
from tiny_runs import tiny_argv

pytestmark = pytest.mark.runs  # ranks as processes: not in the quick lane

# Two prompts per step (one per rank), a few tokens; SFT samples its own targets so its generation is split too.
# lr 1e-7: AdamW's first step moves every weight by about lr whatever its gradient's size, so where a gradient is ~0
# the two runs' float rounding picks the sign; at the trainers' own lr that difference (~1e-5) is enough to change
# which token the random model's near-uniform next-token distribution samples at the next step.
LR = {"trainer.lr": 1e-7}
SETS = {
    "vspo": {"trainer.prompts_per_step": 2, "trainer.vector_prompts": 4, "trainer.cache_vector": "false"},
    "sft": {"trainer.targets": "self", "trainer.samples_per_problem": 2, "trainer.max_target_tokens": 6},
    "rlaif": {"trainer.prompts_per_step": 2},
}


def _argv(trainer: str) -> list[str]:
    sets = {**LR, **({"trainer.max_new_tokens": 6} if trainer != "sft" else {}), **SETS[trainer]}
    return [*tiny_argv(trainer, steps=3, threads=None, sets=sets), "--checkpoint-every", "1"]


def _outcome(folder: Path) -> dict:
    """What the two runs must share: every sample, step and metric but wall-clock fields, and the trained weights."""

    def clean(row):
        return {k: v for k, v in row.items() if "seconds" not in k and "time/" not in k}

    return {
        "samples": [clean(json.loads(x)) for x in (folder / "samples.jsonl").read_text().splitlines()],
        "steps": [clean(json.loads(x)) for x in (folder / "steps.jsonl").read_text().splitlines()],
        "metrics": clean(json.loads((folder / "metrics.json").read_text())),
        "weights": load_file(folder / "model" / "model.safetensors"),
    }


@pytest.mark.parametrize("trainer", sorted(SETS))
def test_two_killed_and_resumed_ranks_end_where_one_process_ends(trainer, tmp_path, tiny_policy_spec):
    check([sys.executable, "-m", "harness", *_argv(trainer), "--out", str(tmp_path / "one")])
    killed = subprocess.run(
        accelerate(*_argv(trainer), "--out", str(tmp_path / "two")),
        env=env(HARNESS_FAULT="optimizer_step:2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode != 0, killed.stderr[-2000:]  # both ranks SIGKILLed at the second step's update
    folder = only_run(tmp_path / "two")
    assert json.loads((folder / "checkpoint" / "state.json").read_text())["step"] == 0
    check(accelerate("run", "--resume", str(folder)))

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["processes"] == 2
    one, two = _outcome(only_run(tmp_path / "one")), _outcome(folder)
    train = [s for s in two["samples"] if s["phase"].startswith("train")]
    assert train and [s["text"] for s in train] == [
        s["text"] for s in one["samples"] if s["phase"].startswith("train")
    ]  # written once, in one process's order: each rank's share gathered
    assert len(two["steps"]) == len(one["steps"]) == 3
    for mine, alone in zip(two["steps"], one["steps"], strict=True):
        # (one process skips the backward pass of rows whose advantage is 0; ranks must all run theirs)
        figures = {k for k, v in alone.items() if isinstance(v, float) and k != "zero_advantage_rows_skipped"}
        assert {k: pytest.approx(alone[k], rel=5e-4, abs=1e-5) for k in figures} == {k: mine[k] for k in figures}
    assert {k: v for k, v in two["metrics"].items() if k.startswith("before/")} == {
        k: v for k, v in one["metrics"].items() if k.startswith("before/")
    }
    moved = max(float((one["weights"][k] - two["weights"][k]).abs().max()) for k in one["weights"])
    assert moved < 1e-6  # the same three updates (each ~1e-7 a weight), the batch's gradient summed from two parts
    if trainer == "rlaif":  # every rank's judge calls, counted once: 3 steps x 2 prompts x G=2 answers
        assert two["metrics"]["rlaif/teacher_calls"] == one["metrics"]["rlaif/teacher_calls"] == 12
    if trainer == "vspo":
        assert two["metrics"]["vspo/vector_layer"] == one["metrics"]["vspo/vector_layer"]
