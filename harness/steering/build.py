"""Building a steering vector (VSPO's stage 1): from contrastive pairs (the policy's answers rewritten by a teacher
towards and away from a behaviour, harness/teacher/rewrite.py), the per-layer difference of mean activations over
the two sets' response tokens gives a direction per layer (``residual_activations``, ``build_vector``); the layer
whose direction, added to the residual stream, most raises the likelihood of the positive rewrites over the negative
ones is kept (``steering_preference``) and its direction normalised to unit length.

The embedding output (``hidden_states[0]``) is not a candidate: it is a per-token lookup, so a "direction" there says
which words were used, not how the model represents the answer. Activations are captured with forward hooks on the
decoder layers, not read from ``hidden_states``: in transformers 5.24 the last entry of ``hidden_states`` has the
final norm applied, which is not what the steering hook adds to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from harness.engine.tokens import encode_chat, left_pad
from harness.steering.vectors import RowSteering, SteeringVector, decoder_layers
from harness.teacher.rewrite import as_messages

if TYPE_CHECKING:
    import torch

    from harness.models import Policy
    from harness.teacher.rewrite import Pair

CRITERIA = ("preference", "cohen_d")
CRITERION_TEXT = {
    "preference": (
        "preference: per layer, add probe_beta x activation_norm of that layer's unit difference-of-means"
        " direction to the residual stream and measure how much more likely (mean token log-prob,"
        " teacher-forced) the positive responses become than the negative ones (steering_preference);"
        " the argmax layer is kept. Cohen's d of the projections is recorded alongside."
    ),
    "cohen_d": (
        "cohen_d: per layer, project both sets' activations onto that layer's unit difference-of-means"
        " direction; score = (mean_pos - mean_neg) / pooled std; the argmax layer is kept"
    ),
}
# The probe strength of the preference criterion, in units of the layer's activation norm: the middle of the range
# that changes generations on SmolLM2-135M without breaking them (0.15-0.3 at layers 16-26, docs/design/steering.md).
PROBE_BETA = 0.15


# ----------------------------------------------------------------------------------------------------------------
# Building a vector
# ----------------------------------------------------------------------------------------------------------------


def residual_activations(policy: Policy, items: Sequence[Pair | str], *, batch_size: int = 8) -> torch.Tensor:
    """Mean residual-stream activation of each item at each decoder layer's output: a float tensor [N, layers, hidden].

    An item is a (prompt, response) pair, the prompt chat-templated by the engine's ``encode`` and the response's
    tokens appended, averaged over the response tokens only; or a plain string, averaged over all its tokens.
    Batches are left-padded like the engine's, with the same position ids, so an item's activations do not depend
    on its batch (up to float rounding)."""
    import torch

    tok, model = policy.tokenizer, policy.model
    sequences = _pair_sequences(policy, items)

    layers = decoder_layers(model)
    captured: list[Any] = [None] * len(layers)

    def capture(i: int):
        def hook(module: Any, args: Any, output: Any) -> None:
            captured[i] = output[0] if isinstance(output, tuple) else output

        return hook

    device = next(model.parameters()).device
    handles = [layer.register_forward_hook(capture(i)) for i, layer in enumerate(layers)]
    means = []
    try:
        with torch.no_grad():
            for start in range(0, len(sequences), batch_size):
                batch = sequences[start : start + batch_size]
                input_ids, mask = left_pad([ids for ids, _ in batch], tok.pad_token_id)
                width = input_ids.shape[1]
                averaged = torch.zeros((len(batch), width))
                for row, (_, n_avg) in enumerate(batch):
                    averaged[row, width - n_avg :] = 1.0 / n_avg  # left padding: the response ends every row
                input_ids, mask, averaged = input_ids.to(device), mask.to(device), averaged.to(device)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                model(
                    input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False, logits_to_keep=1
                )
                stacked = torch.stack([h.float() for h in captured], dim=1)  # [B, layers, T, hidden]
                means.append(torch.einsum("blth,bt->blh", stacked, averaged).cpu())
    finally:
        for handle in handles:
            handle.remove()
    return torch.cat(means)


def response_logprob(
    policy: Policy,
    items: Sequence[Pair],
    *,
    steering: SteeringVector | None = None,
    beta: float = 0.0,
    batch_size: int = 8,
) -> torch.Tensor:
    """Mean log-probability per response token of each (prompt, response) pair [N], teacher-forced, with
    ``beta * steering`` added at the vector's layer (every row, every position) when ``steering`` is given."""
    import torch

    tok, model = policy.tokenizer, policy.model
    sequences = _pair_sequences(policy, items)
    device = next(model.parameters()).device
    out = []
    hook = RowSteering(model, steering) if steering is not None else None
    try:
        with torch.no_grad():
            for start in range(0, len(sequences), batch_size):
                batch = sequences[start : start + batch_size]
                input_ids, mask = left_pad([ids for ids, _ in batch], tok.pad_token_id)
                if hook is not None:
                    hook.set_betas([beta] * len(batch))
                input_ids, mask = input_ids.to(device), mask.to(device)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                # Left padding puts every response in the last n columns: only the positions predicting the
                # longest response's tokens get vocabulary-sized logits (the prompts' never are built; on a CPU
                # they were most of a layer probe's time and memory).
                longest = max(n for _, n in batch)
                logits = (
                    model(
                        input_ids=input_ids,
                        attention_mask=mask,
                        position_ids=positions,
                        use_cache=False,
                        logits_to_keep=longest + 1,
                    )
                    .logits[:, :-1]
                    .float()
                )
                targets = input_ids[:, -longest:]
                logp = logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, -1)
                for row, (_, n) in enumerate(batch):
                    out.append(float(logp[row, longest - n :].mean()))
    finally:
        if hook is not None:
            hook.remove()
    return torch.tensor(out)


