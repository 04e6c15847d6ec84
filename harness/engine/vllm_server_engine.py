"""Rollouts on a vLLM server (``vllm serve``, OpenAI-compatible), weights pushed from the trainer.

Generation and training can then sit on different machines, as in TRL's and verl's server modes. The trainer's side
needs no vLLM: requests are JSON over HTTP (the standard library's urllib, one request per prompt, sent concurrently
from a thread pool). Start the server with harness/engine/vllm_serve.py (its docstring gives the command and why
each flag).

The ``generate`` contract is VLLMEngine's (harness/engine/vllm_engine.py), item for item:
- prompts are chat-templated by TransformersEngine.encode and sent as token ids (``/v1/completions`` takes a list of
  ids as ``prompt``); ``return_token_ids`` brings the sampled ids back, so nothing is re-tokenised; completions are
  prompt-major, ``text`` decoded by the policy's tokenizer;
- log-probs are vLLM's "processed" ones (the sampling temperature; renormalised over the kept tokens under top-k/
  top-p, with the same one-time warning): the server must run with ``--logprobs-mode processed_logprobs``, which the
  engine checks through ``/server_info`` and refuses otherwise. Every sampling parameter that changes the
  distribution is sent, so the server's defaults (a model's generation_config.json) cannot change it;
- ``finished``: the last token is one of the policy's end-of-sequence ids (sent as ``stop_token_ids``, kept);
- seeds: prompt p's request carries ``_prompt_seed(seed, prompt ids)`` and vLLM gives its sample j that seed + j, so
  a sample does not depend on the batch around it;
- steering as VLLMEngine does it (rows grouped by beta, one request per row with its unsteered seed, a
  ``cache_salt`` per strength), the hook set and cleared through ``/collective_rpc`` (harness/engine/vllm_steering.py's
  worker methods, values as text): the server must run with ``--worker-extension-cls
  harness.engine.vllm_steering.SteeringExtension`` (vllm_serve.py passes it; a steered call is refused in one line
  otherwise) and ``--enforce-eager``. The hook is the server's, so a client sharing the server meanwhile is steered too,
  and steering is refused while several ranks share it (``shared_by_ranks``).

Weights: ``sync_weights(model)`` hands the model to a transport and then resets the server's prefix cache (cached
prompt KV was computed with the old weights). The GRPO loop calls it at the start and after every optimizer step;
the engine calls it once when built, so the server starts from exactly the policy's in-memory weights.
The transport here is ``SharedFolderPush``: a safetensors checkpoint in a folder the server can read (a local temp
folder when the server runs on this machine; a shared filesystem, mounted at the same path on both machines,
otherwise), reloaded in place by vLLM's ``reload_weights`` worker method through ``/collective_rpc``. It works on
every vLLM backend, CPU included, and needs nothing on the trainer's side but safetensors. It costs a write and a
read of the whole model per step; on GPUs, vLLM's own weight-transfer endpoints (``/init_weight_transfer_engine``,
``/update_weights`` with ``--weight-transfer-config`` backend ``nccl``, as TRL's server mode does with its own
communicator) move the tensors GPU to GPU instead, but need NCCL and vLLM on the trainer's side: a transport with
the same ``push(server, model)`` method plugs in through ``transport=``.

Failures are one line naming the server: unreachable at construction, dead or silent mid-run (every request has a
timeout; a refused or reset connection fails at once), a server started without the flags above, or one serving a
model whose embedding differs from the policy's.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Protocol

from harness.engine.vllm_engine import VLLMContract, _prompt_seed
from harness.engine.vllm_steering import EXTENSION
from harness.engine.weights import serving_weights
from harness.plugins.option_help import Bounds
from harness.plugins.size_bounds import THREADS
from harness.store.run_folder import default_permissions
from harness.types import Completion, EngineCapabilities, Messages, SamplingParams


class ServerError(RuntimeError):
    """A failed exchange with the vLLM server, in one line; ``status`` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.status = status


