"""A run at its defaults says how long the defaults matrix measured it to take (harness/runner/expected_time.py),
naming the machine; a run that changes the work, or a cell never measured, says nothing."""

from __future__ import annotations

import json

from harness.runner.config import RunConfig
from harness.runner.expected_time import MEASURED, expected_time
from harness.runner.plan import build_plugins

ROWS = [
    {"task": "code", "trainer": "vpo", "searcher": "best-of-k", "seed": s, "exit": 0, "minutes": m}
    for s, m in ((0, 12.4), (1, 11.0), (2, 13.9))
]
ROWS.append({"task": "code", "trainer": "grpo", "searcher": "best-of-k", "seed": 0, "exit": 2, "minutes": 0.1})


def _measured(tmp_path):
    path = tmp_path / "measured.json"
    path.write_text(json.dumps({"machine": "AMD EPYC 9B14, 2 cores, avx512_bf16", "rows": ROWS}))
    return path


def test_a_run_at_its_defaults_says_the_measured_minutes_and_the_machine(tmp_path):
    line = expected_time(
        RunConfig(task="code", trainer="vpo", seed=5, out=str(tmp_path), threads=2), _measured(tmp_path)
    )
    assert line == (
        "expected time: 11.0-13.9 min (measured at 3 seeds on AMD EPYC 9B14, 2 cores, avx512_bf16; "
        "bench/defaults_matrix.py)"
    )
    one = [{**ROWS[0]}]
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"machine": "AMD EPYC", "rows": one}))
    assert expected_time(RunConfig(task="code", trainer="vpo"), path) == (
        "expected time: about 12.4 min (measured once on AMD EPYC; bench/defaults_matrix.py)"
    )
    path.write_text(json.dumps({"machine": "AMD EPYC", "rows": [{**ROWS[0], "busy": True}]}))
    assert expected_time(RunConfig(task="code", trainer="vpo"), path) == (
        "expected time: at most about 12.4 min (measured once on AMD EPYC, beside other work; bench/defaults_matrix.py)"
    )
    # a cell re-measured on another machine says that machine, not the file's
    path.write_text(json.dumps({"machine": "AMD EPYC", "rows": [{**ROWS[0], "machine": "AMD EPYC, AVX2"}]}))
    assert expected_time(RunConfig(task="code", trainer="vpo"), path) == (
        "expected time: about 12.4 min (measured once on AMD EPYC, AVX2; bench/defaults_matrix.py)"
    )


def test_changed_work_a_failed_cell_or_an_unmeasured_one_says_nothing(tmp_path):
    measured = _measured(tmp_path)
    for cfg in (
        RunConfig(task="code", trainer="vpo", limit=4),
        RunConfig(task="code", trainer="vpo", steps=2),
        RunConfig(task="code", trainer="vpo", model="tiny-random"),
        RunConfig(task="code", trainer="vpo", options={"task": {}, "trainer": {"lr": "1e-4"}, "searcher": {}}),
        RunConfig(task="code", trainer="grpo"),  # measured, but it failed
        RunConfig(task="maze", trainer="vpo"),
    ):
        assert expected_time(cfg, measured) is None, cfg
    assert expected_time(RunConfig(task="code", trainer="vpo"), tmp_path / "missing.json") is None


def test_the_shipped_figures_are_well_formed_where_there_are_any():
    if not MEASURED.exists():
        return
    data = json.loads(MEASURED.read_text())
    assert data["machine"] and data["rows"]
    for row in data["rows"]:
        assert row["exit"] == 0 and row["minutes"] > 0
        assert {"task", "trainer", "searcher", "seed", "recorded"} <= set(row)
        assert row.get("busy", False) in (True, False)


def test_a_training_run_says_its_budget_warm_up_included(plugins, tmp_path):
    """VPO's format warm-up can cost more SFT steps than its RL steps: the line says both, from the built trainer
    (so --steps and --set trainer.warmup_steps show); GRPO says its steps; evaluation alone says nothing."""
    from harness.runner.plan import Plan, training_budget

    def budget(**cfg):
        task, trainer, searcher, options = build_plugins(RunConfig(out=str(tmp_path), **cfg), plugins)
        return training_budget(Plan(RunConfig(**cfg), task, trainer, searcher, options, [], [], [], []))

    assert budget(task="code", trainer="vpo") == (
        "training budget: a format warm-up of at most 48 SFT steps (it stops once 60% of checked rollouts are well "
        "formed), then 4 vpo steps"
    )
    assert (
        budget(
            task="code", trainer="vpo", steps=2, options={"task": {}, "trainer": {"warmup_steps": "0"}, "searcher": {}}
        )
        == "training budget: 2 vpo steps"
    )
    assert budget(task="math", trainer="grpo") == "training budget: 10 grpo steps"
    assert budget(task="math", trainer="sft") == "training budget: 8 sft steps"
    assert budget(task="math", trainer="none") is None
