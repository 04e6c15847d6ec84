"""What a finished run warns about (harness/report/health.py, harness/runner/finish.py): the trainer's own lines,
a training reward that fell beyond its noise, a score the trained policy lost beyond its paired interval; in the
manifest, at the end of the printed summary and in `harness report`. And nothing after "complete" fails the run."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from test_report import ALL, NONE, _fake_run, _trained_run
from tiny_runs import tiny_argv

from harness.cli import main
from harness.report import health
from harness.report.build import build_report
from harness.report.data import Estimate, manifest
from harness.report.student_t import t_cdf, t_quantile
from harness.runner.finish import finish, health_warnings
from harness.store.results_db import connect, index_run
from harness.store.run_folder import RunStore

FALLING = [4.0, 3.1, 1.9, 1.0]


def test_slope_and_its_standard_error_by_hand():
    # x = 0..3 (mean 1.5, Sxx = 5), y = 4, 3, 3, 1 (mean 2.75): Sxy = -4.5, slope -0.9; fitted 4.1, 3.2, 2.3, 1.4,
    # residuals -0.1, -0.2, 0.7, -0.4: SSR 0.70, s^2 = 0.70 / 2, standard error sqrt(0.35 / 5) = 0.2646.
    b, error = health.slope([4.0, 3.0, 3.0, 1.0])
    assert b == pytest.approx(-0.9) and error == pytest.approx(math.sqrt(0.07))
    # y = 1, 0, 1, 0: Sxy = -1, slope -0.2; residuals 0.2, -0.6, 0.6, -0.2: SSR 0.8, error sqrt(0.4 / 5) = 0.2828.
    b, error = health.slope([1.0, 0.0, 1.0, 0.0])
    assert b == pytest.approx(-0.2) and error == pytest.approx(math.sqrt(0.08))
    assert health.slope([2.0, 1.0, 0.0]) == pytest.approx((-1.0, 0.0))  # a straight line: no error


def test_student_t_quantiles_match_the_tables():
    # two-sided 95% points from any t table
    for df, t in ((1, 12.706), (2, 4.303), (3, 3.182), (10, 2.228), (30, 2.042)):
        assert t_quantile(0.975, df) == pytest.approx(t, abs=1e-3)
    assert t_quantile(0.025, 4) == pytest.approx(-2.776, abs=1e-3)
    assert t_cdf(0.0, 3) == 0.5 and t_cdf(2.920, 2) == pytest.approx(0.95, abs=1e-4)


def test_the_reward_warning_needs_a_fall_beyond_its_noise():
    # slope -1.02, t = 16 with 2 degrees of freedom (one-sided 99% point 6.96): warned
    assert health.reward_went_down(FALLING) == (
        "training reward went down: reward_mean 4.000 -> 1.000 over 4 steps (slope -1.02 per step, beyond its noise)"
    )
    # -0.9 at 3.4 standard errors was warned by the old fixed 2; with 2 degrees of freedom it is within the noise
    assert health.reward_went_down([4.0, 3.0, 3.0, 1.0]) is None
    assert health.reward_went_down([1.0, 0.0, 1.0, 0.0]) is None  # -0.2 is 0.7 standard errors: noise
    assert health.reward_went_down([0.5, 0.4, 0.3]) is None  # fewer than 4 steps
    assert health.reward_went_down([0.1, 0.2, 0.2, 0.4]) is None  # rising
    assert health.reward_went_down([0.3] * 6) is None  # flat: slope 0, error 0
    assert health.reward_went_down([0.4, 0.3, 0.2, 0.1]).startswith(
        "training reward went down: reward_mean 0.400 -> 0.100 over 4 steps (slope -0.1 "
    )
    # a steady fall smaller than MIN_DROP over the whole run is not worth a warning: 0.030 in all
    assert health.reward_went_down([0.30, 0.29, 0.28, 0.27]) is None
    # values that are not finite numbers are left out, not fatal: 4 of these 6 are left
    assert "over 4 steps" in health.reward_went_down([4.0, None, 3.0, float("nan"), 1.9, 1.0])


def test_a_collapse_in_the_last_step_is_warned():
    # a line through these four barely tilts (t = 2.0); the last value is far below the first three's range
    assert health.reward_went_down([0.50, 0.52, 0.49, 0.05]) == (
        "training reward went down: reward_mean 0.500 -> 0.050 over 4 steps (the last step fell below the earlier "
        "steps' range)"
    )
    assert health.reward_went_down([0.50, 0.52, 0.49, 0.47]) is None  # within the earlier steps' noise


@pytest.mark.parametrize("ar", [0.0, 0.5])
def test_flat_noisy_curves_rarely_warn(ar):
    """200 simulated flat 4-step curves (noise sd 0.1 around 0.4; independent, or AR(1) with coefficient ``ar``):
    fewer than 5% warn. The old test (2 standard errors, no last-step test) warned on 9% and 15-18%."""
    rng = np.random.default_rng(2026)
    warned = 0
    for _ in range(200):
        noise = rng.normal(0.0, 0.1, 4)
        curve = [noise[0] / math.sqrt(1 - ar * ar)]
        for e in noise[1:]:
            curve.append(ar * curve[-1] + e)
        warned += health.reward_went_down([0.4 + x for x in curve]) is not None
    assert warned < 10, f"{warned} of 200 flat curves warned"


def test_losing_the_solved_problems_is_an_exact_test():
    # One candidate per problem and phase: the sign test over changed problems, 3 lost, 0 gained: p = 1/8.
    one = {p: (1, 1) for p in "abc"}
    assert health.lost_solved_p(one, {p: (0, 1) for p in "abc"}) == pytest.approx(1 / 8)
    # 3 lost, 1 gained: the after side holds 1 of the 4 changed problems' successes, P(Bin(4, 1/2) <= 1) = 5/16
    gained_one = {"a": (0, 1), "b": (0, 1), "c": (0, 1), "d": (1, 1)}
    assert health.lost_solved_p({**one, "d": (0, 1)}, gained_one) == pytest.approx(5 / 16)
    # Four candidates: a problem with 2 successes of 8 puts none on after's 4 with probability C(6,4)/C(8,4) = 15/70,
    # 3 of 8: 5/70, 1 of 8: 35/70. All three solved before and none after: p = 15/70 x 5/70 x 35/70 = 0.00765.
    before = {"a": (2, 4), "b": (3, 4), "c": (1, 4), "d": (0, 4), "e": (4, 4)}
    after = {"a": (0, 4), "b": (0, 4), "c": (0, 4), "d": (0, 4), "e": (4, 4)}
    assert health.lost_solved_p(before, after) == pytest.approx(15 / 70 * 5 / 70 * 35 / 70)
    line = health.lost_solved(before, after)
    assert line == (
        "the trained policy lost problems it solved: 3 of the 4 solved before are unsolved after (gained 0); its "
        "right candidates fell 10 -> 4 (exact test over problems' candidates, p = 0.008)"
    )
    assert health.lost_solved(before, dict(before)) is None  # nothing changed
    assert health.lost_solved(after, before) is None  # it gained them: not a loss


def test_the_score_warning_needs_an_interval_below_zero_on_a_score():
    drop = Estimate(-0.25, -0.5, -0.125)
    assert health.scored_lower("pass@1", 0.75, 0.5, drop) == (
        "the trained policy scored lower on pass@1: 0.750 -> 0.500, change -0.250 [-0.500, -0.125] "
        "(paired 95% interval excludes 0)"
    )
    assert health.scored_lower("solved@4", 1, 0.5, drop).startswith(
        "the trained policy scored lower on solved@4: 1.000 -> 0.500"
    )
    assert health.scored_lower("pass@1", 0.75, 0.5, Estimate(-0.25, -0.5, 0.0)) is None  # the interval touches 0
    assert health.scored_lower("pass@1", 0.75, 0.5, Estimate(-0.25)) is None  # no interval
    assert health.scored_lower("pass@1", 0.75, 0.5, Estimate(math.nan, math.nan, math.nan)) is None
    assert health.scored_lower("num_tokens", 100, 50, drop) is None  # not a score
    assert health.scored_lower("behaviour/conciseness", 0.75, 0.5, drop) is None  # not a score that must rise


def test_health_warnings_skip_the_paired_check_without_an_index(tmp_path):
    _trained_run(tmp_path, "grpo", "grpo", 0, {"before": {"p0": ALL, "p1": ALL}, "after": {"p0": NONE, "p1": NONE}})
    metrics = {"train/reward_mean": FALLING}
    only_trend = [health.reward_went_down(FALLING)]
    assert health_warnings(metrics, None, tmp_path / "grpo") == only_trend
    assert health_warnings(metrics, tmp_path / "missing.sqlite", tmp_path / "grpo") == only_trend
    assert not (tmp_path / "missing.sqlite").exists()  # not made by looking
    (tmp_path / "garbage.sqlite").write_text("not a database")
    assert health_warnings(metrics, tmp_path / "garbage.sqlite", tmp_path / "grpo") == only_trend
    assert health_warnings({}, None, tmp_path / "grpo") == []


def _finish(tmp_path, trainer_lines, echo):
    """``finish`` of a hand-made trained run whose every problem was solved before training and none after, with a
    falling reward curve; the trainer's warnings recorded through ``store.warn``."""
    _trained_run(
        tmp_path,
        "grpo",
        "grpo",
        0,
        {"before": {"p0": ALL, "p1": ALL}, "after": {"p0": NONE, "p1": NONE}},
        manifest={"status": "running"},
    )
    store = RunStore(tmp_path, "grpo", existing=True)
    store.metrics["train/reward_mean"] = FALLING
    for line in trainer_lines:
        store.warn(line)
    the_manifest = json.loads((store.dir / "manifest.json").read_text())
    plan = SimpleNamespace(cfg=SimpleNamespace(out=str(tmp_path), push_to_hub=""), trainer=object())
    finish(plan, store, the_manifest, 0.0, echo)
    return store.dir


