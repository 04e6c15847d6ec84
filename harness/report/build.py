"""`harness report RUNS... --out DIR`: index the runs into DIR/results.sqlite, then write from that store a static
HTML page (index.html, plots under plots/), a Markdown page for a README (report.md), and the table as CSV and JSON.
"""

from __future__ import annotations

import csv
import errno
import html
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from harness.faults import fault_point
from harness.report import compare, data, plots
from harness.report.optimised import what_was_optimised
from harness.report.summary import warm_up_line
from harness.store.reading import check_path_length, shown, shown_items, shown_name
from harness.store.results_db import RESULTS_DB, build_index, connect, find_runs, publish
from harness.store.run_folder import check_writable_folder, write_atomic

TEMPLATES = Path(__file__).parent / "templates"


def build_report(paths: list[Path | str], out: Path | str, echo=print) -> Path:
    """Write the report for every run folder under ``paths``; returns the HTML file. Folders left out (no manifest,
    unfinished, failed, no evaluation) are echoed one line each and listed in the report, so a run that quietly
    died is not mistaken for one that was never started.

    The index is built in a private file and read from there, then renamed into place, and every output replaces
    its file whole: several reports writing one --out each write a whole report, and a reader never sees half of
    one. Run data reaches the pages escaped (HTML in index.html, Markdown and HTML in report.md) and cut
    (harness/store/reading.py ``shown``)."""
    check_path_length(out, "--out")
    try:
        return _build_report(paths, Path(out), echo)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise ValueError(f"--out: a path is too long for the system ({shown(shown_name(exc.filename), 200)})") from None


def _build_report(paths: list[Path | str], out: Path, echo) -> Path:
    out = check_writable_folder(out, "--out")
    skipped: list[tuple[Path, str]] = []
    run_dirs = find_runs(paths, skipped)
    if not run_dirs:
        _say_skipped(skipped, echo)
        raise ValueError(f"no run folders (with a manifest.json) under {', '.join(map(str, paths))}")
    out.mkdir(parents=True, exist_ok=True)
    db, _ = build_index(out / RESULTS_DB, run_dirs, skipped)
    try:
        fault_point("report")
        conn = connect(db)
        try:
            skipped += [(Path(folder), why) for folder, why in data.skipped_runs(conn)]
            shown = _say_skipped(skipped, echo)
            every_row = data.leaderboard(conn)
            if not every_row:
                raise ValueError(f"none of the {len(run_dirs)} run folders is complete with evaluation metrics")
            context = _context(conn, every_row, out / "plots")
        finally:
            conn.close()
    finally:
        publish(db, out / RESULTS_DB)
    context["skipped"] = shown
    rows = context["rows"]
    write_exports(rows, context["columns"], out, context)
    write_atomic(out / "report.md", markdown(context))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
    )
    html = out / "index.html"
    write_atomic(html, env.get_template("report.html.j2").render(**context))
    echo(
        f"report of {len(run_dirs)} runs ({len(rows)} rows): {shown_name(html)}, {shown_name(out / 'report.md')}, "
        f"{shown_name(out / 'leaderboard.csv')}, {shown_name(out / 'leaderboard.json')}"
    )
    return html


