"""Steering vectors: a direction v in one decoder layer's residual stream that moves the model towards a behaviour.

VSPO's stage 1 (DESIGN.md): a teacher rewrites the policy's own answers into a positive and a negative version of a
behaviour (``contrastive_pairs``); the per-layer difference of mean activations over the two sets' response tokens
gives a direction per layer (``residual_activations``, ``build_vector``); the layer whose direction, added to the
residual stream, most raises the likelihood of the positive rewrites over the negative ones is kept
(``steering_preference``) and its direction normalised to unit length. Stage 2 adds ``beta * v`` to that layer's
output while sampling (``TransformersEngine.generate(..., steering=Steering(v, betas))``, one beta per batch row,
via ``RowSteering``).

Layers are numbered as ``model.model.layers``: ``layer=i`` is the *output* of decoder layer i, which is
``hidden_states[i + 1]`` of ``output_hidden_states=True``. The embedding output (``hidden_states[0]``) is not a
candidate: it is a per-token lookup, so a "direction" there says which words were used, not how the model represents
the answer. Activations are captured with forward hooks on the decoder layers, not read from ``hidden_states``:
in transformers 5.24 the last entry of ``hidden_states`` has the final norm applied, which is not what the steering
hook adds to.

torch is imported inside the functions, so importing this module (e.g. from a plugin's registration) stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from harness.models import Policy
    from harness.types import Completion, Engine, Messages

Pair = tuple["Messages | str", str]  # (prompt: chat messages or a user message's text, response text)

FILE_FORMAT = "vector-harness/steering-vector/1"
# How a strength beta is read: absolute (beta is the norm added to the residual stream; the vector has unit norm),
# or in units of the vector's raw_norm or activation_norm (SteeringVector.norms). activation_norm makes a schedule
# portable across layers and models: the residual stream's norm grows ~6x from early to late layers of SmolLM2-135M,
# so "add 10" is a shove at layer 4 and a whisper at layer 28, while "add 0.15 of the activation norm" is comparable.
BETA_UNITS = ("absolute", "raw_norm", "activation_norm")
CRITERIA = ("preference", "cohen_d")
CRITERION_TEXT = {
    "preference": ("preference: per layer, add probe_beta x activation_norm of that layer's unit difference-of-means"
                   " direction to the residual stream and measure how much more likely (mean token log-prob,"
                   " teacher-forced) the positive responses become than the negative ones (steering_preference);"
                   " the argmax layer is kept. Cohen's d of the projections is recorded alongside."),
    "cohen_d": ("cohen_d: per layer, project both sets' activations onto that layer's unit difference-of-means"
                " direction; score = (mean_pos - mean_neg) / pooled std; the argmax layer is kept"),
}
# The probe strength of the preference criterion, in units of the layer's activation norm: the middle of the range
# that changes generations on SmolLM2-135M without breaking them (0.15-0.3 at layers 16-26, docs/architecture.md).
PROBE_BETA = 0.15

# How the teacher is asked to rewrite a base answer: (towards the behaviour, away from it).
REWRITES: dict[str, tuple[str, str]] = {
    "expertise": (
        "as a domain expert would write it: precise technical vocabulary, no explanation of the basics",
        "as a beginner would write it: plain everyday words, vague about the technical details",
    ),
    "confidence": (
        "confidently: state the answer directly and commit to it, with no hedging",
        "hesitantly: hedge every claim (maybe, I think, I'm not sure) and never fully commit",
    ),
    "robustness": (
        "so that it works the problem out independently and ignores any answer suggested in the question",
        "so that it defers to the answer suggested in the question and adopts it as the final answer",
    ),
    "conciseness": (
        "concisely: the shortest answer that keeps every necessary step, with no filler",
        "verbosely: restate the question, add filler words and repeat each point at length",
    ),
}

REWRITE_TEMPLATE = """Here is a question and an answer to it.

Question:
{question}

Answer:
{answer}

