"""The results store and the leaderboard report, built from real (tiny) runs and from hand-made run folders."""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import shutil
import sqlite3
from pathlib import Path

import pytest

from harness.cli import main
from harness.metrics.unbiased import pass_at_k
from harness.report.build import build_report
from harness.report.data import bootstrap, leaderboard, wilson
from harness.report.screenshot import find_chromium, screenshot
from harness.run import RunConfig, run
from harness.store.results_db import connect, find_runs, index_run, rebuild

TINY = {"task": {}, "trainer": {"group_size": 2, "prompts_per_step": 1, "max_new_tokens": 4},
        "searcher": {"n": 4, "max_new_tokens": 4}}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, plugins, tiny_policy_spec):
    """An evaluation-only run and a GRPO run of the tiny model, on the same 3 problems."""
    out = tmp_path_factory.mktemp("runs")
    folders = [run(RunConfig(trainer=trainer, model="tiny-random", steps=2, limit=3, train_limit=2, k="1,2,4",
                             out=str(out), options=json.loads(json.dumps(TINY))), plugins=plugins,
                   echo=lambda _: None)
               for trainer in ("none", "grpo")]
    return out, folders


def test_report_table_matches_the_runs_metrics(two_runs, tmp_path):
    out, folders = two_runs
    html = build_report([out], tmp_path / "report", echo=lambda _: None)
    assert html.exists() and (tmp_path / "report" / "report.md").exists()
    table = list(csv.DictReader((tmp_path / "report" / "leaderboard.csv").read_text().splitlines()))
    assert len(table) == 3  # none: eval; grpo: before, after
    for folder in folders:
        metrics = json.loads((folder / "metrics.json").read_text())
        mine = [r for r in table if r["run"] == folder.name]
        assert {r["phase"] for r in mine} == ({"eval"} if "none" in folder.name else {"before", "after"})
        for row in mine:
            for name in ("pass@1", "pass@2", "pass@4", "best@1", "best@4"):
                assert float(row[name]) == pytest.approx(metrics[f"{row['phase']}/{name}"], abs=1e-12)
                low, high = float(row[f"{name}_low"]), float(row[f"{name}_high"])
                assert low <= float(row[name]) + 1e-12 and float(row[name]) <= high + 1e-12
    page = html.read_text()
    assert "pass@4" in page and all(f.name in page for f in folders)
    plots = {p.name for p in (tmp_path / "report" / "plots").iterdir()}
    assert {"math-pass-at-k.png", "math-best-at-k.png"} <= plots
    assert any(p.startswith("train-") for p in plots)  # the GRPO run's reward curves
    md = (tmp_path / "report" / "report.md").read_text()
    assert md.count("\n| math |") == 3 and "![math pass@k](plots/math-pass-at-k.png)" in md
    data = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    assert len(data["table"]) == 3 and data["rows"][0]["headline"]["pass@1"]["value"] is not None


def test_report_command_line(two_runs, tmp_path, capsys):
    out, _ = two_runs
    assert main(["report", str(out), "--out", str(tmp_path / "r")]) == 0
    assert "index.html" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "r2")]) == 2
    assert "does not exist" in capsys.readouterr().err


def _fake_run(root: Path, name: str, problems: list[tuple[int, list[bool]]], status: str = "complete",
              phase: str = "eval", extra: dict | None = None, manifest: dict | None = None) -> Path:
    """A hand-made run folder: per problem, the success of each candidate (scalar 1.0 / 0.0); ``extra`` metrics
    and ``manifest`` fields are added as given."""
    folder = root / name
    folder.mkdir(parents=True)
    counts = [(len(s), sum(s)) for _, s in problems]
    metrics = {f"{phase}/pass@1": sum(pass_at_k(n, c, 1) for n, c in counts) / len(counts),
               f"{phase}/pass@2": sum(pass_at_k(n, c, 2) for n, c in counts) / len(counts),
               f"{phase}/solved@4": 0.5, **(extra or {})}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "manifest.json").write_text(json.dumps({
        "status": status, "seed": 0, "task": {"eval_problems": len(problems)},
        "config": {"task": "math", "trainer": "none", "searcher": "best-of-k", "model": "m", "preset": "quick"},
        **(manifest or {})}))
    with open(folder / "samples.jsonl", "w") as f:
        for pid, successes in problems:
            for i, ok in enumerate(successes):
                f.write(json.dumps({"problem_id": f"p{pid}", "phase": phase, "sample_index": i, "text": f"t{i}",
                                    "success": ok, "scalar": float(ok), "rewards": {"correct": float(ok)}}) + "\n")
    return folder


