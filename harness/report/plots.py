"""The report's figures (matplotlib, Agg backend: no screen needed). Each function writes one PNG and returns its
file name, or None when the runs hold nothing to draw. Run data in a figure's text (a legend, a title) is plain
text (``_plain``): a "$" in a model's name would otherwise be parsed as mathtext, which fails the drawing."""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from collections import defaultdict
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): the backend must be chosen first

from harness.report.data import BEHAVIOUR, HEADLINE, HELD_OUT, Row, _order, metric_label
from harness.store.run_folder import write_atomic


def at_k_curves(rows: list[Row], task: str, kind: str, folder: Path) -> str | None:
    """pass@k (or best@k) against k on a log scale, one line per run and phase, with its 95% band. The pass@k
    figure also draws evolve's solved@c (dashed, c = model calls per problem): the same question at the same budget
    when every call yields one candidate."""
    kinds = ("pass", "solved") if kind == "pass" else (kind,)
    fig, ax = plt.subplots(figsize=(6.4, 4))
    drawn = False
    for row in (r for r in rows if r.task == task):
        for each in kinds:
            points = sorted(
                (int(match[2]), e) for n, e in row.headline.items() if (match := HEADLINE.match(n)) and match[1] == each
            )
            if not points:
                continue
            ks = [k for k, _ in points]
            label = _plain(row.legend) + (" solved@calls" if each == "solved" else "")
            (line,) = ax.plot(
                ks, [e.value for _, e in points], marker="o", label=label, linestyle="--" if each == "solved" else "-"
            )
            if all(e.low is not None for _, e in points):
                ax.fill_between(
                    ks, [e.low for _, e in points], [e.high for _, e in points], color=line.get_color(), alpha=0.15
                )
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per problem; for solved@c, model calls)")
    ax.set_ylabel(f"{kind}@k")
    ax.set_title(f"{_plain(task)}: {kind}@k (bands: 95% intervals over problems)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, folder, f"{task}-{kind}-at-k.png")


def training_curves(run: str, curves: dict[str, list[tuple[int, float]]], folder: Path) -> str | None:
    """Each reward component (and the mean reward) over training steps."""
    keys = [k for k in curves if k.startswith(("train/reward/", "train/reward_mean"))]
    if not keys:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for key in sorted(keys):
        steps, values = zip(*curves[key], strict=True)
        ax.plot(steps, values, marker=".", label=_plain(key.removeprefix("train/")))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean reward of the step's rollouts")
    ax.set_title(f"training: {_plain(run)}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, folder, f"train-{run}.png")


def during_training_curves(run: str, names: list[str], points: list[dict], folder: Path) -> str | None:
    """The evaluations during training (--eval-every): each headline metric against optimizer steps taken."""
    if not names or len(points) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name in names:
        shown = [(p["step"], p[name]) for p in points if name in p]
        ax.plot([s for s, _ in shown], [v for _, v in shown], marker="o", label=_plain(name))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("optimizer steps taken")
    ax.set_title(f"evaluation during training: {_plain(run)}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, folder, f"during-{run}.png")


def behaviour_vs_accuracy(rows: list[Row], folder: Path) -> list[tuple[str, str]]:
    """For each behaviour measured before and after training (VSPO, RLAIF, reward-shaped GRPO runs): pass@1
    against the behaviour score, an arrow from before to after per run; one figure by the training reward's scorer
    (behaviour/<name>) and, where the behaviour has one, one by its held-out evaluator (heldout/<name>), each titled
    as such. Returns (its heading, file) pairs."""
    by_run: dict[str, dict[str, Row]] = defaultdict(dict)
    for row in rows:
        by_run[row.run_dir][row.phase] = row
    every = {n for r in rows for n in r.other}
    metrics = sorted((n for n in every if n.startswith((BEHAVIOUR, HELD_OUT))), key=_order)
    out = []
    for metric in metrics:
        label = metric_label(metric, every)
        fig, ax = plt.subplots(figsize=(5.6, 4))
        drawn = False
        for phases in by_run.values():
            before, after = phases.get("before"), phases.get("after")
            points = [(r.other.get(metric), r.headline.get("pass@1")) for r in (before, after) if r]
            points = [(x, y.value) for x, y in points if x is not None and y is not None]
            if len(points) == 2:
                (x0, y0), (x1, y1) = points
                ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "->", "color": "0.5"})
                ax.scatter([x0], [y0], color="0.6", s=18)
                ax.scatter([x1], [y1], s=30, label=_plain(after.legend))  # method, seed, model and data
                drawn = True
        if drawn:
            ax.set_xlabel(f"{_plain(metric)} (mean over answers)")
            ax.set_ylabel("pass@1")
            ax.set_title(f"{_plain(label)} vs accuracy (grey: before training)", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            out.append((label, _save(fig, folder, metric.replace("/", "-", 1) + ".png")))
        else:
            plt.close(fig)
    return out


def _plain(text: str, limit: int = 100) -> str:
    """Run data as a figure's text: "$" escaped (never mathtext), on one line, at most ``limit`` characters."""
    one = " ".join(str(text).split())
    one = one if len(one) <= limit else one[: limit - 3] + "..."
    return one.replace("\\", "\\\\").replace("$", r"\$")


def safe_file_name(name: str, limit: int = 120) -> str:
    """``name`` as one file name inside the plots folder, whatever run data it was built from: no separators, no
    "..", no leading dot, only letters, digits and "._-+@=", at most ``limit`` characters (a task named
    "../../../X" or "/etc/x" in a shared runs folder must not put a plot outside --out)."""
    stem, dot, suffix = name.rpartition(".")
    clean = re.sub(r"[^A-Za-z0-9._+@=-]+", "_", stem if dot else name).replace("..", "_").lstrip(".-") or "plot"
    suffix = re.sub(r"[^A-Za-z0-9]", "", suffix)[:8] if dot else ""
    if clean != (stem if dot else name) or len(clean) > limit - 20:  # changed: two names must not meet in one file
        clean = clean[: limit - 30] + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return clean + (f".{suffix}" if suffix else "")


def _save(fig, folder: Path, name: str) -> str:
    name = safe_file_name(name)
    folder.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    with warnings.catch_warnings():  # a character the font lacks (from a run's name) is drawn as a box, not a warning
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.tight_layout()
        fig.savefig(png, dpi=110, format="png")
    plt.close(fig)
    write_atomic(folder / name, png.getvalue())  # a second report drawing the same plot never leaves half a PNG
    return name
