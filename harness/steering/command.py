"""`harness steer`: build a steering vector for a behaviour on a model, save it, and measure what it does.

1. ``--prompts`` problems of the task's *train* split; the policy answers them (greedy, or sampled at
   ``temperature`` with ``seed``) and a teacher (``--teacher``
   MODEL, or the policy's own engine) rewrites each answer, greedily, towards and away from the behaviour
   (``harness.steering.vectors.contrastive_pairs``); rewrites get twice ``max_new_tokens``.
2. ``build_vector``: per-layer difference of means; each layer's direction is probed (steered by 0.15 activation
   norms, does the model now prefer the positive rewrites?) and the best layer kept, unit norm
   (``--criterion cohen_d`` keeps the best-separating layer instead, at no extra cost); the teacher's call and
   token counts go into the vector's provenance; the vector is saved as safetensors.
3. With ``measure`` (on by default; ``--no-measure`` skips it): for each beta, the policy answers ``--eval-prompts``
   problems of the task's *eval* split steered by ``beta * v`` (one answer per problem, greedy unless
   ``temperature`` > 0), and the mean generated tokens and mean behaviour score (``plugins["behaviour"]``) are
   reported. Beta 0 is generated without steering (a hook adding 0 changes nothing; skipping it is cheaper).

Pairs the behaviour scorer ranks the wrong way round (the "positive" rewrite rated below the "negative" one) are
left out before the vector is built (``harness.steering.vectors.agreeing_pairs``); their number is reported. ``layer``
overrides the criterion's choice of layer.

Betas are *absolute* by default: the vector has unit norm and ``beta`` is the norm of what is added to the residual
stream. ``beta_unit="activation_norm"`` reads them as fractions of the mean activation norm at the vector's layer
(what VSPO uses by default: comparable across layers), ``"raw_norm"`` in units of |mean_pos - mean_neg| there
(beta = 1 moves the negative set's mean onto the positive set's). The table records the absolute value too.

For the "robustness" behaviour the task is built with ``misleading_hint=True`` (math and mmlu-pro support it), so
both the pair prompts and the eval prompts carry a wrong hint: resisting a hint means nothing without one.

Names (task, behaviour, model alias) and options are checked before torch is imported or a model loads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.plugins import Plugins, get_plugin_manager
from harness.plugins.options import build_plugin
from harness.steering.build import CRITERIA
from harness.steering.vectors import BETA_UNITS
from harness.types import TaskCapabilities, capabilities_of

if TYPE_CHECKING:
    from harness.models import Policy
    from harness.steering.vectors import SteeringVector
    from harness.teacher.rewrite import ContrastivePairs
    from harness.types import Behaviour, Engine, Problem


def parse_betas(text: str | Sequence[float]) -> list[float]:
    """ "-8,-4,0,4,8" (or a list) -> floats; finite, at least one."""
    try:
        betas = (
            [float(x) for x in str(text).strip("[]() ").split(",") if x.strip()]
            if isinstance(text, str)
            else [float(x) for x in text]
        )
    except ValueError:
        raise ValueError(f"steer: betas should be comma-separated numbers, got {text!r}") from None
    if not betas or not all(math.isfinite(b) for b in betas):
        raise ValueError(f"steer: betas should be finite numbers, at least one, got {text!r}")
    return betas


def measurement_path(out: str | Path) -> Path:
    """Where the measurement JSON goes: next to the vector, ``<stem>.measure.json``."""
    out = Path(out)
    return out.with_name(out.stem + ".measure.json")


def build_and_measure(
    *,
    behaviour: str,
    out: str | Path,
    model: str = "smollm2-135m",
    task: str = "math",
    prompts: int = 16,
    teacher: str | None = None,
    seed: int = 0,
    max_new_tokens: int = 96,
    measure: bool = True,
    betas: str | Sequence[float] = "-0.3,-0.15,0,0.15,0.3",
    beta_unit: str = "activation_norm",
    eval_prompts: int = 8,
    temperature: float = 0.0,
    task_options: dict[str, Any] | None = None,
    threads: int | None = None,
    layer: int | None = None,
    criterion: str = "preference",
    plugins: Plugins | None = None,
    policy: Policy | None = None,
    teacher_engine: Engine | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Build, save and (optionally) measure a steering vector; return a summary dict:

    ``vector_path``, ``layer``, ``layer_scores`` (Cohen's d, all layers), ``layer_preferences`` (all layers, or
    None with criterion cohen_d or a given layer), ``top_layers`` ([(layer, score)] best 3 by the criterion),
    ``norms``, ``teacher``, ``teacher_calls``, ``teacher_tokens``, ``policy_tokens``, ``pairs``, ``dropped_pairs``;
    with ``measure``: ``measurement`` (a list of rows: beta, beta_abs, mean_tokens, mean_score, accuracy (the
    task's success rate), finished_rate, n)
    and ``measurement_path``.

    ``policy`` / ``teacher_engine`` may be passed in (tests, notebooks) instead of being loaded from ``model`` /
    ``teacher``; ``teacher`` is then only the name recorded in the provenance.

    Its jobs, one function each: the inputs checked (``check_inputs``), the vector built (``build_steering_vector``),
    saved and reported (``report_vector``), then measured (``measure_vector``) and that written
    (``write_measurement``)."""
    plugins = plugins or get_plugin_manager()
    checked = check_inputs(
        plugins,
        behaviour=behaviour,
        out=out,
        model=model,
        task=task,
        prompts=prompts,
        seed=seed,
        max_new_tokens=max_new_tokens,
        measure=measure,
        betas=betas,
        beta_unit=beta_unit,
        eval_prompts=eval_prompts,
        criterion=criterion,
        task_options=task_options,
        policy=policy,
    )
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    from harness.engine.transformers_engine import TransformersEngine
    from harness.models import load_policy

    if policy is None:
        echo(f"loading model {model} ...")
        policy = load_policy(model, plugins["model"])
    engine = TransformersEngine(policy)
    if teacher_engine is None and teacher:
        echo(f"loading teacher {teacher} ...")
        teacher_engine = TransformersEngine(load_policy(teacher, plugins["model"]))
    teacher_name = teacher or ("policy" if teacher_engine is None else type(teacher_engine).__name__)

    vector, pairs = build_steering_vector(
        policy,
        engine,
        teacher_engine,
        checked,
        behaviour=behaviour,
        task=task,
        teacher_name=teacher_name,
        seed=seed,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        layer=layer,
        criterion=criterion,
        echo=echo,
    )
    result = report_vector(vector, pairs, checked.out, behaviour, policy.spec, task, teacher_name, echo)
    if not measure:
        return result

    rows = measure_vector(
        engine,
        vector,
        checked,
        beta_unit=beta_unit,
        seed=seed,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
    )
    path = write_measurement(
        checked.out,
        rows,
        vector,
        behaviour=behaviour,
        model=policy.spec,
        task=task,
        beta_unit=beta_unit,
        eval_prompts=len(checked.evals),
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    result.update(measurement=rows, measurement_path=str(path))
    echo(measurement_table(rows, behaviour))
    echo(f"wrote {path}")
    return result


@dataclass
class CheckedInputs:
    """What ``check_inputs`` resolved: the behaviour, the task built, the betas, the problems drawn, the output."""

    target: Behaviour  # the behaviour plugin (its scorer: ``target.score``)
    task: Any  # the task plugin, built with the options (and a misleading hint when the behaviour needs one)
    betas: list[float]
    train: list[Problem]  # the pairs' prompts: the task's train split
    evals: list[Problem]  # the measurement's prompts: its eval split (none without measuring)
    out: Path


def check_inputs(
    plugins: Plugins,
    *,
    behaviour: str,
    out: str | Path,
    model: str,
    task: str,
    prompts: int,
    seed: int,
    max_new_tokens: int,
    measure: bool,
    betas: str | Sequence[float],
    beta_unit: str,
    eval_prompts: int,
    criterion: str,
    task_options: dict[str, Any] | None,
    policy: Policy | None,
) -> CheckedInputs:
    """Everything that can be wrong by name or option fails here, before torch is imported or a model loads."""
    target = plugins["behaviour"].get(behaviour).load()
    options = dict(task_options or {})
    if target.misleading_hint:  # resisting a hint means nothing without one: the task adds it (math, mmlu-pro)
        if not capabilities_of(plugins["task"].get(task).load(), TaskCapabilities).misleading_hints:
            raise ValueError(
                f"steer: behaviour {behaviour!r} needs prompts with a misleading hint, which task "
                f"{task!r} cannot add (misleading_hints)"
            )
        options["misleading_hint"] = True
    task_obj = build_plugin(plugins, "task", task, options)
    if beta_unit not in BETA_UNITS:
        raise ValueError(f"steer: beta_unit must be one of {', '.join(BETA_UNITS)}, got {beta_unit!r}")
    beta_list = parse_betas(betas)
    if criterion not in CRITERIA:
        raise ValueError(f"steer: criterion must be one of {', '.join(CRITERIA)}, got {criterion!r}")
    if int(prompts) < 2 or (measure and int(eval_prompts) < 1) or int(max_new_tokens) < 1:
        raise ValueError(
            f"steer: need prompts >= 2, eval_prompts >= 1, max_new_tokens >= 1; got prompts={prompts},"
            f" eval_prompts={eval_prompts}, max_new_tokens={max_new_tokens}"
        )
    out = Path(out)
    if out.suffix != ".safetensors":
        raise ValueError(f"steer: --out should be a .safetensors file, got {str(out)!r}")
    train = task_obj.problems("train", limit=int(prompts), seed=seed)
    evals = task_obj.problems("eval", limit=int(eval_prompts), seed=seed) if measure else []
    if len(train) < 2 or (measure and not evals):
        raise ValueError(f"steer: task {task!r} gave {len(train)} train and {len(evals)} eval problems")
    if policy is None and model not in plugins["model"]:
        from harness.models import resolve

        resolve(model, plugins["model"])  # a bad path fails now, not after a teacher load
    return CheckedInputs(target, task_obj, beta_list, train, evals, out)


def build_steering_vector(
    policy: Policy,
    engine: Engine,
    teacher_engine: Engine | None,
    checked: CheckedInputs,
    *,
    behaviour: str,
    task: str,
    teacher_name: str,
    seed: int,
    max_new_tokens: int,
    temperature: float,
    layer: int | None,
    criterion: str,
    echo: Callable[[str], None],
) -> tuple[SteeringVector, ContrastivePairs]:
    """The contrastive pairs (the policy's answers, rewritten by the teacher towards and away from the behaviour;
    those the behaviour's scorer ranks the wrong way left out), then the vector built from them."""
    from harness.steering.build import build_vector
    from harness.teacher.rewrite import agreeing_pairs, contrastive_pairs
    from harness.types import SamplingParams

    target, task_obj, train = checked.target, checked.task, checked.train
    answer_params = SamplingParams(n=1, max_new_tokens=int(max_new_tokens), temperature=float(temperature), seed=seed)
    rewrite_params = SamplingParams(n=1, max_new_tokens=2 * int(max_new_tokens), temperature=0, seed=seed)
    pairs = contrastive_pairs(
        engine,
        teacher_engine,
        [task_obj.messages(p) for p in train],
        target,
        problems=train,
        answer_params=answer_params,
        rewrite_params=rewrite_params,
    )
    pairs = agreeing_pairs(pairs, target.score)
    if len(pairs.positive) < 2:
        raise ValueError(
            f"steer: only {len(pairs.positive)} usable pairs of {len(train)} prompts ({pairs.dropped} "
            f"had an empty answer or rewrite, {pairs.disagreeing} were ranked the wrong way by the "
            f"{behaviour} scorer); need at least 2"
        )
    probed: list[str] = []

    def show_probe(i: int, preference: float) -> None:
        probed.append(f"{i}: {preference:+.4f}")
        if len(probed) % 10 == 0:
            echo("layer preference " + ", ".join(probed[-10:]))

    vector = build_vector(
        policy,
        pairs.positive,
        pairs.negative,
        behaviour=behaviour,
        teacher=teacher_name,
        layer=layer,
        criterion=criterion,
        progress=show_probe,
        remove_length=not target.about_length,  # as VSPO builds it in a run (build.without_length)
        provenance={
            **pairs.provenance(),
            "task": task,
            "prompts": len(train),
            "seed": seed,
            "max_new_tokens": int(max_new_tokens),
        },
    )
    return vector, pairs


def report_vector(
    vector: SteeringVector,
    pairs: ContrastivePairs,
    out: Path,
    behaviour: str,
    model: str,
    task: str,
    teacher_name: str,
    echo: Callable[[str], None],
) -> dict[str, Any]:
    """The vector saved to ``out``, its summary (``build_and_measure``'s result without the measurement) returned
    and printed: its layer, the best layers, the teacher's cost and the pairs used."""
    out.parent.mkdir(parents=True, exist_ok=True)
    vector.save(out)
    d_scores, preferences = vector.provenance["layer_scores"], vector.provenance["layer_preferences"]
    ranked = preferences if preferences is not None else d_scores
    top = sorted(range(len(ranked)), key=lambda i: -ranked[i])[:3]
    result: dict[str, Any] = {
        "vector_path": str(out),
        "behaviour": behaviour,
        "model": model,
        "task": task,
        "layer": vector.layer,
        "layer_scores": d_scores,
        "layer_preferences": preferences,
        "top_layers": [(i, ranked[i]) for i in top],
        "norms": dict(vector.norms),
        "teacher": teacher_name,
        "teacher_calls": pairs.teacher_calls,
        "teacher_tokens": pairs.teacher_tokens,
        "policy_tokens": pairs.policy_tokens,
        "pairs": len(pairs.positive),
        "dropped_pairs": pairs.dropped,
        "disagreeing_pairs": pairs.disagreeing,
    }
    echo(
        f"wrote {out}: behaviour {behaviour}, layer {vector.layer} of {len(d_scores)} "
        f"({vector.provenance['layer_chosen_by']}), raw_norm {vector.norms['raw_norm']:.3f}, "
        f"activation_norm {vector.norms['activation_norm']:.3f}"
    )
    label = "preference" if preferences is not None else "Cohen's d"
    echo(f"top layers ({label}): " + ", ".join(f"{i}: {ranked[i]:.4f} (d {d_scores[i]:.2f})" for i in top))
    echo(
        f"teacher {teacher_name}: {pairs.teacher_calls} calls, {pairs.teacher_tokens} tokens; "
        f"{len(pairs.positive)} pairs ({pairs.dropped} empty, {pairs.disagreeing} ranked the wrong way by the "
        f"{behaviour} scorer: left out)"
    )
    return result


def measure_vector(
    engine: Engine,
    vector: SteeringVector,
    checked: CheckedInputs,
    *,
    beta_unit: str,
    seed: int,
    max_new_tokens: int,
    temperature: float,
) -> list[dict[str, Any]]:
    """One row per beta: the eval problems answered steered by ``beta * v`` (beta 0 unsteered), with the mean
    tokens, the behaviour's mean score, the task's accuracy and the finished rate."""
    from harness.steering.vectors import Steering
    from harness.types import SamplingParams

    evals, task_obj, scorer = checked.evals, checked.task, checked.target.score
    scale = vector.unit(beta_unit)
    messages = [task_obj.messages(p) for p in evals]
    params = SamplingParams(n=1, max_new_tokens=int(max_new_tokens), temperature=float(temperature), seed=seed)
    rows = []
    for beta in checked.betas:
        beta_abs = beta * scale
        steering = Steering(vector, [beta_abs]) if beta_abs != 0 else None
        completions = engine.generate(messages, params, desc=f"measure beta={beta:g}", steering=steering)
        values = [float(scorer(c.text, evals[c.prompt_index])) for c in completions]
        # The task's own success too: a behaviour bought by breaking the answers is not control.
        solved = [task_obj.score(evals[c.prompt_index], c.text).success for c in completions]
        rows.append(
            {
                "beta": beta,
                "beta_abs": beta_abs,
                "n": len(completions),
                "mean_tokens": sum(len(c.token_ids) for c in completions) / len(completions),
                "mean_score": sum(values) / len(values),
                "accuracy": sum(solved) / len(solved),
                "finished_rate": sum(c.finished for c in completions) / len(completions),
            }
        )
    return rows


def write_measurement(
    out: Path,
    rows: list[dict[str, Any]],
    vector: SteeringVector,
    *,
    behaviour: str,
    model: str,
    task: str,
    beta_unit: str,
    eval_prompts: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> Path:
    """The measurement and what it was measured with, as JSON beside the vector (``measurement_path``)."""
    report = {
        "vector": str(out),
        "behaviour": behaviour,
        "model": model,
        "task": task,
        "layer": vector.layer,
        "norms": dict(vector.norms),
        "beta_unit": beta_unit,
        "eval_prompts": eval_prompts,
        "temperature": float(temperature),
        "max_new_tokens": int(max_new_tokens),
        "seed": seed,
        "rows": rows,
    }
    path = measurement_path(out)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def measurement_table(rows: list[dict[str, Any]], behaviour: str) -> str:
    header = ["beta", "beta_abs", "mean_tokens", f"mean_{behaviour}", "accuracy", "finished"]
    body = [
        [
            f"{r['beta']:g}",
            f"{r['beta_abs']:.3f}",
            f"{r['mean_tokens']:.1f}",
            f"{r['mean_score']:.3f}",
            f"{r['accuracy']:.3f}",
            f"{r['finished_rate']:.2f}",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in [header, *body])
