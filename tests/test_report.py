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
from tiny_runs import tiny_config

from harness.cli import main
from harness.metrics.unbiased import best_at_k, pass_at_k
from harness.report import compare, summary
from harness.report.build import build_report, verdict
from harness.report.data import Estimate, bootstrap, leaderboard, wilson
from harness.report.screenshot import find_chromium, screenshot
from harness.report.summary import example_samples, paired_change
from harness.run import run
from harness.store.results_db import connect, find_runs, index_run, rebuild

# Both runs carry the trainer's sizes and steps (the evaluation-only one unread, as a grid's cell does): the two
# differ in their trainer alone.
TINY = {"trainer.group_size": 2, "trainer.prompts_per_step": 1, "trainer.max_new_tokens": 4, "searcher.n": 4}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, plugins, tiny_policy_spec):
    """An evaluation-only run and a GRPO run of the tiny model, on the same 3 problems."""
    out = tmp_path_factory.mktemp("runs")
    folders = [
        run(
            tiny_config(trainer, steps=2, limit=3, train_limit=2, k="1,2,4", out=str(out), sets=TINY),
            plugins=plugins,
            echo=lambda _: None,
        )
        for trainer in ("none", "grpo")
    ]
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
    assert md.split("\n## ")[0].count("\n| math |") == 3 and "![math pass@k](plots/math-pass-at-k.png)" in md
    # The trained run against its own before-evaluation, and against the evaluation-only run on the same problems.
    assert "## After - before, per run" in md and "## Method - method, same problems and seed" in md
    assert "| grpo - none (base model) | 3 |" in md
    data = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    assert len(data["table"]) == 3 and data["rows"][0]["headline"]["pass@1"]["value"] is not None


def test_report_command_line(two_runs, tmp_path, capsys):
    out, _ = two_runs
    assert main(["report", str(out), "--out", str(tmp_path / "r")]) == 0
    assert "index.html" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "r2")]) == 2
    assert "does not exist" in capsys.readouterr().err


def _fake_run(
    root: Path,
    name: str,
    problems: list[tuple[int, list[bool]]],
    status: str = "complete",
    phase: str = "eval",
    extra: dict | None = None,
    manifest: dict | None = None,
) -> Path:
    """A hand-made run folder: per problem, the success of each candidate (scalar 1.0 / 0.0); ``extra`` metrics
    and ``manifest`` fields are added as given."""
    folder = root / name
    folder.mkdir(parents=True)
    counts = [(len(s), sum(s)) for _, s in problems]
    metrics = {
        f"{phase}/pass@1": sum(pass_at_k(n, c, 1) for n, c in counts) / len(counts),
        f"{phase}/pass@2": sum(pass_at_k(n, c, 2) for n, c in counts) / len(counts),
        f"{phase}/solved@4": 0.5,
        **(extra or {}),
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "manifest.json").write_text(
        json.dumps(
            {
                "status": status,
                "seed": 0,
                "task": {"eval_problems": len(problems)},
                "config": {"task": "math", "trainer": "none", "searcher": "best-of-k", "model": "m", "preset": "quick"},
                **(manifest or {}),
            }
        )
    )
    with open(folder / "samples.jsonl", "w") as f:
        for pid, successes in problems:
            for i, ok in enumerate(successes):
                f.write(
                    json.dumps(
                        {
                            "problem_id": f"p{pid}",
                            "phase": phase,
                            "sample_index": i,
                            "text": f"t{i}",
                            "success": ok,
                            "scalar": float(ok),
                            "rewards": {"correct": float(ok)},
                        }
                    )
                    + "\n"
                )
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
    _fake_run(
        tmp_path / "runs",
        "third-party",
        [(0, [True, False]), (1, [False, False])],
        phase="after",
        extra={
            "after/majority@8": 0.625,
            "after/num_tokens": 12345.0,
            "after/tiny": 0.00004,
            "after/rate": 1.0,
            "after/not_a_number": "n/a",
        },
    )
    _fake_run(tmp_path / "runs", "other", [(0, [True, True])], phase="after", extra={"after/rate": 0.5})
    html = build_report([tmp_path / "runs"], tmp_path / "report", echo=lambda _: None)
    page = html.read_text()
    other = page[page.index("<h2>Other metrics</h2>") :]
    assert "<th>majority@8</th>" in other and '<td class="num">0.625</td>' in other
    assert '<td class="num">12,345</td>' in other and '<td class="num">4.00e-05</td>' in other
    assert "not_a_number" not in page  # only numbers are indexed
    md = (tmp_path / "report" / "report.md").read_text()
    assert (
        "## Other metrics\n\n| run | phase | majority@8 | num_tokens | rate | tiny |\n|---|---|---|---|---|---|\n"
        "| other | after | - | - | 0.500 | - |\n"
        "| third-party | after | 0.625 | 12,345 | 1.000 | 4.00e-05 |\n"
    ) in md  # a rate of 1 reads 1.000
    rows = list(csv.DictReader((tmp_path / "report" / "leaderboard.csv").read_text().splitlines()))
    assert [(r["run"], r["majority@8"]) for r in rows] == [("other", ""), ("third-party", "0.625")]


def test_the_leaderboard_shows_each_trained_runs_warm_up_steps(tmp_path):
    """Arms judged by one well-formedness rule can still take very different amounts of format warm-up (the stop
    rule is a rate): each trained run's SFT steps are on its after row, in the Markdown, the HTML, the CSV and the
    JSON; a trained run without a warm-up shows 0, a row of no training "-"."""
    runs = tmp_path / "runs"
    _fake_run(runs, "vpo", [(0, [True, False])], phase="after", extra={"warmup/steps": 24})
    _fake_run(runs, "grpo", [(0, [True, True])], phase="after")
    _fake_run(runs, "base", [(0, [False, False])])  # evaluation only
    html = build_report([runs], tmp_path / "report", echo=lambda _: None)
    md = (tmp_path / "report" / "report.md").read_text()
    board = md.split("\n## ")[0]
    assert "| phase | warm-up steps | pass@1 |" in board
    assert sorted(line.split(" | ")[6:8] for line in board.splitlines() if line.startswith("| math |")) == [
        ["after", "0"],
        ["after", "24"],
        ["eval", "-"],
    ]
    page = html.read_text()
    assert "warm-up steps</th>" in page and 'data-value="24">24</td>' in page
    rows = {r["run"]: r["warmup_steps"] for r in csv.DictReader((tmp_path / "report" / "leaderboard.csv").open())}
    assert rows == {"vpo": "24", "grpo": "0", "base": ""}
    exported = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    assert sorted((r["run"], r["warmup_steps"]) for r in exported["rows"]) == [
        ("base", None),
        ("grpo", 0),
        ("vpo", 24),
    ]


