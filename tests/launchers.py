"""Starting ranks as processes for the data-parallel tests: `torchrun` and `accelerate launch` with two CPU
processes (gloo) on a free port, in an environment without the launcher's variables of the test's own process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**extra: str) -> dict[str, str]:
    """This process's environment without a launcher's variables, one thread a rank, plus ``extra``."""
    kept = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    return {**kept, "HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1", "OMP_NUM_THREADS": "1", **extra}


def torchrun(*args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        *args,
    ]


def accelerate(*args: str) -> list[str]:
    # --multi_gpu is accelerate's torchrun-based launcher; on a machine without GPUs harness/runner/distributed.py then
    # asks for gloo. (accelerate's --cpu flag would pick its MPI launcher, which starts one process without mpirun.)
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        "-m",
        "harness",
        *args,
    ]


def check(cmd: list[str], **extra: str) -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end; it must exit 0 (its stderr's tail is the failure's message)."""
    done = subprocess.run(cmd, env=env(**extra), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def only_run(out: Path) -> Path:
    (folder,) = (p for p in out.iterdir() if p.is_dir())
    return folder
