"""Known-outcome checks: small environments where the right answer is known in advance, run through the real trainer
loop (``Trainer.train`` with the transformers engine) or the real searcher, each asserting the direction of its
mechanism's signature with a margin, and each parametrized with a broken variant that must NOT show the signature,
so CI proves every check can fail. The environments (tests/known_outcome_tasks.py) use a 2-layer Llama over a
9-word vocabulary: its random outputs give every word a substantial probability, so RL moves it in seconds.

1. VPO (``TradeOffTask``): components a, b, c are scored by an answer's first word, so no answer scores on two of
   them, and the weights (1.0, 0.9, 0.8) give a scalar reward one best answer. GRPO's policy collapses onto "a":
   M = 3 independent samples cover 1 component. VPO's set reward E_w[max_m w . r(y_m)] pays for covering several,
   so its M-answer sets cover more. Broken: the same VPO trainer with ``advantage=grpo`` (each answer scored on its
   own, the set's mean): its sets collapse onto "a" too. (Not M = 1: VPO's Dirichlet trade-offs ignore the sizes
   of the task's weights, so with M = 1 it collapses onto whichever component the draws favour, and M samples of a
   policy still mixed at the end cover more than GRPO's: +0.69 at seed 2 of 0-4.)
2. VSPO (``AnythingTask``, reward 1 for any answer): a steering vector at the last layer along the (centred) tied
   embedding of "a" makes steered rollouts write "a" more often; the strength reward r0 + alpha * beta prefers the
   strongly steered rollouts, so the UNSTEERED policy comes to write "a" more often. Broken: alpha = 0 (no steering
   reward: every advantage is 0) and a zero vector (the same rewards by beta, but rollouts no longer differ by beta:
   the update is noise of the same size, with no direction).
3. PKPO (``HedgeTask``): "a" is worth 0.6 on every problem; b, c or d is worth 1.0 on a third of the problems each,
   and the prompt does not say which. The mean is best with "a" alone (GRPO collapses onto it: max@4 = 0.6); max@4
   is best spread over a, b, c, d (about 0.84). PKPO with k = 4 keeps several of them and raises max@4 above GRPO's.
   Broken: PKPO with k = 1 (the per-sample mean again) collapses like GRPO.
4. evolve (``MissingWordsTask`` and the scripted ``fixing_responder``): the task's feedback names a missing word;
   the engine, shown that feedback in a child prompt, adds the word with probability 1/2, and otherwise writes a
   fresh random answer. Children then improve on their parents more often than fresh samples improve on an earlier
   sample. A tiny random model cannot read feedback, so the engine is scripted: the searcher is what is under test
   (that the parent shown is the parent recorded, that feedback reaches the prompt). Broken: the evaluator's feedback
   removed before it reaches the child prompt; children then improve less often than fresh samples.

Margins were chosen from repeated runs (seeds 0-4 or 0-7, figures beside each constant); each test then runs one
fixed seed. ``KNOWN_OUTCOME_SEED=3 pytest tests/test_known_outcomes.py -s`` reruns them at another seed and prints
the figures. No test asserts a time.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch
from known_outcome_tasks import (
    DELIMITER,
    WORDS,
    AnythingTask,
    HedgeTask,
    MissingWordsTask,
    TradeOffTask,
    first_word,
    fixing_responder,
    save_toy_model,
)

import harness.searchers.evolve as evolve_module
from harness.engine.transformers_engine import TransformersEngine
from harness.metrics.unbiased import best_at_k
from harness.models import load_policy
from harness.scoring.multi_answer import instruct, split_answers
from harness.searchers.evolve import Evolve
from harness.steering.vectors import SteeringVector
from harness.testing import FakeEngine, FakeStore
from harness.trainers.grpo import GRPOTrainer
from harness.trainers.vpo import VPOTrainer
from harness.trainers.vspo import VSPOTrainer
from harness.types import SamplingParams

SEED = int(os.environ.get("KNOWN_OUTCOME_SEED", "0"))
EVAL_SEED = 999  # the sampling seed of every evaluation: the same random numbers before and after training


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One thread: the toy model is too small to gain from more, and the machine's cores are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def toy_folder(tmp_path_factory):
    return save_toy_model(tmp_path_factory.mktemp("toy-model"))


@pytest.fixture
def new_policy(toy_folder, plugins):
    """A fresh copy of the same random toy model for every training run."""
    return lambda: load_policy(toy_folder, plugins["model"])


def train(trainer, policy, task) -> FakeStore:
    store = FakeStore()
    trainer.train(policy, TransformersEngine(policy, progress=False), task, task.problems("train"), store=store)
    return store


def sample(policy, prompts, n: int, max_new_tokens: int, steering=None):
    return TransformersEngine(policy, progress=False).generate(
        prompts, SamplingParams(n=n, max_new_tokens=max_new_tokens, seed=EVAL_SEED), steering=steering
    )


# ----------------------------------------------------------------------------------------------------------------
# 1. VPO: answer sets cover trade-offs that GRPO's samples collapse away from
# ----------------------------------------------------------------------------------------------------------------

M = 3  # answers per set: as many as there are components
SETS = 48  # sets drawn to measure coverage
# Coverage gain of VPO's sets over M GRPO samples, 50 steps, seeds 0-4: intact +0.67, +1.06, +0.96, +0.98, +0.98;
# advantage=grpo 0.00, 0.00, 0.00, +0.02, +0.04. (GRPO's samples cover 1.00 on every seed: all "a".)
VPO_MARGIN = 0.4


def coverage(task, answer_sets) -> float:
    """Mean number of components scored (> 0) by at least one answer of a set."""
    problem = task.problems("eval")[0]
    covered = [
        sum(any(task.score(problem, a).rewards[c] > 0 for a in answers) for c in task.reward_weights)
        for answers in answer_sets
    ]
    return sum(covered) / len(covered)


@pytest.fixture(scope="module")
def grpo_coverage(toy_folder, plugins):
    policy = load_policy(toy_folder, plugins["model"])
    task = TradeOffTask()
    train(
        GRPOTrainer(plugins=plugins, steps=50, prompts_per_step=2, group_size=8, max_new_tokens=6, lr=1e-2, seed=SEED),
        policy,
        task,
    )
    completions = sample(policy, [task.messages(task.problems("eval")[0])], SETS * M, 6)
    return coverage(task, [[c.text for c in completions[i : i + M]] for i in range(0, SETS * M, M)])


@pytest.mark.parametrize("advantage, intact", [("vpo", True), ("grpo", False)], ids=["vpo", "broken-mean-of-set"])
def test_vpo_sets_cover_more_components_than_grpo_samples(advantage, intact, new_policy, plugins, grpo_coverage):
    policy, task = new_policy(), TradeOffTask()
    # No warm-up: the delimiter is one word of the vocabulary, and sets with more answers score higher, so RL alone
    # teaches the format.
    train(
        VPOTrainer(
            plugins=plugins,
            steps=50,
            prompts_per_step=2,
            group_size=8,
            max_new_tokens=6 * M,
            lr=1e-2,
            answers_per_rollout=M,
            delimiter=DELIMITER,
            warmup_steps=0,
            advantage=advantage,
            seed=SEED,
        ),
        policy,
        task,
    )
    prompt = instruct(task.messages(task.problems("eval")[0]), M, DELIMITER)
    sets = [split_answers(c.text, M, DELIMITER) for c in sample(policy, [prompt], SETS, 6 * M)]
    gain = coverage(task, sets) - grpo_coverage
    print(f"vpo advantage={advantage} seed={SEED}: coverage gain over GRPO {gain:+.2f} (GRPO {grpo_coverage:.2f})")
    assert (gain > VPO_MARGIN) == intact, (
        f"VPO (advantage={advantage}) sets cover {gain:+.2f} components more than GRPO's {grpo_coverage:.2f}; "
        f"expected {'more' if intact else 'no more'} than {VPO_MARGIN}"
    )


# ----------------------------------------------------------------------------------------------------------------
# 2. VSPO: the unsteered policy moves the way the preferred steering moves it
# ----------------------------------------------------------------------------------------------------------------

BETAS = "-4,-2,-1,0,1,2,4,6"  # absolute: the toy's residual stream has norm ~0.2, so |beta| >= 1 saturates
# Rise of the unsteered policy's share of "a" among written words (0.13 before), 40 steps, seeds 0-7:
# intact +0.33, +0.48, +0.67, +0.57, +0.45, +0.29, +0.48, +0.68; alpha=0: 0.00 on every seed;
# zero vector: +0.04, 0.00, +0.04, +0.03, +0.03, +0.07, +0.03, +0.04.
VSPO_MARGIN = 0.15


def share_of_a(policy) -> float:
    words = [w for c in sample(policy, [[{"role": "user", "content": "Q"}]], 256, 8) for w in c.text.split()]
    return sum(w == "a" for w in words) / max(len(words), 1)


@pytest.fixture
def steering_file(new_policy, tmp_path):
    """Two vectors at the last decoder layer: along the centred tied embedding of "a" (steering by +beta makes "a"
    likelier, since the final norm and the tied head read that direction as the word "a"), and zero."""
    embedding = new_policy().model.get_input_embeddings().weight.detach()
    towards_a = embedding[WORDS.index("a")] - embedding.mean(dim=0)
    paths = {}
    for name, vector in (("towards_a", towards_a / towards_a.norm()), ("zero", torch.zeros_like(towards_a))):
        paths[name] = tmp_path / f"{name}.safetensors"
        SteeringVector(vector=vector, layer=1, model="toy", behaviour="more-a").save(paths[name])
    return paths


@pytest.mark.parametrize(
    "vector, alpha, intact",
    [("towards_a", 0.2, True), ("towards_a", 0.0, False), ("zero", 0.2, False)],
    ids=["vspo", "broken-alpha-0", "broken-zero-vector"],
)
def test_vspo_moves_the_unsteered_policy_the_way_steering_does(
    vector, alpha, intact, new_policy, plugins, steering_file
):
    policy, task = new_policy(), AnythingTask()
    before = share_of_a(policy)
    train(
        VSPOTrainer(
            plugins=plugins,
            vector=str(steering_file[vector]),
            betas=BETAS,
            beta_unit="absolute",
            alpha=alpha,
            group_size=8,
            prompts_per_step=2,
            steps=40,
            max_new_tokens=8,
            lr=3e-3,
            seed=SEED,
        ),
        policy,
        task,
    )
    rise = share_of_a(policy) - before
    print(f"vspo vector={vector} alpha={alpha} seed={SEED}: share of 'a' {before:.2f} -> {before + rise:.2f}")
    assert (rise > VSPO_MARGIN) == intact, (
        f"VSPO (vector={vector}, alpha={alpha}) moved the unsteered share of 'a' by {rise:+.2f}; expected "
        f"{'more' if intact else 'no more'} than {VSPO_MARGIN}"
    )


# ----------------------------------------------------------------------------------------------------------------
# 3. PKPO: optimising max@k keeps the distinct answers that the mean collapses away
# ----------------------------------------------------------------------------------------------------------------

K = 4
# 80 steps, seeds 0-5. Answers kept (of a, b, c, d, each >= 10% of first words): GRPO 1 on every seed ("a");
# pkpo k=4: 4, 4, 4, 3, 4, 4; pkpo k=1: 1 on every seed. max@4 (0.57 before training): GRPO 0.60 on every seed;
# k=4: 0.83, 0.84, 0.79, 0.80, 0.83, 0.84; k=1: 0.60, 0.60, 0.60, 0.60, 0.61, 0.60.
PKPO_MORE_KEPT = 2
PKPO_MARGIN = 0.1


def kept_and_max_at_k(policy, task) -> tuple[int, float]:
    """(how many of a, b, c, d make up at least 10% of first words, mean unbiased max@K over the problems)."""
    problems = task.problems("eval")
    completions = sample(policy, [task.messages(p) for p in problems], 64, 6)
    firsts = Counter(first_word(c.text) for c in completions)
    kept = sum(firsts[w] >= 0.1 * len(completions) for w in "abcd")
    values = [
        [task.score(p, c.text).rewards["value"] for c in completions if c.prompt_index == i]
        for i, p in enumerate(problems)
    ]
    return kept, sum(best_at_k(v, K) for v in values) / len(values)


def train_on_hedge(policy, plugins, **options) -> None:
    # every problem in every step: a mean-maximiser then cannot sit on b (right on one problem in three) for long
    train(
        GRPOTrainer(
            plugins=plugins, steps=80, prompts_per_step=3, group_size=8, max_new_tokens=6, lr=1e-2, seed=SEED, **options
        ),
        policy,
        HedgeTask(),
    )


@pytest.fixture(scope="module")
def grpo_hedge(toy_folder, plugins):
    policy = load_policy(toy_folder, plugins["model"])
    train_on_hedge(policy, plugins)
    return kept_and_max_at_k(policy, HedgeTask())


@pytest.mark.parametrize("k, intact", [(K, True), (1, False)], ids=["pkpo", "broken-k-1"])
def test_pkpo_keeps_distinct_answers_and_raises_max_at_k(k, intact, new_policy, plugins, grpo_hedge):
    policy = new_policy()
    _, before = kept_and_max_at_k(policy, HedgeTask())
    train_on_hedge(policy, plugins, advantage="pkpo", pkpo_k=k)
    kept, max_at_k = kept_and_max_at_k(policy, HedgeTask())
    grpo_kept, grpo_max_at_k = grpo_hedge
    print(
        f"pkpo k={k} seed={SEED}: kept {kept} (GRPO {grpo_kept}), max@{K} {before:.2f} -> {max_at_k:.2f} "
        f"(GRPO {grpo_max_at_k:.2f})"
    )
    assert (kept >= grpo_kept + PKPO_MORE_KEPT) == intact, (
        f"PKPO k={k} kept {kept} distinct answers, GRPO {grpo_kept}; expected {'at least' if intact else 'fewer than'}"
        f" {PKPO_MORE_KEPT} more"
    )
    assert (max_at_k > grpo_max_at_k + PKPO_MARGIN) == intact, (
        f"PKPO k={k}: max@{K} {max_at_k:.3f}, GRPO {grpo_max_at_k:.3f}; expected {'more' if intact else 'no more'} "
        f"than {PKPO_MARGIN} above"
    )
    if intact:  # and above the untrained policy's (GRPO's own 0.6 is only just above it)
        assert max_at_k > before + PKPO_MARGIN


# ----------------------------------------------------------------------------------------------------------------
# 4. evolve: a child shown its parent's feedback improves on that parent
# ----------------------------------------------------------------------------------------------------------------

# Children's improvement rate minus fresh samples', seeds 0-7 (children seeded per generation): feedback shown
# +0.31, +0.22, +0.37, +0.21, +0.23, +0.17, +0.26, +0.10; feedback removed -0.17, -0.04, -0.12, -0.07, -0.18, -0.10,
# -0.16, -0.19. (Seeded per child slot, before: +0.30, +0.40, +0.24, +0.24, +0.16, +0.26, +0.27, +0.21 and -0.14,
# -0.03, -0.08, -0.08, -0.20, -0.11, -0.11, -0.20.)
EVOLVE_MARGIN = 0.08


def fresh_improvement_rate(task, engine) -> float:
    """How often a fresh sample of the task's own prompt scores above an earlier one of the same problem (over every
    earlier one: the expectation over a random earlier sample)."""
    problems = task.problems("eval")
    completions = engine.generate([task.messages(p) for p in problems], SamplingParams(n=16, seed=SEED))
    wins = pairs = 0
    for i, problem in enumerate(problems):
        values = [task.score(problem, c.text).rewards for c in completions if c.prompt_index == i]
        fitness = [sum(task.reward_weights[w] * r[w] for w in task.reward_weights) for r in values]
        for later in range(1, len(fitness)):
            wins += sum(fitness[later] > fitness[earlier] for earlier in range(later))
            pairs += later
    return wins / pairs


@pytest.mark.parametrize("feedback, intact", [(True, True), (False, False)], ids=["evolve", "broken-no-feedback"])
def test_evolve_children_improve_on_their_parents(feedback, intact, tmp_path, monkeypatch):
    task = MissingWordsTask()
    if not feedback:  # the evaluator's feedback never reaches a child prompt
        check = evolve_module._check
        monkeypatch.setattr(evolve_module, "_check", lambda *args: (check(*args)[0], ""))
    store = FakeStore(tmp_path)
    Evolve(seeds=4, children=4, calls=16, seed=SEED).search(
        FakeEngine(fixing_responder), task, task.problems("eval"), phase="eval", store=store
    )
    fitness = {(s["problem_id"], s["sample_index"]): s["scalar"] for s in store.samples}
    children = [s for s in store.samples if s["parent"] is not None]
    improved = sum(s["scalar"] > fitness[s["problem_id"], s["parent"]] for s in children) / len(children)
    fresh = fresh_improvement_rate(task, FakeEngine(fixing_responder))
    print(f"evolve feedback={feedback} seed={SEED}: children improve {improved:.2f}, fresh samples {fresh:.2f}")
    assert (improved - fresh > EVOLVE_MARGIN) == intact, (
        f"evolve (feedback {'shown' if feedback else 'removed'}): children improved on their parents {improved:.2f} "
        f"of the time, fresh samples on an earlier one {fresh:.2f}; expected a lead "
        f"{'above' if intact else 'of at most'} {EVOLVE_MARGIN}"
    )
