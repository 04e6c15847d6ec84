"""Steering vectors: the layer criterion on hand-made activations, activations on the tiny model, the file format,
contrastive pairs from a (fake) teacher. Per-row steering inside the engine is tested in test_engine.py."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from harness.models import Policy
from harness.steering.build import build_vector, residual_activations, separation_scores, steering_preference
from harness.steering.vectors import Steering, SteeringVector
from harness.tasks.behaviours import CONCISENESS, CONFIDENCE
from harness.teacher.rewrite import (
    ContrastivePairs,
    agreeing_pairs,
    contrastive_pairs,
)
from harness.testing import FakeEngine


def test_separation_criterion_is_cohens_d_not_the_raw_gap():
    """Layer 0: a big gap drowned in noise; layer 1: a small gap with little noise; layer 2: no gap.
    The criterion picks layer 1 (largest d), though layer 0 has the larger difference of means."""
    g = torch.Generator().manual_seed(0)
    n, hidden = 50, 8
    axis = torch.zeros(hidden)
    axis[3] = 1.0
    pos, neg = torch.zeros(n, 3, hidden), torch.zeros(n, 3, hidden)
    for layer, gap, noise in ((0, 10.0, 40.0), (1, 1.0, 0.1), (2, 0.0, 1.0)):
        pos[:, layer] = gap / 2 * axis + noise * torch.randn(n, hidden, generator=g)
        neg[:, layer] = -gap / 2 * axis + noise * torch.randn(n, hidden, generator=g)
    diff, scores = separation_scores(pos, neg)
    assert int(scores.argmax()) == 1
    assert diff[0].norm() > diff[1].norm()
    # layer 1 by hand: project on the unit mean-difference direction, (mean gap) / pooled std
    d = diff[1] / diff[1].norm()
    p, q = pos[:, 1] @ d, neg[:, 1] @ d
    pooled = (((n - 1) * p.var() + (n - 1) * q.var()) / (2 * n - 2)).sqrt()
    assert torch.isclose(scores[1], (p.mean() - q.mean()) / pooled, rtol=1e-4)
    with pytest.raises(ValueError, match="at least two"):
        separation_scores(pos[:1], neg)


def test_row_betas_layout():
    vec = SteeringVector(vector=torch.ones(4), layer=0, model="m", behaviour="b")
    assert Steering(vec, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).row_betas(3, 2) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert Steering(vec, [0.0, 1.0]).row_betas(3, 2) == [0.0, 1.0] * 3  # one per sample index
    with pytest.raises(ValueError, match="one beta per row"):
        Steering(vec, [1.0, 2.0, 3.0]).row_betas(3, 2)
    with pytest.raises(ValueError, match="finite"):
        Steering(vec, [float("nan"), 1.0]).row_betas(1, 2)


def test_residual_activations_average_response_tokens_and_ignore_the_batch(tiny_policy):
    pairs = [("Hi", "Hello there, friend."), ("What is 2+2? Explain in detail please.", "Four.")]
    together = residual_activations(tiny_policy, pairs)
    assert together.shape == (2, 2, 64)  # [items, decoder layers (embeddings excluded), hidden]
    alone = residual_activations(tiny_policy, pairs[1:])
    assert torch.allclose(together[1], alone[0], atol=1e-5)  # left padding changes nothing
    # by hand: the last decoder layer's output (before the final norm), averaged over the response tokens
    from harness.engine.transformers_engine import TransformersEngine

    prompt = TransformersEngine(tiny_policy, progress=False).encode([{"role": "user", "content": "Hi"}])
    response = tiny_policy.tokenizer("Hello there, friend.", add_special_tokens=False)["input_ids"]
    seen = []
    handle = tiny_policy.model.model.layers[1].register_forward_hook(lambda m, a, out: seen.append(out))
    with torch.no_grad():
        tiny_policy.model(input_ids=torch.tensor([prompt + response]))
    handle.remove()
    assert torch.allclose(together[0, 1], seen[0][0, -len(response) :].mean(0), atol=1e-5)
    with pytest.raises(ValueError, match="empty response"):
        residual_activations(tiny_policy, [("Hi", "")])


def test_build_vector_keeps_the_best_scoring_layer_and_round_trips(tiny_policy, tmp_path):
    prompts = ["Tell me about cats.", "How do I boil an egg?", "What is rain?", "Name a colour."]
    shouting = [(p, "THIS IS VERY IMPORTANT AND I AM SHOUTING IT!") for p in prompts]
    quiet = [(p, "this is fine, i am saying it quietly.") for p in prompts]
    vec = build_vector(
        tiny_policy,
        shouting,
        quiet,
        behaviour="shouting",
        teacher="hand-written",
        provenance={"note": "test"},
        criterion="cohen_d",
    )
    scores = vec.provenance["layer_scores"]
    assert len(scores) == 2 and vec.layer == max(range(2), key=scores.__getitem__)
    assert vec.provenance["layer_chosen_by"] == "cohen_d" and vec.provenance["layer_preferences"] is None
    assert torch.isclose(vec.vector.norm(), torch.tensor(1.0))
    assert vec.norms["raw_norm"] > 0 and vec.provenance["pairs"] == {"positive": 4, "negative": 4}
    assert vec.provenance["teacher"] == "hand-written" and vec.provenance["note"] == "test"
    assert vec.model == "tiny-random" and vec.provenance["harness_version"]

    path = tmp_path / "shouting.safetensors"
    vec.save(path)
    loaded = SteeringVector.load(path, model=tiny_policy)
    assert torch.equal(loaded.vector, vec.vector)
    assert (loaded.layer, loaded.model, loaded.behaviour) == (vec.layer, vec.model, vec.behaviour)
    assert loaded.provenance == vec.provenance and loaded.norms == vec.norms
    with pytest.raises(ValueError, match="hidden size 64"):
        SteeringVector.load(path, model=128)


def test_probe_layers_scans_every_kth_layer_then_climbs_to_the_peak():
    from harness.steering.build import probe_layers

    scores = [0.0, 0.1, 0.3, 0.2, 0.5, 0.9, 1.2, 1.0, 0.4, 0.1]  # smooth, peak at 6
    probed = []

    def score(i):
        probed.append(i)
        return scores[i]

    got = probe_layers(score, len(scores), 4)
    # coarse 0, 4, 8 (best 4); neighbours 3, 5 (best 5); 6 (best 6); 7: neither neighbour of 6 is better
    assert probed == [0, 4, 8, 3, 5, 6, 7]
    assert got == [scores[i] if i in probed else None for i in range(len(scores))]
    assert max((i for i in probed), key=scores.__getitem__) == 6
    assert probe_layers(score, 3, 1) == scores[:3]  # every=1: the full scan, nothing left to climb


def test_preference_criterion_probes_every_layer_and_keeps_the_best(tiny_policy):
    prompts = ["Tell me about cats.", "How do I boil an egg?", "What is rain?", "Name a colour.", "Why?"]
    shouting = [(p, "THIS IS VERY IMPORTANT AND I AM SHOUTING IT!") for p in prompts]
    quiet = [(p, "this is fine, i am saying it quietly.") for p in prompts]
    seen = []
    vec = build_vector(
        tiny_policy,
        shouting,
        quiet,
        behaviour="shouting",
        probe_pairs=4,
        probe_beta=0.5,
        progress=lambda i, p: seen.append((i, p)),
    )
    preferences = vec.provenance["layer_preferences"]
    assert [i for i, _ in seen] == [0, 1] and [p for _, p in seen] == preferences
    assert vec.layer == max(range(2), key=preferences.__getitem__) and vec.provenance["layer_chosen_by"] == "preference"
    assert vec.provenance["probe"] == {"beta": 0.5, "beta_unit": "activation_norm", "pairs": 4, "every": 1}
    # Each layer's figure, recomputed without the library's code: the diff of the mean response-token outputs of the
    # layer (positive - negative), unit length, added at 0.5 activation norms to that layer's output by a hook of
    # our own; then how much it raises the positive responses' mean token log-prob over the negative ones'. A
    # criterion whose sign is flipped (or a vector pointing backwards) keeps the worst layer and fails here.
    expected = [_independent_preference(tiny_policy, shouting, quiet, layer, 0.5, pairs=4) for layer in range(2)]
    assert preferences == pytest.approx(expected, abs=1e-4)
    assert max(expected) > 0 and vec.layer == max(range(2), key=expected.__getitem__)
    assert any(abs(p) > 1e-4 for p in preferences)  # the probe moves the likelihoods at all
    every_other = build_vector(
        tiny_policy, shouting, quiet, behaviour="shouting", probe_pairs=4, probe_beta=0.5, probe_every=2, progress=False
    )
    # layer 0, then its unprobed neighbour: on two layers the climb ends where the full scan did
    assert every_other.provenance["layer_preferences"] == preferences and every_other.layer == vec.layer
    with pytest.raises(ValueError, match="criterion must be one of"):
        build_vector(tiny_policy, shouting, quiet, behaviour="shouting", criterion="vibes")


class _HandMadeTokenizer:
    """One token per character: A, B, C, D. No chat template: a prompt is its text (harness.engine.tokens)."""

    chat_template = None
    pad_token_id = 2

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": ["ABCD".index(c) for c in text]}


class _Affine(torch.nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = torch.tensor(scale), torch.tensor(bias)

    def forward(self, hidden):
        return hidden * self.scale + self.bias


class _HandMadeModel(torch.nn.Module):
    """Two position-wise decoder layers on a 3-d residual stream, every number chosen by hand. Embeddings: A (1, 0, 0),
    B (0, 1, 0), D (1, 1, 0), C (the prompt) 0. Layer 0: the identity. Layer 1: (x, y, z) -> (2x, 0, z + 1.5). The
    head reads x only: logit(A) = x, logit(B) = -x, logit(C) = logit(D) = 0."""

    config = SimpleNamespace(hidden_size=3, num_hidden_layers=2)

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Parameter(torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 0], [1, 1, 0]]))
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList(
            [_Affine([1.0, 1, 1], [0.0, 0, 0]), _Affine([2.0, 0, 1], [0.0, 0, 1.5])]
        )

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=None, logits_to_keep=0):
        hidden = self.embed[input_ids]
        for layer in self.model.layers:
            hidden = layer(hidden)
        x = hidden[..., 0]
        logits = torch.stack([x, -x, torch.zeros_like(x), torch.zeros_like(x)], dim=-1)
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)


def test_each_criterion_keeps_the_layer_it_should_on_a_hand_made_model():
    """Both layer criteria on a model small enough to work out on paper (see _HandMadeModel), against the figures
    worked out here, not recomputed: layer 0 separates the pairs better (Cohen's d), steering at layer 1 raises the
    positive answer more (preference), so each criterion keeps its own layer. A criterion whose sign is flipped, a
    direction pointing backwards or a choice of the worst layer fails here.

    Response-token activations (pairs: prompt "C", positive "A" and "AD", negative "B" and "BD"):
      layer 0: positive (1, 0, 0), (1, .5, 0); negative (0, 1, 0), (.5, 1, 0); mean difference (.75, -.75, 0)
      layer 1: positive (2, 0, 1.5), (2, 0, 1.5); negative (0, 0, 1.5), (1, 0, 1.5); mean difference (1.5, 0, 0)
    Cohen's d along each layer's unit difference: layer 0, projections +-1/sqrt2 and +-.5/sqrt2, gap 1.5/sqrt2,
    pooled sd .25: d = 3 sqrt2; layer 1, projections 2, 2 and 0, 1, gap 1.5, pooled sd .5: d = 3.
    Preference on the first pair at probe_beta .5 of each layer's activation norm (mean of the two sets' mean
    norms): both answers are one token read at the prompt, so the preference is the change of logit(A) - logit(B)
    = 2x at that position. Layer 0: norm (1 + sqrt1.25) / 2, its unit direction (1, -1, 0) / sqrt2 becomes
    x + 2 / sqrt2 after layer 1: preference .5 * norm * 2 * sqrt2. Layer 1: norm (2.5 + (1.5 + sqrt3.25) / 2) / 2,
    direction (1, 0, 0): preference .5 * norm * 2."""
    policy = Policy(model=_HandMadeModel(), tokenizer=_HandMadeTokenizer(), spec="hand-made", source="this test")
    positive, negative = [("C", "A"), ("C", "AD")], [("C", "B"), ("C", "BD")]
    d_scores = [4.2426407, 3.0]  # 3 sqrt2, 3
    preferences = [1.4976761, 2.0756939]  # sqrt2 (1 + sqrt1.25) / 2, (2.5 + (1.5 + sqrt3.25) / 2) / 2

    by_d = build_vector(policy, positive, negative, behaviour="hand", criterion="cohen_d", progress=False)
    assert by_d.layer == 0 and by_d.provenance["layer_scores"] == pytest.approx(d_scores, abs=1e-5)
    assert by_d.vector.tolist() == pytest.approx([0.7071068, -0.7071068, 0.0], abs=1e-6)

    by_preference = build_vector(
        policy, positive, negative, behaviour="hand", probe_pairs=1, probe_beta=0.5, progress=False
    )
    assert by_preference.provenance["layer_preferences"] == pytest.approx(preferences, abs=1e-5)
    assert by_preference.layer == 1 and by_preference.vector.tolist() == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)
    assert by_preference.norms == pytest.approx({"raw_norm": 1.5, "activation_norm": 2.0756939}, abs=1e-5)


def _independent_preference(policy, positive, negative, layer: int, beta_norms: float, pairs: int) -> float:
    """steering_preference's definition computed from plain forward passes, one pair at a time (test oracle)."""
    model, tok = policy.model, policy.tokenizer

    def ids(prompt, response):
        prompt_ids = tok.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        return list(prompt_ids), tok(response, add_special_tokens=False)["input_ids"]

    def outputs(items):  # [N, hidden]: the layer's output averaged over each response's tokens
        rows, seen = [], []
        # a hook, not output_hidden_states: the last entry of that is after the final norm
        hook = model.model.layers[layer].register_forward_hook(
            lambda m, i, out: seen.append(out[0] if isinstance(out, tuple) else out)
        )
        try:
            for prompt, response in items:
                p, r = ids(prompt, response)
                with torch.no_grad():
                    model(input_ids=torch.tensor([p + r]))
                rows.append(seen.pop()[0, len(p) :].mean(0))
        finally:
            hook.remove()
        return torch.stack(rows)

    def mean_logprob(prompt, response, add=None):
        p, r = ids(prompt, response)
        layers = model.model.layers
        hook = (
            layers[layer].register_forward_hook(
                lambda m, i, out: (out[0] + add, *out[1:]) if isinstance(out, tuple) else out + add
            )
            if add is not None
            else None
        )
        try:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([p + r])).logits[0].float()
        finally:
            if hook is not None:
                hook.remove()
        logp = torch.log_softmax(logits[len(p) - 1 : -1], dim=-1)
        return float(logp.gather(-1, torch.tensor(r)[:, None]).mean())

    pos, neg = outputs(positive), outputs(negative)
    diff = pos.mean(0) - neg.mean(0)
    add = beta_norms * 0.5 * float(pos.norm(dim=-1).mean() + neg.norm(dim=-1).mean()) * diff / diff.norm()
    gains = [
        (mean_logprob(*a, add) - mean_logprob(*a)) - (mean_logprob(*b, add) - mean_logprob(*b))
        for a, b in zip(positive[:pairs], negative[:pairs], strict=True)
    ]
    return sum(gains) / len(gains)


