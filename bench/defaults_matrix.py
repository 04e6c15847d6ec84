"""The defaults matrix: every trainer x every searcher at the project's defaults, each through `harness run` in its
own process and folder, and per cell what it cost and what it did to the policy.

    .venv/bin/python bench/defaults_matrix.py [--tasks math[,code,...]] [--model smollm2-135m] [--seeds 0[,1,...]]
        [--trainers none,grpo,vpo,vspo,sft,rlaif] [--searchers best-of-k,evolve] [--out runs/defaults_matrix]
        [--extra="--limit 2 --steps 1"] [--extra-train="--set trainer.max_new_tokens=8"] [--skip-failed]
        [--json FILE]
    .venv/bin/python bench/defaults_matrix.py --model tiny-random --trainers none,grpo --searchers best-of-k \\
        --extra="--limit 2 --train-limit 4 --steps 2 --set searcher.max_new_tokens=8" \\
        --extra-train="--set trainer.max_new_tokens=8" --out /tmp/matrix    # smoke check, ~20 s

Each cell is `harness run --task T --trainer R --searcher S --seed N --model M --out OUT/<cell> EXTRA`, in a fresh
process, its output kept in `OUT/<cell>/harness.log` and its exit status and minutes in `OUT/<cell>/bench.json`;
`--extra-train` is appended only where the trainer is not `none` (which refuses trainer options). The cell's
folder is named by model, task, trainer, searcher, seed and (when given) a hash of the extra arguments it gets, so
a sitting with other settings never takes another's cells. Cells whose run folder says `complete` are skipped, so
the matrix resumes over several sittings, as are cells the JSON (`--json`) already holds as complete when their run
folders are gone (a sitting in another checkout: bench/results/defaults_matrix.json is the committed one); a cell
that failed is run again (`--skip-failed`: reported as it was).
The real model's matrix takes about an hour on a 2-core CPU.

`--tasks all` is every built-in task at its defaults (math, code, mmlu-pro, persona, maze and one reasoning-gym
dataset, rg:basic_arithmetic).

Printed: the machine (CPU model, cores, whether avx512_bf16 is among the CPU flags), then one markdown row per
cell:
- exit: the `harness run` exit status; minutes: its wall time (a skipped cell's as recorded);
- training: the trainer's reward (`train/reward_mean`) at its first and last step, or an SFT run's loss;
- primary: the first pass@k (smallest k), else solved@c at the largest c (evolve's whole budget), before -> after
  with the change paired over the eval problems and its 95% bootstrap interval, read from the index the run wrote
  (`OUT/<cell>/results.sqlite`; harness/report/summary.py `paired_difference`, i.e. compare.py
  `after_minus_before`); `--trainer none`: the evaluation's value with its own interval;
- behaviour: `behaviour/<name>` before -> after (paired interval as above) where the trainer targets a behaviour
  (its resolved `behaviour` option: VSPO, RLAIF at their defaults), else "-";
- empty after: the fraction of the final evaluation's samples (phase after, or eval) in samples.jsonl whose text is
  empty or whitespace (a missing answer of an M-answer rollout is such a sample);
- collapse: whether a warning mentions "collapse"; warnings: the manifest's `warnings` (one-line strings), and a
  failed run's error.
The JSON (`--json`, default OUT/defaults_matrix.json) keeps the machine and every row. Not a test: nothing is
asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.runner.precision import cpu_flags  # no torch: harness.types is plain dataclasses

TRAINERS = "none,grpo,vpo,vspo,sft,rlaif"
ALL_TASKS = "math,code,mmlu-pro,persona,maze,rg:basic_arithmetic"
SEARCHERS = "best-of-k,evolve"
MEASURED = Path(__file__).resolve().parents[1] / "harness" / "runner" / "measured_minutes.json"
HEADLINE = re.compile(r"^(pass|best|solved)@(\d+)$")


def machine() -> dict[str, Any]:
    """CPU model, cores, and whether the CPU has avx512_bf16 (without importing torch)."""
    info: dict[str, Any] = {"cores": os.cpu_count(), "cpu": "unknown", "avx512_bf16": False}
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        info["cpu"] = next(
            (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown"
        )
    info["avx512_bf16"] = "avx512_bf16" in cpu_flags()  # the flags --rollout-dtype auto reads
    limits = {name: os.environ[name] for name in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if os.environ.get(name)}
    if limits:  # kernels held below the CPU's own (an AVX2 machine emulated): said in every row's machine
        info["isa_limit"] = limits
    with contextlib.suppress(OSError):
        info["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
    return info


def default_model() -> str:
    from harness.runner.config import RunConfig

    return RunConfig().model


def cell_name(model: str, task: str, trainer: str, searcher: str, seed: int, extra: list[str]) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-")
    name = f"{slug}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', task)}-{trainer}-{searcher}-seed{seed}"
    if extra:
        name += "-x" + hashlib.sha1(json.dumps(extra).encode()).hexdigest()[:8]
    return name


def run_folders(cell: Path) -> list[Path]:
    """The cell's run folders, oldest first (their names start with the time)."""
    if not cell.is_dir():
        return []
    return sorted(p for p in cell.iterdir() if p.is_dir() and (p / "manifest.json").is_file())


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def latest_run(cell: Path) -> tuple[Path | None, dict[str, Any]]:
    """The newest complete run folder of the cell, else the newest at all, with its manifest."""
    folders = run_folders(cell)
    manifests = [(f, read_json(f / "manifest.json")) for f in folders]
    complete = [(f, m) for f, m in manifests if m.get("status") == "complete"]
    return (complete or manifests or [(None, {})])[-1]


