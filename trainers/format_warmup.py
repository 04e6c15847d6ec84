"""The format warm-up: SFT on the answer format until the policy writes it, measured, before RL starts.

RL on M-answer rollouts (VPO) learns nothing while the policy cannot write M answers: every rollout is malformed,
its set holds one answer, and the set reward cannot tell the rollouts apart. Likewise a format reward (math's
``boxed``) has no signal while no sample uses the format. So the warm-up is judged by what it is for, the rate of
well-formed rollouts, sampled exactly as RL will sample them. Every GRPO-family trainer has it
(``FormatWarmupOptions``); it is on by default only for VPO.

**Well formed: one rule for every M** (``well_formed_answer``). A rollout is well formed when it holds exactly M
answers (M = 1: its whole text) and each of them is non-empty, scored, read by the task (``Score.unparsed`` false:
for every built-in task, an answer it extracted) and, when ``warmup_format`` names a reward component, earns it.
The per-answer test is the same whatever M is. It used to differ: an M-answer rollout counted when it had the
M-answer structure alone, a one-answer rollout only when the task read an answer from it. That judged VPO arms by a
looser standard per answer and GRPO arms by a stricter one, and the stop rule then measured different things:
SmolLM2-135M's one-answer maths rollouts were 69% well formed before any warm-up and its four-answer ones 0%, so a
comparison's GRPO arms took no SFT step and its VPO arms many. The rule is now one standard; the amount of warm-up
still differs between arms (the stop rule is a rate, not a step count), and ``warmup/steps`` says how much each run
took (the report's leaderboard shows it per run).

Targets join M of the policy's own answers, each sampled alone with the plain task prompt at one answer's budget
(harness/trainers/sft.py, ``targets="self"``). Which samples are chosen is ``warmup_selection``: ``"successes"`` ranks
the ones the task scores successful first (rejection sampling: extra supervised signal, so an experiment that
compares trainers gives every arm the same warm-up), ``"sampled"`` keeps sampling order (the format alone is
taught). The joined answers are written one of three ways (``warmup_targets``):

- ``"worked"``: each answer as the policy wrote it, its reasoning kept, with the answer the task extracted from it
  put in the task's short form after it when the answer does not already earn the format (math: "... so 3 + 4 is
  7.\n\boxed{7}");
- ``"extracted"``: only that short form of the extracted answer ("\boxed{7}"; maze: "Path: ..."): the policy's
  choices without its text. On maths at lr 1e-4 this stripped the reasoning and lowered the check rollouts'
  accuracy (38% -> 6% in the demo's earlier warm-up); on maze the policy's own text ran past the budget;
- ``"self"``: the samples as written, format or not.

Worked and extracted targets (``extracted_targets``) are built from M *distinct* answer texts of the problem's
samples, distinct extracted answers first: a problem with fewer than M is dropped (``warmup/skipped_fewer_than_m``),
never padded by repeating one (the diversity method would be taught to repeat itself; 7 of 16 four-answer maths
targets did). A sample cut at the token limit (``Completion.finished`` false) is never one of them
(``warmup/skipped_cut_samples``): its text stops mid-sentence, and a box or a ``Path:`` line glued after it would
teach the policy that an answer ends wherever the budget happens to cut it.

``"auto"`` (the default) takes the task's ``TaskCapabilities.warmup_targets`` where it names one (maze:
extracted), else worked for a task with reference completions (math), else self; and self when no problem gave
targets of its kind. The policy trains on them in rounds of ``check_every`` SFT steps with one optimizer; after
each round ``well_formed_rate`` samples rollouts of held-out problems; the warm-up stops at ``target_rate`` or after
``max_steps``, and takes no step when none of its targets is itself well formed (``well_formed_target``: SFT on
them cannot reach the rate; a random model's text, in which the task reads no answer).
The rate before and after and the steps taken are logged (``warmup/*``), the checks' rollouts kept
in samples.jsonl (phase ``warmup-check``); RL that starts below the target is warned about in one line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from harness import progress
from harness.plugins.size_bounds import COUNT, STEPS, bounded
from harness.scoring.multi_answer import instruct, join_answers, split_answers
from harness.trainers.policy_gradient import cycle_problems, score_rollouts
from harness.trainers.post_training import trainable_parameters
from harness.trainers.step_timer import StepTimer
from harness.types import Engine, Problem, SamplingParams, Score, Task, TaskCapabilities, capabilities_of

WARMUP_TARGETS = ("auto", "self", "extracted", "worked")
WARMUP_SELECTIONS = ("successes", "sampled")


@dataclass
class FormatWarmupOptions:
    """The warm-up's trainer options (GRPOConfig and its subclasses): off while warmup_steps is 0 (VPO: 64)."""

    # SFT on the policy's own answers written in the format, in rounds of warmup_check_every steps, until
    # warmup_target_rate of sampled rollouts are well formed or warmup_steps are spent
    warmup_steps: int = bounded(0, 0, STEPS)
    # a reward component each answer must also earn to count as well formed (math: "boxed"); with or without it, a
    # rollout is well formed when it holds M answers the task reads (code: a program), whatever M is
    warmup_format: str = ""
    warmup_check_every: int = bounded(8, 1, STEPS)  # warm-up steps between measurements of the well-formed rate
    warmup_target_rate: float = 0.9  # the warm-up stops once this share of sampled rollouts is well formed
    # stop once this many checks in a row found the rate, already above 0, no higher than its best so far (a plateau:
    # on code at 135M, 62% after 8 steps, then 56% after 16); 0 never stops early
    warmup_patience: int = bounded(1, 0, STEPS)
    warmup_samples: int = bounded(8, 1, COUNT)  # samples per problem the warm-up draws to build its targets (>= M)
    # problems the targets come from (sampling them all would cost more than RL)
    warmup_problems: int = bounded(16, 1, COUNT)
    warmup_check_problems: int = bounded(8, 1, COUNT)  # other problems whose rollouts (2 each) measure the rate
    # 1e-4: at 2e-5 SmolLM2-135M wrote no well-formed VPO rollout after the warm-up
    warmup_lr: float = 1e-4  # the warm-up's learning rate
    warmup_batch_size: int = bounded(4, 1, COUNT)  # (prompt, target) pairs per warm-up step
    # "worked": M of its answers with their reasoning, each answer put in the task's form; "extracted": the answers
    # alone in that form; "self": as written; "auto": the task's choice, else worked with reference completions,
    # else self (module docstring)
    warmup_targets: str = "auto"
    # which of its samples make the targets: "successes" first (rejection sampling), or "sampled" order (format only)
    warmup_selection: str = "successes"

    def check_warmup(self, name: str) -> None:
        if not 0.0 <= self.warmup_target_rate <= 1.0:
            raise ValueError(f"{name}: warmup_target_rate must be in [0, 1], got {self.warmup_target_rate!r}")
        for option in ("warmup_check_every", "warmup_problems", "warmup_check_problems", "warmup_batch_size"):
            if int(getattr(self, option)) < 1:
                raise ValueError(f"{name}: {option} must be >= 1, got {getattr(self, option)!r}")
        if self.warmup_targets not in WARMUP_TARGETS:
            raise ValueError(
                f"{name}: warmup_targets must be one of {', '.join(WARMUP_TARGETS)}, got {self.warmup_targets!r}"
            )
        if self.warmup_selection not in WARMUP_SELECTIONS:
            raise ValueError(
                f"{name}: warmup_selection must be one of {', '.join(WARMUP_SELECTIONS)}, got {self.warmup_selection!r}"
            )
        if self.warmup_patience < 0:
            raise ValueError(f"{name}: warmup_patience must be >= 0, got {self.warmup_patience!r}")
        if self.warmup_steps < 0:
            raise ValueError(f"{name}: warmup_steps must be >= 0, got {self.warmup_steps!r}")


