"""Every trainer x every searcher through `harness run` on the tiny model, task math: each cell finishes (exit 0,
the metric table printed, no traceback anywhere, manifest `complete`), or is refused in one line before the model
loads. bench/defaults_matrix.py runs the same matrix on the real model and reports what each cell learned.

Sizes only are shrunk. Pure defaults (`--preset quick`) took, per cell on the tiny model (2 CPU cores, one cell
at a time, load average 1-2), best-of-k / evolve: none 15 s / 17 s, grpo 35 s / 44 s, vpo 114 s / 127 s (48
warm-up steps of 4-answer rollouts), vspo (with the vector below) 30 s / 42 s, sft 14 s / 21 s, rlaif 31 s / 43 s:
8.9 minutes for the matrix, and 2-3x that beside other work (vpo 355 s / 426 s at load 3-4). So every option
stays at its default except `--limit 2`, `--train-limit 4`, `--steps 2`, `searcher.max_new_tokens=8`,
`trainer.max_new_tokens=8` (RL trainers) and VPO's `trainer.warmup_steps=2`: 6-7 s a cell, 80 s for the 12 cells
(run two at a time).

One option that is not a size: VSPO gets `trainer.vector=` a conciseness vector built from hand-written pairs.
Its default builds the vector in the run from the policy's own answers rewritten by the policy; a random model's
greedy answers are empty, so those pairs come from a second, sampled round (harness/teacher/rewrite.py), which
tests/test_docs_as_pasted.py runs; the hand-written vector keeps these cells' time down.
"""

from __future__ import annotations

import itertools
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from tiny_runs import harness, only_run

TRAINERS = ("none", "grpo", "vpo", "vspo", "sft", "rlaif")
SEARCHERS = ("best-of-k", "evolve")
# (trainer, searcher) -> what its one-line refusal says. None is refused today; a pair added here must be refused
# before the model loads (harness/runner/plan.py, harness/plugins/contract.py).
REFUSED: dict[tuple[str, str], str] = {}

SIZES = ["--limit", "2", "--set", "searcher.max_new_tokens=8"]
TRAIN_SIZES = ["--train-limit", "4", "--steps", "2"]
TRAINER_SIZES = {
    "grpo": ["trainer.max_new_tokens=8"],
    "vpo": ["trainer.max_new_tokens=8", "trainer.warmup_steps=2"],
    "vspo": ["trainer.max_new_tokens=8"],
    "rlaif": ["trainer.max_new_tokens=8"],
    "sft": [],
}
# The summary's metric table: its header names the phases (eval alone, or before and after)
METRIC_TABLE = re.compile(r"^metric\s+(eval|before\s+after\s+change)\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def conciseness_vector(tmp_path_factory, plugins, tiny_policy_spec):
    """A conciseness vector for tiny-random from hand-written pairs (the in-run build needs a model that can
    rewrite its answers; see the module docstring)."""
    import torch

    from harness.models import load_policy
    from harness.steering.build import build_vector

    torch.manual_seed(0)
    policy = load_policy("tiny-random", plugins["model"])
    prompts = [f"Calculate {a} + {b}." for a, b in ((2, 3), (4, 1), (5, 5), (7, 2))]
    concise = [(p, "The result is \\boxed{5}.") for p in prompts]
    verbose = [
        (p, "Let me think about this step by step, carefully and at length, before I give an answer.") for p in prompts
    ]
    path = tmp_path_factory.mktemp("vector") / "conciseness.safetensors"
    build_vector(policy, concise, verbose, behaviour="conciseness", teacher="hand-written").save(path)
    return path


def _command(trainer: str, searcher: str, out, vector) -> list[str]:
    argv = [
        "run",
        "--model",
        "tiny-random",
        "--task",
        "math",
        "--trainer",
        trainer,
        "--searcher",
        searcher,
        "--out",
        str(out),
        *SIZES,
    ]
    if trainer != "none":
        argv += TRAIN_SIZES
        for option in TRAINER_SIZES[trainer] + ([f"trainer.vector={vector}"] if trainer == "vspo" else []):
            argv += ["--set", option]
    return argv


@pytest.fixture(scope="module")
def cells(tmp_path_factory, conciseness_vector) -> dict:
    """Every cell's `harness run`, two at a time (they share no file; each takes the cores it finds free), as
    (trainer, searcher) -> (the finished process, its --out folder)."""
    root = tmp_path_factory.mktemp("matrix")

    def run(cell: tuple[str, str]):
        out = root / "-".join(cell) / "runs"
        return cell, (harness(_command(*cell, out, conciseness_vector)), out)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, itertools.product(TRAINERS, SEARCHERS)))


@pytest.mark.parametrize("searcher", SEARCHERS)
@pytest.mark.parametrize("trainer", TRAINERS)
def test_every_trainer_with_every_searcher_at_defaults(trainer, searcher, cells):
    result, out = cells[trainer, searcher]
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-4000:]
    if (trainer, searcher) in REFUSED:
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0, output[-4000:]
        assert len(lines) == 1 and REFUSED[trainer, searcher] in lines[0], lines
        assert "loading model" not in output, "refused only after the model began to load"
        return
    assert result.returncode == 0, output[-4000:]
    assert METRIC_TABLE.search(result.stdout), result.stdout[-4000:]
    manifest = json.loads((only_run(out) / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