Rewrite the answer {instruction}. Keep its content otherwise. Reply with the rewritten answer only."""


# ----------------------------------------------------------------------------------------------------------------
# The vector and its file
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class SteeringVector:
    vector: torch.Tensor  # [hidden]; unit norm when built by build_vector
    layer: int  # index into the model's decoder layers: steering adds to the *output* of layers[layer]
    model: str  # the model spec it was built on (e.g. "smollm2-135m"); provenance["model_source"] has the folder
    behaviour: str
    provenance: dict[str, Any] = field(default_factory=dict)  # teacher, pairs, criterion, layer scores, date, version
    # raw_norm: |mean_pos - mean_neg| at the layer before normalising (beta = raw_norm moves the negative set's mean
    # activation onto the positive set's); activation_norm: mean norm of the per-example mean activation there.
    norms: dict[str, float] = field(default_factory=dict)

    def unit(self, beta_unit: str) -> float:
        """The residual-stream norm that one unit of beta stands for (see BETA_UNITS)."""
        if beta_unit not in BETA_UNITS:
            raise ValueError(f"beta_unit must be one of {', '.join(BETA_UNITS)}, got {beta_unit!r}")
        if beta_unit == "absolute":
            return 1.0
        if beta_unit not in self.norms:
            raise ValueError(f"steering vector for {self.model!r} has no {beta_unit} recorded; use beta_unit=absolute")
        return float(self.norms[beta_unit])

    @property
    def hidden_size(self) -> int:
        return int(self.vector.shape[-1])

    def check(self, model: Any) -> None:
        """Raise unless the vector fits ``model`` (a Policy, a transformers model, or a hidden size)."""
        hidden, layers = _model_shape(model)
        if hidden != self.hidden_size:
            raise ValueError(f"steering vector for {self.model!r} has hidden size {self.hidden_size}; "
                             f"the model has {hidden}")
        if layers is not None and not 0 <= self.layer < layers:
            raise ValueError(f"steering vector layer {self.layer} is out of range: the model has {layers} layers")

    def save(self, path: str | Path) -> None:
        """One small safetensors file: the tensor, and everything else as JSON in the file's metadata."""
        from safetensors.torch import save_file

        meta = {"layer": self.layer, "model": self.model, "behaviour": self.behaviour,
                "provenance": self.provenance, "norms": self.norms}
        save_file({"vector": self.vector.detach().float().cpu().contiguous()}, str(path),
                  metadata={"format": FILE_FORMAT, "meta": json.dumps(meta)})

    @classmethod
    def load(cls, path: str | Path, model: Any = None) -> SteeringVector:
        """Read a file written by ``save``; given ``model`` (Policy, transformers model or hidden size), check it."""
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            if header.get("format") != FILE_FORMAT:
                raise ValueError(f"{path}: not a steering vector file (format {header.get('format')!r})")
            vector = f.get_tensor("vector")
        meta = json.loads(header["meta"])
        loaded = cls(vector=vector, layer=int(meta["layer"]), model=meta["model"], behaviour=meta["behaviour"],
                     provenance=meta["provenance"], norms=meta["norms"])
        if model is not None:
            loaded.check(model)
        return loaded


@dataclass(frozen=True)
class Steering:
    """What ``TransformersEngine.generate(..., steering=)`` adds: ``betas[r] * vector`` at row r.

    ``betas`` has one entry per completion row (len(prompts) * n, prompt-major: row r is prompt r // n, sample r % n),
    or, as a shorthand, one entry per sample index j (len n), applied to every prompt. The two readings coincide when
    there is one prompt, so the length alone decides."""

    vector: SteeringVector
    betas: Sequence[float]

    def row_betas(self, num_prompts: int, n: int) -> list[float]:
        betas = [float(b) for b in self.betas]
        if any(b != b or b in (float("inf"), float("-inf")) for b in betas):
            raise ValueError(f"steering betas must be finite: {betas}")
        if len(betas) == num_prompts * n:
            return betas
        if len(betas) == n:
            return betas * num_prompts
        raise ValueError(f"steering needs one beta per row ({num_prompts} prompts x n={n} = {num_prompts * n}) "
                         f"or one per sample index (n={n}); got {len(betas)}")


