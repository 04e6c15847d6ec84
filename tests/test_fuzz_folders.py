"""`harness index` and `harness report` over seeded random run folders (bench/fuzz_folders.py's generator): wrong
types, huge integers, NaN, lone surrogates, markup, long strings, deep nesting, binary and truncated files, files
over their size limit, links out of the folder (to /dev/zero), FIFOs, sockets, folder names that are not UTF-8.
Both commands must exit 0, name every folder they skip in one line, keep markup from run data as text, keep pages
bounded and write nothing outside --out (the checks: bench/fuzz_folders.py ``check_batch``).

In process through the CLI's main() for about a minute (the bench runs 100,000 such cases: docs/design/reliability.md),
and a few batches as real processes with the real size limits. A failure names its batch: `python
bench/fuzz_folders.py --replay SEED:BATCH --batch SIZE` writes it again and keeps its folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tiny_runs import harness_env

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import fuzz_folders  # bench/ is not a package: its folder is on the path

SEED = 55  # any fixed seed: the cases are the same on every run, so a failure reproduces
BATCHES, SIZE = 36, 50  # 1,800 cases: 20 s on an idle 2-core machine, about a minute on a busy one
FIGURES_EVERY = 6  # the report's figures drawn in one batch of this many (they are most of its time)


def test_fuzzed_folders_in_process():
    failures = []
    for batch in range(BATCHES):
        _, problems = fuzz_folders.run_batch(SEED, batch, SIZE, figures=batch % FIGURES_EVERY == 0)
        failures += problems
    assert not failures, "\n".join(failures[:10])


def _fresh_process(args: list[str]) -> tuple[int, str, str]:
    """`harness ARGS` in a fresh process, as check_batch's ``run``: its output decoded so that bytes that are not
    UTF-8 survive to be caught."""
    done = subprocess.run(
        [sys.executable, "-m", "harness", *args],
        env=harness_env(),
        capture_output=True,
        timeout=fuzz_folders.HANG_SECONDS * 2,
        preexec_fn=fuzz_folders.capped_process,  # a read of /dev/zero: MemoryError, not the machine's memory
    )
    return done.returncode, *(x.decode("utf-8", "surrogateescape") for x in (done.stdout, done.stderr))


def test_fuzzed_folders_as_real_processes(tmp_path):
    """Two batches through `python -m harness`, the size limits as shipped: a FIFO or a link to /dev/zero would
    hang or fill memory here for real, and stdout is a real UTF-8 stream."""
    failures = []
    for batch in range(2):
        root = tmp_path / str(batch)
        cases = fuzz_folders.write_batch(SEED + 1, batch, root / "runs", 20)
        failures += fuzz_folders.check_batch(root, root / "runs", cases, run=_fresh_process)
    assert not failures, "\n".join(failures[:10])
