"""Experiment files: arms (named methods with their own options) and sizes (cpu, gpu) in an experiment file, and
the files under experiments/, each checked cell by cell without a model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.report import compare
from harness.report.build import build_report
from harness.report.data import leaderboard
from harness.runner.config import RunConfig
from harness.runner.experiment_file import load_experiment
from harness.runner.grid import cells_for, check_cell, name_cells, run_grid
from harness.runner.plan import build_plugins
from harness.runner.run_settings import expand
from harness.store.results_db import connect, find_runs, rebuild

DEMO = Path(__file__).resolve().parent.parent / "experiments" / "demo.toml"  # `make demo`: one run, not a claim
EXPERIMENTS = sorted(p for p in DEMO.parent.glob("*.toml") if p != DEMO)
NO_SET = {"task": {}, "trainer": {}, "searcher": {}}  # `--set` given nothing
# Cells the runner refuses today, with the reason; when one starts to pass, drop it here and in its file's STATUS.
KNOWN_REFUSALS: dict[tuple[str, str], str] = {}

TWO_ARMS = """
model = "tiny-random"
task = "math"
seed = [0, 1]
steps = 2
limit = 2
k = "1,2"
[set.trainer]
prompts_per_step = 1
[set.searcher]
n = 2
max_new_tokens = 4

[size.cpu]
train_limit = 2
[size.gpu]
steps = 200
model = "big"

[[arm]]
name = "grpo"
trainer = "grpo"
[arm.set.trainer]
group_size = 2
max_new_tokens = 4

[[arm]]
name = "grpo-random-weights"
trainer = "grpo"
steps = 3
[arm.set.trainer]
group_size = 2
max_new_tokens = 4
advantage = "random_weights"
[arm.size.gpu]
steps = 300
[arm.size.gpu.set.trainer]
group_size = 16
"""


def _write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------------------------------------------
# The files under experiments/
# ----------------------------------------------------------------------------------------------------------------


def test_there_is_a_file_per_claim():
    assert {p.name for p in EXPERIMENTS} >= {
        "vpo_vs_grpo.toml",
        "vpo_seeds_evolve.toml",
        "vspo_expertise.toml",
        "vspo_robustness.toml",
        "pkpo_vs_grpo.toml",
    }


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_each_file_states_its_claim_and_runs_in_two_sizes(path):
    header = path.read_text()
    for part in (
        "Claim:",
        "Paper:",
        "Expected signature:",
        "CPU size",
        "GPU size",
        f"harness run --config experiments/{path.name}",
        "harness report",
    ):
        assert part in header, f"{path.name}: no {part!r} in its header"
    cpu, gpu = load_experiment(path), load_experiment(path, size="gpu")
    assert cpu["size"] == "cpu" and cpu["model"] == "smollm2-135m"
    assert gpu["model"].startswith("Qwen/")
    assert cpu["out"] != gpu["out"]  # a report over one size's folder never mixes in the other's runs
    assert len(cpu["arms"]) >= 2 and cpu["seed"] == [0, 1, 2]


@pytest.mark.parametrize("size", ["cpu", "gpu"])
@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_every_cell_of_every_file_builds(path, size, plugins):
    """Every cell's task, trainer and searcher are built with the file's options (no model, no data), so every
    option written in the file is one its plugin takes."""
    cells = cells_for(load_experiment(path, size=size), {}, NO_SET)
    assert len({c.name for c in cells}) == len(cells)
    for cfg in cells:
        refusal = KNOWN_REFUSALS.get((path.name, cfg.arm))
        if refusal:
            with pytest.raises(ValueError, match=refusal):
                check_cell(cfg, plugins)
            continue
        check_cell(cfg, plugins)
        build_plugins(cfg, plugins, with_task=True)  # the task's options too (check_cell resolves only its name)


@pytest.mark.parametrize("size", ["cpu", "gpu"])
def test_evolve_evaluates_vpos_policy_in_its_format(size, plugins):
    """The vpo arm of vpo_seeds_evolve.toml (refused until evolve declared answers_per_rollout): evolve gets the
    trainer's M = 4, a seed rollout's budget of 4 answers plus delimiters, and one answer's budget per child."""
    path = DEMO.parent / "vpo_seeds_evolve.toml"
    for cfg in cells_for(load_experiment(path, size=size), {"seed": "0"}, NO_SET):
        _, _, searcher, options = build_plugins(cfg, plugins, with_task=True)
        per_answer = 96 if size == "cpu" else 384  # the task's budget (math, code)
        m = 4 if cfg.arm == "vpo" else 1
        assert (searcher.m, options["searcher"].get("answers_per_rollout", 1)) == (m, m)
        assert searcher.max_new_tokens == per_answer * m + 16 * (m - 1)
        assert searcher.child_max_new_tokens == per_answer