def _finalize(value: Any) -> Any:
    """Every value the page shows: a string from run data cut to reading.SHOWN_TEXT characters (a 50 MB sample
    text is not a 50 MB page); the template's own markup (Markup) as it is."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return shown(value)
    return value


def _say_skipped(skipped: list[tuple[Path, str]], echo) -> list[tuple[str, str]]:
    """Echo "skipped FOLDER: WHY" per folder (relative to the working directory when under it; bytes that are not
    UTF-8 and control characters escaped, so each is one line); returns the pairs."""
    said = []
    for folder, why in sorted(skipped):
        try:
            name = shown_name(folder.relative_to(Path.cwd()))
        except ValueError:
            name = shown_name(folder)
        why = shown_name(why)
        echo(f"skipped {name}: {why}")
        said.append((name, why))
    return said


# arm: only where runs have one
IDENTITY = ("task", "dataset", "trainer", "arm", "searcher", "model", "seed", "phase", "problems")
ALWAYS_SHOWN = ("trainer", "seed", "phase")  # the others become one line above the table when every row shares them
SPLIT_AT = 8  # headline metrics one leaderboard table holds on a 1200-pixel page, intervals included


def _context(conn, every_row: list[data.Row], plot_dir: Path) -> dict[str, Any]:
    """What the templates need. ``every_row`` has one row per run and phase; the leaderboard (``rows``) has one
    "before" row per base-model evaluation (compare.merge_baselines)."""
    rows = compare.merge_baselines(every_row)
    tasks = sorted({r.task for r in rows})
    at_k = [
        (task, kind, f)
        for task in tasks
        for kind in ("pass", "best")
        if (f := plots.at_k_curves(rows, task, kind, plot_dir))
    ]
    runs = []
    for run_dir in dict.fromkeys(r.run_dir for r in every_row):
        mine = [r for r in every_row if r.run_dir == run_dir]
        manifest = data.manifest(conn, run_dir)
        run_curves = data.curves(conn, run_dir)
        during_names, during_points = data.during_training(run_curves)  # --eval-every's points
        runs.append(
            {
                "name": mine[0].run,
                "rows": mine,
                "manifest": manifest,
                # (each a checked type or null: harness/store/run_record.py)
                "config": json.dumps(manifest.get("resolved_options") or {}, indent=1, default=str),
                "model": manifest.get("model") or {},
                "data_source": (manifest.get("task") or {}).get("data_source"),
                "dataset": mine[0].dataset,  # the data card's "NAME; SPLIT; SIZE rows"
                "packages": manifest.get("packages") or {},
                "seconds": manifest.get("seconds"),
                "curve": plots.training_curves(mine[0].run, run_curves, plot_dir),
                "during": {
                    "names": during_names,
                    "points": during_points,
                    "plot": plots.during_training_curves(mine[0].run, during_names, during_points, plot_dir),
                },
                "examples": {r.phase: data.examples(conn, run_dir, r.phase) for r in mine},
                "warnings": run_warnings(manifest),
                "warm_up": warm_up_line(_run_metrics(conn, run_dir)),
                "optimised": what_was_optimised(manifest),  # its reward and the package behind every plugin
            }
        )
    diversity = sorted({n for r in rows for n in r.other if n.startswith("diversity/")})
    behaviour = sorted(
        {n for r in rows for n in r.other if n.startswith((data.BEHAVIOUR, data.HELD_OUT))}, key=data._order
    )
    # Every other number a searcher returned (its own metrics too, e.g. a plugin's "majority@8"): nothing it
    # reports is dropped from the page, whatever it is called.
    other = data.other_columns(rows, leave_out=("diversity/", data.BEHAVIOUR, data.HELD_OUT))
    columns = data.headline_columns(rows)
    after_before = compare.after_minus_before(every_row)
    between = compare.method_differences(every_row)
    seeds = compare.over_seeds(rows)
    seed_differences = compare.differences_over_seeds(after_before + between)
    tables = split(columns)
    identity = [c for c in IDENTITY if c != "arm" or any(r.arm for r in rows)]
    constant = [
        (c, getattr(rows[0], c)) for c in identity if c not in ALWAYS_SHOWN and len({getattr(r, c) for r in rows}) == 1
    ]
    return {
        "rows": rows,
        "columns": columns,
        "runs": runs,
        "at_k": at_k,
        # The page's leaderboard: identity columns every row shares are said once above it, and with more
        # than SPLIT_AT metrics, success (pass@k, solved@c) stays in it and best@k gets a table of its own,
        # so neither runs off the page.
        "main_columns": tables[0][1],
        "best_columns": tables[1][1] if len(tables) > 1 else [],
        "identity": [c for c in identity if c not in dict(constant)],
        "constant": constant,
        "shared_identity": [c for c in ("task", "model", "searcher") if c not in dict(constant)],
        # each trained run's format warm-up SFT steps, a column beside phase wherever any row trained
        "warmup_column": any(r.warmup_steps is not None for r in rows),
        # one candidate's token cap (training / evaluation) wherever a row writes M answers a rollout: the budget a
        # comparison of one-answer and M-answer methods must hold equal
        "tokens_column": any(r.answers_per_rollout > 1 for r in rows),
        "fmt_steps": fmt_steps,
        "split": split,
        "notes": [(r, r.note) for r in rows if r.note],
        # what the runs themselves warned about (training stopped early, reward fell): under the leaderboard,
        # since a figure can look fine while its run says it should not be trusted
        "warnings": [(run["name"], line) for run in runs for line in run["warnings"]],
        "after_before": after_before,
        "between": between,
        "seeds": seeds,
        "seed_differences": seed_differences,
        "solved_only": compare.solved_only_by(every_row),
        "show_ids": compare.SHOW_IDS,
        "difference_columns": compare.headline_names(after_before + between),
        "seed_columns": compare.headline_names(seeds),
        "seed_difference_columns": compare.headline_names(seed_differences),
        "behaviour_plots": plots.behaviour_vs_accuracy(every_row, plot_dir),
        "diversity": diversity,
        "behaviour": behaviour,
        # a heading says which behaviour figure is the training reward's scorer and which the held-out evaluator
        "metric_label": metric_labeller(every_row),
        "other": other,
        "all_other": data.other_columns(rows),
        "skipped": [],
        "whole": data.whole_columns(rows),
        "fmt": fmt,
        "fmt_ci": fmt_ci,
        "fmt_number": fmt_number,
        "fmt_diff": fmt_diff,
        "fmt_diff_ci": fmt_diff_ci,
        "verdict": verdict,
        "ids": _ids,
    }


def _run_metrics(conn, run_dir: str) -> dict[str, Any]:
    """The run's scalar metrics as the index holds them (for its warm-up line), whole numbers as integers: the
    index, not the folder, is what a report is built from (its values were checked when indexed)."""
    rows = conn.execute("SELECT key, value FROM metrics WHERE run_dir = ?", (run_dir,))
    return {r["key"]: int(r["value"]) if float(r["value"]).is_integer() else r["value"] for r in rows}


def run_warnings(manifest: dict[str, Any]) -> list[str]:
    """The one-line warnings a run recorded in its manifest (``warnings``; none in a run from before them), at
    most reading.SHOWN_ITEMS of them (then a line saying how many more)."""
    found = manifest.get("warnings")
    if not isinstance(found, list):
        return []
    first, more = shown_items(found)
    return [shown(line) for line in first] + ([f"... and {more:,} more warnings (manifest.json)"] if more else [])


def split(columns: list[str]) -> list[tuple[str, list[str]]]:
    """A table's headline columns as (caption, columns) per table: one table, or with more than SPLIT_AT columns,
    pass@k and solved@c in the first and best@k in a second (caption "best@k"), so neither runs off the page."""
    if (
        len(columns) <= SPLIT_AT
        or all(c.startswith("best@") for c in columns)
        or not any(c.startswith("best@") for c in columns)
    ):
        return [("", columns)]
    return [
        ("", [c for c in columns if not c.startswith("best@")]),
        ("best@k", [c for c in columns if c.startswith("best@")]),
    ]


def metric_labeller(rows: list[data.Row]) -> Callable[[str], str]:
    """The headings of these rows' metrics (``data.metric_label``): behaviour/ as the training scorer, heldout/ as
    the held-out evaluator."""
    names = {n for r in rows for n in (*r.other, *r.headline)}
    return lambda name: data.metric_label(name, names)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def fmt_steps(value: int | None) -> str:
    """A row's warm-up steps: "-" on a row of no training (before, eval), else the count (0: no warm-up)."""
    return "-" if value is None else str(value)


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


