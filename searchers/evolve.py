"""Evolutionary search (AlphaEvolve / FunSearch / OpenEvolve style): per problem, a candidate database
(searchers/evolve_db.py: islands, a MAP-Elites grid over the task's reward vector, migration) grows from a few
samples of the policy; each generation the policy is shown a parent with its scores and evaluator feedback, the
best candidates and some with other trade-offs (searchers/evolve_prompt.py), and writes a child, which the task's
scorer evaluates (code: in the sandbox, never in this process).

The loop, for a batch of problems in lockstep (one engine call serves every problem of the batch):
  1. seeds: ``seeds`` samples of the task's own prompt, exactly as best-of-k draws them (same seed, same n), so
     best-of-k and evolve start from the same candidates; for a policy that writes M answers per rollout, in its
     format (below);
  2. each generation, ``children`` child slots per problem (slot c works on island c % islands); generation g is
     one engine call for every child of every problem that still has budget, seeded by (seed, g); children of a
     problem whose prompts are equal (same parent and context) are samples 0..k-1 of that prompt, prefilled once
     (``samples=``, ``EngineCapabilities.samples_per_prompt``; other engines get one call per group size, the same
     children). The engine derives each row's random stream from that seed, the row's prompt and sample index, so
     a problem's search does not depend on which other problems share its call (up to float rounding of the
     padding on a real model). Generations are the search's decoding rounds: on a CPU a decoding step costs
     about the same for 4 rows as for 16, so one call per child slot (as before) was ``children`` times the rounds
     (docs/reference/performance.md);
  3. a child is the completion as a rewrite, or SEARCH/REPLACE edits applied to the parent (``mode="diff"``); one
     that yields nothing to score ("failed": empty, or edits that do not apply) costs a model call and is not a
     candidate;
  4. evaluation: the task's ``check`` (code: score + per-test feedback) or ``score``, ``workers`` at a time in
     threads (the sandbox runs the code in its own processes), or ``executor="ray"``: one Ray task per child on the
     cluster at RAY_ADDRESS (harness/executors.py; each worker runs the code in its own sandbox); fitness =
     scalarize(rewards, task.reward_weights), used only for selection, the reward vector is kept;
  5. after every generation, each problem's state (database, counters, RNG) is saved atomically to
     ``<run>/evolve/<phase>/<problem>.json``; ``resume=<old run folder>`` starts each problem from the old
     run's checkpoint, so a killed search loses at most the generation in flight.

Budgets, per problem: ``calls`` (model calls), ``candidates`` (evaluated), ``tokens`` (generated); 0 = no limit in
that unit, at least one must be set. A problem stops when a budget is spent, when ``generations`` is reached, or
(``stop_on_success``) at its first success: its solved-at point is already known and the calls are better spent
elsewhere. Budgets are checked before each generation and a generation never exceeds calls or candidates (it
is cut to what is left); ``tokens`` is checked before each generation and may be overrun by one generation. The
seeds are drawn whole, before any check (set calls >= seeds, and candidates >= seeds x M).

A policy that writes M answers per rollout (``answers_per_rollout``, passed by the runner from the trainer's
declaration, as to best-of-k; VPO): the seeds are ``seeds`` rollouts in the M-answer format
(harness/scoring/multi_answer.py: the task's prompt with the request for M answers, ``delimiter`` between them), i.e.
best-of-k's draw with n = seeds x M: same prompts, seed and sampling, so evolve's seed candidates are best-of-k's
written answers. Each well-formed answer of a seed rollout is a candidate (answer a of rollout j is seed candidate
j x M + a, on island (j x M + a) % islands); a rollout with fewer than M answers contributes the answers it has, and
is counted (``malformed_rollouts``; ``missing_answers``: the answers it did not write, which are not candidates here:
unlike best-of-k's fixed n, evolve's budget is calls, and nothing was written to score). ``max_new_tokens`` is a
rollout's budget (the runner gives M answers' budgets plus the delimiters, as for best-of-k).
Children stay one answer per call: a child's prompt is evolve's own rewrite prompt (the task's question, the parent
with its scores and feedback, other candidates: searchers/evolve_prompt.py), not the task's prompt, so the M-answer
request, which is appended to the task's prompt, has nothing to attach to; M rewrites of one parent in one call would
also see each other, and a child's budget and parsing (rewrite, diff) are per answer. Nothing in the runner asks
otherwise: it passes M so that the policy's trained format is used where evolve samples the task's own prompt, the
seeds. A child gets one answer's budget (``child_max_new_tokens``, default: max_new_tokens's share for one answer,
harness/scoring/multi_answer.py ``answer_budget``; = max_new_tokens when M = 1); when a policy writes several answers
anyway, only the first is scored (the prompt asks for one; scoring them all would let a list of guesses pass).

Counting, with M answers per rollout: a seed rollout is ONE model call (``calls``, ``tokens``: all its tokens) and
yields up to M candidates (``candidates``); a child is one call and at most one candidate. So ``solved@c`` reads "a
success among the candidates of the first c model calls": for the seeds, c rollouts of M answers, best-of-k's
set-level pass@(c x M) trajectory (a rollout succeeds when any of its answers does), not c answers. Comparing an
M-answer policy with an M = 1 policy at equal calls gives the M-answer seeds M times the candidates (and a rollout
about M times the tokens): equal calls, not equal candidates, which is what ``budget/candidates`` and
``budget/tokens`` show beside it.

Metrics (flat; the caller prefixes the phase): ``solved@<c>``: the fraction of problems with a success within
their first c model calls, for each c in ``k`` (the solved-at-budget curve; with calls == candidates for
best-of-k, comparable with its pass@k at n = c, though pass@k is an average over orderings and this is one
trajectory); ``success_rate`` (solved by the end); ``best/<component>`` and ``best_fitness`` (each problem's best
candidate, averaged); ``mean_reward/<component>`` (over all candidates); budget/calls, budget/candidates,
budget/tokens; ``children/<how>``: candidates by how they were made (seed, rewrite, diff, text) and failed (child
calls that yielded nothing); malformed_rollouts and missing_answers (M > 1); num_skipped (the scorer raised),
``generations`` (mean per problem); ``behaviour/<name>`` (option ``behaviours``, over all candidates: the training
scorer VSPO and reward-shaped GRPO optimise) and ``heldout/<name>`` beside it, for a behaviour that declares a
held-out evaluator (``Behaviour.held_out``, which no trainer uses; one batch per problem).
The whole curve (solved fraction at every call count) goes to ``<run>/evolve/<phase>/curve.json``.

samples.jsonl gets every candidate of a problem when the problem finishes, from its database (evaluation order):
sample_index (= candidate id), text, the Score's fields, scalar (= fitness), and the search's own fields
(island, parent, generation, how, call: the model call that produced it, num_tokens, finished; with M > 1 a
seed's answer_index within its rollout, whose num_tokens and finished it shares); with ``behaviours``, "behaviours":
{name: training score} and, when one has a held-out evaluator, "held_out": {name: held-out score} (None: it raised).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from harness import progress
from harness.executors import make_executor
from harness.failures import PluginFailed, as_float, exits_named_in
from harness.plugins.option_help import Bounds
from harness.plugins.options import coerce
from harness.plugins.size_bounds import CHARS, COUNT, SEED, STEPS, THREADS, TOKEN_BUDGET, TOKENS
from harness.runner.distributed import current as current_parallel
from harness.scoring.multi_answer import DELIMITER, answer_budget, instruct, split_answers
from harness.searchers.evolve_db import Database
from harness.searchers.evolve_prompt import MODES, build_prompt, child_text
from harness.store.run_folder import write_json_atomic
from harness.types import (
    Behaviour,
    Completion,
    Engine,
    EngineCapabilities,
    Problem,
    SamplingParams,
    SearcherCapabilities,
    Task,
    TaskCapabilities,
    capabilities_of,
    scalarize,
)

if TYPE_CHECKING:
    from harness.store.run_folder import RunStore

STATE_FORMAT = 1


@dataclass
class ProblemState:
    """One problem's search: its database (None until a seed has been scored) and the budget spent so far."""

    problem_id: str
    db: Database | None = None
    generation: int = 0  # generations completed (0 = only seeds, or nothing yet)
    seeded: bool = False
    calls: int = 0
    tokens: int = 0
    skipped: int = 0  # candidates whose scorer raised: counted, not in the database
    malformed: int = 0  # seed rollouts with fewer than M answers (M > 1)
    missing: int = 0  # the answers those rollouts did not write (not candidates: nothing to score)
    how: Counter = field(default_factory=Counter)
    solved_at: int | None = None  # the model call (1-based) that produced the first success
    done: bool = False
    # Per candidate id: what the database does not keep (call index, tokens, how, the Score's extra fields).
    extra: list[dict[str, Any]] = field(default_factory=list)

    @property
    def candidates(self) -> int:
        return (len(self.db.candidates) if self.db else 0) + self.skipped

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "problem_id": self.problem_id,
            "generation": self.generation,
            "seeded": self.seeded,
            "calls": self.calls,
            "tokens": self.tokens,
            "skipped": self.skipped,
            "malformed": self.malformed,
            "missing": self.missing,
            "how": dict(self.how),
            "solved_at": self.solved_at,
            "done": self.done,
            "extra": self.extra,
            "db": self.db.state_dict() if self.db else None,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ProblemState:
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"evolve: unsupported checkpoint format {state.get('format')!r}")
        return cls(
            problem_id=state["problem_id"],
            db=Database.from_state(state["db"]) if state["db"] else None,
            generation=int(state["generation"]),
            seeded=bool(state["seeded"]),
            calls=int(state["calls"]),
            tokens=int(state["tokens"]),
            skipped=int(state["skipped"]),
            malformed=int(state.get("malformed", 0)),
            missing=int(state.get("missing", 0)),
            how=Counter(state["how"]),
            solved_at=state["solved_at"],
            done=bool(state["done"]),
            extra=list(state["extra"]),
        )


