"""VSPO (steering-vector policy optimization, arXiv 2605.15604): GRPO whose rollouts are sampled under a steering
vector.

Stage 2 of the method. The G rollouts of a prompt are sampled with strengths beta_1..beta_G: rollout j adds
``betas[j] * v`` to the output of decoder layer ``v.layer`` (``engine.generate(..., steering=Steering(v, betas))``).
They are scored by the task plus a shaping term, advantages are group-relative over these steered rollouts (GRPO's
estimator), and the update is applied to the *unsteered* policy: the steering hook exists only while sampling, so
the vector is never part of the trained model, and GRPO's ``update()`` (a plain forward pass) computes the unsteered
log-probabilities of the steered tokens.

Options (on top of GRPO's):
  vector     path to a SteeringVector file (``SteeringVector.save`` in harness/steering/vectors.py, or ``harness
             steer``); its hidden size must match the policy's. Empty: stage 1 runs first, on the first
             ``vector_prompts`` training problems: the policy answers, the teacher (``teacher=MODEL``, by default the
             policy itself) rewrites each answer towards and away from ``behaviour``
             (harness.teacher.rewrite.contrastive_pairs), the vector is built (harness.steering.build.build_vector)
             and saved in the run folder as ``steering_vector.safetensors``;
             the teacher's calls and tokens go into the run's metrics (``vspo/vector_teacher_calls``,
             ``..._tokens``), since that one-off cost is what VSPO is compared with RLAIF on.
  cache_vector  true (default): a vector built in a run is kept in the cache (harness/steering/cache.py), keyed by
             the policy's weights, the teacher, the behaviour, the prompts and the build's options; a later run
             with the same key copies it into its folder instead of building it again (minutes of answers, rewrites
             and layer probing on a CPU) and says so in one line (metric ``vspo/vector_cached``). false: always
             build.
  betas      the strength schedule, a comma string with one beta per rollout of a group: rollout j of every prompt
             is steered by betas[j], so group_size must equal the number of betas. An explicit list (rather than
             ``beta_max`` and a linear rule) keeps the schedule visible in the manifest and lets it be asymmetric;
             including 0 keeps one unsteered rollout per group. The default, -0.15..0.2 in steps of 0.05, has 8
             entries for GRPO's default G = 8.
  beta_unit  how a beta is read (harness.steering.vectors.BETA_UNITS): "activation_norm" (default) as a fraction of
             the mean residual-stream norm at the vector's layer, so one schedule suits any layer; "absolute" as the
             norm added (the vector has unit norm). On SmolLM2-135M's conciseness directions at layers 16-26, 0.15
             shortened math answers and 0.3 already degraded them into repetition (`harness steer` measures this),
             hence the default's range. (The layer the criterion picks can steer the other way: check it.)
  alpha      the shaping scale (the shaping term uses the schedule's beta, in beta_unit).
  reward     "strength": r = r0 + alpha * beta (component ``steering/beta``, weight alpha): the more strongly
             steered rollouts are preferred, so the policy learns to produce unprompted what the vector induces.
             "behaviour": r = r0 + alpha * behaviour(answer, problem) (component ``behaviour/<behaviour>``, weight
             alpha), a registered behaviour scorer. With reward=strength, ``behaviour`` is optional and is logged
             with weight 0 (does the behaviour follow the steering?). "auto" (default): behaviour when one is
             named, strength for a bare vector.
             Why the default scores the text: the strength reward does not look at what was written. With GRPO's
             group normalisation and a task reward that is the same for every rollout of a group (most maths
             groups of a small model), each group's advantages are the standardised betas, at full size whatever
             the answers say, every step. On SmolLM2-135M with its conciseness vector that pushed answers from 63
             tokens to a bare end-of-sequence in three steps (math and persona alike). Scored by the behaviour,
             an empty or degenerate answer is worth nothing, and steering decides only where the rollouts
             explore.

The loss's normaliser. GRPO divides each rollout's summed token losses by its own length, so a short rollout's
tokens each carry a larger share of its advantage (Dr. GRPO's length bias). Unsteered, a group's lengths are alike
and the bias is small; steered, they are not: the strongly steered rollouts of a conciseness vector are a few
tokens long, and a short one that happens to be right pulls the policy towards its first token with about 30
times the weight of a 60-token one. On SmolLM2-135M (math, seed 0) that took answers from 62 tokens to a single
digit in three steps (solved@16 0.125 -> 0.062, every answer after training a bare guess). VSPO's default is
therefore ``loss_norm=constant`` (every token weighs advantage / max_new_tokens): the same seed's answers settled at
11-21 tokens from step 2 and their boxed rate rose from 0 to 0.56 over the 8 steps (docs/results/history.md).

r0 is the task's weighted scalar reward; every component is logged per step as ``reward/<component>`` and kept in
each training sample's ``rewards``.

The importance ratio. The engine returns the log-probabilities of the *steered* sampling distribution; used as GRPO's
``old_logp`` they would make the first ratio pi_unsteered / pi_steered, far from 1 for large |beta|, and clipping
would then zero the gradient of exactly the rollouts the reward prefers. So before each update the unsteered
policy's log-probabilities of the sampled tokens are recomputed (no grad) and replace them: the ratio starts at 1
and clipping behaves as in GRPO (on-policy with respect to the unsteered policy). This ignores the mismatch between
the steered sampling distribution and the unsteered policy, i.e. no importance correction towards the unsteered
policy's own distribution: the estimator is biased towards the steered behaviour, which is the intent (the policy
should move towards what steering produces), and it stays stable. The size of the ignored mismatch is logged as
``steer_logratio``: the mean over tokens of log pi_steered - log pi_unsteered of the sampled token.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from harness import progress
from harness.plugins.size_bounds import COUNT, bounded
from harness.runner.distributed import current as current_parallel
from harness.steering.cache import cached, remember, vector_key
from harness.steering.vectors import BETA_UNITS, Steering, SteeringVector
from harness.trainers.grpo import GRPOConfig, GRPOTrainer
from harness.trainers.rollout_precision import correct_rollouts, policy_logprobs
from harness.types import EngineCapabilities, TrainerCapabilities, capabilities_of

REWARDS = ("strength", "behaviour", "auto")


@dataclass
class VSPOConfig(GRPOConfig):
    vector: str = ""  # path to a saved SteeringVector; "" = build one for `behaviour` before training
    # training problems whose answers are rewritten into pairs when the vector is built
    vector_prompts: int = bounded(16, 2, COUNT)
    # pairs the layer criterion steers with (harness.steering.vectors.build_vector)
    probe_pairs: int = bounded(8, 1, COUNT)
    # probe every k-th layer, then climb to the best neighbour (build.probe_layers)
    probe_every: int = bounded(4, 1, COUNT)
    betas: str = "-0.15,-0.1,-0.05,0,0.05,0.1,0.15,0.2"  # one strength per rollout of a group; len == group_size
    beta_unit: str = "activation_norm"  # what a beta is measured in: activation_norm, absolute or raw_norm
    alpha: float = 2.0  # shaping scale: r = r0 + alpha * beta (or alpha * behaviour score)
    # "behaviour" (alpha * the behaviour scorer's score of what was written), "strength" (alpha * beta, the paper's
    # form) or "auto": behaviour when one is named, else strength; the module docstring says why
    reward: str = "auto"
    teacher: str = ""  # model spec of the teacher that rewrites answers for the in-run vector; "" = the policy
    # reuse an in-run vector built before from the same weights, prompts and options (harness/steering/cache.py)
    cache_vector: bool = True
    # take the length direction out of the in-run vector: "auto" (for every behaviour not about length), "true",
    # "false" (harness/steering/build.py without_length says why)
    remove_length: str = "auto"
    # Dr. GRPO's normaliser (every token weighs advantage / max_new_tokens), not GRPO's per-sequence mean: steering
    # makes a group's rollouts differ in length, and the per-sequence mean pays each token of a 2-token answer 30
    # times what it pays a token of a 60-token one (the module docstring has the run this broke)
    loss_norm: str = "constant"

    def __post_init__(self) -> None:
        super().__post_init__()
        betas = parse_betas(self.betas)
        if len(betas) != self.group_size:
            raise ValueError(
                f"vspo: group_size ({self.group_size}) must equal the number of betas ({len(betas)}: "
                f"{self.betas}); set both"
            )
        if self.beta_unit not in BETA_UNITS:
            raise ValueError(f"vspo: beta_unit must be one of {', '.join(BETA_UNITS)}, got {self.beta_unit!r}")
        if self.reward not in REWARDS:
            raise ValueError(f"vspo: unknown reward {self.reward!r}; choose one of {', '.join(REWARDS)}")
        if self.reward == "auto":  # resolved here, so the manifest records which reward was trained on
            self.reward = "behaviour" if self.behaviour else "strength"
        if self.reward == "behaviour" and not self.behaviour:
            raise ValueError("vspo: reward=behaviour needs behaviour=NAME (a registered behaviour scorer)")
        if self.behaviour_weight:
            raise ValueError("vspo: behaviour_weight is GRPO's shaping; VSPO weighs its reward by alpha")
        if not self.vector and not self.behaviour:
            raise ValueError("vspo: needs vector=PATH (a file from `harness steer`) or behaviour=NAME to build one")
        if str(self.remove_length).lower() not in ("auto", "true", "false"):
            raise ValueError(f"vspo: remove_length must be auto, true or false, got {self.remove_length!r}")
        if int(self.vector_prompts) < 2:
            raise ValueError(f"vspo: vector_prompts must be >= 2, got {self.vector_prompts!r}")
        if self.vector and not Path(self.vector).is_file():
            raise ValueError(f"vspo: steering vector file {self.vector!r} not found")


def parse_betas(text: str) -> list[float]:
    """Parse "-4,-2,0,2" into [-4.0, -2.0, 0.0, 2.0]; brackets and spaces are tolerated (a list from a config file)."""
    try:
        betas = [float(x) for x in str(text).strip("[]() ").split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"vspo: betas should be comma-separated numbers, got {text!r}") from None
    if not betas or not all(math.isfinite(b) for b in betas):
        raise ValueError(f"vspo: betas should be finite numbers, at least one, got {text!r}")
    return betas


class VSPOTrainer(GRPOTrainer):
    name = "vspo"
    config_class = VSPOConfig
    # samples under steering (the runner refuses an engine that cannot steer before the model loads); under a
    # launcher GRPO's loop splits its steps and rank 0 builds the vector and sends it to the others
    capabilities = TrainerCapabilities(steering=True, data_parallel=True)

    def __init__(self, plugins=None, **options) -> None:
        super().__init__(plugins=plugins, **options)
        self.betas = parse_betas(self.config.betas)

    def load_vector(self, policy) -> SteeringVector:
        """The configured vector, checked against the policy; any failure is a one-line ValueError."""
        try:
            return SteeringVector.load(self.config.vector, model=policy)
        except Exception as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ValueError(f"vspo: cannot use steering vector {self.config.vector!r}: {first}") from None

    def train(self, policy, engine, task, problems, *, store) -> None:
        if not capabilities_of(engine, EngineCapabilities).steering:
            raise ValueError(f"vspo: the engine {type(engine).__name__} cannot steer (use TransformersEngine)")
        saved = self.checkpoint_state(store)
        if saved:  # resuming: the vector this run built (or was given) before its last checkpoint
            built = store.dir / "steering_vector.safetensors"  # found there even if the folder was moved
            self.config.vector = saved["vector"] if Path(saved["vector"]).is_file() else str(built)
        dp = current_parallel()
        vector = None
        if dp.is_main:  # under a launcher the vector is built (teacher calls, the file) once, on rank 0
            if not self.config.vector:
                self.config.vector = str(self.build_vector(policy, engine, task, problems, store))
            vector = self.load_vector(policy)
        vector = dp.broadcast(vector)  # every rank steers with rank 0's tensor; no rank reads another's files
        try:
            unit = vector.unit(self.config.beta_unit)
        except ValueError as exc:
            raise ValueError(f"vspo: {exc}") from None
        # One beta per sample index, for every prompt; the shaping term keeps the schedule's own values.
        steering = Steering(vector, [b * unit for b in self.betas])
        super().train(policy, _SteeredEngine(engine, steering), task, problems, store=store)

    def state_dict(self) -> dict:
        return {"vector": self.config.vector}

    def teacher_engine(self, policy):
        """The engine of the model named by ``teacher`` (None: the policy answers and rewrites alike)."""
        if not self.config.teacher:
            return None
        from harness.engine.transformers_engine import TransformersEngine
        from harness.models import load_policy

        teacher = load_policy(self.config.teacher, self.plugins["model"])
        teacher.model.to(next(policy.model.parameters()).device)
        return TransformersEngine(teacher, progress=False)

    def build_vector(self, policy, engine, task, problems, store) -> Path:
        """Stage 1 in the run: pairs from the policy's answers rewritten by the teacher (the policy itself unless
        ``teacher`` names a model), the vector saved in the run."""
        from harness.steering.build import build_vector
        from harness.teacher.rewrite import agreeing_pairs, contrastive_pairs
        from harness.types import SamplingParams

        cfg = self.config
        chosen = list(problems[: cfg.vector_prompts])
        path = store.dir / "steering_vector.safetensors"
        key = vector_key(policy.model, self.vector_inputs(engine, task, chosen)) if cfg.cache_vector else None
        hit = cached(key) if key else None
        if hit is not None:
            shutil.copyfile(hit, path)
            vector = SteeringVector.load(path, model=policy)
            if current_parallel().is_main:
                progress.write(
                    f"vspo: reusing the steering vector built {vector.provenance.get('date', '?')[:10]} from "
                    f"the same weights, prompts and options ({hit}; cache_vector=false builds it again)"
                )
            self.record_vector(store, vector, cached=True)
            return path
        pairs = contrastive_pairs(
            engine,
            self.teacher_engine(policy),
            [task.messages(p) for p in chosen],
            self.behaviour,
            problems=chosen,
            answer_params=SamplingParams(n=1, max_new_tokens=cfg.max_new_tokens, temperature=0, seed=cfg.seed),
            rewrite_params=SamplingParams(n=1, max_new_tokens=2 * cfg.max_new_tokens, temperature=0, seed=cfg.seed),
        )
        pairs = agreeing_pairs(pairs, self.behaviour.score)
        if len(pairs.positive) < 2:
            raise ValueError(
                f"vspo: only {len(pairs.positive)} usable contrastive pairs from {len(chosen)} problems; "
                f"raise vector_prompts or pass vector=PATH"
            )
        vector = build_vector(
            policy,
            pairs.positive,
            pairs.negative,
            behaviour=cfg.behaviour,
            teacher=cfg.teacher or "policy",
            probe_pairs=int(cfg.probe_pairs),
            probe_every=int(cfg.probe_every),
            provenance={**pairs.provenance(), "task": task.name, "prompts": len(chosen)},
            remove_length=self.removes_length(),
        )
        vector.save(path)
        if key is not None:
            remember(key, path)
        self.record_vector(store, vector, cached=False)
        return path

    def removes_length(self) -> bool:
        """Whether the in-run vector has its length direction removed (``remove_length``; auto: unless the
        behaviour's measure is about length, as conciseness's is)."""
        choice = str(self.config.remove_length).lower()
        if choice != "auto":
            return choice == "true"
        return not getattr(self.behaviour, "about_length", False)

    def vector_inputs(self, engine, task, chosen) -> dict:
        """Everything the in-run build reads besides the policy's weights: the cache key's other half."""
        cfg = self.config
        return {
            "behaviour": cfg.behaviour,
            "teacher": cfg.teacher,
            "task": f"{task.name}/{task.version}",
            "prompts": [task.messages(p) for p in chosen],
            "max_new_tokens": cfg.max_new_tokens,
            "seed": cfg.seed,
            "probe_pairs": int(cfg.probe_pairs),
            "probe_every": int(cfg.probe_every),
            "remove_length": self.removes_length(),
            "sampling_dtype": capabilities_of(engine, EngineCapabilities).sampling_dtype or "weights",
        }

    @staticmethod
    def record_vector(store, vector: SteeringVector, *, cached: bool) -> None:
        """The vector's build figures as run metrics; a reused vector's teacher cost is the build's, paid once."""
        prov = vector.provenance
        preferences = prov.get("layer_preferences")  # None: the layer was given, not probed
        costs = ("teacher_calls", "teacher_tokens", "policy_tokens", "dropped_pairs", "disagreeing_pairs")
        store.update_metrics(
            {f"vspo/vector_{k}": prov[k] for k in costs if k in prov}
            | {
                "vspo/vector_cached": int(cached),
                "vspo/vector_layer": vector.layer,
                "vspo/vector_pairs": prov.get("pairs", {}).get("positive"),
                "vspo/vector_preference": preferences[vector.layer] if preferences else None,
                **{f"vspo/vector_{k}": v for k, v in vector.norms.items()},
            }
        )

    # -- scoring: the shaping component ---------------------------------------------------------------------------

    def shaping(self) -> dict[str, float]:
        cfg = self.config
        if cfg.reward == "behaviour":
            return {f"behaviour/{cfg.behaviour}": cfg.alpha}
        extra = {f"behaviour/{cfg.behaviour}": 0.0} if cfg.behaviour else {}  # reported, not rewarded
        return {"steering/beta": cfg.alpha, **extra}

    def shaping_value(self, name, problem, completion, answer) -> float:
        if name == "steering/beta":
            return self.betas[completion.sample_index]
        return super().shaping_value(name, problem, completion, answer)

    # -- update: the unsteered policy's log-probs as the old ones ---------------------------------------------------

    def rollout_correction(self, model, tok, engine, completions):
        """The old log-probs are the unsteered policy's, computed once per batch before the first pass (so from the
        second pass the ratio measures how far the passes moved the policy, and clips), in the trainer's precision.
        No precision correction on top: the engine's log-probs are the *steered* distribution's, so a weight
        pi_unsteered / pi_steered would undo the steering the reward asks for; the gap is logged as
        ``steer_logratio`` instead."""
        unsteered = self.unsteered_logprobs(model, tok, completions)
        # Summed over the ranks of a data-parallel run (each holds its own rows), so the figure is the whole batch's.
        gap = current_parallel().sum(
            {
                "tokens": sum(len(lp) for lp in unsteered),
                "gap": sum(sum(c.logprobs) for c in completions) - sum(sum(lp) for lp in unsteered),
            }
        )
        self.steer_logratio = gap["gap"] / max(gap["tokens"], 1)
        completions = [replace(c, logprobs=lp) for c, lp in zip(completions, unsteered, strict=True)]
        return correct_rollouts(completions, None, self.config.tis_cap)

    def update(self, model, tok, optimizer, reference, completions, advantages, **totals) -> dict[str, float]:
        stats = super().update(model, tok, optimizer, reference, completions, advantages, **totals)
        return {**stats, "steer_logratio": self.steer_logratio}

    def unsteered_logprobs(self, model, tok, completions) -> list[list[float]]:
        """log pi(token) of every completion token under the plain (unsteered) model, at the sampling temperature,
        in the trainer's precision."""
        cfg = self.config
        return policy_logprobs(model, tok.pad_token_id, completions, cfg, cfg.micro_batch, cfg.temperature)


class _SteeredEngine:
    """The engine with the steering always on: GRPO's rollout stage samples through it unchanged."""

    def __init__(self, engine, steering: Steering) -> None:
        self.engine, self.steering = engine, steering

    @property
    def capabilities(self):
        """The wrapped engine's: what it samples in (bf16 under --rollout-dtype auto) decides the update's autocast."""
        return capabilities_of(self.engine, EngineCapabilities)

    def generate(self, prompts, params, *, desc: str = ""):
        return self.engine.generate(prompts, params, desc=desc, steering=self.steering)

    def __getattr__(self, name):  # sync_weights, sleep, wake_up: the wrapped engine's (vLLM holds its own weights)
        return getattr(self.engine, name)
