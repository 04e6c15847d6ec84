"""Best-of-k: n candidate answers per problem, each scored; unbiased pass@k and best@k for each k <= n, the
diversity of the candidates and the budget spent.

Multi-answer policies (VPO): with ``answers_per_rollout`` M > 1 the prompt asks for M answers separated by ``delimiter``
(harness/scoring/multi_answer.py), each rollout is split into its answers, and every answer is a candidate. The budget
counts candidates, not rollouts, so a policy is compared with its M=1 self at the same n: the searcher samples ceil(n /
M) rollouts per problem and keeps the first n answers (rollout-major). A rollout with fewer than M answers is malformed;
its missing answers are still candidates (failures, scalar 0, text "", marked ``missing``), so every problem has exactly
n candidates and the budget is charged honestly.

pass@k and best@k are SET-LEVEL: the rollout is the unit (harness/metrics/unbiased.py ``set_pass_at_ks``). The M
answers of one rollout are written together, not drawn independently, so k candidates are the answers of k/M whole
rollouts; a rollout succeeds when any of its answers does, its best is its best answer (a missing answer is never
its best), and the unbiased estimator runs over the R = n // M whole rollouts of each problem (with c_R successful):
pass@k = 1 - C(R - c_R, k/M) / C(R, k/M). They are reported only for k a multiple of M (a partial rollout is not a
set the policy writes; a construction-time warning says so when no k is one); when n is not a multiple of M, the
last, cut rollout is left out of them. With M = 1 they are the usual per-sample estimators, value for value. With
M > 1 the per-answer figures over the n pooled candidates are kept as ``pooled_pass@k`` and ``pooled_best@k`` for
every k: they treat a rollout's answers as independent draws and are biased (two rollouts [1,0,0,0], [1,0,0,0]
give pooled_pass@4 = 0.786, though every 4-answer set the policy writes succeeds: pass@4 = 1).

Metrics (flat; the caller prefixes the phase): pass@k, best@k, pooled_pass@k and pooled_best@k (M > 1),
mean_reward/<component> (over scored candidates), unparsed_rate and wrong_rate (over scored candidates),
success_rate (over all candidates), num_candidates, num_skipped (the scorer raised), num_tokens; budget/candidates,
budget/rollouts, budget/tokens (generated); malformed_rollouts and missing_answers (M > 1); diversity/*
(harness/metrics/diversity.py, averaged over problems): distinct_answers (count), distinct_answer_fraction,
distinct_1, distinct_2, coverage (problems whose task has components besides the primary), embedding (option
``embedding_diversity``).

Behaviour control (option ``behaviours``, a comma string of names from ``plugins["behaviour"]``; the searcher is
built with ``plugins=``, which ``build_plugin`` passes): every written answer is scored by each named
behaviour scorer (text, problem) -> [0, 1], whatever its task score; ``behaviour/<name>`` is the mean over those
candidates (missing answers are not text and are left out, as is a value whose scorer raised). That scorer is the
one VSPO and reward-shaped GRPO train on, so each behaviour that declares a held-out evaluator
(``Behaviour.held_out``, one no trainer uses; tasks/held_out.py for the built-ins) is run on the same answers, in one
batch per engine call, and reported beside it as ``heldout/<name>``, the mean over the same candidates; a behaviour
without one gets no heldout/ figure. An unknown name is a one-line error when the searcher is constructed.

samples.jsonl gets one record per candidate: sample_index (the candidate's index within its problem, 0..n-1),
rollout_index and answer_index (where it came from), the problem's ``prompt`` (``Problem.prompt``, the question
without chat template or format instruction) and ``reference`` (``Problem.answer``, None when the task has none), so
a row can be judged on its own; its text, the Score's fields, and the rollout's num_tokens and finished (with M > 1
they describe the whole rollout, shared by its answers); with ``behaviours``, also "behaviours": {name: score} ({}
for a missing answer, None for a scorer that raised) and, when one of them has a held-out evaluator, "held_out":
{name: its held-out score} for those that do (same conventions).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from harness import progress
from harness.failures import PluginFailed, as_float, exits_named_in
from harness.metrics import diversity
from harness.metrics.unbiased import (
    best_at_ks,
    pass_at_ks,
    rollout_outcomes,
    set_best_at_ks,
    set_level_ks,
    set_pass_at_ks,
)
from harness.plugins.option_help import Bounds
from harness.plugins.options import coerce
from harness.plugins.size_bounds import COUNT, SEED, TOKENS
from harness.runner.distributed import current as current_parallel
from harness.scoring.batch import score_all
from harness.scoring.multi_answer import DELIMITER, instruct, split_answers
from harness.types import (
    Behaviour,
    Completion,
    Engine,
    Problem,
    SamplingParams,
    Score,
    SearcherCapabilities,
    Task,
    scalarize,
)

if TYPE_CHECKING:
    from harness.store.run_folder import RunStore


def _parse_ks(k: Sequence[int] | str | int) -> list[int]:
    """[1, 4, 8], "1,4,8" (a CLI option) or a single int -> sorted unique ints."""
    if isinstance(k, str):
        items: list[Any] = [part for part in k.split(",") if part.strip()]
    elif isinstance(k, int):
        items = [k]
    else:
        items = list(k)
    return sorted({int(item) for item in items})


# Bounds no real evaluation needs (pass@k papers stop near k = 1024; contexts near 128k tokens), checked before the
# model loads: samples are kept until scored, so an n of 1e20 grew until the kernel killed the process. The options
# declare them (the converter refuses a value outside them); the constructor checks them again for a caller in Python.
MAX_N = COUNT
MAX_NEW_TOKENS = TOKENS


class BestOfK:
    """The Searcher protocol: n candidates per problem; pass@k counts the task's primary success, best@k uses the
    scalarised reward (task.reward_weights); both over whole rollouts when a rollout writes M > 1 answers."""

    # under torchrun / accelerate launch every rank samples and scores its share of the problems
    capabilities = SearcherCapabilities(answers_per_rollout=True, behaviours=True, data_parallel=True)

    def __init__(
        self,
        n: Annotated[int, Bounds(1, COUNT)] = 8,  # candidate answers per problem
        k: Sequence[int] | str | int = (1, 4, 8),  # the k of pass@k and best@k, each <= n ("1,4,8")
        max_new_tokens: Annotated[int, Bounds(1, TOKENS)] = 128,  # generation budget per rollout
        temperature: float = 1.0,  # sampling temperature; 0 is greedy
        top_p: float = 1.0,  # nucleus sampling: the smallest set of tokens holding this probability
        # sampling seed (each sample's stream derives from it, the prompt and its index)
        seed: Annotated[int, SEED] = 0,
        # problems sampled together (times M with M answers per rollout)
        batch_prompts: Annotated[int, Bounds(1, COUNT)] = 8,
        # M: answers written in one rollout, separated by `delimiter` (VPO)
        answers_per_rollout: Annotated[int, Bounds(1, COUNT)] = 1,
        delimiter: str = DELIMITER,  # separates the M answers of a rollout
        embedding_diversity: bool | str = True,  # also report the candidates' embedding diversity (MiniLM, offline)
        coverage_threshold: float = 1.0,  # a reward component is covered when a candidate scores at least this
        behaviours: str | Sequence[str] = "",  # registered behaviour scorers to report, comma-separated
        plugins: Any = None,
    ) -> None:
        self.n = int(n)
        self.ks = _parse_ks(k)
        self.m = int(answers_per_rollout)
        if self.n < 1 or int(batch_prompts) < 1 or self.m < 1:
            raise ValueError(
                f"best-of-k needs n, batch_prompts and answers_per_rollout >= 1, got n={n}, "
                f"batch_prompts={batch_prompts}, answers_per_rollout={answers_per_rollout}"
            )
        if self.n > MAX_N or not 1 <= int(max_new_tokens) <= MAX_NEW_TOKENS:  # 1e20 grew to 18 GB before the OOM kill
            raise ValueError(
                f"best-of-k: n must be at most {MAX_N} and max_new_tokens in 1..{MAX_NEW_TOKENS}, got "
                f"n={n}, max_new_tokens={max_new_tokens}"
            )
        if not self.ks or self.ks[0] < 1 or self.ks[-1] > self.n:
            raise ValueError(f"best-of-k: every k must be in 1..n={self.n}, got k={self.ks}")
        if self.m > 1 and not str(delimiter).strip():
            raise ValueError("best-of-k: the delimiter must not be blank")
        self.rollouts = math.ceil(self.n / self.m)  # per problem
        if self.m > 1 and not set_level_ks(self.ks, self.m, self.n // self.m):
            print(
                f"best-of-k: warning: no k in {self.ks} is a multiple of answers_per_rollout={self.m} (and <= n="
                f"{self.n}): pass@k and best@k count whole rollouts, so only pooled_pass@k and pooled_best@k are "
                f"reported",
                file=sys.stderr,
            )
        self.delimiter = str(delimiter)
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        if not (self.temperature >= 0 and 0 < self.top_p <= 1):  # 0: greedy
            raise ValueError(
                f"best-of-k: need temperature >= 0 and 0 < top_p <= 1, got temperature={temperature!r}, top_p={top_p!r}"
            )
        self.seed = int(seed)
        self.batch_prompts = int(batch_prompts)
        self.embedding_diversity = bool(coerce(embedding_diversity, True))  # "false" from --set is False
        self.coverage_threshold = float(coverage_threshold)
        names = behaviours.split(",") if isinstance(behaviours, str) else list(behaviours)
        self.behaviours: dict[str, Any] = {}  # name -> scorer (text, problem) -> [0, 1]
        self.held_out: dict[str, Any] = {}  # name -> its Behaviour, for those with a held-out evaluator
        for name in (str(n).strip() for n in names):
            if not name or name in self.behaviours:
                continue
            if plugins is None:
                raise ValueError(f"best-of-k: behaviours={name!r} needs the plugin registries (plugins=)")
            if name not in plugins["behaviour"]:
                raise ValueError(
                    f"best-of-k: unknown behaviour {name!r}; available: "
                    f"{', '.join(plugins['behaviour'].names()) or '(none)'}"
                )
            behaviour = plugins["behaviour"].get(name).load()
            plugin = plugins["behaviour"].get(name).plugin  # its sys.exit ends the run naming it (failures.py)
            self.behaviours[name] = exits_named_in(behaviour.score, "behaviour", name, plugin, "scoring an answer")
            if isinstance(behaviour, Behaviour) and behaviour.has_held_out:
                self.held_out[name] = behaviour

    def search(
        self, engine: Engine, task: Task, problems: Sequence[Problem], *, phase: str, store: RunStore
    ) -> dict[str, float]:
        # Under a launcher each rank takes its contiguous share of the problems (the engine seeds every sample by
        # its prompt, so they are the samples one process draws); the per-problem results are gathered, rank 0
        # writes the other ranks' samples after its own, and every rank computes the metrics of them all.
        dp = current_parallel()
        mine = problems[dp.share(len(problems))]
        # one bar for the phase's samples: the engine's calls (a batch_prompts chunk each) count into it
        with progress.bar(len(mine) * self.rollouts, f"{phase} best-of-k", "sample"):
            done, rollouts, tokens = self._search(engine, task, mine, phase=phase, store=store)
        totals = _Totals()
        for rank, (part, part_rollouts, part_tokens) in enumerate(dp.gather((done, rollouts, tokens))):
            if rank > 0:
                store.write_samples([r for records, _, _ in part for r in records])
            for records, spread, malformed in part:
                totals.add_problem(records, spread, malformed, self.m)
            totals.rollouts += part_rollouts
            totals.tokens += part_tokens
        return self._metrics(totals)

    def _search(
        self, engine: Engine, task: Task, problems: Sequence[Problem], *, phase: str, store: RunStore
    ) -> tuple[list[tuple[list[dict[str, Any]], dict[str, float | None], int]], int, int]:
        """Each problem's (records, diversity, malformed rollouts), in order; the rollouts and tokens sampled."""
        embedding = self.embedding_diversity and _embedding_model_available()  # asked before paying for samples
        done: list[tuple[list[dict[str, Any]], dict[str, float | None], int]] = []
        rollouts = tokens = 0
        # A rollout of M answers carries M candidates, so a call takes M times batch_prompts problems: its rows
        # (problems x rollouts) are those of one-answer rollouts at the same n. Each call ends with its longest
        # rollout decoding alone to the budget; with VPO's M = 4 and n = 4 a problem is one row, and 8 problems a
        # call made an evaluation of 16 problems pay that tail twice (on code most rollouts run to the budget).
        per_call = self.batch_prompts * self.m
        for start in range(0, len(problems), per_call):
            batch = problems[start : start + per_call]
            # One seed for every batch: the engine derives each sample's random stream from (seed, prompt, sample
            # index), so batches never replay a stream and results do not depend on batch_prompts.
            params = SamplingParams(
                n=self.rollouts,
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                seed=self.seed,
            )
            prompts = [instruct(task.messages(p), self.m, self.delimiter) for p in batch]
            completions = engine.generate(prompts, params, desc=f"{phase} best-of-k")
            if len(completions) != len(batch) * self.rollouts:
                raise RuntimeError(
                    f"engine returned {len(completions)} completions for {len(batch)} prompts x "
                    f"{self.rollouts} rollouts"
                )
            rollouts += len(completions)
            tokens += sum(len(c.token_ids) for c in completions)
            by_prompt: list[list[Completion]] = [[] for _ in batch]
            for completion in completions:
                by_prompt[completion.prompt_index].append(completion)

            chosen = [self._candidates(sorted(rollouts, key=lambda c: c.sample_index)) for rollouts in by_prompt]
            # One call for the batch's written answers: a task with score_many (code) scores them in parallel.
            written = [
                (problem, c[2])
                for problem, (candidates, _) in zip(batch, chosen, strict=True)
                for c in candidates
                if c[2] is not None
            ]
            scores = iter(score_all(task, written))
            held_out = iter(self._held_out_scores(written))
            records: list[dict[str, Any]] = []
            for problem, (candidates, malformed) in zip(batch, chosen, strict=True):
                mine = [
                    self._record(
                        task,
                        problem,
                        phase,
                        i,
                        *c,
                        None if c[2] is None else next(scores),
                        {} if c[2] is None else next(held_out),
                    )
                    for i, c in enumerate(candidates)
                ]
                done.append((mine, self._diversity(mine, embedding), malformed))
                records.extend(mine)
            store.write_samples(records)  # per batch: a run that dies later keeps what it has paid for
        return done, rollouts, tokens

    def _candidates(self, rollouts: list[Completion]) -> tuple[list[tuple[int, int, str | None, Completion]], int]:
        """The problem's first n candidates as (rollout_index, answer_index, text, rollout), text None for an answer
        a malformed rollout did not write; and the number of malformed rollouts."""
        out: list[tuple[int, int, str | None, Completion]] = []
        malformed = 0
        for completion in rollouts:
            # M = 1 keeps the completion's text exactly as generated; M > 1 strips each answer (split_answers).
            answers = split_answers(completion.text, self.m, self.delimiter)
            malformed += len(answers) < self.m
            for a in range(self.m):
                out.append((completion.sample_index, a, answers[a] if a < len(answers) else None, completion))
        return out[: self.n], malformed

    def _held_out_scores(self, written: list[tuple[Problem, str]]) -> list[dict[str, float | None]]:
        """{name: held-out score} per written answer, each behaviour's evaluator called once for the batch."""
        out: list[dict[str, float | None]] = [{} for _ in written]
        for name, behaviour in self.held_out.items():
            values = behaviour.held_out_scores([t for _, t in written], [p for p, _ in written])
            for one, value in zip(out, values, strict=True):
                one[name] = value
        return out

    def _record(
        self,
        task: Task,
        problem: Problem,
        phase: str,
        index: int,
        rollout_index: int,
        answer_index: int,
        text: str | None,
        completion: Completion,
        score: Score | Exception | None,
        held_out: dict[str, float | None] | None = None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "problem_id": problem.id,
            "phase": phase,
            "sample_index": index,
            "rollout_index": rollout_index,
            "answer_index": answer_index,
            "prompt": problem.prompt,
            "reference": problem.answer,
            "text": text or "",
            "num_tokens": len(completion.token_ids),
            "finished": completion.finished,
        }
        if self.behaviours:  # behaviour control: scored on every written answer, whatever the task's score
            record["behaviours"] = (
                {}
                if text is None
                else {name: _behaviour_score(scorer, text, problem) for name, scorer in self.behaviours.items()}
            )
            if self.held_out:  # the same answers read by an evaluator no trainer uses
                record["held_out"] = dict(held_out or {})
        if text is None:  # the rollout stopped short of M answers: a failure that still counts as a candidate
            return record | {
                "extracted": None,
                "unparsed": None,
                "rewards": {},
                "primary": None,
                "success": False,
                "scalar": 0.0,
                "missing": True,
            }
        try:
            if isinstance(score, Exception):
                raise score
            scalar = scalarize(score.rewards, task.reward_weights)
        except Exception as exc:  # a scorer bug on one answer must not lose the rest of the run
            return record | {
                "extracted": None,
                "unparsed": None,
                "rewards": {},
                "primary": None,
                "success": False,
                "scalar": None,
                "error": f"{type(exc).__name__}: {exc}",
            }
        return record | {
            "extracted": score.extracted,
            "unparsed": score.unparsed,
            "rewards": dict(score.rewards),
            "primary": score.primary,
            "success": score.success,
            "scalar": scalar,
        }

    def _diversity(self, records: list[dict[str, Any]], embedding: bool) -> dict[str, float | None]:
        """One problem's diversity metrics (harness/metrics/diversity.py). Texts are the answers written (missing ones
        are
        not text); rewards those of scored candidates."""
        extracted = [r["extracted"] for r in records]
        texts = [r["text"] for r in records if not r.get("missing")]
        scored = [r for r in records if r["primary"] is not None]
        out: dict[str, float | None] = {
            "distinct_answers": float(diversity.distinct_answers(extracted)),
            "distinct_answer_fraction": diversity.distinct_answer_fraction(extracted),
            "distinct_1": diversity.distinct_n(texts, 1),
            "distinct_2": diversity.distinct_n(texts, 2),
            "coverage": diversity.reward_coverage(
                [r["rewards"] for r in scored], scored[0]["primary"] if scored else None, self.coverage_threshold
            ),
        }
        if embedding:
            out["embedding"] = diversity.embedding_diversity(texts)
        return out

    def _metrics(self, t: _Totals) -> dict[str, float]:
        total = t.scored + t.skipped + t.missing
        metrics: dict[str, float] = {}
        if t.counts:
            # Set-level (the rollout is the unit); with M = 1 exactly the per-sample estimators over the n candidates
            if set_level_ks(self.ks, self.m, min(r for r, _ in t.rollout_counts)):
                metrics.update({f"pass@{k}": v for k, v in set_pass_at_ks(t.rollout_counts, self.ks, self.m).items()})
                metrics.update({f"best@{k}": v for k, v in set_best_at_ks(t.rollout_bests, self.ks, self.m).items()})
            if self.m > 1:  # answers pooled as if independent: biased, kept under a name that says so
                metrics.update({f"pooled_pass@{k}": v for k, v in pass_at_ks(t.counts, self.ks).items()})
                metrics.update({f"pooled_best@{k}": v for k, v in best_at_ks(t.scalars, self.ks).items()})
        # over the candidates each component applies to (NaN: a reward function's None), as TRL's nanmean
        metrics.update(
            {f"mean_reward/{name}": value / max(t.reward_counts[name], 1) for name, value in t.reward_sums.items()}
        )
        # unparsed (no answer found) and wrong (an answer, not the right one) are reported apart: a broken extractor
        # shows up as a jump in unparsed_rate, not as a model that got worse.
        metrics["unparsed_rate"] = t.unparsed / t.scored if t.scored else 0.0
        metrics["wrong_rate"] = t.wrong / t.scored if t.scored else 0.0
        metrics["success_rate"] = t.successes / total if total else 0.0
        metrics["num_candidates"] = total
        metrics["num_skipped"] = t.skipped
        metrics["num_tokens"] = t.tokens
        metrics["budget/candidates"] = total
        metrics["budget/rollouts"] = t.rollouts
        metrics["budget/tokens"] = t.tokens
        if self.m > 1:
            metrics["malformed_rollouts"] = t.malformed
            metrics["missing_answers"] = t.missing
        for name in self.behaviours:
            values = t.behaviour_values.get(name, [])
            if values:
                metrics[f"behaviour/{name}"] = math.fsum(values) / len(values)
            values = t.held_out_values.get(name, [])
            if values:
                metrics[f"heldout/{name}"] = math.fsum(values) / len(values)
        for key in t.diversity[0] if t.diversity else ():
            values = [d[key] for d in t.diversity if d[key] is not None]
            if values:  # coverage is undefined for a task whose only component is the primary
                metrics[f"diversity/{key}"] = math.fsum(values) / len(values)
        return metrics


