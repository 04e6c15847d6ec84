"""Every code block of the guide (docs/guide/*.md) runs as pasted, on tiny-random: one test per page, its blocks in
order in one folder (a block uses the files the blocks before it wrote). tests/guide_blocks.py says how a page is
read, what the CI shims change (the model and the sizes, nothing else) and the ``<!-- real-model-only -->`` marker;
bench/guide_real_model.py runs the marked blocks with the default model.

About 4 minutes on 2 busy CPU cores: slow."""

from __future__ import annotations

import subprocess

import pytest
from guide_blocks import block_env, command, guide_pages, page_blocks, shim_folder, small, write_file

PAGES = guide_pages()
TIMEOUT = 600  # seconds per block: a hang, never a speed


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_guide_block_runs_on_tiny_random(page, tmp_path):
    folder = tmp_path / "page"
    folder.mkdir()
    env = block_env(folder, shim_folder(tmp_path / "shims"))
    ran, cells = [], []  # cells: the page's python blocks so far (a notebook's state)
    for block in page_blocks(page):
        if block.file is not None and block.real_model_only is None:
            write_file(block, folder)
        if not block.runs or block.real_model_only is not None:
            continue
        done = subprocess.run(
            command(block, cells), cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
        if block.lang == "python":
            cells.append(block.code)
        assert done.returncode == 0, (
            f"{block.name} ({block.lang}) exited {done.returncode}:\n{block.code}\n--- stderr:\n{done.stderr[-3000:]}"
            f"\n--- stdout:\n{done.stdout[-1500:]}"
        )
        ran.append(block.name)
    print(f"{page.name}: ran {len(ran)} blocks")


def test_the_guide_blocks_are_found_and_marked_blocks_are_counted():
    """The reader (cheap): every page has blocks; a marked block is one a real model or a GPU needs."""
    blocks = [b for page in PAGES for b in page_blocks(page)]
    runnable = [b for b in blocks if b.runs]
    assert len(runnable) >= 20, [b.name for b in runnable]
    files = {b.file for b in blocks if b.file}
    assert {"harness-echo/pyproject.toml", "harness-echo/harness_echo.py", "myrewards.py"} <= files, files


def test_the_shim_shrinks_runs_and_keeps_everything_else():
    assert small(["list"]) == ["list"]
    assert small(["run", "--resume", "runs/x"]) == ["run", "--resume", "runs/x"]
    argv = small(["run", "--task", "math", "--trainer", "none,grpo", "--k", "1,4,16", "--set", "searcher.n=16"])
    assert argv[:8] == ["run", "--task", "math", "--trainer", "none,grpo", "--k", "1,4,16", "--set"]
    tail = argv[8:]
    assert "tiny-random" in tail and tail[tail.index("--k") + 1] == "1,2"  # after the page's: the last flag wins
    assert "trainer.group_size=2" in tail and "searcher.n=2" in tail
    assert "trainer.group_size=2" not in small(["run", "--trainer", "grpo,sft"])  # sft takes no group_size
    assert "trainer.samples_per_problem=2" not in small(["run", "--trainer", "grpo,sft"])
    assert "trainer.group_size=2" not in small(["run", "--trainer", "vspo"])  # its group size is its betas
    assert "searcher.n=2" not in small(["run", "--searcher", "evolve"])