def test_contrastive_pairs_counts_the_teacher_and_drops_empty_rewrites():
    policy = FakeEngine(["The answer is 4 because two and two make four"])

    def teacher_says(messages, sample_index, seed):
        text = messages[0]["content"]
        if "Is the sky green?" in text:
            return ""  # an empty rewrite: the pair is dropped
        return "CONFIDENT answer" if CONFIDENCE.towards in text else "maybe the answer is possibly 4"

    teacher = FakeEngine(teacher_says)
    pairs = contrastive_pairs(policy, teacher, ["What is 2+2?", "Is the sky green?", "What is 3+1?"], CONFIDENCE)
    assert pairs.teacher_calls == 6 and len(teacher.calls) == 1 and len(policy.calls) == 1
    assert pairs.teacher_tokens == 2 + 6 + 0 + 0 + 2 + 6  # whitespace words are FakeEngine's tokens
    assert pairs.policy_tokens == 3 * 10 and pairs.dropped == 1
    assert [p for p, _ in pairs.positive] == [
        [{"role": "user", "content": "What is 2+2?"}],
        [{"role": "user", "content": "What is 3+1?"}],
    ]
    assert [r for _, r in pairs.positive] == ["CONFIDENT answer"] * 2
    assert [r for _, r in pairs.negative] == ["maybe the answer is possibly 4"] * 2
    assert "What is 2+2?" in teacher.calls[0][0][0][0]["content"]  # the teacher sees the question and the answer
    assert "two and two" in teacher.calls[0][0][0][0]["content"]
    only_policy = contrastive_pairs(policy, None, ["What is 2+2?"], CONCISENESS)  # teacher defaults to the policy
    assert only_policy.teacher_calls == 2 and len(policy.calls) == 3


