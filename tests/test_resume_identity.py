"""A resume continues the run its checkpoint recorded, and keeps that run's record. Before: a manifest edited after
the kill (another trainer, another seed, other versions) was resumed as the edited run, and every resume rewrote
the manifest's harness and package versions with its own, so nothing said what the first half ran with. Now the
checkpoint (and each phase's snapshot) records the trainer, seed and versions: a manifest that no longer matches
is refused in one line naming what differs, before the model loads; the first half's versions stay, and a resume
under other versions is recorded beside them (``resumed_versions``). Real processes on the tiny model."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from tiny_runs import RUN, harness, only_run


@pytest.fixture(scope="module")
def killed(tmp_path_factory, tiny_policy_spec) -> Path:
    """A run SIGKILLed at its second optimizer step, with the checkpoint of its first."""
    out = tmp_path_factory.mktemp("killed")
    done = harness([*RUN, "--out", str(out)], HARNESS_FAULT="optimizer_step:2")
    assert done.returncode == -signal.SIGKILL
    return only_run(out)


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


EDITS = {
    "trainer": lambda m: m["config"].update(trainer="sft"),
    "seed": lambda m: m["config"].update(seed=1),
    "harness_version": lambda m: m.update(harness_version="0.0.1"),
    "torch": lambda m: m["packages"].update(torch="0.0.1"),
}


@pytest.mark.parametrize("field", EDITS)
def test_resume_refuses_a_manifest_that_no_longer_matches_its_checkpoint(killed, tmp_path, field):
    folder = Path(shutil.copytree(killed, tmp_path / killed.name))
    _edit(folder / "manifest.json", EDITS[field])
    before = (folder / "manifest.json").read_bytes()
    done = harness(["run", "--resume", str(folder)])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert f"no longer matches the checkpoint: {field} " in lines[0] and "loading model" not in done.stdout
    assert (folder / "manifest.json").read_bytes() == before


def _replace_version(value, name: str, old: str, new: str):
    """Every recorded version of package ``name`` that is ``old``, made ``new`` (manifest and snapshots alike)."""
    if isinstance(value, dict):
        return {k: new if k == name and v == old else _replace_version(v, name, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_version(v, name, old, new) for v in value]
    return value


def test_resume_keeps_the_versions_the_first_half_ran_with(killed, tmp_path):
    """The first half recorded torch 0.0.1 (made so in its manifest and checkpoint alike): the resumed run ends
    complete still saying 0.0.1, with the version it resumed under beside it."""
    folder = Path(shutil.copytree(killed, tmp_path / killed.name))
    current = json.loads((folder / "manifest.json").read_text())["packages"]["torch"]
    for path in (folder / "manifest.json", folder / "checkpoint" / "state.json"):
        path.write_text(json.dumps(_replace_version(json.loads(path.read_text()), "torch", current, "0.0.1")))
    done = harness(["run", "--resume", str(folder)])
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["packages"]["torch"] == "0.0.1"
    assert manifest["resumed_versions"][-1]["packages"]["torch"] == current
