"""RLAIF: GRPO whose reward includes a teacher's online judgement of every rollout (a VSPO baseline).

r = r0 + alpha * judge(question, answer), where judge is a teacher model's probability-weighted 1..5 rating of how
strongly the answer shows ``behaviour`` (harness/teacher/judge.py), rescaled to [0, 1] and added as reward component
``teacher/<behaviour>``. The registered behaviour scorer of the same name is logged beside it with weight 0
(``behaviour/<behaviour>``), so a run shows whether the teacher's opinion and the behaviour's measure agree.

The teacher is ``teacher=MODEL`` (any spec the harness loads), or by default a frozen copy of the policy's initial
weights: a judge that moved with the policy would reward whatever the policy drifted into. Its cost is the point of
the comparison with VSPO (which pays a teacher only once, to build the steering vector), so every step logs the
cumulative ``teacher_calls`` (answers judged), ``teacher_prompt_tokens`` and ``teacher_seconds``, and the run's
metrics get the totals under ``rlaif/``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from harness.models import Policy
from harness.plugins.size_bounds import COUNT, bounded
from harness.runner.distributed import current as current_parallel
from harness.scoring.multi_answer import split_answers
from harness.teacher.judge import Judge
from harness.trainers.grpo import GRPOConfig, GRPOTrainer, _frozen_copy
from harness.types import TrainerCapabilities


@dataclass
class RLAIFConfig(GRPOConfig):
    alpha: float = 1.0  # weight of the teacher's [0, 1] judgement in the reward
    teacher: str = ""  # model spec of the judge; "" = a frozen copy of the initial policy
    judge_batch: int = bounded(8, 1, COUNT)  # answers per teacher forward pass

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.behaviour:
            raise ValueError(
                "rlaif: behaviour=NAME is required: the registered behaviour the teacher judges (`harness list`)"
            )
        if int(self.judge_batch) < 1:
            raise ValueError(f"rlaif: judge_batch must be >= 1, got {self.judge_batch!r}")


class RLAIFTrainer(GRPOTrainer):
    name = "rlaif"
    config_class = RLAIFConfig
    # under a launcher each rank's judge rates its own rows (GRPO's loop splits the rollouts); the counters are
    # summed over the ranks every step
    capabilities = TrainerCapabilities(data_parallel=True)

    def __init__(self, plugins=None, **options) -> None:
        super().__init__(plugins=plugins, **options)
        self.judge: Judge | None = None
        self.judge_seconds = 0.0
        self.before: dict[str, float] = {}  # the totals a resumed run's checkpoint carried (every rank's)
        self.totals: dict[str, float] = {}  # the run's totals at the last step, over every rank

    @property
    def component(self) -> str:
        return f"teacher/{self.config.behaviour}"

    def train(self, policy, engine, task, problems, *, store) -> None:
        self.judge = Judge(self.load_teacher(policy), self.behaviour, batch_size=self.config.judge_batch)
        super().train(policy, engine, task, problems, store=store)
        store.update_metrics({f"rlaif/{k}": v for k, v in self.totals.items()})

    def load_teacher(self, policy) -> Policy:
        if not self.config.teacher:
            return Policy(
                model=_frozen_copy(policy.model),
                tokenizer=policy.tokenizer,
                spec=f"{policy.spec} (frozen initial copy)",
                source=policy.source,
            )
        from harness.models import load_policy

        teacher = load_policy(self.config.teacher, self.plugins["model"])
        teacher.model.to(next(policy.model.parameters()).device)
        return teacher

    def step_metrics(self) -> dict[str, float]:
        """The teacher's cost so far: what the run paid before a resume plus every rank's own (an all-reduce, called
        by every rank once per step)."""
        judge = self.judge
        own = {
            "teacher_calls": judge.calls if judge else 0,
            "teacher_prompt_tokens": judge.prompt_tokens if judge else 0,
            "teacher_seconds": self.judge_seconds,  # summed over ranks: the judge's compute, not wall-clock
        }
        summed = current_parallel().sum(own)  # (floats over ranks: the counts are whole again below)
        self.totals = {
            k: self.before.get(k, 0) + (v if k == "teacher_seconds" else round(v)) for k, v in summed.items()
        }
        return self.totals

    def state_dict(self) -> dict:
        # rank 0 alone saves checkpoints, so no collective here: the totals of the step just logged
        totals = self.totals or self.before
        return {
            "calls": totals.get("teacher_calls", 0),
            "prompt_tokens": totals.get("teacher_prompt_tokens", 0),
            "seconds": totals.get("teacher_seconds", 0.0),
        }

    def load_state_dict(self, state: dict) -> None:
        self.before = {
            "teacher_calls": state["calls"],
            "teacher_prompt_tokens": state["prompt_tokens"],
            "teacher_seconds": state["seconds"],
        }

    def shaping(self) -> dict[str, float]:
        return {self.component: self.config.alpha, **super().shaping()}  # + behaviour/<name>, logged

    def add_shaping(self, scored, problems, completions, names):
        """The teacher's column first, judged in batches (one call per answer the task could score), then the
        rest through GRPO's per-answer path."""
        assert names[0] == self.component, names
        cfg = self.config
        started = time.perf_counter()
        where, questions, answers = [], [], []
        for b, c in enumerate(completions):
            problem = problems[c.prompt_index]
            for j, answer in enumerate(split_answers(c.text, cfg.answers_per_rollout, cfg.delimiter)):
                if scored.present[b, j]:
                    where.append((b, j))
                    questions.append(problem.prompt)
                    answers.append(answer)
        column = torch.zeros((*scored.rewards.shape[:2], 1))
        for (b, j), value in zip(where, self.judge.score(questions, answers), strict=True):
            column[b, j, 0] = value
        self.judge_seconds += time.perf_counter() - started
        scored = replace(scored, rewards=torch.cat([scored.rewards, column], dim=-1))
        return super().add_shaping(scored, problems, completions, names[1:]) if names[1:] else scored
