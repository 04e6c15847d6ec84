"""What a run leaves for the people who read it: files others may read (umask, not mkstemp's 0600), the engine's
batch size (--batch-size), the model's revision and dtype in the manifest."""

from __future__ import annotations

import contextlib
import json
import os
import stat

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
    cfg = RunConfig(model="tiny-random", steps=1, limit=2, train_limit=2, k="1", out=str(tmp_path),
                    options={"task": {}, "trainer": {"group_size": 2, "prompts_per_step": 1, "max_new_tokens": 4},
                             "searcher": {"n": 1, "max_new_tokens": 4}})
    with umask(0o022):
        folder = run(cfg, plugins=plugins, echo=lambda _: None)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert {"manifest.json", "metrics.json", "samples.jsonl", "steps.jsonl"} <= {p.name for p in files}
    assert {p.name: oct(_mode(p)) for p in files} == {p.name: oct(0o644) for p in files}
    assert {p.name: oct(_mode(p)) for p in folder.rglob("*") if p.is_dir()} == \
        {p.name: oct(0o755) for p in folder.rglob("*") if p.is_dir()}
    assert _mode(folder) == 0o755


def test_published_folders_and_weights_are_not_private(tmp_path):
    """What mkdtemp (0700) or safetensors' save_file (0600) writes privately and the harness then publishes gets
    open/mkdir's modes: the converted-model cache, a weight push into a shared folder (the vLLM server may run as
    another user), a steering vector."""
    import torch

    from harness.engine.vllm_server_engine import SharedFolderPush
    from harness.models import _atomic_folder
    from harness.steering.vectors import SteeringVector

    loaded = []

    class Server:
        def post(self, path, body):
            loaded.append(body["kwargs"]["weights_path"])

    with umask(0o022):
        with _atomic_folder(tmp_path / "cache" / "model") as tmp:
            (type(tmp_path)(tmp) / "w.bin").write_text("")
            (type(tmp_path)(tmp) / "w.bin").chmod(0o600)
        assert _mode(tmp_path / "cache" / "model") == 0o755 and _mode(tmp_path / "cache" / "model" / "w.bin") == 0o644

        SharedFolderPush(tmp_path / "shared").push(Server(), torch.nn.Linear(2, 2))
        pushed = type(tmp_path)(loaded[0])
        assert pushed.parent == tmp_path / "shared" and _mode(pushed) == 0o755
        assert _mode(pushed / "model.safetensors") == 0o644

        SteeringVector(torch.ones(4), layer=0, model="m", behaviour="b").save(tmp_path / "v.safetensors")
        assert _mode(tmp_path / "v.safetensors") == 0o644