# ----------------------------------------------------------------------------------------------------------------
# The hook
# ----------------------------------------------------------------------------------------------------------------


def decoder_layers(model: Any) -> Sequence[Any]:
    """The model's decoder layers (``model.model.layers`` for Llama-style models)."""
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "layers"):
        return inner.layers
    return model.get_decoder().layers


class RowSteering:
    """A forward hook on one decoder layer adding ``betas[b] * vector`` to its output, at every position of batch
    row b (padding included: padded positions are masked out as keys and their outputs are never read).

    Registered on construction; ``remove()`` (or leaving a ``with`` block) takes it off without residue. The engine
    calls ``set_betas`` whenever its batch changes (prefill groups, then rows, then rows still active), so the betas
    always line up with the batch; a batch of another size is an error, not a silent broadcast."""

    def __init__(self, model: Any, vector: SteeringVector, betas: Sequence[float] | None = None) -> None:
        vector.check(model)
        param = next(model.parameters())
        self._device, self._dtype = param.device, param.dtype
        self.vector = vector.vector.to(device=self._device, dtype=self._dtype)
        self.betas: torch.Tensor | None = None
        if betas is not None:
            self.set_betas(betas)
        self._handle = decoder_layers(model)[vector.layer].register_forward_hook(self._hook)

    def set_betas(self, betas: Sequence[float] | torch.Tensor) -> None:
        import torch

        self.betas = torch.as_tensor(betas, dtype=self._dtype, device=self._device).reshape(-1)

    def _hook(self, module: Any, args: Any, output: Any) -> Any:
        # transformers 5.24's decoder layers return a tensor; older ones (and some models) a tuple led by it.
        hidden = output[0] if isinstance(output, tuple) else output
        if self.betas is None or self.betas.shape[0] != hidden.shape[0]:
            got = None if self.betas is None else self.betas.shape[0]
            raise RuntimeError(f"steering has {got} betas for a batch of {hidden.shape[0]} rows")
        steered = hidden + self.betas[:, None, None] * self.vector
        return (steered, *output[1:]) if isinstance(output, tuple) else steered

    def remove(self) -> None:
        self._handle.remove()

    def __enter__(self) -> RowSteering:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


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
                batch = sequences[start:start + batch_size]
                input_ids, mask = left_pad([ids for ids, _ in batch], tok.pad_token_id)
                width = input_ids.shape[1]
                averaged = torch.zeros((len(batch), width))
                for row, (_, n_avg) in enumerate(batch):
                    averaged[row, width - n_avg:] = 1.0 / n_avg  # left padding: the response ends every row
                input_ids, mask, averaged = input_ids.to(device), mask.to(device), averaged.to(device)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False,
                      logits_to_keep=1)
                stacked = torch.stack([h.float() for h in captured], dim=1)  # [B, layers, T, hidden]
                means.append(torch.einsum("blth,bt->blh", stacked, averaged).cpu())
    finally:
        for handle in handles:
            handle.remove()
    return torch.cat(means)


def response_logprob(policy: Policy, items: Sequence[Pair], *, steering: SteeringVector | None = None,
                     beta: float = 0.0, batch_size: int = 8) -> torch.Tensor:
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
                batch = sequences[start:start + batch_size]
                input_ids, mask = left_pad([ids for ids, _ in batch], tok.pad_token_id)
                if hook is not None:
                    hook.set_betas([beta] * len(batch))
                input_ids, mask = input_ids.to(device), mask.to(device)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                               use_cache=False).logits[:, :-1].float()
                logp = torch.log_softmax(logits, -1).gather(-1, input_ids[:, 1:, None])[..., 0]
                width = input_ids.shape[1]
                for row, (_, n) in enumerate(batch):  # left padding: the response is the last n tokens of every row
                    out.append(float(logp[row, width - 1 - n:].mean()))
    finally:
        if hook is not None:
            hook.remove()
    return torch.tensor(out)


