"""GRPO: sample G completions per prompt, score them, group-relative advantages, clipped policy-gradient update.

The loop is four small stages so later methods replace one stage, not the trainer:
rollout (engine.generate) -> scoring (task.score, a reward *vector*) -> advantage (a registered estimator, by name)
-> loss (trainers/losses.py). Dr. GRPO is ``advantage="dr_grpo", loss_norm="constant"``; DAPO's token-level loss is
``loss_norm="token"`` with a wider ``eps_high``.

Rollouts sampled in another precision than the update computes in (``--rollout-dtype``) get their old log-probs
recomputed and a truncated importance weight per token (trainers/rollout_precision.py). Each step logs where its
time went as ``time/<section>`` (trainers/step_timer.py).

Options TRL / verl users rely on, each off by default: DAPO's dynamic sampling (trainers/dynamic_sampling.py), its
overlong filtering and soft overlong penalty (trainers/overlong.py), GSPO's sequence-level ratio
(``importance_sampling_level``, trainers/losses.py) and TR-DPO's reference sync (trainers/ref_sync.py).

Reward shaping (the VSPO paper's baseline): ``behaviour=NAME, behaviour_weight=lambda`` adds a component
``behaviour/NAME`` (a registered behaviour scorer's score of each answer) to the reward vector with weight lambda, so
the scalar reward is r0 + lambda * behaviour(answer, problem). Subclasses add their own components through
``shaping()`` and ``shaping_value()`` (VSPO: the steering strength).

The options, ``GRPOConfig``, and their checks are in trainers/grpo_config.py (importable from here too).
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Sequence
from dataclasses import asdict, replace

import torch

from harness import progress
from harness.failures import as_float, exits_named_in
from harness.faults import fault_point
from harness.plugins.contract import check_estimator, require
from harness.plugins.options import make_config
from harness.runner.distributed import current as current_parallel
from harness.runner.threads import phase_threads
from harness.scoring.multi_answer import instruct, split_answers
from harness.scoring.reward_functions import TrainerState, reward_context
from harness.trainers.collapse_watch import CollapseWatch
from harness.trainers.dynamic_sampling import Rollouts, fill_batch, refill_problems
from harness.trainers.finite import check_update, check_weights
from harness.trainers.format_warmup import WarmupPlan, format_warmup
from harness.trainers.grpo_config import GRPOConfig
from harness.trainers.losses import clipped_surrogate, k3_kl, log_importance_ratio, normalise
from harness.trainers.overlong import OVERLONG, loss_tokens, overlong_penalty, overlong_shaping, trained_rows
from harness.trainers.policy_gradient import (
    ScoredRollouts,
    cycle_problems,
    join_rollouts,
    pad_completions,
    score_rollouts,
    sequence_logprobs,
)
from harness.trainers.post_training import (
    AdaptersOff,
    autocast,
    lr_factor,
    prepare_policy,
    resolve_autocast,
    set_lr,
    trainable_parameters,
)
from harness.trainers.ref_sync import mix_into, sync_due
from harness.trainers.rollout_precision import (
    Corrected,
    correct_rollouts,
    pad_weights,
    policy_logprobs,
    sampler_precision,
    should_recompute,
    weights_dtype,
)
from harness.trainers.step_timer import StepTimer
from harness.trainers.trl_names import TRL_GRPO_ALIASES
from harness.types import (
    Completion,
    Engine,
    EngineCapabilities,
    Problem,
    SamplingParams,
    Task,
    TrainerCapabilities,
    capabilities_of,
    scalarize,
)


class GRPOTrainer:
    name = "grpo"
    config_class = GRPOConfig
    # TRL's GRPOConfig names, each an alias of an option here or refused with its equivalent (trainers/trl_names.py)
    option_aliases = TRL_GRPO_ALIASES
    # the loop splits rollouts and the update over torchrun / accelerate processes
    capabilities = TrainerCapabilities(data_parallel=True)

    def __init__(self, plugins=None, **options) -> None:
        self.config = make_config(self.config_class, options, self.name, aliases=self.option_aliases)
        # what the runner reads: the answer format and behaviour to evaluate the trained policy in
        # and whether rollouts may be sampled in another precision (--rollout-dtype auto): not when the sampler's
        # log-probs are kept as the old policy's (old_logprobs="sampler"); LoRA's merged save and prepare_policy
        self.capabilities = replace(
            type(self).capabilities,
            answers_per_rollout=self.config.answers_per_rollout,
            behaviour=self.config.behaviour,
            recomputes_old_logprobs=self.config.old_logprobs != "sampler",
            save_merged=self.config.save_merged,
            prepares_policy=True,
            steps=self.config.steps,
            warmup_steps=self.config.warmup_steps,
            warmup_target_rate=self.config.warmup_target_rate,
        )
        # The estimator is looked up by name, so a plugin's estimator needs no change here.
        if plugins is None:
            from harness.plugins import get_plugin_manager

            plugins = get_plugin_manager()
        self.plugins = plugins  # subclasses load more by name (VPO's warm-up, RLAIF's teacher)
        entry = plugins["advantage"].get(self.config.advantage)
        self.estimator = entry.load()
        # a wrong return type or shape fails now, in one line, not after a step's rollouts
        require(check_estimator(self.estimator), "advantage", entry.name, entry.plugin)
        # Behaviours are plugins too: looked up by name, so trainers never import tasks.
        self.behaviour = plugins["behaviour"].get(self.config.behaviour).load() if self.config.behaviour else None
        if self.behaviour is not None:  # its sys.exit ends the run naming it (harness/failures.py)
            label = ("behaviour", self.config.behaviour, plugins["behaviour"].get(self.config.behaviour).plugin)
            self.behaviour_score = exits_named_in(self.behaviour.score, *label, "scoring an answer")
        self.timer = StepTimer()  # seconds per section of the current step, logged as time/<section>

    def train(self, policy, engine: Engine, task: Task, problems: Sequence[Problem], *, store) -> None:
        cfg = self.config
        if not problems:
            raise ValueError(f"{self.name}: no training problems")
        self.prepare_policy(policy)
        # autocast=auto: the update in the training rollouts' precision when they sample in bf16 over fp32 weights
        cfg.autocast = resolve_autocast(
            cfg.autocast, sampler_precision(engine, policy.model), weights_dtype(policy.model)
        )
        if cfg.warmup_steps > 0 and self.checkpoint_state(store) is None:  # a resumed run is past its warm-up
            self.format_warmup(policy, engine, task, problems, store)
        model, tok = policy.model, policy.tokenizer
        dp = current_parallel()  # one process, or this rank of a data-parallel run (harness/runner/distributed.py)
        optimizer = torch.optim.AdamW(trainable_parameters(model), lr=cfg.lr, weight_decay=cfg.weight_decay)
        reference = None
        if cfg.beta > 0:  # a LoRA policy's reference is itself with the adapters off: nothing to copy or checkpoint
            reference = AdaptersOff(policy.adapter) if policy.adapter is not None else _frozen_copy(model)
        saved_reference = reference if not isinstance(reference, AdaptersOff) else None
        # A run resumed with `harness run --resume` continues after its last checkpoint: weights, optimizer, RNG and
        # this trainer's counters restored; rollout seeds and problem order depend only on the step, so the steps
        # that follow are the ones an uninterrupted run would have taken.
        checkpointer = store.checkpointer
        resumed = checkpointer.restore(model, optimizer, saved_reference) if checkpointer else None
        start = 0
        if resumed:
            start = resumed["step"] + 1
            self.load_state_dict(resumed["trainer"])
        # Generation and checkpoints use the plain model; the update runs through the one prepare returns: DDP's
        # wrapper, which shares its parameters, or under --shard fsdp a sharded copy gathered back after each step.
        # One process: the same object.
        trained, optimizer = dp.prepare(model, optimizer)
        task_components = list(task.score(problems[0], "").rewards)  # the reward vector's component names
        # extra components (name -> weight) appended after the task's: the subclass's, then DAPO's length penalty
        shaping = {**self.shaping(), **overlong_shaping(cfg.overlong_penalty)}
        components = task_components + list(shaping)
        weights = torch.tensor([task.reward_weights.get(c, 0.0) for c in task_components] + list(shaping.values()))
        order = cycle_problems(problems, cfg.seed)
        for _ in range(start * cfg.prompts_per_step):  # the problems of the steps already taken
            next(order)
        # An engine that holds its own copy of the weights (vLLM) takes the policy's before the first rollout (a
        # warm-up may have changed them) and after every optimizer step.
        push_weights(engine, model, dp)

        timer = self.timer
        watch = CollapseWatch()
        healthy = None  # the trainable weights of the last step whose rollouts were healthy (a copy on the CPU)
        for step in progress.track(
            range(start, cfg.steps), cfg.steps, self.name, "step", initial=start, disable=not dp.is_main
        ):
            started = time.perf_counter()
            set_lr(optimizer, cfg.lr * lr_factor(step, cfg.steps, cfg))
            batch_problems = [next(order) for _ in range(cfg.prompts_per_step)]
            model.eval()
            # sampling: dynamic sampling's figures, when it is on
            with reward_context(state=TrainerState(global_step=step, max_steps=cfg.steps, phase="train")):
                rollouts, sampling = self.step_rollouts(  # reward functions get this step as trainer_state
                    engine, task, problems, batch_problems, step, task_components, shaping, weights
                )
            batch_problems, completions = rollouts.problems, rollouts.completions
            scored, advantages = rollouts.scored, rollouts.advantages
            generated = time.perf_counter()
            answers_text = [
                a for c in completions for a in split_answers(c.text, cfg.answers_per_rollout, cfg.delimiter)
            ]
            collapse = (
                watch.rollouts(answers_text, [len(c.token_ids) for c in completions]) if cfg.stop_on_collapse else None
            )
            if collapse and healthy is None:  # degenerate before this run changed anything: said, not undone
                self.warn(
                    store,
                    f"{self.name} step {step}: the policy's rollouts are degenerate before any "
                    f"update of this run ({collapse})",
                )
                collapse = None
            stats, mismatch = {}, {"gap": 0.0, "clipped": 0, "tokens": 0}
            if not collapse:  # (a collapsed step is not trained on: its update would only deepen the collapse)
                if cfg.stop_on_collapse:
                    healthy = [p.detach().to("cpu", copy=True) for p in trainable_parameters(model)]
                stats, corrected = self.update_batch(
                    model, tok, trained, optimizer, reference, engine, completions, advantages
                )
                mismatch = {"gap": corrected.abs_log_ratio, "clipped": corrected.clipped, "tokens": corrected.tokens}
                spike = watch.update(stats["grad_norm"]) if cfg.stop_on_collapse else None
                if spike:
                    collapse = f"{spike}; that update is undone"
            mismatch = dp.sum(mismatch)
            # TR-DPO: after a kept update, on the same step on every rank (the weights are every rank's alike)
            synced = bool(cfg.sync_ref_model and stats and not collapse and sync_due(step, cfg.ref_model_sync_steps))
            if synced:
                mix_into(reference, model, cfg.ref_model_mixup_alpha)

            scalars = [[scalarize(s.rewards, task.reward_weights) if s else 0.0 for s in row] for row in scored.scores]
            flat = watch.task_reward([x for row in scalars for x in row])
            if flat:
                self.warn(store, f"{self.name} step {step}: {flat}")
            answers = [x for row in scalars for x in row]
            flat_adv = advantages.view(len(batch_problems), cfg.group_size)
            metrics = {
                "reward_mean": sum(answers) / max(len(answers), 1),  # over the answers written
                "set_best_mean": sum(max(row, default=0.0) for row in scalars) / len(scalars),
                **{  # over the answers it applies to (NaN: a reward function's None), as TRL's nanmean
                    f"reward/{c}": _applicable_mean(scored.rewards[..., i], scored.present)
                    for i, c in enumerate(components)
                },
                "zero_std_groups": float((flat_adv.abs().amax(dim=1) < 1e-6).float().mean()),
                "score_errors": scored.errors,
                "malformed_rate": scored.malformed / len(completions),
                "completion_tokens_mean": sum(len(c.token_ids) for c in completions) / len(completions),
                "truncated_rate": sum(not c.finished for c in completions) / len(completions),
                **stats,
                # |log pi_old - log pi_sampler| per token: the precision gap the correction acts on (0: the same)
                "mismatch/abs_log_ratio_mean": mismatch["gap"] / max(mismatch["tokens"], 1),
                "mismatch/tis_clipped_fraction": mismatch["clipped"] / max(mismatch["tokens"], 1),
                "rollout_seconds": generated - started,
                "update_seconds": time.perf_counter() - generated,
                # time/checkpoint: the previous step's save, which comes after its line (the line is in the save)
                **timer.take(TIME_SECTIONS),
                **({"ref_synced": float(synced)} if cfg.sync_ref_model else {}),
                **sampling,
                **self.step_metrics(),
            }
            store.log_step(step, metrics)
            shaped = scored.rewards[..., len(task_components) :].tolist()  # [B][M][K]: kept with each sample
            store.write_samples(
                {
                    "problem_id": batch_problems[c.prompt_index].id,
                    "phase": "train",
                    "step": step,
                    "sample_index": c.sample_index,
                    "answer_index": j,
                    "prompt": batch_problems[c.prompt_index].prompt,
                    "reference": batch_problems[c.prompt_index].answer,
                    "text": answer_text,
                    "extracted": s.extracted if s else None,
                    "unparsed": s.unparsed if s else None,
                    "rewards": {**s.rewards, **dict(zip(shaping, shaped[b][j], strict=True))} if s else None,
                    "scalar": x,
                    "advantage": float(a),
                }
                for b, (c, row, xs, a) in enumerate(zip(completions, scored.scores, scalars, advantages, strict=True))
                for j, (s, x, answer_text) in enumerate(
                    zip(row, xs, split_answers(c.text, cfg.answers_per_rollout, cfg.delimiter), strict=False)
                )
            )
            if collapse:  # back to the weights that wrote the last healthy rollouts, and no further
                with torch.no_grad():
                    for p, saved in zip(trainable_parameters(model), healthy, strict=True):
                        p.copy_(saved.to(p.device))
                push_weights(engine, model, dp)
                last_good = step if stats else step - 1  # a spike undoes this step's update, else the previous one's
                # what the comparisons mark the run with (harness/report/data.py stopped_note): not "no change"
                store.update_metrics({"stopped/at_step": step, "stopped/steps_trained": max(last_good, 0)})
                self.warn(
                    store,
                    f"{self.name} stopped at step {step}: policy collapse ({collapse}); the policy is "
                    f"rolled back to its weights before step {last_good}'s update",
                )
                break
            # due by rank 0's clock: under --shard fsdp every rank gathers the optimizer state with it
            if checkpointer and dp.agree(checkpointer.due(step, cfg.steps)):
                with timer("checkpoint"):
                    optimizer_state = dp.optimizer_state(optimizer)
                    if dp.is_main:
                        checkpointer.save(step, model, optimizer_state, self.state_dict(), store, saved_reference)
            if store.step_models and dp.is_main and store.step_models.due(step):
                store.step_models.save(step, policy)  # --save-every: a loadable model, kept

    def step_rollouts(
        self,
        engine: Engine,
        task: Task,
        problems: Sequence[Problem],
        batch_problems: Sequence[Problem],
        step: int,
        task_components: Sequence[str],
        shaping: dict[str, float],
        weights: torch.Tensor,
    ) -> tuple[Rollouts, dict[str, float]]:
        """The step's scored rollouts: one round of ``batch_problems``, or under dynamic sampling as many rounds as
        it takes (at most ``max_resample_rounds`` more) to fill the step with groups that have spread."""
        cfg = self.config

        def draw(round_: int) -> Rollouts:
            chosen = batch_problems if round_ == 0 else [next(extra) for _ in range(cfg.prompts_per_step)]
            return self.rollout_batch(engine, task, chosen, step, round_, task_components, shaping, weights)

        if not cfg.dynamic_sampling:
            return draw(0), {}
        extra = refill_problems(problems, cfg.seed, step, batch_problems)
        return fill_batch(draw, cfg.prompts_per_step, cfg.max_resample_rounds, cfg.answers_per_rollout)

    def rollout_batch(
        self,
        engine: Engine,
        task: Task,
        problems: Sequence[Problem],
        step: int,
        round_: int,
        task_components: Sequence[str],
        shaping: dict[str, float],
        weights: torch.Tensor,
    ) -> Rollouts:
        """One generation round: this rank's share of ``problems`` sampled G times, scored (with the shaping
        components), gathered from every rank, and their advantages. Round 0 keeps the seeds a step always had;
        dynamic sampling's later rounds take seeds of their own."""
        cfg = self.config
        dp = current_parallel()
        mine = problems[dp.block(len(problems))]
        offset = 1_000_003 * round_
        with self.timer("generation"):
            completions = engine.generate(
                [instruct(task.messages(p), cfg.answers_per_rollout, cfg.delimiter) for p in mine],
                SamplingParams(
                    n=cfg.group_size,
                    max_new_tokens=cfg.max_new_tokens,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    seed=cfg.seed * 100_003 + step + offset,
                ),
                desc=f"{self.name} step {step} rollouts" + (f" (refill {round_})" if round_ else ""),
            )
        with self.timer("scoring"):  # and what turns scores into advantages: shaping, the gather, the estimator
            scored = score_rollouts(task, mine, completions, task_components, cfg.answers_per_rollout, cfg.delimiter)
            if shaping:
                scored = self.add_shaping(scored, mine, completions, list(shaping))
            if dp.world_size > 1:  # every rank holds the whole batch from here on, as one process would
                completions, scored = join_rollouts(dp.gather((completions, scored)), len(mine))
            groups = torch.tensor([c.prompt_index for c in completions])
            advantages = self.estimator(
                # NaN (a reward function's None: not applicable) adds nothing, as TRL's nansum; an inf stays
                torch.where(scored.rewards.isnan(), 0.0, scored.rewards),
                groups,
                weights,
                present=scored.present,
                draws=cfg.draws,
                weighting=cfg.trade_off_weights,
                k=cfg.pkpo_k,
                generator=torch.Generator().manual_seed(cfg.seed * 7919 + step + offset),
            )
        return Rollouts(list(problems), completions, scored, advantages)

    def update_batch(self, model, tok, trained, optimizer, reference, engine, completions, advantages):
        """A step's update of this rank's rows: the old log-probs (``rollout_correction``), ``num_iterations``
        optimizer passes, then the new weights to an engine that holds its own. Returns (stats, corrected)."""
        cfg = self.config
        dp = current_parallel()
        rows = dp.block(len(completions))  # this rank's rollouts, normalised by the whole batch's totals
        if capabilities_of(engine, EngineCapabilities).sleeps:  # vLLM colocated: its memory to the update
            engine.sleep()
        # the run's thread count for an update, not decoding's (harness/runner/threads.py)
        with phase_threads("update"):
            with self.timer("old_logprobs"):  # once per batch: every pass's ratio is against the policy that sampled
                corrected = self.rollout_correction(model, tok, engine, completions[rows])
            passes = [
                self.update(
                    trained,
                    tok,
                    optimizer,
                    reference,
                    corrected.completions,
                    advantages[rows],
                    tis_weights=corrected.weights,
                    batch_rows=len(completions),
                    batch_tokens=loss_tokens(completions, cfg.mask_truncated),
                )
                for _ in range(cfg.num_iterations)
            ]
        # each pass's figures, averaged; the last pass's clip fraction says how far the passes moved the policy
        stats = {k: sum(p[k] for p in passes) / len(passes) for k in passes[0]}
        if cfg.num_iterations > 1:
            stats["clip_fraction_last_pass"] = passes[-1]["clip_fraction"]
        with self.timer("weight_sync"):
            dp.gather_weights(trained, model)  # --shard fsdp: the sharded copy's update into the rollouts' policy
            push_weights(engine, model, dp)
        return stats, corrected

    def warn(self, store, line: str) -> None:
        """A one-line warning: on the terminal now, and in the run's record (``store.warn``: the manifest's
        ``warnings``, the summary, the report)."""
        if current_parallel().is_main:
            progress.write(f"warning: {line}")
        store.warn(line)

    def format_warmup(self, policy, engine: Engine, task: Task, problems: Sequence[Problem], store) -> None:
        """SFT on the answer format until sampled rollouts are well formed (trainers/format_warmup.py), on the
        weights RL will train (after ``prepare_policy``: a LoRA policy's adapters)."""
        cfg = self.config
        shuffled = list(itertools.islice(cycle_problems(problems, cfg.seed + 1), len(problems)))
        targets = shuffled[: cfg.warmup_problems]
        # held out from the targets where there are enough problems, so the rate is not one of memorised answers
        check = shuffled[cfg.warmup_problems :][: cfg.warmup_check_problems] or shuffled[: cfg.warmup_check_problems]
        components = task.score(problems[0], "").rewards
        if cfg.warmup_format and cfg.warmup_format not in components:
            raise ValueError(
                f"{self.name}: warmup_format {cfg.warmup_format!r} is not a reward component of task "
                f"{task.name!r}; it has {', '.join(components)}"
            )
        plan = WarmupPlan(
            m=cfg.answers_per_rollout,
            delimiter=cfg.delimiter,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            max_steps=cfg.warmup_steps,
            check_every=cfg.warmup_check_every,
            target_rate=cfg.warmup_target_rate,
            samples_per_problem=cfg.warmup_samples,
            lr=cfg.warmup_lr,
            batch_size=cfg.warmup_batch_size,
            micro_batch=cfg.micro_batch,
            seed=cfg.seed,
            targets=cfg.warmup_targets,
            format_component=cfg.warmup_format,
            name=self.name,
            autocast=cfg.autocast,
            patience=cfg.warmup_patience,
            selection=cfg.warmup_selection,
        )
        format_warmup(policy, engine, task, targets, check, plan, store=store, plugins=self.plugins)

    def prepare_policy(self, policy) -> None:
        """LoRA adapters and gradient checkpointing as configured (idempotent); also called before a resumed run's
        trained weights are restored, so a LoRA checkpoint finds its adapters."""
        prepare_policy(policy, self.config)

    def state_dict(self) -> dict:
        """A subclass's own progress that a checkpoint must carry (RLAIF: the teacher's cost so far)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned, when a run resumes from a checkpoint."""

    @staticmethod
    def checkpoint_state(store) -> dict | None:
        """The trainer state of the run's latest checkpoint, before training starts (VSPO needs its vector's path
        and VPO whether its warm-up already ran); None on a fresh start."""
        checkpointer = store.checkpointer
        state = checkpointer.state() if checkpointer else None
        return state["trainer"] if state else None

    def step_metrics(self) -> dict[str, float]:
        """Extra per-step metrics a subclass reports (RLAIF: the teacher's cumulative cost)."""
        return {}

    def shaping(self) -> dict[str, float]:
        """Reward components added to the task's, name -> weight: ``behaviour/<name>`` when ``behaviour`` is set."""
        cfg = self.config
        return {f"behaviour/{cfg.behaviour}": cfg.behaviour_weight} if cfg.behaviour else {}

    def shaping_value(self, name: str, problem: Problem, completion: Completion, answer: str) -> float:
        """The value of shaping component ``name`` for one answer of a rollout."""
        if self.behaviour is not None and name == f"behaviour/{self.config.behaviour}":
            return as_float(self.behaviour_score(answer, problem), f" from behaviour {self.config.behaviour!r}")
        if name == OVERLONG:  # the rollout's length, so each of its M answers carries the same penalty
            return overlong_penalty(len(completion.token_ids), self.config.max_new_tokens, self.config.overlong_buffer)
        raise NotImplementedError(f"{self.name}: no value for reward component {name!r}")

    def add_shaping(
        self,
        scored: ScoredRollouts,
        problems: Sequence[Problem],
        completions: Sequence[Completion],
        names: Sequence[str],
    ) -> ScoredRollouts:
        """``scored`` with the shaping components appended to its rewards [B, M, N] -> [B, M, N + K]; an answer
        the task could not score gets zeros (it is not ``present``); a raising scorer counts as a score error."""
        cfg = self.config
        extra = torch.zeros((*scored.rewards.shape[:2], len(names)))
        errors = 0
        for b, c in enumerate(completions):
            for j, answer in enumerate(split_answers(c.text, cfg.answers_per_rollout, cfg.delimiter)):
                if not scored.present[b, j]:
                    continue
                for k, name in enumerate(names):
                    try:
                        extra[b, j, k] = self.shaping_value(name, problems[c.prompt_index], c, answer)
                    except NotImplementedError:  # a component without a value is a bug, not a bad answer
                        raise
                    except Exception:
                        errors += 1
        return replace(scored, rewards=torch.cat([scored.rewards, extra], dim=-1), errors=scored.errors + errors)

    def rollout_correction(self, model, tok, engine, completions: Sequence[Completion]) -> Corrected:
        """The rollouts with the old policy's log-probs (recomputed in the update's precision when the engine
        samples in another, trainers/rollout_precision.py) and each token's truncated importance weight."""
        cfg = self.config
        old = None
        if should_recompute(cfg.old_logprobs, engine, model, cfg):
            old = policy_logprobs(model, tok.pad_token_id, completions, cfg, cfg.micro_batch, cfg.temperature)
        return correct_rollouts(completions, old, cfg.tis_cap)

    def update(
        self,
        model,
        tok,
        optimizer,
        reference,
        completions,
        advantages,
        *,
        tis_weights: Sequence[Sequence[float]] | None = None,
        batch_rows: int | None = None,
        batch_tokens: int | None = None,
    ) -> dict[str, float]:
        """One optimizer step over the whole batch, in micro-batches whose losses add up to the full-batch loss.
        ``tis_weights``: per token of each completion, the truncated importance weight of its policy-gradient loss
        (``rollout_correction``); None: 1.

        In a data-parallel run ``completions`` are this rank's rows and ``batch_rows`` / ``batch_tokens`` the whole
        batch's, so the ranks' losses add up to the whole batch's loss and the synchronised gradient is its gradient."""
        cfg = self.config
        dp = current_parallel()
        model.train()
        optimizer.zero_grad(set_to_none=True)
        rows = len(completions)
        batch_rows = rows if batch_rows is None else batch_rows
        batch_tokens = loss_tokens(completions, cfg.mask_truncated) if batch_tokens is None else batch_tokens
        skippable = reference is None and dp.world_size == 1  # see needs_backward
        skipped = updated_tokens = 0
        totals = {"loss": 0.0, "kl": 0.0, "clip_fraction": 0.0, "ratio_mean": 0.0}
        # the run's thread count for the update (harness/runner/threads.py), and the time of its forwards and backwards
        with phase_threads("update"), self.timer("backward"):
            for start in range(0, rows, cfg.micro_batch):
                end = start + cfg.micro_batch
                if not needs_backward(advantages[start:end], skippable):
                    skipped += len(completions[start:end])
                    continue
                updated_tokens += loss_tokens(completions[start:end], cfg.mask_truncated)
                # DDP decides in the forward pass whether the backward all-reduces: only the last micro-batch does.
                with dp.no_sync(model, last=end >= rows):
                    part = self._micro_batch(
                        model,
                        tok,
                        reference,
                        completions[start:end],
                        advantages[start:end],
                        batch_rows,
                        batch_tokens,
                        None if tis_weights is None else tis_weights[start:end],
                    )
                totals = {k: totals[k] + part[k] for k in totals}
            totals = dp.sum(totals)  # each rank's share of the whole batch's loss, clip fraction, ...
        if skipped:
            # the ratio over the rows updated (1 when none was: the policy has not moved within the step's update)
            totals["ratio_mean"] = totals["ratio_mean"] * batch_tokens / updated_tokens if updated_tokens else 1.0
            for p in model.parameters():  # AdamW then steps as with a zero gradient: momentum and weight decay act
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
        with phase_threads("update"), self.timer("optimizer"):
            grad_norm = dp.clip_grad_norm_(model, cfg.max_grad_norm)
            check_update(self.name, totals["loss"], grad_norm)  # a NaN never reaches the weights
            fault_point("optimizer_step")
            optimizer.step()
            check_weights(self.name, model.parameters())
        model.eval()
        return {
            **totals,
            "grad_norm": float(grad_norm),
            "lr": optimizer.param_groups[0]["lr"],
            "zero_advantage_rows_skipped": skipped / max(rows, 1),
        }

    def _micro_batch(
        self,
        model,
        tok,
        reference,
        part,
        advantages,
        batch_rows: int,
        batch_tokens: int,
        tis_weights: Sequence[Sequence[float]] | None = None,
    ) -> dict[str, float]:
        """Loss and backward of one micro-batch, normalised by the whole batch's totals; its share of the stats."""
        cfg = self.config
        device = next(model.parameters()).device
        adv = advantages.to(device)
        batch = {k: v.to(device) for k, v in pad_completions(part, tok.pad_token_id).items()}
        # a rollout masked as truncated (mask_truncated) has no token in the loss, the KL term included
        mask = batch["completion_mask"].float() * trained_rows(part, cfg.mask_truncated)[:, None].to(device)
        width = int(batch["prompt_width"])
        with autocast(cfg, device):  # log-probs come out in float32 whatever the forward's precision
            logp = sequence_logprobs(model, batch["input_ids"], batch["attention_mask"], width, cfg.temperature)
        level = cfg.importance_sampling_level
        per_token, clipped = clipped_surrogate(logp, batch["old_logp"], adv, cfg.eps_low, cfg.eps_high, mask, level)
        if tis_weights is not None:  # the policy-gradient term only, as TRL and verl do; the KL term is exact
            per_token = per_token * pad_weights(tis_weights, per_token.shape[1]).to(device)
        kl = torch.zeros_like(per_token)
        if reference is not None:
            with torch.no_grad(), autocast(cfg, device):
                ref_logp = sequence_logprobs(
                    reference, batch["input_ids"], batch["attention_mask"], width, cfg.temperature
                )
            kl = k3_kl(logp, ref_logp)
            per_token = per_token + cfg.beta * kl

        def reduce(x: torch.Tensor) -> torch.Tensor:
            return normalise(
                (x * mask).sum(-1), mask.sum(-1), cfg.loss_norm, batch_rows, batch_tokens, cfg.max_new_tokens
            )

        loss = reduce(per_token)
        current_parallel().backward(loss)
        return {
            "loss": loss.item(),
            "kl": float(reduce(kl.detach())),
            "clip_fraction": float((clipped.float() * mask).sum()) / max(batch_tokens, 1),
            # the ratio the clip acted on (under GSPO each token carries its completion's), averaged over tokens
            "ratio_mean": float(
                (torch.exp(log_importance_ratio(logp.detach(), batch["old_logp"], mask, level)) * mask).sum()
            )
            / max(batch_tokens, 1),
        }

    def describe(self) -> dict:
        return asdict(self.config)