def test_agreeing_pairs_drops_pairs_the_scorer_ranks_backwards():
    from harness.tasks.behaviours import conciseness

    long = " ".join(["Basically, this is very very important to note."] * 10)
    pairs = ContrastivePairs(
        behaviour="conciseness",
        positive=[("q1", "4."), ("q2", long), ("q3", "Yes.")],
        negative=[("q1", long), ("q2", "No."), ("q3", "No.")],
        base_answers=["", "", ""],
        teacher_calls=6,
        teacher_tokens=0,
        policy_tokens=0,
        dropped=1,
    )
    kept = agreeing_pairs(pairs, conciseness)
    assert [p for p, _ in kept.positive] == ["q1", "q3"]  # q2 is backwards; q3 is a tie (both 1.0) and stays
    assert [p for p, _ in kept.negative] == ["q1", "q3"]
    assert kept.disagreeing == 1 and kept.provenance()["disagreeing_pairs"] == 1 and kept.dropped == 1


def test_beta_units_and_a_given_layer(tiny_policy):
    prompts = ["Tell me about cats.", "How do I boil an egg?", "What is rain?"]
    vec = build_vector(
        tiny_policy,
        [(p, "YES, LOUDLY!") for p in prompts],
        [(p, "yes, softly.") for p in prompts],
        behaviour="shouting",
        layer=0,
    )
    assert vec.layer == 0 and vec.provenance["layer_chosen_by"] == "given"
    assert vec.unit("absolute") == 1.0
    assert vec.unit("raw_norm") == vec.norms["raw_norm"] == pytest.approx(vec.provenance["layer_raw_norms"][0])
    assert vec.unit("activation_norm") == vec.norms["activation_norm"] > 0
    with pytest.raises(ValueError, match="beta_unit must be one of"):
        vec.unit("furlongs")
    with pytest.raises(ValueError, match="layer 5 is out of range"):
        build_vector(tiny_policy, [(p, "A") for p in prompts], [(p, "b") for p in prompts], behaviour="x", layer=5)


