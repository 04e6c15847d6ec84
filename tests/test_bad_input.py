"""Bad input through the command line, as a user meets it: each case ends with exit status 2 and ONE line on stderr
naming the cause, before any model is loaded where that is possible. `pytest -s` prints the table of what the user
sees, after the last test. (Per-answer faults are counted, not fatal: a raising scorer in test_best_of_k.py, code
that never halts in test_sandbox.py; a broken third-party plugin is skipped and named: test_plugins.py.)"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tiny_runs import tiny_argv

from harness.cli import main
from harness.store.results_db import index_run

EVAL = tiny_argv("none", limit=1, k=1, threads=None, sets={"searcher.n": 1, "searcher.max_new_tokens": 2})
TINY = list(zip(EVAL[1::2], EVAL[2::2], strict=True))  # (flag, value) pairs, for a case to replace its own
SEEN: list[tuple[str, str]] = []


@pytest.fixture(scope="module", autouse=True)
def _table_of_what_the_user_sees():
    """After the module: a Markdown table of each mistake and the one line the user sees (`pytest -s`)."""
    yield
    for what, line in SEEN:
        print(f"| {what} | `{line}` |")


def _files(tmp: Path, model: str | None = None) -> dict[str, str]:
    (tmp / "bad_row.jsonl").write_text('{"problem": "1+1", "answer": "2"}\n{"problem": "2+2"}\n')
    (tmp / "not_json.jsonl").write_text('{"problem": "1+1", "answer": "2"}\n{"problem": \n')
    (tmp / "broken.toml").write_text("trainer = [grpo\n")
    (tmp / "types.toml").write_text("steps = 'many'\n")
    (tmp / "unknown.toml").write_text("optimiser = 'adam'\n")
    (tmp / "a-file").write_text("not a folder\n")
    (tmp / "nested.yaml").write_text("task: [math, [nested]]\n")
    # 526 bytes of YAML that expand to 9^9 strings ("billion laughs")
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"{b}: &{b} [{','.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    (tmp / "bomb.yaml").write_text("\n".join(levels) + "\n")
    done = tmp / "done"
    done.mkdir(exist_ok=True)
    (done / "manifest.json").write_text(
        json.dumps(
            {
                "status": "complete",
                "seed": 0,
                "config": {"task": "math", "trainer": "none", "searcher": "best-of-k", "model": "tiny-random"},
            }
        )
    )
    index_run(tmp / "results.sqlite", done)  # complete and indexed: nothing left to do
    subs = {"tmp": str(tmp)}
    if model:  # the tiny model with its weights cut in half, as an interrupted copy leaves them
        cut = Path(shutil.copytree(model, tmp / "cut-model"))
        weights = cut / "model.safetensors"
        with open(weights, "r+b") as f:
            f.truncate(weights.stat().st_size // 2)
        subs["truncated"] = str(cut)
    return subs


CASES = [
    ("unknown task", ["run", "--task", "mathz"], "unknown task 'mathz'; did you mean math? available:"),
    ("unknown trainer in a grid", ["run", "--trainer", "grpo,grpoo"], "unknown trainer 'grpoo'"),
    (
        "unknown plugin option",
        ["run", "--set", "searcher.nn=4"],
        "unknown option nn; did you mean n (candidate answers per problem)?",
    ),
    ("wrong option type", ["run", "--trainer", "grpo", "--set", "trainer.lr=fast"], "option lr='fast': expected float"),
    ("malformed --set", ["run", "--set", "lr=1"], "expected KIND.KEY=VALUE"),
    ("k larger than n", ["run", "--k", "1,8"], "every k must be in 1..n=1"),
    (
        "dataset row missing a field",
        ["run", "--set", "task.source=jsonl", "--set", "task.path={tmp}/bad_row.jsonl"],
        "row 1 (line 2): 'answer' must be a non-empty string or number",
    ),
    (
        "dataset row not JSON",
        ["run", "--set", "task.source=jsonl", "--set", "task.path={tmp}/not_json.jsonl"],
        "row 1 (line 2): invalid JSON",
    ),
    (
        "dataset file missing",
        ["run", "--set", "task.source=jsonl", "--set", "task.path={tmp}/nope.jsonl"],
        "nope.jsonl",
    ),
    ("config file not TOML", ["run", "--config", "{tmp}/broken.toml"], "not valid toml"),
    ("config value of the wrong type", ["run", "--config", "{tmp}/types.toml"], "steps should be an integer"),
    ("unknown config key", ["run", "--config", "{tmp}/unknown.toml"], "unknown setting(s) optimiser"),
    ("model path that does not exist", ["run", "--model", "./no-such-model"], "model './no-such-model' not found"),
    ("resume a finished run", ["run", "--resume", "{tmp}/done"], "already complete"),
    (
        "report of no finished run",
        ["report", "{tmp}", "--out", "{tmp}/report"],
        "none of the 1 run folders is complete",
    ),
    ("report of a missing folder", ["report", "{tmp}/nope", "--out", "{tmp}/report"], "does not exist"),
    # refused up front, before the model loads (these once failed after it had loaded, or never)
    ("--out is a file", ["run", "--out", "{tmp}/a-file"], "a-file is a file, not a folder"),
    ("--out name too long", ["run", "--out", "{tmp}/" + "a" * 300], "a folder name of 300 bytes is longer than"),
    ("a nested list in YAML", ["run", "--config", "{tmp}/nested.yaml"], "a list of names holds ['nested']"),
    ("too many threads", ["run", "--threads", "100000"], "--threads 100000: at most 1024"),
    ("too many steps", ["run", "--steps", "100000000000000000000000"], "at most 10000000"),
    ("report --out is a file", ["report", "{tmp}", "--out", "{tmp}/a-file"], "a-file is a file, not a folder"),
    ("truncated safetensors model", ["run", "--model", "{truncated}"], "model.safetensors is truncated"),
    ("learning rate nan", ["run", "--trainer", "grpo", "--set", "trainer.lr=nan"], "lr='nan' is not a finite number"),
    ("learning rate inf", ["run", "--trainer", "grpo", "--set", "trainer.lr=inf"], "lr='inf' is not a finite number"),
    (
        "negative learning rate",
        ["run", "--trainer", "grpo", "--set", "trainer.lr=-1"],
        "lr must be in (0, 1], got -1.0",
    ),
    (
        "huge learning rate",
        ["run", "--trainer", "grpo", "--set", "trainer.lr=1e308"],
        "lr must be in (0, 1], got 1e+308",
    ),
    (
        "seed too large for the index",
        ["run", "--seed", "99999999999999999999999"],
        "seed should be in [0, 4294967295], got 99999999999999999999999",
    ),
    ("negative seed", ["run", "--seed", "0,-1"], "seed should be in [0, 4294967295], got -1"),
    (
        "no training problems",
        ["run", "--trainer", "grpo", "--train-limit", "0"],
        "--train-limit should be a positive integer, got 0",
    ),
    (
        "negative checkpoint interval",
        ["run", "--trainer", "grpo", "--checkpoint-every", "-1"],
        "--checkpoint-every should be steps (an integer >= 0) or minutes like 10m, got '-1'",
    ),
    (
        "checkpoint interval of no minutes",
        ["run", "--trainer", "grpo", "--checkpoint-every", "0m"],
        "--checkpoint-every should be steps (an integer >= 0) or minutes like 10m, got '0m'",
    ),
    ("trainer options without a trainer", ["run", "--set", "trainer.lr=nan"], "this run trains nothing"),
    ("YAML alias bomb", ["run", "--config", "{tmp}/bomb.yaml"], "bomb.yaml: its aliases expand to more than"),
]


@pytest.fixture
def no_model_load(monkeypatch):
    """Every case here is refused before a model loads: loading one fails the test."""
    from transformers import AutoModelForCausalLM

    def refuse(*_, **__):
        raise AssertionError("the model was loaded before the input was refused")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)


@pytest.mark.parametrize(("what", "argv", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(what, argv, expected, tmp_path, capsys, tiny_policy_spec, no_model_load):
    subs = _files(tmp_path, tiny_policy_spec if any("{truncated}" in a for a in argv) else None)
    argv = [a.format(**subs) for a in argv]
    if argv[0] == "run" and "--resume" not in argv and "--config" not in argv:
        argv += [a for flag, value in TINY if flag == "--set" or flag not in argv for a in (flag, value)]
        argv += ["--out", str(tmp_path / "runs")] if "--out" not in argv else []
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected.lower() in err[0].lower(), err
    assert not list(tmp_path.glob("runs/*")), "a refused run left a folder behind"
    SEEN.append((what, err[0]))


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("searcher.n=100000000000000000000", "option n='100000000000000000000' is out of its bounds (1..100000)"),
        ("searcher.max_new_tokens=1000000000000", "max_new_tokens='1000000000000' is out of its bounds (1..131072)"),
    ],
)
def test_searcher_sizes_no_run_needs_are_refused_before_the_model_loads(
    option, expected, tmp_path, capsys, no_model_load
):
    """n = 1e20 grew to 18 GB before the kernel killed the process; max_new_tokens = 1e12 failed after the load."""
    assert (
        main(["run", "--model", "tiny-random", "--trainer", "none", "--set", option, "--out", str(tmp_path / "runs")])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


@pytest.mark.parametrize("kind", ["searcher", "trainer"])
def test_a_generation_budget_beyond_the_model_s_context_is_refused_before_it_loads(
    kind, tmp_path, capsys, no_model_load
):
    """tiny-random reads 2048 tokens (its config's max_position_embeddings): a budget of 2048 new tokens leaves no
    room for the prompt. Before, the model loaded and decoded past its positions."""
    trainer = "grpo" if kind == "trainer" else "none"
    assert (
        main(
            [
                "run",
                "--model",
                "tiny-random",
                "--trainer",
                trainer,
                "--set",
                f"{kind}.max_new_tokens=2048",
                "--out",
                str(tmp_path / "runs"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{kind}.max_new_tokens=2048: model 'tiny-random' reads at most 2048 tokens" in err[0], err


def test_a_full_disk_is_one_line_and_keeps_what_was_written(tmp_path, capsys, tiny_policy_spec):
    """A 12 KiB tmpfs as --out: the run fills it; the user gets one line and the folder keeps its complete files."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        assert main([*EVAL, "--out", str(disk)]) == 1  # a run that failed
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("harness:")]
        assert len(err) == 1 and "no space left writing" in err[0] and "--resume" in err[0], err
        SEEN.append(("disk full", err[0]))
        (folder,) = [p for p in disk.iterdir() if p.is_dir()]
        json.loads((folder / "manifest.json").read_text())  # whole, not half-written
        assert not list(folder.glob(".*.tmp"))  # no temporary file left behind
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _mount_tmpfs(folder: Path, options: str) -> None:
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")


