"""Where things came from, for the manifest: package versions and content digests of files and folders. Tasks
record their data's provenance with these (tasks/provenance.py); the runner records the model's (harness/models.py).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

# Bytes: a larger model folder is not hashed at every run (SmolLM2-135M's 0.54 GB took 0.45 s from the page cache
# on a 2-core machine; a cold disk is slower).
FOLDER_DIGEST_LIMIT = 2 << 30


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def file_digest(path: Path) -> str | None:
    """A short content hash of a local file: two runs on different files never look alike."""
    full = file_sha256(path)
    return None if full is None else "sha256:" + full[:16]


def file_sha256(path: Path) -> str | None:
    """A file's whole SHA-256 in hex, as `sha256sum` prints it (None: unreadable): for code a run executed, which
    someone may want to check a copy of."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def folder_digest(folder: Path, limit: int = FOLDER_DIGEST_LIMIT) -> tuple[str | None, int]:
    """(a short content hash of every file under ``folder``, names included, or None when they hold more than
    ``limit`` bytes or cannot be read; their total size). Hidden files (caches, locks) are left out."""
    files = sorted(
        p
        for p in Path(folder).rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    total = sum(p.stat().st_size for p in files)
    if total > limit:
        return None, total
    digest = hashlib.sha256()
    for path in files:
        content = file_digest(path)
        if content is None:
            return None, total
        digest.update(f"{path.relative_to(folder).as_posix()}\0{content}\n".encode())
    return "sha256:" + digest.hexdigest()[:16], total


# Instruction sets named in every figure's machine, by /proc/cpuinfo flag
ISA = (("avx2", "avx2"), ("avx512", "avx512f"), ("bf16", "avx512_bf16"), ("amx", "amx_tile"))
ISA_LIMITS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")  # what torch's and oneDNN's kernels may use, when set


def machine() -> dict[str, object]:
    """The CPU a figure came from: its model name, cores, and the instruction sets that change float rounding and
    speed (AVX2, AVX-512, native bf16, AMX). Figures compare only between machines that agree on these."""
    cpu, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and cpu == "unknown":
                cpu = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        cpu = platform.processor() or platform.machine()
    isa = [name for name, flag in ISA if flag in flags]
    described: dict[str, object] = {"cpu": cpu, "cores": os.cpu_count(), "isa": isa}
    # torch's and oneDNN's kernels held below what the CPU has (an AVX2 machine emulated on a newer one)
    limits = {name: os.environ[name] for name in ISA_LIMITS if os.environ.get(name)}
    if limits:
        described["isa_limit"] = limits
    return described


def source_commit() -> str | None:
    """The commit of the harness's own source when it runs from a git checkout (with "+dirty" when files differ
    from it); None for an installed wheel or where git is missing."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
