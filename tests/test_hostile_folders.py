"""`harness index` and `harness report` over run folders someone else wrote: one good run beside folders whose
manifest.json, metrics.json or samples.jsonl holds values no run writes (nulls at each field, huge and negative
numbers, wrong types, lists where objects go, very long strings, deep nesting), and values a run may hold but a
page must not trust (path-like names, markup). Before: a "seed" of 99999999999999999999999 ended `harness index`
and `harness report` with OverflowError, and a "config" of null ended the report with AttributeError. Now every
folder whose values are wrong is skipped in one line naming it, the file and the field; those whose values are
merely odd are indexed and reported, their markup escaped and their names writing nothing outside --out."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import CEILING, EVAL, harness, harness_env, only_run

VALUES = {  # label: a hostile value
    "null": None,
    "huge": 99999999999999999999999,
    "negative": -1,
    "nan": float("nan"),
    "list": ["x"],
    "object": {"x": 1},
    "long": "x" * 100_000,
    "up": "../../x",
    "absolute": "/abs",
    "markup": "<script>alert(1)</script>",
}
ODD_TEXT = {"up", "absolute", "markup"}  # a string a run could hold: indexed, shown escaped
ACCEPTED = {  # the kind of a manifest field: the labels of VALUES a valid manifest may hold there
    "name": ODD_TEXT,
    "text?": {"null", *ODD_TEXT},
    "count?": {"null"},
    "seed": set(),
    "seed?": {"null"},
    "seconds?": {"null"},
    "object": {"object"},
    "object?": {"null", "object"},
    "texts?": {"null", "list"},
    "answers?": {"null"},
    "any": {"null", "negative", "nan", "list", "object", *ODD_TEXT},
}
FIELDS = {  # every manifest field the index or the report reads, and its kind
    "status": "name",
    "config": "object",
    "config.task": "name",
    "config.trainer": "name",
    "config.searcher": "name",
    "config.model": "name",
    "config.seed": "seed?",
    "seed": "seed",
    "config.preset": "text?",
    "config.arm": "text?",
    "config.engine": "text?",
    "config.k": "text?",
    "config.threads": "count?",
    "config.options": "object?",
    "config.options.searcher": "object?",
    "started": "text?",
    "seconds": "seconds?",
    "error": "text?",
    "warnings": "texts?",
    "processes": "count?",
    "harness_version": "text?",
    "task": "object?",
    "task.name": "text?",
    "task.version": "text?",
    "task.eval_problems": "count?",
    "task.data_source": "any",
    "model": "object?",
    "model.spec": "text?",
    "model.source": "text?",
    "model.dtype": "text?",
    "model.parameters": "count?",
    "packages": "object?",
    "resolved_options": "object?",
    "resolved_options.task": "object?",
    "resolved_options.searcher": "object?",
    "resolved_options.searcher.answers_per_rollout": "answers?",
}
DEEP = "[" * 100_000 + "]" * 100_000  # deeper than Python's JSON parser recurses


def _set(manifest: dict, field: str, value) -> dict:
    *parents, last = field.split(".")
    at = manifest
    for key in parents:
        at = at.setdefault(key, {})
    at[last] = value
    return manifest


def _cases() -> dict[str, tuple[str, str, object]]:
    """folder name: (file, the field its skip line must name or "" when it is to be indexed, how to spoil it)."""
    cases = {}
    for field, kind in FIELDS.items():
        for label, value in VALUES.items():
            named = "" if label in ACCEPTED[kind] else field
            if (field, label) == ("config", "object"):  # an object, but without the run's names
                named = "config.task"
            cases[f"{field}={label}"] = ("manifest.json", named, lambda m, f=field, v=value: _set(m, f, v))
    cases["warnings=markup-line"] = ("manifest.json", "", lambda m: _set(m, "warnings", [VALUES["markup"]]))
    cases["task.data_source=deep"] = (
        "manifest.json",
        "task.data_source",
        lambda m: _set(m, "task.data_source", json.loads("[" * 80 + "]" * 80)),
    )
    cases["manifest=too-deep-to-parse"] = ("manifest.json", "not valid JSON", DEEP)
    cases["metric=huge"] = ("metrics.json", "before/pass@1", lambda m: {**m, "before/pass@1": 10**400})
    cases["metric=long-name"] = ("metrics.json", "key", lambda m: {**m, "x" * 5000: 1.0})
    cases["metric=curve-huge"] = ("metrics.json", "train/loss", lambda m: {**m, "train/loss": [0.0, 10**400]})
    cases["sample=huge-scalar"] = ("samples.jsonl", "line 1: scalar", lambda r: {**r, "scalar": 10**400})
    cases["sample=text-object"] = ("samples.jsonl", "line 1: text", lambda r: {**r, "text": {"x": 1}})
    cases["sample=huge-call"] = ("samples.jsonl", "line 1: call", lambda r: {**r, "call": 10**30})
    cases["sample=too-deep-to-parse"] = ("samples.jsonl", "line 1: not valid JSON", DEEP)
    return cases


def _spoil(folder: Path, file: str, spoil) -> None:
    path = folder / file
    if isinstance(spoil, str):  # the file's first line replaced by this text
        lines = path.read_text().splitlines(keepends=True)
        path.write_text(spoil + "\n" + "".join(lines[1:]) if file.endswith(".jsonl") else spoil)
    elif file.endswith(".jsonl"):
        lines = path.read_text().splitlines()
        path.write_text("\n".join([json.dumps(spoil(json.loads(lines[0]))), *lines[1:]]) + "\n")
    else:
        path.write_text(json.dumps(spoil(json.loads(path.read_text()))))


@pytest.fixture(scope="module")
def good_run(tmp_path_factory, tiny_policy_spec) -> Path:
    """An evaluation of the tiny model (no training: a trained run's copies would each draw their curves)."""
    out = tmp_path_factory.mktemp("good")
    done = harness([*EVAL, "--out", str(out)])
    assert done.returncode == 0, done.stderr[-2000:]
    return only_run(out)


def _harness_in(cwd: Path, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=CEILING,
        cwd=cwd,
    )


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_index_and_report_skip_every_hostile_folder_naming_file_and_field(good_run, tmp_path):
    runs = tmp_path / "runs"
    cases = _cases()
    for name in ("good", *cases):
        shutil.copytree(good_run, runs / name)
    for name, (file, _, spoil) in cases.items():
        _spoil(runs / name, file, spoil)
    before = _files(tmp_path)
    assert not Path("/abs").exists()

    index = _harness_in(tmp_path, ["index", str(runs)])
    report = _harness_in(tmp_path, ["report", str(runs), "--out", str(tmp_path / "out")])

    assert index.returncode == 0 and "Traceback" not in index.stderr, index.stderr[-3000:]
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr[-3000:]
    kept = {"good", *(name for name, (_, named, _) in cases.items() if not named)}
    assert f"indexed {len(kept)} runs" in index.stdout
    conn = sqlite3.connect(runs / "results.sqlite")
    assert {Path(r[0]).name for r in conn.execute("SELECT run_dir FROM runs")} == kept
    conn.close()
    for name, (file, named, _) in cases.items():
        if named:
            for done in (index, report):
                (line,) = [x for x in done.stdout.splitlines() if x.startswith("skipped ") and f"/{name}: " in x]
                assert file in line and named in line, line
    rows = json.loads((tmp_path / "out" / "leaderboard.json").read_text())["rows"]
    assert "good" in {row["run"] for row in rows}
    for page in ("index.html", "report.md"):
        assert "<script>alert" not in (tmp_path / "out" / page).read_text()  # (the page has scripts of its own)
    written = _files(tmp_path) - before
    assert all(p.is_relative_to(tmp_path / "out") or p.parent == runs for p in written), sorted(written)
    assert not Path("/abs").exists()
