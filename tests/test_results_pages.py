"""The results pages (docs/results/) and the README's demo excerpt are rendered from the records in bench/results/
(docs/results_pages.py, listed in docs/generate.py): they are what the records give now; a row under current results
is at its task's `version` now, one at another version goes to the history page (checked with a fabricated record,
so the check can fail); every row of figures names its commit, machine and seed; and bench/record_demo.py records
the summary a demo run printed."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest
from docs_generator import generate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
sys.path.insert(0, str(ROOT / "bench"))
import record_demo  # noqa: E402
import results_pages  # noqa: E402

CURRENT = ["README.md", "demo.md", "defaults-matrix.md", "code-verdicts.md", "steering.md", "experiments.md"]
MODULES = {
    "math": "math",
    "code": "code",
    "mmlu-pro": "mmlu_pro",
    "persona": "persona",
    "maze": "maze",
    "prompts": "prompts",
    "rg": "reasoning_gym_bridge",
}


def task_version(task: str) -> str:
    """The task class's `version` attribute, imported (not read as text)."""
    module = importlib.import_module(f"harness.tasks.{MODULES['rg' if task.startswith('rg:') else task]}")
    (version,) = {
        v.version
        for v in vars(module).values()
        if isinstance(v, type) and v.__module__ == module.__name__ and isinstance(getattr(v, "version", None), str)
    }
    return version


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each Markdown table outside code blocks: (its header, its rows), cells stripped."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif block:
            found.append((block[0], block[2:]))
            block = []
    return found


def off_version(text: str) -> list[str]:
    """Rows of a page's tables whose task version is not the task's now."""
    wrong = []
    for header, rows in tables(text):
        if "task version" not in header:
            continue
        task, version = header.index("task"), header.index("task version")
        for row in rows:
            if row[task] != "-" and row[version].rstrip("†‡") != task_version(row[task]):
                wrong.append(" | ".join(row))
    return wrong


def unnamed(text: str) -> list[str]:
    """Rows of figures (a table with a task version column) missing a commit, machine or seed, or a table of
    figures without those columns."""
    missing = []
    for header, rows in tables(text):
        header = [h.removesuffix("s") for h in header]  # the records' table: commits, machines, seeds
        if not {"commit", "machine", "seed"} <= set(header):
            missing.append("table without commit, machine and seed: " + " | ".join(header))
            continue
        cells = [header.index(c) for c in ("commit", "machine", "seed")]
        missing += [" | ".join(row) for row in rows if any(not row[i] or row[i] == "-" for i in cells)]
    return missing


def test_the_pages_are_what_the_records_give_now_and_are_listed_in_the_generator():
    pages = results_pages.render_all()
    assert set(pages) == {f"docs/results/{name}" for name in [*CURRENT, "history.md"]} | {"README.md"}
    stale = [path for path, text in pages.items() if (ROOT / path).read_text() != text]
    assert stale == [], f"stale: {stale}; run python docs/generate.py"
    listed = [path for path, _ in generate.PAGES]
    assert set(pages) <= set(listed)
    assert generate.stale(list(pages)) == []


def test_the_task_versions_read_from_the_files_are_the_classes():
    for task in [t if t != "rg" else "rg:x" for t in MODULES]:
        assert results_pages.current_version(task) == task_version(task)


def test_every_current_row_is_at_its_task_s_version_now():
    for name in CURRENT:
        assert off_version((ROOT / "docs/results" / name).read_text()) == [], name
    assert sum(len(rows) for _, rows in tables((ROOT / "docs/results/defaults-matrix.md").read_text())) > 0


def test_every_row_of_figures_names_its_commit_machine_and_seed():
    for name in [*CURRENT, "history.md"]:
        text = (ROOT / "docs/results" / name).read_text()
        if name == "history.md":  # its generated section; the rest is hand-written, its tables recorded by hand
            text = text.split("<!-- generated: superseded -->")[1].split("<!-- end generated: superseded -->")[0]
        if name == "README.md":  # the records' table: one row per record, its values joined
            assert "| record | shown on |" in text
        assert unnamed(text) == [], name
    readme = (ROOT / "README.md").read_text().split("<!-- generated: demo -->")[1].split("<!-- end generated")[0]
    record = json.loads((ROOT / "bench/results/demo.json").read_text())
    assert results_pages.excerpt("\n".join(record["printed"])) in readme
    assert "\n".join(record["printed"]) in (ROOT / "docs/results/demo.md").read_text()
    for said in (f"seed {record['seed']}", f"commit {record['commit']}", record["task_version"]):
        assert said in " ".join(readme.split())


