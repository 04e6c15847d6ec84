"""Best-of-k: sample n answers per problem, score every one, report unbiased pass@k and best@k for each k <= n."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.metrics.unbiased import best_at_ks, pass_at_ks
from harness.types import Engine, Problem, SamplingParams, Task, scalarize

if TYPE_CHECKING:
    from harness.store import RunStore


def _parse_ks(k: Sequence[int] | str | int) -> list[int]:
    """[1, 4, 8], "1,4,8" (a CLI option) or a single int -> sorted unique ints."""
    if isinstance(k, str):
        items: list[Any] = [part for part in k.split(",") if part.strip()]
    elif isinstance(k, int):
        items = [k]
    else:
        items = list(k)
    return sorted({int(item) for item in items})


class BestOfK:
    """The Searcher protocol: n samples per problem; pass@k counts the task's primary success, best@k uses the
    scalarised reward (task.reward_weights)."""

    def __init__(self, n: int = 8, k: Sequence[int] | str | int = (1, 4, 8), max_new_tokens: int = 128,
                 temperature: float = 1.0, top_p: float = 1.0, seed: int = 0, batch_prompts: int = 8) -> None:
        self.n = int(n)
        self.ks = _parse_ks(k)
        if self.n < 1 or int(batch_prompts) < 1:
            raise ValueError(f"best-of-k needs n >= 1 and batch_prompts >= 1, got n={n}, batch_prompts={batch_prompts}")
        if not self.ks or self.ks[0] < 1 or self.ks[-1] > self.n:
            raise ValueError(f"best-of-k: every k must be in 1..n={self.n}, got k={self.ks}")
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = int(seed)
        self.batch_prompts = int(batch_prompts)

    def search(self, engine: Engine, task: Task, problems: Sequence[Problem], *, phase: str,
               store: RunStore) -> dict[str, float]:
        counts: list[tuple[int, int]] = []  # (n, successes) per problem, for pass@k
        scalars: list[list[float]] = []  # scalar score of each sample per problem, for best@k
        reward_sums: dict[str, float] = defaultdict(float)
        scored = unparsed = wrong = successes = skipped = num_tokens = 0

        for start in range(0, len(problems), self.batch_prompts):
            batch = problems[start : start + self.batch_prompts]
            # One seed for every batch: the engine derives each sample's random stream from (seed, prompt, sample
            # index), so batches never replay a stream and results do not depend on batch_prompts.
            params = SamplingParams(n=self.n, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                    top_p=self.top_p, seed=self.seed)
            completions = engine.generate([task.messages(p) for p in batch], params, desc=f"{phase} best-of-k")
            if len(completions) != len(batch) * self.n:
                raise RuntimeError(f"engine returned {len(completions)} completions for {len(batch)} prompts x "
                                   f"n={self.n}")
            records = []
            batch_scalars: list[list[float | None]] = [[] for _ in batch]
            batch_successes = [0] * len(batch)
            for completion in completions:
                problem = batch[completion.prompt_index]
                num_tokens += len(completion.token_ids)
                record: dict[str, Any] = {
                    "problem_id": problem.id, "phase": phase, "sample_index": completion.sample_index,
                    "text": completion.text, "num_tokens": len(completion.token_ids),
                    "finished": completion.finished,
                }
                try:
                    score = task.score(problem, completion.text)
                    scalar = scalarize(score.rewards, task.reward_weights)
                except Exception as exc:  # a scorer bug on one answer must not lose the rest of the run
                    skipped += 1
                    batch_scalars[completion.prompt_index].append(None)
                    record.update(extracted=None, unparsed=None, rewards={}, primary=None, success=False,
                                  scalar=None, error=f"{type(exc).__name__}: {exc}")
                    records.append(record)
                    continue
                scored += 1
                unparsed += score.unparsed
                wrong += not score.unparsed and not score.success
                successes += score.success
                batch_successes[completion.prompt_index] += score.success
                for name, value in score.rewards.items():
                    reward_sums[name] += value
                batch_scalars[completion.prompt_index].append(scalar)
                record.update(extracted=score.extracted, unparsed=score.unparsed, rewards=dict(score.rewards),
                              primary=score.primary, success=score.success, scalar=scalar)
                records.append(record)
            store.write_samples(records)  # per batch: a run that dies later keeps what it has paid for

            for problem_scalars, c in zip(batch_scalars, batch_successes, strict=True):
                counts.append((len(problem_scalars), c))
                scalars.append(_fill_skipped(problem_scalars))

        total = scored + skipped
        metrics: dict[str, float] = {}
        if problems:
            metrics.update({f"pass@{k}": v for k, v in pass_at_ks(counts, self.ks).items()})
            metrics.update({f"best@{k}": v for k, v in best_at_ks(scalars, self.ks).items()})
        metrics.update({f"mean_reward/{name}": total_value / scored for name, total_value in reward_sums.items()})
        # unparsed (no answer found) and wrong (an answer, not the right one) are reported apart: a broken extractor
        # shows up as a jump in unparsed_rate, not as a model that got worse.
        metrics["unparsed_rate"] = unparsed / scored if scored else 0.0
        metrics["wrong_rate"] = wrong / scored if scored else 0.0
        metrics["success_rate"] = successes / total if total else 0.0
        metrics["num_candidates"] = total
        metrics["num_skipped"] = skipped
        metrics["num_tokens"] = num_tokens
        return metrics


def _fill_skipped(values: list[float | None]) -> list[float]:
    """A sample whose scoring raised counts as a failure for pass@k; for best@k it takes the problem's lowest
    scored value (0.0 when none scored), so a scorer error can never raise best@k and n stays n."""
    known = [v for v in values if v is not None]
    floor = min(known, default=0.0)
    return [floor if v is None else v for v in values]