@dataclass
class WarmupPlan:
    m: int  # answers per rollout
    delimiter: str
    max_new_tokens: int  # the rollout budget RL samples with (all M answers)
    temperature: float
    max_steps: int  # SFT steps at most
    check_every: int  # SFT steps between checks of the rate
    target_rate: float  # stop once this share of sampled rollouts is well formed
    samples_per_problem: int  # answers sampled per target problem (>= M)
    lr: float
    batch_size: int
    micro_batch: int
    seed: int
    targets: str = "self"  # "extracted", or "auto": extracted where the task has reference completions (docstring)
    format_component: str = ""  # a reward component every answer must earn to be well formed ("": structure only)
    name: str = "vpo"  # the trainer, for its messages
    autocast: str = ""  # the SFT steps' forwards in this precision: the trainer's resolved autocast (bf16 or "")
    patience: int = 0  # checks in a row with a nonzero rate no higher than the best before the warm-up stops (0: never)
    selection: str = "successes"  # "successes" first, or "sampled" order (FormatWarmupOptions.warmup_selection)


def well_formed_answer(text: str, score: Score | None, format_component: str = "") -> bool:
    """One answer of a rollout, judged by the rule every M shares (module docstring): non-empty, scored, read by
    the task (not ``unparsed``) and, when ``format_component`` is named, earning it."""
    if not text.strip() or score is None or score.unparsed:
        return False
    return not format_component or score.rewards.get(format_component, 0.0) > 0