def test_finish_records_and_prints_every_warning(tmp_path):
    said: list[str] = []
    stopped = "training stopped at step 3: policy collapsed (all answers one text); model/ holds the step-2 weights"
    folder = _finish(tmp_path, [stopped], said.append)
    written = json.loads((folder / "manifest.json").read_text())
    drop = (
        "the trained policy scored lower on pass@1: 1.000 -> 0.000, change -1.000 [-1.000, -1.000] (paired 95% "
        "interval excludes 0)"
    )
    assert written["status"] == "complete"
    assert written["warnings"][:3] == [stopped, health.reward_went_down(FALLING), drop]
    assert len(written["warnings"]) == 7  # pass@1, pass@2, best@1, best@2 all fell; and the problems were lost
    assert written["warnings"][-1].startswith("the trained policy lost problems it solved: 2 of the 2 solved before")
    # the index holds the manifest as rewritten with the checks' lines
    assert manifest(connect(tmp_path / "results.sqlite"), str(folder.resolve()))["warnings"] == written["warnings"]
    # printed after the tables, one line each, just before the last line
    text = "\n".join(said).splitlines()
    assert text[-1].startswith(f"wrote {folder} in ")
    assert text[-8:-1] == [f"warning: {line}" for line in written["warnings"]]
    assert text.index("training     first step  last step  steps") < text.index(f"warning: {stopped}")


