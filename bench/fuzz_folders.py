"""`harness index` and `harness report` over seeded random run folders: N cases, in process, through the CLI's
``main()``; prints cases/s and the count, writes bench/results/fuzz_folders.json (machine, commit, seed, count,
failures).

A case is one run folder: a valid run (manifest.json, metrics.json, samples.jsonl, steps.jsonl written as a run
writes them, without a model) spoiled one to three ways: a field of the manifest, metrics or a sample given a wrong
type, a huge integer, NaN, a lone surrogate, markup, a long string or deep nesting; a file truncated, binary, not
UTF-8, too deep to parse or over its size limit; a file replaced by a link out of the folder (to /dev/zero), a
dangling link, a link loop, a FIFO, a folder or a socket; the folder's name given a non-UTF-8 byte, a newline or
markup. Cases go in batches: one runs folder holds one good run and BATCH cases, indexed and reported once.

A batch fails when either command exits other than 0 or raises, hangs (``HANG_SECONDS``), writes text that is not
UTF-8 or a line that is not "skipped ...", "indexed ..." or "report of ...", leaves a case neither indexed nor
named in a "skipped" line, writes a page over ``MAX_PAGE_BYTES``, lets markup from run data through (a `<script>`
or `<img>` in index.html or report.md, a Markdown link or image in report.md), or writes outside --out and the
runs folder's index. The size limits are lowered (``FUZZ_LIMITS``) so files and lines over them are cheap to make.

    .venv/bin/python bench/fuzz_folders.py [--cases 100000] [--seed 0] [--batch 25] [--minutes M]
    .venv/bin/python bench/fuzz_folders.py --replay SEED:BATCH   # one batch again, its folder kept and printed

tests/test_fuzz_folders.py runs the same generator for about a minute, and a few cases as real processes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.store.results_db import KEPT_SAMPLE_KEYS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "fuzz_folders.json"
HANG_SECONDS = 60  # one batch's index and report; a FIFO opened for reading would wait forever
MAX_PAGE_BYTES = 8 << 20  # index.html or report.md of one batch (25 runs)
# Lowered size limits (harness/store/reading.py), so the generator can make files and lines over them cheaply.
FUZZ_LIMITS = {
    "MAX_MANIFEST_BYTES": 256 << 10,
    "MAX_METRICS_BYTES": 256 << 10,
    "MAX_SAMPLES_BYTES": 1 << 20,
    "MAX_LINE_BYTES": 64 << 10,
    "SHOWN_TEXT": 2_000,
    "SHOWN_ITEMS": 20,
}
FILES = ("manifest.json", "metrics.json", "samples.jsonl", "steps.jsonl")
MARKUP = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "![img](http://evil.example/i.png)",
    "[link](http://evil.example)",
    "[ref][1]",
    "**bold** _em_ `code` ~~del~~",
    "# heading",
    "1. list",
    "| a | b |",
    "$\\frac{1}{$ $x$",
    "\\",
)
ODD_TEXT = (
    "",
    " ",
    "../../x",
    "/abs",
    "a\nb\r\nc",
    "\u202eevil",
    "\u0000nul",
    "\ud800",
    "x\udfffy",
    "\U0001f600",
    "\ufeffbom",
    "\x85\u2028\u2029",
    "é" * 3,
)
NAMES = ("math", "code", "grpo", "vpo", "none", "best-of-k", "evolve", "tiny-random", "m")
BAD_NAME_BYTES = (
    b"bad\xff",
    b"x\nnewline",
    b"<b>markup<b>",
    b"![i](http:evil)",
    b"-dash",
    b"sp ace",
    b"\xc3(",
    b"\x7f",
)


# --- a valid run ---------------------------------------------------------------------------------------------------


def good_run(rng: random.Random) -> dict[str, Any]:
    """The files of a run as the harness writes them, with figures its samples reproduce: {file: content}."""
    phases = rng.choice([("eval",), ("before", "after")])
    trainer = "none" if phases == ("eval",) else rng.choice(["grpo", "vpo"])
    task, model, seed = rng.choice(["math", "code"]), rng.choice(["tiny-random", "m"]), rng.randrange(4)
    n, problems = 2, rng.randint(1, 3)
    samples, metrics = [], {}
    for phase in phases:
        per_problem = []
        for p in range(problems):
            outcomes = [rng.random() < 0.5 for _ in range(n)]
            per_problem.append(outcomes)
            for i, ok in enumerate(outcomes):
                samples.append(
                    {
                        "problem_id": f"p{p}",
                        "phase": phase,
                        "sample_index": i,
                        "rollout_index": i,
                        "answer_index": 0,
                        "prompt": f"Calculate {p} + {i}.",
                        "reference": str(p + i),
                        "text": f"the answer is {p + i if ok else -1}",
                        "extracted": str(p + i) if ok else None,
                        "rewards": {"correct": float(ok), "boxed": 0.0},
                        "behaviours": {"brevity": rng.random()},
                        "success": ok,
                        "scalar": float(ok),
                    }
                )
        c = [sum(o) for o in per_problem]
        metrics[f"{phase}/pass@1"] = sum(x / n for x in c) / problems
        metrics[f"{phase}/pass@2"] = sum(x > 0 for x in c) / problems
        metrics[f"{phase}/best@1"] = metrics[f"{phase}/pass@1"]
        metrics[f"{phase}/best@2"] = metrics[f"{phase}/pass@2"]
        scores = [s["behaviours"]["brevity"] for s in samples if s["phase"] == phase]
        metrics[f"{phase}/behaviour/brevity"] = math.fsum(scores) / len(scores)
        metrics[f"{phase}/num_tokens"] = 4 * n * problems
        metrics[f"{phase}/diversity/distinct_1"] = rng.random()
    if trainer != "none":
        metrics["train/reward_mean"] = [rng.random() for _ in range(3)]
        metrics["train/loss"] = [rng.random() for _ in range(3)]
    manifest = {
        "status": "complete",
        "harness_version": "0.1.0",
        "config": {
            "task": task,
            "trainer": trainer,
            "searcher": "best-of-k",
            "model": model,
            "preset": "quick",
            "steps": 3 if trainer != "none" else None,
            "k": "1,2",
            "seed": seed,
            "threads": 1,
            "engine": "transformers",
            "arm": "",
            "options": {"task": {}, "trainer": {}, "searcher": {"n": str(n)}},
        },
        "resolved_options": {
            "task": {},
            "trainer": {"behaviour": "brevity", "behaviour_weight": 0.5} if trainer != "none" else {},
            "searcher": {"n": str(n), "k": "1,2", "answers_per_rollout": 1},
        },
        "plugins": {
            "task": {"name": task, "plugin": "builtin:harness.tasks"},
            "searcher": {"name": "best-of-k", "plugin": "builtin:harness.searchers"},
            "loggers": [{"name": "jsonl", "plugin": "builtin:harness.store.loggers"}],
            "others": [{"kind": "model", "name": model, "plugin": "builtin:harness.models"}],
        },
        "plugin_packages": {f"task:{task}": "vector-harness 0.1.0", "searcher:best-of-k": "vector-harness 0.1.0"},
        "task": {
            "name": task,
            "version": f"{task}-v1",
            "data_source": {"source": "gym", "dataset": "reasoning-gym/basic_arithmetic", "params": {"seed": 1}},
            "data_card": {"name": "basic arithmetic", "split": "eval", "size": 245},
            "eval_problems": problems,
            "reward_weights": {"correct": 1.0, "boxed": 0.5, "f": 0.25},
            "reward_functions": [{"name": "f", "spec": "m:f", "file": "/tmp/m.py"}],
        },
        "model": {"spec": model, "source": "/models/x", "parameters": 3219776, "dtype": "torch.float32"},
        "seed": seed,
        "processes": 1,
        "packages": {"torch": "2.13.0", "vllm": None},
        "started": "2026-01-01T00:00:00+0000",
        "seconds": 5.1,
        "warnings": ["a warning"] if rng.random() < 0.3 else [],
    }
    steps = [
        {"step": i, "loss": rng.random(), "reward_mean": rng.random()} for i in range(3 if trainer != "none" else 0)
    ]
    return {"manifest.json": manifest, "metrics.json": metrics, "samples.jsonl": samples, "steps.jsonl": steps}


# --- hostile values --------------------------------------------------------------------------------------------------


def hostile_value(rng: random.Random, depth: int = 0) -> Any:
    """A value no run writes where it goes: a wrong type, a huge or non-finite number, odd or long text, markup,
    deep nesting."""
    kind = rng.randrange(16)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False, 0, -1, 1, 2**63, -(2**63) - 1, 2**64])
    if kind == 2:
        return rng.choice([10**19, -(10**30), 10**400, -(10**400), 10 ** rng.randint(300, 4200)])
    if kind == 3:
        return rng.choice([math.nan, math.inf, -math.inf, 1e308, -1e-320, 0.5, 5.0, -3.0])
    if kind == 4:
        return rng.choice(MARKUP)
    if kind == 5:
        return rng.choice(ODD_TEXT)
    if kind == 6:
        return rng.choice(["x", "<", "$", "\ud800", "é"]) * rng.choice([100, 5000, 70_000, 300_000])
    if kind == 7:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randint(1, 40)))
    if kind == 8 and depth < 3:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == 9 and depth < 3:
        return {
            rng.choice([*NAMES, *MARKUP, *ODD_TEXT]): hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 4))
        }
    if kind == 10:
        deep: Any = rng.choice([1, "x", None])
        for _ in range(rng.choice([20, 40, 500, 3000])):
            deep = [deep] if rng.random() < 0.5 else {"k": deep}
        return deep
    if kind == 11:
        return [rng.random() for _ in range(rng.choice([0, 1, 50]))]
    if kind == 12:
        return {"name": hostile_value(rng, depth + 1), "spec": hostile_value(rng, depth + 1)}
    if kind == 13:
        return rng.choice(NAMES)
    if kind == 14:
        return str(rng.choice([10**30, -5, 0, 7]))
    return rng.choice([[], {}, [None], {"": None}])


# Every field the index or the report reads (and some they do not), by file.
MANIFEST_PATHS = (
    "status",
    "config",
    "config.task",
    "config.trainer",
    "config.searcher",
    "config.model",
    "config.seed",
    "config.preset",
    "config.arm",
    "config.engine",
    "config.k",
    "config.steps",
    "config.threads",
    "config.options",
    "config.options.searcher",
    "seed",
    "started",
    "seconds",
    "error",
    "warnings",
    "warnings.0",
    "processes",
    "harness_version",
    "task",
    "task.name",
    "task.version",
    "task.eval_problems",
    "task.data_source",
    "task.data_source.dataset",
    "task.data_card",
    "task.data_card.name",
    "task.data_card.size",
    "task.reward_weights",
    "task.reward_weights.correct",
    "task.reward_functions",
    "task.reward_functions.0",
    "task.reward_functions.0.name",
    "task.reward_functions.0.file",
    "model",
    "model.spec",
    "model.parameters",
    "model.dtype",
    "packages",
    "packages.torch",
    "plugins",
    "plugins.task",
    "plugins.task.name",
    "plugins.loggers",
    "plugins.others",
    "plugins.others.0.kind",
    "plugin_packages",
    "plugin_packages.task:math",
    "resolved_options",
    "resolved_options.task",
    "resolved_options.trainer",
    "resolved_options.trainer.behaviour",
    "resolved_options.trainer.behaviour_weight",
    "resolved_options.searcher",
    "resolved_options.searcher.answers_per_rollout",
)
SAMPLE_FIELDS = (*KEPT_SAMPLE_KEYS, "prompt", "reference")  # what the index reads, and what it skips
METRIC_KEYS = (
    "{phase}/pass@1",
    "{phase}/pass@2",
    "{phase}/best@1",
    "{phase}/solved@4",
    "{phase}/pass@" + "9" * 400,
    "{phase}/pass@0",
    "{phase}/behaviour/brevity",
    "{phase}/heldout/brevity",
    "{phase}/num_tokens",
    "{phase}/<script>alert(1)</script>",
    "{phase}/![m](http://evil.example/m.png)",
    "{phase}/\ud800",
    "train/reward_mean",
    "train/reward/correct",
    "during/step",
    "during/pass@1",
    "warmup/steps",
    "warmup/well_formed_before",
    "warmup/well_formed_after",
    "warmup/seconds",
    "stopped/steps_trained",
    "intervals",
    "x" * 5000,
)


def _set(tree: Any, path: str, value: Any) -> None:
    """Set a dotted path ("task.reward_functions.0.name") in a JSON tree, making objects on the way."""
    if not isinstance(tree, dict):  # the manifest itself replaced by another value
        return
    *parents, last = path.split(".")
    at = tree
    for key in parents:
        if isinstance(at, list):
            if not at or not isinstance(at[0], (dict, list)):
                at[:1] = [{}]
            at = at[0]
            continue
        if not isinstance(at.get(key), (dict, list)):
            at[key] = {}
        at = at[key]
    if isinstance(at, list):
        at[:1] = [value]
    else:
        at[last] = value


def _delete(tree: Any, path: str) -> None:
    *parents, last = path.split(".")
    at = tree
    for key in parents:
        at = at.get(key) if isinstance(at, dict) else None
    if isinstance(at, dict):
        at.pop(last, None)


def spoil(rng: random.Random, files: dict[str, Any]) -> list[str]:
    """Spoil a run's files in place one way (values); returns what was done. File-level spoiling is ``spoil_file``."""
    what = rng.randrange(6)
    if what in (0, 1):
        path = rng.choice(MANIFEST_PATHS)
        if rng.random() < 0.15:
            _delete(files["manifest.json"], path)
            return [f"manifest.json: {path} deleted"]
        value = hostile_value(rng)
        _set(files["manifest.json"], path, value)
        return [f"manifest.json: {path} = {_brief(value)}"]
    if what == 2:
        phase = next(iter(k.split("/")[0] for k in files["metrics.json"] if "/" in k), "eval")
        key = rng.choice(METRIC_KEYS).format(phase=phase)
        value = hostile_value(rng) if rng.random() < 0.7 else rng.choice([0.5, 5.0, -1.0, 3, [0.1, 0.2], [1e308, -1]])
        files["metrics.json"][key] = value
        return [f"metrics.json: {_brief(key)} = {_brief(value)}"]
    if what == 3:
        samples = files["samples.jsonl"]
        if not samples:
            return ["samples.jsonl: empty"]
        line = rng.randrange(len(samples))
        field = rng.choice(SAMPLE_FIELDS)
        value = hostile_value(rng)
        if field in ("behaviours", "held_out") and rng.random() < 0.6:
            value = {rng.choice(["brevity", "<b>", "\ud800", ""]): hostile_value(rng)}
        samples[line][field] = value
        return [f"samples.jsonl line {line + 1}: {field} = {_brief(value)}"]
    if what == 4:
        files["steps.jsonl"].append({"step": hostile_value(rng), "loss": hostile_value(rng)})
        return ["steps.jsonl: a hostile line"]
    # the manifest's top level replaced
    value = rng.choice([None, [], "x", 1, {"status": "complete"}, {"config": None, "status": "complete"}])
    files["manifest.json"] = value
    return [f"manifest.json = {_brief(value)}"]


