"""Evaluations fanned out to Ray (harness/executors.py): the evolve searcher and the code task give the same results
on Ray workers as on the local thread pool, the code still runs in the sandbox (on the worker), and asking for Ray
without it installed is one line before anything loads.

"Ray in local mode": Ray 2.60 refuses ``ray.init(local_mode=True)`` (RuntimeError "`local_mode` is no longer
supported"); it used to run tasks serially in the driver's own process. So these tests start a real local Ray
instance (``num_cpus=2``): every evaluation goes to a separate worker process, which is the stronger check. Ray
starts once for the module (2.5-4.5 s on a 2-core machine) and is shut down at its end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from importlib.util import find_spec
from pathlib import Path

import pytest

from harness.executors import RAY_INSTALL_HINT, LocalExecutor, RayExecutor
from harness.searchers.evolve import Evolve
from harness.store.run_folder import RunStore
from harness.tasks.code import CodeTask
from harness.testing import FakeEngine, FakeTask
from harness.types import Score

ROOT = Path(__file__).resolve().parents[1]
TINY_CODE = ROOT / "tests" / "fixtures" / "code" / "tiny.jsonl"

needs_ray = pytest.mark.skipif(find_spec("ray") is None, reason=f"ray is not installed ({RAY_INSTALL_HINT})")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance with 2 worker CPUs, started once for the whole module (its start-up is the cost)."""
    ray = pytest.importorskip("ray", reason=f"ray is not installed ({RAY_INSTALL_HINT})")
    with pytest.MonkeyPatch.context() as env:
        env.delenv("RAY_ADDRESS", raising=False)  # never a cluster someone configured: a fresh local one
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")  # no usage report (and no attempt to reach the network)
        env.setenv("RAY_DISABLE_IMPORT_WARNING", "1")
        # This file's helpers (test task subclasses, the witness below) are not importable on a worker, whose
        # sys.path lacks tests/: send them by value. Everything else travels by reference, as in a real run.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            yield
        finally:
            ray.shutdown()
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def code_task(executor: str = "local", **options) -> CodeTask:
    return CodeTask(source="jsonl", path=str(TINY_CODE), eval_fraction=1.0, test_slots=3, executor=executor, **options)


# What the fake model writes: right, wrong, partly right, a load error, a body that raises, no code at all.
ANSWERS = {
    "square": [
        "def square(x):\n    return x * x",
        "def square(x):\n    return x + x",
        "def square(x):\n    return x * x if x < 3 else 0",
        "import numpy_is_not_here\n\ndef square(x):\n    return x * x",
        "def square(x):\n    raise ValueError(x)",
    ],
    "shout": [
        "def shout(s):\n    return s.upper() + '!'",
        "def shout(s):\n    return s.upper()",
        "def shout(s):\n    return s + '!'",
    ],
}


def pseudo_model(messages, sample_index, seed):
    """A pick among ANSWERS by a hash of the whole prompt: a child's prompt carries its parent's score and test
    feedback, so any difference in one evaluation changes every later choice of the search."""
    text = messages[-1]["content"]
    key = zlib.crc32(repr((text, sample_index, seed)).encode())
    if key % 7 == 0:
        return "I am not sure how to do this."
    choices = ANSWERS["square" if "square" in text else "shout"]
    return f"```python\n{choices[key % len(choices)]}\n```"


def run_evolve(evolve: Evolve, task, tmp_path: Path, name: str, problems) -> dict:
    store = RunStore.create(tmp_path, name)
    metrics = evolve.search(FakeEngine(pseudo_model), task, problems, phase="pre", store=store)
    folder = store.dir / "evolve" / "pre"
    return {
        "metrics": metrics,
        "samples": [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()],
        "files": {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))},
    }


def counting(executor):
    """Wrap ``executor.map`` to count the items it was given (proof that the search went through it)."""
    mapped = []
    inner = executor.map

    def map_and_count(function, shared, items):
        items = list(items)
        mapped.extend(items)
        return inner(function, shared, items)

    executor.map = map_and_count
    return mapped


