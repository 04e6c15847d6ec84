"""Record an experiment file's grid for the results pages: the report's figures over seeds, per arm, and what each
arm's answers look like before and after training.

    .venv/bin/python bench/record_experiment.py experiments/vspo_robustness.toml [--size cpu] [--runs DIR]
        [--json bench/results/experiment_vspo_robustness.json]

It builds the report of the grid's run folder (``harness report``'s own code, into a temporary folder) and keeps:
- per arm: its runs' seeds, commits and machines, warm-up steps and stopped-early notes, and the answers' statistics
  per phase averaged over seeds (mean tokens, share cut at the token limit, pass@1, each behaviour by the training
  scorer and by its held-out evaluator: bench/answer_stats.py);
- every "over seeds" figure of the report (after - before per arm, and method - method): value and the wider of the
  hierarchical bootstrap and the t-interval over seed means, each beside its parts.
The results page (docs/results_pages.py) renders the record; nothing on it is typed by hand. Runs that did not
finish are left out by the report and counted here, so a grid recorded half-way says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from answer_stats import answer_stats  # noqa: E402  (beside this file)

from harness.report.build import build_report  # noqa: E402


def claim(file: Path) -> str:
    """The file's first header paragraph after "# Claim:" (its one-sentence claim)."""
    lines = []
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("# ").rstrip()
        if not text and lines:
            break
        if text.startswith("Claim:") or lines:
            lines.append(text.removeprefix("Claim:").strip())
    return " ".join(lines)


def arm_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per arm, from the report's rows ("after" rows carry the arm) and each run's samples."""
    by_arm: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["phase"] == "after":
            by_arm[row["arm"] or row["trainer"]].append(row)
    records = []
    for arm, arm_rows in by_arm.items():
        stats = [answer_stats(Path(r["run_dir"])) for r in sorted(arm_rows, key=lambda r: r["seed"])]
        phases = {}
        for phase in ("before", "after"):
            mine = [s[phase] for s in stats if phase in s]
            keys = [k for k in (mine[0] if mine else {}) if k != "answers"]
            phases[phase] = {k: mean(s[k] for s in mine if k in s) for k in keys}
        records.append(
            {
                "arm": arm,
                "trainer": arm_rows[0]["trainer"],
                "seeds": sorted(r["seed"] for r in arm_rows),
                "warmup_steps": [r["warmup_steps"] for r in sorted(arm_rows, key=lambda r: r["seed"])],
                "candidate_tokens": sorted({r.get("candidate_tokens") or "" for r in arm_rows}),
                "stopped": [f"seed {r['seed']}: {r['stopped']}" for r in arm_rows if r.get("stopped")],
                "commits": sorted({s.get("commit") or "" for s in stats}),
                "machines": sorted({_machine(s.get("machine")) for s in stats}),
                "task_versions": sorted({s.get("task_version") or "" for s in stats}),
                "answers": phases,
            }
        )
    return records


def _machine(machine: Any) -> str:
    """A manifest's machine (harness/provenance.py: cpu, cores, isa, isa_limit) as one line."""
    if not isinstance(machine, dict):
        return str(machine or "")
    parts = [str(machine.get("cpu", "?")), f"{machine.get('cores', '?')} cores", *machine.get("isa", [])]
    limit = machine.get("isa_limit") or {}
    return ", ".join(parts + ([f"limited to {limit}"] if limit else []))


def behaviour(settings: dict[str, Any]) -> str | None:
    """The behaviour the file's claim is about: the first its searcher measures ([set.searcher] behaviours)."""
    named = str((settings.get("set", {}).get("searcher") or {}).get("behaviours") or "")
    return next((b.strip() for b in named.split(",") if b.strip()), None)


def record(file: Path, size: str, runs_root: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        said: list[str] = []
        build_report([runs_root], Path(tmp) / "report", echo=said.append)
        skipped = [line for line in said if line.startswith("skipped")]
        board = json.loads((Path(tmp) / "report" / "leaderboard.json").read_text(encoding="utf-8"))
    arms = arm_records(board["rows"])
    versions = sorted({v for a in arms for v in a["task_versions"] if v})
    return {
        "experiment": file.stem,
        "file": str(file),
        "claim": claim(file),
        "behaviour": behaviour(tomllib.loads(file.read_text(encoding="utf-8"))),
        "size": size,
        "command": f"harness run --config {file}" + ("" if size == "cpu" else f" --size {size}"),
        "report": f"harness report {runs_root}",
        "task": board["rows"][0]["task"] if board["rows"] else None,
        "task_version": versions[0] if len(versions) == 1 else ", ".join(versions) or None,
        "commit": ", ".join(sorted({c for a in arms for c in a["commits"] if c})) or None,
        "machine": "; ".join(sorted({m for a in arms for m in a["machines"] if m})) or None,
        "seed": sorted({s for a in arms for s in a["seeds"]}),
        "skipped": skipped,
        "arms": arms,
        "over_seeds": board.get("over_seeds", []),
        "differences": board.get("differences", []),  # per seed: what an arm with one seed so far is read by
        "warnings": board.get("warnings", []),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="the experiment file (experiments/*.toml)")
    parser.add_argument("--size", default="cpu")
    parser.add_argument("--runs", type=Path, help="the grid's run folder (default: the size's `out` in the file)")
    parser.add_argument("--json", type=Path, help="default: bench/results/experiment_<file stem>.json")
    args = parser.parse_args()
    settings = tomllib.loads(args.file.read_text(encoding="utf-8"))
    runs_root = args.runs or Path(settings.get("size", {}).get(args.size, {}).get("out", ""))
    if not runs_root or not runs_root.is_dir():
        parser.error(f"{runs_root}: no run folder (run the grid first, or give --runs)")
    data = record(args.file, args.size, runs_root)
    out = args.json or ROOT / "bench" / "results" / f"experiment_{args.file.stem}.json"
    out.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    done = ", ".join(f"{a['arm']} x{len(a['seeds'])}" for a in data["arms"])
    print(f"wrote {out}: {done}; {len(data['skipped'])} folder(s) left out")


if __name__ == "__main__":
    main()