def fmt_diff(value: float | None) -> str:
    """A difference, signed: +0.125, -0.062, 0.000."""
    if value is None:
        return "-"
    return "0.000" if abs(value) < 5e-4 else f"{value:+.3f}"


def fmt_diff_ci(estimate: data.Estimate | None) -> str:
    """A difference and its interval: +0.125 [-0.12, +0.38]."""
    if estimate is None:
        return "-"
    if estimate.low is None:
        return fmt_diff(estimate.value)
    return f"{fmt_diff(estimate.value)} [{estimate.low:+.2f}, {estimate.high:+.2f}]"


def _problems_only(show, estimate: data.Estimate | None) -> str:
    """The over-seeds cell's second interval, in braces: "{[0.50, 1.00]} " (empty without one)."""
    if estimate is None or estimate.low is None:
        return ""
    return "{" + show(estimate).split(" ", 1)[1] + "} "


def verdict(estimate: data.Estimate | None) -> str:
    """ "better" / "worse" where the 95% interval of A - B excludes 0, else "" (cannot tell)."""
    if estimate is None or estimate.low is None:
        return ""
    return "better" if estimate.low > 0 else "worse" if estimate.high < 0 else ""


def table_records(rows: list[data.Row], columns: list[str]) -> list[dict[str, Any]]:
    """The leaderboard as flat records: identity columns, value / low / high of every headline metric, then every
    other metric of any row (None where a row lacks it)."""
    other = data.other_columns(rows)
    records = []
    for row in rows:
        record: dict[str, Any] = {k: getattr(row, k) for k in (*IDENTITY, "run", "warmup_steps", "candidate_tokens")}
        record["shared_by"] = ",".join(row.shared_by)  # a before-row standing for several runs: their trainers
        record["note"] = row.note
        for name in columns:
            estimate = row.headline.get(name)
            record[name] = estimate.value if estimate else None
            record[f"{name}_low"] = estimate.low if estimate else None
            record[f"{name}_high"] = estimate.high if estimate else None
        record.update({name: row.other.get(name) for name in other})
        records.append(record)
    return records