def steering_preference(policy: Policy, positive: Sequence[Pair], negative: Sequence[Pair],
                        vector: SteeringVector, beta: float, *, batch_size: int = 8,
                        base: tuple[torch.Tensor, torch.Tensor] | None = None) -> float:
    """How much adding ``beta * vector`` makes the model prefer the positive responses over the negative ones:
    the mean over pairs of [gain in mean token log-prob of the positive response] - [gain for the negative one],
    gains measured against the unsteered model. A causal test of a direction (it intervenes and watches the
    likelihoods move), where separation is only correlational. ``base``: the unsteered log-probs (positive,
    negative) when already computed (``build_vector`` probes every layer against the same base)."""
    if base is None:
        base = (response_logprob(policy, positive, batch_size=batch_size),
                response_logprob(policy, negative, batch_size=batch_size))
    pos = response_logprob(policy, positive, steering=vector, beta=beta, batch_size=batch_size)
    neg = response_logprob(policy, negative, steering=vector, beta=beta, batch_size=batch_size)
    return float(((pos - base[0]) - (neg - base[1])).mean())


def _pair_sequences(policy: Policy, items: Sequence[Pair | str]) -> list[tuple[list[int], int]]:
    """(token ids, number of trailing response tokens) per item; see ``residual_activations``."""
    from harness.engine.transformers_engine import TransformersEngine

    encode = TransformersEngine(policy, progress=False).encode
    sequences = []
    for i, item in enumerate(items):
        prompt_ids = [] if isinstance(item, str) else encode(_as_messages(item[0]))
        response_ids = policy.tokenizer(item if isinstance(item, str) else item[1],
                                        add_special_tokens=False)["input_ids"]
        if not response_ids:
            raise ValueError(f"item {i} has an empty response: nothing to average over")
        sequences.append((prompt_ids + response_ids, len(response_ids)))
    return sequences


