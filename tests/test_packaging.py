"""Packaging: the wheel installs the repository's tasks/, trainers/ and searchers/ as harness.tasks, harness.trainers
and harness.searchers (pyproject's package-dir), with their data files, and puts nothing in site-packages under a
generic top-level name; the installed ``harness`` lists its plugins and completes a tiny run away from the checkout.

The wheel is built offline with this environment's setuptools (no build isolation), from a copy of the checkout's
sources, so that no build/ or egg-info is written into the checkout (and no stale build/lib leaks into the wheel).
It is installed with --no-deps into a fresh virtual environment outside the checkout. The dependencies come from
this environment's site-packages through a path entry in a .pth file: a directory added that way is not scanned for
.pth files itself, so the checkout's editable install (a finder installed by a .pth) stays out, and ``harness``
is the installed copy; the test checks that it is.

Every time limit here is a ceiling against a hang (minutes), not a claim about speed.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from tiny_runs import tiny_argv

REPO = Path(__file__).resolve().parents[1]
# Top-level folders of the checkout that are no part of a source tree (the .gitignore's, and git's own)
NOT_SOURCES = {
    ".git",
    ".venv",
    ".venv-vllm",
    ".gpu",
    ".cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "build",
    "dist",
    "runs",
}
# Where each installed package's files come from in the checkout (pyproject's [tool.setuptools.package-dir])
FOLDERS = {
    "harness": "harness",
    "harness/tasks": "tasks",
    "harness/trainers": "trainers",
    "harness/searchers": "searchers",
}
# Package data (pyproject's [tool.setuptools.package-data]), as paths in the wheel
DATA = [
    "harness/tasks/data/*.json",
    "harness/tasks/data/*.jsonl",
    "harness/report/templates/*.j2",
    "harness/metrics/evaluate_modules/*/*.py",
]
GENERIC = ("tasks", "trainers", "searchers")
MINUTES = 60


def _run(command: list[str], timeout_min: float = 10, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=timeout_min * MINUTES, **kwargs
    )


def _ignore(folder: str, names: list[str]) -> set[str]:
    top = Path(folder).resolve() == REPO
    return {n for n in names if (top and n in NOT_SOURCES) or n == "__pycache__" or n.endswith((".egg-info", ".pyc"))}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of the checkout, built offline."""
    src = tmp_path_factory.mktemp("source") / "vector-harness"
    shutil.copytree(REPO, src, ignore=_ignore, symlinks=True)
    out = tmp_path_factory.mktemp("wheel")
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        "--quiet",
        "-w",
        out,
        src,
    ]
    done = _run([*build[:4], "--no-build-isolation", *build[4:]])
    if done.returncode != 0:  # this environment's setuptools is missing or too old: pip fetches the build backend
        isolated = _run([*build[:5], *build[6:]])
        assert isolated.returncode == 0, (done.stderr[-3000:], isolated.stderr[-3000:])
    (built,) = out.glob("vector_harness-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> dict:
    """A fresh virtual environment outside the checkout with the wheel installed, and this environment's packages
    (not its editable harness) visible."""
    root = tmp_path_factory.mktemp("clean")
    assert not root.resolve().is_relative_to(REPO)
    made = _run([sys.executable, "-m", "venv", "--without-pip", root / "venv"])
    if made.returncode != 0:
        pytest.skip(f"cannot create a virtual environment here: {made.stderr.strip()[-500:]}")
    python = root / "venv" / "bin" / "python"
    installed = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--quiet",
            wheel,
        ]
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    assert site.is_dir() and site.resolve().is_relative_to(root.resolve()), site
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (site / "zz-dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "HARNESS_DISABLE_PLUGIN_AUTOLOAD")
    }
    env |= {"VIRTUAL_ENV": str(root / "venv"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return {"root": root, "python": python, "bin": root / "venv" / "bin", "site": site, "env": env}


def test_the_wheel_holds_every_module_and_data_file_under_harness(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["harness"]
    assert not [n for n in names if n.split("/")[0] in GENERIC], "a generic top-level package is in the wheel"

    # Every module of the checkout, at its installed path: a subpackage missing from pyproject's explicit
    # `packages` list would be missing here.
    modules = {
        f"{installed}/{path.relative_to(REPO / folder).as_posix()}"
        for installed, folder in FOLDERS.items()
        for path in (REPO / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sorted(modules - set(names)) == [], "modules of the checkout missing from the wheel"

    for pattern in DATA:  # each data file of the checkout, and nothing else, under each pattern
        package = next(p for p in sorted(FOLDERS, key=len, reverse=True) if pattern.startswith(p + "/"))
        folder = REPO / FOLDERS[package]
        in_checkout = sorted(
            f"{package}/{path.relative_to(folder).as_posix()}"
            for path in folder.glob(pattern[len(package) + 1 :])
            if path.is_file()
        )
        in_wheel = sorted(n for n in names if fnmatch.fnmatch(n, pattern) and n.count("/") == pattern.count("/"))
        assert in_checkout, f"the checkout has no {pattern}: this test's pattern is stale"
        assert in_wheel == in_checkout, pattern


def test_site_packages_gets_harness_subpackages_and_no_generic_names(venv):
    site = venv["site"]
    assert sorted(p.name for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")) == ["harness"]
    for name in GENERIC:
        assert (site / "harness" / name / "__init__.py").is_file()
        assert not (site / name).exists()
    # The installed copy is the one imported, and the checkout is nowhere on the path
    code = (
        "import importlib.util, json, harness, harness.tasks, harness.trainers, harness.searchers\n"
        "specs = {n: importlib.util.find_spec(n) for n in ('tasks', 'trainers', 'searchers')}\n"
        "print(json.dumps({'files': [m.__file__ for m in (harness, harness.tasks, harness.trainers,"
        " harness.searchers)], 'generic': {n: s and s.origin for n, s in specs.items()}}))\n"
    )
    done = _run([venv["python"], "-c", code], cwd=venv["root"], env=venv["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(Path(f).resolve().is_relative_to(site.resolve()) for f in found["files"]), found
    assert not any(origin and Path(origin).resolve().is_relative_to(REPO) for origin in found["generic"].values())


@pytest.mark.runs  # `harness run` from the installed wheel, in a fresh process
def test_the_installed_harness_lists_and_runs_away_from_the_checkout(venv):
    harness = venv["bin"] / "harness"
    listing = _run([harness, "list"], cwd=venv["root"], env=venv["env"])
    assert listing.returncode == 0, listing.stderr[-3000:]
    for kind, name in [
        ("tasks", "math"),
        ("tasks", "code"),
        ("trainers", "grpo"),
        ("trainers", "vpo"),
        ("searchers", "best-of-k"),
        ("searchers", "evolve"),
    ]:
        assert re.search(rf"^\s+{re.escape(name)}\s+.*\[builtin:harness\.{kind}\]$", listing.stdout, re.M), (
            name,
            listing.stdout,
        )

    out = venv["root"] / "runs"
    argv = tiny_argv("none", task="math", searcher="best-of-k", k=1, threads=None, sets={"searcher.max_new_tokens": 8})
    done = _run(
        [harness, *argv, "--out", out],
        timeout_min=20,
        cwd=venv["root"],
        env=venv["env"],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (manifest,) = out.glob("*/manifest.json")
    assert json.loads(manifest.read_text())["status"] == "complete"
    assert (manifest.parent / "metrics.json").is_file()