# Sections of a step, logged as time/<section> (seconds); rollout_seconds / update_seconds are kept as they were.
TIME_SECTIONS = ("generation", "scoring", "old_logprobs", "backward", "optimizer", "weight_sync", "checkpoint")


def needs_backward(advantages: torch.Tensor, skippable: bool) -> bool:
    """Whether a micro-batch's forward and backward must run. Rows whose advantage is 0 add 0 to the clipped
    surrogate at any ratio, so nothing to the loss or its gradient: where nothing else is in the loss (``skippable``:
    beta 0, so no KL term, and one process, since under data parallel every rank must run the same backward passes) a
    micro-batch of only such rows is skipped. Whole micro-batches, so the others are the same tensors as without the
    skip and the gradient is the same to the bit. On code most groups score all 0 early in a run."""
    return not skippable or bool((advantages != 0).any())  # a NaN is != 0: kept, and the update then fails on it


def push_weights(engine, model, dp) -> None:
    """Give an engine that holds its own copy of the weights (vLLM) the policy's. One that every rank shares (a
    vLLM server) is pushed to by rank 0 alone, and no rank samples again until that push is done."""
    caps = capabilities_of(engine, EngineCapabilities)
    if not caps.own_weights:
        return
    if dp.is_main or not caps.shared_by_ranks:
        engine.sync_weights(model)
    if caps.shared_by_ranks:
        dp.barrier()


def _applicable_mean(values: torch.Tensor, present: torch.Tensor) -> float:
    """The mean of ``values`` [B, M] over the answers written whose value is not NaN (0.0 when there is none)."""
    counted = present & ~values.isnan()
    return float(values[counted].sum() / counted.sum().clamp(min=1))


def _frozen_copy(model):
    reference = copy.deepcopy(model)
    reference.eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference
