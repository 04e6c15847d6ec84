"""Record what the demo prints: bench/results/demo.json, from which docs/results_pages.py renders
docs/results/demo.md and the README's excerpt (`python docs/generate.py`).

    python bench/record_demo.py [--out DIR]                  # run the demo, as `make demo` does, and record it
    python bench/record_demo.py RUN_DIR LOG [--commit HASH]  # record a finished demo run: its folder, and what it
                                                             # printed (a log of its output)

The first form runs `harness run --config experiments/demo.toml --out DIR` (default: a temporary folder), shows its
output as it goes and keeps it. The record holds:
- printed: the summary the run printed at its end, verbatim, from its heading line ("task math, model ...") up to
  the last warning (trailing spaces dropped), without the final "wrote FOLDER in N s" line (FOLDER is this
  machine's);
- task and task_version, seed, threads, seconds: from the run's manifest;
- commit: the manifest's, where the harness records one; else `--commit`, else this checkout's HEAD, with
  "+dirty" when tracked files differ from it;
- machine: the manifest's, else this machine's CPU model, cores and instruction sets (a LOG and RUN_DIR are
  recorded as from this machine: record them where they ran);
- command (what `make demo` runs), argv (the run's own, from its manifest), config, run (the folder's name),
  python, torch.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.provenance import machine, package_version, source_commit

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "experiments/demo.toml"
OUT = ROOT / "bench" / "results" / "demo.json"
HEADING = re.compile(r"^task \S+, model \S+; data: .*problems evaluated$")
WROTE = re.compile(r"^wrote (.+) in ([\d.]+) s$")


def summary_lines(output: str) -> tuple[list[str], str | None]:
    """The printed summary (from the last heading line to the line before "wrote ..."), and the folder it names."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if HEADING.match(line)]
    if not starts:
        raise ValueError("no summary in the output: no line 'task ..., model ...; data: ...; N problems evaluated'")
    start = starts[-1]
    ends = [i for i in range(start, len(lines)) if WROTE.match(lines[i])]
    end = ends[0] if ends else len(lines)
    printed = [line.rstrip() for line in lines[start:end]]  # verbatim, less the spaces that pad a table's last column
    while printed and not printed[-1].strip():
        printed.pop()
    return printed, WROTE.match(lines[end])[1] if ends else None


def record(run_dir: Path, output: str, commit: str | None = None) -> dict[str, object]:
    """The record of one finished demo run: its printed summary and where it came from."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    if manifest.get("status") != "complete":
        raise ValueError(f"{run_dir}: the run is {manifest.get('status')!r}, not complete")
    printed, _ = summary_lines(output)
    task = manifest.get("task") or {}
    config = manifest.get("config") or {}
    return {
        "benchmark": "demo",
        "command": f"harness run --config {CONFIG}",
        "config": CONFIG,
        "task": task.get("name"),
        "task_version": task.get("version"),
        "seed": manifest.get("seed", config.get("seed")),
        "threads": config.get("threads"),
        "rollout_dtype": config.get("rollout_dtype"),
        "seconds": manifest.get("seconds"),
        "commit": manifest.get("commit") or commit or source_commit(),
        "machine": manifest.get("machine") or machine(),
        "python": manifest.get("python") or platform.python_version(),
        "torch": (manifest.get("packages") or {}).get("torch") or package_version("torch"),
        "run": run_dir.name,
        "argv": manifest.get("command"),  # as the process was started (its --out is where the folder went)
        "printed": printed,
    }


def run_demo(out: Path) -> tuple[Path, str]:
    """Run the demo as `make demo` does, its output shown and kept; the run's folder and that output."""
    command = [sys.executable, "-m", "harness", "run", "--config", CONFIG, "--out", str(out)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    kept = []
    for line in process.stdout:
        sys.stdout.write(line)
        kept.append(line)
    if process.wait() != 0:
        raise SystemExit(f"the demo exited {process.returncode}; nothing recorded")
    output = "".join(kept)
    _, folder = summary_lines(output)
    if folder is None:
        raise SystemExit("the demo printed no 'wrote FOLDER in N s' line; nothing recorded")
    return Path(folder), output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", type=Path, help="a finished demo run's folder (with LOG)")
    parser.add_argument("log", nargs="?", type=Path, help="the output that run printed")
    parser.add_argument("--out", type=Path, default=None, help="where the demo's run folder goes (default: a temp)")
    parser.add_argument("--commit", default=None, help="the commit the run's code was at, where its manifest lacks one")
    parser.add_argument("--json", type=Path, default=OUT, help=f"the record (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.run_dir is not None:
        if args.log is None:
            parser.error("a run's folder needs the log of what it printed")
        run_dir, output = args.run_dir, args.log.read_text()
    else:
        out = args.out or Path(tempfile.mkdtemp(prefix="demo-"))
        run_dir, output = run_demo(out)
    data = record(run_dir, output, args.commit)
    args.json.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.json}: {len(data['printed'])} lines of summary, {data['task_version']}, seed {data['seed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
