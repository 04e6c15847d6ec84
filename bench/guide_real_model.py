"""Run the guide's blocks marked ``<!-- real-model-only -->`` (docs/guide/*.md) as written: the default model, the
hub, a GPU where the block asks for one. Not a test: tests/test_guide_blocks.py runs every other block in CI on
tiny-random; these need what CI has not. Each page's blocks run in order in one folder (the files its earlier blocks
write are there, unmarked blocks included, so a marked block sees what a reader's would), and each marked block's
exit status, seconds and last lines are printed and written as JSON.

    .venv/bin/python bench/guide_real_model.py [--pages quickstart,gpus] [--timeout 3600] [--out runs/guide_bench]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from guide_blocks import block_env, command, guide_pages, page_blocks, write_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", default="", help="page stems to run (default: every page with a marked block)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per block")
    parser.add_argument("--out", default="runs/guide_bench", help="where each page's folder and the JSON go")
    parser.add_argument("--list", action="store_true", help="list the marked blocks and run nothing")
    args = parser.parse_args(argv)
    wanted = {p.strip() for p in args.pages.split(",") if p.strip()}
    out = Path(args.out).resolve()
    results = []
    for page in guide_pages():
        if wanted and page.stem not in wanted:
            continue
        blocks = page_blocks(page)
        marked = [b for b in blocks if b.runs and b.real_model_only is not None]
        if not marked:
            continue
        if args.list:
            for b in marked:
                print(f"{b.name}: {b.real_model_only or '(no reason given)'}")
            continue
        folder = out / page.stem
        folder.mkdir(parents=True, exist_ok=True)
        env = block_env(folder, shims=None)  # the real harness and pip: nothing shrunk
        for block in blocks:
            if block.file is not None:
                write_file(block, folder)
            if not block.runs or block.real_model_only is None:
                continue
            started = time.time()
            try:
                done = subprocess.run(
                    command(block), cwd=folder, env=env, capture_output=True, text=True, timeout=args.timeout
                )
                code, tail = done.returncode, (done.stdout + done.stderr)[-2000:]
            except subprocess.TimeoutExpired:
                code, tail = None, f"timed out after {args.timeout} s"
            seconds = round(time.time() - started, 1)
            results.append(
                {"block": block.name, "reason": block.real_model_only, "exit": code, "seconds": seconds, "tail": tail}
            )
            print(f"{block.name}: exit {code} in {seconds} s ({block.real_model_only})", flush=True)
    if not args.list:
        out.mkdir(parents=True, exist_ok=True)
        (out / "guide_real_model.json").write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {out / 'guide_real_model.json'}")
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
