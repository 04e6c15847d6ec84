"""`harness report RUNS... --out DIR`: index the runs into DIR/results.sqlite, then write from that store a static
HTML page (index.html, plots under plots/), a Markdown page for a README (report.md), and the table as CSV and JSON.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jinja2

from harness.report import data, plots
from harness.store.results_db import RESULTS_DB, connect, find_runs, rebuild

TEMPLATES = Path(__file__).parent / "templates"


def build_report(paths: list[Path | str], out: Path | str, echo=print) -> Path:
    """Write the report for every run folder under ``paths``; returns the HTML file. Folders left out (no manifest,
    unfinished, failed, no evaluation) are echoed one line each and listed in the report, so a run that quietly
    died is not mistaken for one that was never started."""
    out = Path(out)
    skipped: list[tuple[Path, str]] = []
    run_dirs = find_runs(paths, skipped)
    if not run_dirs:
        _say_skipped(skipped, echo)
        raise ValueError(f"no run folders (with a manifest.json) under {', '.join(map(str, paths))}")
    out.mkdir(parents=True, exist_ok=True)
    db = out / RESULTS_DB
    rebuild(db, run_dirs, skipped)
    conn = connect(db)
    try:
        skipped += [(Path(folder), why) for folder, why in data.skipped_runs(conn)]
        shown = _say_skipped(skipped, echo)
        rows = data.leaderboard(conn)
        if not rows:
            raise ValueError(f"none of the {len(run_dirs)} run folders is complete with evaluation metrics")
        context = _context(conn, rows, out / "plots")
    finally:
        conn.close()
    context["skipped"] = shown
    write_exports(rows, context["columns"], out)
    (out / "report.md").write_text(markdown(context))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    html = out / "index.html"
    html.write_text(env.get_template("report.html.j2").render(**context))
    echo(f"report of {len(run_dirs)} runs ({len(rows)} rows): {html}, {out / 'report.md'}, "
         f"{out / 'leaderboard.csv'}, {out / 'leaderboard.json'}")
    return html


def _say_skipped(skipped: list[tuple[Path, str]], echo) -> list[tuple[str, str]]:
    """Echo "skipped FOLDER: WHY" per folder (relative to the working directory when under it); returns the pairs."""
    shown = []
    for folder, why in sorted(skipped):
        try:
            name = str(folder.relative_to(Path.cwd()))
        except ValueError:
            name = str(folder)
        echo(f"skipped {name}: {why}")
        shown.append((name, why))
    return shown


def _context(conn, rows: list[data.Row], plot_dir: Path) -> dict[str, Any]:
    tasks = sorted({r.task for r in rows})
    at_k = [(task, kind, f) for task in tasks for kind in ("pass", "best")
            if (f := plots.at_k_curves(rows, task, kind, plot_dir))]
    runs = []
    for run_dir in dict.fromkeys(r.run_dir for r in rows):
        mine = [r for r in rows if r.run_dir == run_dir]
        manifest = data.manifest(conn, run_dir)
        runs.append({
            "name": mine[0].run, "rows": mine, "manifest": manifest,
            "config": json.dumps(manifest.get("resolved_options", {}), indent=1, default=str),
            "model": manifest.get("model", {}), "data_source": manifest.get("task", {}).get("data_source"),
            "packages": manifest.get("packages", {}), "seconds": manifest.get("seconds"),
            "curve": plots.training_curves(mine[0].run, data.curves(conn, run_dir), plot_dir),
            "examples": {r.phase: data.examples(conn, run_dir, r.phase) for r in mine},
        })
    diversity = sorted({n for r in rows for n in r.other if n.startswith("diversity/")})
    behaviour = sorted({n for r in rows for n in r.other if n.startswith("behaviour/")})
    # Every other number a searcher returned (its own metrics too, e.g. a plugin's "majority@8"): nothing it
    # reports is dropped from the page, whatever it is called.
    other = data.other_columns(rows, leave_out=("diversity/", "behaviour/"))
    return {"rows": rows, "columns": data.headline_columns(rows), "runs": runs, "at_k": at_k,
            "behaviour_plots": plots.behaviour_vs_accuracy(rows, plot_dir), "diversity": diversity,
            "behaviour": behaviour, "other": other, "all_other": data.other_columns(rows), "skipped": [],
            "whole": data.whole_columns(rows), "fmt": fmt, "fmt_ci": fmt_ci, "fmt_number": fmt_number}


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def fmt_number(value: float | None, whole: bool = False) -> str:
    """Any metric: a column of whole numbers (tokens, candidates) as integers with thousands separators, others to
    3 decimals (so a rate of exactly 1 still reads 1.000 beside 0.500), tiny values in scientific notation rather
    than as 0.000."""
    if value is None:
        return "-"
    if whole:
        return f"{int(value):,}"
    return f"{value:.2e}" if value and abs(value) < 1e-3 else f"{value:,.3f}"


def fmt_ci(estimate: data.Estimate | None) -> str:
    if estimate is None:
        return "-"
    if estimate.low is None:
        return fmt(estimate.value)
    return f"{estimate.value:.3f} [{estimate.low:.2f}, {estimate.high:.2f}]"


def table_records(rows: list[data.Row], columns: list[str]) -> list[dict[str, Any]]:
    """The leaderboard as flat records: identity columns, value / low / high of every headline metric, then every
    other metric of any row (None where a row lacks it)."""
    other = data.other_columns(rows)
    records = []
    for row in rows:
        record: dict[str, Any] = {k: getattr(row, k) for k in ("task", "trainer", "searcher", "model", "seed",
                                                               "phase", "problems", "run")}
        for name in columns:
            estimate = row.headline.get(name)
            record[name] = estimate.value if estimate else None
            record[f"{name}_low"] = estimate.low if estimate else None
            record[f"{name}_high"] = estimate.high if estimate else None
        record.update({name: row.other.get(name) for name in other})
        records.append(record)
    return records


def write_exports(rows: list[data.Row], columns: list[str], out: Path) -> None:
    records = table_records(rows, columns)
    with open(out / "leaderboard.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    full = [{**{k: v for k, v in asdict(r).items() if k != "headline"},
             "headline": {n: e.as_dict() for n, e in r.headline.items()}} for r in rows]
    (out / "leaderboard.json").write_text(json.dumps({"table": records, "rows": full}, indent=1, default=str) + "\n")


def markdown(context: dict[str, Any]) -> str:
    """The leaderboard and the figures as Markdown a README can include (figure paths relative to the report)."""
    columns = context["columns"]
    lines = ["# Leaderboard", "",
             "Each cell: value [95% interval over problems: bootstrap for pass@k/best@k, Wilson for solved@c].", "",
             "| task | trainer | searcher | model | seed | phase | " + " | ".join(columns) + " |",
             "|" + "---|" * (6 + len(columns))]
    for row in context["rows"]:
        cells = [row.task, row.trainer, row.searcher, row.model, str(row.seed), row.phase,
                 *(fmt_ci(row.headline.get(c)) for c in columns)]
        lines.append("| " + " | ".join(cells) + " |")
    for task, kind, name in context["at_k"]:
        lines += ["", f"![{task} {kind}@k](plots/{name})"]
    for behaviour, name in context["behaviour_plots"]:
        lines += ["", f"![{behaviour} vs accuracy](plots/{name})"]
    other = context["all_other"]
    if other:
        lines += ["", "## Other metrics", "", "| run | phase | " + " | ".join(other) + " |",
                  "|" + "---|" * (2 + len(other))]
        for row in context["rows"]:
            cells = [row.run, row.phase, *(fmt_number(row.other.get(n), n in context["whole"]) for n in other)]
            lines.append("| " + " | ".join(cells) + " |")
    if context["skipped"]:
        lines += ["", "## Skipped", "", *(f"- `{folder}`: {why}" for folder, why in context["skipped"])]
    return "\n".join(lines) + "\n"