def well_formed_rate(
    engine: Engine, task: Task, problems: Sequence[Problem], plan: WarmupPlan, seed: int, samples: int = 2
) -> tuple[float, list[dict]]:
    """Share of rollouts that are well formed (exactly M answers, each passing ``well_formed_answer``: the same test
    for M = 1 and M > 1), sampled in RL's format and budget; and the rollouts as samples.jsonl records (phase
    "warmup-check"), so a run that starts malformed shows what it wrote. Each record says whether one of its
    answers was right too (``success``, as a set counts: any of its M answers): what the warm-up did to accuracy,
    before RL."""
    completions = engine.generate(
        [instruct(task.messages(p), plan.m, plan.delimiter) for p in problems],
        SamplingParams(n=samples, max_new_tokens=plan.max_new_tokens, temperature=plan.temperature, seed=seed),
        desc="warm-up check",
    )
    # RL's own scoring: the M answers split as RL splits them, batch-scored; an answer whose scorer raised is None
    scored = score_rollouts(task, problems, completions, (), plan.m, plan.delimiter).scores
    records = []
    for c, scores in zip(completions, scored, strict=True):
        answers = split_answers(c.text, plan.m, plan.delimiter)
        records.append(
            {
                "problem_id": problems[c.prompt_index].id,
                "phase": "warmup-check",
                "text": c.text,
                "well_formed": len(answers) == len(scores) == plan.m
                and all(well_formed_answer(a, s, plan.format_component) for a, s in zip(answers, scores, strict=True)),
                "success": any(s is not None and s.success for s in scores),
            }
        )
    return sum(r["well_formed"] for r in records) / max(len(records), 1), records


def success_rate(records: Sequence[dict]) -> float:
    return sum(r["success"] for r in records) / max(len(records), 1)


