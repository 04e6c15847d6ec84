"""Metric loggers: every logger of a run receives the same stream from the RunStore; a failing one is dropped."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import types

import pytest

from harness.hookspecs import hookimpl
from harness.plugins import get_plugin_manager
from harness.plugins.registry import PluginError
from harness.store.loggers import check_loggers, open_loggers
from harness.store.run_folder import RunStore

CONFIG = {"task": {"name": "math"}, "trainer": {"name": "grpo", "lr": 1e-5}, "seed": 0}


def record_a_run(store: RunStore) -> None:
    """What a run sends: an evaluation, a warm-up step, training steps, an evaluation with a non-number."""
    store.update_metrics({"before/pass@1": 0.25, "before/num_problems": 4})
    store.log_step(0, {"sft_loss": 2.0}, stage="warmup")
    store.log_step(0, {"loss": 1.5, "reward_mean": 0.1})
    store.log_step(1, {"loss": 1.0, "reward_mean": 0.3})
    store.update_metrics({"after/pass@1": 0.5, "after/solved": [1, 3], "vspo/layer": 19})


# The stream record_a_run must produce: (stage, step, metrics).
EXPECTED = [
    ("before", None, {"pass@1": 0.25, "num_problems": 4}),
    ("warmup", 0, {"sft_loss": 2.0}),
    ("train", 0, {"loss": 1.5, "reward_mean": 0.1}),
    ("train", 1, {"loss": 1.0, "reward_mean": 0.3}),
    ("after", None, {"pass@1": 0.5, "solved": [1, 3]}),
    ("vspo", None, {"layer": 19}),
]


class Recorder:
    """A logger that keeps what it receives."""

    def __init__(self, run_dir, config):
        self.run_dir, self.config = run_dir, config
        self.events: list[tuple] = []
        self.closed = False

    def log(self, metrics, step, stage):
        self.events.append((stage, step, metrics))

    def close(self):
        self.closed = True


class Flaky(Recorder):
    """Fails on its second event, and again if anything is sent after that."""

    name = "flaky"

    def log(self, metrics, step, stage):
        if self.events:
            raise RuntimeError("disk on fire")
        super().log(metrics, step, stage)


class Needy(Recorder):
    requires = "no_such_package_for_harness_tests"


class LoggerPlugin:
    """A test plugin: registers the loggers above and keeps the instances the run creates."""

    def __init__(self):
        self.created: list[Recorder] = []

    def _factory(self, cls):
        def make(run_dir, config):
            self.created.append(cls(run_dir, config))
            return self.created[-1]

        make.requires = getattr(cls, "requires", None)
        return make

    @hookimpl
    def harness_register_loggers(self, registry):
        registry.add("recorder", self._factory(Recorder), "keeps events in memory")
        registry.add("flaky", self._factory(Flaky), "raises on its second event")
        registry.add("needy", self._factory(Needy), "needs a package nobody has")


@pytest.fixture
def plugin():
    return LoggerPlugin()


@pytest.fixture
def registry(plugin):
    return get_plugin_manager(extra_plugins=(plugin,), autoload=False)["logger"]


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_time(records):
    times = [r.pop("time") for r in records]
    assert all(isinstance(t, float) for t in times) and times == sorted(times)
    return records


def test_builtins_registered(registry):
    assert {"jsonl", "tensorboard", "wandb", "mlflow"} <= set(registry.names())
    assert registry.get("jsonl").plugin == "builtin:harness.store.loggers"


def test_jsonl_receives_exactly_the_stream(tmp_path, registry):
    store = RunStore(tmp_path, "run")
    store.attach_loggers(open_loggers([], registry, store.dir, CONFIG))
    record_a_run(store)
    store.close()
    assert without_time(read_jsonl(store.dir / "metrics.jsonl")) == [
        {"stage": "before", "step": None, "pass@1": 0.25, "num_problems": 4},
        {"stage": "warmup", "step": 0, "sft_loss": 2.0},
        {"stage": "train", "step": 0, "loss": 1.5, "reward_mean": 0.1},
        {"stage": "train", "step": 1, "loss": 1.0, "reward_mean": 0.3},
        {"stage": "after", "step": None, "pass@1": 0.5, "solved": [1, 3]},
        {"stage": "vspo", "step": None, "layer": 19},
    ]


def test_metrics_json_can_be_rebuilt_from_the_stream(tmp_path, registry):
    store = RunStore(tmp_path, "run")
    store.attach_loggers(open_loggers([], registry, store.dir, CONFIG))
    record_a_run(store)
    store.close()
    rebuilt: dict = {}
    for record in read_jsonl(store.dir / "metrics.jsonl"):
        stage, step = record.pop("stage"), record.pop("step")
        del record["time"]
        for key, value in record.items():
            if step is None:
                rebuilt[f"{stage}/{key}"] = value
            else:
                rebuilt.setdefault(f"{stage}/{key}", []).append(value)
    assert rebuilt == json.loads((store.dir / "metrics.json").read_text())


def test_a_plugin_logger_receives_the_same_events_as_jsonl(tmp_path, plugin, registry):
    store = RunStore(tmp_path, "run")
    loggers = open_loggers(["recorder"], registry, store.dir, CONFIG)
    assert [type(logger).__name__ for logger in loggers] == ["JsonlLogger", "Recorder"]  # jsonl always, first
    store.attach_loggers(loggers)
    record_a_run(store)
    store.close()
    (recorder,) = plugin.created
    assert recorder.run_dir == store.dir and recorder.config == CONFIG and recorder.closed
    assert recorder.events == EXPECTED
    jsonl = [(r.pop("stage"), r.pop("step"), r) for r in without_time(read_jsonl(store.dir / "metrics.jsonl"))]
    assert jsonl == recorder.events


def test_names_are_deduplicated_with_jsonl_first(registry):
    assert check_loggers(["recorder", "jsonl", "recorder"], registry) == ["jsonl", "recorder"]
    assert check_loggers([], registry) == ["jsonl"]


def test_a_raising_logger_is_dropped_with_one_warning(tmp_path, plugin, registry, capsys):
    store = RunStore(tmp_path, "run")
    store.attach_loggers(open_loggers(["flaky", "recorder"], registry, store.dir, CONFIG))
    record_a_run(store)
    store.close()
    flaky, recorder = plugin.created
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 1
    assert "logger 'flaky'" in warnings[0] and "RuntimeError: disk on fire" in warnings[0]
    assert flaky.events == EXPECTED[:1] and flaky.closed  # dropped at its second event, and closed
    assert recorder.events == EXPECTED  # the others carry on
    assert len(read_jsonl(store.dir / "metrics.jsonl")) == len(EXPECTED)
    assert json.loads((store.dir / "metrics.json").read_text()) == {
        "before/pass@1": 0.25,
        "before/num_problems": 4,
        "warmup/sft_loss": [2.0],
        "train/loss": [1.5, 1.0],
        "train/reward_mean": [0.1, 0.3],
        "after/pass@1": 0.5,
        "after/solved": [1, 3],
        "vspo/layer": 19,
    }


def test_unknown_logger_lists_the_available_ones_before_opening_any(tmp_path, plugin, registry):
    with pytest.raises(PluginError) as err:
        open_loggers(["recorder", "tensorbored"], registry, tmp_path, CONFIG)
    message = str(err.value)
    assert "unknown logger 'tensorbored'" in message and "\n" not in message
    assert all(name in message for name in ("jsonl", "tensorboard", "wandb", "mlflow"))
    assert not plugin.created and not list(tmp_path.iterdir())  # failed before anything was opened


def test_a_missing_package_is_one_line_before_opening_any(tmp_path, plugin, registry):
    with pytest.raises(ValueError) as err:
        open_loggers(["recorder", "needy"], registry, tmp_path, CONFIG)
    assert str(err.value) == (
        "logger 'needy' needs the no_such_package_for_harness_tests package: "
        "pip install no_such_package_for_harness_tests"
    )
    assert not plugin.created and not list(tmp_path.iterdir())


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed here")
def test_wandb_missing_says_how_to_install(tmp_path, registry):
    with pytest.raises(ValueError, match=r"^logger 'wandb' needs the wandb package: pip install wandb$"):
        open_loggers(["wandb"], registry, tmp_path, CONFIG)


def test_listing_loggers_imports_no_backend():
    code = (
        "import sys\n"
        "from harness.plugins import get_plugin_manager\n"
        "print(get_plugin_manager(autoload=False)['logger'].names())\n"
        "print(sorted({'torch', 'tensorboard', 'mlflow', 'wandb'} & set(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


def test_tensorboard_writes_the_scalars(tmp_path, registry):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    store = RunStore(tmp_path, "run")
    store.attach_loggers(open_loggers(["tensorboard"], registry, store.dir, CONFIG))
    record_a_run(store)
    store.close()
    events = EventAccumulator(str(store.dir / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(0, 1.5), (1, 1.0)]
    assert [(e.step, e.value) for e in events.Scalars("before/pass@1")] == [(0, 0.25)]
    assert "after/solved" not in events.Tags()["scalars"]  # a list is not a scalar


def test_mlflow_records_params_and_metric_history(tmp_path, registry, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # The logger sets MLFLOW_ALLOW_FILE_STORE when unset: setenv first so that monkeypatch restores it afterwards.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "false")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    store = RunStore(tmp_path, "run")
    loggers = open_loggers(["mlflow"], registry, store.dir, CONFIG)
    store.attach_loggers(loggers)
    record_a_run(store)
    store.close()
    client = MlflowClient(tracking_uri=(store.dir / "mlruns").as_uri())
    run = client.get_run(loggers[1].run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.params["trainer.lr"] == "1e-05" and run.data.params["task.name"] == "math"
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")] == [(0, 1.5), (1, 1.0)]
    assert run.data.metrics["before/pass_1"] == 0.25  # "@" is not allowed in MLflow names
    assert "after/solved" not in run.data.metrics


def test_wandb_offline_writes_a_run(tmp_path, registry, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    store = RunStore(tmp_path, "run")
    store.attach_loggers(open_loggers(["wandb"], registry, store.dir, CONFIG))
    record_a_run(store)
    store.close()
    runs = list((store.dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))


def a_training_step(step):
    """The samples.jsonl records GRPO writes for one step (two answers; "|" and a newline in one)."""
    return [
        {
            "problem_id": f"p{step}",
            "phase": "train",
            "step": step,
            "prompt": "2 + 2?",
            "text": text,
            "extracted": extracted,
            "rewards": {"correct": reward, "brevity": 0.5},
            "scalar": reward,
            "advantage": reward - 0.5,
        }
        for text, extracted, reward in (("a | b\nso 4", "4", 1.0), ("5", "5", 0.0))
    ]


def test_completion_tables_every_n_steps_reach_tensorboard_and_wandb(tmp_path, registry, monkeypatch):
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    store = RunStore(tmp_path, "run")
    store.attach_loggers(open_loggers(["tensorboard", "wandb"], registry, store.dir, CONFIG))
    store.completions_every = 2
    for step in range(4):
        store.log_step(step, {"loss": 1.0})
        store.write_samples(a_training_step(step))
    store.write_samples([{"problem_id": "q", "phase": "after", "text": "not training"}])
    store.close()
    events = EventAccumulator(str(store.dir / "tensorboard"))
    events.Reload()
    texts = events.Tensors("train/completions/text_summary")
    assert [t.step for t in texts] == [1, 3]  # after every 2nd step, at that step's index
    table = texts[0].tensor_proto.string_val[0].decode()
    assert table.splitlines()[0] == (
        "| problem_id | prompt | completion | extracted | correct | brevity | scalar | advantage |"
    )
    assert "| p1 | 2 + 2? | a \\| b<br>so 4 | 4 | 1 | 0.5 | 1 | 0.5 |" in table
    (run,) = (store.dir / "wandb").glob("offline-run-*")
    tables = sorted((run / "files" / "media" / "table" / "train").glob("completions_*.table.json"))
    assert len(tables) == 2
    logged = [json.loads(t.read_text()) for t in tables]
    assert logged[0]["columns"] == [
        "problem_id",
        "prompt",
        "completion",
        "extracted",
        "correct",
        "brevity",
        "scalar",
        "advantage",
    ]
    assert sorted(row[0] for t in logged for row in t["data"]) == ["p1", "p1", "p3", "p3"]
    assert ["p1", "2 + 2?", "a | b\nso 4", "4", 1.0, 0.5, 1.0, 0.5] in logged[0]["data"] + logged[1]["data"]


def test_a_replayed_step_sends_no_completion_table_twice(tmp_path, plugin, registry):
    class Tables(Recorder):
        def log_completions(self, rows, step, stage):
            self.events.append(("completions", step, [r["problem_id"] for r in rows]))

    store = RunStore(tmp_path, "run")
    tables = Tables(store.dir, CONFIG)
    store.attach_loggers([tables])
    store.completions_every = 1
    store.replayed_events = 1  # a resume: step 1 had been logged, and its table sent, before the kill
    for step in (1, 2):
        store.log_step(step, {"loss": 1.0})
        store.write_samples(a_training_step(step))
    assert tables.events == [("train", 2, {"loss": 1.0}), ("completions", 2, ["p2", "p2"])]


def test_wandb_goes_online_where_the_user_is_logged_in(tmp_path):
    from harness.store.loggers import wandb_mode

    nowhere = {"NETRC": str(tmp_path / "none")}
    assert wandb_mode(nowhere) == "offline"
    assert wandb_mode({**nowhere, "WANDB_MODE": "disabled", "WANDB_API_KEY": "k"}) == "disabled"  # said, kept
    assert wandb_mode({**nowhere, "WANDB_API_KEY": "k"}) == "online"
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password 0123456789abcdef\n")  # as `wandb login` writes
    netrc.chmod(0o600)
    assert wandb_mode({"NETRC": str(netrc)}) == "online"
    assert wandb_mode({"NETRC": str(netrc), "WANDB_BASE_URL": "https://wandb.example.com"}) == "offline"
    netrc.write_text("machine wandb.example.com login user password 0123456789abcdef\n")
    assert wandb_mode({"NETRC": str(netrc), "WANDB_BASE_URL": "https://wandb.example.com"}) == "online"
    netrc.write_text("machine api.wandb.ai login user\n")  # no key
    assert wandb_mode({"NETRC": str(netrc)}) == "offline"
    assert wandb_mode({"NETRC": str(tmp_path)}) == "offline"  # a netrc that cannot be read: offline, not a failure


def test_wandb_is_started_in_that_mode(tmp_path, registry, monkeypatch):
    """The mode reaches wandb.init (a stand-in module: a real online init would need the network)."""
    pytest.importorskip("wandb")
    started = []

    class Run:
        def __init__(self):
            self.summary = {}

        def define_metric(self, *args, **kwargs):
            pass

        def log(self, values):
            pass

        def finish(self):
            pass

    fake = types.ModuleType("wandb")
    fake.__spec__ = importlib.machinery.ModuleSpec("wandb", None)  # what the loggers' package check looks for
    fake.init = lambda **kw: started.append(kw) or Run()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    monkeypatch.setenv("WANDB_API_KEY", "k")
    open_loggers(["wandb"], registry, tmp_path, CONFIG)[1].close()
    monkeypatch.delenv("WANDB_API_KEY")
    open_loggers(["wandb"], registry, tmp_path, CONFIG)[1].close()
    assert [kw["mode"] for kw in started] == ["online", "offline"]


def test_harness_run_streams_to_the_loggers_it_is_given(tmp_path, tiny_policy_spec):
    """`harness run --log tensorboard`: the evaluation and every training step reach TensorBoard as they reach
    metrics.json; an unknown logger fails before the model loads or a folder is made."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tiny_runs import tiny_argv

    from harness.cli import main

    common = tiny_argv(steps=2, train_limit=2, k=1, threads=None, sets={"searcher.n": 1})
    assert main([*common, "--out", str(tmp_path / "bad"), "--log", "tensorbored"]) == 2
    assert not (tmp_path / "bad").exists()
    assert main([*common, "--out", str(tmp_path), "--log", "tensorboard", "--log-completions-every", "1"]) == 0
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir() and p.name != "bad"]
    metrics = json.loads((folder / "metrics.json").read_text())
    events = EventAccumulator(str(folder / "tensorboard"))
    events.Reload()
    assert [e.value for e in events.Scalars("train/loss")] == pytest.approx(metrics["train/loss"])
    assert events.Scalars("after/pass@1")[0].value == pytest.approx(metrics["after/pass@1"])
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["stage"] == "train" for line in lines) == 2
    # every step's completions as a table (--log-completions-every 1), each row one of its samples.jsonl records
    texts = events.Tensors("train/completions/text_summary")
    assert [t.step for t in texts] == [0, 1]
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    for text in texts:
        rows = text.tensor_proto.string_val[0].decode().splitlines()[2:]
        assert [row.split(" | ")[0] for row in rows] == [
            f"| {s['problem_id']}" for s in samples if s["phase"] == "train" and s["step"] == text.step
        ]
