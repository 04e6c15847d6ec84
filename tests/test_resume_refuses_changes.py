"""A resume is the same run or none. Everything a resume reads is what the checkpoint (or the phase's
snapshot) recorded when it was written: the checkpoint's files (size and SHA-256), the appended files up to the
recorded length (SHA-256 of that prefix), the manifest's configuration, resolved options, per-phase threads and
identity (compared value and type: a seed of -0.0 or 1.0 is not the integer 0 or 1); and it all lies inside the run
folder (a checkpoint folder that is a symbolic link, or a file that resolves outside the folder, is refused). Any
difference is refused in one line naming it, exit 2, before the model loads, leaving the folder as it was. A resume
or a run that cannot write where it would (a read-only mount, a path longer than PATH_MAX) is one line too.

Before, each of these resumed (or died in a traceback): a checkpoint folder moved away and replaced by a symlink to
it trained on; trainer options edited in the manifest resumed silently with the old values; a seed of -0.0 resumed
to `complete`; a step line edited in place (same length) resumed silently; the trained weights swapped for another
run's of the same size resumed silently when the run was killed during its final evaluation (the checkpoint's files
were checked only when training was unfinished); `--resume` on a read-only mount was a traceback (OSError 30), and
`--out` or `--resume` longer than PATH_MAX one too (OSError 36). Real processes on the tiny model."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tiny_runs import CEILING, RUN, harness, harness_env, only_run, tiny_argv


@pytest.fixture(scope="module")
def killed(tmp_path_factory, tiny_policy_spec) -> Path:
    """A run SIGKILLed at its second optimizer step, with the checkpoint of its first."""
    out = tmp_path_factory.mktemp("killed")
    done = harness([*RUN, "--out", str(out)], HARNESS_FAULT="optimizer_step:2")
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    return only_run(out)


@pytest.fixture(scope="module")
def killed_after_training(tmp_path_factory, tiny_policy_spec) -> Path:
    """A run SIGKILLed at its last decoding step, in its final evaluation: training is done and the checkpoint of its
    last step is what the resume loads the trained weights from."""
    out = tmp_path_factory.mktemp("after")
    log = out / "points.log"
    whole = harness([*RUN, "--out", str(out / "whole")], HARNESS_FAULT_LOG=str(log))
    assert whole.returncode == 0, whole.stderr[-2000:]
    last = Counter(log.read_text().split())["generate"]
    done = harness([*RUN, "--out", str(out / "killed")], HARNESS_FAULT=f"generate:{last}")
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    folder = only_run(out / "killed")
    assert "train" in json.loads((folder / "manifest.json").read_text())["phases_done"]
    assert (folder / "checkpoint" / "model.pt").is_file()
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / folder.name, symlinks=True))


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _everything(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != ".lock"
    }


def _refused(folder: Path, *expected: str) -> str:
    """``--resume`` of ``folder`` is one line on stderr naming each of ``expected``, exit 2, before the model loads,
    and changes nothing in the folder."""
    before = _everything(folder)
    done = harness(["run", "--resume", str(folder)])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"harness: error: cannot resume {folder}"), lines[0]
    for text in expected:
        assert text in lines[0], lines[0]
    assert "loading model" not in done.stdout and "Traceback" not in done.stderr
    assert _everything(folder) == before
    return lines[0]


def test_a_symlinked_checkpoint_folder_is_refused(killed, tmp_path):
    """The checkpoint moved out of the run folder and a symlink left in its place: before, the run trained on."""
    folder = _copy(killed, tmp_path)
    away = tmp_path / "elsewhere"
    shutil.move(folder / "checkpoint", away)
    (folder / "checkpoint").symlink_to(away, target_is_directory=True)
    _refused(folder, "checkpoint", "symbolic link")
    assert (folder / "checkpoint").is_symlink() and (away / "model.pt").is_file()


def test_an_appended_file_that_resolves_outside_the_folder_is_refused(killed, tmp_path):
    """A resume cuts steps.jsonl back: one that is a link to a file elsewhere would cut that file."""
    folder = _copy(killed, tmp_path)
    outside = tmp_path / "steps-elsewhere.jsonl"
    shutil.move(folder / "steps.jsonl", outside)
    (folder / "steps.jsonl").symlink_to(outside)
    _refused(folder, "steps.jsonl", "outside")


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("resolved", lambda m: m["resolved_options"]["trainer"].update(lr=1e-3)),
        ("config", lambda m: m["config"]["options"]["trainer"].update(lr="1e-3")),
    ],
)
def test_an_edited_trainer_option_is_refused(killed, tmp_path, where, change):
    """lr edited in the manifest after the kill: before, resumed silently (with the old value, or the new one)."""
    folder = _copy(killed, tmp_path)
    recorded = json.loads((folder / "manifest.json").read_text())["resolved_options"]["trainer"]["lr"]
    _edit(folder / "manifest.json", change)
    line = _refused(folder, "trainer option lr is ")
    if where == "resolved":
        assert f"trainer option lr is 0.001 in the manifest but the checkpoint was written with {recorded!r}" in line


@pytest.mark.parametrize("seed", [-0.0, 0.0, "0", False])
def test_a_seed_of_another_type_is_refused(killed, tmp_path, seed):
    """0 is the recorded seed; -0.0 == 0 in Python, so before the run resumed to `complete` (with a warning)."""
    folder = _copy(killed, tmp_path)
    assert json.loads((folder / "manifest.json").read_text())["config"]["seed"] == 0
    _edit(folder / "manifest.json", lambda m: m["config"].update(seed=seed))
    _refused(folder, f"seed is {seed!r} in the manifest but the checkpoint was written with 0")


def test_a_step_line_edited_in_place_is_refused(killed, tmp_path):
    """The first step's line changed, same length, still whole JSON: before, resumed silently."""
    folder = _copy(killed, tmp_path)
    steps = folder / "steps.jsonl"
    data = steps.read_bytes()
    first, rest = data.split(b"\n", 1)
    line = json.loads(first)
    key = next(k for k, v in line.items() if isinstance(v, float))
    old = f'"{key}": {json.dumps(line[key])}'.encode()
    new = old[:-1] + (b"1" if old[-1:] != b"1" else b"2")  # its last digit
    assert old in first and json.loads(first.replace(old, new, 1))[key] != line[key]
    steps.write_bytes(first.replace(old, new, 1) + b"\n" + rest)
    assert steps.stat().st_size == len(data)
    _refused(folder, "steps.jsonl", "SHA-256")


