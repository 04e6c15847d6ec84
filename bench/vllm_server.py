"""The vLLM-server engine's costs: server startup, one weight push, and rollout tokens/s through the server against the
in-process VLLMEngine, on the same model, prompts, n and budget (the methods of bench/rollout_throughput.py).

    .venv-vllm/bin/python bench/vllm_server.py [--model smollm2-135m] [--prompts 8] [--n 8] [--max-new-tokens 128]
        [--repeats 3] [--pushes 3] [--json bench/results/vllm_server.json]

Needs vLLM in the venv it runs from (the server is started from the same venv, on a free local port, and stopped at
the end). Both engines sample at temperature 1 with per-token log-probs; the rounds alternate the two methods. The
server is idle while the in-process engine runs and vice versa, but both hold their memory throughout. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from rollout_throughput import engine_method, machine, math_prompts, measure, print_table, summarise

from harness.engine.vllm_engine import VLLMEngine
from harness.engine.vllm_serve import start_server, stop_server, wait_until_healthy
from harness.engine.vllm_server_engine import VLLMServerEngine
from harness.models import load_policy
from harness.plugins import get_plugin_manager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pushes", type=int, default=3)
    parser.add_argument("--kv-cache-gib", type=float, default=1.0)
    parser.add_argument("--json", default="bench/results/vllm_server.json")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    policy = load_policy(args.model, get_plugin_manager(autoload=False)["model"])
    prompts = math_prompts(args.prompts)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = Path(tempfile.mkdtemp(prefix="vllm-server-bench-")) / "server.log"
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = start_server(policy.source, port=port, log_path=log_path, kv_cache_gib=args.kv_cache_gib)
    try:
        startup = wait_until_healthy(url, timeout=600, process=process, log_path=log_path)
        print(f"server healthy after {startup:.1f} s (log: {log_path})")
        server = VLLMServerEngine(policy, url, progress=False)  # its construction pushes the weights once
        print(f"engine built (checks + first push) {time.perf_counter() - started - startup:.1f} s")
        pushes = []
        for _ in range(args.pushes):
            before = server.sync_seconds
            server.sync_weights(policy.model)
            pushes.append(round(server.sync_seconds - before, 3))
        print(f"weight push: {pushes} s ({server.transport.bytes_written / server.syncs / 2**20:.0f} MiB each)")
        in_process = VLLMEngine(policy, progress=False)
        before = in_process.sync_seconds
        in_process.sync_weights(policy.model)
        in_process_sync = round(in_process.sync_seconds - before, 3)
        print(f"in-process sync: {in_process_sync} s")
        methods = {
            "vllm-server": engine_method(server, prompts, args.n),
            "vllm": engine_method(in_process, prompts, args.n),
        }
        records = measure(methods, args.repeats, args.max_new_tokens)
    finally:
        stop_server(process)
    summary = summarise(records, "vllm-server")
    print_table(summary, "vllm-server", {})
    result = {
        "model": args.model,
        "prompts": args.prompts,
        "n": args.n,
        "max_new_tokens": args.max_new_tokens,
        "server_startup_s": round(startup, 1),
        "push_s": pushes,
        "in_process_sync_s": in_process_sync,
        "push_mib": round(server.transport.bytes_written / server.syncs / 2**20, 1),
        "summary": summary,
        "records": records,
        "machine": machine(),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