class ServerClient:
    """JSON over HTTP to one vLLM server. Every request has a timeout, so a server that hangs fails, not blocks."""

    def __init__(self, url: str, timeout: float = 600.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path: str) -> Any:
        return self._call("GET", path, None)

    def post(self, path: str, body: Any = None) -> Any:
        return self._call("POST", path, body)

    def _call(self, method: str, path: str, body: Any) -> Any:
        data = json.dumps(body).encode() if body is not None else b""
        request = urllib.request.Request(
            self.url + path,
            data=data if method == "POST" else None,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:  # it answered, with an error
            raise ServerError(
                f"vLLM server at {self.url}: {method} {path} failed with HTTP {exc.code}: {_error_detail(exc.read())}",
                exc.code,
            ) from exc
        except TimeoutError as exc:
            raise ServerError(
                f"vLLM server at {self.url} did not answer {method} {path} within {self.timeout:g} s"
            ) from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:  # refused, reset, closed mid-answer
            reason = getattr(exc, "reason", None) or exc
            if isinstance(reason, TimeoutError):  # urllib wraps a connect timeout in URLError
                raise ServerError(
                    f"vLLM server at {self.url} did not answer {method} {path} within {self.timeout:g} s"
                ) from exc
            raise ServerError(
                f"vLLM server at {self.url} is not reachable: {str(reason) or type(reason).__name__} ({method} {path})"
            ) from exc
        return json.loads(raw) if raw.strip() else None


class WeightTransport(Protocol):
    def push(self, server: ServerClient, model: Any) -> None:
        """Make the server's model hold ``model``'s current weights (the engine resets the prefix cache after)."""
        ...

    def close(self) -> None: ...


class SharedFolderPush:
    """Weights through a folder both sides can read (see the module docstring).

    Each push writes the state dict as one safetensors file under a hidden temporary name and renames the folder
    into place (the server never sees half a checkpoint), asks the server to reload from it, then deletes the
    previous push's folder: at most one checkpoint stays on disk. ``folder``: where, as a path valid on both
    machines; default a temporary folder of this machine (removed at exit), for a server on the same machine."""

    def __init__(self, folder: str | Path | None = None) -> None:
        if folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="vector-harness-weights-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        else:
            self.folder = Path(folder).absolute()  # not resolved: the server may see the same mount by another link
            self.folder.mkdir(parents=True, exist_ok=True)
            self._cleanup = None
        self.current: Path | None = None  # the folder the server loaded last
        self.bytes_written = 0

    def push(self, server: ServerClient, model: Any) -> None:
        from safetensors.torch import save_file

        writing = Path(tempfile.mkdtemp(dir=self.folder, prefix=".weights-"))
        try:
            tensors = _checkpoint_tensors(model)
            save_file(tensors, str(writing / "model.safetensors"), metadata={"format": "pt"})
            # mkdtemp's 0700 and save_file's 0600: a server running as another user could not read the push
            default_permissions(writing)
            target = writing.with_name(writing.name.removeprefix("."))
            os.replace(writing, target)
        except BaseException:
            shutil.rmtree(writing, ignore_errors=True)
            raise
        try:
            server.post(
                "/collective_rpc",
                {"method": "reload_weights", "kwargs": {"weights_path": str(target), "is_checkpoint_format": True}},
            )
        except ServerError as exc:
            shutil.rmtree(target, ignore_errors=True)
            if exc.status is None:
                raise
            raise ServerError(
                f"{exc} (the server reloads from {target}: is that folder shared with it? vLLM "
                "stops after a failed reload: restart the server)",
                exc.status,
            ) from exc
        self.bytes_written += sum(t.numel() * t.element_size() for t in tensors.values())
        previous, self.current = self.current, target
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
        elif self.current is not None:
            shutil.rmtree(self.current, ignore_errors=True)
            self.current = None


def _checkpoint_tensors(model: Any) -> dict[str, Any]:
    """Every entry of the state dict under its own name, as the in-process engine passes them to ``reload_weights``.
    A tensor tied to an earlier one (lm_head to the embeddings) is written as a copy: safetensors refuses shared
    storage, and leaving it out is wrong, since vLLM's in-place reload puts a layer's *old* weights back when it
    loads nothing for it (a tied lm_head would keep serving the first weights)."""
    tensors: dict[str, Any] = {}
    storages: set[int] = set()
    for name, tensor in serving_weights(model):  # a LoRA policy's adapters merged in (harness/engine/weights.py)
        tensor = tensor.cpu()
        storage = tensor.untyped_storage().data_ptr()
        tensors[name] = (tensor.clone() if storage in storages else tensor).contiguous()
        storages.add(storage)
    return tensors


class VLLMServerEngine(VLLMContract):
    """Generation on a running vLLM server at ``url``, with the policy's weights pushed to it.

    Every rank of a data-parallel run shares the one server (``shared_by_ranks``): rank 0 alone pushes weights
    (``main_process`` False on the others), and the trainer holds the other ranks back until a push is done.

    ``weights_dir``: the folder for ``SharedFolderPush`` (shared with the server; default a local temp folder);
    ``transport``: another way to push weights (then ``weights_dir`` is not used); ``timeout``: seconds any one
    request may take (a generate request is one prompt's n samples); ``max_concurrency``: requests in flight;
    ``dtype`` (``--rollout-dtype``): the precision the server must compute in, refused at construction when it serves
    another (its dtype is fixed when it starts: ``--rollout-dtype auto`` sets nothing here); unset, whatever it serves
    is accepted, and declared as ``capabilities.sampling_dtype`` when it is not the policy's, so the trainer
    recomputes the old log-probs in its own precision."""

    capabilities = EngineCapabilities(
        own_weights=True, shared_by_ranks=True, rollout_dtype="dtype", steering=True
    )  # --rollout-dtype D: the dtype the server must serve in; steering: the server's worker extension

    def __init__(
        self,
        policy,
        url: str,  # the server's address (--engine-url)
        *,
        weights_dir: str | Path | None = None,  # a folder both machines mount, for weight pushes (--engine-weights-dir)
        transport: WeightTransport | None = None,  # another way to push weights (Python only, not from text)
        timeout: float = 600.0,  # seconds any one request may take
        max_concurrency: Annotated[int, Bounds(1, THREADS)] = 64,  # requests in flight at once
        progress: bool = True,
        main_process: bool = True,
        dtype: str | None = None,  # the precision the server must compute in (--rollout-dtype); none: any
    ) -> None:
        if transport is not None and weights_dir is not None:
            raise ValueError("give either weights_dir (for the shared-folder push) or a transport, not both")
        super().__init__(policy, progress and main_process)
        self.dtype = dtype
        self.max_concurrency = max_concurrency
        self.server = ServerClient(url, timeout)
        if transport is None and weights_dir is None and not _is_local(self.server.url):
            # the default folder is local; a reload from a path the server cannot read also stops vLLM 0.32's server
            raise ValueError(
                f"vLLM server at {self.url} is on another machine: pass weights_dir, a folder both "
                "machines mount at the same path (weight pushes go through it)"
            )
        self.model_name = self._check_server()
        self.transport = transport if transport is not None else SharedFolderPush(weights_dir)
        if main_process:  # the server starts from the in-memory policy, not from whatever it loaded
            self.sync_weights(policy.model)

    @property
    def url(self) -> str:
        return self.server.url

    def _check_server(self) -> str:
        """The served model's name, after checking that the server is up, runs with the development endpoints and
        processed log-probs, and serves a model with the policy's embedding shape."""
        self.server.get("/health")
        models = [m for m in (self.server.get("/v1/models") or {}).get("data", []) if not m.get("parent")]
        if not models:  # (a LoRA adapter has its base model as parent)
            raise ServerError(f"vLLM server at {self.url} serves no model")
        try:
            info = self.server.get("/server_info?config_format=json")
        except ServerError as exc:
            if exc.status != 404:
                raise
            raise ServerError(
                f"vLLM server at {self.url} has no development endpoints, which weight pushes use: "
                "start it with VLLM_SERVER_DEV_MODE=1 (see harness/engine/vllm_serve.py)"
            ) from exc
        config = ((info or {}).get("vllm_config") or {}).get("model_config")
        parallel = ((info or {}).get("vllm_config") or {}).get("parallel_config")
        # the worker extension steering calls (harness/engine/vllm_steering.py); "" when started without one
        self.extension = str(parallel.get("worker_extension_cls") or "") if isinstance(parallel, dict) else ""
        if not isinstance(config, dict):
            raise ServerError(f"vLLM server at {self.url}: /server_info has no model_config (another vLLM version?)")
        if config.get("logprobs_mode") != "processed_logprobs":
            raise ServerError(
                f"vLLM server at {self.url} reports {config.get('logprobs_mode')}, not the sampling "
                "distribution's log-probs: start it with --logprobs-mode processed_logprobs"
            )
        # No endpoint states the vocabulary size; the worker's module tree prints its embedding's shape.
        inspection = str(self.server.post("/collective_rpc", {"method": "get_model_inspection"})["results"][0])
        rows, width = re.search(r"num_embeddings=(\d+)", inspection), re.search(r"embedding_dim=(\d+)", inspection)
        ours = tuple(self.policy.model.get_input_embeddings().weight.shape)
        if rows and width and (int(rows[1]), int(width[1])) != ours:
            raise ServerError(
                f"vLLM server at {self.url} serves {models[0]['id']} with a {rows[1]} x {width[1]} "
                f"embedding, the policy's is {ours[0]} x {ours[1]}: not the same model"
            )
        theirs = str(config.get("dtype", "")).removeprefix("torch.")
        weights = str(next(self.policy.model.parameters()).dtype).removeprefix("torch.")
        if self.dtype and theirs != self.dtype:  # the server's dtype is fixed when it starts
            raise ServerError(
                f"vLLM server at {self.url} computes in {theirs or 'an unreported dtype'}, not "
                f"{self.dtype} (--rollout-dtype): start it with --dtype {self.dtype}"
            )
        if theirs and theirs != weights:  # declared, so a trainer computing in the policy's recomputes the old ones
            self.capabilities = replace(type(self).capabilities, sampling_dtype=theirs)
            if not self.dtype:
                warnings.warn(
                    f"VLLMServerEngine: the server computes in {theirs}, the policy in {weights}: the "
                    "trainer recomputes the old log-probs in its own precision (--rollout-dtype "
                    f"{theirs} says this is meant; serve with --dtype {weights} to sample exactly)",
                    stacklevel=3,
                )
        return models[0]["id"]

    def generate(
        self, prompts: Sequence[Messages], params: SamplingParams, *, desc: str = "", steering: Any = None
    ) -> list[Completion]:
        """Completions, prompt-major; log-probabilities as in the module docstring. ``steering``: add
        ``betas[r] * v`` at row r (``Steering``), as VLLMEngine does."""
        encoded = self.encode_request(prompts, params)
        if steering is not None:
            from harness.runner.distributed import current

            if current().world_size > 1:  # the ranks would set the one hook of the shared server over each other
                raise ValueError(
                    f"steering on the vLLM server at {self.url}, shared by {current().world_size} ranks, would mix "
                    "their strengths (the hook is the server's): steer from one process, or use --engine vllm"
                )
            if not self.extension:
                raise ServerError(
                    f"vLLM server at {self.url} was started without a worker extension, which steering needs: "
                    f"start it with --worker-extension-cls {EXTENSION} (harness/engine/vllm_serve.py does)"
                )
            return self.steered(
                encoded, params, steering, lambda rows, salt: self._rows(encoded, rows, params, salt, desc)
            )
        answers = self._post_all([self._request(ids, params) for ids in encoded], desc)
        return [
            self._completion(p, choice["index"], ids, choice)
            for p, (ids, answer) in enumerate(zip(encoded, answers, strict=True))
            for choice in sorted(answer["choices"], key=lambda c: c["index"])
        ]

    def _rows(
        self,
        encoded: list[list[int]],
        rows: list[tuple[int, int]],
        params: SamplingParams,
        salt: str | None,
        desc: str,
    ) -> list[Completion]:
        """One request per (prompt, sample) row, with the seed that sample has in an unsteered call."""
        bodies = []
        for p, j in rows:
            body = self._request(encoded[p], params)
            body.update(n=1, seed=body["seed"] + j, **({"cache_salt": salt} if salt else {}))
            bodies.append(body)
        answers = self._post_all(bodies, desc)
        return [
            self._completion(p, j, encoded[p], answer["choices"][0])
            for (p, j), answer in zip(rows, answers, strict=True)
        ]

    def _completion(self, p: int, j: int, ids: list[int], choice: dict[str, Any]) -> Completion:
        tokens = list(choice.get("token_ids") or [])
        logprobs = [float(x) for x in ((choice.get("logprobs") or {}).get("token_logprobs") or [])]
        if len(logprobs) != len(tokens) or choice.get("finish_reason") not in ("stop", "length"):
            raise ServerError(
                f"vLLM server at {self.url} returned {len(tokens)} tokens, {len(logprobs)} "
                f"log-probs, finish_reason {choice.get('finish_reason')!r} for prompt {p}"
            )
        return Completion(
            prompt_index=p,
            sample_index=j,
            prompt_ids=ids,
            token_ids=tokens,
            logprobs=logprobs,
            text=self.policy.tokenizer.decode(tokens, skip_special_tokens=True),
            finished=choice["finish_reason"] == "stop" and bool(tokens) and tokens[-1] in self.eos_ids,
        )

    def set_steering(self, layer: int, vector: list[float], scale: float) -> None:
        """The server's worker extension adds ``scale * vector`` to layer ``layer``'s output from now on (the vector
        as JSON text: vLLM's ``/collective_rpc`` is meant for text arguments)."""
        self.server.post(
            "/collective_rpc",
            {"method": "set_steering", "kwargs": {"layer": layer, "vector": json.dumps(vector), "scale": scale}},
        )

    def clear_steering(self) -> None:
        self.server.post("/collective_rpc", {"method": "clear_steering"})

    def _request(self, ids: list[int], params: SamplingParams) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "prompt": ids,
            "n": params.n,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k or 0,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "seed": _prompt_seed(params.seed, ids),
            "logprobs": 0,
            "return_token_ids": True,
            "stop_token_ids": self.eos_ids,
        }

    def _post_all(self, bodies: list[dict[str, Any]], desc: str) -> list[dict[str, Any]]:
        """The answers to ``bodies`` (completion requests), in order, up to ``max_concurrency`` in flight: the
        server batches concurrent requests itself. The first failure is raised at once, the rest abandoned."""
        from harness import progress

        if not bodies:
            return []
        samples = sum(b["n"] for b in bodies)
        pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(bodies)))
        try:
            with progress.bar(samples, desc or "generate", "sample", disable=not self.progress, inner=True) as bar:
                futures = {pool.submit(self.server.post, "/v1/completions", body): body["n"] for body in bodies}
                for done in as_completed(futures):
                    done.result()  # raises the first failure
                    bar.update(futures[done])
            return [future.result() for future in futures]
        finally:  # after a failure, queued requests are dropped and in-flight ones left to their timeout
            pool.shutdown(wait=False, cancel_futures=True)

    def sync_weights(self, model) -> None:
        """Push ``model``'s weights (a transformers model of the served architecture) to the server."""
        started = time.perf_counter()
        self.transport.push(self.server, model)
        if not (self.server.post("/reset_prefix_cache") or {}).get("success", False):
            raise ServerError(
                f"vLLM server at {self.url} could not reset its prefix cache (requests still "
                "running, from another client?): its cached prompts hold the old weights' KV"
            )
        self.syncs += 1
        self.sync_seconds += time.perf_counter() - started

    def close(self) -> None:
        """Remove the pushed weights this engine wrote (the server keeps running)."""
        self.transport.close()


def _is_local(url: str) -> bool:
    """Whether ``url`` names this machine: a loopback address, or this host's name or address."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host in ("localhost", "::1", socket.gethostname()):
        return True
    try:
        address = socket.gethostbyname(host)
    except OSError:
        return False
    if address.startswith("127."):
        return True
    try:
        return address == socket.gethostbyname(socket.gethostname())
    except OSError:
        return False


def _error_detail(raw: bytes) -> str:
    """The message of a vLLM error body ({"error": {"message": ...}} or FastAPI's {"detail": ...}), shortened."""
    text = raw.decode(errors="replace").strip()
    try:
        body = json.loads(text)
        error = body.get("error", body.get("detail", body)) if isinstance(body, dict) else body
        text = str(error.get("message", error) if isinstance(error, dict) else error)
    except ValueError:
        pass
    line = " ".join(text.split())
    return line[:300] + ("..." if len(line) > 300 else "") if line else "(no detail)"
