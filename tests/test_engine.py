"""The rollout engine on the tiny random Llama: exact log-probs, left padding, seeds, budgets."""

from __future__ import annotations

import pytest
import torch

from harness.engine.transformers_engine import TransformersEngine
from harness.trainers.policy_gradient import pad_completions, sequence_logprobs
from harness.types import SamplingParams

SHORT = [{"role": "user", "content": "Hi"}]
LONG = [{"role": "user", "content": "Please write a long and detailed story about a dragon who learns maths."}]


def _engine(policy):
    return TransformersEngine(policy, progress=False)


def test_logprobs_match_a_plain_forward_pass(tiny_policy):
    engine = _engine(tiny_policy)
    for temperature in (1.0, 0.7):
        completions = engine.generate(
            [SHORT, LONG], SamplingParams(n=3, max_new_tokens=12, temperature=temperature, seed=1)
        )
        assert [(c.prompt_index, c.sample_index) for c in completions] == [(p, s) for p in range(2) for s in range(3)]
        batch = pad_completions(completions, tiny_policy.tokenizer.pad_token_id)
        with torch.no_grad():
            logp = sequence_logprobs(
                tiny_policy.model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]), temperature
            )
        mask = batch["completion_mask"].bool()
        assert torch.allclose(logp[mask], batch["old_logp"][mask], atol=2e-4), temperature


def test_left_padding_does_not_change_a_prompt_s_completion(tiny_policy):
    engine = _engine(tiny_policy)
    greedy = SamplingParams(n=1, max_new_tokens=10, temperature=0)
    alone = engine.generate([SHORT], greedy)[0]
    batched = engine.generate([LONG, SHORT], greedy)[1]
    assert batched.prompt_index == 1
    assert batched.token_ids == alone.token_ids
    assert torch.allclose(torch.tensor(batched.logprobs), torch.tensor(alone.logprobs), atol=1e-4)


def test_seeded_sampling_is_deterministic_and_batch_invariant(tiny_policy):
    engine = _engine(tiny_policy)
    params = SamplingParams(n=4, max_new_tokens=8, temperature=1.0, seed=7)
    first = engine.generate([SHORT, LONG], params)
    again = engine.generate([SHORT, LONG], params)
    assert [c.token_ids for c in first] == [c.token_ids for c in again]
    alone = engine.generate([LONG], params)  # same prompt, different batch: same random stream per sample
    assert [c.token_ids for c in alone] == [c.token_ids for c in first[4:]]
    other = engine.generate([SHORT, LONG], SamplingParams(n=4, max_new_tokens=8, temperature=1.0, seed=8))
    assert [c.token_ids for c in other] != [c.token_ids for c in first]
    assert len({tuple(c.token_ids) for c in first[:4]}) > 1  # the n samples of one prompt differ


def test_samples_per_prompt_are_the_samples_of_n(tiny_policy):
    """``samples=[k_0, k_1, ...]``: prompt p gets k_p samples, sample j the one any n > j draws (its own stream), the
    prompt prefilled once for its k_p rows."""
    engine = _engine(tiny_policy)
    params = SamplingParams(n=1, max_new_tokens=8, temperature=1.0, seed=5)
    mixed = engine.generate([SHORT, LONG, SHORT], params, samples=[3, 1, 0])
    assert [(c.prompt_index, c.sample_index) for c in mixed] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    three = engine.generate([SHORT, LONG], SamplingParams(n=3, max_new_tokens=8, temperature=1.0, seed=5))
    assert [c.token_ids for c in mixed] == [c.token_ids for c in three[:4]]
    assert engine.capabilities.samples_per_prompt
    with pytest.raises(ValueError, match="one count >= 0 per prompt"):
        engine.generate([SHORT, LONG], params, samples=[1])


def test_budget_and_finished_flags(tiny_policy):
    engine = _engine(tiny_policy)
    eos = tiny_policy.tokenizer.eos_token_id
    completions = engine.generate([SHORT, LONG], SamplingParams(n=2, max_new_tokens=5, temperature=1.0))
    for c in completions:
        assert 1 <= len(c.token_ids) <= 5 and len(c.logprobs) == len(c.token_ids)
        assert c.finished == (c.token_ids[-1] == eos)
        assert all(lp <= 0 for lp in c.logprobs)
        assert c.text == tiny_policy.tokenizer.decode(c.token_ids, skip_special_tokens=True)


