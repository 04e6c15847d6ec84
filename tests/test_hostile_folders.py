"""`harness index` and `harness report` over run folders someone else wrote: one good run beside folders whose
manifest.json, metrics.json or samples.jsonl holds values no run writes (nulls at each field, huge and negative
numbers, wrong types, lists where objects go, very long strings, deep nesting), and values a run may hold but a
page must not trust (path-like names, markup). Before: a "seed" of 99999999999999999999999 ended `harness index`
and `harness report` with OverflowError, and a "config" of null ended the report with AttributeError. Now every
folder whose values are wrong is skipped in one line naming it, the file and the field; those whose values are
merely odd are indexed and reported, their markup escaped and their names writing nothing outside --out."""

from __future__ import annotations

import json
import os
import re
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


# --- Reading any folder safely. Each of these broke `harness index` or `harness report` before harness/store/reading.py
# read every run file; each test is the case as it was met, through the CLI in a fresh process, beside the good run.


def _copy(good_run: Path, runs: Path, name: str | bytes = "x") -> Path:
    folder = Path(os.fsdecode(os.path.join(os.fsencode(runs), os.fsencode(name))))
    shutil.copytree(good_run, folder)
    shutil.copytree(good_run, runs / "good", dirs_exist_ok=True)
    return folder


def _edit_json(path: Path, edit) -> None:
    value = json.loads(path.read_text())
    edit(value)
    path.write_text(json.dumps(value))