def test_the_smoke_flags_override_every_arm(plugins):
    """`--model tiny-random --limit 2 --train-limit 4 --steps 1 --seed 0` reach every cell, arms' own steps too."""
    given = {"model": "tiny-random", "limit": 2, "train_limit": 4, "steps": 1, "seed": "0", "out": "/tmp/x"}
    for path in EXPERIMENTS:
        for cfg in cells_for(load_experiment(path), given, NO_SET):
            assert (cfg.model, cfg.limit, cfg.train_limit, cfg.steps, cfg.seed) == ("tiny-random", 2, 4, 1, 0)


# ----------------------------------------------------------------------------------------------------------------
# Arms and sizes
# ----------------------------------------------------------------------------------------------------------------


def test_arms_are_cells_of_their_own_with_their_options(tmp_path):
    cells = cells_for(load_experiment(_write(tmp_path, TWO_ARMS)), {}, NO_SET)
    assert [(c.arm, c.trainer, c.seed) for c in cells] == [
        ("grpo", "grpo", 0),
        ("grpo", "grpo", 1),
        ("grpo-random-weights", "grpo", 0),
        ("grpo-random-weights", "grpo", 1),
    ]
    assert len({c.name for c in cells}) == 4
    assert cells[0].name.startswith("math-grpo-best-of-k-seed0-")
    assert cells[2].name.startswith("math-grpo-random-weights-best-of-k-seed0-")
    plain, ablation = cells[0], cells[2]
    assert plain.options["trainer"] == {"prompts_per_step": 1, "group_size": 2, "max_new_tokens": 4}
    assert ablation.options["trainer"]["advantage"] == "random_weights"
    assert ablation.options["searcher"] == plain.options["searcher"] == {"n": 2, "max_new_tokens": 4}
    assert (plain.steps, ablation.steps, plain.train_limit) == (2, 3, 2)
    # The arm's name is part of the cell's identity: equal settings under two names are two cells.
    from dataclasses import replace

    from harness.runner.grid import cell_name

    assert cell_name(replace(plain, arm="other")) != cell_name(plain)


def test_a_command_line_option_names_the_same_cell_as_the_files_value(tmp_path):
    """--set gives strings ("3e-5"), a file gives numbers (3e-5): one setting, one cell folder, so a grid rerun
    with the setting on the command line skips the cells the file already finished."""
    path = tmp_path / "exp.toml"
    path.write_text('[set.trainer]\nlr = 3e-5\ngroup_size = 16\nscale_rewards = false\n[set.task]\nsource = "champ"\n')
    (from_file,) = cells_for(load_experiment(path), {}, NO_SET)
    given = {
        "task": {"source": "champ"},
        "trainer": {"lr": "3e-5", "group_size": "16", "scale_rewards": "false"},
        "searcher": {},
    }
    (from_cli,) = cells_for({"options": {}}, {}, given)
    assert from_cli.name == from_file.name
    other = {**given, "trainer": {**given["trainer"], "lr": "3e-4"}}
    assert cells_for({"options": {}}, {}, other)[0].name != from_file.name