def test_top_k_one_is_greedy(tiny_policy):
    engine = _engine(tiny_policy)
    greedy = engine.generate([LONG], SamplingParams(n=1, max_new_tokens=6, temperature=0))[0]
    top1 = engine.generate([LONG], SamplingParams(n=2, max_new_tokens=6, temperature=1.0, top_k=1, seed=3))
    assert all(c.token_ids == greedy.token_ids for c in top1)


def test_inverse_cdf_sampling_draws_from_the_distribution():
    """_sample's one-uniform-per-row inverse CDF: frequencies match softmax(logits / T) after the top-k cut
    (chi-square), cut tokens are never drawn, log-probs are the untruncated ones, and a row's draw depends only on
    its own uniform (the engine draws each row's from its own generator)."""
    from harness.engine.transformers_engine import _sample

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0], [0.5, 0.0, -0.5, 3.0, 1.0]])
    cut = torch.tensor([[False, False, False, False, True], [False, False, True, False, False]])  # top-4
    params = SamplingParams(temperature=0.7, top_k=4)
    copies, rounds = 2000, 5  # 10,000 draws per distinction, each row its own generator
    batch = logits.repeat(copies, 1)
    generators = [torch.Generator().manual_seed(i) for i in range(len(batch))]

    def uniforms(streams):
        return torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in streams])

    probs = torch.softmax(logits / 0.7, dim=-1)
    counts = torch.zeros_like(logits)
    for _ in range(rounds):
        chosen, logp = _sample(batch, params, uniforms(generators))
        counts.index_put_((torch.arange(len(batch)) % 2, chosen), torch.ones(len(batch)), accumulate=True)
        assert torch.allclose(logp, probs.log().repeat(copies, 1).gather(-1, chosen[:, None]).squeeze(-1), atol=1e-6)
    assert counts[cut].sum() == 0
    for row in range(2):
        kept = probs[row][~cut[row]] / probs[row][~cut[row]].sum()
        expected = kept * copies * rounds
        chi2 = float(((counts[row][~cut[row]] - expected) ** 2 / expected).sum())
        assert chi2 < 20.0, (row, chi2)  # 3 degrees of freedom: P(chi2 > 20) < 2e-4
    alone = _sample(logits[1:], params, uniforms([torch.Generator().manual_seed(7)]))[0]
    among = _sample(logits, params, uniforms([torch.Generator().manual_seed(3), torch.Generator().manual_seed(7)]))[0]
    assert int(alone[0]) == int(among[1])


def _with_early_stops(policy, prompts, params):
    """Make a few sampled tokens stop tokens, so rows finish at different steps and waiting prompts can join."""
    full = TransformersEngine(policy, max_batch_rows=64, progress=False).generate(prompts, params)
    stops = {full[1].token_ids[1], full[2].token_ids[0], full[5].token_ids[2]}
    policy.model.generation_config.eos_token_id = [policy.tokenizer.eos_token_id, *sorted(stops)]


def _counting(monkeypatch, cls, name):
    calls = []
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):
        calls.append(name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, wrapper)
    return calls


