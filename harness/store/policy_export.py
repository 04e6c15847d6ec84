"""The trained policy as a run's output: a Hugging Face folder that `harness run --model`, lm-eval or `vllm serve`
can load, with a model card saying how it was made and what it scored.

<run>/model/ holds the weights (safetensors), tokenizer and generation config; for a LoRA run it holds the adapter
(adapter_config.json + adapter_model.safetensors, which `harness run --model` and peft load over the base model),
and ``save_merged`` adds <run>/model-merged/ with the adapters folded into full weights (what vLLM serves). The card
(README.md) is written when the run completes, with the before/after metrics. Each folder is written under a
temporary name and renamed into place, so a run killed while saving leaves no half model.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from harness.models import atomic_folder

MODEL_DIR = "model"
MERGED_DIR = "model-merged"
CARD = "README.md"


def save_policy(policy: Any, run_dir: Path, merged: bool = False) -> list[Path]:
    """Write the policy (or its adapter) to <run>/model/, and with ``merged`` a LoRA policy's merged weights to
    <run>/model-merged/; returns the folders written."""
    written = [_save(policy.adapter or policy.model, policy.tokenizer, Path(run_dir) / MODEL_DIR)]
    if merged and policy.adapter is not None:
        # merge into a copy: the run's own policy keeps its adapters (and the exact numbers they give)
        written.append(
            _save(copy.deepcopy(policy.adapter).merge_and_unload(), policy.tokenizer, Path(run_dir) / MERGED_DIR)
        )
    return written


def save_folder(policy: Any, target: Path) -> Path:
    """The policy (a LoRA policy: its adapter) as a Hugging Face folder at ``target``, replacing one there."""
    return _save(policy.adapter or policy.model, policy.tokenizer, Path(target))


def _save(model: Any, tokenizer: Any, target: Path) -> Path:
    with atomic_folder(target, replace=True) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if (
            getattr(model, "generation_config", None) is not None
            and not (Path(tmp) / "generation_config.json").exists()
        ):
            model.generation_config.save_pretrained(tmp)
    return target


def write_model_card(run_dir: Path, manifest: dict[str, Any], metrics: dict[str, Any]) -> None:
    """README.md of each saved folder: the base model, how it was trained, before/after metrics."""
    for name in (MODEL_DIR, MERGED_DIR):
        folder = Path(run_dir) / name
        if folder.is_dir():
            (folder / CARD).write_text(model_card(manifest, metrics, adapter=(folder / "adapter_config.json").exists()))


def model_card(manifest: dict[str, Any], metrics: dict[str, Any], adapter: bool = False) -> str:
    config = manifest.get("config", {})
    model = manifest.get("model", {})
    base = model.get("source") or config.get("model", "")
    rows = []
    for key in sorted(k.split("/", 1)[1] for k in metrics if k.startswith("after/")):
        before, after = metrics.get(f"before/{key}"), metrics.get(f"after/{key}")
        if isinstance(after, (int, float)):
            rows.append(f"| {key} | {_fmt(before)} | {_fmt(after)} |")
    front = [
        "---",
        "library_name: " + ("peft" if adapter else "transformers"),
        f"base_model: {base}",
        "tags: [vector-harness, " + str(config.get("trainer", "")) + "]",
        "---",
    ]
    body = [
        f"# {config.get('trainer', '')} on {config.get('task', '')}: {Path(str(base)).name or base}",
        "",
        f"Trained by vector-harness: `harness run` with trainer `{config.get('trainer')}` on task "
        f"`{config.get('task')}` (task version {manifest.get('task', {}).get('version', '?')}), seed "
        f"{config.get('seed')}, weights {model.get('dtype', '?')}" + (", LoRA adapter" if adapter else "") + ".",
        "",
        f"Evaluated with `{config.get('searcher')}` on {manifest.get('task', {}).get('eval_problems', '?')} held-out "
        "problems, before and after training (same problems, same sampling seeds):",
        "",
        "| metric | before | after |",
        "|---|---|---|",
        *rows,
        "",
        "Evaluate it again: `harness run --model <this folder> --trainer none --task "
        f"{config.get('task')} --seed {config.get('seed')}`"
        + (" (same options)" if config.get("options") else "")
        + ".",
        "",
        "## Run configuration",
        "",
        "```json",
        json.dumps(
            {"config": config, "resolved_options": manifest.get("resolved_options", {})},
            indent=2,
            sort_keys=True,
            default=str,
        ),
        "```",
        "",
    ]
    return "\n".join([*front, "", *body])


def push_to_hub(run_dir: Path, repo_id: str, api: Any = None) -> str:
    """Upload <run>/model/ to ``repo_id`` (created if missing, private); returns the commit URL. ``api`` is an
    ``huggingface_hub.HfApi`` (tests pass a stand-in: no hub is reachable from CI)."""
    folder = Path(run_dir) / MODEL_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"nothing to push: {folder} does not exist (was the run trained with --save-model?)")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    api.create_repo(repo_id, private=True, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, commit_message=f"vector-harness run {Path(run_dir).name}"
    )
    return str(getattr(commit, "commit_url", commit))


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else ("-" if value is None else str(value))