def encode(name: str, value: Any, rng: random.Random) -> bytes:
    """A file's bytes as a run writes it: JSON (indented or not, ASCII or UTF-8 with lone surrogates as their
    bytes, which are not UTF-8), JSONL one record a line."""
    ascii_only = rng.random() < 0.8

    def dumps(v: Any, **kw: Any) -> bytes:
        try:
            text = json.dumps(v, ensure_ascii=ascii_only, **kw)
        except (ValueError, RecursionError):  # too deep for the encoder: written as the parser would meet it
            text = "[" * 100_000
        return text.encode("utf-8", "surrogatepass")

    if name.endswith(".jsonl"):
        return b"".join(dumps(record) + b"\n" for record in value)
    return dumps(value, indent=rng.choice([None, 1]))


def spoil_file(rng: random.Random, data: bytes, name: str) -> tuple[bytes, str]:
    """A file's bytes spoiled: truncated, binary, not UTF-8, a BOM, too deep to parse, over its limit, a line
    broken, blank or not an object; returns (bytes, what was done)."""
    what = rng.randrange(11)
    if what == 0:
        cut = rng.randrange(len(data) + 1)
        return data[:cut], f"{name}: truncated at byte {cut}"
    if what == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))), f"{name}: random bytes"
    if what == 2:
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + data[at:], f"{name}: a bad byte"
    if what == 3:
        return b"\xef\xbb\xbf" + data, f"{name}: a BOM"
    if what == 4:
        return b"[" * 100_000 + b"]" * 100_000, f"{name}: too deep to parse"
    if what == 5:
        limit = FUZZ_LIMITS["MAX_MANIFEST_BYTES"] if name.endswith(".json") else FUZZ_LIMITS["MAX_SAMPLES_BYTES"]
        pad = b" " * (limit + 1) if name.endswith(".json") else b"{}\n" * (limit // 3 + 1)
        return pad + data, f"{name}: over its size limit"
    if what == 6 and name.endswith(".jsonl"):
        line = b'{"text": "' + b"y" * (FUZZ_LIMITS["MAX_LINE_BYTES"] + 1) + b'"}\n'
        return data + line, f"{name}: a line over the limit"
    if what == 7 and name.endswith(".jsonl"):
        return data + rng.choice([b"\n", b"[1]\n", b"null\n", b'"x"\n', b"{\n", b"{}"]), f"{name}: an odd line"
    if what == 8:
        return b"", f"{name}: empty"
    if what == 9:
        return rng.choice([b"null", b"[]", b"1e999", b'"x"', b"NaN", b"{}"]), f"{name}: another JSON value"
    return data.replace(b"\n", b"\r\n"), f"{name}: CRLF"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    else:
        path.unlink(missing_ok=True)


def replace_file(rng: random.Random, folder: Path, name: str) -> str:
    """Put something other than a regular file inside the folder where ``name`` goes."""
    path = folder / name
    _remove(path)
    what = rng.randrange(9)
    if what == 0:
        os.symlink("/dev/zero", path)
        return f"{name}: a link to /dev/zero"
    if what == 1:
        os.symlink("/dev/urandom", path)
        return f"{name}: a link to /dev/urandom"
    if what == 2:
        os.symlink("/etc/hostname", path)
        return f"{name}: a link out of the folder"
    if what == 3:
        os.symlink(folder / "nowhere", path)
        return f"{name}: a dangling link"
    if what == 4:
        os.symlink(path, path)
        return f"{name}: a link to itself"
    if what == 5:
        os.mkfifo(path)
        return f"{name}: a FIFO"
    if what == 6:
        path.mkdir()
        return f"{name}: a folder"
    if what == 7:
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.bind(str(path))
            except OSError:  # a path too long for a socket's address
                os.mkfifo(path)
                return f"{name}: a FIFO"
        return f"{name}: a socket"
    other = rng.choice([n for n in FILES if n != name])
    if (folder / other).is_file() and not (folder / other).is_symlink():
        os.symlink(other, path)  # a link inside the folder: read as the file it points to
        return f"{name}: a link to {other} (inside)"
    os.mkfifo(path)
    return f"{name}: a FIFO"


def folder_name(rng: random.Random, index: int) -> bytes:
    """A case's folder name: mostly plain, sometimes with a non-UTF-8 byte, a newline, markup, 255 bytes."""
    plain = f"case{index:03d}".encode()
    what = rng.randrange(10)
    if what == 0:
        return plain + rng.choice(BAD_NAME_BYTES)
    if what == 1:
        return (plain + b"-" + b"n" * 300)[:255]
    if what == 2:
        return plain + "-\ud800".encode("utf-8", "surrogatepass")
    return plain


def write_case(rng: random.Random, runs: Path, index: int) -> tuple[Path, list[str]]:
    """One spoiled run folder under ``runs``; returns it and what was done to it."""
    files = good_run(rng)
    done = [spoil(rng, files) for _ in range(rng.randint(0, 3))]
    spoiled = [line for lines in done for line in lines]
    folder = Path(os.fsdecode(os.path.join(os.fsencode(runs), folder_name(rng, index))))
    folder.mkdir()
    for name in FILES:
        if name == "metrics.json" and rng.random() < 0.05:
            spoiled.append("metrics.json: missing")
            continue
        data = encode(name, files[name], rng)
        if rng.random() < 0.12:
            data, what = spoil_file(rng, data, name)
            spoiled.append(what)
        (folder / name).write_bytes(data)
    if rng.random() < 0.12:
        spoiled.append(replace_file(rng, folder, rng.choice(FILES)))
    if rng.random() < 0.02:
        spoiled.append("manifest.json: missing")
        _remove(folder / "manifest.json")
    return folder, spoiled


def write_batch(seed: int, batch: int, runs: Path, size: int) -> dict[Path, list[str]]:
    """One good run and ``size`` cases under ``runs``; {folder: what was done to it}."""
    rng = random.Random(f"{seed}:{batch}")
    runs.mkdir(parents=True)
    good = good_run(random.Random(f"{seed}:{batch}:good"))
    (runs / "good").mkdir()
    for name in FILES:
        (runs / "good" / name).write_bytes(encode(name, good[name], random.Random(0)))
    return dict(write_case(rng, runs, i) for i in range(size))


# --- the check -----------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def limits(values: dict[str, int] | None = None) -> Iterator[None]:
    """harness/store/reading.py's limits set to ``values`` (FUZZ_LIMITS) meanwhile."""
    from harness.store import reading

    values = FUZZ_LIMITS if values is None else values
    before = {k: getattr(reading, k, None) for k in values}  # (None: a version without the limit)
    for k, v in values.items():
        setattr(reading, k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            setattr(reading, k, v)


MEMORY_HEADROOM = 4 << 30  # bytes of address space a batch's commands may add (a read of /dev/zero: MemoryError)


@contextlib.contextmanager
def memory_cap(headroom: int = MEMORY_HEADROOM) -> Iterator[None]:
    """At most ``headroom`` more bytes of address space meanwhile (RLIMIT_AS's soft limit, raised back after): a
    command that reads a link to /dev/zero fails with MemoryError, not the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + headroom if hard == resource.RLIM_INFINITY else min(hard, used + headroom)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def capped_process() -> None:
    """A fresh process's address space capped (``preexec_fn``), as ``memory_cap`` caps this one's."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_HEADROOM + (2 << 30), resource.RLIM_INFINITY))


class Hang(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang(f"no answer in {HANG_SECONDS} s")


def run_cli(args: list[str]) -> tuple[int | str, str, str]:
    """``harness ARGS`` through the CLI's main() in this process: (exit code, or the exception's traceback; stdout;
    stderr)."""
    from harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(HANG_SECONDS)
    try:
        with memory_cap(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code: int | str = main(args)
    except (Exception, SystemExit) as exc:  # SystemExit: argparse refused the arguments
        code = "".join(traceback.format_exception(exc))[-3000:]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


def shown_key(folder: Path | str) -> str:
    """How the commands must name ``folder`` (written here, not imported, so the check does not trust the code it
    checks): bytes that are not UTF-8 and control characters as ``\\xNN``."""
    text = os.fsencode(folder).decode("utf-8", "backslashreplace")
    return re.sub(
        "[\x00-\x1f\x7f-\x9f\u2028\u2029]",
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else f"\\u{ord(m[0]):04x}",
        text,
    )


def check_batch(root: Path, runs: Path, cases: dict[Path, list[str]], run: Callable = run_cli) -> list[str]:
    """Index and report ``runs``; every way the two commands broke a promise, one line each ("" none)."""
    out = root / "out"
    before = _tree(root)
    index = run(["index", str(runs)])
    report = run(["report", str(runs), "--out", str(out)])
    problems = []
    for command, (code, stdout, stderr) in (("index", index), ("report", report)):
        if code != 0:
            problems.append(f"{command}: exit {code if isinstance(code, int) else 'exception'}: {code} {stderr[-500:]}")
            continue
        for text in (stdout, stderr):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                problems.append(f"{command}: output that is not UTF-8 ({exc})")
        if "Traceback" in stderr:
            problems.append(f"{command}: a traceback: {stderr[-500:]}")
        odd = [x for x in stdout.splitlines() if not x.startswith(("skipped ", "indexed ", "report of "))]
        if odd:
            problems.append(f"{command}: lines that are not one line each: {odd[:3]!r}")
    if problems:
        return problems
    skipped = {
        command: {
            line.split(": ", 1)[0].removeprefix("skipped ") for line in out_.splitlines() if line.startswith("skipped ")
        }
        for command, (_, out_, _) in (("index", index), ("report", report))
    }
    named_index = {Path(name).name for name in skipped["index"]}
    named_report = {Path(name).name for name in skipped["report"]}
    indexed = _indexed(runs / "results.sqlite")
    reported = _indexed(out / "results.sqlite")
    STATS["indexed"] += len(indexed - {"good"})
    for line in index[1].splitlines():
        if line.startswith("skipped "):
            STATS["skipped: " + _kind_of(line.split(": ", 1)[1])] += 1
    for folder, spoiled in cases.items():
        if not folder.is_dir() or folder.is_symlink() or folder.name.startswith("."):
            continue
        name = Path(shown_key(folder)).name
        if name not in indexed and name not in named_index:
            problems.append(f"index: {name!r} neither indexed nor named as skipped ({'; '.join(spoiled)})")
        if name not in reported and name not in named_report:
            problems.append(f"report: {name!r} neither reported nor named as skipped ({'; '.join(spoiled)})")
    if "good" not in reported or "good" not in indexed:
        problems.append("the good run is not in the index")
    for page in ("index.html", "report.md", "leaderboard.json", "leaderboard.csv"):
        size = (out / page).stat().st_size
        if size > MAX_PAGE_BYTES:
            problems.append(f"{page}: {size:,} bytes")
    html, md = (out / "index.html").read_text(), (out / "report.md").read_text()
    text = re.sub(r"`[^`\n]*`", "", md)  # a code span shows its text as it is, markup too
    for page, shown in (("index.html", html), ("report.md", text)):
        for live in ("<script>alert", "<img src=x"):
            if live in shown:
                problems.append(f"{page}: markup from run data is live ({live})")
    if "\x00" in md:
        problems.append("report.md: a NUL character")
    if found := re.search(r"(?<!\\)\]\((?:http|plots/[^)]*\$)|(?<!\\)\]\[1\]", text):
        problems.append(
            f"report.md: a Markdown link from run data is live: {text[found.start() - 40 : found.end() + 20]!r}"
        )
    written = {p for p in _tree(root) - before if not _allowed(p, root, runs, out)}
    if written:
        problems.append(f"wrote outside --out: {sorted(map(str, written))[:3]}")
    return problems


STATS: Counter[str] = Counter()  # cases indexed, and skipped by `harness index` by kind of reason


def _kind_of(reason: str) -> str:
    """A skip reason without its particulars: the file and the first words of why."""
    words = re.sub(r"'[^']*'|\"[^\"]*\"|\([^)]*\)|\d[\d,]*", "N", reason).replace("::", ":").split()
    return " ".join(words[:6])


def _allowed(path: Path, root: Path, runs: Path, out: Path) -> bool:
    return path == out or out in path.parents or (path.parent == runs and "results.sqlite" in path.name)


def _tree(root: Path) -> set[Path]:
    found = set()
    for folder, dirs, files in os.walk(root):
        found.update(Path(folder) / f for f in (*dirs, *files))
    return found


def _indexed(db: Path) -> set[str]:
    if not db.exists():
        return set()
    conn = sqlite3.connect(db)
    try:
        return {Path(shown_key(r[0])).name for r in conn.execute("SELECT run_dir FROM runs")}
    finally:
        conn.close()


def _brief(value: Any) -> str:
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


@contextlib.contextmanager
def without_figures() -> Iterator[None]:
    """The report's figures not drawn meanwhile (each plot function answers "nothing to draw"): drawing is most of
    a report's time; the bench draws them in one batch of every ``--figures-every``."""
    from harness.report import plots

    names = ("at_k_curves", "training_curves", "during_training_curves", "behaviour_vs_accuracy")
    before = {name: getattr(plots, name) for name in names}
    for name in names:
        setattr(plots, name, (lambda *a, **k: []) if name == "behaviour_vs_accuracy" else (lambda *a, **k: None))
    try:
        yield
    finally:
        for name, function in before.items():
            setattr(plots, name, function)


def scratch() -> Path:
    """A new folder for one batch, in memory where there is a tmpfs (SQLite's fsync per run is then free)."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="fuzz-folders-", dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))


def run_batch(
    seed: int, batch: int, size: int, keep: Path | None = None, figures: bool = True
) -> tuple[int, list[str]]:
    """Write and check one batch (its figures drawn or not); (cases, problems)."""
    root = scratch() if keep is None else keep
    try:
        runs = root / "runs"
        cases = write_batch(seed, batch, runs, size)
        with limits(), contextlib.nullcontext() if figures else without_figures():
            problems = check_batch(root, runs, cases)
        return len(cases), [f"batch {seed}:{batch}: {p}" for p in problems]
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


# --- the bench -----------------------------------------------------------------------------------------------------


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
        return head + ("+uncommitted changes" if dirty.strip() else "")
    except OSError:
        return "unknown"


def _machine() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((x.split(":", 1)[1].strip() for x in f if x.startswith("model name")), "")
    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000, help="cases to run (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=100, help="cases per runs folder (one index and report each)")
    parser.add_argument(
        "--figures-every", type=int, default=10, help="draw the report's figures in one batch of this many (1: all)"
    )
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long, whatever --cases says")
    parser.add_argument("--replay", help="SEED:BATCH: run that batch once, keep its folder and print it")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    if args.replay:
        seed, batch = map(int, args.replay.split(":"))
        keep = Path(tempfile.mkdtemp(prefix="fuzz-replay-"))
        count, problems = run_batch(seed, batch, args.batch, keep)
        print(f"{count} cases in {keep}")
        print("\n".join(problems) or "no failures")
        return 1 if problems else 0
    start, count, failures, batch = time.monotonic(), 0, [], 0
    deadline = start + args.minutes * 60 if args.minutes else math.inf
    while count < args.cases and time.monotonic() < deadline:
        size = min(args.batch, args.cases - count)
        done, problems = run_batch(args.seed, batch, size, figures=batch % args.figures_every == 0)
        count += done
        failures += problems
        batch += 1
        if batch % 20 == 0 or count >= args.cases:
            rate = count / (time.monotonic() - start)
            print(f"{count:,} cases, {len(failures)} failures, {rate:.1f} cases/s", flush=True)
    seconds = time.monotonic() - start
    kinds = sorted(((k, v) for k, v in STATS.items() if k != "indexed"), key=lambda kv: -kv[1])
    result = {
        "command": "python bench/fuzz_folders.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": _machine(),
        "commit": _commit(),
        "seed": args.seed,
        "count": count,
        "requested": args.cases,
        "batches": batch,
        "batch_size": args.batch,
        "figures_drawn_in_one_batch_of": args.figures_every,
        "seconds": round(seconds, 1),
        "cases_per_second": round(count / seconds, 2) if seconds else None,
        "limits": FUZZ_LIMITS,
        "indexed": STATS["indexed"],
        "skipped": sum(v for k, v in STATS.items() if k.startswith("skipped: ")),
        # the 100 commonest reasons (their particulars left out), and how many others
        "skipped_by_kind": dict(kinds[:100]),
        "other_kinds_of_skip": len(kinds[100:]),
        "failures": len(failures),
        "failure_lines": failures[:200],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{count:,} cases in {seconds:.0f} s ({count / seconds:.1f} cases/s), {len(failures)} failures: {args.json}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