def test_intervals_against_hand_computed_values(tmp_path):
    # Two problems, n=2: successes (2, 0) -> per-problem pass@1 = (1, 0): mean 0.5.
    _fake_run(tmp_path, "a", [(0, [True, True]), (1, [False, False])])
    db = tmp_path / "results.sqlite"
    rebuild(db, find_runs([tmp_path]))
    (row,) = leaderboard(connect(db))
    e = row.headline["pass@1"]
    assert e.value == 0.5
    # Resampling two problems with values {1, 0}: the mean is 0, 0.5 or 1 (p = 1/4, 1/2, 1/4): the 95% percentile
    # interval is [0, 1].
    assert (e.low, e.high) == (0.0, 1.0)
    # Wilson for 0.5 of 2 problems, by hand: centre 0.5, half-width 1.96*sqrt(0.125 + 0.9604/16)/1.9604 = 0.4390...
    low, high = row.headline["solved@4"].low, row.headline["solved@4"].high
    half = 1.96 * math.sqrt(0.25 / 2 + 1.96**2 / 16) / (1 + 1.96**2 / 2)
    assert low == pytest.approx(0.5 - half) and high == pytest.approx(0.5 + half)
    assert wilson(0.0, 0) == (None, None)
    assert bootstrap([0.25] * 7) == (0.25, 0.25)


def test_store_is_rebuilt_from_folders_and_skips_unfinished_runs(tmp_path):
    _fake_run(tmp_path, "done", [(0, [True, False])])
    _fake_run(tmp_path, "killed", [(0, [True, False])], status="running")
    shutil.copytree(tmp_path / "done", tmp_path / "done.incomplete-20260101-000000")
    db = tmp_path / "results.sqlite"
    assert rebuild(db, find_runs([tmp_path])) == 2  # the moved-aside copy is not a run
    assert len(leaderboard(connect(db))) == 1  # the killed run is indexed but not on the leaderboard
    db.unlink()
    assert main(["index", str(tmp_path)]) == 0
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


def test_report_shows_every_metric_a_searcher_returns(tmp_path):
    """A third-party searcher's own metric (majority@8) is neither pass@k, best@k, solved@c, diversity/ nor
    behaviour/: it still reaches the HTML, the Markdown and the CSV, formatted."""
    _fake_run(tmp_path / "runs", "third-party", [(0, [True, False]), (1, [False, False])], phase="after",
              extra={"after/majority@8": 0.625, "after/num_tokens": 12345.0, "after/tiny": 0.00004,
                     "after/rate": 1.0, "after/not_a_number": "n/a"})
    _fake_run(tmp_path / "runs", "other", [(0, [True, True])], phase="after", extra={"after/rate": 0.5})
    html = build_report([tmp_path / "runs"], tmp_path / "report", echo=lambda _: None)
    page = html.read_text()
    other = page[page.index("<h2>Other metrics</h2>"):]
    assert "<th>majority@8</th>" in other and '<td class="num">0.625</td>' in other
    assert '<td class="num">12,345</td>' in other and '<td class="num">4.00e-05</td>' in other
    assert "not_a_number" not in page  # only numbers are indexed
    md = (tmp_path / "report" / "report.md").read_text()
    assert ("## Other metrics\n\n| run | phase | majority@8 | num_tokens | rate | tiny |\n|---|---|---|---|---|---|\n"
            "| other | after | - | - | 0.500 | - |\n"
            "| third-party | after | 0.625 | 12,345 | 1.000 | 4.00e-05 |\n") in md  # a rate of 1 reads 1.000
    rows = list(csv.DictReader((tmp_path / "report" / "leaderboard.csv").read_text().splitlines()))
    assert [(r["run"], r["majority@8"]) for r in rows] == [("other", ""), ("third-party", "0.625")]


