"""`harness run` end to end on the tiny model: the run folder a user (and the report) will read."""

from __future__ import annotations

import json

import pytest
from tiny_runs import tiny_config

from harness.hookspecs import hookimpl
from harness.report.summary import summary_table
from harness.run import RunConfig, run


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_writes_a_complete_folder(tmp_path, plugins, tiny_policy_spec):
    sets = {
        "trainer.group_size": 4,
        "trainer.prompts_per_step": None,  # the preset's
        "trainer.max_new_tokens": 8,
        "searcher.max_new_tokens": 8,
    }
    cfg = tiny_config(steps=2, limit=3, train_limit=8, out=str(tmp_path), sets=sets)
    lines = []
    folder = run(cfg, plugins=plugins, echo=lines.append)

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["seed"] == 0 and manifest["config"]["model"] == "tiny-random"
    assert manifest["model"]["source"] == tiny_policy_spec and manifest["model"]["parameters"] > 0
    assert manifest["task"]["version"] and manifest["task"]["data_source"]["source"] == "gym-arithmetic"
    assert manifest["packages"]["torch"] and manifest["packages"]["transformers"]
    assert manifest["plugins"]["trainer"] == {"name": "grpo", "plugin": "builtin:harness.trainers"}
    assert manifest["resolved_options"]["trainer"]["steps"] == 2  # --steps beat the preset's 10

    metrics = json.loads((folder / "metrics.json").read_text())
    for phase in ("before", "after"):
        for key in ("pass@1", "pass@2", "best@1", "best@2", "unparsed_rate", "num_candidates"):
            assert f"{phase}/{key}" in metrics
        assert metrics[f"{phase}/num_candidates"] == 3 * 2
    assert len(metrics["train/reward_mean"]) == 2

    samples = _read_jsonl(folder / "samples.jsonl")
    by_phase = {p: [s for s in samples if s["phase"] == p] for p in ("before", "train", "after")}
    assert len(by_phase["before"]) == len(by_phase["after"]) == 6
    assert len(by_phase["train"]) == 2 * 2 * 4  # steps x prompts_per_step (preset) x group_size
    first = by_phase["before"][0]
    assert {"problem_id", "text", "extracted", "unparsed", "rewards", "scalar"} <= set(first)
    assert list(first["rewards"]) == ["correct", "boxed", "strict", "length", "lenient_correct"]
    assert first["reference"] is not None and first["prompt"]  # a row can be judged on its own
    assert len(_read_jsonl(folder / "steps.jsonl")) == 2
    assert any("pass@1" in line for line in lines)  # the summary table was printed


def test_a_behaviour_trainer_is_evaluated_on_its_behaviour(tmp_path, plugins, tiny_policy_spec):
    """RLAIF (quick preset: behaviour=conciseness) -> the searcher scores conciseness before and after, unasked."""
    folder = run(
        tiny_config("rlaif", k=1, out=str(tmp_path), sets={"searcher.n": 1}),
        plugins=plugins,
        echo=lambda _: None,
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["resolved_options"]["searcher"]["behaviours"] == "conciseness"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert 0 <= metrics["before/behaviour/conciseness"] <= 1 and 0 <= metrics["after/behaviour/conciseness"] <= 1
    # beside the training scorer, its held-out evaluator (tasks/held_out.py), which RLAIF never saw either
    assert 0 <= metrics["before/heldout/conciseness"] <= 1 and 0 <= metrics["after/heldout/conciseness"] <= 1
    assert metrics["rlaif/teacher_calls"] == 2


def test_a_vpo_run_says_its_warm_up_budget_first_and_records_the_warm_up(tmp_path, plugins, tiny_policy_spec):
    """`--steps 2` bounds RL, not the warm-up: the budget line before the model loads says both; metrics.json holds
    the warm-up's figures (warmup/*) and the summary prints them in one line."""
    folder = run(
        tiny_config(
            "vpo",
            steps=2,
            train_limit=8,
            k=4,
            out=str(tmp_path),
            sets={
                "trainer.group_size": None,  # VPO's own
                "trainer.warmup_steps": "2",
                "trainer.warmup_check_every": "1",
                "trainer.warmup_problems": "2",
                "trainer.warmup_check_problems": "2",
                "trainer.max_new_tokens": "16",
                "trainer.prompts_per_step": "1",
                "searcher.n": 4,
                "searcher.max_new_tokens": "16",
            },
        ),
        plugins=plugins,
        echo=(lines := []).append,
    )
    budget = next(i for i, line in enumerate(lines) if line.startswith("training budget:"))
    assert lines[budget] == (
        "training budget: a format warm-up of at most 2 SFT steps (it stops once 60% of "
        "checked rollouts are well formed), then 2 vpo steps"
    )
    assert budget < next(i for i, line in enumerate(lines) if line.startswith("loading model"))
    metrics = json.loads((folder / "metrics.json").read_text())
    # tiny-random's warm-up targets are random text in which the task reads no answer, so SFT on them cannot reach
    # the target rate: the warm-up checks that first and takes no step (trainers/format_warmup.py)
    assert metrics["warmup/targets"] > 0 and metrics["warmup/targets_well_formed"] == 0
    assert metrics["warmup/steps"] == 0 and metrics["warmup/seconds"] > 0
    assert 0 <= metrics["warmup/well_formed_before"] <= 1 and 0 <= metrics["warmup/well_formed_after"] <= 1
    assert any(
        line.startswith("format warm-up: ") and "SFT steps" in line for text in lines for line in str(text).splitlines()
    )


def test_trainer_none_only_evaluates(tmp_path, plugins, tiny_policy_spec):
    folder = run(
        tiny_config("none", k=1, out=str(tmp_path), sets={"searcher.n": 1}),
        plugins=plugins,
        echo=lambda _: None,
    )
    metrics = json.loads((folder / "metrics.json").read_text())
    assert "eval/pass@1" in metrics and not any(k.startswith(("before/", "train/")) for k in metrics)
    assert not (folder / "steps.jsonl").exists()


def test_evolve_searcher_through_run(tmp_path, plugins, tiny_policy_spec):
    """--searcher evolve with its quick preset (cut down): the phase's metrics, curve and checkpoints land in the
    run folder, and every candidate is a sample."""
    folder = run(
        tiny_config(
            "none",
            searcher="evolve",
            k=None,  # the preset's
            out=str(tmp_path),
            sets={"searcher.calls": 6, "searcher.seeds": 2, "searcher.children": 2, "searcher.max_new_tokens": 6},
        ),
        plugins=plugins,
        echo=lambda _: None,
    )
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["eval/budget/calls"] == 12 or metrics["eval/success_rate"] > 0  # a solved problem stops early
    assert {"eval/solved@1", "eval/solved@16", "eval/best_fitness"} <= set(metrics)  # quick preset's k
    samples = _read_jsonl(folder / "samples.jsonl")
    assert len(samples) == metrics["eval/budget/candidates"] - metrics["eval/num_skipped"]
    assert len(list((folder / "evolve" / "eval").glob("*.json"))) == 3  # two problems and the curve


def test_k_larger_than_n_is_refused_before_loading(tmp_path, plugins):
    with pytest.raises(ValueError, match="k"):
        run(RunConfig(model="does-not-exist", k="1,64", out=str(tmp_path)), plugins=plugins, echo=lambda _: None)
    assert not any(tmp_path.iterdir())


def test_summary_table_hand_made():
    table = summary_table(
        {
            "before/pass@1": 0.25,
            "after/pass@1": 0.5,
            "before/pass@16": 0.5,
            "after/pass@16": 1.0,
            "train/reward_mean": [0.1, 0.2, 0.4],
        }
    )
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "before", "after", "change"]
    assert lines[2].split() == ["pass@1", "0.250", "0.500", "+0.250"]
    assert lines[3].split() == ["pass@16", "0.500", "1.000", "+0.500"]
    assert any(line.split() == ["reward_mean", "0.100", "0.400", "3"] for line in lines)


