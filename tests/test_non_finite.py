"""Non-finite training is a failure (harness/trainers/finite.py): a NaN reaching the loss stops training before the
update, weights unchanged; an absurd learning rate is refused before the model loads (exit 2); a run that hit a NaN
ends `failed`, exit 1, in one line, never `complete`."""

from __future__ import annotations

import math

import pytest
import torch

from harness.cli import main
from harness.testing import FakeEngine, FakeTask
from harness.trainers.finite import MAX_LR, NonFiniteTraining, check_update, check_weights
from harness.types import Score


class NaNRewardTask(FakeTask):
    """FakeTask whose "correct" reward is infinite for every answer: the advantages, and so the loss, are NaN. (A NaN
    reward is "not applicable", TRL's None: it adds nothing to the advantages.)"""

    def score(self, problem, completion):
        score = super().score(problem, completion)
        return Score(rewards={**score.rewards, "correct": math.inf}, primary="correct", extracted=score.extracted)


def test_the_checks_name_what_is_not_finite() -> None:
    check_update("grpo", 0.5, torch.tensor(1.0))
    with pytest.raises(NonFiniteTraining, match="the loss is nan and the gradient norm 1"):
        check_update("grpo", math.nan, torch.tensor(1.0))
    with pytest.raises(NonFiniteTraining, match="gradient norm inf"):
        check_update("grpo", 0.5, torch.tensor(math.inf))
    good, bad = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.tensor([1.0, math.nan]))
    check_weights("grpo", [good])
    with pytest.raises(NonFiniteTraining, match="weights non-finite"):
        check_weights("grpo", [good, bad])


def test_a_nan_loss_stops_grpo_before_the_update(tiny_policy, plugins, tmp_path) -> None:
    from harness.store.run_folder import RunStore
    from harness.trainers.grpo import GRPOTrainer

    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    trainer = GRPOTrainer(plugins=plugins, steps=2, prompts_per_step=1, group_size=2, max_new_tokens=4, lr=1e-3)
    task = NaNRewardTask(size=4)
    with pytest.raises(NonFiniteTraining, match="training stopped before this update"):
        trainer.train(
            tiny_policy,
            FakeEngine(["It is 2.", "It is 3."]),
            task,
            task.problems("train"),
            store=RunStore(tmp_path, "run"),
        )
    assert all(torch.equal(before[k], v) for k, v in tiny_policy.model.state_dict().items())


@pytest.mark.parametrize("option", ["trainer.lr=1e308", "trainer.warmup_lr=5"])
def test_an_absurd_learning_rate_is_refused_before_the_model_loads(option, tmp_path, capsys) -> None:
    code = main(["run", "--model", "tiny-random", "--steps", "1", "--set", option, "--out", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 2 and f"must be in (0, {MAX_LR:g}]" in out.err and "loading model" not in out.out
    assert len(out.err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing started


def test_the_learning_rate_bound_leaves_real_rates_alone() -> None:
    from harness.trainers.grpo import GRPOConfig
    from harness.trainers.sft import SFTConfig

    for lr in (1e-6, 5e-5, 3e-2, 1.0):
        GRPOConfig(lr=lr)
        SFTConfig(lr=lr)  # each rate up to MAX_LR builds