def run_cell(command: list[str], cell: Path) -> dict[str, Any]:
    """Run one cell's `harness run`, its output into cell/harness.log; exit status and minutes."""
    cell.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    started = time.monotonic()
    with open(cell / "harness.log", "w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    record = {
        "exit": code,
        "minutes": (time.monotonic() - started) / 60,
        "command": command,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (cell / "bench.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def primary_metric(metrics: dict[str, Any], phase: str) -> str | None:
    """The first pass@k (smallest k); else solved@c at the largest c; else the first best@k."""
    found: dict[str, list[int]] = {}
    for key in metrics:
        stage, _, name = key.partition("/")
        if stage == phase and (match := HEADLINE.match(name)):
            found.setdefault(match[1], []).append(int(match[2]))
    if "pass" in found:
        return f"pass@{min(found['pass'])}"
    if "solved" in found:
        return f"solved@{max(found['solved'])}"
    if "best" in found:
        return f"best@{min(found['best'])}"
    return None


def _interval(low: float | None, high: float | None, signed: bool) -> str:
    if low is None or high is None or low != low or high != high:  # none, or nan
        return ""
    return f" [{low:+.3f}, {high:+.3f}]" if signed else f" [{low:.3f}, {high:.3f}]"


def before_after(metrics: dict[str, Any], name: str, difference: Any) -> str:
    """ "v0 -> v1, +d [lo, hi]" for metric ``name``; the paired interval where the index gave one."""
    before, after = metrics.get(f"before/{name}"), metrics.get(f"after/{name}")
    if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
        return "-"
    estimate = difference.metrics.get(name) if difference is not None else None
    if estimate is None:
        return f"{before:.3f} -> {after:.3f}, {after - before:+.3f} (no interval)"
    # The paired change (mean over problems of after - before), as its interval is: with evolve stopping early on
    # solved problems, the phases' sample-weighted means differ from the per-problem means it pairs.
    return f"{before:.3f} -> {after:.3f}, {estimate.value:+.3f}" + _interval(estimate.low, estimate.high, True)


def eval_value(db: Path, run_dir: Path, metrics: dict[str, Any], name: str) -> str:
    """An evaluation-only run's value of ``name`` with the run's own 95% interval from the index."""
    value = metrics.get(f"eval/{name}")
    if not isinstance(value, (int, float)):
        return "-"
    text = f"{value:.3f}"
    with contextlib.suppress(Exception):  # the index may be missing or unreadable: the value alone then
        from harness.report.data import leaderboard
        from harness.store.results_db import open_index

        with open_index(db) as conn:
            rows = [r for r in leaderboard(conn, run_dir=str(run_dir.resolve())) if r.phase == "eval"]
        if rows and name in rows[0].headline:
            estimate = rows[0].headline[name]
            text += _interval(estimate.low, estimate.high, False)
    return text


def training_curve(metrics: dict[str, Any]) -> str:
    """ "reward first -> last" of the training steps (an SFT run: its loss), "-" without steps."""
    for key, label in (("train/reward_mean", "reward"), ("train/loss", "loss")):
        values = [v for v in metrics.get(key) or [] if isinstance(v, (int, float))]
        if values:
            return f"{label} {values[0]:.3f} -> {values[-1]:.3f} ({len(values)} steps)"
    return "-"


def empty_rate(samples: Path, phase: str) -> str:
    total = empty = 0
    with contextlib.suppress(OSError), open(samples) as f:
        for line in f:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("phase") == phase:
                    total += 1
                    empty += not str(record.get("text") or "").strip()
    return f"{empty / total:.3f} ({empty}/{total})" if total else "-"


def describe(cell: Path, record: dict[str, Any]) -> dict[str, Any]:
    """What one cell's newest run folder says (see the module docstring for each field)."""
    run_dir, manifest = latest_run(cell)
    row: dict[str, Any] = {
        "cell": cell.name,
        "exit": record.get("exit"),
        "minutes": record.get("minutes"),
        "status": manifest.get("status", "no run folder"),
        "run": str(run_dir) if run_dir else None,
    }
    warnings = [str(w) for w in manifest.get("warnings") or []]
    if manifest.get("status") not in (None, "complete") and manifest.get("error"):
        warnings.append(f"error: {manifest['error']}")
    elif record.get("exit") not in (None, 0) and (cell / "harness.log").is_file():  # refused before a run folder
        lines = [line for line in (cell / "harness.log").read_text(errors="replace").splitlines() if line.strip()]
        warnings.append(f"error: {lines[-1].strip()}" if lines else "error: no output")
    row["warnings"] = warnings
    row["collapse"] = any("collapse" in w.lower() for w in warnings)
    row["primary"] = row["behaviour"] = row["empty_after"] = row["training"] = "-"
    if run_dir is None:
        return row
    if row["minutes"] is None and isinstance(manifest.get("seconds"), (int, float)):
        row["minutes"] = manifest["seconds"] / 60  # run before bench.json was written: the run's own time
    metrics = read_json(run_dir / "metrics.json")
    trained = any(k.startswith("after/") for k in metrics)
    phase = "after" if trained else "eval"
    row["training"] = training_curve(metrics)
    db = cell / "results.sqlite"
    name = primary_metric(metrics, phase)
    if name and trained:
        difference = None
        with contextlib.suppress(Exception):  # no index, or no pair in it: values without an interval
            from harness.report.summary import paired_difference

            difference = paired_difference(db, run_dir)
        row["primary"] = f"{name} {before_after(metrics, name, difference)}"
        behaviour = str((manifest.get("resolved_options") or {}).get("trainer", {}).get("behaviour") or "")
        if behaviour:
            key = f"behaviour/{behaviour}"
            row["behaviour"] = f"{behaviour} {before_after(metrics, key, difference)}"
    elif name:
        row["primary"] = f"{name} {eval_value(db, run_dir, metrics, name)}"
    row["empty_after"] = empty_rate(run_dir / "samples.jsonl", phase)
    return row


def record_minutes(rows: list[dict[str, Any]], info: dict[str, Any], busy: bool = False) -> int:
    """Merge the cells' minutes into MEASURED (harness/runner/expected_time.py), replacing the same cells."""
    data = read_json(MEASURED)
    machine_line = f"{info['cpu']}, {info['cores']} cores" + (
        ", avx512_bf16" if info["avx512_bf16"] else ", no avx512_bf16"
    )
    key = ("task", "trainer", "searcher", "seed")
    fresh = [
        {
            **{k: r[k] for k in key},
            "exit": r["exit"],
            "minutes": round(r["minutes"], 2),
            "recorded": time.strftime("%Y-%m-%d"),
            **({"busy": True} if busy else {}),
        }
        for r in rows
        if r.get("exit") == 0 and isinstance(r.get("minutes"), (int, float))
    ]
    kept = [
        r for r in data.get("rows", []) if tuple(r.get(k) for k in key) not in {tuple(f[k] for k in key) for f in fresh}
    ]
    if data.get("machine") not in (None, machine_line):
        kept = []  # one machine per file: figures from two machines would not say which is which
    MEASURED.write_text(
        json.dumps(
            {"machine": machine_line, "rows": sorted(kept + fresh, key=lambda r: [str(r[k]) for k in key])}, indent=1
        )
        + "\n"
    )
    return len(fresh)


def markdown(rows: list[dict[str, Any]]) -> str:
    header = [
        "cell",
        "exit",
        "minutes",
        "training",
        "primary: before -> after, change [95% paired]",
        "behaviour",
        "empty after",
        "collapse",
        "warnings",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        minutes = f"{r['minutes']:.1f}" if isinstance(r["minutes"], (int, float)) else "-"
        cells = [
            r["cell"],
            "-" if r["exit"] is None else str(r["exit"]),
            minutes,
            r["training"],
            r["primary"],
            r["behaviour"],
            r["empty_after"],
            "yes" if r["collapse"] else "no",
            "; ".join(r["warnings"]) or "-",
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", "--task", default="math", help=f"comma list, or all ({ALL_TASKS})")
    parser.add_argument("--model", default=None, help="default: the project's default model (RunConfig.model)")
    parser.add_argument("--seeds", default="0", help="comma list (default 0)")
    parser.add_argument("--trainers", default=TRAINERS, help=f"comma list (default {TRAINERS})")
    parser.add_argument("--searchers", default=SEARCHERS, help=f"comma list (default {SEARCHERS})")
    parser.add_argument("--out", default="runs/defaults_matrix", help="one folder per cell in it")
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        help='arguments appended to every `harness run`, e.g. --extra="--limit 2 --steps 1" '
        "(repeatable; part of each cell's name)",
    )
    parser.add_argument(
        "--extra-train",
        action="append",
        default=[],
        help="arguments appended to every `harness run` with a trainer (not `none`), e.g. "
        '--extra-train="--set trainer.max_new_tokens=8" (repeatable)',
    )
    parser.add_argument(
        "--skip-failed",
        action="store_true",
        help="report a cell whose last attempt failed as it was, instead of running it again",
    )
    parser.add_argument("--json", default=None, help="where to write the rows (default OUT/defaults_matrix.json)")
    parser.add_argument(
        "--busy",
        action="store_true",
        help="with --record: mark the minutes as measured beside other work (an upper bound)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="also merge each cell's minutes, as it finishes, into "
        "harness/runner/measured_minutes.json, which `harness run` at its defaults reads to "
        "say its expected time (default model, no --extra/--extra-train only)",
    )
    args = parser.parse_args(argv)
    model = args.model or default_model()
    extra = [a for chunk in args.extra for a in shlex.split(chunk)]
    extra_train = [a for chunk in args.extra_train for a in shlex.split(chunk)]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    tasks = [t.strip() for t in (ALL_TASKS if args.tasks == "all" else args.tasks).split(",") if t.strip()]
    trainers = [t.strip() for t in args.trainers.split(",") if t.strip()]
    searchers = [s.strip() for s in args.searchers.split(",") if s.strip()]
    out = Path(args.out)
    info = machine()
    print(
        f"machine: {info['cpu']}, {info['cores']} cores, avx512_bf16 {'yes' if info['avx512_bf16'] else 'no'}, "
        f"load {' '.join(info.get('loadavg', ['?']))}"
    )
    print(
        f"model {model}, tasks {','.join(tasks)}, seeds {','.join(map(str, seeds))}, out {out}"
        + (f", extra: {shlex.join(extra)}" if extra else "")
        + (f", extra with a trainer: {shlex.join(extra_train)}" if extra_train else "")
    )
    recording = args.record and not extra and not (extra_train and trainers != ["none"]) and model == default_model()
    if args.record and not recording:
        print("--record: nothing will be recorded: these cells are not the defaults (--extra, --extra-train, --model)")
    path = Path(args.json) if args.json else out / "defaults_matrix.json"
    # the rows of complete cells from an earlier sitting: kept when their run folders are not here (another checkout)
    earlier = {r["cell"]: r for r in read_json(path).get("rows", []) if r.get("status") == "complete"}
    rows = []
    cells = [
        (task, seed, searcher, trainer)
        for task in tasks
        for seed in seeds
        for searcher in searchers
        for trainer in trainers
    ]
    for task, seed, searcher, trainer in cells:
        cell_extra = extra + (extra_train if trainer != "none" else [])
        cell = out / cell_name(model, task, trainer, searcher, seed, cell_extra)
        record = read_json(cell / "bench.json")
        _, manifest = latest_run(cell)
        done = manifest.get("status") == "complete" or (args.skip_failed and record.get("exit") not in (None, 0))
        if not done and cell.name in earlier:  # measured in an earlier sitting whose run folders are gone
            print(f"{cell.name}: complete in {path} already, skipped", flush=True)
            rows.append(earlier[cell.name])
            continue
        if done:
            print(f"{cell.name}: {manifest.get('status') or 'failed'} already, skipped", flush=True)
        else:
            command = [
                sys.executable,
                "-m",
                "harness",
                "run",
                "--task",
                task,
                "--trainer",
                trainer,
                "--searcher",
                searcher,
                "--seed",
                str(seed),
                "--model",
                model,
                "--out",
                str(cell),
                *cell_extra,
            ]
            print(f"{cell.name}: running ...", end=" ", flush=True)
            record = run_cell(command, cell)
            print(f"exit {record['exit']} in {record['minutes']:.1f} min", flush=True)
        row = describe(cell, record)
        row.update(task=task, trainer=trainer, searcher=searcher, seed=seed)
        rows.append(row)
        # after every cell, so a sitting cut short keeps what it measured
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "machine": info,
                    "model": model,
                    "tasks": tasks,
                    "extra": extra,
                    "extra_train": extra_train,
                    "rows": rows,
                },
                indent=1,
            )
            + "\n"
        )
        if recording and not done:
            record_minutes([row], info, busy=args.busy)
    print()
    print(markdown(rows))
    print(f"\nwrote {path}" + (f"; minutes recorded in {MEASURED}" if recording else ""))


if __name__ == "__main__":
    main()
