"""A finished run's samples read again by the task as checked out: what a change of extraction or scoring (a new
task version) does to figures already published, without sampling anything again.

    .venv/bin/python bench/rescore_run.py RUN_DIR [--plugin FILE ...]

The task is built from the run's manifest (its name and resolved options; `--plugin` for a task from a file) and
each stored answer is scored again against its stored reference. Per evaluation phase (training samples carry no
primary reward and are skipped): the primary reward's mean as recorded and as read now, and how many answers are
read differently. Paired over the same samples, so the difference is the
task version's alone. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from harness.plugins.manager import get_plugin_manager
from harness.plugins.options import build_plugin
from harness.types import Problem


def rescore(run: Path, plugin_files: list[str]) -> list[tuple[str, int, float, float, int]]:
    """(phase, answers, primary mean as recorded, as read now, answers read differently), in the file's order."""
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    plugins = get_plugin_manager(local=plugin_files)
    task = build_plugin(plugins, "task", manifest["task"]["name"], manifest["resolved_options"].get("task", {}))
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0])
    with (run / "samples.jsonl").open(encoding="utf-8") as samples:
        for line in samples:
            sample = json.loads(line)
            if "rewards" not in sample or sample.get("primary") is None:
                continue  # a sample whose scoring failed when it was made
            problem = Problem(id=sample["problem_id"], prompt=sample["prompt"], answer=sample["reference"])
            now = task.score(problem, sample["text"])
            row = totals[sample["phase"]]
            row[0] += 1
            row[1] += sample["rewards"][sample["primary"]]
            row[2] += now.rewards[now.primary]
            row[3] += now.extracted != sample.get("extracted")
    return [(phase, n, was / n, now / n, changed) for phase, (n, was, now, changed) in totals.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run folder (manifest.json, samples.jsonl)")
    parser.add_argument("--plugin", action="append", default=[], help="a plugin file the run's task comes from")
    args = parser.parse_args()
    manifest = json.loads((args.run / "manifest.json").read_text(encoding="utf-8"))
    task = build_plugin(get_plugin_manager(local=args.plugin), "task", manifest["task"]["name"], {})
    print(f"{args.run}: recorded under {manifest['task']['version']}, read now under {task.version}\n")
    print(f"{'phase':<16}{'answers':>8}{'recorded':>10}{'now':>8}{'read differently':>18}")
    for phase, n, was, now, changed in rescore(args.run, args.plugin):
        print(f"{phase:<16}{n:>8}{was:>10.4f}{now:>8.4f}{changed:>18}")


if __name__ == "__main__":
    main()