def steering_preference(
    policy: Policy,
    positive: Sequence[Pair],
    negative: Sequence[Pair],
    vector: SteeringVector,
    beta: float,
    *,
    batch_size: int = 8,
    base: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> float:
    """How much adding ``beta * vector`` makes the model prefer the positive responses over the negative ones:
    the mean over pairs of [gain in mean token log-prob of the positive response] - [gain for the negative one],
    gains measured against the unsteered model. A causal test of a direction (it intervenes and watches the
    likelihoods move), where separation is only correlational. ``base``: the unsteered log-probs (positive,
    negative) when already computed (``build_vector`` probes every layer against the same base)."""
    if base is None:
        base = (
            response_logprob(policy, positive, batch_size=batch_size),
            response_logprob(policy, negative, batch_size=batch_size),
        )
    pos = response_logprob(policy, positive, steering=vector, beta=beta, batch_size=batch_size)
    neg = response_logprob(policy, negative, steering=vector, beta=beta, batch_size=batch_size)
    return float(((pos - base[0]) - (neg - base[1])).mean())


def _pair_sequences(policy: Policy, items: Sequence[Pair | str]) -> list[tuple[list[int], int]]:
    """(token ids, number of trailing response tokens) per item; see ``residual_activations``."""
    sequences = []
    for i, item in enumerate(items):
        prompt_ids = [] if isinstance(item, str) else encode_chat(policy.tokenizer, as_messages(item[0]))
        response_ids = policy.tokenizer(item if isinstance(item, str) else item[1], add_special_tokens=False)[
            "input_ids"
        ]
        if not response_ids:
            raise ValueError(f"item {i} has an empty response: nothing to average over")
        sequences.append((prompt_ids + response_ids, len(response_ids)))
    return sequences


def response_tokens(policy: Policy, items: Sequence[Pair]) -> list[int]:
    """The number of response tokens of each (prompt, response) pair."""
    return [n for _, n in _pair_sequences(policy, items)]


def separation_scores(positive: torch.Tensor, negative: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per layer, the difference of means [layers, hidden] and its separation score [layers].

    The score is Cohen's d along that layer's own direction: both sets' activations [N, layers, hidden] are projected
    onto the unit difference-of-means direction, and the gap between the projected means (which is the
    difference's norm) is divided by the pooled standard deviation of the projections. Unlike the raw norm it does not
    favour late layers just because their activations are larger. In-sample (the direction is fitted on the same
    activations), so it is optimistic; it ranks layers, it does not estimate held-out accuracy."""
    import torch

    if positive.shape[0] < 2 or negative.shape[0] < 2:
        raise ValueError("separation needs at least two positive and two negative examples (a pooled std)")
    diff = positive.mean(0) - negative.mean(0)
    direction = diff / diff.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    proj_pos = torch.einsum("nlh,lh->nl", positive, direction)
    proj_neg = torch.einsum("nlh,lh->nl", negative, direction)
    n_pos, n_neg = proj_pos.shape[0], proj_neg.shape[0]
    pooled_var = ((n_pos - 1) * proj_pos.var(0) + (n_neg - 1) * proj_neg.var(0)) / (n_pos + n_neg - 2)
    gap = proj_pos.mean(0) - proj_neg.mean(0)
    return diff, gap / pooled_var.sqrt().clamp_min(1e-12)


def without_length(
    diff: torch.Tensor,
    positive: torch.Tensor,
    negative: torch.Tensor,
    positive_tokens: Sequence[int],
    negative_tokens: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The difference of means [layers, hidden] with its component along length removed, and that component's
    share of the difference's norm per layer [layers].

    Why: a teacher asked to rewrite towards a behaviour that is not about length (robustness: "work it out
    independently") writes longer texts than away from it ("adopt the suggested answer"), so the plain difference of
    means also says "longer"; steered at VSPO's strengths, such a vector lengthened SmolLM2-135M's answers by 24
    tokens and cut 30% more of them at the token limit, while its behaviour score fell (bench/steering_direction.py),
    and the strength reward then trained the policy to ramble. The length direction is the slope of activations on
    log response length within each set (both sets centred on their own means, so the behaviour itself is not
    mistaken for length), fitted per layer; removing it keeps what separates the sets at equal length."""
    import torch

    def centred(acts: torch.Tensor, tokens: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        t = torch.log(torch.tensor([float(n) for n in tokens]))
        return acts - acts.mean(0), t - t.mean()

    xp, tp = centred(positive, positive_tokens)
    xn, tn = centred(negative, negative_tokens)
    x, t = torch.cat([xp, xn]), torch.cat([tp, tn])  # [N, layers, hidden], [N]
    if float((t * t).sum()) <= 1e-12:  # every response the same length: nothing to remove
        return diff, torch.zeros(diff.shape[0])
    slope = torch.einsum("nlh,n->lh", x, t) / (t * t).sum()  # [layers, hidden]
    unit = slope / slope.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    along = (diff * unit).sum(-1, keepdim=True)  # [layers, 1]
    share = along[:, 0].abs() / diff.norm(dim=-1).clamp_min(1e-12)
    return diff - along * unit, share


def probe_layers(score: Callable[[int], float], num_layers: int, every: int) -> list[float | None]:
    """``score(i)`` of layers 0, every, 2*every, ..., then of the best layer's unprobed neighbours, again and again
    until neither neighbour of the best is unprobed: a climb to the peak of a score that is smooth across layers
    (the steering preference on SmolLM2-135M is), found with 11-12 probes of its 30 layers at every=4.
    Returns the score per layer, None where not probed."""
    scores: list[float | None] = [None] * num_layers
    for i in range(0, num_layers, every):
        scores[i] = score(i)
    while True:
        best = max((i for i in range(num_layers) if scores[i] is not None), key=scores.__getitem__)
        unprobed = [j for j in (best - 1, best + 1) if 0 <= j < num_layers and scores[j] is None]
        if not unprobed:
            return scores
        for j in unprobed:
            scores[j] = score(j)


def build_vector(
    policy: Policy,
    positive_pairs: Sequence[Pair],
    negative_pairs: Sequence[Pair],
    *,
    behaviour: str,
    teacher: str | None = None,
    batch_size: int = 8,
    layer: int | None = None,
    criterion: str = "preference",
    probe_beta: float = PROBE_BETA,
    probe_pairs: int = 16,
    probe_every: int = 1,
    progress: Any = None,
    provenance: dict[str, Any] | None = None,
    remove_length: bool = False,
) -> SteeringVector:
    """Difference of mean activations (positive - negative) at every decoder layer's output; keep the best layer by
    ``criterion`` (or ``layer``, when given) and normalise its direction to unit norm.

    ``criterion="preference"`` (default) steers each layer in turn by ``probe_beta`` activation norms and keeps the
    layer whose direction most raises the positive responses' likelihood over the negative ones
    (``steering_preference``, on the first ``probe_pairs`` pairs: 2 forward passes of them per layer, plus 2 for
    the unsteered base; ``probe_every=k`` probes layers 0, k, 2k, ... and then climbs from the best of them to a
    better neighbour until neither neighbour of the best is better: the preference is smooth across neighbouring
    layers on SmolLM2-135M, so this finds the full scan's peak at a fraction of the cost).
    ``"cohen_d"`` keeps the layer whose direction best separates the two sets' activations: it costs nothing extra,
    but on SmolLM2-135M it picked layer 9, where adding the conciseness direction made answers *longer* (the
    preference ranks layers as generation goes; docs/design/steering.md has the figures). Both scores are recorded in
    provenance. The embedding output is not a candidate (module docstring).
    ``progress``: called with (layer, preference) after each probed layer; False hides the progress bar.
    ``provenance`` adds entries (e.g. the teacher's call and token counts from ``ContrastivePairs.provenance()``).
    ``remove_length``: take the length direction out of every layer's difference first (``without_length``), for a
    behaviour that is not about length."""
    from harness import __version__

    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {', '.join(CRITERIA)}, got {criterion!r}")
    pos = residual_activations(policy, positive_pairs, batch_size=batch_size)
    neg = residual_activations(policy, negative_pairs, batch_size=batch_size)
    diff, d_scores = separation_scores(pos, neg)
    length_share = None
    if remove_length:
        diff, length_share = without_length(
            diff, pos, neg, response_tokens(policy, positive_pairs), response_tokens(policy, negative_pairs)
        )
    num_layers = len(d_scores)
    if layer is not None and not 0 <= layer < num_layers:
        raise ValueError(f"layer {layer} is out of range: the model has {num_layers} decoder layers")
    activation_norms = 0.5 * (pos.norm(dim=-1).mean(0) + neg.norm(dim=-1).mean(0))  # [layers]
    directions = diff / diff.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def as_vector(i: int) -> SteeringVector:
        return SteeringVector(
            vector=directions[i].contiguous(),
            layer=i,
            model=policy.spec,
            behaviour=behaviour,
            norms={"raw_norm": float(diff[i].norm()), "activation_norm": float(activation_norms[i])},
        )

    preferences: list[float | None] | None = None
    if criterion == "preference" and layer is None:
        if probe_pairs < 1 or probe_every < 1:
            raise ValueError(f"probe_pairs and probe_every must be >= 1, got {probe_pairs}, {probe_every}")
        probe_pos, probe_neg = list(positive_pairs[:probe_pairs]), list(negative_pairs[:probe_pairs])
        base = (
            response_logprob(policy, probe_pos, batch_size=batch_size),
            response_logprob(policy, probe_neg, batch_size=batch_size),
        )
        from harness import progress as bars

        with bars.bar(None, "probe layers", "layer", disable=progress is False) as bar:

            def probe(i: int) -> float:
                preference = steering_preference(
                    policy,
                    probe_pos,
                    probe_neg,
                    as_vector(i),
                    probe_beta * float(activation_norms[i]),
                    batch_size=batch_size,
                    base=base,
                )
                bar.update()
                if callable(progress):
                    progress(i, preference)
                return preference

            preferences = probe_layers(probe, num_layers, probe_every)
    if layer is not None:
        chosen_by = "given"
    else:
        chosen_by = criterion
        scores = preferences if preferences is not None else [float(d) for d in d_scores]
        layer = max((i for i in range(num_layers) if scores[i] is not None), key=scores.__getitem__)
    chosen = as_vector(layer)
    chosen.provenance = {
        "teacher": teacher,
        "pairs": {"positive": len(positive_pairs), "negative": len(negative_pairs)},
        "criterion": CRITERION_TEXT[criterion],
        "layer_chosen_by": chosen_by,
        "layer_scores": [float(s) for s in d_scores],  # Cohen's d, every layer
        "layer_preferences": preferences,  # steering_preference at probe_beta per layer (None: not probed)
        "probe": {
            "beta": probe_beta,
            "beta_unit": "activation_norm",
            "pairs": min(probe_pairs, len(positive_pairs)),
            "every": probe_every,
        }
        if preferences is not None
        else None,
        "layer_raw_norms": [float(d) for d in diff.norm(dim=-1)],
        # remove_length: the share of each layer's difference of means that lay along length and was removed
        "length_removed": [float(x) for x in length_share] if length_share is not None else None,
        "layers": "decoder layer outputs 0..L-1; the embedding output (hidden_states[0]) is excluded",
        "model_source": policy.source,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "harness_version": __version__,
        **(provenance or {}),
    }
    return chosen