def test_nothing_after_complete_fails_the_run(tmp_path, monkeypatch):
    def boom(*_, **__):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("harness.runner.finish.summary_table", boom)
    monkeypatch.setattr("harness.runner.finish.paired_difference", boom)  # the paired check: skipped silently
    said: list[str] = []
    folder = _finish(tmp_path, [], said.append)
    assert "warning: could not print the summary: RuntimeError: boom" in said
    assert json.loads((folder / "manifest.json").read_text())["warnings"] == [health.reward_went_down(FALLING)]
    monkeypatch.setattr("harness.runner.finish.health_warnings", boom)
    said.clear()
    _finish(tmp_path / "again", [], said.append)
    assert "warning: could not check the run's figures: RuntimeError: boom" in said


def test_the_command_line_exits_0_when_the_summary_raises(tmp_path, monkeypatch, capsys, tiny_policy_spec):
    def boom(metrics):
        raise IndexError("list index out of range")

    monkeypatch.setattr("harness.runner.finish.summary_table", boom)
    sets = {"searcher.n": 1, "searcher.max_new_tokens": 2}
    code = main(tiny_argv("none", limit=1, k=1, threads=None, sets=sets, out=tmp_path))
    out = capsys.readouterr().out
    assert code == 0
    assert "warning: could not print the summary: IndexError: list index out of range" in out.splitlines()
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    written = json.loads((folder / "manifest.json").read_text())
    assert written["status"] == "complete" and written["warnings"] == []