@needs_ray
def test_evolve_on_ray_workers_equals_the_local_pool(ray_cluster, tmp_path):
    """Ray is only a transport: evolve on the code task (programs run in the sandbox), the same seed, evaluations
    on Ray workers vs the local thread pool: identical metrics, samples and per-problem databases."""
    options = {"seeds": 3, "children": 2, "calls": 9, "seed": 0, "stop_on_success": False, "workers": 2}
    task = code_task()
    problems = task.problems("eval")
    local = run_evolve(Evolve(**options), task, tmp_path, "local", problems)
    on_ray = Evolve(**options, executor="ray")
    assert isinstance(on_ray.executor, RayExecutor)
    mapped = counting(on_ray.executor)
    ray_run = run_evolve(on_ray, code_task(), tmp_path, "ray", problems)

    assert len(mapped) == local["metrics"]["budget/candidates"] == 18  # every candidate was scored through Ray
    assert ray_run["metrics"] == local["metrics"]
    assert ray_run["samples"] == local["samples"]
    assert ray_run["files"] == local["files"] and len(local["files"]) == 3  # 2 problems' databases, the curve
    # The search really exercised the sandbox: passes, failures, a program that fails to load, one that raises.
    assert 0 < local["metrics"]["mean_reward/all_pass"] < 1
    feedback = [
        c["feedback"]
        for name, state in local["files"].items()
        if name != "curve.json"
        for c in state["db"]["candidates"]
    ]
    assert any("ModuleNotFoundError: No module named 'numpy_is_not_here'" in f for f in feedback)
    assert any("-> ValueError: 1" in f for f in feedback)


class RaisingScorer(FakeTask):
    def score(self, problem, completion) -> Score:
        if "7" in completion:
            raise RuntimeError("scorer bug")
        return super().score(problem, completion)


@needs_ray
def test_a_scorer_that_raises_on_a_worker_costs_one_candidate_as_locally(ray_cluster, tmp_path):
    task, problems = RaisingScorer(), RaisingScorer().problems("eval", limit=4)
    runs = []
    for executor in ("local", "ray"):
        store = RunStore.create(tmp_path, executor)
        runs.append(
            Evolve(seeds=2, calls=2, seed=0, executor=executor).search(
                FakeEngine(["7", "4"]), task, problems, phase="pre", store=store
            )
        )
    assert runs[0] == runs[1] and runs[1]["num_skipped"] == 4 and runs[1]["budget/candidates"] == 8


@needs_ray
def test_best_of_k_on_the_code_task_scores_on_ray_as_locally(ray_cluster, tmp_path):
    """best-of-k scores a batch's candidates through the task's score_many, so ``task.executor=ray`` sends the
    code task's sandbox runs to Ray workers: the same samples and metrics as the local threads."""
    from harness.searchers.best_of_k import BestOfK

    runs = []
    for executor in ("local", "ray"):
        task = code_task(executor)
        mapped = counting(task.executor)
        store = RunStore.create(tmp_path, executor)
        metrics = BestOfK(n=4, k="1,4", seed=0, embedding_diversity=False).search(
            FakeEngine(pseudo_model), task, task.problems("eval"), phase="eval", store=store
        )
        samples = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
        runs.append((metrics, samples, len(mapped)))
    assert runs[0][:2] == runs[1][:2]
    assert runs[1][2] == 8  # 2 problems x 4 candidates, all scored through the executor
    assert 0 < runs[1][0]["pass@4"] <= 1


NEVER_HALTS = "def square(x):\n    while True:\n        pass"


