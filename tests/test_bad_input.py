"""Bad input through the command line, as a user meets it: each case ends with exit status 2 and ONE line on stderr
naming the cause, before any model is loaded where that is possible. `pytest -s` prints the table of what the user
sees, after the last test. (Per-answer faults are counted, not fatal: a raising scorer in test_best_of_k.py, code
that never halts in test_sandbox.py; a broken third-party plugin is skipped and named: test_plugins.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.cli import main

TINY = [("--model", "tiny-random"), ("--trainer", "none"), ("--limit", "1"), ("--k", "1"),
        ("--set", "searcher.n=1"), ("--set", "searcher.max_new_tokens=2")]
SEEN: list[tuple[str, str]] = []


@pytest.fixture(scope="module", autouse=True)
def _table_of_what_the_user_sees():
    """After the module: the table for the issue note (shown with `pytest -s`)."""
    yield
    for what, line in SEEN:
        print(f"| {what} | `{line}` |")


def _files(tmp: Path) -> dict[str, str]:
    (tmp / "bad_row.jsonl").write_text('{"problem": "1+1", "answer": "2"}\n{"problem": "2+2"}\n')
    (tmp / "not_json.jsonl").write_text('{"problem": "1+1", "answer": "2"}\n{"problem": \n')
    (tmp / "broken.toml").write_text("trainer = [grpo\n")
    (tmp / "types.toml").write_text("steps = 'many'\n")
    (tmp / "unknown.toml").write_text("optimiser = 'adam'\n")
    done = tmp / "done"
    done.mkdir(exist_ok=True)
    (done / "manifest.json").write_text(json.dumps({"status": "complete"}))
    return {"tmp": str(tmp)}


CASES = [
    ("unknown task", ["run", "--task", "mathz"], "unknown task 'mathz'; available:"),
    ("unknown trainer in a grid", ["run", "--trainer", "grpo,grpoo"], "unknown trainer 'grpoo'"),
    ("unknown plugin option", ["run", "--set", "searcher.nn=4"], "unknown option(s) nn"),
    ("wrong option type", ["run", "--trainer", "grpo", "--set", "trainer.lr=fast"], "lr='fast' should be a float"),
    ("malformed --set", ["run", "--set", "lr=1"], "expected KIND.KEY=VALUE"),
    ("k larger than n", ["run", "--k", "1,8"], "every k must be in 1..n=1"),
    ("dataset row missing a field", ["run", "--set", "task.source=jsonl", "--set", "task.path={tmp}/bad_row.jsonl"],
     "row 1 (line 2): 'answer' must be a non-empty string or number"),
    ("dataset row not JSON", ["run", "--set", "task.source=jsonl", "--set", "task.path={tmp}/not_json.jsonl"],
     "row 1 (line 2): invalid JSON"),
    ("dataset file missing", ["run", "--set", "task.source=jsonl", "--set", "task.path={tmp}/nope.jsonl"],
     "nope.jsonl"),
    ("config file not TOML", ["run", "--config", "{tmp}/broken.toml"], "not valid toml"),
    ("config value of the wrong type", ["run", "--config", "{tmp}/types.toml"], "steps should be an integer"),
    ("unknown config key", ["run", "--config", "{tmp}/unknown.toml"], "unknown setting(s) optimiser"),
    ("model path that does not exist", ["run", "--model", "./no-such-model"], "model './no-such-model' not found"),
    ("resume a finished run", ["run", "--resume", "{tmp}/done"], "already complete"),
    ("report of no finished run", ["report", "{tmp}", "--out", "{tmp}/report"],
     "none of the 1 run folders is complete"),
    ("report of a missing folder", ["report", "{tmp}/nope", "--out", "{tmp}/report"], "does not exist"),
]


@pytest.mark.parametrize(("what", "argv", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(what, argv, expected, tmp_path, capsys, tiny_policy_spec):
    subs = _files(tmp_path)
    argv = [a.format(**subs) for a in argv]
    if argv[0] == "run" and "--resume" not in argv and "--config" not in argv:
        argv += [a for flag, value in TINY if flag == "--set" or flag not in argv for a in (flag, value)]
        argv += ["--out", str(tmp_path / "runs")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected.lower() in err[0].lower(), err
    SEEN.append((what, err[0]))


def test_a_full_disk_is_one_line_and_keeps_what_was_written(tmp_path, capsys, tiny_policy_spec):
    """A 12 KiB tmpfs as --out: the run fills it; the user gets one line and the folder keeps its complete files."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        assert main(["run", *[a for pair in TINY for a in pair], "--out", str(disk)]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("harness:")]
        assert len(err) == 1 and "no space left writing" in err[0] and "--resume" in err[0], err
        SEEN.append(("disk full", err[0]))
        (folder,) = [p for p in disk.iterdir() if p.is_dir()]
        json.loads((folder / "manifest.json").read_text())  # whole, not half-written
        assert not list(folder.glob(".*.tmp"))  # no temporary file left behind
    finally:
        subprocess.run(["umount", str(disk)], check=True)