def _demo(version: str) -> dict:
    return {
        "command": "harness run --config experiments/demo.toml",
        "task": "math",
        "task_version": version,
        "seed": 0,
        "threads": 1,
        "seconds": 600.0,
        "commit": "abc1234",
        "machine": {"cpu": "Test CPU", "cores": 2, "isa": ["avx2"]},
        "printed": ["task math, model smollm2-135m; data: x; 48 problems evaluated", f"printed at {version}"],
    }


def test_a_record_at_another_task_version_goes_to_history_and_the_check_catches_one_that_does_not(tmp_path):
    now = task_version("math")
    (tmp_path / "demo.json").write_text(json.dumps(_demo("math-v1")))
    cell = {"cell": "c", "exit": 0, "minutes": 1.0, "task": "maze", "trainer": "none", "searcher": "best-of-k"}
    matrix = {
        "machine": {"cores": 2, "cpu": "Test CPU"},
        "rows": [cell | {"seed": 3, "task_version": "maze-v0", "commit": "def5678"}],
    }
    (tmp_path / "defaults_matrix.json").write_text(json.dumps(matrix))
    pages = results_pages.render_all(results=tmp_path)
    demo, history = pages["docs/results/demo.md"], pages["docs/results/history.md"]
    assert "printed at math-v1" not in demo and "No row at the current task version" in " ".join(demo.split())
    assert "printed at math-v1" in history and "| math | math-v1 | 0 | abc1234 | Test CPU, 2 cores, avx2 |" in history
    assert "| maze | maze-v0 | 3 | def5678 | Test CPU, 2 cores |" in history
    assert "maze-v0" not in pages["docs/results/defaults-matrix.md"]
    assert "superseded: math is at" in " ".join(pages["README.md"].split())
    for name in CURRENT:
        assert off_version(pages[f"docs/results/{name}"]) == []
    # the check itself: the same row under current results is caught
    assert off_version(history.split("## Recorded by hand")[0]) != []
    assert off_version(demo + "\n" + results_pages.table(results_pages.demo_rows(tmp_path), ["seconds"])) != []

    later = tmp_path / "later"
    later.mkdir()
    (later / "demo.json").write_text(json.dumps(_demo(now)))
    pages = results_pages.render_all(results=later)
    assert f"printed at {now}" in pages["docs/results/demo.md"] and off_version(pages["docs/results/demo.md"]) == []
    assert unnamed(pages["docs/results/demo.md"]) == []


def test_a_row_without_its_provenance_is_caught():
    assert unnamed("| a | commit | machine | seed |\n|---|---|---|---|\n| 1 | abc | x |  |\n") != []
    assert unnamed("| a | b |\n|---|---|\n| 1 | 2 |\n") != []


OUTPUT = """grid: 1 cells under runs/demo/
before best-of-k: 192/192 sample (100%)

task math, model smollm2-135m; data: basic_arithmetic; 48 problems evaluated
| metric | before | after |
pass@1 change +0.01
warning: something to say
wrote runs/demo/math-grpo-best-of-k-seed0 in 612.3 s
"""