@dataclass
class _Totals:
    """What the problems add up to: everything the metrics need, nothing more."""

    counts: list[tuple[int, int]] = field(default_factory=list)  # (n, successes) per problem, for pass@k
    scalars: list[list[float]] = field(default_factory=list)  # each candidate's scalar per problem (pooled best@k)
    rollout_counts: list[tuple[int, int]] = field(default_factory=list)  # (R, c_R) per problem, set-level pass@k
    rollout_bests: list[list[float]] = field(default_factory=list)  # each whole rollout's best, set-level best@k
    diversity: list[dict[str, float | None]] = field(default_factory=list)  # per problem
    reward_sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # over scored candidates
    reward_counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # ... whose value is not NaN
    scored: int = 0
    unparsed: int = 0
    wrong: int = 0
    successes: int = 0
    skipped: int = 0  # the scorer raised
    missing: int = 0  # answers a malformed rollout did not write
    malformed: int = 0
    rollouts: int = 0
    tokens: int = 0
    behaviour_values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # per candidate
    held_out_values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # per candidate

    def add_problem(
        self, records: list[dict[str, Any]], spread: dict[str, float | None], malformed: int, m: int
    ) -> None:
        self.counts.append((len(records), sum(r["success"] for r in records)))
        self.scalars.append(_fill_skipped([r["scalar"] for r in records]))
        rollouts, successful, bests = rollout_outcomes(records, m)
        self.rollout_counts.append((rollouts, successful))
        self.rollout_bests.append(bests)
        self.diversity.append(spread)
        self.malformed += malformed
        for r in records:
            for name, value in (r.get("behaviours") or {}).items():
                if value is not None:
                    self.behaviour_values[name].append(value)
            for name, value in (r.get("held_out") or {}).items():
                if value is not None:
                    self.held_out_values[name].append(value)
            if r.get("missing"):
                self.missing += 1
            elif "error" in r:
                self.skipped += 1
            else:
                self.scored += 1
                self.unparsed += r["unparsed"]
                self.wrong += not r["unparsed"] and not r["success"]
                self.successes += r["success"]
                for name, value in r["rewards"].items():
                    self.reward_sums[name] += 0.0 if math.isnan(value) else value
                    self.reward_counts[name] += not math.isnan(value)


def _behaviour_score(scorer: Any, text: str, problem: Problem) -> float | None:
    """A behaviour scorer's value, or None (left out of the mean) if it raises: scorers are meant never to raise,
    and one that does must not lose the evaluation."""
    try:
        return None if math.isnan(value := as_float(scorer(text, problem))) else value  # NaN: none, as a raise
    except PluginFailed:  # it tried to end the process: the run ends, naming it
        raise
    except Exception:
        return None


def _fill_skipped(values: list[float | None]) -> list[float]:
    """A candidate whose scoring raised counts as a failure for pass@k; for best@k it takes the problem's lowest
    known value (0.0 when none), so a scorer error can never raise best@k and n stays n."""
    known = [v for v in values if v is not None]
    floor = min(known, default=0.0)
    return [floor if v is None else v for v in values]


def _embedding_model_available() -> bool:
    """Whether the embedding package is installed; without it, embedding diversity is skipped with one line on
    stderr rather than failing an evaluation that has nothing else wrong."""
    from harness.metrics.embeddings import embedding_model_path

    try:
        embedding_model_path()
    except ValueError as exc:
        print(f"best-of-k: warning: diversity/embedding not computed: {exc}", file=sys.stderr)
        return False
    return True