def write_exports(rows: list[data.Row], columns: list[str], out: Path, context: dict[str, Any] | None = None) -> None:
    """leaderboard.csv (the table), leaderboard.json (the table, each row in full, and, with the report's context,
    the paired differences, the means over seeds and the solved-only-by lists)."""
    records = table_records(rows, columns)
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(records[0]))
    writer.writeheader()
    writer.writerows(records)
    write_atomic(out / "leaderboard.csv", table.getvalue())
    everything: dict[str, Any] = {"table": records, "rows": [r.export() for r in rows]}
    if context is not None:
        everything["differences"] = [d.export() for d in context["after_before"] + context["between"]]
        everything["over_seeds"] = [g.export() for g in context["seeds"] + context["seed_differences"]]
        everything["solved_only_by"] = [t.export() for t in context["solved_only"]]
        everything["warnings"] = [{"run": run, "warning": line} for run, line in context["warnings"]]
    write_atomic(out / "leaderboard.json", json.dumps(everything, indent=1, default=str) + "\n")


def markdown(context: dict[str, Any]) -> str:
    """The leaderboard and the figures as Markdown a README can include (figure paths relative to the report)."""
    columns = context["columns"]
    label = context.get("metric_label", str)
    warm_up = int(bool(context.get("warmup_column")))
    tokens = int(bool(context.get("tokens_column")))
    lines = [
        "# Leaderboard",
        "",
        "Each cell: value [95% interval over problems: bootstrap for pass@k/best@k and for behaviour scores "
        "(each problem's mean), Wilson for solved@c]. "
        "One before row per evaluation of the base model."
        + (
            " Warm-up steps: the SFT steps of the run's format warm-up before RL (0: none; -: a row of no training)."
            if warm_up
            else ""
        )
        + (
            " Tokens per candidate: one candidate's token cap, in training / at evaluation (a rollout's cap less its "
            "delimiters' allowance, over the answers it writes)."
            if tokens
            else ""
        ),
        "",
        "| task | dataset | trainer | searcher | model | seed | phase | "
        + ("warm-up steps | " if warm_up else "")
        + ("tokens per candidate | " if tokens else "")
        + " | ".join(_md(label(c)) for c in columns)
        + " |",
        "|" + "---|" * (7 + warm_up + tokens + len(columns)),
    ]
    for row in context["rows"]:
        method = f"{row.arm} ({row.trainer})" if row.arm else row.trainer
        cells = [
            row.task,
            row.dataset or "-",
            method,
            row.searcher,
            row.model,
            str(row.seed),
            row.phase,
            *([_n(fmt_steps(row.warmup_steps))] if warm_up else []),
            *([row.candidate_tokens or "-"] if tokens else []),
            *(_n(fmt_ci(row.headline.get(c))) for c in columns),
        ]
        lines.append(_md_row(cells))
    if context["notes"]:
        lines += ["", *(f"- {_md(r.label)} s{r.seed}: {_md(note)}" for r, note in context["notes"])]
    if context["warnings"]:
        lines += ["", "## Warnings", "", *(f"- {_code(run)}: {_md(line)}" for run, line in context["warnings"])]
    lines += _markdown_comparisons(context)
    for task, kind, name in context["at_k"]:
        lines += ["", f"![{_md(task)} {kind}@k](plots/{name})"]
    for behaviour, name in context["behaviour_plots"]:
        lines += ["", f"![{_md(behaviour)} vs accuracy](plots/{name})"]
    other = context["all_other"]
    if other:
        lines += [
            "",
            "## Other metrics",
            "",
            "| run | phase | " + " | ".join(_md(label(c)) for c in other) + " |",
            "|" + "---|" * (2 + len(other)),
        ]
        for row in context["rows"]:
            cells = [row.run, row.phase, *(_n(fmt_number(row.other.get(n), n in context["whole"])) for n in other)]
            lines.append(_md_row(cells))
    lines += _markdown_runs(context["runs"])
    if context["skipped"]:
        lines += ["", "## Skipped", "", *(f"- {_code(folder)}: {_md(why)}" for folder, why in context["skipped"])]
    return "\n".join(lines) + "\n"


