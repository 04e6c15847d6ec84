"""The mistakes a third-party plugin author makes, seen as a user sees them: through `harness run` and `harness
report` with the plugin installed (an entry point). Each is one line naming the plugin, before the model loads
where the mistake can be seen then; a run that fails says so in its manifest, and the report says why it skipped
it. A searcher's own metric reaches the report."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from tiny_runs import OWN_SIZES, tiny_argv

from harness.cli import main
from harness.hookspecs import hookimpl
from harness.plugins import manager
from harness.testing import FakeTask

RUN = tiny_argv("none", k=1, threads=None, sets=OWN_SIZES)  # no best-of-k sizes: majority takes neither


class Majority:
    """A searcher with a metric of its own: the share of problems whose most common extracted answer is right."""

    def __init__(self, seed: int = 0, k: str = "1", fail: bool = False) -> None:
        self.fail = fail

    def search(self, engine, task, problems, *, phase, store):
        from harness.types import SamplingParams

        completions = engine.generate([task.messages(p) for p in problems], SamplingParams(n=2, max_new_tokens=4))
        if self.fail:
            raise KeyError("votes")
        scores = [task.score(problems[c.prompt_index], c.text) for c in completions]
        store.write_samples(
            {
                "problem_id": problems[c.prompt_index].id,
                "phase": phase,
                "sample_index": c.sample_index,
                "text": c.text,
                "extracted": s.extracted,
                "unparsed": s.unparsed,
                "rewards": s.rewards,
                "scalar": s.rewards["correct"],
            }
            for c, s in zip(completions, scores, strict=True)
        )
        return {"majority@8": 0.5, "pass@1": sum(s.success for s in scores) / len(scores)}


class NoSource(FakeTask):
    name = "no-source"
    data_source = None  # the mistake: a task without data_source()


class Stumbles:
    """A trainer that fails halfway through its progress bar."""

    def __init__(self, seed: int = 0) -> None:
        pass

    def train(self, policy, engine, task, problems, *, store):
        from tqdm.auto import tqdm

        for step in tqdm(range(4), desc="stumbling"):
            if step == 2:
                raise ValueError("lost my footing")


def bad_estimator(rewards, groups, weights, **context):
    return [0.0] * len(groups)  # the mistake: a list, not a tensor


class Package:
    """One installed package holding every plugin of this file."""

    @hookimpl
    def harness_register_tasks(self, registry):
        registry.add("adds", FakeTask)
        registry.add("no-source", NoSource)

    @hookimpl
    def harness_register_searchers(self, registry):
        registry.add("majority", Majority, "majority vote")

    @hookimpl
    def harness_register_trainers(self, registry):
        registry.add("stumbles", Stumbles)

    @hookimpl
    def harness_register_advantage_estimators(self, registry):
        registry.add("listy", bad_estimator)


@pytest.fixture
def installed(monkeypatch):
    """Install ``Package`` (and any plugins given) as entry points of distribution 'my-dist'."""

    def install(*extra):
        eps = [
            SimpleNamespace(name=name, dist=SimpleNamespace(name="my-dist"), load=lambda p=plugin: p)
            for name, plugin in (("pkg", Package()), *extra)
        ]
        monkeypatch.setattr(manager, "entry_points", lambda group: eps if group == manager.ENTRY_POINT_GROUP else [])
        monkeypatch.delenv(manager.DISABLE_AUTOLOAD_ENV, raising=False)

    return install


def _error_lines(capsys) -> tuple[list[str], str]:
    out = capsys.readouterr()
    return [line for line in out.err.splitlines() if line.startswith("harness: error")], out.out


def test_a_task_without_data_source_is_refused_before_the_model_loads(installed, tmp_path, capsys):
    installed()
    assert main([*RUN, "--task", "no-source", "--searcher", "majority", "--out", str(tmp_path)]) == 2
    errors, stdout = _error_lines(capsys)
    assert errors == [
        "harness: error: task 'no-source' (plugin 'my-dist:pkg') does not follow the Task protocol: "
        "missing data_source()"
    ]
    assert "loading model" not in stdout and not any(tmp_path.iterdir())


def test_an_estimator_of_the_wrong_type_is_refused_before_the_model_loads(installed, tmp_path, capsys):
    installed()
    assert (
        main([*RUN, "--task", "adds", "--trainer", "grpo", "--set", "trainer.advantage=listy", "--out", str(tmp_path)])
        == 2
    )
    errors, stdout = _error_lines(capsys)
    assert errors == [
        "harness: error: advantage 'listy' (plugin 'my-dist:pkg') does not follow the advantage "
        "estimator contract: should return a tensor of advantages [B], got list [0.0, 0.0, 0.0, 0.0]"
    ]
    assert "loading model" not in stdout


def test_a_searcher_that_raises_fails_the_run_in_one_line_and_the_report_says_why(installed, tmp_path, capsys):
    installed()
    runs = tmp_path / "runs"
    assert (
        main([*RUN, "--task", "adds", "--searcher", "majority", "--set", "searcher.fail=true", "--out", str(runs)]) == 1
    )
    errors, _ = _error_lines(capsys)
    (folder,) = (p for p in runs.iterdir() if p.is_dir())
    line = "searcher 'majority' (plugin 'my-dist:pkg') failed while evaluating (eval): KeyError: 'votes'"
    assert errors == [f"harness: error: {line} (traceback in {folder / 'error.txt'})"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"].startswith(line)
    assert "raise KeyError" in (folder / "error.txt").read_text()  # the traceback is kept, not printed

    assert main(["report", str(runs), "--out", str(tmp_path / "report")]) == 2  # nothing left to report on
    out = capsys.readouterr()
    assert f"skipped {folder}: status 'failed': {line}" in out.out
    assert out.err.splitlines() == ["harness: error: none of the 1 run folders is complete with evaluation metrics"]


def test_a_searcher_s_own_metric_reaches_the_html_report(installed, tmp_path, capsys):
    installed()
    runs = tmp_path / "runs"
    assert main([*RUN, "--task", "adds", "--searcher", "majority", "--out", str(runs)]) == 0
    assert main(["report", str(runs), "--out", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "index.html").read_text()
    assert "majority@8" in html and "0.5" in html


def test_a_clashing_or_misspelt_package_is_skipped_and_runs_go_on(installed, tmp_path, capsys):
    class Clash:
        @hookimpl
        def harness_register_tasks(self, registry):
            registry.add("math", FakeTask)  # a built-in's name cannot be taken over

    class Typo:
        @hookimpl
        def harness_register_task(self, registry):  # misspelt hook name
            pass

    installed(("clash", Clash()), ("typo", Typo()))
    assert main([*RUN, "--task", "adds", "--searcher", "majority", "--out", str(tmp_path)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: plugin")]
    assert len(warnings) == 2
    assert any("'my-dist:clash'" in w and "'math'" in w for w in warnings)
    assert any("'my-dist:typo'" in w and "harness_register_task" in w for w in warnings)


def test_a_trainer_failing_under_its_progress_bar_gets_a_line_of_its_own(installed, tmp_path, capsys):
    installed()
    assert (
        main([*RUN, "--task", "adds", "--searcher", "majority", "--trainer", "stumbles", "--out", str(tmp_path)]) == 1
    )
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "harness: error" in line]
    assert line.startswith(
        "harness: error: trainer 'stumbles' (plugin 'my-dist:pkg') failed while training: ValueError: lost my footing"
    ), err  # not glued behind the bar's last frame


def test_debug_raises_the_plugin_s_error_with_its_traceback(installed, tmp_path):
    from harness.runner.phases import PluginFailed

    installed()
    with pytest.raises(PluginFailed) as err:
        main(
            [
                *RUN,
                "--task",
                "adds",
                "--searcher",
                "majority",
                "--set",
                "searcher.fail=true",
                "--out",
                str(tmp_path),
                "--debug",
            ]
        )
    assert isinstance(err.value.__cause__, KeyError)  # the plugin's own exception, with its traceback
