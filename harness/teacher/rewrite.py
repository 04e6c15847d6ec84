"""A teacher rewrites answers: towards and away from a behaviour (contrastive pairs, from which steering vectors
are built), or towards it alone (SFT on rewrites). What the teacher is asked comes from the ``Behaviour`` object
(``towards`` / ``away``), so a third-party behaviour is used exactly as a built-in one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.failures import as_float
from harness.types import Behaviour, Completion, Engine, Messages, Problem, SamplingParams

Pair = tuple["Messages | str", str]  # (prompt: chat messages or a user message's text, response text)

MIN_PAIRS = 2  # a steering vector needs at least two pairs (harness steer, VSPO)

REWRITE_TEMPLATE = """Here is a question and an answer to it.

Question:
{question}

Answer:
{answer}

Rewrite the answer {instruction}. Keep its content otherwise. Reply with the rewritten answer only."""


# ----------------------------------------------------------------------------------------------------------------
# Contrastive pairs from a teacher
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class ContrastivePairs:
    behaviour: str
    positive: list[Pair]  # (the original prompt, the rewrite towards the behaviour)
    negative: list[Pair]  # (the same prompt, the rewrite away from it); positive[i] and negative[i] share a prompt
    base_answers: list[str]  # the policy's answers, one per prompt given
    teacher_calls: int  # rewrite requests sent to the teacher (two per prompt)
    teacher_tokens: int  # tokens the teacher generated
    policy_tokens: int  # tokens the policy generated for the base answers
    dropped: int  # prompts left out because the base answer or a rewrite came back empty
    disagreeing: int = 0  # pairs left out by ``agreeing_pairs``: the scorer ranked the two rewrites the wrong way
    problems: list[Problem | None] | None = None  # the problem behind each pair, for scorers that need it
    resampled: int = 0  # prompts sampled again at temperature 1 because greedy decoding left too few pairs

    def provenance(self) -> dict[str, Any]:
        return {
            "teacher_calls": self.teacher_calls,
            "teacher_tokens": self.teacher_tokens,
            "policy_tokens": self.policy_tokens,
            "dropped_pairs": self.dropped,
            "disagreeing_pairs": self.disagreeing,
            **({"resampled_pairs": self.resampled} if self.resampled else {}),
        }


def agreeing_pairs(pairs: ContrastivePairs, scorer: Any) -> ContrastivePairs:
    """The pairs whose positive rewrite the behaviour scorer does not rate below the negative one.

    A small teacher sometimes gets an instruction backwards (on SmolLM2-135M, 10 of 32 of its "concise" rewrites
    of math answers came out no shorter than its "verbose" ones); such a pair pulls the difference of means
    the wrong way. Ties are kept: scorers saturate (conciseness is 1 for any filler-free answer under 60 words),
    and a tie says nothing against the pair."""
    problems = pairs.problems or [None] * len(pairs.positive)  # robustness scores against the problem's hint
    keep = [
        i
        for i, ((_, pos), (_, neg), problem) in enumerate(zip(pairs.positive, pairs.negative, problems, strict=True))
        if as_float(scorer(pos, problem)) >= as_float(scorer(neg, problem))
    ]
    return replace(
        pairs,
        positive=[pairs.positive[i] for i in keep],
        negative=[pairs.negative[i] for i in keep],
        problems=[problems[i] for i in keep] if pairs.problems else None,
        disagreeing=pairs.disagreeing + len(pairs.positive) - len(keep),
    )


def contrastive_pairs(
    policy_engine: Engine,
    teacher_engine: Engine | None,
    prompts: Sequence[Messages | str],
    behaviour: Behaviour,
    *,
    answer_params: Any = None,
    rewrite_params: Any = None,
    problems: Sequence[Problem] | None = None,
) -> ContrastivePairs:
    """The policy answers ``prompts`` (greedy by default); the teacher (any Engine; None: the policy's own engine)
    rewrites each answer once towards and once away from ``behaviour``. For a behaviour with ``misleading_hint``
    (robustness), pass prompts that carry a misleading hint (the task's ``misleading_hint=True``), and the
    ``problems`` behind the prompts, which its scorer reads (the hint, the reference)."""
    teacher = teacher_engine if teacher_engine is not None else policy_engine
    answer_params = answer_params or SamplingParams(n=1, max_new_tokens=128, temperature=0)
    rewrite_params = rewrite_params or SamplingParams(n=1, max_new_tokens=256, temperature=0)
    if answer_params.n != 1 or rewrite_params.n != 1:
        raise ValueError("contrastive_pairs takes one base answer per prompt and one rewrite per request (n=1)")
    if problems is not None and len(problems) != len(prompts):
        raise ValueError(f"contrastive_pairs: {len(problems)} problems for {len(prompts)} prompts")
    messages = [as_messages(p) for p in prompts]
    answers = list(policy_engine.generate(messages, answer_params, desc="base answers"))
    rewrites = list(
        rewrite_answers(
            teacher, messages, [a.text for a in answers], (behaviour.towards, behaviour.away), rewrite_params
        )
    )
    spent_answers, spent_rewrites = list(answers), list(rewrites)  # every completion generated, for the counts
    empty = [i for i in range(len(messages)) if not _whole(answers[i], *rewrites[2 * i : 2 * i + 2])]
    resampled = 0
    if len(messages) - len(empty) < MIN_PAIRS and empty:
        # Greedy decoding can be degenerate: a random model (tiny-random) answers every prompt with newlines only,
        # so no pair survives and the build fails. Those prompts are sampled once more at temperature 1 (seeded):
        # a model that writes real text greedily never gets here.
        again = [messages[i] for i in empty]
        new_answers = policy_engine.generate(again, replace(answer_params, temperature=1.0), desc="base answers")
        new_rewrites = rewrite_answers(
            teacher,
            again,
            [a.text for a in new_answers],
            (behaviour.towards, behaviour.away),
            replace(rewrite_params, temperature=1.0),
        )
        for j, i in enumerate(empty):
            answers[i] = new_answers[j]
            rewrites[2 * i : 2 * i + 2] = new_rewrites[2 * j : 2 * j + 2]
        spent_answers += new_answers
        spent_rewrites += new_rewrites
        resampled = len(empty)
    positive, negative, kept = [], [], []
    for i, (prompt, answer) in enumerate(zip(messages, answers, strict=True)):
        pos, neg = rewrites[2 * i].text.strip(), rewrites[2 * i + 1].text.strip()
        if answer.text.strip() and pos and neg:
            positive.append((prompt, pos))
            negative.append((prompt, neg))
            kept.append(i)
    return ContrastivePairs(
        behaviour=behaviour.name,
        positive=positive,
        negative=negative,
        base_answers=[a.text for a in answers],
        teacher_calls=len(spent_rewrites),
        teacher_tokens=sum(len(r.token_ids) for r in spent_rewrites),
        policy_tokens=sum(len(a.token_ids) for a in spent_answers),
        dropped=len(messages) - len(positive),
        problems=[problems[i] for i in kept] if problems is not None else None,
        resampled=resampled,
    )


def _whole(*completions: Completion) -> bool:
    """Whether an answer and its two rewrites all hold text."""
    return all(c.text.strip() for c in completions)


def rewrite_answers(
    teacher: Engine, prompts: Sequence[Messages | str], answers: Sequence[str], instructions: Sequence[str], params: Any
) -> list[Completion]:
    """Ask ``teacher`` to rewrite each answer once per instruction (REWRITE_TEMPLATE); the rewrites come back
    answer-major: [answer 0 x instruction 0, answer 0 x instruction 1, ..., answer 1 x instruction 0, ...]. One
    request is one teacher call."""
    requests = []
    for prompt, answer in zip(prompts, answers, strict=True):
        question = "\n".join(m["content"] for m in as_messages(prompt) if m["role"] == "user")
        for instruction in instructions:
            text = REWRITE_TEMPLATE.format(question=question, answer=answer.strip(), instruction=instruction)
            requests.append([{"role": "user", "content": text}])
    return teacher.generate(requests, params, desc="teacher rewrites")


def as_messages(prompt: Messages | str) -> Messages:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