def test_a_read_only_out_is_one_line_before_the_model_loads(tmp_path, capsys, tiny_policy_spec, no_model_load):
    """A read-only mount refuses even root, so this is what a read-only --out is whoever runs the test. Before,
    `run` loaded the model first and both commands ended in a PermissionError or OSError traceback."""
    disk = tmp_path / "read-only"
    _mount_tmpfs(disk, "ro,size=64k")
    try:
        assert main([*EVAL, "--out", str(disk / "runs")]) == 2
        assert main(["report", str(tmp_path), "--out", str(disk / "report")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2 and all("cannot write in" in line and str(disk) in line for line in err), err
        SEEN.append(("--out on a read-only disk", err[0]))
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_during_a_checkpoint_is_one_line_and_leaves_no_partial_copy(tmp_path, capsys, tiny_policy_spec):
    """24 MiB: the folder's files and the checkpoint's model.pt (13 MB) fit, its optimizer.pt (26 MB) does not.
    Before: "[enforce fail at inline_container.cc:672]" naming no cause, and a .checkpoint.tmp left behind."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "size=24m")
    try:
        sizes = {"trainer.max_new_tokens": 2, "searcher.n": 1, "searcher.max_new_tokens": 2}
        argv = tiny_argv(limit=1, train_limit=1, k=1, threads=None, sets=sizes)
        assert main([*argv, "--out", str(disk)]) == 1  # the run had started: its folder says failed
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("harness:")]
        assert len(err) == 1 and "no space left writing" in err[0] and ".checkpoint.tmp/optimizer.pt" in err[0], err
        SEEN.append(("disk full during a checkpoint", err[0]))
        (folder,) = [p for p in disk.iterdir() if p.is_dir()]
        assert not (folder / ".checkpoint.tmp").exists()
        assert json.loads((folder / "manifest.json").read_text())["status"] == "failed"
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_index_and_report_on_a_full_disk_are_one_line_each(tmp_path, capsys, tiny_policy_spec):
    """A folder of runs on a disk with no space left: `harness index` and `harness report` each end in one line
    (before: a sqlite3.OperationalError traceback from the results store), and the run folders are untouched."""
    runs = tmp_path / "runs"
    assert main([*EVAL, "--out", str(runs)]) == 0
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "size=512k")
    try:
        (run,) = [p for p in runs.iterdir() if p.is_dir()]
        shutil.copytree(run, disk / run.name)
        manifest = (disk / run.name / "manifest.json").read_text()
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as filler:  # fill what is left
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        capsys.readouterr()
        assert main(["index", str(disk)]) == 2
        assert main(["report", str(disk), "--out", str(disk / "report")]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 2 and all(
            line.startswith("harness: error: the results store could not be written") for line in err
        ), err
        SEEN.append(("index on a full disk", err[0]))
        assert (disk / run.name / "manifest.json").read_text() == manifest
    finally:
        subprocess.run(["umount", str(disk)], check=True)