def test_the_recorder_keeps_the_printed_summary_and_the_run_s_provenance(tmp_path):
    printed, folder = record_demo.summary_lines(OUTPUT)
    assert printed == [
        "task math, model smollm2-135m; data: basic_arithmetic; 48 problems evaluated",
        "| metric | before | after |",
        "pass@1 change +0.01",
        "warning: something to say",
    ]
    assert folder == "runs/demo/math-grpo-best-of-k-seed0"
    run = tmp_path / "math-grpo-best-of-k-seed0"
    run.mkdir()
    manifest = {
        "status": "complete",
        "seconds": 612.3,
        "seed": 0,
        "config": {"seed": 0, "threads": 1, "rollout_dtype": "float32"},
        "task": {"name": "math", "version": "math-v9"},
        "packages": {"torch": "2.13.0+cpu"},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    data = record_demo.record(run, OUTPUT, commit="abc1234")
    assert (data["task_version"], data["seed"], data["threads"], data["commit"]) == ("math-v9", 0, 1, "abc1234")
    assert data["printed"] == printed and data["machine"]["cores"]
    with pytest.raises(ValueError, match="no summary"):
        record_demo.summary_lines("nothing printed\n")
    (run / "manifest.json").write_text(json.dumps(manifest | {"status": "failed"}))
    with pytest.raises(ValueError, match="not complete"):
        record_demo.record(run, OUTPUT)


def test_an_experiment_record_reads_each_arm_over_seeds_and_arm_against_arm(tmp_path):
    """bench/record_experiment.py's record rendered: the held-out evaluator and the training scorer side by side,
    each change with its wider interval and what it reads as (beyond 0; "no worse" only where a drop of 0.1 is
    excluded); an arm with one seed so far is read from that seed, marked; arm - arm rows below."""

    def change(value, low, high):
        return {"value": value, "low": low, "high": high}

    metrics = {
        "heldout/robustness": change(0.1, 0.02, 0.2),
        "behaviour/robustness": change(-0.05, -0.08, 0.01),
        "pass@1": change(-0.02, -0.15, 0.1),
    }
    record = {
        "experiment": "vspo_robustness",
        "file": "experiments/vspo_robustness.toml",
        "claim": "VSPO at least as robust",
        "command": "harness run --config experiments/vspo_robustness.toml",
        "report": "harness report runs/vspo_robustness/cpu",
        "task": "math",
        "task_version": results_pages.current_version("math"),
        "commit": "abc1234",
        "machine": {"cpu": "Test CPU", "cores": 2},
        "seed": [0, 1, 2],
        "arms": [
            {
                "arm": arm,
                "seeds": seeds,
                "warmup_steps": [0] * len(seeds),
                "candidate_tokens": ["96 / 96"],
                "stopped": [],
                "answers": {"before": {"mean_tokens": 50.0, "cut_at_limit": 0.3}, "after": {"mean_tokens": 80.0}},
            }
            for arm, seeds in (("vspo", [0, 1, 2]), ("rlaif", [0]))
        ],
        "over_seeds": [
            {"kind": "after - before", "label": "vspo after - before", "seeds": [0, 1, 2], "metrics": metrics},
            {
                "kind": "method - method",
                "label": "vspo after - rlaif after",
                "seeds": [0, 1, 2],
                "metrics": {"heldout/robustness": change(-0.2, -0.3, -0.1)},
            },
        ],
        "differences": [
            {
                "kind": "after - before",
                "a": "rlaif after",
                "b": "before",
                "seed": 0,
                "metrics": {"heldout/robustness": change(0.0, -0.05, 0.05)},
            }
        ],
    }
    record["warnings"] = [{"run": "math-vspo-seed1", "warning": "the trained policy scored lower on behaviour/x"}]
    (tmp_path / "experiment_vspo_robustness.json").write_text(json.dumps(record))
    page = results_pages.render_all(results=tmp_path)["docs/results/experiments.md"]
    vspo = next(line for line in page.splitlines() if line.startswith("| vspo |"))
    held_out, trained, pass_1 = vspo.split(" | ")[6:9]
    assert (held_out, trained, pass_1) == (
        "+0.100 [+0.020, +0.200] up",
        "-0.050 [-0.080, +0.010] no worse",
        "-0.020 [-0.150, +0.100] undecided",
    )
    assert "| 50.0 -> 80.0 | - |" in vspo  # the cut share after was not recorded: no half figure
    rlaif = next(line for line in page.splitlines() if line.startswith("| rlaif |"))
    assert "| 0 (seed 0 alone: interval over problems) |" in rlaif and "+0.000 [-0.050, +0.050] no worse" in rlaif
    pair = next(line for line in page.splitlines() if line.startswith("| vspo after - rlaif after |"))
    assert "-0.200 [-0.300, -0.100] behind" in pair
    assert "| abc1234 | Test CPU, 2 cores |" in vspo
    assert "- `math-vspo-seed1`: the trained policy scored lower on behaviour/x" in page  # the runs' own warnings
