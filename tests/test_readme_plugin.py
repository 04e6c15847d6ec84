"""The guide's plugin example (docs/guide/write-a-plugin.md, once the README's), taken verbatim from the page,
installed as a package and used through the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tiny_runs import tiny_argv

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "write-a-plugin.md"


def readme_files() -> dict[str, str]:
    """Code blocks introduced by a line "`harness-echo/<file>`:" on the page."""
    pattern = re.compile(r"^`harness-echo/([^`]+)`:\n```\w*\n(.*?)^```", re.S | re.M)
    return dict(pattern.findall(PAGE.read_text()))


def test_readme_plugin_installs_lists_and_runs(tmp_path):
    files = readme_files()
    assert set(files) == {"pyproject.toml", "harness_echo.py"}
    package = tmp_path / "harness-echo"
    package.mkdir()
    for name, text in files.items():
        (package / name).write_text(text)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(package)],
        check=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    env.pop("HARNESS_DISABLE_PLUGIN_AUTOLOAD", None)

    listing = subprocess.run(
        [sys.executable, "-m", "harness", "list"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert re.search(r"^\s+echo\s+Repeat a word back\s+\[harness-echo:echo\]$", listing, re.M), listing

    out = tmp_path / "runs"
    # the preset's train problems and prompts per step
    argv = tiny_argv(task="echo", train_limit=None, threads=None, out=out, sets={"trainer.prompts_per_step": None})
    result = subprocess.run(
        [sys.executable, "-m", "harness", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = (p for p in out.iterdir() if p.is_dir())  # beside it: results.sqlite, the runs index
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["plugins"]["task"] == {"name": "echo", "plugin": "harness-echo:echo"}
    metrics = json.loads((folder / "metrics.json").read_text())
    assert {"before/pass@2", "after/pass@2", "train/reward_mean"} <= set(metrics)
    rewards = [json.loads(line)["rewards"] for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert all(set(r) == {"exact", "contains"} for r in rewards)