def test_waiting_prompts_join_the_running_batch(tiny_policy, monkeypatch):
    """With room for 2 prompts' rows, the third and fourth join as rows finish: their caches are merged into the
    running batch (narrower one left-padded) and padding every row has is cut. Completions equal those of one batch
    of everything, and their log-probs equal a plain forward pass."""
    import harness.engine.transformers_engine as engine_module

    other = [{"role": "user", "content": "What is 2 + 2?"}]
    prompts = [LONG, SHORT, other, LONG]
    params = SamplingParams(n=2, max_new_tokens=10, temperature=1.0, seed=6)
    _with_early_stops(tiny_policy, prompts, params)
    merges = _counting(monkeypatch, engine_module._Batch, "merge")
    trims = _counting(monkeypatch, engine_module._RoomyLayer, "drop_leading")
    joined = TransformersEngine(tiny_policy, max_batch_rows=4, progress=False).generate(prompts, params)
    assert merges and trims
    assert any(c.finished for c in joined) and not all(c.finished for c in joined)
    together = TransformersEngine(tiny_policy, max_batch_rows=64, progress=False).generate(prompts, params)
    assert [c.token_ids for c in joined] == [c.token_ids for c in together]
    for a, b in zip(joined, together, strict=True):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    batch = pad_completions(joined, tiny_policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp = sequence_logprobs(
            tiny_policy.model, batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"])
        )
    mask = batch["completion_mask"].bool()
    assert torch.allclose(logp[mask], batch["old_logp"][mask], atol=2e-4)

    from harness.steering.vectors import Steering  # steered: the betas follow the rows as prompts join and rows leave

    steering = Steering(_vector(tiny_policy, layer=0), [0.0, 3.0, -3.0, 1.0, 2.0, 0.0, -1.0, 4.0])
    joined = TransformersEngine(tiny_policy, max_batch_rows=4, progress=False).generate(
        prompts, params, steering=steering
    )
    together = TransformersEngine(tiny_policy, max_batch_rows=64, progress=False).generate(
        prompts, params, steering=steering
    )
    assert [c.token_ids for c in joined] == [c.token_ids for c in together]


@pytest.mark.parametrize("steering", [False, True])
def test_reading_the_tokens_every_few_steps_gives_the_same_completions(tiny_policy, steering):
    """sync_every=3 (a GPU's default is 8): the host reads the sampled tokens every 3 steps, so rows that ended ride
    along until the read and waiting prompts join only then. What a row sampled after its end is dropped: the
    completions, their ends and log-probs are those of reading every step (the CPU's default)."""
    from harness.steering.vectors import Steering

    other = [{"role": "user", "content": "What is 2 + 2?"}]
    prompts = [LONG, SHORT, other, LONG]
    params = SamplingParams(n=2, max_new_tokens=10, temperature=1.0, seed=6)
    _with_early_stops(tiny_policy, prompts, params)
    kwargs = (
        {"steering": Steering(_vector(tiny_policy, layer=0), [0.0, 3.0, -3.0, 1.0, 2.0, 0.0, -1.0, 4.0])}
        if steering
        else {}
    )
    every = TransformersEngine(tiny_policy, max_batch_rows=4, progress=False).generate(prompts, params, **kwargs)
    deferred = TransformersEngine(tiny_policy, max_batch_rows=4, progress=False, sync_every=3).generate(
        prompts, params, **kwargs
    )
    assert any(c.finished for c in every) and not all(c.finished for c in every)
    assert [c.token_ids for c in deferred] == [c.token_ids for c in every]
    assert [c.finished for c in deferred] == [c.finished for c in every]
    for a, b in zip(deferred, every, strict=True):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)
    for bad in (0, "zero"):
        with pytest.raises(ValueError, match="sync_every must be an integer >= 1"):
            TransformersEngine(tiny_policy, sync_every=bad)
    assert TransformersEngine(tiny_policy, sync_every="2").sync_every == 2  # --set engine.sync_every=2


def test_more_samples_than_the_batch_size_decode_in_slices(tiny_policy):
    """searcher.n=100000 once put all of a prompt's samples in one batch (past 6 GB in 31 s) whatever the
    batch size. Now no forward pass sees more rows than max_batch_rows, and the samples are the ones one batch of
    everything draws (each sample's random stream is its own)."""
    rows: list[int] = []
    hook = tiny_policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    params = SamplingParams(n=11, max_new_tokens=6, temperature=1.0, seed=3)
    try:
        sliced = TransformersEngine(tiny_policy, max_batch_rows=4, progress=False).generate([SHORT, LONG], params)
    finally:
        hook.remove()
    assert max(rows) == 4
    together = TransformersEngine(tiny_policy, max_batch_rows=64, progress=False).generate([SHORT, LONG], params)
    assert [(c.prompt_index, c.sample_index) for c in sliced] == [(p, s) for p in range(2) for s in range(11)]
    assert [c.token_ids for c in sliced] == [c.token_ids for c in together]