def test_options_are_layered_shared_size_arm_arm_size_command_line(tmp_path):
    path = _write(tmp_path, TWO_ARMS)
    gpu = cells_for(load_experiment(path, size="gpu"), {}, NO_SET)
    plain, ablation = gpu[0], gpu[2]
    assert (plain.model, plain.steps, ablation.steps) == ("big", 200, 300)  # size < arm < arm's size
    assert (plain.options["trainer"]["group_size"], ablation.options["trainer"]["group_size"]) == (2, 16)
    cli = {"task": {}, "trainer": {"group_size": "4"}, "searcher": {"n": "8"}}
    flags = {"steps": 1, "seed": "5", "searcher": "best-of-k"}
    for cfg in cells_for(load_experiment(path, size="gpu"), flags, cli):  # the command line wins over all of it
        assert (cfg.steps, cfg.seed, cfg.options["trainer"]["group_size"], cfg.options["searcher"]["n"]) == (
            1,
            5,
            "4",
            "8",
        )


def test_a_file_without_arms_gives_the_cells_it_gave_before(tmp_path):
    """Names pinned from the code before arms existed: rerunning an old grid still finds its finished cells."""
    path = _write(
        tmp_path,
        'model = "tiny-random"\ntrainer = ["none", "grpo"]\nseed = [0, 1]\nsteps = 1\n'
        'limit = 2\nk = "1,2"\n[set.trainer]\ngroup_size = 2\n[set.searcher]\nn = 2\n',
    )
    cells = cells_for(load_experiment(path), {}, NO_SET)
    assert [c.name for c in cells] == [
        "math-none-best-of-k-seed0-2d7833e4",
        "math-none-best-of-k-seed1-90450903",
        "math-grpo-best-of-k-seed0-6da28b55",
        "math-grpo-best-of-k-seed1-c07ae495",
    ]
    assert all(c.arm == "" for c in cells)
    base = RunConfig(
        model="tiny-random",
        steps=1,
        limit=2,
        k="1,2",
        options={"task": {}, "trainer": {"group_size": 2}, "searcher": {"n": 2}},
    )
    assert cells == name_cells(expand(base, {"trainer": ["none", "grpo"], "seed": [0, 1]}))