def _markdown_runs(runs: list[dict[str, Any]]) -> list[str]:
    """Per run, what the leaderboard cannot show: what it optimised (its reward, the plugins and their packages),
    its format warm-up, how many warnings it has, its evaluations during training (--eval-every)."""
    lines: list[str] = []
    for run in runs:
        optimised, during = run["optimised"], run["during"]
        lines += ["", f"### {_md(run['name'])}", ""]
        if optimised["terms"]:
            lines += [
                f"Reward: {_md(optimised['formula'] or '-')} (components not listed: reported only)",
                "",
                "| component | weight | from |",
                "|---|---|---|",
                *(_md_row([t["name"], t["shown"], t["source"]]) for t in optimised["terms"]),
                "",
            ]
        if optimised["plugins"]:
            lines.append(
                "Plugins: "
                + "; ".join(
                    f"{_md(p['kind'])} {_code(p['name'])} ({_md(p['package'] or p['plugin'])})"
                    for p in optimised["plugins"]
                )
            )
        if run["warm_up"]:
            lines += ["", f"{_md(run['warm_up'])}."]
        if run["warnings"]:
            lines += ["", f"{len(run['warnings'])} warning(s): see Warnings above."]
        if during["points"]:
            lines += [
                "",
                f"Evaluation during training ({len(during['points'])} points; step: optimizer steps taken):",
                "",
                "| step | " + " | ".join(map(_md, during["names"])) + " |",
                "|" + "---|" * (1 + len(during["names"])),
            ]
            lines += [_md_row([p["step"], *(_n(fmt(p.get(n))) for n in during["names"])]) for p in during["points"]]
        if during["plot"]:
            lines += ["", f"![evaluation during training of {_md(run['name'])}](plots/{during['plot']})"]
    return ["", "## Runs", *lines] if lines else []