class _Stream:
    def __init__(self, file) -> None:
        self.file = file

    def write(self, data: bytes) -> int:
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


def _other_weights(model_pt: Path, into: Path) -> Path:
    """Another run's trained weights for the same model: the same tensors moved a little, saved as the run saves
    them (the same size). The tiny model's 3 steps leave its weights as they were, so two real runs' files agree."""
    import torch

    weights = torch.load(model_pt, map_location="cpu", weights_only=True)
    with torch.no_grad():
        for tensor in {t.data_ptr(): t for t in weights.values()}.values():  # tied weights share a storage
            tensor.add_(1e-3)
    into.parent.mkdir()
    with open(into, "wb") as f:  # as the checkpoint writes it: through a stream (torch's layout differs for a path)
        torch.save(weights, _Stream(f))
    assert into.stat().st_size == model_pt.stat().st_size and into.read_bytes() != model_pt.read_bytes()
    return into


def test_trained_weights_swapped_after_training_are_refused(killed_after_training, tmp_path):
    """Killed during the final evaluation: the resume loads the trained weights from the checkpoint. model.pt
    replaced by another run's of the same size: before, resumed silently (the checkpoint was checked only when
    training was unfinished)."""
    folder = _copy(killed_after_training, tmp_path)
    other = _other_weights(folder / "checkpoint" / "model.pt", tmp_path / "other" / "model.pt")
    shutil.copyfile(other, folder / "checkpoint" / "model.pt")
    _refused(folder, "model.pt", "SHA-256")


def test_trained_weights_swapped_while_training_are_refused(killed, tmp_path):
    """The same during training (refused before too: the checkpoint's SHA-256 was checked there)."""
    folder = _copy(killed, tmp_path)
    other = _other_weights(folder / "checkpoint" / "model.pt", tmp_path / "other" / "model.pt")
    shutil.copyfile(other, folder / "checkpoint" / "model.pt")
    _refused(folder, "model.pt", "SHA-256")


def test_a_checkpoint_from_another_run_is_refused(killed, killed_after_training, tmp_path):
    """The whole checkpoint folder (state.json and all) of another run of the same configuration."""
    folder = _copy(killed, tmp_path)
    shutil.rmtree(folder / "checkpoint")
    shutil.copytree(killed_after_training / "checkpoint", folder / "checkpoint")
    _refused(folder, "the checkpoint")


def test_the_unchanged_copies_still_resume(killed, killed_after_training, tmp_path):
    """The checks refuse only a change: the same folders, untouched, resume to complete."""
    for source in (killed, killed_after_training):
        folder = _copy(source, tmp_path / source.parent.name)
        done = harness(["run", "--resume", str(folder)])
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads((folder / "manifest.json").read_text())["status"] == "complete"


def _read_only_works(folder: Path) -> bool:
    """Whether this machine lets a private mount namespace (``unshare -rm``, root or not) bind ``folder`` read-only."""
    if not shutil.which("unshare"):
        return False
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1"'
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(folder)], capture_output=True)
    return probe.returncode == 0


def test_resume_on_a_read_only_mount_is_one_line(killed, tmp_path):
    """The run folder's disk mounted read-only (a bind mount in a private mount namespace: a folder made
    read-only by chmod does not stop root). Before: a traceback, OSError 30."""
    if not _read_only_works(tmp_path):
        pytest.skip("cannot make a read-only bind mount here (unshare -rm)")
    folder = _copy(killed, tmp_path / "disk")
    view = tmp_path / "view"
    view.mkdir()
    script = (
        f'mount --bind "$1" "$2" && mount -o remount,ro,bind "$2" && '
        f'exec "$3" -m harness run --resume "$2/{folder.name}"'
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(folder.parent), str(view), sys.executable],
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=CEILING,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert f"cannot resume {view / folder.name}" in lines[0] and "read-only" in lines[0], lines[0]
    assert "loading model" not in done.stdout


def _long_path(base: Path) -> Path:
    """Over PATH_MAX (4096 bytes) made of short names, none over NAME_MAX."""
    path = base.joinpath(*["d" * 9] * 420)
    assert len(os.fsencode(str(path))) > 4096
    return path


def test_an_out_longer_than_path_max_is_one_line_before_the_model_loads(tmp_path, tiny_policy_spec):
    done = harness([*tiny_argv("none"), "--out", str(_long_path(tmp_path))])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("harness: error: --out") and "4096" in lines[0], lines[0]
    assert "loading model" not in done.stdout and "Traceback" not in done.stderr


def test_a_resume_longer_than_path_max_is_one_line(tmp_path):
    done = harness(["run", "--resume", str(_long_path(tmp_path) / "20260101-000000-math-grpo-best-of-k")])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("harness: error: cannot resume") and "4096" in lines[0], lines[0]
    assert "Traceback" not in done.stderr