@dataclass
class _Call:
    """One model call to evaluate: the problem (index in its batch), the parent (children), the completion, and
    what it yields: (island, text or None when nothing can be scored, how, answer index within a seed rollout or
    None) per answer; ``missing``: the answers a malformed seed rollout did not write."""

    problem: int
    parent: int | None
    completion: Completion
    answers: list[tuple[int, str | None, str, int | None]]
    missing: int = 0


class Evolve:
    """The Searcher protocol: an evolutionary search per problem under a budget; see the module docstring."""

    # under torchrun / accelerate launch every rank evolves its share of the problems (islands and all)
    capabilities = SearcherCapabilities(answers_per_rollout=True, behaviours=True, resume=True, data_parallel=True)

    def __init__(
        self,
        seeds: Annotated[int, Bounds(1, COUNT)] = 4,  # first samples per problem, drawn as best-of-k draws them
        children: Annotated[int, Bounds(1, COUNT)] = 4,  # children written per problem each generation
        generations: Annotated[int, Bounds(0, STEPS)] = 0,  # generations per problem at most; 0: no limit
        calls: Annotated[int, Bounds(0, COUNT)] = 16,  # model calls per problem at most; 0: no limit
        candidates: Annotated[int, Bounds(0, COUNT)] = 0,  # evaluated candidates per problem at most; 0: no limit
        # generated tokens per problem at most (may overrun by one generation); 0: no limit
        tokens: Annotated[int, Bounds(0, TOKEN_BUDGET)] = 0,
        islands: Annotated[int, Bounds(1, COUNT)] = 2,  # candidate populations evolving apart, exchanging migrants
        bins: Annotated[int, Bounds(1, COUNT)] = 2,  # cells per reward component on each axis of the MAP-Elites grid
        exploit: float = 0.5,  # chance a parent is its island's best
        explore: float = 0.3,  # chance a parent is a random elite of its island
        random: float = 0.2,  # chance a parent is a random elite of any island
        # generations between migrations along the ring of islands
        migration_interval: Annotated[int, Bounds(1, STEPS)] = 2,
        migrants: Annotated[int, Bounds(1, COUNT)] = 1,  # best elites each island sends per migration
        features: str | Sequence[str] = "",  # reward components that are the grid's axes, comma-separated; "": all
        mode: str = "rewrite",  # a child is a whole rewrite, or SEARCH/REPLACE edits of its parent (diff)
        top: Annotated[int, Bounds(0, COUNT)] = 1,  # best candidates shown in a child's prompt
        diverse: Annotated[int, Bounds(0, COUNT)] = 1,  # candidates with other trade-offs shown in a child's prompt
        max_chars: Annotated[int, Bounds(1, CHARS)] = 1200,  # each text shown in a child's prompt is cut to this
        max_new_tokens: Annotated[int, Bounds(1, TOKENS)] = 128,  # generation budget of a seed rollout
        temperature: float = 1.0,  # sampling temperature
        top_p: float = 1.0,  # nucleus sampling: the smallest set of tokens holding this probability
        seed: Annotated[int, SEED] = 0,  # sampling and parent-selection seed
        # problems searched together (one engine call per generation)
        batch_prompts: Annotated[int, Bounds(1, COUNT)] = 8,
        workers: Annotated[int, Bounds(1, THREADS)] = 2,  # candidates evaluated at once (local executor)
        stop_on_success: bool | str = True,  # a problem stops at its first success
        k: Sequence[int] | str | int = "",  # call counts c reported as solved@c; "": 1, 2, 4, ... up to the budget
        resume: str = "",  # an old run folder whose evolve checkpoints each problem continues from
        behaviours: str | Sequence[str] = "",  # registered behaviour scorers to report, comma-separated
        executor: str = "local",  # where candidates are evaluated: local (threads) or ray
        # M: answers in a seed rollout, separated by `delimiter` (VPO)
        answers_per_rollout: Annotated[int, Bounds(1, COUNT)] = 1,
        delimiter: str = DELIMITER,  # separates the M answers of a seed rollout
        # generation budget of a child; 0: one answer's share of max_new_tokens
        child_max_new_tokens: Annotated[int, Bounds(0, TOKENS)] = 0,
        plugins: Any = None,
    ) -> None:
        self.seeds, self.children, self.generations = int(seeds), int(children), int(generations)
        self.budget = {"calls": int(calls), "candidates": int(candidates), "tokens": int(tokens)}
        self.m, self.delimiter = int(answers_per_rollout), str(delimiter)
        if self.seeds < 1 or self.children < 1 or int(batch_prompts) < 1 or int(workers) < 1 or self.m < 1:
            raise ValueError(
                f"evolve: seeds, children, batch_prompts, workers and answers_per_rollout must be >= 1, "
                f"got seeds={seeds}, children={children}, batch_prompts={batch_prompts}, "
                f"workers={workers}, answers_per_rollout={answers_per_rollout}"
            )
        if self.m > 1 and not self.delimiter.strip():
            raise ValueError("evolve: the delimiter must not be blank")
        if int(child_max_new_tokens) < 0:
            raise ValueError(
                f"evolve: child_max_new_tokens must be >= 0 (0 = one answer's share of max_new_tokens), "
                f"got {child_max_new_tokens}"
            )
        if any(v < 0 for v in self.budget.values()) or self.generations < 0:
            raise ValueError(
                f"evolve: budgets and generations must be >= 0 (0 = no limit), got {self.budget}, "
                f"generations={generations}"
            )
        if not (self.budget["calls"] or self.budget["tokens"] or self.generations):
            # candidates alone cannot stop a search whose children all fail to parse (calls, not candidates)
            raise ValueError("evolve: set calls, tokens or generations (> 0): nothing else is sure to stop the search")
        if mode not in MODES:
            raise ValueError(f"evolve: unknown mode {mode!r}; available: {', '.join(MODES)}")
        self.db_options = {
            "islands": int(islands),
            "bins": int(bins),
            "exploit": float(exploit),
            "explore": float(explore),
            "random": float(random),
            "migration_interval": int(migration_interval),
            "migrants": int(migrants),
        }
        Database(["x"], **self.db_options)  # bad database options fail here, not after the seeds are paid for
        names = features.split(",") if isinstance(features, str) else list(features)
        self.features = [n.strip() for n in names if n.strip()]  # [] = every component of the reward vector
        self.mode, self.top, self.diverse, self.max_chars = mode, int(top), int(diverse), int(max_chars)
        self.max_new_tokens, self.temperature, self.top_p = int(max_new_tokens), float(temperature), float(top_p)
        # A seed is a rollout of M answers (max_new_tokens, as best-of-k's); a child is one answer
        self.child_max_new_tokens = int(child_max_new_tokens) or answer_budget(self.max_new_tokens, self.m)
        self.seed, self.batch_prompts, self.workers = int(seed), int(batch_prompts), int(workers)
        self.stop_on_success = bool(coerce(stop_on_success, True))
        self.ks = _curve_points(k, self.budget["calls"] or self.budget["candidates"] or self.seeds)
        self.resume = Path(resume) if resume else None
        if self.resume is not None and not self.resume.is_dir():
            raise ValueError(f"evolve: resume folder {str(self.resume)!r} not found")
        self.behaviours, self.held_out = _behaviour_scorers(behaviours, plugins)
        self.executor = make_executor(executor, workers=self.workers, owner="evolve")

    # ------------------------------------------------------------------------------------------------------------
    # The search
    # ------------------------------------------------------------------------------------------------------------

    def search(
        self, engine: Engine, task: Task, problems: Sequence[Problem], *, phase: str, store: RunStore
    ) -> dict[str, float]:
        # Under a launcher each rank evolves its contiguous share of the problems: a problem's search depends only
        # on its own seeds (the engine's per-prompt streams, its database's seed), so the results are one process's.
        # Every rank gathers every problem's state and records; rank 0 writes the others' samples after its own.
        dp = current_parallel()
        mine = list(problems[dp.share(len(problems))])
        # one bar for the phase's model calls (at most calls per problem; a solved problem stops early)
        calls = len(mine) * self.budget["calls"] or None  # None: no limit on calls, a count without a total
        with progress.bar(calls, f"{phase} evolve (model calls, at most)", "sample"):
            done = self._search(engine, task, mine, phase=phase, store=store)
        states: list[ProblemState] = []
        behaviour_values: dict[str, list[float]] = {name: [] for name in self.behaviours}
        held_out_values: dict[str, list[float]] = {name: [] for name in self.held_out}
        for rank, part in enumerate(dp.gather(done)):
            for state, records in part:
                if rank > 0:
                    store.write_samples(records)
                states.append(state)
                for record in records:
                    for name, value in record.get("behaviours", {}).items():
                        if value is not None:
                            behaviour_values[name].append(value)
                    for name, value in record.get("held_out", {}).items():
                        if value is not None:
                            held_out_values[name].append(value)
        metrics = self._metrics(states)
        metrics.update({f"behaviour/{name}": math.fsum(v) / len(v) for name, v in behaviour_values.items() if v})
        metrics.update({f"heldout/{name}": math.fsum(v) / len(v) for name, v in held_out_values.items() if v})
        if dp.is_main:
            write_json_atomic(store.dir / "evolve" / phase / "curve.json", self._curve(states))
        return metrics

    def _search(
        self, engine: Engine, task: Task, problems: Sequence[Problem], *, phase: str, store: RunStore
    ) -> list[tuple[ProblemState, list[dict[str, Any]]]]:
        """Each problem's final state and sample records, in order; the records written batch by batch."""
        folder = store.dir / "evolve" / phase
        folder.mkdir(parents=True, exist_ok=True)
        done: list[tuple[ProblemState, list[dict[str, Any]]]] = []
        for start in range(0, len(problems), self.batch_prompts):
            batch = list(problems[start : start + self.batch_prompts])
            batch_states = [self._load(folder, phase, p) for p in batch]
            self._run_batch(engine, task, batch, batch_states, folder)
            for problem, state in zip(batch, batch_states, strict=True):
                records = self._records(problem, state, phase)
                store.write_samples(records)
                done.append((state, records))
        return done

    def _run_batch(
        self, engine: Engine, task: Task, batch: list[Problem], states: list[ProblemState], folder: Path
    ) -> None:
        todo = [i for i, s in enumerate(states) if not s.seeded]
        if todo:
            # Exactly best-of-k's draw with n = seeds x M: same prompts (the M-answer format), seed and sampling
            params = SamplingParams(
                n=self.seeds,
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                seed=self.seed,
            )
            prompts = [instruct(task.messages(batch[i]), self.m, self.delimiter) for i in todo]
            completions = engine.generate(prompts, params, desc="evolve seeds")
            jobs = [self._seed_call(todo[c.prompt_index], c) for c in completions]
            self._evaluate(task, batch, states, jobs, generation=0)
            for i in todo:
                states[i].seeded = True
                self._finish_generation(states[i], folder)
        while True:
            active = [i for i, s in enumerate(states) if not s.done]
            if not active:
                return
            generation = min(states[i].generation for i in active) + 1
            active = [i for i in active if states[i].generation + 1 == generation]
            jobs = self._children(engine, task, batch, states, active, generation)
            self._evaluate(task, batch, states, jobs, generation=generation)
            for i in active:
                states[i].db.maybe_migrate(generation)
                states[i].generation = generation
                self._finish_generation(states[i], folder)

    def _children(
        self,
        engine: Engine,
        task: Task,
        batch: list[Problem],
        states: list[ProblemState],
        active: list[int],
        generation: int,
    ) -> list[_Call]:
        """This generation's children of the problems ``active``, in (problem, slot) order, from one engine call
        (one per distinct group size on an engine without ``EngineCapabilities.samples_per_prompt``). Every child's
        parent and prompt is drawn first, problem by problem and slot by slot (each database's RNG in the order one
        call per slot drew it); the children of a problem whose prompts are equal (same parent and context) are
        samples 0..k-1 of that prompt, which the engine prefills once. Every call of a generation is seeded by
        (seed, generation): a child's random stream is the engine's (seed, prompt, sample index), so it does not
        depend on which problems or groups share its call, nor on how the calls are split."""
        islands = self.db_options["islands"]
        groups: dict[tuple[int, str], list[tuple[int, int, Any]]] = {}  # (problem, prompt) -> (slot, island, parent)
        prompts: dict[tuple[int, str], list[dict[str, str]]] = {}
        for i in active:
            for slot in range(self._children_left(states[i])):
                island = slot % islands
                parent = states[i].db.sample_parent(island)[0]
                prompt = self._prompt(task, batch[i], states[i].db, parent, island)
                key = (i, json.dumps(prompt))
                prompts[key] = prompt
                groups.setdefault(key, []).append((slot, island, parent))
        params = SamplingParams(
            n=1,
            max_new_tokens=self.child_max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=_derive_seed(self.seed, generation),
        )
        desc = f"evolve generation {generation}"
        if capabilities_of(engine, EngineCapabilities).samples_per_prompt:
            keys = list(groups)
            completions = [
                (keys, c)
                for c in engine.generate(
                    [prompts[k] for k in keys], params, desc=desc, samples=[len(groups[k]) for k in keys]
                )
            ]
        else:  # one call per group size n, each prompt n samples
            sizes = sorted({len(members) for members in groups.values()})
            completions = []
            for n in sizes:
                keys = [k for k, members in groups.items() if len(members) == n]
                completions += [
                    (keys, c) for c in engine.generate([prompts[k] for k in keys], replace(params, n=n), desc=desc)
                ]
        calls: dict[tuple[int, int], _Call] = {}
        for keys, c in completions:
            key = keys[c.prompt_index]
            slot, island, parent = groups[key][c.sample_index]
            text, how = child_text(parent.text, self._one_answer(c.text), mode=self.mode)
            calls[key[0], slot] = _Call(key[0], parent.id, c, [(island, text, how, None)])
        return [calls[key] for key in sorted(calls)]

    def _seed_call(self, i: int, completion: Completion) -> _Call:
        """A seed rollout: one model call whose well-formed answers are candidates (M = 1: the text as generated).
        Answer a of rollout j is seed candidate j x M + a, on island (j x M + a) % islands."""
        answers = split_answers(completion.text, self.m, self.delimiter)
        first = completion.sample_index * self.m
        return _Call(
            i,
            None,
            completion,
            [
                ((first + a) % self.db_options["islands"], text, "seed", a if self.m > 1 else None)
                for a, text in enumerate(answers)
            ],
            missing=self.m - len(answers),
        )

    def _one_answer(self, text: str) -> str:
        """A child's text: with M > 1, the first answer when a policy trained to write several writes several
        anyway (the child prompt asks for one; scoring all of them would let a list of guesses pass as one answer)."""
        if self.m == 1 or self.delimiter not in text:
            return text
        answers = split_answers(text, self.m, self.delimiter)
        return answers[0] if answers else ""

    def _children_left(self, state: ProblemState) -> int:
        """This generation's children for one problem: ``children``, cut to the calls and candidates left."""
        left = self.children
        for unit, spent in (("calls", state.calls), ("candidates", state.candidates)):
            if self.budget[unit]:
                left = min(left, self.budget[unit] - spent)
        return max(0, left)

    def _finish_generation(self, state: ProblemState, folder: Path) -> None:
        """Decide whether the problem is done, then checkpoint it (atomically: a kill leaves the previous one)."""
        spent = {"calls": state.calls, "candidates": state.candidates, "tokens": state.tokens}
        state.done = (
            state.db is None  # no seed could be scored: nothing to evolve from
            or any(limit and spent[unit] >= limit for unit, limit in self.budget.items())
            or bool(self.generations and state.generation >= self.generations)
            or (self.stop_on_success and state.solved_at is not None)
        )
        write_json_atomic(folder / _file_name(state.problem_id), state.state_dict())

    def _prompt(self, task: Task, problem: Problem, db: Database, parent: Any, island: int) -> list[dict[str, str]]:
        top = [c for c in db.top(island, self.top + 1) if c.id != parent.id][: self.top]
        diverse = db.diverse(island, self.diverse, exclude=[parent.id, *(c.id for c in top)])
        return build_prompt(task.messages(problem), parent, top, diverse, mode=self.mode, max_chars=self.max_chars)

    # ------------------------------------------------------------------------------------------------------------
    # Evaluation
    # ------------------------------------------------------------------------------------------------------------

    def _evaluate(
        self, task: Task, batch: list[Problem], states: list[ProblemState], jobs: list[_Call], *, generation: int
    ) -> None:
        """Score every answer with a text (on the executor), then add them in job order (deterministic). Each job is
        one model call: it costs a call and its tokens whatever it yields."""
        scorable = [(batch[job.problem], text) for job in jobs for _, text, _, _ in job.answers if text is not None]
        verdicts = iter(self.executor.map(_check_child, task, scorable))
        for job in jobs:
            state, completion = states[job.problem], job.completion
            state.calls += 1
            state.tokens += len(completion.token_ids)
            if job.missing:
                state.malformed += 1
                state.missing += job.missing
            for island, text, how, answer in job.answers:
                state.how[how] += 1
                if text is not None:
                    self._add(task, state, job, island, text, how, answer, next(verdicts), generation)

    def _add(
        self,
        task: Task,
        state: ProblemState,
        job: _Call,
        island: int,
        text: str,
        how: str,
        answer: int | None,
        verdict: tuple[Any, str],
        generation: int,
    ) -> None:
        """One scored answer into the problem's database (or counted as skipped when its scorer raised)."""
        completion, parent = job.completion, job.parent
        score, feedback = verdict
        if score is None:
            state.skipped += 1
            return
        fitness = scalarize(score.rewards, task.reward_weights)
        if state.db is None:
            state.db = Database(
                self.features or list(score.rewards), seed=_derive_seed(self.seed, state.problem_id), **self.db_options
            )
        try:
            state.db.add(
                text,
                score.rewards,
                fitness,
                island=island,
                parent=parent,
                generation=generation,
                feedback=feedback,
                success=score.success,
            )
        except ValueError:  # a reward vector without a configured feature: skip it, count it
            state.skipped += 1
            return
        extra = {
            "call": state.calls,
            "num_tokens": len(completion.token_ids),
            "finished": completion.finished,
            "how": how,
            "primary": score.primary,
            "extracted": score.extracted,
            "unparsed": score.unparsed,
        }
        if answer is not None:  # which answer of its seed rollout (M > 1); num_tokens is the whole rollout's
            extra["answer_index"] = answer
        state.extra.append(extra)
        if score.success and state.solved_at is None:
            state.solved_at = state.calls

    # ------------------------------------------------------------------------------------------------------------
    # Checkpoints, samples, metrics
    # ------------------------------------------------------------------------------------------------------------

    def _load(self, folder: Path, phase: str, problem: Problem) -> ProblemState:
        """This run's checkpoint of the problem, else the resumed run's, else a fresh state."""
        name = _file_name(problem.id)
        for path in (folder / name, *([self.resume / "evolve" / phase / name] if self.resume else [])):
            if path.is_file():
                try:
                    state = ProblemState.from_state(json.loads(path.read_text()))
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(f"evolve: cannot resume from {path}: {exc}") from None
                if state.problem_id != problem.id:
                    raise ValueError(f"evolve: {path} holds problem {state.problem_id!r}, not {problem.id!r}")
                return state
        return ProblemState(problem.id)

    def _records(self, problem: Problem, state: ProblemState, phase: str) -> list[dict[str, Any]]:
        records = []
        candidates = state.db.candidates if state.db else []
        held_out = {  # each evaluator once over the problem's candidates (the MiniLM ones embed in batches)
            name: b.held_out_scores([c.text for c in candidates], [problem] * len(candidates))
            for name, b in self.held_out.items()
        }
        for index, (cand, extra) in enumerate(zip(candidates, state.extra, strict=True)):
            record = {
                "problem_id": problem.id,
                "phase": phase,
                "sample_index": cand.id,
                "prompt": problem.prompt,
                "reference": problem.answer,
                "text": cand.text,
                "rewards": cand.rewards,
                "success": cand.success,
                "scalar": cand.fitness,
                "island": cand.island,
                "parent": cand.parent,
                "generation": cand.generation,
                **extra,
            }
            if self.behaviours:
                record["behaviours"] = {n: _safe(s, cand.text, problem) for n, s in self.behaviours.items()}
            if self.held_out:
                record["held_out"] = {name: values[index] for name, values in held_out.items()}
            records.append(record)
        return records

    def _metrics(self, states: list[ProblemState]) -> dict[str, float]:
        n = len(states)
        metrics: dict[str, float] = {
            f"solved@{c}": sum(s.solved_at is not None and s.solved_at <= c for s in states) / n for c in self.ks
        }
        metrics["success_rate"] = sum(s.solved_at is not None for s in states) / n
        bests = [s.db.best() for s in states if s.db and s.db.best()]
        for name in bests[0].rewards if bests else ():
            metrics[f"best/{name}"] = math.fsum(b.rewards.get(name, 0.0) for b in bests) / len(bests)
        if bests:
            metrics["best_fitness"] = math.fsum(b.fitness for b in bests) / len(bests)
        every = [c for s in states if s.db for c in s.db.candidates]
        for name in every[0].rewards if every else ():
            known = [v for c in every if not math.isnan(v := c.rewards.get(name, 0.0))]  # NaN: not applicable
            metrics[f"mean_reward/{name}"] = math.fsum(known) / max(len(known), 1)
        metrics["budget/calls"] = sum(s.calls for s in states)
        metrics["budget/candidates"] = sum(s.candidates for s in states)
        metrics["budget/tokens"] = sum(s.tokens for s in states)
        metrics["num_candidates"] = metrics["budget/candidates"]
        metrics["num_skipped"] = sum(s.skipped for s in states)
        if self.m > 1:  # seed rollouts in the M-answer format that wrote fewer than M answers
            metrics["malformed_rollouts"] = sum(s.malformed for s in states)
            metrics["missing_answers"] = sum(s.missing for s in states)
        metrics["generations"] = sum(s.generation for s in states) / n
        for how, count in sorted(sum((s.how for s in states), Counter()).items()):
            metrics[f"children/{how}"] = count
        return metrics

    def _curve(self, states: list[ProblemState]) -> dict[str, Any]:
        top = max([s.calls for s in states] + [1])
        return {
            "x": "model calls per problem",
            "y": "fraction of problems solved",
            "problems": len(states),
            "calls": list(range(1, top + 1)),
            "solved": [
                sum(s.solved_at is not None and s.solved_at <= c for s in states) / len(states)
                for c in range(1, top + 1)
            ],
            "solved_at": {s.problem_id: s.solved_at for s in states},
        }