def test_the_leaderboard_shows_one_candidate_s_token_cap_beside_m_answer_rows(tmp_path):
    """A VPO arm's rollout of 4 answers capped at 688 tokens gives each candidate (688 - 3 x 16) / 4 = 160 tokens, the
    same as a one-answer arm capped at 160: the leaderboard shows each row's cap per candidate (training / evaluation
    on a trained row), so equal budgets are seen, not assumed; a 512-token cap would show 116."""
    runs = tmp_path / "runs"

    def options(cap: int, m: int | None) -> dict:
        side = {"max_new_tokens": cap, "answers_per_rollout": m}
        return {"resolved_options": {"trainer": side, "searcher": side}}

    _fake_run(runs, "vpo", [(0, [True, False])], phase="after", manifest=options(688, 4))
    _fake_run(runs, "vpo-cpu-cap", [(0, [True, False])], phase="after", manifest=options(512, 4))
    _fake_run(runs, "grpo", [(0, [True, True])], phase="after", manifest=options(160, None))
    _fake_run(runs, "base", [(0, [False, False])], manifest=options(160, None))
    html = build_report([runs], tmp_path / "report", echo=lambda _: None)
    board = (tmp_path / "report" / "report.md").read_text().split("\n## ")[0]
    assert "| tokens per candidate | pass@1 |" in board
    exported = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    assert sorted((r["run"], r["candidate_tokens"]) for r in exported["rows"]) == [
        ("base", "160"),
        ("grpo", "160 / 160"),
        ("vpo", "160 / 160"),
        ("vpo-cpu-cap", "116 / 116"),
    ]
    assert '<td class="num">116 / 116</td>' in html.read_text()
    shutil.rmtree(runs / "vpo")
    shutil.rmtree(runs / "vpo-cpu-cap")
    build_report([runs], tmp_path / "one-answer", echo=lambda _: None)
    assert "tokens per candidate" not in (tmp_path / "one-answer" / "report.md").read_text()  # only beside M > 1