@needs_ray
def test_code_score_many_on_ray_equals_local(ray_cluster):
    # 5 s: enough for the right answers on a loaded machine; the program that never halts is stopped at it
    local, on_ray = code_task(timeout_s=5.0), code_task("ray", timeout_s=5.0)
    square, shout = sorted(local.problems("eval"), key=lambda p: p.meta["entry_point"], reverse=True)
    cases = [(square, f"```python\n{a}\n```") for a in [*ANSWERS["square"], NEVER_HALTS]]
    cases += [(shout, f"```python\n{a}\n```") for a in ANSWERS["shout"]] + [(shout, "no code")]
    problems, completions = [p for p, _ in cases], [c for _, c in cases]

    expected = local.score_many(problems, completions)
    assert on_ray.score_many(problems, completions) == expected
    assert [s.rewards["all_pass"] for s in expected] == [1, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    assert expected[5].rewards["pass_fraction"] == 0.0  # the program that never halts: stopped, every test failed
    assert local.check(square, completions[5]).result.status == "timeout"
    assert expected[-1].unparsed


class ExplodingCheck(CodeTask):
    def check(self, problem, completion):
        if "explode" in completion:
            raise RuntimeError("check exploded")
        return super().check(problem, completion)


@needs_ray
def test_an_exception_that_escapes_the_check_fails_score_many_on_both_backends(ray_cluster):
    """score_many never swallowed a raising check (CodeTask.check never raises on any completion); on Ray the
    caller gets the same exception class."""
    for executor in ("local", "ray"):
        task = ExplodingCheck(source="jsonl", path=str(TINY_CODE), eval_fraction=1.0, executor=executor)
        problem = task.problems("eval")[0]
        with pytest.raises(RuntimeError, match="check exploded"):
            task.score_many([problem, problem], ["```python\nx = 1\n```", "explode"])


WHERE_AM_I = """```python
import os, sys

def where():
    return os.getpid(), os.getppid(), sorted(m for m in ("ray", "harness", "tasks", "torch") if m in sys.modules)
```"""


def sandbox_witness(task: CodeTask, pair) -> tuple[int, list[int], list[bool]]:
    """Runs on a Ray worker: the worker's pid, the pid of the sandbox server it started, and which of the tests
    (what the program reports of its own process) passed."""
    from harness import sandbox

    result = task.check(*pair).result
    servers = [s.proc.pid for (owner, _), s in sandbox._servers.items() if owner == os.getpid() and s.proc]
    return os.getpid(), servers, list(result.passed)


@needs_ray
def test_the_program_runs_in_a_sandbox_process_not_in_the_ray_worker(ray_cluster, tmp_path):
    data = tmp_path / "where.jsonl"
    data.write_text(
        json.dumps(
            {
                "id": "where",
                "prompt": "Write where().",
                "entry_point": "where",
                # the tests run in the program's interpreter: what it sees of its own process
                "tests": ["assert where()[2] == []", "assert where()[0] == 1", "assert where()[1] == 0"],
            }
        )
        + "\n"
    )
    task = CodeTask(source="jsonl", path=str(data), eval_fraction=1.0)
    problem = task.problems("eval")[0]
    [(worker, servers, passed)] = RayExecutor("test").map(sandbox_witness, task, [(problem, WHERE_AM_I)])

    assert worker != os.getpid()  # a Ray worker process, not this one
    assert len(servers) == 1  # the worker started its own sandbox server, as the harness process does
    fresh, own_init, parent_hidden = passed
    assert fresh  # a fresh interpreter: neither Ray nor the harness is loaded where the program runs
    if os.geteuid() == 0:  # as root: the init of its own pid namespace (not the worker), its parent out of sight
        assert own_init and parent_hidden


def test_the_local_executor_keeps_input_order():
    def slow_for_small(shared, item):
        time.sleep(0.02 * (5 - item))  # later items finish first
        return shared + item

    assert LocalExecutor(workers=4).map(slow_for_small, 100, range(5)) == [100, 101, 102, 103, 104]
    assert LocalExecutor(workers=4).map(slow_for_small, 0, []) == []


@needs_ray
def test_the_ray_executor_keeps_input_order_and_reraises(ray_cluster):
    def slow_for_small(shared, item):
        if item == 99:
            raise KeyError("worker failure")
        time.sleep(0.05 * (4 - item))
        if item == 99:
            raise KeyError("worker failure")
        return shared + item

    executor = RayExecutor("test")
    assert executor.map(slow_for_small, 100, range(4)) == [100, 101, 102, 103]
    with pytest.raises(KeyError, match="worker failure"):
        executor.map(slow_for_small, 0, [1, 99])


def test_asking_for_ray_without_it_is_one_line_before_anything_loads(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError, as when not installed
    for build in (lambda: Evolve(executor="ray"), lambda: code_task("ray")):
        with pytest.raises(ValueError) as error:
            build()
        message = str(error.value)
        assert "\n" not in message and RAY_INSTALL_HINT in message and "executor 'ray'" in message
    with pytest.raises(ValueError, match="unknown executor 'dask'; available: local, ray"):
        Evolve(executor="dask")


def test_the_cli_refuses_a_missing_ray_before_the_model_loads(tmp_path):
    argv = [
        "run",
        "--task",
        "code",
        "--trainer",
        "none",
        "--searcher",
        "evolve",
        "--model",
        "tiny-random",
        "--out",
        str(tmp_path),
        "--set",
        "searcher.executor=ray",
    ]
    code = f"import sys\nsys.modules['ray'] = None\nfrom harness.cli import main\nsys.exit(main({argv!r}))\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("harness: error: evolve: executor 'ray' needs Ray") and RAY_INSTALL_HINT in last
    assert not any(tmp_path.iterdir())  # refused before a run folder was made (and before the model loaded)


def test_importing_the_harness_does_not_import_ray():
    code = (
        "import sys\nimport harness.executors, harness.searchers.evolve, harness.tasks.code\n"
        "from harness.cli import main\n"
        "try:\n    main(['list'])\nexcept SystemExit:\n    pass\nassert 'ray' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