def _markdown_comparisons(context: dict[str, Any]) -> list[str]:
    """The paired differences, the means over seeds and the solved-only-by lists, as Markdown."""
    lines: list[str] = []
    columns = context["difference_columns"]
    label = context.get("metric_label", str)
    for title, diffs in (
        ("After - before, per run", context["after_before"]),
        ("Method - method, same problems and seed", context["between"]),
    ):
        if not diffs:
            continue
        lines += [
            "",
            f"## {title}",
            "",
            "Mean paired difference [95% paired bootstrap over the problems].",
            "",
            "| task | model | searcher | seed | A - B | problems | "
            + " | ".join(_md(label(c)) for c in columns)
            + " | note |",
            "|" + "---|" * (7 + len(columns)),
        ]
        for d in diffs:
            cells = [
                d.task,
                d.model,
                d.searcher,
                str(d.seed),
                f"{d.a} - {d.b}",
                str(d.problems),
                *(_n(fmt_diff_ci(d.metrics.get(c))) for c in columns),
                d.note,
            ]
            lines.append(_md_row(cells))
    groups = context["seeds"] + context["seed_differences"]
    if groups:
        names = compare.headline_names(groups)
        lines += [
            "",
            "## Over seeds",
            "",
            "Mean of the seeds' figures [95% interval over seeds: the wider, bound by bound, of a hierarchical "
            "bootstrap that redraws the seeds, then each seed's problems, and Student's t-interval over the seeds' "
            "means (seeds - 1 degrees of freedom)] {over problems only: the seeds' runs fixed} "
            "(the lowest and highest seed's figure). A gain over seeds is one whose first interval excludes 0.",
            "",
            "| task | model | searcher | what | seeds | " + " | ".join(_md(label(c)) for c in names) + " |",
            "|" + "---|" * (5 + len(names)),
        ]
        for g in groups:
            show = fmt_diff_ci if g.kind != "run" else fmt_ci
            cells = [
                g.task,
                g.model,
                g.searcher,
                g.label,
                ",".join(map(str, g.seeds)),
                *(
                    _n(
                        f"{show(g.metrics[c])} {_problems_only(show, g.problem_level.get(c))}"
                        f"(seeds {g.spread[c][0]:.3f} to {g.spread[c][1]:.3f})"
                    )
                    if c in g.metrics
                    else "-"
                    for c in names
                ),
            ]
            lines.append(_md_row(cells))
    if context["solved_only"]:
        lines += ["", "## Solved only by", ""]
        for t in context["solved_only"]:
            lines += [
                f"{_md(t.task, line_start=True)}, {_md(t.model)}: {t.compared} problems evaluated by every method "
                f"({t.left_out} left out), {t.by_all} solved by all, {t.by_none} by none.",
                "",
                "| method | solved only by it | problems |",
                "|---|---|---|",
            ]
            lines += [_md_row([m, len(ids), _ids(ids, context["show_ids"])]) for m, ids in t.only.items()]
            lines.append("")
    return lines


class _Ours(str):
    """Text the report made itself (a formatted number and its interval, "0.500 [0.25, 0.75]"): no run data in
    it, so its brackets stay as they are in a table cell."""


# In run data: what makes a link or an image ("[x](url)", "![x](url)", "[x][ref]"), a code span, emphasis,
# strikethrough, a table cell's end, an escape; "<", ">" and "&" are escaped as HTML (a raw tag, an autolink).
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_MD_BLOCK_START = re.compile(r"^(\d*)([#>+=.)-])")  # at a line's start: a heading, quote, list, rule


def _md(text: Any, line_start: bool = False) -> str:
    """Run data as Markdown text that renders as the text itself: one line, cut to reading.SHOWN_TEXT, HTML
    escaped as the page escapes it (a sample's `<script>` stays text) and every Markdown construct escaped (an
    image or a link in a warning or a model name is shown, never fetched or followed; a `|` cannot split a table
    cell). ``line_start``: the text begins a line, where "#", "-", "1." would start a block."""
    if isinstance(text, _Ours):
        return text.replace("|", "\\|")
    one = shown_name(" ".join(shown(text).split()))  # one line; a control character (NUL) as \\xNN
    escaped = _MD_SPECIAL.sub(r"\\\1", html.escape(one, quote=False))
    return _MD_BLOCK_START.sub(r"\1\\\2", escaped) if line_start else escaped  # "\#", "1\."


def _code(text: Any) -> str:
    """A folder or run name as a Markdown code span (where markup, `<script>` too, is shown as text, not run), on
    one line, cut to 1,000 characters."""
    return "`" + shown_name(" ".join(shown(text, 1000).split())).replace("`", "'") + "`"


def _md_row(cells: list[Any]) -> str:
    return "| " + " | ".join(_md(c) for c in cells) + " |"


def _n(text: str) -> _Ours:
    """A cell the report formatted (a number, an interval): kept as it is in a table."""
    return _Ours(text)


def _ids(ids: list[str], show: int) -> str:
    """Problem ids, the first ``show`` of them, and how many more."""
    return ", ".join(ids[:show]) + (f", ... and {len(ids) - show} more" if len(ids) > show else "")