def test_every_trainer_and_searcher_builds_with_each_preset(plugins):
    from harness.runner.plan import build_plugins

    for preset in ("quick", "full"):
        for trainer in plugins["trainer"].names():
            for searcher in plugins["searcher"].names():
                assert plugins["trainer"].get(trainer).presets.get(preset), (trainer, preset)
                assert plugins["searcher"].get(searcher).presets.get(preset), (searcher, preset)
                cfg = RunConfig(trainer=trainer, searcher=searcher, preset=preset)
                build_plugins(cfg, plugins)  # every built-in searcher takes VPO's M answers per rollout


def test_the_quick_preset_caps_a_multi_answer_rollout_and_leaves_one_answer_rollouts_alone(plugins):
    """Code's 384 tokens per answer make VPO's 4-answer rollout 1,584 tokens (4 x 384 + 3 delimiters x 16): quick caps
    it at 512 for the trainer and the searchers that evaluate it alike; GRPO keeps code's 384, full keeps 1,584,
    and --set overrides the cap."""
    from harness.runner.plan import build_plugins

    def budgets(**cfg):
        _, trainer, searcher, _ = build_plugins(RunConfig(task="code", **cfg), plugins)
        return trainer.config.max_new_tokens, searcher.max_new_tokens

    assert budgets(trainer="vpo") == (512, 512)
    assert budgets(trainer="vpo", preset="full") == (1584, 1584)
    assert budgets(trainer="grpo") == (384, 384)
    given = {"task": {}, "trainer": {"max_new_tokens": "900"}, "searcher": {}}
    assert budgets(trainer="vpo", options=given)[0] == 900


class OneAnswerSearcher:
    """A searcher that does not declare ``answers_per_rollout``: it can only read one answer per rollout."""

    def __init__(self, seed: int = 0, k: str = "") -> None:
        pass

    def search(self, engine, task, problems, *, phase, store):
        return {}


class _OneAnswerPlugin:
    @hookimpl
    def harness_register_searchers(self, registry):
        registry.add("one-answer", OneAnswerSearcher, "reads one answer per rollout")


def test_a_searcher_that_cannot_read_m_answers_is_refused_before_the_model_loads():
    from harness.plugins import get_plugin_manager
    from harness.runner.plan import build_plugins

    plugins = get_plugin_manager(extra_plugins=(_OneAnswerPlugin(),), autoload=False)
    build_plugins(RunConfig(trainer="grpo", searcher="one-answer"), plugins)
    with pytest.raises(
        ValueError, match="searcher 'one-answer' cannot evaluate a policy that writes 4 answers per rollout"
    ):
        build_plugins(RunConfig(trainer="vpo", searcher="one-answer"), plugins)


def test_a_trainer_targeting_robustness_gets_hinted_problems(plugins):
    from harness.runner.plan import build_plugins

    shaped = {"trainer": {"behaviour": "robustness", "behaviour_weight": 0.5}}
    task, _, _, options = build_plugins(RunConfig(options={"task": {}, **shaped, "searcher": {}}), plugins)
    assert options["task"]["misleading_hint"] is True and options["searcher"]["behaviours"] == "robustness"
    assert all(p.id.endswith("+hint") and p.meta["misleading_hint"] for p in task.problems("eval", limit=3))
    with pytest.raises(ValueError, match="behaviour 'robustness' needs problems with a misleading hint"):
        build_plugins(RunConfig(task="maze", options={"task": {}, **shaped, "searcher": {}}), plugins)