def test_a_cache_that_cannot_merge_decodes_in_chunks(tiny_policy, monkeypatch):
    """Another transformers' cache layout (no DynamicLayer): prompts wait until the batch is empty, and the
    completions are the same."""
    import harness.engine.transformers_engine as engine_module

    prompts = [LONG, SHORT, LONG]
    params = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=2)
    _with_early_stops(tiny_policy, prompts, params)
    expected = TransformersEngine(tiny_policy, max_batch_rows=4, progress=False).generate(prompts, params)
    monkeypatch.setattr(engine_module, "_preallocate", lambda *args: False)
    merges = _counting(monkeypatch, engine_module._Batch, "merge")
    chunked = TransformersEngine(tiny_policy, max_batch_rows=4, progress=False).generate(prompts, params)
    assert not merges
    assert [c.token_ids for c in chunked] == [c.token_ids for c in expected]
    assert [c.finished for c in chunked] == [c.finished for c in expected]


# ----------------------------------------------------------------------------------------------------------------
# Per-row steering
# ----------------------------------------------------------------------------------------------------------------


def _vector(policy, layer, direction=None, seed=0):
    from harness.steering.vectors import SteeringVector

    if direction is None:
        direction = torch.randn(policy.model.config.hidden_size, generator=torch.Generator().manual_seed(seed))
    return SteeringVector(vector=direction / direction.norm(), layer=layer, model="tiny-random", behaviour="test")


def _captured_prefills(policy, layer, generate):
    """The output of decoder ``layer`` as the next layer sees it (after any steering hook), for the first
    forward pass (the prefill) of ``generate()``."""
    seen = []
    after = policy.model.model.layers[layer + 1]
    handle = after.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    try:
        generate()
    finally:
        handle.remove()
    return seen[0]


def test_steering_adds_beta_times_v_to_every_position_of_each_row(tiny_policy):
    from harness.steering.vectors import Steering

    engine, vec = _engine(tiny_policy), _vector(tiny_policy, layer=0)
    params = SamplingParams(n=2, max_new_tokens=2, temperature=0)
    betas = [0.0, 2.0, -1.5, 0.5]  # rows: (SHORT, 0), (SHORT, 1), (LONG, 0), (LONG, 1)
    plain = _captured_prefills(tiny_policy, 0, lambda: engine.generate([SHORT, LONG], params))
    steered = _captured_prefills(
        tiny_policy, 0, lambda: engine.generate([SHORT, LONG], params, steering=Steering(vec, betas))
    )
    assert plain.shape[0] == 2 and steered.shape[0] == 4  # steered: one prefill per (prompt, beta)
    for row, beta in enumerate(betas):
        delta = steered[row] - plain[row // 2]  # every position: prompt and left padding alike
        assert torch.allclose(delta, (beta * vec.vector).expand_as(delta), atol=1e-5), row
    assert torch.allclose(steered[0], plain[0], atol=1e-6)


def test_per_row_betas_steer_only_their_rows(tiny_policy):
    from harness.steering.vectors import Steering

    engine, vec = _engine(tiny_policy), _vector(tiny_policy, layer=1)
    greedy = SamplingParams(n=2, max_new_tokens=8, temperature=0)
    # greedy, and sampled (sample j of a prompt draws the same random numbers whatever its beta)
    for params in (greedy, SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=2)):
        plain = engine.generate([SHORT, LONG], params)
        steered = engine.generate([SHORT, LONG], params, steering=Steering(vec, [0.0, 6.0, 0.0, -6.0]))
        for row in (0, 2):  # beta 0: the row generates exactly as without steering
            assert steered[row].token_ids == plain[row].token_ids
            assert torch.allclose(torch.tensor(steered[row].logprobs), torch.tensor(plain[row].logprobs), atol=1e-4)
        for row in (1, 3):
            assert steered[row].token_ids != plain[row].token_ids
    # the per-sample-index shorthand: one beta per j, the same for every prompt
    shorthand = engine.generate([SHORT, LONG], greedy, steering=Steering(vec, [0.0, 6.0]))
    explicit = engine.generate([SHORT, LONG], greedy, steering=Steering(vec, [0.0, 6.0, 0.0, 6.0]))
    assert [c.token_ids for c in shorthand] == [c.token_ids for c in explicit]


def test_steering_betas_are_sliced_per_chunk(tiny_policy):
    from harness.steering.vectors import Steering

    vec = _vector(tiny_policy, layer=0)
    params = SamplingParams(n=2, max_new_tokens=4, temperature=1.0, seed=4)
    steering = Steering(vec, [0.0, 3.0, -3.0, 1.0, 2.0, 0.0])
    whole = _engine(tiny_policy).generate([SHORT, LONG, SHORT], params, steering=steering)
    chunked = TransformersEngine(tiny_policy, max_batch_rows=2, progress=False)  # one prompt per chunk
    assert [c.token_ids for c in chunked.generate([SHORT, LONG, SHORT], params, steering=steering)] == [
        c.token_ids for c in whole
    ]