def test_the_report_shows_each_run_s_warnings(tmp_path):
    stopped = "training stopped at step 3: policy collapsed; model/ holds the step-2 weights"
    _fake_run(tmp_path / "runs", "warned", [(0, [True, False])], manifest={"warnings": [stopped, "a <b> & c"]})
    _fake_run(tmp_path / "runs", "quiet", [(0, [True, True])])  # a run from before warnings: no key at all
    html = build_report([tmp_path / "runs"], tmp_path / "report", echo=lambda _: None)
    page = html.read_text()
    below = page[page.index('<table id="leaderboard"') : page.index('<h2 id="differences">')]
    assert '<h3 id="warnings">Warnings</h3>' in below
    assert f"<li><code>warned</code>: {stopped}</li>" in below
    assert "<li><code>warned</code>: a &lt;b&gt; &amp; c</li>" in below  # escaped like everything else
    assert "2 warning(s) from the runs" in page and f"<li>warning: {stopped}</li>" in page  # and in its section
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"## Warnings\n\n- `warned`: {stopped}\n- `warned`: a &lt;b&gt; &amp; c\n" in md  # escaped, as the page
    exported = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    assert exported["warnings"] == [{"run": "warned", "warning": stopped}, {"run": "warned", "warning": "a <b> & c"}]


def test_a_report_without_warnings_has_no_section(tmp_path):
    _fake_run(tmp_path / "runs", "quiet", [(0, [True, True])], manifest={"warnings": []})
    page = build_report([tmp_path / "runs"], tmp_path / "report", echo=lambda _: None).read_text()
    assert 'id="warnings"' not in page and "warning(s)" not in page
    assert "## Warnings" not in (tmp_path / "report" / "report.md").read_text()


def test_a_behaviour_that_fell_is_warned_in_the_direction_trained(tmp_path):
    """A run given behaviour=conciseness whose answers scored 0.9 before and 0.2 after: warned (RLAIF on maze once
    lost 0.280 of conciseness with no word); the same fall in a behaviour it was not given is not a warning."""
    folder = _trained_run(
        tmp_path, "rlaif", "rlaif", 0, {"before": {p: ALL for p in "abc"}, "after": {p: ALL for p in "abc"}}
    )
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    for s in samples:
        s["behaviours"] = {"conciseness": 0.9 if s["phase"] == "before" else 0.2}
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics |= {"before/behaviour/conciseness": 0.9, "after/behaviour/conciseness": 0.2}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    db = tmp_path / "results.sqlite"
    index_run(db, folder)
    given = health_warnings(metrics, db, folder, trained=("conciseness",))
    assert given == [
        "the trained policy scored lower on behaviour/conciseness (the behaviour it was trained towards): 0.900 -> "
        "0.200, change -0.700 [-0.700, -0.700] (paired 95% interval excludes 0)"
    ]
    assert health_warnings(metrics, db, folder) == []  # not the behaviour it was trained towards