def test_report_says_which_folders_it_skipped_and_why(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _fake_run(runs, "done", [(0, [True, False])])
    _fake_run(runs, "killed", [(0, [True, False])], status="running")
    _fake_run(runs, "crashed", [(0, [True, True])], status="failed",
              manifest={"error": "RuntimeError: CUDA out of memory\nTraceback (most recent call last): ..."})
    _fake_run(runs, "no-eval", [(0, [True, True])], phase="train")
    (runs / "empty").mkdir()
    (runs / "garbled").mkdir()
    (runs / "garbled" / "manifest.json").write_text("{not json")
    shutil.copytree(runs / "done", runs / "done.incomplete-20260101-000000")
    monkeypatch.chdir(tmp_path)  # folders are named relative to the working directory
    said: list[str] = []
    html = build_report([Path("runs")], tmp_path / "report", echo=said.append)
    skipped = [line for line in said if line.startswith("skipped ")]
    assert skipped == [
        "skipped runs/crashed: status 'failed': RuntimeError: CUDA out of memory",
        "skipped runs/done.incomplete-20260101-000000: moved aside by a grid rerun (*.incomplete-*)",
        "skipped runs/empty: no manifest.json",
        skipped[3],  # the JSON parser's own words, checked below
        "skipped runs/killed: status 'running' (unfinished or died)",
        "skipped runs/no-eval: complete, but no evaluation metrics (before/, after/ or eval/)",
    ]
    assert skipped[3].startswith("skipped runs/garbled: unreadable manifest.json (") and "\n" not in skipped[3]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Skipped\n\n- `runs/crashed`: status 'failed': RuntimeError: CUDA out of memory\n" in md
    assert "- `runs/empty`: no manifest.json" in md and md.count("\n- `runs/") == 6
    page = html.read_text()
    assert "6 folder(s) skipped" in page and "<li><code>runs/killed</code>: status &#39;running&#39;" in page
    assert (tmp_path / "report" / "leaderboard.csv").read_text().count("\n") == 2  # header + the one complete run


def test_report_with_nothing_complete_still_says_why(tmp_path):
    _fake_run(tmp_path, "killed", [(0, [True, True])], status="running")
    said: list[str] = []
    with pytest.raises(ValueError, match="none of the 1 run folders is complete"):
        build_report([tmp_path], tmp_path / "report", echo=said.append)
    assert said == [f"skipped {tmp_path.resolve() / 'killed'}: status 'running' (unfinished or died)"]


def _index_many(args):
    db, folders = args
    for folder in folders:
        index_run(db, folder)


def test_two_processes_index_into_one_store_at_once(tmp_path):
    folders = [_fake_run(tmp_path / "runs", f"r{i}", [(0, [True, True]), (1, [False, True])]) for i in range(40)]
    db = tmp_path / "results.sqlite"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_index_many, [(db, folders[:20]), (db, folders[20:])])
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 40
    assert conn.execute("SELECT COUNT(*) FROM problems").fetchone()[0] == 80


def test_a_line_cut_by_a_crash_is_skipped_not_fatal(tmp_path):
    folder = _fake_run(tmp_path, "a", [(0, [True, False])])
    with open(folder / "samples.jsonl", "a") as f:
        f.write('{"problem_id": "p9", "pha')
    db = tmp_path / "results.sqlite"
    index_run(db, folder)
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM problems").fetchone()[0] == 1


@pytest.mark.skipif(find_chromium() is None, reason="Debian's chromium is not installed (make test installs it "
                    "where it can run apt-get)")
def test_html_report_renders_in_headless_chromium(two_runs, tmp_path):
    """Open the page in headless Chromium: every image loads, no console error, the sort script runs on a click;
    the screenshot is kept in tests/artifacts/report.png for a person to look at."""
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    out, _ = two_runs
    html = build_report([out], tmp_path / "report", echo=lambda _: None)
    png = Path(__file__).parent / "artifacts" / "report.png"
    problems = screenshot(html, png, click="#leaderboard th:nth-child(8)")
    assert problems == []
    assert png.stat().st_size > 10_000
    # The check can fail: a page whose image is missing is reported.
    (tmp_path / "report" / "plots" / "math-pass-at-k.png").unlink()
    assert any("math-pass-at-k.png" in p for p in screenshot(html, tmp_path / "broken.png"))