def test_steering_is_removed_without_residue(tiny_policy, monkeypatch):
    import harness.engine.transformers_engine as engine_module
    from harness.steering.vectors import Steering

    engine, vec = _engine(tiny_policy), _vector(tiny_policy, layer=0)
    params = SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=5)
    layer = tiny_policy.model.model.layers[0]
    before = engine.generate([SHORT, LONG], params)
    engine.generate([SHORT, LONG], params, steering=Steering(vec, [1.0, -1.0]))
    after = engine.generate([SHORT, LONG], params)
    assert [c.token_ids for c in after] == [c.token_ids for c in before]
    assert [c.logprobs for c in after] == [c.logprobs for c in before]  # bit-identical
    assert not layer._forward_hooks

    def fail(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(engine_module, "_sample", fail)
    with pytest.raises(RuntimeError, match="boom"):
        engine.generate([SHORT], params, steering=Steering(vec, [1.0, 1.0]))
    assert not layer._forward_hooks  # removed even when generation raises


def test_betas_follow_rows_when_finished_rows_are_dropped(tiny_policy):
    """A steered batch runs once with no row finishing early. Then two of the tokens it wrote become stop tokens, so
    row 1 stops at step 1 and row 2 at step 3 and both are dropped from the batch: rows 0 and 3 must come out exactly
    as before, which they do only if the betas were index-selected along with the rows."""
    from harness.steering.vectors import Steering

    engine, model = _engine(tiny_policy), tiny_policy.model
    vec = _vector(tiny_policy, layer=0)
    params = SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=11)
    betas = [0.5, 4.0, -4.0, 2.0]  # rows: (SHORT, 0), (SHORT, 1), (LONG, 0), (LONG, 1)
    full = engine.generate([SHORT, LONG], params, steering=Steering(vec, betas))
    assert all(len(c.token_ids) == 6 for c in full)
    swapped = engine.generate([SHORT, LONG], params, steering=Steering(vec, [0.5, 4.0, 2.0, -4.0]))
    assert swapped[3].token_ids != full[3].token_ids  # a wrong beta would show

    model.generation_config.eos_token_id = [
        tiny_policy.tokenizer.eos_token_id,
        full[1].token_ids[0],
        full[2].token_ids[2],
    ]
    dropped = engine.generate([SHORT, LONG], params, steering=Steering(vec, betas))
    assert dropped[1].token_ids == full[1].token_ids[:1] and dropped[1].finished
    assert dropped[2].token_ids == full[2].token_ids[:3] and dropped[2].finished
    for row in (0, 3):
        assert dropped[row].token_ids == full[row].token_ids, row
        assert torch.allclose(torch.tensor(dropped[row].logprobs), torch.tensor(full[row].logprobs), atol=1e-4)


def test_steered_logprobs_are_the_steered_distribution(tiny_policy):
    """A steered generate's log-probs equal a plain forward pass under the same per-row hook (prompt positions
    steered too), and differ from the unsteered forward pass."""
    from harness.steering.vectors import RowSteering, Steering

    engine, vec = _engine(tiny_policy), _vector(tiny_policy, layer=0)
    betas = [0.0, 1.0, -2.0, 0.5]
    completions = engine.generate(
        [SHORT, LONG], SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=3), steering=Steering(vec, betas)
    )
    batch = pad_completions(completions, tiny_policy.tokenizer.pad_token_id)
    args = (batch["input_ids"], batch["attention_mask"], int(batch["prompt_width"]))
    mask = batch["completion_mask"].bool()
    with torch.no_grad():
        with RowSteering(tiny_policy.model, vec, betas):
            steered = sequence_logprobs(tiny_policy.model, *args)
        plain = sequence_logprobs(tiny_policy.model, *args)
    assert torch.allclose(steered[mask], batch["old_logp"][mask], atol=2e-4)
    assert not torch.allclose(plain[1][mask[1]], batch["old_logp"][1][mask[1]], atol=1e-3)