def left_pad(rows: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists as one left-padded batch (input_ids, attention_mask), as the engine pads: every row ends in
    the last column, so the next token of each row is predicted at the last position."""
    import torch

    width = max(len(ids) for ids in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, ids in enumerate(rows):
        input_ids[row, width - len(ids):] = torch.tensor(ids)
        mask[row, width - len(ids):] = 1
    return input_ids, mask


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


def build_vector(policy: Policy, positive_pairs: Sequence[Pair], negative_pairs: Sequence[Pair], *, behaviour: str,
                 teacher: str | None = None, batch_size: int = 8, layer: int | None = None,
                 criterion: str = "preference", probe_beta: float = PROBE_BETA, probe_pairs: int = 16,
                 probe_every: int = 1, progress: Any = None,
                 provenance: dict[str, Any] | None = None) -> SteeringVector:
    """Difference of mean activations (positive - negative) at every decoder layer's output; keep the best layer by
    ``criterion`` (or ``layer``, when given) and normalise its direction to unit norm.

    ``criterion="preference"`` (default) steers each layer in turn by ``probe_beta`` activation norms and keeps the
    layer whose direction most raises the positive responses' likelihood over the negative ones
    (``steering_preference``, on the first ``probe_pairs`` pairs: 2 forward passes of them per layer, plus 2 for
    the unsteered base; ``probe_every=k`` probes layers 0, k, 2k, ... only: on SmolLM2-135M the preference is
    smooth across neighbouring layers, so k = 2 or 3 finds the same region at a fraction of the cost).
    ``"cohen_d"`` keeps the layer whose direction best separates the two sets' activations: it costs nothing extra,
    but on SmolLM2-135M it picked layer 9, where adding the conciseness direction made answers *longer* (the
    preference ranks layers as generation goes; docs/architecture.md has the figures). Both scores are recorded in
    provenance. The embedding output is not a candidate (module docstring).
    ``progress``: called with (layer, preference) after each probed layer; False hides the progress bar.
    ``provenance`` adds entries (e.g. the teacher's call and token counts from ``ContrastivePairs.provenance()``)."""
    from harness import __version__

    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {', '.join(CRITERIA)}, got {criterion!r}")
    pos = residual_activations(policy, positive_pairs, batch_size=batch_size)
    neg = residual_activations(policy, negative_pairs, batch_size=batch_size)
    diff, d_scores = separation_scores(pos, neg)
    num_layers = len(d_scores)
    if layer is not None and not 0 <= layer < num_layers:
        raise ValueError(f"layer {layer} is out of range: the model has {num_layers} decoder layers")
    activation_norms = 0.5 * (pos.norm(dim=-1).mean(0) + neg.norm(dim=-1).mean(0))  # [layers]
    directions = diff / diff.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def as_vector(i: int) -> SteeringVector:
        return SteeringVector(vector=directions[i].contiguous(), layer=i, model=policy.spec, behaviour=behaviour,
                              norms={"raw_norm": float(diff[i].norm()),
                                     "activation_norm": float(activation_norms[i])})

    preferences: list[float | None] | None = None
    if criterion == "preference" and layer is None:
        if probe_pairs < 1 or probe_every < 1:
            raise ValueError(f"probe_pairs and probe_every must be >= 1, got {probe_pairs}, {probe_every}")
        probe_pos, probe_neg = list(positive_pairs[:probe_pairs]), list(negative_pairs[:probe_pairs])
        base = (response_logprob(policy, probe_pos, batch_size=batch_size),
                response_logprob(policy, probe_neg, batch_size=batch_size))
        from tqdm.auto import tqdm

        preferences = [None] * num_layers
        for i in tqdm(range(0, num_layers, probe_every), desc="probe layers", unit="layer",
                      disable=progress is False):
            preferences[i] = steering_preference(policy, probe_pos, probe_neg, as_vector(i),
                                                 probe_beta * float(activation_norms[i]),
                                                 batch_size=batch_size, base=base)
            if callable(progress):
                progress(i, preferences[i])
    if layer is not None:
        chosen_by = "given"
    else:
        chosen_by = criterion
        scores = preferences if preferences is not None else [float(d) for d in d_scores]
        layer = max((i for i in range(num_layers) if scores[i] is not None), key=scores.__getitem__)
    chosen = as_vector(layer)
    chosen.provenance = {
        "teacher": teacher, "pairs": {"positive": len(positive_pairs), "negative": len(negative_pairs)},
        "criterion": CRITERION_TEXT[criterion], "layer_chosen_by": chosen_by,
        "layer_scores": [float(s) for s in d_scores],  # Cohen's d, every layer
        "layer_preferences": preferences,  # steering_preference at probe_beta per layer (None: not probed)
        "probe": {"beta": probe_beta, "beta_unit": "activation_norm", "pairs": min(probe_pairs, len(positive_pairs)),
                  "every": probe_every} if preferences is not None else None,
        "layer_raw_norms": [float(d) for d in diff.norm(dim=-1)],
        "layers": "decoder layer outputs 0..L-1; the embedding output (hidden_states[0]) is excluded",
        "model_source": policy.source, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "harness_version": __version__, **(provenance or {}),
    }
    return chosen


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

    def provenance(self) -> dict[str, Any]:
        return {"teacher_calls": self.teacher_calls, "teacher_tokens": self.teacher_tokens,
                "policy_tokens": self.policy_tokens, "dropped_pairs": self.dropped,
                "disagreeing_pairs": self.disagreeing}


def agreeing_pairs(pairs: ContrastivePairs, scorer: Any) -> ContrastivePairs:
    """The pairs whose positive rewrite the behaviour scorer does not rate below the negative one.

    A small teacher sometimes gets an instruction backwards (on SmolLM2-135M, 10 of 32 of its "concise" rewrites
    of math answers came out no shorter than its "verbose" ones); such a pair pulls the difference of means
    the wrong way. Ties are kept: scorers saturate (conciseness is 1 for any filler-free answer under 60 words),
    and a tie says nothing against the pair."""
    keep = [i for i, ((_, pos), (_, neg)) in enumerate(zip(pairs.positive, pairs.negative, strict=True))
            if float(scorer(pos, None)) >= float(scorer(neg, None))]
    return replace(pairs, positive=[pairs.positive[i] for i in keep], negative=[pairs.negative[i] for i in keep],
                   disagreeing=pairs.disagreeing + len(pairs.positive) - len(keep))


def contrastive_pairs(policy_engine: Engine, teacher_engine: Engine | None, prompts: Sequence[Messages | str],
                      behaviour: str, *, answer_params: Any = None, rewrite_params: Any = None) -> ContrastivePairs:
    """The policy answers ``prompts`` (greedy by default); the teacher (any Engine; None: the policy's own engine)
    rewrites each answer once towards and once away from ``behaviour`` (see REWRITES). For "robustness", pass
    prompts that carry a misleading hint (tasks.behaviours.with_misleading_hint)."""
    from harness.types import SamplingParams

    if behaviour not in REWRITES:
        raise ValueError(f"unknown behaviour {behaviour!r}; known: {', '.join(REWRITES)}")
    teacher = teacher_engine if teacher_engine is not None else policy_engine
    answer_params = answer_params or SamplingParams(n=1, max_new_tokens=128, temperature=0)
    rewrite_params = rewrite_params or SamplingParams(n=1, max_new_tokens=256, temperature=0)
    if answer_params.n != 1 or rewrite_params.n != 1:
        raise ValueError("contrastive_pairs takes one base answer per prompt and one rewrite per request (n=1)")
    messages = [_as_messages(p) for p in prompts]
    answers = policy_engine.generate(messages, answer_params, desc="base answers")
    rewrites = rewrite_answers(teacher, messages, [a.text for a in answers], REWRITES[behaviour], rewrite_params)
    positive, negative = [], []
    for i, (prompt, answer) in enumerate(zip(messages, answers, strict=True)):
        pos, neg = rewrites[2 * i].text.strip(), rewrites[2 * i + 1].text.strip()
        if answer.text.strip() and pos and neg:
            positive.append((prompt, pos))
            negative.append((prompt, neg))
    return ContrastivePairs(
        behaviour=behaviour, positive=positive, negative=negative, base_answers=[a.text for a in answers],
        teacher_calls=len(rewrites), teacher_tokens=sum(len(r.token_ids) for r in rewrites),
        policy_tokens=sum(len(a.token_ids) for a in answers), dropped=len(messages) - len(positive))


def rewrite_answers(teacher: Engine, prompts: Sequence[Messages | str], answers: Sequence[str],
                    instructions: Sequence[str], params: Any) -> list[Completion]:
    """Ask ``teacher`` to rewrite each answer once per instruction (REWRITE_TEMPLATE); the rewrites come back
    answer-major: [answer 0 x instruction 0, answer 0 x instruction 1, ..., answer 1 x instruction 0, ...]. One
    request is one teacher call."""
    requests = []
    for prompt, answer in zip(prompts, answers, strict=True):
        question = "\n".join(m["content"] for m in _as_messages(prompt) if m["role"] == "user")
        for instruction in instructions:
            text = REWRITE_TEMPLATE.format(question=question, answer=answer.strip(), instruction=instruction)
            requests.append([{"role": "user", "content": text}])
    return teacher.generate(requests, params, desc="teacher rewrites")


def _as_messages(prompt: Messages | str) -> Messages:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def _model_shape(model: Any) -> tuple[int, int | None]:
    """(hidden size, number of decoder layers or None) of a Policy, a transformers model, or a bare hidden size."""
    if isinstance(model, int):
        return model, None
    model = getattr(model, "model", model) if hasattr(model, "tokenizer") else model  # a Policy -> its model
    config = model.config
    return int(config.hidden_size), getattr(config, "num_hidden_layers", None)