@pytest.mark.parametrize(
    "text, message",
    [
        ('[[arm]]\ntrainer = "grpo"\n', "arm 1: 'name' must be"),
        ('[[arm]]\nname = "a b"\ntrainer = "grpo"\n', r"arm 1 \(a b\): 'name' must be"),
        ('[[arm]]\nname = "a"\n', r"arm 1 \(a\): 'trainer' must name a trainer"),
        ('[[arm]]\nname = "a"\ntrainer = "grpo"\nlr = 1\n', r"arm 1 \(a\): unknown key\(s\) lr"),
        ('[[arm]]\nname = "a"\ntrainer = "grpo"\n[arm.set.optimizer]\nlr = 1\n', "'set' must hold"),
        ('[[arm]]\nname = "a"\ntrainer = "grpo"\n[[arm]]\nname = "a"\ntrainer = "vpo"\n', "arm name.s. a used twice"),
        ('trainer = "grpo"\n[[arm]]\nname = "a"\ntrainer = "vpo"\n', "remove the shared 'trainer'"),
        ('arm = "grpo"\n', "'arm' must be"),
        ('[size.cpu]\n[[arm]]\nname = "a"\ntrainer = "grpo"\n[arm.size.gpu]\nsteps = 2\n', "size.s. gpu not among"),
        ('[size.cpu]\n[[arm]]\nname = "a"\ntrainer = "grpo"\n[arm.size.cpu]\nmodel = "x"\n', r"unknown key\(s\) model"),
        ('[[arm]]\nname = "a"\ntrainer = "grpo"\nsteps = "many"\n', "steps should be an integer"),
        ("[size.cpu]\nlimt = 3\n", r"\[size.cpu\]: unknown setting\(s\) limt"),
    ],
)
def test_a_bad_arm_or_size_is_one_line_naming_the_file(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as error:
        load_experiment(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_sizes_are_chosen_and_checked(tmp_path):
    path = _write(tmp_path, TWO_ARMS)
    assert load_experiment(path)["size"] == "cpu" and load_experiment(path, "gpu")["model"] == "big"
    with pytest.raises(ValueError, match="no size 'tpu'; sizes: cpu, gpu"):
        load_experiment(path, "tpu")
    with pytest.raises(ValueError, match=r"has no \[size"):
        load_experiment(_write(tmp_path, 'trainer = "grpo"\n', "plain.toml"), "gpu")


def test_cli_arm_and_size_flags(tmp_path, capsys, monkeypatch):
    path = _write(tmp_path, TWO_ARMS)
    ran = []
    monkeypatch.setattr("harness.runner.grid.run_grid", lambda cells: ran.append(cells))
    assert main(["run", "--config", str(path), "--arm", "grpo-random-weights", "--size", "gpu", "--seed", "0"]) == 0
    assert [(c.arm, c.seed, c.model) for c in ran[0]] == [("grpo-random-weights", 0, "big")]
    assert "grid: 1 cells" in capsys.readouterr().out
    for argv, message in (
        (["--arm", "nope"], "--arm nope: no such arm; arms: grpo, grpo-random-weights"),
        (["--trainer", "vpo"], "--trainer: the experiment file's arms name their trainers"),
    ):
        assert main(["run", "--config", str(path), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert main(["run", "--arm", "grpo", "--model", "tiny-random"]) == 2
    assert "give it with --config FILE" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------------
# End to end on the tiny model: two arms of one trainer run, and the report pairs them as two methods
# ----------------------------------------------------------------------------------------------------------------


def test_two_arms_run_and_the_report_pairs_them(tmp_path, plugins, tiny_policy_spec):
    path = _write(tmp_path, TWO_ARMS)
    given = {"seed": "0", "steps": 1, "out": str(tmp_path / "runs")}  # as `harness run --seed 0 --steps 1 --out`
    cells = cells_for(load_experiment(path), given, NO_SET)
    folders = run_grid(cells, plugins=plugins, echo=lambda _: None)
    assert [json.loads((f / "manifest.json").read_text())["config"]["arm"] for f in folders] == [
        "grpo",
        "grpo-random-weights",
    ]

    db = tmp_path / "results.sqlite"
    rebuild(db, find_runs([tmp_path / "runs"]))
    rows = leaderboard(connect(db))
    (pair,) = compare.method_differences(rows)
    assert (pair.a, pair.b, pair.seed, pair.problems) == ("grpo", "grpo-random-weights", 0, 2)
    assert {d.a for d in compare.after_minus_before(rows)} == {"grpo after", "grpo-random-weights after"}
    (solved,) = compare.solved_only_by(rows)
    assert set(solved.methods) == {"base model", "grpo", "grpo-random-weights"}
    build_report([tmp_path / "runs"], tmp_path / "report", echo=lambda _: None)
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "grpo-random-weights (grpo)" in markdown


def test_the_demo_file_builds_one_run_of_the_demo(plugins):
    (cfg,) = cells_for(load_experiment(DEMO), {}, NO_SET)
    assert (cfg.task, cfg.trainer, cfg.searcher, cfg.seed, cfg.steps, cfg.threads) == (
        "math",
        "grpo",
        "best-of-k",
        0,
        20,
        1,
    )
    check_cell(cfg, plugins)
    task, trainer, _ = build_plugins(cfg, plugins, with_task=True)[:3]
    # the format pays only on a right answer (strict), so a wrong boxed answer earns nothing for its box
    assert task.reward_weights == {"correct": 1.0, "boxed": 0.0, "strict": 1.0, "length": 0.25, "lenient_correct": 0.0}
    assert cfg.limit == 48
    assert trainer.config.temperature == 0.7 and trainer.config.lr == 3e-5
    # the format is taught before RL: SFT on the policy's own answers in the worked form, until 90% are boxed
    assert (trainer.config.warmup_steps, trainer.config.warmup_format, trainer.config.warmup_lr) == (48, "boxed", 3e-5)
    problem = task.problems("train", limit=1)[0]
    assert (
        task.reference_completion(problem) == f"{problem.meta['expression']} = {problem.answer}, so the result "
        f"is \\boxed{{{problem.answer}}}"
    )


def test_steered_rollouts_groups_a_vspo_run_s_training_rollouts_by_strength(tmp_path, capsys):
    import runpy

    script = runpy.run_path(str(DEMO.parent / "steered_rollouts.py"))
    run = tmp_path / "math-vspo-best-of-k-seed0-abc"
    run.mkdir()
    rollouts = [
        (-0.1, "ab", 0.0, 0.5),
        (-0.05, "abcd", 1.0, 1.0),
        (0.0, "abcdef", 0.0, 0.0),
        (0.2, "abcdefgh", 0.0, 0.0),
    ]
    rows = [{"phase": "before", "text": "not counted", "rewards": {"correct": 1.0}}]
    rows += [
        {
            "phase": "train",
            "step": 0,
            "text": text,
            "rewards": {"correct": correct, "steering/beta": beta, "behaviour/robustness": robust},
        }
        for beta, text, correct, robust in rollouts
    ]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert script["main"]([str(run), str(tmp_path / "missing")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "math-vspo-best-of-k-seed0-abc: 4 training rollouts",
        "  beta < 0:   2 rollouts  chars 3  correct 0.500  behaviour/robustness 0.750",
        "  beta = 0:   1 rollouts  chars 6  correct 0.000  behaviour/robustness 0.000",
        "  beta > 0:   1 rollouts  chars 8  correct 0.000  behaviour/robustness 0.000",
    ]
    assert "missing: no samples.jsonl" in err


@pytest.mark.parametrize("size", ["cpu", "gpu"])
def test_every_arm_of_vpo_vs_grpo_gets_the_identical_warm_up(size, plugins):
    """The fairness the file promises: every arm's trainer, on each task, is built with the same warm-up options
    (targets, selection, rate, steps budget, rounds, learning rate), and the VPO arms pursue the task's weights."""
    from dataclasses import asdict

    cells = cells_for(load_experiment(DEMO.parent / "vpo_vs_grpo.toml", size=size), {"seed": "0"}, NO_SET)
    by_task: dict[str, dict[str, dict]] = {}
    for cfg in cells:
        _, trainer, _, _ = build_plugins(cfg, plugins, with_task=True)
        options = asdict(trainer.config)
        by_task.setdefault(cfg.task, {})[cfg.arm] = {
            k: v for k, v in options.items() if k.startswith("warmup_") and k != "warmup_ratio"
        }  # lr schedule
        assert options["trade_off_weights"] == "task"
    assert set(by_task) == {"maze", "code"}
    for task, arms in by_task.items():
        assert set(arms) == {"grpo", "grpo-pkpo", "vpo", "vpo-multi-rlvr", "grpo-random-weights"}
        first = arms["vpo"]
        assert first["warmup_steps"] > 0 and first["warmup_selection"] == "sampled"
        assert all(a == first for a in arms.values()), (task, arms)


@pytest.mark.parametrize("size", ["cpu", "gpu"])
def test_every_arm_of_vpo_vs_grpo_gets_equal_tokens_per_candidate_and_per_step(size, plugins):
    """The file's "Fair budget": built as the runner builds each cell (its options layered by harness/runner/plan.py),
    every arm's candidate has the same token cap T on a task, in training and at evaluation; a VPO rollout is M
    candidates, M x T plus the delimiter lines; and the candidate tokens sampled per step and per problem match."""
    from harness.scoring.multi_answer import DELIMITER_TOKENS, answer_budget, rollout_budget

    header = (DEMO.parent / "vpo_vs_grpo.toml").read_text()
    cells = cells_for(load_experiment(DEMO.parent / "vpo_vs_grpo.toml", size=size), {"seed": "0"}, NO_SET)
    budgets: dict[str, dict[str, dict]] = {}
    for cfg in cells:
        _, trainer, searcher, _ = build_plugins(cfg, plugins, with_task=True)
        t, m = trainer.config, trainer.config.answers_per_rollout
        assert searcher.m == m  # evaluated in the format it was trained in
        per_candidate = answer_budget(t.max_new_tokens, m)
        # the rollout budget is exactly M candidates' plus the delimiters: nothing of a candidate's cap is lost
        assert t.max_new_tokens == rollout_budget(per_candidate, m), (cfg.task, cfg.arm)
        assert searcher.max_new_tokens == t.max_new_tokens, (cfg.task, cfg.arm)  # the same rollouts at evaluation
        budgets.setdefault(cfg.task, {})[cfg.arm] = {
            "T": per_candidate,
            "candidates per prompt": t.group_size * m,
            "candidate tokens per step": t.prompts_per_step * t.group_size * m * per_candidate,
            "delimiter tokens per step": t.prompts_per_step * t.group_size * DELIMITER_TOKENS * (m - 1),
            "sampled tokens per step": t.prompts_per_step * t.group_size * t.max_new_tokens,
            "candidates per problem": searcher.rollouts * m,
            "candidate tokens per problem": searcher.rollouts * m * answer_budget(searcher.max_new_tokens, m),
        }
    expected_t = {"cpu": {"maze": 160, "code": 160}, "gpu": {"maze": 160, "code": 384}}[size]
    for task, arms in budgets.items():
        assert set(arms) == {"grpo", "grpo-pkpo", "vpo", "vpo-multi-rlvr", "grpo-random-weights"}
        assert {a["T"] for a in arms.values()} == {expected_t[task]}, (task, arms)
        for figure in ("candidates per prompt", "candidate tokens per step", "candidates per problem"):
            assert len({a[figure] for a in arms.values()}) == 1, (task, figure, arms)
        assert len({a["candidate tokens per problem"] for a in arms.values()}) == 1, (task, arms)
        for arm in arms.values():  # what a step may sample beyond the candidates: VPO's delimiter lines, no more
            assert arm["sampled tokens per step"] == arm["candidate tokens per step"] + arm["delimiter tokens per step"]
        grpo, vpo = arms["grpo"], arms["vpo"]
        # the arithmetic the header states
        assert f"{grpo['sampled tokens per step']:,} vs {vpo['sampled tokens per step']:,}" in header, (task, size)


@pytest.mark.parametrize("name", ["vspo_expertise.toml", "vspo_robustness.toml"])
def test_vspo_files_run_the_method_s_reward_and_arms_that_differ_only_where_they_say(name, plugins):
    """Each VSPO file has an arm on VSPO's own reward (r0 + alpha x beta); every RL arm shares VSPO's loss
    normalisation and alpha, so vspo-behaviour - grpo-shaped isolates steering; the header's table names every arm."""
    path = DEMO.parent / name
    header = path.read_text().split("\ntask = ")[0]
    trainers = {}
    for cfg in cells_for(load_experiment(path, size="cpu"), {"seed": "0"}, NO_SET):
        _, trainer, _, _ = build_plugins(cfg, plugins, with_task=True)
        trainers[cfg.arm] = trainer.config
        assert re.search(rf"^#   {re.escape(cfg.arm)} ", header, re.M), f"{cfg.arm} is not in {name}'s arms table"
    assert trainers["vspo"].reward == "strength" and trainers["vspo-behaviour"].reward == "behaviour"
    rl = {arm: c for arm, c in trainers.items() if hasattr(c, "loss_norm")}
    assert set(rl) >= {"vspo", "vspo-behaviour", "vspo-steering-off", "grpo-shaped", "rlaif"}
    assert {c.loss_norm for c in rl.values()} == {"constant"}
    weights = {arm: getattr(c, "alpha", None) or c.behaviour_weight for arm, c in rl.items()}
    assert set(weights.values()) == {2.0}, weights