def format_warmup(
    policy,
    engine: Engine,
    task: Task,
    target_problems: Sequence[Problem],
    check_problems: Sequence[Problem],
    plan: WarmupPlan,
    *,
    store,
    plugins,
) -> dict[str, float]:
    """Train ``policy`` on the answer format until ``check_problems``' rollouts are well formed at
    ``plan.target_rate`` (or ``plan.max_steps`` are spent). Returns the figures it logged under ``warmup/``."""
    from harness.trainers.sft import SFTTrainer, target_records  # SFT's targets, records and update

    sft = SFTTrainer(
        plugins=plugins,
        steps=plan.max_steps,
        targets="self",
        answers_per_rollout=plan.m,
        delimiter=plan.delimiter,
        samples_per_problem=max(plan.samples_per_problem, plan.m),
        max_target_tokens=plan.max_new_tokens,
        lr=plan.lr,
        seed=plan.seed,
        temperature=plan.temperature,
        batch_size=plan.batch_size,
        micro_batch=plan.micro_batch,
        select=plan.selection,
    )
    model, tok = policy.model, policy.tokenizer
    started = time.perf_counter()
    timer = StepTimer()  # where its time goes: checks and SFT steps (the targets' sampling: warmup/<kind>_seconds)
    with timer("check"):
        before, checked = well_formed_rate(engine, task, check_problems, plan, seed=plan.seed)
    store.write_samples({**r, "step": 0} for r in checked)
    rates, success_before = [before], success_rate(checked)
    examples, stats = sft.build_targets(engine, task, target_problems)
    kind = resolve_targets(plan.targets, task)
    if kind in ("extracted", "worked"):
        extracted, dropped = extracted_targets(
            task, examples, plan.m, plan.delimiter, worked=kind == "worked", format_component=plan.format_component
        )
        stats.update(dropped)
        if extracted or plan.targets != "auto":
            examples = extracted
        else:  # "auto", and no problem gave such targets (a model that never commits): teach them as written
            kind = "self"
            print(
                f"{plan.name}: warm-up: no problem gave {plan.m} distinct answer(s) the task could read in samples "
                f"that ended (nothing extracted: {dropped['skipped_nothing_extracted']}, fewer than {plan.m}: "
                f"{dropped['skipped_fewer_than_m']} problems); its targets are the samples as written",
                file=sys.stderr,
            )
    if not examples:
        raise ValueError(f"{plan.name} warm-up: no targets from {len(target_problems)} problems ({stats})")
    store.write_samples(target_records(examples, kind))  # samples.jsonl says which kind of target it was
    what = f"{plan.m}-answer rollouts" if plan.m > 1 else "answers"
    formed = sum(well_formed_target(task, e, plan) for e in examples)
    max_steps = plan.max_steps
    if not formed and before < plan.target_rate:
        # SFT can only teach what its targets show: none of them passes the stop rule's own test (a random model's
        # text, in which the task reads no answer), so no number of steps reaches the target rate. Without this bound
        # VPO's 64 steps and 8 checks ran 7 minutes on tiny-random for nothing.
        max_steps = 0
        print(
            f"{plan.name}: format warm-up skipped: none of its {len(examples)} targets is itself well formed (the "
            f"task reads no answer in them), so SFT on them cannot reach {plan.target_rate:.0%} well-formed {what}",
            file=sys.stderr,
        )
    pairs = sft.encode(tok, examples)
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=plan.lr)  # a LoRA policy's adapters only
    order = cycle_problems(pairs, plan.seed)
    step = 0
    # at most max_steps: the bar's estimate is the longest the warm-up can take (it stops early at the target rate)
    bar = progress.bar(max_steps, f"{plan.name} format warm-up (SFT steps, at most)", "step")
    while rates[-1] < plan.target_rate and step < max_steps and not plateaued(rates, plan.patience):
        for _ in range(min(plan.check_every, max_steps - step)):
            step_started = time.perf_counter()
            metrics = sft.update(
                model,
                tok.pad_token_id,
                optimizer,
                [next(order) for _ in range(plan.batch_size)],
                autocast=plan.autocast,
            )
            took = time.perf_counter() - step_started  # not `started`: warmup/seconds is the whole warm-up's
            timer.seconds["sft"] = timer.seconds.get("sft", 0.0) + took
            store.log_step(step, {**metrics, "seconds": took}, stage="warmup")
            step += 1
            bar.update(1)
        with timer("check"):
            rate, checked = well_formed_rate(engine, task, check_problems, plan, seed=plan.seed + step)
        store.write_samples({**r, "step": step} for r in checked)  # step: SFT steps taken before this check
        rates.append(rate)
        bar.set_postfix(well_formed=f"{rate:.0%}")
    bar.close()
    figures = {
        "warmup/well_formed_before": before,
        "warmup/well_formed_after": rates[-1],
        "warmup/well_formed_rates": rates,
        "warmup/steps": step,
        "warmup/targets": len(examples),
        "warmup/targets_well_formed": formed,
        "warmup/check_rollouts": len(checked),
        "warmup/check_success_before": success_before,
        "warmup/check_success_after": success_rate(checked),
        "warmup/seconds": time.perf_counter() - started,
        "warmup/check_seconds": timer.seconds.get("check", 0.0),  # the rate checks' rollouts, sampled and scored
        "warmup/sft_seconds": timer.seconds.get("sft", 0.0),  # the SFT steps
        **{f"warmup/{k}": v for k, v in stats.items()},
    }
    store.update_metrics(figures)
    # one line the user sees either way: the format before and after, and what it did to accuracy
    print(
        f"{plan.name}: format warm-up: {before:.0%} -> {rates[-1]:.0%} well-formed {what} in {step} SFT steps "
        f"(right: {success_before:.0%} -> {figures['warmup/check_success_after']:.0%}; {len(checked)} check "
        f"rollouts of held-out problems)",
        file=sys.stderr,
    )
    if rates[-1] < plan.target_rate:
        why = (
            f"the rate stopped rising ({' -> '.join(f'{r:.0%}' for r in rates)}; trainer.warmup_patience)"
            if plateaued(rates, plan.patience)
            else "no target was well formed"
            if not formed
            else "raise trainer.warmup_steps"
        )
        print(
            f"{plan.name}: warning: RL starts with {rates[-1]:.0%} well-formed {what} (target "
            f"{plan.target_rate:.0%}) after {step} warm-up steps; {why}",
            file=sys.stderr,
        )
    return figures


def well_formed_target(task: Task, example, plan: WarmupPlan) -> bool:
    """Whether a target passes the test the stop rule applies to rollouts (``well_formed_answer`` on each of its M
    answers); a scorer that raises on it makes it not well formed."""
    answers = split_answers(example.target, plan.m, plan.delimiter) if plan.m > 1 else [example.target]
    if len(answers) != plan.m:
        return False
    for answer in answers:
        try:
            score = task.score(example.problem, answer)
        except Exception:
            return False
        if not well_formed_answer(answer, score if isinstance(score, Score) else None, plan.format_component):
            return False
    return True