# ----------------------------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------------------------


def _check(task: Task, problem: Problem, text: str) -> tuple[Any, str]:
    """(Score or None, feedback). A task with ``feedback`` (code) gives per-test feedback; other tasks get the
    extracted answer as feedback. A scorer that raises costs one candidate, not the search."""
    try:
        if capabilities_of(task, TaskCapabilities).feedback:
            checked = task.check(problem, text)
            return checked.score, "\n".join(checked.feedback)
        score = task.score(problem, text)
    except PluginFailed:  # not this candidate's fault: the run stops (harness/failures.py)
        raise
    except Exception:
        return None, ""
    return score, "no final answer found" if score.unparsed else f"final answer: {score.extracted}"


def _check_child(task: Task, child: tuple[Problem, str]) -> tuple[Any, str]:
    """``_check`` in the executor's (shared, item) form; on a Ray worker, this is what runs."""
    return _check(task, *child)


def _derive_seed(*parts: Any) -> int:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**31 - 1)


def _file_name(problem_id: str) -> str:
    """A file name per problem id: readable, safe on any filesystem, unique (a short hash of the exact id)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", problem_id)[:80]
    return f"{safe}-{hashlib.blake2b(problem_id.encode(), digest_size=4).hexdigest()}.json"


def _curve_points(k: Sequence[int] | str | int, budget: int) -> list[int]:
    """The call counts reported as solved@c: given, or 1, 2, 4, ... up to and including the budget."""
    if isinstance(k, int):
        items: list[Any] = [k]
    elif isinstance(k, str):
        items = [part for part in k.split(",") if part.strip()]
    else:
        items = list(k)
    points = sorted({int(x) for x in items})
    if not points:
        points = sorted({2**i for i in range(int(math.log2(max(1, budget))) + 1)} | {max(1, budget)})
    if points[0] < 1:
        raise ValueError(f"evolve: every k must be >= 1, got {points}")
    return points


def _behaviour_scorers(behaviours: str | Sequence[str], plugins: Any) -> tuple[dict[str, Any], dict[str, Behaviour]]:
    """({name: training scorer}, {name: Behaviour} for those with a held-out evaluator)."""
    names = behaviours.split(",") if isinstance(behaviours, str) else list(behaviours)
    out: dict[str, Any] = {}
    held_out: dict[str, Behaviour] = {}
    for name in (str(n).strip() for n in names):
        if not name or name in out:
            continue
        if plugins is None or name not in plugins["behaviour"]:
            available = ", ".join(plugins["behaviour"].names()) if plugins is not None else "(no registries given)"
            raise ValueError(f"evolve: unknown behaviour {name!r}; available: {available}")
        behaviour = plugins["behaviour"].get(name).load()
        plugin = plugins["behaviour"].get(name).plugin  # its sys.exit ends the run naming it (harness/failures.py)
        out[name] = exits_named_in(behaviour.score, "behaviour", name, plugin, "scoring an answer")
        if isinstance(behaviour, Behaviour) and behaviour.has_held_out:
            held_out[name] = behaviour
    return out, held_out


def _safe(scorer: Any, text: str, problem: Any) -> float | None:
    try:
        return None if math.isnan(value := as_float(scorer(text, problem))) else value  # NaN: none, as a raise
    except PluginFailed:  # it tried to end the process: the run ends, naming it
        raise
    except Exception:
        return None