def _edit_samples(folder: Path, edit) -> None:
    lines = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    for line in lines:
        edit(line)
    (folder / "samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def _index_and_report(tmp_path: Path, runs: Path, timeout: float = CEILING) -> tuple:
    """`harness index RUNS` and `harness report RUNS --out OUT`, each a fresh process; both must exit 0 without a
    traceback, and print only UTF-8, one line per thing said."""
    done = []
    for args in (["index", str(runs)], ["report", str(runs), "--out", str(tmp_path / "out")]):
        one = subprocess.run(
            [sys.executable, "-m", "harness", *args],
            env=harness_env(),
            capture_output=True,
            timeout=timeout,
            cwd=tmp_path,
        )
        stdout, stderr = one.stdout.decode("utf-8"), one.stderr.decode("utf-8")  # not UTF-8: an error here
        assert one.returncode == 0 and "Traceback" not in stderr, (args[0], stderr[-3000:])
        assert all(x.startswith(("skipped ", "indexed ", "report of ")) for x in stdout.splitlines()), stdout
        done.append(stdout)
    return tuple(done)


def _indexed(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {Path(r[0]).name for r in conn.execute("SELECT run_dir FROM runs")}
    finally:
        conn.close()


def test_names_the_report_reads_given_as_lists_or_huge_numbers_are_shown_as_text(good_run, tmp_path):
    """Before: a reward function's name given as a list ended `harness report` with "TypeError: unhashable type:
    'list'" (exit 1). Fields only the report reads are run data too: a name that is a list or an object, a weight
    that is not a number, each is shown as the text it is, and the run is reported."""
    runs = tmp_path / "runs"
    edits = {
        "function-name-list": lambda m: m["task"].__setitem__("reward_functions", [{"name": ["a"], "spec": ["m:f"]}]),
        "weight-text": lambda m: m["task"]["reward_weights"].__setitem__("correct", {"w": "<b>"}),
        "task-plugin-name-object": lambda m: m["plugins"]["task"].__setitem__("name", {"x": [1]}),
        "package-list": lambda m: m["plugin_packages"].__setitem__("task:math", ["a", "b"]),
        "behaviour-list": lambda m: m["resolved_options"]["trainer"].__setitem__("behaviour", ["b"]),
        "card-name-list": lambda m: m["task"]["data_card"].__setitem__("name", ["c", {"d": 1}]),
    }
    for name, edit in edits.items():
        _edit_json(_copy(good_run, runs, name) / "manifest.json", edit)

    _, report = _index_and_report(tmp_path, runs)

    assert "skipped" not in report
    assert _indexed(tmp_path / "out" / "results.sqlite") == {"good", *edits}
    page = (tmp_path / "out" / "index.html").read_text()
    assert "[&#39;c&#39;, {&#39;d&#39;: 1}]" in page and "[&#39;a&#39;, &#39;b&#39;]" in page  # lists, as text


def test_a_400_digit_integer_is_skipped_and_named_before_any_arithmetic(good_run, tmp_path):
    """Before: a sample's behaviour score of 10^400 ended `harness index` and `harness report` with OverflowError
    (exit 1), and a metrics key pass@<400 digits> ended the report so. Now each folder is skipped, named with the
    file and the field, and the good run is reported."""
    runs = tmp_path / "runs"
    _edit_samples(_copy(good_run, runs, "behaviour-huge"), lambda s: s.__setitem__("behaviours", {"b": 10**400}))
    _edit_json(_copy(good_run, runs, "k-huge") / "metrics.json", lambda m: m.__setitem__("eval/pass@" + "9" * 400, 0.5))
    _edit_json(_copy(good_run, runs, "value-huge") / "metrics.json", lambda m: m.__setitem__("eval/pass@1", 1e300))

    for said in _index_and_report(tmp_path, runs):
        lines = {line.split(": ", 1)[0].rsplit("/", 1)[-1]: line for line in said.splitlines() if "skipped" in line}
        assert "samples.jsonl line 1: behaviours.'b'" in lines["behaviour-huge"]
        assert "metrics.json: key 'eval/pass@999" in lines["k-huge"] and "k should be in" in lines["k-huge"]
        assert "metrics.json: 'eval/pass@1': 1e+300 is beyond" in lines["value-huge"]
    assert _indexed(tmp_path / "out" / "results.sqlite") == {"good"}


def test_a_lone_surrogate_and_a_folder_name_not_utf8_are_indexed_and_shown_escaped(good_run, tmp_path):
    """Before: a manifest string holding a lone UTF-16 surrogate ("\\ud800", valid JSON) and a run folder whose name
    has a byte that is not UTF-8 each ended both commands with "'utf-8' codec can't encode character" (exit 2,
    nothing indexed). Now the surrogate is replaced (U+FFFD), the name shown with the byte escaped, and both run."""
    runs = tmp_path / "runs"
    surrogate = _copy(good_run, runs, "surrogate") / "manifest.json"
    surrogate.write_text(surrogate.read_text().replace('"model": "tiny-random"', '"model": "tiny\\ud800random"'))
    _copy(good_run, runs, b"name\xff")
    spoiled = _copy(good_run, runs, b"broken\xfe")
    (spoiled / "metrics.json").write_text("{")

    index, report = _index_and_report(tmp_path, runs)

    assert _indexed(runs / "results.sqlite") == {"good", "surrogate", "name\\xff"}
    for said in (index, report):
        assert "broken\\xfe: metrics.json: not valid JSON" in said
    page = (tmp_path / "out" / "index.html").read_text()
    assert "tiny\ufffdrandom" in page and "name\\xff" in page


def test_links_out_of_the_folder_fifos_and_devices_are_not_opened(good_run, tmp_path):
    """Before: a run's samples.jsonl that was a link to /dev/zero was read until memory ran out (2 GB in 5 s), and
    a metrics.json that was a FIFO hung both commands for good. Now neither is opened: each folder is skipped in
    one line saying what the file is; a link inside the folder is read as the file it points to."""
    runs = tmp_path / "runs"
    zero = _copy(good_run, runs, "zero") / "samples.jsonl"
    zero.unlink()
    os.symlink("/dev/zero", zero)
    fifo = _copy(good_run, runs, "fifo") / "metrics.json"
    fifo.unlink()
    os.mkfifo(fifo)
    outside = _copy(good_run, runs, "outside") / "manifest.json"
    shutil.copy(outside, tmp_path / "elsewhere.json")
    outside.unlink()
    os.symlink(tmp_path / "elsewhere.json", outside)
    inside = _copy(good_run, runs, "inside")
    (inside / "manifest.json").rename(inside / "real-manifest.json")
    os.symlink("real-manifest.json", inside / "manifest.json")
    loop = _copy(good_run, runs, "loop") / "samples.jsonl"
    loop.unlink()
    os.symlink(loop, loop)

    for said in _index_and_report(tmp_path, runs, timeout=120):
        lines = {line.split(": ", 1)[0].rsplit("/", 1)[-1]: line for line in said.splitlines() if "skipped" in line}
        assert "samples.jsonl: a link pointing outside the run folder (to /dev/zero); not read" in lines["zero"]
        assert "metrics.json: a FIFO, not a regular file; not read" in lines["fifo"]
        assert "manifest.json (a link pointing outside the run folder" in lines["outside"]
        assert "samples.jsonl: a loop of links" in lines["loop"]
    assert _indexed(tmp_path / "out" / "results.sqlite") == {"good", "inside"}


def test_a_50_mb_string_is_not_copied_whole_into_the_page(good_run, tmp_path):
    """Before: a sample's 50 MB text was copied whole into index.html (a 50 MB page; its extracted answer beside it
    too). Now a page shows at most 10,000 characters of any one string, saying how many it left out; a manifest
    string over 65,536 characters skips its folder, and a samples.jsonl line over 64 MiB its, named."""
    runs = tmp_path / "runs"
    big = "y" * 50_000_000
    _edit_samples(_copy(good_run, runs, "text"), lambda s: s.update(text=big, extracted=big[:5_000_000]))
    _edit_samples(_copy(good_run, runs, "line"), lambda s: s.update(text=big, extracted=big))
    _edit_json(_copy(good_run, runs, "manifest") / "manifest.json", lambda m: m.__setitem__("warnings", [big]))

    _, report = _index_and_report(tmp_path, runs)

    page = tmp_path / "out" / "index.html"
    assert page.stat().st_size < 1_000_000 and "more characters not shown" in page.read_text()
    assert (tmp_path / "out" / "report.md").stat().st_size < 1_000_000
    assert "manifest: manifest.json: warnings[0]: a string longer than 65,536 characters" in report
    assert "line: samples.jsonl line 1: longer than the limit of 64 MiB" in report
    assert _indexed(tmp_path / "out" / "results.sqlite") == {"good", "text"}


def test_markdown_and_html_from_run_data_are_text_in_every_page(good_run, tmp_path):
    """Before: report.md carried an image link from a warning (![x](http://...), fetched wherever the Markdown is
    shown) and a link in a model's name live. Now every Markdown construct from run data is escaped in report.md,
    and HTML escaped in both pages."""
    runs = tmp_path / "runs"

    def hostile(m):
        m["warnings"] = ["see ![x](http://evil.example/x.png) and <img src=x onerror=alert(1)>"]
        m["config"]["model"] = "[click](http://evil.example) **bold** `code`"
        m["config"]["arm"] = "# heading | cell"

    _edit_json(_copy(good_run, runs) / "manifest.json", hostile)

    _index_and_report(tmp_path, runs)

    md = (tmp_path / "out" / "report.md").read_text()
    assert not re.search(r"(?<!\\)\]\(http", md) and "<img" not in md  # run data's "](" is written "\]("
    assert "!\\[x\\](http://evil.example/x.png)" in md and "\\[click\\](http://evil.example) \\*\\*bold" in md
    page = (tmp_path / "out" / "index.html").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_an_out_longer_than_path_max_is_one_line(good_run, tmp_path):
    """Before: a --out (and a folder to index) longer than PATH_MAX, made of short names, ended `harness report` and
    `harness index` with a traceback (OSError: [Errno 36] File name too long). Now each is one line, exit 2."""
    runs = tmp_path / "runs"
    _copy(good_run, runs)
    long = tmp_path.joinpath(*["abcdefghi"] * 500)
    for args in (["report", str(runs), "--out", str(long)], ["index", str(long)]):
        done = _harness_in(tmp_path, args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        (line,) = done.stderr.strip().splitlines()
        assert "over the system's limit of 4,095 (PATH_MAX)" in line