def plateaued(rates: Sequence[float], patience: int) -> bool:
    """Whether the last ``patience`` checks each found a nonzero rate no higher than the best before them. A rate
    still at 0 is a slow start, not a plateau: the format has not begun to show."""
    if patience < 1 or len(rates) <= patience:
        return False
    return all(0 < rates[i] <= max(rates[:i]) for i in range(len(rates) - patience, len(rates)))


def resolve_targets(kind: str, task: Task) -> str:
    """ "auto": the task's own choice (TaskCapabilities.warmup_targets), else "worked" for a task that declares its
    answer form (reference completions), else "self"."""
    if kind != "auto":
        return kind
    caps = capabilities_of(task, TaskCapabilities)
    return caps.warmup_targets or ("worked" if caps.reference_completions else "self")


def written_answer(task: Task, problem: Problem, answer: str) -> str:
    """``answer`` in the task's short answer form: its reference completion of that answer, else a plain sentence."""
    if capabilities_of(task, TaskCapabilities).reference_completions:
        text = task.reference_completion(replace(problem, answer=answer))
        if text:
            return text
    return f"The answer is {answer}."


def worked_answer(task: Task, problem: Problem, text: str, extracted: str, format_component: str) -> str:
    """The policy's ``text`` with its reasoning, and its ``extracted`` answer in the task's short form after it,
    unless the text already earns ``format_component`` (or, with none named, already holds that short form)."""
    short = written_answer(task, problem, extracted)
    if format_component:
        if task.score(problem, text).rewards.get(format_component, 0.0) > 0:
            return text
    elif short in text:
        return text
    return f"{text.rstrip()}\n{short}"


def extracted_targets(
    task: Task, examples: Sequence, m: int, delimiter: str, worked: bool = False, format_component: str = ""
) -> tuple[list, dict[str, int]]:
    """Each example's M answers replaced by M distinct answers of its problem's samples, written short (or,
    ``worked``, each as the policy wrote it with that short form after it: worked_answer). The candidates are the
    example's ``pool`` (its problem's samples, in selection order, with whether each ended), else its answers;
    only samples that ended (never one cut at the token limit), non-empty, without the delimiter and with an answer
    the task extracted are used: distinct extracted answers first, then (worked) distinct texts. A problem with
    fewer than M distinct written answers is dropped, not padded with repeats. A target that repeats one already
    kept for its problem (one-answer targets: two samples with the same answer) is kept once.

    Returns the examples and counts: ``skipped_nothing_extracted`` (examples with no usable answer at all),
    ``skipped_fewer_than_m`` (with some, but fewer than M distinct), ``skipped_cut_samples`` (samples left out
    because they were cut at the token limit)."""
    out, seen = [], set()
    counts = {"skipped_nothing_extracted": 0, "skipped_fewer_than_m": 0, "skipped_cut_samples": 0}
    for example in examples:
        pool = example.pool or [(text, True) for text in example.answers]  # hand-made: its answers, as ended
        usable: list[tuple[str, str]] = []  # (text, the answer the task extracted from it)
        for text, finished in pool:
            if not text.strip() or (m > 1 and delimiter in text):
                continue
            if not finished:  # cut mid-answer: no format glued after it, no answer read from it
                counts["skipped_cut_samples"] += 1
                continue
            extracted = task.score(example.problem, text).extracted
            if extracted is not None:
                usable.append((text, extracted))
        if not usable:
            counts["skipped_nothing_extracted"] += 1
            continue
        picks: list[tuple[str, str]] = []
        for text, answer in usable:  # distinct answers first: the spread the M-answer format is for
            if len(picks) < m and answer not in {a for _, a in picks}:
                picks.append((text, answer))
        if worked:  # then distinct texts: the same answer reached another way
            for text, answer in usable:
                if len(picks) < m and text.strip() not in {t.strip() for t, _ in picks}:
                    picks.append((text, answer))
        answers = [
            worked_answer(task, example.problem, text, answer, format_component)
            if worked
            else written_answer(task, example.problem, answer)
            for text, answer in picks
        ]
        if len(answers) < m or len(set(answers)) < m:  # never padded with repeats
            counts["skipped_fewer_than_m"] += 1
            continue
        if (example.problem.id, tuple(answers)) in seen:
            continue
        seen.add((example.problem.id, tuple(answers)))
        out.append(
            replace(
                example,
                target=join_answers(answers, delimiter),
                answers=answers,
                success=[task.score(example.problem, a).success for a in answers],
            )
        )
    return out, counts
