"""What a run's evaluation answers look like before and after training, read from its samples: mean tokens, the share
cut at the token limit, pass@1, and each behaviour's mean by the training scorer and by its held-out evaluator.
For runs that differ in one setting (a variant of an arm), so drift in length or form is seen beside the metrics.

    .venv/bin/python bench/answer_stats.py RUN_DIR [RUN_DIR ...] [--label TEXT ...] [--out FILE.json]

Each row names its run's command, seed, task version, commit and machine (from the manifest). Writes nothing but
--out; the printed table is the JSON's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

PHASES = ("before", "after")


def answer_stats(run: Path) -> dict[str, Any]:
    """The run's provenance and, per evaluation phase, its answers' statistics."""
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    rows: dict[str, list[dict]] = {phase: [] for phase in PHASES}
    with open(run / "samples.jsonl", encoding="utf-8") as f:
        for line in f:
            sample = json.loads(line)
            if sample.get("phase") in rows:
                rows[sample["phase"]].append(sample)
    return {
        "run": run.name,
        "command": manifest.get("command"),
        "seed": manifest.get("seed"),
        "task_version": manifest.get("task", {}).get("version"),
        "commit": manifest.get("commit"),
        "machine": manifest.get("machine") or manifest.get("platform"),
        "status": manifest.get("status"),
        **{phase: phase_stats(samples) for phase, samples in rows.items() if samples},
    }


def phase_stats(samples: list[dict]) -> dict[str, Any]:
    n = len(samples)
    stats: dict[str, Any] = {
        "answers": n,
        "mean_tokens": sum(s.get("num_tokens", 0) for s in samples) / n,
        "cut_at_limit": sum(not s.get("finished", True) for s in samples) / n,
        "pass@1": sum(bool(s.get("success")) for s in samples) / n,
    }
    for field, label in (("behaviours", "training scorer"), ("held_out", "held-out evaluator")):
        names = sorted({name for s in samples for name in s.get(field) or {}})
        for name in names:
            values = [s[field][name] for s in samples if name in (s.get(field) or {})]
            stats[f"{name} ({label})"] = sum(values) / len(values)
    return stats


def table(rows: list[dict[str, Any]]) -> str:
    keys = [k for k in rows[0].get("after", rows[0].get("before", {})) if k != "answers"]
    lines = ["| variant | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for row in rows:
        cells = []
        for key in keys:
            before, after = row.get("before", {}).get(key), row.get("after", {}).get(key)
            fmt = (lambda v: "-" if v is None else f"{v:.1f}") if key == "mean_tokens" else _three
            cells.append(f"{fmt(before)} -> {fmt(after)}")
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _three(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--label", action="append", default=[], help="one per run, in order (default: the folder)")
    parser.add_argument("--out", type=Path, help="also write the rows here as JSON")
    args = parser.parse_args()
    if args.label and len(args.label) != len(args.runs):
        parser.error(f"give one --label per run ({len(args.runs)}), got {len(args.label)}")
    rows = []
    for i, run in enumerate(args.runs):
        if not (run / "manifest.json").is_file() or not (run / "samples.jsonl").is_file():
            parser.error(f"{run}: not a run folder (manifest.json and samples.jsonl expected)")
        rows.append({"label": args.label[i] if args.label else run.name, **answer_stats(run)})
    print(table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rows": rows}, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