def test_import_does_not_pull_torch():
    import subprocess
    import sys

    code = "import sys, harness.steering.vectors; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_response_logprob_matches_a_plain_forward_and_beta_zero_changes_nothing(tiny_policy):
    from harness.engine.transformers_engine import TransformersEngine
    from harness.steering.build import response_logprob

    items = [("What is rain?", "Water falling."), ("Name a colour.", "A bright shade of red, I would say.")]
    got = response_logprob(tiny_policy, items)
    encode = TransformersEngine(tiny_policy, progress=False).encode
    for (prompt, response), value in zip(items, got, strict=True):
        p = encode([{"role": "user", "content": prompt}])
        r = tiny_policy.tokenizer(response, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = tiny_policy.model(input_ids=torch.tensor([p + r])).logits[0, :-1].float()
        logp = torch.log_softmax(logits, -1)[len(p) - 1 :].gather(-1, torch.tensor(r)[:, None])[:, 0]
        assert float(value) == pytest.approx(float(logp.mean()), abs=1e-4)
    vec = SteeringVector(vector=torch.ones(64) / 8, layer=1, model="tiny-random", behaviour="x")
    assert steering_preference(tiny_policy, items[:1], items[1:], vec, 0.0) == pytest.approx(0.0, abs=1e-5)
    assert steering_preference(tiny_policy, items[:1], items[1:], vec, 5.0) != pytest.approx(0.0, abs=1e-5)


def test_without_length_removes_what_length_explains_and_keeps_the_behaviour():
    """Activations made of a length part (along e0, growing with log length) and a behaviour part (+e1 / -e1), with
    the positive set longer: the plain difference of means leans on e0; without length it is the behaviour alone."""
    import torch

    from harness.steering.build import without_length

    gen = torch.Generator().manual_seed(0)
    e0, e1 = torch.eye(4)[0], torch.eye(4)[1]

    def acts(lengths: list[int], sign: float) -> torch.Tensor:
        rows = [3.0 * math.log(n) * e0 + sign * e1 + 0.01 * torch.randn(4, generator=gen) for n in lengths]
        return torch.stack(rows)[:, None, :]  # [N, 1 layer, hidden]

    long, short = [40, 60, 80, 120, 90], [8, 12, 20, 10, 16]
    pos, neg = acts(long, +1.0), acts(short, -1.0)
    diff = pos.mean(0) - neg.mean(0)
    assert float(diff[0, 0]) > 3.0  # the plain difference is mostly length
    kept, share = without_length(diff, pos, neg, long, short)
    assert abs(float(kept[0, 0])) < 0.05 and abs(float(kept[0, 1]) - 2.0) < 0.05
    assert float(share[0]) > 0.8  # most of the difference's norm lay along length
    same, none = without_length(diff, pos, neg, [5] * 5, [5] * 5)  # no length variation: nothing to remove
    assert torch.equal(same, diff) and float(none[0]) == 0.0
