"""The guide's code blocks (docs/guide/*.md), read as a reader pastes them: tests/test_guide_blocks.py runs them on
tiny-random, bench/guide_real_model.py runs the ones marked for the real model.

What a page holds, in order:

- a fenced ``bash`` (``sh``, ``shell``) or ``python`` block: run as written, in the page's own folder (one temporary
  folder per page, so a block uses the files the blocks before it wrote);
- a block right after a line "`PATH`:" (any language), or whose first line is a comment naming a file
  (``# myrewards.py``, ``# experiment.toml: ...``): that file, written into the page's folder (a second block naming
  the same Python file adds to it: the page's reward functions end up in one module);
- ``<!-- real-model-only -->`` (with an optional ``: reason``) on a line before a block: not run in CI; the bench
  runs it with the default model (bench/README.md lists these blocks);
- a block in any other language (toml, text, ...) that names no file: nothing to run.

In CI, ``harness`` and ``pip`` are small shims first on PATH (``shim_folder``): ``harness run`` and ``harness steer``
get ``--model tiny-random --threads 1`` and small sizes after the page's own flags (the last flag wins), so a page's
command runs in seconds; ``pip install`` installs into the page's folder, never into the project's environment.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"
MARKER = re.compile(r"^\s*<!--\s*real-model-only\b\s*:?\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
LABEL = re.compile(r"^\s*`([\w./-]+\.\w+)`:\s*$")
FILE_COMMENT = re.compile(r"^#\s*([\w./-]+\.(?:py|toml|ya?ml|json|jsonl|csv))\b")
RUNNABLE = {"bash": "bash", "sh": "bash", "shell": "bash", "console": "bash", "python": "python", "py": "python"}


@dataclass
class Block:
    page: str  # the page's file name
    line: int  # the fence's line number (1-based)
    lang: str  # "bash", "python", or another language
    code: str
    file: str | None = None  # the file this block is (it is written, not run)
    real_model_only: str | None = None  # the marker's reason ("" when it gives none); None: not marked

    @property
    def runs(self) -> bool:
        return self.file is None and self.lang in ("bash", "python")

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def page_blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, in order."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:  # every fence the scan meets opens a block: it skips to the end of each
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).lower()
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        code = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end])
        before = [line for line in lines[max(0, i - 4) : i] if line.strip()]
        label = LABEL.match(before[-1]) if before else None
        marker = next((MARKER.match(line) for line in reversed(before) if MARKER.match(line)), None)
        first = code.lstrip().splitlines()[0] if code.strip() else ""
        named = FILE_COMMENT.match(first) if lang in ("python", "py", "toml", "yaml", "yml") else None
        blocks.append(
            Block(
                page=path.name,
                line=i + 1,
                lang=RUNNABLE.get(lang, lang),
                code=code + "\n",
                file=label.group(1) if label else named.group(1) if named else None,
                real_model_only=marker.group(1) if marker else None,
            )
        )
        i = end + 1
    return blocks


def guide_pages() -> list[Path]:
    return sorted(GUIDE.glob("*.md"))


# -- the shims ------------------------------------------------------------------------------------------------------

# Sizes for `harness run` in CI, after the page's flags: tiny-random, 2 eval problems, 1 step.
RUN_FLAGS = ["--threads", "1", "--limit", "2", "--train-limit", "4", "--steps", "1", "--k", "1,2"]
SEARCHER_SETS = {
    "best-of-k": ["n=2", "max_new_tokens=8"],
    "evolve": ["seeds=2", "children=2", "calls=4", "max_new_tokens=8"],
}
RL = ["max_new_tokens=8", "group_size=2", "prompts_per_step=1"]
TRAINER_SETS = {
    "grpo": RL,
    "vpo": RL,
    "vspo": ["max_new_tokens=8", "prompts_per_step=1", "vector_prompts=4"],  # its group is its betas
    "rlaif": RL,
    "sft": ["batch_size=2", "micro_batch=2", "samples_per_problem=2", "max_target_tokens=8"],
}
STEER_FLAGS = ["--threads", "1", "--prompts", "4", "--eval-prompts", "2", "--max-new-tokens", "8"]


def _value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _from_config(argv: list[str], key: str) -> list[str]:
    """A list setting of the run's experiment file (--config), for the shim's choice of sizes."""
    path = _value(argv, "--config")
    if not path or not Path(path).is_file():
        return []
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(path).read_text())
    except Exception:
        return []
    value = data.get(key, [])
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _common(options: dict[str, list[str]], names: list[str]) -> list[str]:
    """The options every named plugin takes (a grid's cells share the --set flags)."""
    known = [options[n] for n in names if n in options]
    if not known or len(known) < len([n for n in names if n != "none"]):
        return []
    return [o for o in known[0] if all(o in k for k in known[1:])]


def small(argv: list[str]) -> list[str]:
    """``harness ARGV`` as CI runs it: run and steer on tiny-random with small sizes; everything else as given."""
    if not argv or argv[0] not in ("run", "steer") or "--resume" in argv or "-h" in argv or "--help" in argv:
        return argv
    extra: list[str] = []
    model = _value(argv, "--model")
    if not (model and Path(model).is_dir()):  # a folder the page made (a trained policy) is kept
        extra += ["--model", "tiny-random"]
    if argv[0] == "steer":
        return [*argv, *extra, *STEER_FLAGS]
    extra += RUN_FLAGS
    steps = _value(argv, "--steps")
    if steps and steps.isdigit() and 1 <= int(steps) <= 2:  # a page's small count stays (checkpoints/step-2)
        extra[extra.index("--steps") + 1] = steps
    trainers = (_value(argv, "--trainer") or ",".join(_from_config(argv, "trainer")) or "grpo").split(",")
    searchers = (_value(argv, "--searcher") or ",".join(_from_config(argv, "searcher")) or "best-of-k").split(",")
    trainers = [t.strip() for t in trainers if t.strip()]
    for option in _common(TRAINER_SETS, [t for t in trainers if t != "none"]):
        extra += ["--set", f"trainer.{option}"]
    for option in _common(SEARCHER_SETS, [s.strip() for s in searchers]):
        extra += ["--set", f"searcher.{option}"]
    return [*argv, *extra]


HARNESS_SHIM = """#!{python}
import sys
sys.path.insert(0, {tests!r})
from guide_blocks import small
from harness.cli import main
sys.exit(main(small(sys.argv[1:])))
"""

# pip install PATH: into the page's own site folder (on PYTHONPATH), never into the project's environment
PIP_SHIM = """#!/bin/sh
if [ "$1" = "install" ]; then
    shift
    exec {python} -m pip install --quiet --no-deps --no-build-isolation --target "$GUIDE_SITE" "$@"
fi
exec {python} -m pip "$@"
"""


PYTHON_SHIM = """#!/bin/sh
exec {python} "$@"
"""


def shim_folder(folder: Path) -> Path:
    """A folder holding the ``harness``, ``python`` and ``pip`` the blocks call in CI."""
    folder.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    tests = str(Path(__file__).resolve().parent)
    for name, text in (("harness", HARNESS_SHIM), ("pip", PIP_SHIM), ("python", PYTHON_SHIM)):
        (folder / name).write_text(text.format(python=python, tests=tests))
        (folder / name).chmod(0o755)
    return folder


def write_file(block: Block, folder: Path) -> None:
    """A file block, written into the page's folder (a Python file named again is added to)."""
    path = folder / str(block.file)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".py" and path.exists():
        path.write_text(path.read_text() + "\n\n" + block.code)
    else:
        path.write_text(block.code)


def block_env(folder: Path, shims: Path | None) -> dict[str, str]:
    """The environment a page's blocks run in: its folder's site (pip's target) importable, no hub."""
    site = folder / ".site"
    site.mkdir(exist_ok=True)
    env = {**os.environ, "GUIDE_SITE": str(site)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(folder), env.get("PYTHONPATH", "")) if p)
    env.pop("HARNESS_DISABLE_PLUGIN_AUTOLOAD", None)
    if shims is not None:
        env["PATH"] = os.pathsep.join([str(shims), env.get("PATH", "")])
    return env


def command(block: Block, earlier_python: Sequence[str] = ()) -> list[str]:
    """How a block runs. A python block is a notebook cell: it sees what the page's earlier python blocks defined,
    so they run again before it, in one interpreter (``earlier_python``)."""
    if block.lang == "bash":
        return ["bash", "-euo", "pipefail", "-c", block.code]
    return [sys.executable, "-c", "\n".join([*earlier_python, block.code])]