def test_report_says_which_folders_it_skipped_and_why(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _fake_run(runs, "done", [(0, [True, False])])
    _fake_run(runs, "killed", [(0, [True, False])], status="running")
    _fake_run(
        runs,
        "crashed",
        [(0, [True, True])],
        status="failed",
        manifest={"error": "RuntimeError: CUDA out of memory\nTraceback (most recent call last): ..."},
    )
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


@pytest.mark.skipif(
    find_chromium() is None,
    reason="Debian's chromium is not installed (make test installs it where it can run apt-get)",
)
def test_html_report_renders_in_headless_chromium(two_runs, tmp_path):
    """Open the page in headless Chromium: every image loads, no console error, the sort script runs on a click;
    the screenshot is kept in tests/artifacts/report.png for a person to look at."""
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    out, _ = two_runs
    html = build_report([out], tmp_path / "report", echo=lambda _: None)
    png = Path(__file__).parent / "artifacts" / "report.png"
    problems = screenshot(html, png, click="#leaderboard th:last-child")
    assert problems == []
    assert png.stat().st_size > 10_000
    # The check can fail: a page whose image is missing is reported.
    (tmp_path / "report" / "plots" / "math-pass-at-k.png").unlink()
    assert any("math-pass-at-k.png" in p for p in screenshot(html, tmp_path / "broken.png"))


# -- paired differences, seeds, solved-only-by, baselines: hand-made runs with before and after evaluations --------


def _trained_run(
    root: Path,
    name: str,
    trainer: str,
    seed: int,
    phases: dict[str, dict[str, list[float]]],
    m: int = 1,
    ks: tuple[int, ...] = (1, 2),
    manifest: dict | None = None,
) -> Path:
    """A hand-made run folder of a trained run: per phase, per problem id, each candidate's scalar (1.0 = success,
    anything else a failure). Metrics are computed as best-of-k does: per candidate with m = 1, over whole rollouts
    of m answers (set-level, k a multiple of m) otherwise. ``manifest`` fields are merged into the manifest."""
    folder = root / name
    folder.mkdir(parents=True)
    metrics: dict[str, float] = {}
    with open(folder / "samples.jsonl", "w") as f:
        for phase, problems in phases.items():
            for pid, scalars in problems.items():
                for i, scalar in enumerate(scalars):
                    f.write(
                        json.dumps(
                            {
                                "problem_id": pid,
                                "phase": phase,
                                "sample_index": i,
                                "rollout_index": i // m,
                                "answer_index": i % m,
                                "text": f"t{i}",
                                "success": scalar == 1.0,
                                "scalar": scalar,
                                "rewards": {"correct": scalar},
                            }
                        )
                        + "\n"
                    )
            for k in ks:
                if k % m:
                    continue
                per_pass, per_best = [], []
                for scalars in problems.values():
                    rollouts = [scalars[j : j + m] for j in range(0, len(scalars), m)]
                    per_pass.append(pass_at_k(len(rollouts), sum(1.0 in r for r in rollouts), k // m))
                    per_best.append(best_at_k([max(r) for r in rollouts], k // m))
                metrics[f"{phase}/pass@{k}"] = math.fsum(per_pass) / len(per_pass)
                metrics[f"{phase}/best@{k}"] = math.fsum(per_best) / len(per_best)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    searcher = {"n": "4", "k": ",".join(map(str, ks)), "seed": seed, **({"answers_per_rollout": m} if m > 1 else {})}
    problems = len(next(iter(phases.values())))
    base = {
        "status": "complete",
        "seed": seed,
        "task": {"name": "math", "eval_problems": problems},
        "config": {
            "task": "math",
            "trainer": trainer,
            "searcher": "best-of-k",
            "model": "m",
            "preset": "quick",
            "seed": seed,
            "k": ",".join(map(str, ks)),
            "steps": 1,
            "name": name,
            "threads": 1,
            "options": {"searcher": {"n": "4"}},
        },
        "resolved_options": {"searcher": searcher, "trainer": {"seed": seed}},
    }
    for key, value in (manifest or {}).items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    (folder / "manifest.json").write_text(json.dumps(base))
    return folder


ALL = [1.0, 1.0, 1.0, 1.0]
NONE = [0.0, 0.0, 0.0, 0.0]


def _rows(root: Path):
    db = root / "results.sqlite"
    rebuild(db, find_runs([root]))
    return leaderboard(connect(db))


def test_paired_differences_computed_by_hand(tmp_path):
    problems = ["p0", "p1", "p2"]
    # grpo: nothing solved before, everything after: +1 on every problem, so every resample gives +1.
    _trained_run(
        tmp_path, "grpo", "grpo", 0, {"before": {p: NONE for p in problems}, "after": {p: ALL for p in problems}}
    )
    # vpo: the same before; after identical to before: 0 on every problem.
    _trained_run(
        tmp_path, "vpo", "vpo", 0, {"before": {p: NONE for p in problems}, "after": {p: NONE for p in problems}}
    )
    rows = _rows(tmp_path)
    by_run = {d.runs[0]: d for d in compare.after_minus_before(rows)}
    for name in ("pass@1", "pass@2", "best@1", "best@2"):
        assert by_run["grpo"].metrics[name].as_dict() == {"value": 1.0, "low": 1.0, "high": 1.0}
        assert by_run["vpo"].metrics[name].as_dict() == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert by_run["grpo"].problems == 3 and by_run["grpo"].a == "grpo after" and by_run["grpo"].b == "before"
    (between,) = compare.method_differences(rows)
    assert (between.a, between.b, between.seed, between.problems) == ("grpo", "vpo", 0, 3)
    assert between.metrics["pass@2"].as_dict() == {"value": 1.0, "low": 1.0, "high": 1.0}
    # Identical sides: 0 with interval [0, 0]; the same resampled problems on both sides.
    same = {"a": 0.25, "b": 1.0, "c": 0.5}
    assert compare.paired(same, dict(same))[0].as_dict() == {"value": 0.0, "low": 0.0, "high": 0.0}
    # Two problems, differences (1, 0): resampled means 0, 0.5, 1 with p = 1/4, 1/2, 1/4: the interval is [0, 1].
    estimate, differences = compare.paired({"x": 1.0, "y": 0.5}, {"x": 0.0, "y": 0.5})
    assert differences == [1.0, 0.0] and estimate.as_dict() == {"value": 0.5, "low": 0.0, "high": 1.0}
    # The paired interval is the plain bootstrap of the per-problem differences, draw for draw.
    a, b = {f"q{i}": (i % 3) / 2 for i in range(9)}, {f"q{i}": (i % 2) / 1 for i in range(9)}
    estimate, differences = compare.paired(a, b)
    assert (estimate.low, estimate.high) == bootstrap(differences)


def _add_behaviour(folder: Path, scores: dict[str, dict[str, list[float]]], recorded: dict[str, float]) -> None:
    """Give a hand-made run's candidates robustness scores (per phase, per problem, in sample order) and the
    run's own behaviour/robustness figure per phase."""
    records = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    for r in records:
        r["behaviours"] = {"robustness": scores[r["phase"]][r["problem_id"]][r["sample_index"]]}
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics.update({f"{phase}/behaviour/robustness": value for phase, value in recorded.items()})
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_behaviour_scores_are_paired_by_problem_like_pass_at_k(tmp_path):
    folder = _trained_run(
        tmp_path, "vspo", "vspo", 0, {"before": {"p0": NONE, "p1": NONE}, "after": {"p0": NONE, "p1": NONE}}
    )
    # per-problem means: before 0.25 and 0.0 (run figure 0.125), after 1.0 and 0.5 (0.75)
    _add_behaviour(
        folder,
        {
            "before": {"p0": [0, 0, 0.5, 0.5], "p1": [0, 0, 0, 0]},
            "after": {"p0": [1, 1, 1, 1], "p1": [0.5, 0.5, 0.5, 0.5]},
        },
        {"before": 0.125, "after": 0.75},
    )
    rows = _rows(tmp_path)
    after = next(r for r in rows if r.phase == "after")
    assert after.values["behaviour/robustness"] == {"p0": 1.0, "p1": 0.5}
    # two problems: resampled means 0.5, 0.75, 1.0; the 2.5th and 97.5th percentiles are the extremes
    assert after.headline["behaviour/robustness"].as_dict() == {"value": 0.75, "low": 0.5, "high": 1.0}
    (diff,) = compare.after_minus_before(rows)  # differences 0.75 and 0.5
    assert diff.metrics["behaviour/robustness"].as_dict() == {"value": 0.625, "low": 0.5, "high": 0.75}
    assert "behaviour/robustness" in compare.headline_names([diff])
    # A figure the samples do not reproduce keeps its value and gets no interval it could not stand behind.
    _add_behaviour(
        folder,
        {
            "before": {"p0": [0, 0, 0.5, 0.5], "p1": [0, 0, 0, 0]},
            "after": {"p0": [1, 1, 1, 1], "p1": [0.5, 0.5, 0.5, 0.5]},
        },
        {"before": 0.125, "after": 0.9},
    )
    (tmp_path / "results.sqlite").unlink()
    after = next(r for r in _rows(tmp_path) if r.phase == "after")
    assert after.other["behaviour/robustness"] == 0.9 and "behaviour/robustness" not in after.headline


def test_held_out_scores_are_paired_like_the_training_scorer_s_and_every_heading_says_which_is_which(tmp_path):
    """heldout/<name> (a behaviour's held-out evaluator) gets per-problem values, an interval and paired differences
    as behaviour/<name> does, sits beside it in the headline columns, and the report's headings and figures call
    one the training scorer and the other the held-out evaluator; a behaviour without one is said to have none."""
    folder = _trained_run(
        tmp_path, "vspo", "vspo", 0, {"before": {"p0": NONE, "p1": NONE}, "after": {"p0": NONE, "p1": NONE}}
    )
    scores = {"before": {"p0": [0, 0, 0.5, 0.5], "p1": [0, 0, 0, 0]}, "after": {"p0": [1, 1, 1, 1], "p1": [0.5] * 4}}
    held = {"before": {"p0": [0.5] * 4, "p1": [0.5] * 4}, "after": {"p0": [0.5] * 4, "p1": [1, 1, 0, 0]}}
    records = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    for r in records:
        r["behaviours"] = {
            "robustness": scores[r["phase"]][r["problem_id"]][r["sample_index"]],
            "shouting": 0.25,
        }
        r["held_out"] = {"robustness": held[r["phase"]][r["problem_id"]][r["sample_index"]]}
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    metrics = json.loads((folder / "metrics.json").read_text())
    for phase, (trained, held_out) in {"before": (0.125, 0.5), "after": (0.75, 0.5)}.items():
        metrics |= {f"{phase}/behaviour/robustness": trained, f"{phase}/heldout/robustness": held_out}
        metrics[f"{phase}/behaviour/shouting"] = 0.25
    (folder / "metrics.json").write_text(json.dumps(metrics))
    rows = _rows(tmp_path)
    after = next(r for r in rows if r.phase == "after")
    assert after.values["heldout/robustness"] == {"p0": 0.5, "p1": 0.5}
    assert after.headline["heldout/robustness"].value == 0.5 and after.headline["heldout/robustness"].low == 0.5
    (diff,) = compare.after_minus_before(rows)  # the training scorer rose; the held-out evaluator did not
    assert diff.metrics["behaviour/robustness"].value == 0.625 and diff.metrics["heldout/robustness"].value == 0.0
    names = compare.headline_names([diff])
    assert names.index("heldout/robustness") == names.index("behaviour/robustness") + 1
    build_report([tmp_path], tmp_path / "report", echo=lambda _: None)
    md = (tmp_path / "report" / "report.md").read_text()
    page = (tmp_path / "report" / "index.html").read_text()
    for text in (md, page):
        assert "behaviour/robustness (training scorer)" in text and "heldout/robustness (held-out evaluator)" in text
        assert "behaviour/shouting (training scorer; no held-out evaluator)" in text
    assert "![behaviour/robustness (training scorer) vs accuracy](plots/behaviour-robustness.png)" in md
    assert "![heldout/robustness (held-out evaluator) vs accuracy](plots/heldout-robustness.png)" in md


def test_methods_are_paired_only_on_the_same_footing(tmp_path):
    two = {"p0": ALL, "p1": NONE}
    _trained_run(tmp_path, "grpo-s0", "grpo", 0, {"before": two, "after": two})
    _trained_run(tmp_path, "vpo-s1", "vpo", 1, {"before": two, "after": two})  # another seed: no pair
    _trained_run(tmp_path, "sft-s0-other-k", "sft", 0, {"before": two, "after": two}, ks=(1,))  # other k: no pair
    # Same footing, one more problem: compared on the two problems both evaluated, and said so.
    _trained_run(tmp_path, "rlaif-s0", "rlaif", 0, {"before": {**two, "p2": ALL}, "after": {**two, "p2": ALL}})
    (pair,) = compare.method_differences(_rows(tmp_path))
    assert (pair.a, pair.b, pair.problems) == ("grpo", "rlaif", 2)
    assert "on the 2 problems both evaluated (2 vs 3)" in pair.note
    assert pair.metrics["pass@1"].as_dict() == {"value": 0.0, "low": 0.0, "high": 0.0}


def test_the_answer_format_note_names_the_budget_each_searcher_holds_equal():
    # best-of-k's budget is candidates (whole rollouts); evolve's is model calls, and an M-answer seed call writes M.
    from types import SimpleNamespace

    one, two = (
        SimpleNamespace(answers_per_rollout=1, searcher="evolve"),
        SimpleNamespace(answers_per_rollout=2, searcher="evolve"),
    )
    assert "the same budget of model calls, not of candidates" in compare._answer_formats(one, two)
    one.searcher = two.searcher = "best-of-k"
    assert "the same budget of candidates" in compare._answer_formats(one, two)
    assert compare._answer_formats(one, one) == ""


def test_a_multi_answer_run_is_compared_at_the_same_budget_with_set_level_figures(tmp_path):
    # VPO writes M = 2 answers per rollout: p0's rollouts [1, 0], [0, 0] -> one of 2 rollouts succeeds: set-level
    # pass@2 (one rollout) = 1/2, pass@4 = 1; the pooled per-answer pass@2 would be 1 - C(3,2)/C(4,2) = 1/2, pass@4 1.
    # p1's rollouts [1, 1], [0, 0]: set-level pass@2 = 1/2, where the pooled figure is 1 - C(2,2)/C(4,2) = 5/6.
    vpo = {"p0": [1.0, 0.0, 0.0, 0.0], "p1": [1.0, 1.0, 0.0, 0.0]}
    _trained_run(tmp_path, "vpo", "vpo", 0, {"before": {"p0": NONE, "p1": NONE}, "after": vpo}, m=2, ks=(2, 4))
    _trained_run(
        tmp_path, "grpo", "grpo", 0, {"before": {"p0": NONE, "p1": NONE}, "after": {"p0": NONE, "p1": ALL}}, ks=(2, 4)
    )
    rows = _rows(tmp_path)
    after = next(r for r in rows if r.run == "vpo" and r.phase == "after")
    assert after.headline["pass@2"].value == pytest.approx(0.5)
    assert after.values["pass@2"] == {"p0": pytest.approx(0.5), "p1": pytest.approx(0.5)}  # set-level, per problem
    assert after.headline["pass@2"].low is not None  # the recomputation reproduces the run's figure
    (pair,) = compare.method_differences(rows)
    assert (pair.a, pair.b) == ("grpo", "vpo") and pair.note.startswith("answers per rollout 1 vs 2")
    # grpo - vpo at pass@2: p0: 0 - 1/2, p1: 1 - 1/2: mean 0.
    assert pair.metrics["pass@2"].value == pytest.approx(0.0)


def test_a_run_written_before_set_level_figures_still_gets_its_intervals(tmp_path):
    # The same M = 2 samples, with the pooled per-answer pass@2 the searcher used to report: recognised as such.
    folder = _trained_run(tmp_path, "old-vpo", "vpo", 0, {"after": {"p0": [1.0, 1.0, 0.0, 0.0]}}, m=2, ks=(2,))
    (folder / "metrics.json").write_text(json.dumps({"after/pass@2": 5 / 6, "after/best@2": 5 / 6}))
    (row,) = _rows(tmp_path)
    assert row.values["pass@2"] == {"p0": pytest.approx(5 / 6)} and row.headline["pass@2"].low is not None


def test_means_over_seeds_with_seed_level_and_problem_level_intervals(tmp_path):
    _trained_run(tmp_path, "grpo-s0", "grpo", 0, {"before": {"a": NONE, "b": NONE}, "after": {"a": ALL, "b": NONE}})
    _trained_run(tmp_path, "grpo-s1", "grpo", 1, {"before": {"c": NONE, "d": NONE}, "after": {"c": ALL, "d": ALL}})
    _trained_run(
        tmp_path,
        "grpo-s2-lr",
        "grpo",
        2,
        {"before": {"e": NONE}, "after": {"e": ALL}},
        manifest={"config": {"options": {"searcher": {"n": "4"}, "trainer": {"lr": "1e-4"}}}},
    )
    rows = compare.merge_baselines(_rows(tmp_path))
    groups = {g.label: g for g in compare.over_seeds(rows)}
    assert set(groups) == {"grpo (after)", "base model (before: grpo)"}  # the lr=1e-4 run is not grouped
    after = groups["grpo (after)"]
    assert after.seeds == [0, 1] and after.runs == ["grpo-s0", "grpo-s1"]
    # Over problems only, the seeds fixed: seed 0's per-problem values (1, 0) resample to a mean of 0, 0.5 or 1
    # (p = 1/4, 1/2, 1/4); seed 1's (1, 1) always 1; their average 0.5, 0.75 or 1: percentiles 0.5 and 1.
    assert after.problem_level["pass@1"].as_dict() == {"value": 0.75, "low": 0.5, "high": 1.0}
    # Over seeds and problems: with p = 1/4 both slots draw seed 0, whose two independent means average to 0 with
    # p = 1/16 and 0.25 with p = 1/4, so P(mean <= 0) = 1/64 (1.6%) and P(mean <= 0.25) = 1/64 + 1/16 (7.8%): the
    # 2.5th percentile is 0.25, where the seeds fixed gave 0.5. The 97.5th stays 1.
    assert after.bootstrap["pass@1"].as_dict() == {"value": 0.75, "low": 0.25, "high": 1.0}
    # Student's t over the seeds' means 0.5 and 1: sd 0.354, t(0.975, 1) = 12.706: 0.75 +- 3.177. Two seeds bound
    # nothing, and the verdict's interval (the wider, bound by bound) says so where the bootstrap did not.
    t_half = 12.7062047 * math.sqrt(0.125) / math.sqrt(2)
    assert after.t_interval["pass@1"].as_dict() == pytest.approx(
        {"value": 0.75, "low": 0.75 - t_half, "high": 0.75 + t_half}
    )
    assert after.metrics["pass@1"].as_dict() == after.t_interval["pass@1"].as_dict()
    three = compare.t_interval_over_seeds([0.2, 0.4, 0.3])  # sd 0.1, t(0.975, 2) = 4.303: 0.3 +- 0.24841
    assert three == pytest.approx((0.3 - 0.248414, 0.3 + 0.248414), abs=1e-5)
    assert compare.hierarchical_bootstrap([[1.0] * 3, [0.0] * 3]) == (0.0, 1.0)  # the seeds differ: all of [0, 1]
    assert compare.hierarchical_bootstrap([[0.5] * 3, [0.5] * 2]) == (0.5, 0.5)
    assert after.spread["pass@1"] == (0.5, 1.0)
    # every seed 0: both intervals are [0, 0]
    assert groups["base model (before: grpo)"].metrics["pass@1"].as_dict() == {"value": 0.0, "low": 0.0, "high": 0.0}
    # One group alone is the leaderboard's own bootstrap, draw for draw.
    assert compare.pooled_bootstrap([[1.0, 0.0, 0.5]]) == bootstrap([1.0, 0.0, 0.5])
    # No variation inside a seed: the interval is the seeds' mean, whatever the seeds' spread (shown beside it).
    assert compare.pooled_bootstrap([[1.0] * 3, [0.0] * 3]) == (0.5, 0.5)
    # after - before, over the two seeds: per-seed differences (1, 0) and (1, 1), as above.
    (diff,) = compare.differences_over_seeds(compare.after_minus_before(_rows(tmp_path)))
    assert diff.label == "grpo after - before" and diff.bootstrap["pass@1"].as_dict() == {
        "value": 0.75,
        "low": 0.25,
        "high": 1.0,
    }
    assert diff.metrics["pass@1"].as_dict() == pytest.approx(
        {"value": 0.75, "low": 0.75 - t_half, "high": 0.75 + t_half}
    )
    assert diff.problem_level["pass@1"].as_dict() == {"value": 0.75, "low": 0.5, "high": 1.0}


def test_solved_only_by(tmp_path):
    before = {p: NONE for p in ("p0", "p1", "p2", "p3", "p4")}
    before["p0"] = [0.0, 1.0, 0.0, 0.0]  # the base model solves p0 (in grpo's before-evaluation only)
    _trained_run(
        tmp_path,
        "grpo",
        "grpo",
        0,
        {"before": before, "after": {**before, "p0": NONE, "p1": ALL, "p2": ALL, "p4": ALL}},
    )
    _trained_run(
        tmp_path,
        "vpo",
        "vpo",
        0,
        {"before": {**before, "p0": NONE}, "after": {**before, "p0": NONE, "p2": ALL, "p3": ALL, "p4": ALL}},
    )
    # The base model solves p4 too; "x9" is evaluated by this run only (another seed's draw): left out.
    _trained_run(tmp_path, "none", "none", 1, {"eval": {"p4": ALL, "x9": ALL}})
    (table,) = compare.solved_only_by(_rows(tmp_path))
    assert table.methods == ["base model", "grpo", "vpo"]
    assert table.only == {"base model": ["p0"], "grpo": ["p1"], "vpo": ["p3"]}
    assert (table.compared, table.left_out, table.by_all, table.by_none) == (5, 1, 1, 0)  # p2: 2 methods


def test_solved_only_by_compares_the_problems_every_method_evaluated(tmp_path):
    problems = {f"p{i:02d}": ALL for i in range(12)}
    _trained_run(tmp_path, "grpo", "grpo", 0, {"before": {p: NONE for p in problems}, "after": problems})
    _trained_run(
        tmp_path,
        "sft",
        "sft",
        0,
        {"before": {p: NONE for p in problems}, "after": {**{p: NONE for p in problems}, "p00": ALL}},
    )
    (table,) = compare.solved_only_by(_rows(tmp_path))
    assert table.only["grpo"] == [f"p{i:02d}" for i in range(1, 12)] and table.only["sft"] == []
    assert (table.compared, table.left_out, table.by_all, table.by_none) == (12, 0, 0, 0)
    html = build_report([tmp_path], tmp_path / "report", echo=lambda _: None)
    page = html.read_text()
    assert "p01, p02, p03, p04, p05, p06, p07, p08, ... and 3 more" in page  # truncated, with the count
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| grpo | 11 | p01, p02, p03, p04, p05, p06, p07, p08, ... and 3 more |" in md


def test_one_baseline_row_per_base_model_evaluation(tmp_path):
    problems = {"p0": [1.0, 0.0, 0.0, 0.0], "p1": NONE}
    for trainer in ("grpo", "sft", "rlaif"):
        _trained_run(tmp_path, trainer, trainer, 0, {"before": problems, "after": problems})
    # The same base model and settings, other figures: kept apart, and the manifests' difference named.
    _trained_run(
        tmp_path,
        "vspo",
        "vspo",
        0,
        {"before": {"p0": ALL, "p1": NONE}, "after": problems},
        manifest={"config": {"threads": 2}},
    )
    # Another answer format (the trainer's M = 2): another evaluation, kept apart and said why.
    _trained_run(tmp_path, "vpo", "vpo", 0, {"before": problems, "after": problems}, m=2)
    every = _rows(tmp_path)
    assert sum(r.phase == "before" for r in every) == 5
    rows = compare.merge_baselines(every)
    before = {r.trainer: r for r in rows if r.phase == "before"}
    assert set(before) == {"grpo, rlaif, sft", "vspo", "vpo"}
    merged = before["grpo, rlaif, sft"]
    assert merged.shared_by == ["grpo", "rlaif", "sft"]
    assert "one row for the before-evaluations of 3 runs" in merged.note
    assert (
        "kept apart from the before-evaluation of vspo (pass@1 0.125 vs 0.500; differing: threads 1 vs 2)"
        in merged.note
    )
    assert before["vpo"].note == (
        "evaluated apart from the before-evaluation of grpo, rlaif, sft (grpo): answers per "
        "rollout 2 vs 1 (the trainer's answer format); evaluated apart from the "
        "before-evaluation of vspo (vspo): answers per rollout 2 vs 1 (the trainer's answer "
        "format)"
    )
    assert len(rows) == len(every) - 2  # after rows untouched
    html = build_report([tmp_path], tmp_path / "report", echo=lambda _: None)
    table = list(csv.DictReader((tmp_path / "report" / "leaderboard.csv").read_text().splitlines()))
    assert [(r["trainer"], r["shared_by"]) for r in table if r["phase"] == "before"].count(
        ("grpo, rlaif, sft", "grpo,rlaif,sft")
    ) == 1
    page = html.read_text()
    assert "kept apart from the before-evaluation of vspo" in page


def test_the_report_answers_is_a_better_than_b(tmp_path):
    """Two trainers x two seeds: the page, report.md and leaderboard.json carry paired differences with intervals,
    means over seeds, and the solved-only-by table."""
    for seed, ids in ((0, ("a", "b")), (1, ("c", "d"))):
        _trained_run(
            tmp_path,
            f"grpo-s{seed}",
            "grpo",
            seed,
            {"before": {p: NONE for p in ids}, "after": {ids[0]: ALL, ids[1]: NONE}},
        )
        _trained_run(
            tmp_path, f"vpo-s{seed}", "vpo", seed, {"before": {p: NONE for p in ids}, "after": {p: NONE for p in ids}}
        )
    html = build_report([tmp_path], tmp_path / "report", echo=lambda _: None)
    page = html.read_text()
    for section in (
        "After − before, per trained run",
        "Method − method, on the same problems",
        "Over seeds",
        "Solved only by",
        'id="between-methods"',
        'id="differences-over-seeds"',
    ):
        assert section in page
    assert "grpo − vpo" in page
    # Two problems, differences (1, 0) at each seed: +0.5 [0, 1], which cannot tell the methods apart: no colour.
    assert '<td class="num better"' not in page and '<td class="num worse"' not in page
    assert (
        verdict(Estimate(1.0, 1.0, 1.0)),
        verdict(Estimate(-0.5, -1.0, -0.01)),
        verdict(Estimate(0.5, 0.0, 1.0)),
        verdict(Estimate(0.5)),
    ) == ("better", "worse", "", "")
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| math | m | best-of-k | 0 | grpo - vpo | 2 | +0.500 [+0.00, +1.00] |" in md
    assert "| grpo | 2 | a, c |" in md and "| vpo | 0 | - |" not in md
    exported = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    kinds = [d["kind"] for d in exported["differences"]]
    assert kinds.count("after - before") == 4 and kinds.count("method - method") == 2
    seeds = {g["label"]: g for g in exported["over_seeds"]}
    assert seeds["grpo - vpo"]["metrics"]["pass@1"]["value"] == 0.5 and seeds["grpo - vpo"]["seeds"] == [0, 1]
    assert exported["solved_only_by"][0]["only"] == {"base model": [], "grpo": ["a", "c"], "vpo": []}
    assert len(exported["table"]) == 6  # one before row per seed (grpo's and vpo's are the same evaluation)


def test_a_store_indexed_before_outcomes_were_recorded_is_upgraded(tmp_path):
    db = tmp_path / "results.sqlite"
    old = sqlite3.connect(db)
    old.execute(
        "CREATE TABLE problems (run_dir TEXT, phase TEXT, problem_id TEXT, n INTEGER, successes INTEGER, "
        "scalars TEXT, PRIMARY KEY (run_dir, phase, problem_id))"
    )
    old.execute("INSERT INTO problems VALUES ('r', 'eval', 'p0', 2, 1, '[1.0, 0.0]')")
    old.commit()
    old.close()
    folder = _fake_run(tmp_path / "runs", "a", [(0, [True, False])])
    index_run(db, folder)
    conn = connect(db)
    assert [r["outcomes"] for r in conn.execute("SELECT outcomes FROM problems ORDER BY run_dir")] == [
        "[[null, 1, null, 0], [null, 0, null, 0]]",
        None,
    ]


def test_solved_at_c_is_paired_from_evolve_s_call_numbers(tmp_path):
    """evolve's records carry the model call that made each candidate: solved@c per problem is "a success within the
    first c calls", so solved@c gets a paired difference too (the leaderboard keeps Wilson's interval)."""
    folder = tmp_path / "evolve"
    folder.mkdir()
    # before: p0 solved at call 3, p1 at call 1, p2 never; after: p0 at call 1, p1 at call 1, p2 at call 4.
    calls = {
        "before": {"p0": [(1, False), (3, True)], "p1": [(1, True)], "p2": [(1, False), (2, False)]},
        "after": {"p0": [(1, True)], "p1": [(1, True), (2, False)], "p2": [(2, False), (4, True)]},
    }
    metrics = {}
    with open(folder / "samples.jsonl", "w") as f:
        for phase, problems in calls.items():
            for pid, candidates in problems.items():
                for i, (call, ok) in enumerate(candidates):
                    f.write(
                        json.dumps(
                            {
                                "problem_id": pid,
                                "phase": phase,
                                "sample_index": i,
                                "call": call,
                                "success": ok,
                                "scalar": float(ok),
                                "text": "x",
                            }
                        )
                        + "\n"
                    )
            for c in (1, 4):
                metrics[f"{phase}/solved@{c}"] = (
                    sum(any(ok and call <= c for call, ok in cands) for cands in problems.values()) / 3
                )
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "manifest.json").write_text(
        json.dumps(
            {
                "status": "complete",
                "seed": 0,
                "task": {"eval_problems": 3},
                "config": {"task": "code", "trainer": "grpo", "searcher": "evolve", "model": "m"},
            }
        )
    )
    rows = _rows(tmp_path)
    before = next(r for r in rows if r.phase == "before")
    assert before.values["solved@1"] == {"p0": 0.0, "p1": 1.0, "p2": 0.0}
    assert before.headline["solved@1"].low == pytest.approx(wilson(1 / 3, 3)[0])
    (diff,) = compare.after_minus_before(rows)
    # solved@1: (1, 1, 0) - (0, 1, 0) -> (+1, 0, 0): mean 1/3; solved@4: (1, 1, 1) - (1, 1, 0) -> (0, 0, +1).
    assert diff.metrics["solved@1"].value == pytest.approx(1 / 3) and diff.values["solved@1"] == [1.0, 0.0, 0.0]
    assert diff.metrics["solved@4"].value == pytest.approx(1 / 3) and diff.metrics["solved@4"].low == 0.0


def test_the_run_summary_prints_the_paired_after_minus_before_of_that_run_only(tmp_path):
    problems = ["p0", "p1", "p2"]
    _trained_run(
        tmp_path, "grpo", "grpo", 0, {"before": {p: NONE for p in problems}, "after": {p: ALL for p in problems}}
    )
    _trained_run(
        tmp_path, "vpo", "vpo", 0, {"before": {p: NONE for p in problems}, "after": {p: NONE for p in problems}}
    )
    db = tmp_path / "results.sqlite"
    rebuild(db, find_runs([tmp_path]))
    text = paired_change(db, tmp_path / "grpo")
    assert "paired over the 3 eval problems" in text
    # +1 on every problem: the interval is [+1, +1], which excludes 0; vpo's unchanged run is not in grpo's summary.
    # No spread in the differences: the detectable change falls back to a 0/1 score's largest sd, 2.8 x 0.5 / sqrt(3)
    assert [line.split() for line in text.splitlines() if line.startswith("pass@1")] == [
        ["pass@1", "+1.000", "[+1.000,", "+1.000]", "better", f"{2.8 * 0.5 / math.sqrt(3):.3f}"]
    ]
    unchanged = paired_change(db, tmp_path / "vpo")
    verdicts = [line.split()[-3:-1] for line in unchanged.splitlines() if line.startswith(("pass@", "best@"))]
    assert verdicts == [["no", "worse"]] * 4  # [0, 0] excludes a drop of 0.1
    assert paired_change(db, tmp_path / "not-a-run") == ""


def test_verdicts_and_the_detectable_change_by_hand():
    assert summary.verdict(Estimate(0.1, 0.02, 0.2)) == "better"
    assert summary.verdict(Estimate(-0.1, -0.2, -0.01)) == "worse"
    assert summary.verdict(Estimate(0.0, -0.09, 0.1)) == "no worse"  # excludes a drop of 0.1
    assert summary.verdict(Estimate(0.0, -0.25, 0.12)) == "undecided"  # "held" would claim what it cannot see
    # differences 1, 0, 0, -1: sd sqrt(2/3), n 4: 2.8 x 0.8165 / 2 = 1.143
    assert summary.detectable([1.0, 0.0, 0.0, -1.0]) == pytest.approx(2.8 * math.sqrt(2 / 3) / 2)


def test_the_best_example_is_the_shortest_of_the_top_scoring_candidates(tmp_path):
    rows = [
        {
            "problem_id": "p",
            "phase": "after",
            "text": t,
            "scalar": s,
            "extracted": "7",
            "rewards": {},
            "prompt": "Calculate 3 + 4.",
            "reference": "7",
        }
        for t, s in (("7 = 3 + 4 = Unknown + 0 = 7", 1.0), ("\\boxed{7}", 1.0), ("no", 0.0), ("long", 0.5))
    ]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = example_samples(tmp_path / "samples.jsonl", "after")
    assert "best  p: 'Calculate 3 + 4.' (reference '7')\n        answer '\\\\boxed{7}'" in text
    assert "worst p: 'Calculate 3 + 4.' (reference '7')\n        answer 'no'" in text
    assert "no candidate scored" not in text


def test_when_nothing_scored_no_candidate_is_called_the_best(tmp_path):
    rows = [
        {"problem_id": "p", "phase": "after", "text": t, "scalar": 0.0, "extracted": None, "rewards": {}}
        for t in ("izon metab", "selenium")
    ]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = example_samples(tmp_path / "samples.jsonl", "after")
    assert "no candidate scored above 0 (of 2); one of them:" in text
    assert "e.g.  p:" in text and "best" not in text and "worst" not in text


def test_a_task_name_like_a_path_writes_nothing_outside_out(tmp_path):
    """A shared runs folder holds a run whose task is named "../../../X" (or an absolute path): the report's plot
    files derived from it stay inside --out, under a sanitised name."""
    runs = tmp_path / "shared" / "runs"
    for name, task in (("traversal", "../../../escaped"), ("absolute", str(tmp_path / "absolute-escape"))):
        _trained_run(
            runs,
            name,
            "grpo",
            0,
            {"before": {"a": NONE}, "after": {"a": ALL}},
            manifest={"task": {"name": task, "eval_problems": 1}, "config": {"task": task}},
        )
    before = {p for p in tmp_path.rglob("*")}
    out = tmp_path / "shared" / "report"
    build_report([runs], out, echo=lambda _: None)
    written = {p for p in tmp_path.rglob("*")} - before
    assert written and all(p == out or out in p.parents for p in written), sorted(map(str, written))
    assert not list(tmp_path.rglob("escaped*")) and not (tmp_path / "absolute-escape-pass-at-k.png").exists()


def test_report_md_escapes_markup_from_run_data(tmp_path):
    """report.md carried a run's raw `<script>` text (here in a warning and an arm name); now it is escaped, as
    the HTML page escapes it, and a table cell cannot be split by a `|`."""
    runs = tmp_path / "runs"
    _trained_run(
        runs,
        "hostile",
        "grpo",
        0,
        {"before": {"a": NONE}, "after": {"a": ALL}},
        manifest={"warnings": ["<script>alert(1)</script> | broken"], "config": {"arm": "x<b>|y"}},
    )
    build_report([runs], tmp_path / "report", echo=lambda _: None)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt; \\| broken" in md
    assert "<b>" not in md


def test_a_stopped_run_is_marked_in_every_comparison(tmp_path):
    """A run whose trainer stopped and rolled back must not read as "no change": its label in after - before,
    method - method and over seeds says how many steps were trained."""
    flat = {"before": {"a": NONE, "b": ALL}, "after": {"a": NONE, "b": ALL}}
    for seed in (0, 1):
        _trained_run(tmp_path, f"grpo-s{seed}", "grpo", seed, flat, manifest={"config": {"steps": 4}})
        folder = _trained_run(tmp_path, f"vpo-s{seed}", "vpo", seed, flat, manifest={"config": {"steps": 4}})
        if seed == 1:
            metrics = json.loads((folder / "metrics.json").read_text())
            metrics |= {"stopped/at_step": 2, "stopped/steps_trained": 1}
            (folder / "metrics.json").write_text(json.dumps(metrics))
    rows = compare.merge_baselines(_rows(tmp_path))
    mark = "stopped: 1 of 4 steps trained"
    befores = {d.runs[0]: d.a for d in compare.after_minus_before(_rows(tmp_path))}
    assert befores["vpo-s1"] == f"vpo after ({mark})" and befores["vpo-s0"] == "vpo after"
    between = {d.seed: (d.a, d.b) for d in compare.method_differences(rows)}
    assert between == {0: ("grpo", "vpo"), 1: ("grpo", f"vpo ({mark})")}
    labels = {g.label for g in compare.over_seeds(rows)}
    assert f"vpo (after) [seed 1 {mark}]" in labels and "grpo (after)" in labels
    (pair,) = [g for g in compare.differences_over_seeds(compare.method_differences(rows))]
    assert pair.label == f"grpo - vpo [seed 1 {mark}]"
