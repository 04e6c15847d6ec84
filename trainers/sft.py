"""SFT: token-level NLL on (prompt, target) pairs. Teacher-tracking SFT (a VSPO baseline) and VPO's format warm-up.

Targets come from one of these places (``targets``):
- "auto" (the default): "references" where the training problems carry any reference (an answer, or a task's
  reference completion), else "self": a task scored by reward models alone (persona) has none to imitate.
- "references": the task's reference answer. A task that declares ``reference_completions`` offers
  ``reference_completion(problem)`` to
  render it in its requested format (e.g. "... \\boxed{42}"); otherwise "The answer is 42." is used. A problem whose
  data gave a completion (``Problem.completion``: TRL's prompt-completion format) trains on that instead.
- "self": rejection sampling: the policy's own samples that the task scores successful (the best by scalarised
  reward when none succeed, counted in ``sft/fallback_problems``).
- "teacher": the same with a teacher model's samples; the teacher's cost is logged (``sft/teacher_*`` metrics).
- "rewrites": teacher-tracking SFT on teacher-*rewritten* answers (the VSPO paper's baseline): the policy answers
  ``steps x batch_size`` problems (each target is then trained on about once, so the teacher is paid only for what
  trains), a teacher (``teacher=MODEL``, or the policy itself) rewrites each answer towards ``behaviour``
  (the registered Behaviour's ``towards``, the instruction that builds steering vectors too); the rewrites are the
  targets.
  With ``filter_rewrites`` (default) a rewrite the behaviour scorer rates *below* the answer it rewrote is dropped:
  a small teacher often fails the instruction, and training on those failures would teach the opposite. (Ties are
  kept: scorers saturate, e.g. conciseness is 1 for any filler-free answer under 60 words.)
  Teacher calls and tokens are logged (``sft/teacher_calls``, ``sft/teacher_tokens``).
With ``answers_per_rollout`` M > 1 the prompt asks for M answers (harness.scoring.multi_answer) and the target joins M
sampled answers, as distinct as possible: VPO's warm-up teaches the format before RL teaches the content.

Under torchrun / accelerate launch (harness/runner/distributed.py) each rank samples (and has rewritten) its share of
the problems, every rank then holds every target, and each step's batch is split: a rank's block of pairs,
normalised by the whole batch's target tokens, gradients all-reduced, so the step is one process's. A checkpoint
(``--checkpoint-every``) holds the weights, AdamW's moments and the encoded targets, so a resumed run neither samples
its targets again nor repeats a step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch

from harness import progress
from harness.engine.tokens import encode_chat
from harness.engine.transformers_engine import TransformersEngine
from harness.failures import PluginFailed
from harness.faults import fault_point
from harness.plugins.options import make_config
from harness.plugins.size_bounds import COUNT, SEED, STEPS, TOKENS, bounded
from harness.runner.distributed import Parallel, SharedEngine
from harness.runner.distributed import current as current_parallel
from harness.runner.threads import phase_threads
from harness.scoring.multi_answer import DELIMITER, answer_budget, instruct, join_answers
from harness.trainers.finite import check_lr, check_update, check_weights
from harness.trainers.policy_gradient import cycle_problems, pad_completions, score_rollouts, sequence_logprobs
from harness.trainers.post_training import autocast_to
from harness.types import (
    Completion,
    Engine,
    Messages,
    Problem,
    SamplingParams,
    Score,
    Task,
    TaskCapabilities,
    TrainerCapabilities,
    capabilities_of,
    scalarize,
)

TARGETS = ("auto", "references", "self", "teacher", "rewrites")


@dataclass
class SFTConfig:
    steps: int = bounded(20, 1, STEPS)  # optimizer steps
    batch_size: int = bounded(4, 1, COUNT)  # (prompt, target) pairs per optimizer step
    lr: float = 1e-5  # AdamW learning rate
    weight_decay: float = 0.0  # AdamW weight decay
    max_grad_norm: float = 1.0  # gradients are clipped to this total norm
    # targets are cut here (no EOS then); also the sampling budget of "self"/"teacher"
    max_target_tokens: int = bounded(128, 1, TOKENS)
    micro_batch: int = bounded(4, 1, COUNT)  # pairs per forward/backward; gradients accumulate to the full batch
    seed: int = bounded(0, SEED)  # order of the pairs and the sampling seed
    targets: str = "auto"  # "auto", "references", "self" (rejection sampling), "teacher" or "rewrites"
    teacher: str = ""  # model spec (alias, folder, hub id) of the teacher, for targets="teacher"
    samples_per_problem: int = bounded(4, 1, COUNT)  # samples drawn per problem for "self"/"teacher"
    temperature: float = 1.0  # sampling temperature for "self"/"teacher"
    answers_per_rollout: int = bounded(1, 1, COUNT)  # M: answers per target (VPO's multi-answer format when > 1)
    delimiter: str = DELIMITER  # separates the M answers of a target
    behaviour: str = ""  # targets="rewrites": the registered behaviour the teacher rewrites towards
    filter_rewrites: bool = True  # targets="rewrites": drop a rewrite that scores lower on the behaviour
    # "self"/"teacher": which samples become targets: "successes" (the task's successful ones first, then by
    # reward: rejection sampling) or "sampled" (sampling order: distinct answers, success not looked at)
    select: str = "successes"

    def __post_init__(self) -> None:
        if self.targets not in TARGETS:
            raise ValueError(f"sft: unknown targets {self.targets!r}; choose one of {', '.join(TARGETS)}")
        for name in (
            "steps",
            "batch_size",
            "max_target_tokens",
            "micro_batch",
            "samples_per_problem",
            "answers_per_rollout",
        ):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"sft: {name} must be >= 1, got {getattr(self, name)!r}")
        check_lr("sft", self.lr)
        if self.select not in ("successes", "sampled"):
            raise ValueError(f"sft: select must be successes or sampled, got {self.select!r}")
        if self.targets == "teacher" and not self.teacher:
            raise ValueError("sft: targets=teacher needs a teacher model spec (teacher=...)")
        if self.targets == "rewrites":
            if not self.behaviour:
                raise ValueError("sft: targets=rewrites needs behaviour=NAME (a registered behaviour: `harness list`)")
            if self.answers_per_rollout != 1:
                raise ValueError("sft: targets=rewrites writes one answer per target (answers_per_rollout=1)")
        if self.answers_per_rollout > 1 and self.targets in ("auto", "references"):
            raise ValueError("sft: answers_per_rollout > 1 needs targets=self or teacher (a problem has one reference)")
        if self.targets not in ("auto", "references") and self.samples_per_problem < self.answers_per_rollout:
            raise ValueError("sft: samples_per_problem must be >= answers_per_rollout")


@dataclass
class Example:
    problem: Problem
    messages: Messages  # the prompt, multi-answer instruction included
    target: str
    answers: list[str]  # the answers joined into the target (one when M is 1)
    success: list[bool | None]  # per answer: the task's verdict (None for references: not sampled)
    # "self"/"teacher": the samples the answers were chosen from, in selection order, each with whether it ended
    # before the budget (Completion.finished): a caller that rewrites the answers (the format warm-up) chooses again
    pool: list[tuple[str, bool]] = field(default_factory=list)


class SFTTrainer:
    config_class = SFTConfig  # its options (`harness options trainer sft`)
    capabilities = TrainerCapabilities(data_parallel=True)  # what the class says before it is built

    def __init__(self, plugins=None, **options) -> None:
        self.config = make_config(SFTConfig, options, "sft")
        # its budget, said before the model loads; each step splits over the processes of torchrun / accelerate launch
        self.capabilities = TrainerCapabilities(steps=self.config.steps, data_parallel=True)
        self.plugins = plugins  # only needed to load a teacher or a behaviour
        if self.config.behaviour:  # an unknown name fails now, before any model loads
            self.behaviour = self._plugins()["behaviour"].get(self.config.behaviour).load()

    def train(self, policy, engine: Engine, task: Task, problems: Sequence[Problem], *, store) -> None:
        cfg = self.config
        model, tok = policy.model, policy.tokenizer
        dp = current_parallel()  # one process, or this rank of a data-parallel run (harness/runner/distributed.py)
        checkpointer = store.checkpointer
        saved = checkpointer.state() if checkpointer else None
        if saved:  # resuming: the targets this run built (sampling them again would pay the samples twice)
            pairs = [(list(p), list(t)) for p, t in saved["trainer"]["pairs"]]
        else:
            pairs = self.targets(policy, engine, task, problems, store)
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        resumed = checkpointer.restore(model, optimizer) if checkpointer else None
        start = resumed["step"] + 1 if resumed else 0
        # the update runs through DDP's wrapper under a launcher (it shares the model's parameters); else the model
        trained, optimizer = dp.prepare(model, optimizer)
        order = cycle_problems(pairs, cfg.seed)
        for _ in range(start * cfg.batch_size):  # the pairs of the steps already taken
            next(order)
        for step in range(start, cfg.steps):
            started = time.perf_counter()
            batch = [next(order) for _ in range(cfg.batch_size)]
            metrics = self.update(trained, tok.pad_token_id, optimizer, batch, parallel=dp)
            store.log_step(step, {**metrics, "seconds": time.perf_counter() - started})
            if checkpointer and dp.agree(checkpointer.due(step, cfg.steps)):
                optimizer_state = dp.optimizer_state(optimizer)
                if dp.is_main:
                    checkpointer.save(step, model, optimizer_state, {"pairs": pairs}, store)
            if store.step_models and dp.is_main and store.step_models.due(step):
                store.step_models.save(step, policy)  # --save-every: a loadable model, kept

    def targets(self, policy, engine: Engine, task: Task, problems: Sequence[Problem], store):
        """The (prompt ids, target ids) pairs, built and recorded (``sft/`` metrics, the targets as samples)."""
        tok = policy.tokenizer
        examples, stats = self.build_targets(engine, task, problems)
        pairs = self.encode(tok, examples)
        stats["truncated_targets"] = sum(t[-1] != tok.eos_token_id for _, t in pairs)
        # Scalars under "sft/", apart from the per-step lists under "train/" (or a caller's stage): a VPO warm-up
        # shares the store with RL steps that log some of the same names ("score_errors").
        store.update_metrics({f"sft/{k}": v for k, v in stats.items()})
        store.write_samples(target_records(examples, self.targets_used))
        if not examples:
            raise ValueError(f"sft: no training targets from {len(problems)} problems ({stats})")
        return pairs

    def encode(self, tok, examples: Sequence[Example]) -> list[tuple[list[int], list[int]]]:
        """(prompt ids, target ids) per example, the prompt in the chat template the engine samples with."""
        return [
            (encode_chat(tok, e.messages), _target_ids(tok, e.target, self.config.max_target_tokens)) for e in examples
        ]

    def update(
        self,
        model,
        pad_id: int,
        optimizer,
        pairs: Sequence[tuple[list[int], list[int]]],
        autocast: str = "",
        parallel: Parallel | None = None,
    ) -> dict[str, float]:
        """One optimizer step of mean token NLL over the batch's target tokens, in micro-batches that add up to it.
        ``autocast`` ("bfloat16"): the forwards in that precision, weights unchanged (an RL trainer's format warm-up
        takes its trainer's). ``parallel``: the data-parallel run this step is split over (each rank its block of
        the batch, normalised by the whole batch's tokens, gradients all-reduced); None: this process alone."""
        with phase_threads("update"):  # the run's thread count for an update (harness/runner/threads.py)
            return self._update(model, pad_id, optimizer, pairs, autocast, parallel or Parallel(world_size=1))

    def _update(self, model, pad_id: int, optimizer, pairs, autocast: str, dp: Parallel) -> dict[str, float]:
        cfg = self.config
        model.train()
        optimizer.zero_grad(set_to_none=True)
        tokens = sum(len(t) for _, t in pairs)  # one normaliser for the whole batch: micro-batches sum exactly
        mine = pairs[dp.block(len(pairs))]
        total = 0.0
        device = next(model.parameters()).device
        for start in range(0, len(mine), cfg.micro_batch):
            with dp.no_sync(model, last=start + cfg.micro_batch >= len(mine)):  # all-reduced on the last only
                with autocast_to(autocast, device):
                    nll = target_nll(model, target_batch(mine[start : start + cfg.micro_batch], pad_id))
                loss = nll.float().sum() / tokens
                dp.backward(loss)
            total += loss.item()
        total = dp.sum({"loss": total})["loss"]
        grad_norm = dp.clip_grad_norm_(model, cfg.max_grad_norm)
        check_update("sft", total, grad_norm)  # a NaN never reaches the weights
        fault_point("optimizer_step")  # where the fault tests kill a run mid-training (harness/faults.py)
        optimizer.step()
        check_weights("sft", model.parameters())
        model.eval()
        return {"loss": total, "tokens": tokens, "grad_norm": float(grad_norm), "lr": cfg.lr}

    def build_targets(
        self, engine: Engine, task: Task, problems: Sequence[Problem]
    ) -> tuple[list[Example], dict[str, float]]:
        """The (prompt, target) pairs and how they were obtained (counts of skipped problems, sampling cost)."""
        cfg = self.config
        kind = self.targets_used = cfg.targets
        if kind in ("auto", "references"):
            examples = [e for p in problems if (e := _reference_example(task, p)) is not None]
            if examples or kind == "references":
                return examples, {"examples": len(examples), "skipped_no_reference": len(problems) - len(examples)}
            kind = self.targets_used = "self"  # auto, and no problem has a reference: the policy's own best samples
            progress.write(
                f"sft: task {getattr(task, 'name', '?')!r} has no references; targets=auto trains on the "
                "policy's own successful samples (targets=self)"
            )

        if kind == "rewrites":
            return self._rewrite_targets(engine, task, problems)
        # under a launcher each rank samples its share of the problems (every rank then holds them all)
        source = SharedEngine(engine if kind == "self" else self._teacher_engine())
        started = time.perf_counter()
        m = cfg.answers_per_rollout
        # Each answer is sampled alone with the plain task prompt: before the warm-up, the policy cannot write the
        # multi-answer format itself; the target joins M of them. Each gets one answer's share of the target budget,
        # as an M-answer rollout of that budget leaves each answer (harness/scoring/multi_answer.py answer_budget).
        completions = source.generate(
            [task.messages(p) for p in problems],
            SamplingParams(
                n=cfg.samples_per_problem,
                max_new_tokens=answer_budget(cfg.max_target_tokens, m),
                temperature=cfg.temperature,
                seed=cfg.seed,
            ),
            desc=f"sft {kind} samples",
        )
        seconds = time.perf_counter() - started
        # One answer per completion; no reward tensor is needed (components=()), only the Scores (None: it raised).
        scores = [row[0] if row else None for row in score_rollouts(task, problems, completions, ()).scores]
        by_problem: list[list[tuple[Completion, Score | None]]] = [[] for _ in problems]
        for c, s in zip(completions, scores, strict=True):
            by_problem[c.prompt_index].append((c, s))

        examples: list[Example] = []
        fallback = too_few = 0
        weights = None if cfg.select == "sampled" else task.reward_weights  # None: sampling order, the format
        for problem, samples in zip(problems, by_problem, strict=True):
            if cfg.select == "sampled" or m > 1:  # distinct answers
                chosen = _select_distinct(samples, m, weights, cfg.delimiter)
            else:
                chosen = _select_successful(samples, weights)
            if len(chosen) < m:
                too_few += 1
                continue
            fallback += not any(s is not None and s.success for _, s in chosen)
            for group in [chosen] if m > 1 else [[pick] for pick in chosen]:
                answers = [c.text for c, _ in group]
                examples.append(
                    Example(
                        problem,
                        instruct(task.messages(problem), m, cfg.delimiter),
                        join_answers(answers, cfg.delimiter) if m > 1 else answers[0],
                        answers,
                        [s.success if s is not None else False for _, s in group],
                        # M > 1: every sample of the problem, in selection order; one answer: its own
                        [(c.text, c.finished) for c, _ in (_rank(samples, weights) if m > 1 else group)],
                    )
                )
        return examples, {
            "examples": len(examples),
            "fallback_problems": fallback,
            "skipped_too_few_distinct": too_few,
            "sampled_success_rate": sum(s is not None and s.success for s in scores) / max(len(scores), 1),
            "score_errors": sum(s is None for s in scores),
            f"{kind}_prompts": len(problems),
            f"{kind}_samples": len(completions),
            f"{kind}_tokens": sum(len(c.token_ids) for c in completions),
            f"{kind}_seconds": seconds,
        }

    def _rewrite_targets(
        self, engine: Engine, task: Task, problems: Sequence[Problem]
    ) -> tuple[list[Example], dict[str, float]]:
        from harness.teacher.rewrite import rewrite_answers

        cfg = self.config
        scorer = self.behaviour.score
        chosen = list(problems[: cfg.steps * cfg.batch_size])
        prompts = [task.messages(p) for p in chosen]
        engine = SharedEngine(engine)  # under a launcher each rank answers and rewrites its share of the problems
        teacher = SharedEngine(self._teacher_engine()) if cfg.teacher else engine
        started = time.perf_counter()
        answers = engine.generate(
            prompts,
            SamplingParams(n=1, max_new_tokens=cfg.max_target_tokens, temperature=cfg.temperature, seed=cfg.seed),
            desc="sft answers to rewrite",
        )
        rewrites = rewrite_answers(
            teacher,
            prompts,
            [a.text for a in answers],
            [self.behaviour.towards],
            SamplingParams(n=1, max_new_tokens=cfg.max_target_tokens, temperature=0),
        )
        seconds = time.perf_counter() - started
        examples: list[Example] = []
        empty = not_better = 0
        gains = []
        for problem, answer, rewrite in zip(chosen, answers, rewrites, strict=True):
            text = rewrite.text.strip()
            if not text:
                empty += 1
                continue
            gain = float(scorer(text, problem)) - float(scorer(answer.text, problem))
            gains.append(gain)
            if cfg.filter_rewrites and gain < 0:
                not_better += 1
                continue
            try:
                success = task.score(problem, text).success
            except PluginFailed:  # not this target's fault: the run stops (harness/failures.py)
                raise
            except Exception:  # a scorer failing on one target is counted, not fatal
                success = None
            examples.append(Example(problem, task.messages(problem), text, [text], [success]))
        return examples, {
            "examples": len(examples),
            "rewrite_prompts": len(chosen),
            "skipped_empty_rewrite": empty,
            f"skipped_less_{cfg.behaviour}": not_better,
            "behaviour_gain_mean": sum(gains) / max(len(gains), 1),  # scorer(rewrite) - scorer(answer), all kept
            "target_success_rate": sum(e.success[0] is True for e in examples) / max(len(examples), 1),
            "teacher_calls": len(rewrites),
            "teacher_tokens": sum(len(r.token_ids) for r in rewrites),
            "policy_tokens": sum(len(a.token_ids) for a in answers),
            "teacher_seconds": seconds,
        }

    def _plugins(self):
        if self.plugins is None:
            from harness.plugins import get_plugin_manager

            self.plugins = get_plugin_manager()
        return self.plugins

    def _teacher_engine(self) -> Engine:
        from harness.models import load_policy

        return TransformersEngine(load_policy(self.config.teacher, self._plugins()["model"]), progress=False)

    def describe(self) -> dict:
        return asdict(self.config)


def target_records(examples: Sequence[Example], source: str) -> list[dict]:
    """The samples.jsonl records of the training targets: what the policy was taught, kept with the run."""
    return [
        {
            "problem_id": e.problem.id,
            "phase": "train-sft",
            "step": None,
            "source": source,
            "text": e.target,
            "answers": e.answers,
            "success": e.success,
        }
        for e in examples
    ]


def target_batch(pairs: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """(prompt ids, target ids) pairs as one padded batch; ``completion_mask`` marks the tokens the loss counts
    (the target's, never the prompt's or padding). The targets ride in Completions so GRPO's batching is reused."""
    completions = [
        Completion(
            prompt_index=i,
            sample_index=0,
            prompt_ids=list(p),
            token_ids=list(t),
            logprobs=[0.0] * len(t),
            text="",
            finished=True,
        )
        for i, (p, t) in enumerate(pairs)
    ]
    return pad_completions(completions, pad_id)


def target_nll(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """-log p(target token | prompt, earlier target tokens) [B, T], zero at padding. Logits are only computed at
    positions that predict target tokens, so prompt tokens cannot enter the loss."""
    logp = sequence_logprobs(model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]))
    return -logp * batch["completion_mask"]


def _target_ids(tok, text: str, limit: int) -> list[int]:
    # Targets are re-tokenised from text (a teacher may use another tokenizer). EOS ends the turn, so the policy
    # learns to stop; a target cut at the limit gets none, or it would learn to stop mid-answer.
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return ids if len(ids) <= limit else ids[:limit]


def _reference_example(task: Task, problem: Problem) -> Example | None:
    if problem.completion is not None:  # the data's own completion (TRL's prompt-completion format) is the target
        text = problem.completion
    elif capabilities_of(task, TaskCapabilities).reference_completions:
        text = task.reference_completion(problem)
    else:
        text = None if problem.answer is None else f"The answer is {problem.answer}."
    if text is None:
        return None
    return Example(problem, task.messages(problem), text, [text], [None])


def _rank(
    samples: Sequence[tuple[Completion, Score | None]], weights: dict[str, float] | None
) -> list[tuple[Completion, Score | None]]:
    """Successful first, then by scalarised reward; ties keep sampling order (stable sort). A failed score is last.
    ``weights`` None: sampling order (select="sampled")."""
    if weights is None:
        return list(samples)

    def key(item: tuple[Completion, Score | None]) -> tuple[bool, float]:
        s = item[1]
        return (False, float("-inf")) if s is None else (s.success, scalarize(s.rewards, weights))

    return sorted(samples, key=key, reverse=True)


def _select_successful(samples, weights) -> list[tuple[Completion, Score | None]]:
    """Rejection sampling: every distinct successful sample, else the single best one."""
    ranked = _rank(samples, weights)
    kept: dict[str, tuple[Completion, Score | None]] = {}
    for c, s in ranked:
        if s is not None and s.success:
            kept.setdefault(c.text, (c, s))  # duplicates would weigh one answer twice
    return list(kept.values()) or ranked[:1]


def _select_distinct(samples, m: int, weights, delimiter: str) -> list[tuple[Completion, Score | None]]:
    """M samples as different as possible: distinct extracted answers first, then distinct texts, best first, and
    answers that ended before the budget before those cut at it (a target of cut-off answers teaches the policy to
    run out of room before its M-th answer). Fewer than M when the samples hold fewer distinct texts (the caller
    skips the problem)."""
    ranked = sorted(
        ((c, s) for c, s in _rank(samples, weights) if c.text.strip() and delimiter not in c.text),
        key=lambda item: not item[0].finished,
    )  # stable: the ranking holds within finished / cut
    chosen: list[tuple[Completion, Score | None]] = []
    answers: set[str] = set()
    for c, s in ranked:
        if s is not None and s.extracted is not None and s.extracted not in answers and len(chosen) < m:
            answers.add(s.extracted)
            chosen.append((c, s))
    texts = {c.text.strip() for c, _ in chosen}
    for c, s in ranked:
        if len(chosen) < m and c.text.strip() not in texts:
            texts.add(c.text.strip())
            chosen.append((c, s))
    return chosen
