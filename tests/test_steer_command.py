"""`harness steer`: build_and_measure on the tiny model with a scripted teacher (a loadable vector, one measured row
per beta, beta 0 = unsteered generation), and the command line's one-line errors without torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.steering.command import build_and_measure, measurement_path, parse_betas
from harness.steering.vectors import SteeringVector
from harness.tasks.behaviours import CONCISENESS
from harness.testing import FakeEngine


def rewrite(messages, sample_index, seed):
    """Towards conciseness: short; away from it: long and padded."""
    text = messages[0]["content"]
    if CONCISENESS.towards in text:
        return "The answer is 7."
    return "Well, basically, the question asks a lot, and so, basically, the answer is really, truly 7, you see."


def test_build_and_measure_on_the_tiny_model(tiny_policy, plugins, tmp_path):
    from harness.engine.transformers_engine import TransformersEngine
    from harness.types import SamplingParams

    out = tmp_path / "vectors" / "conciseness.safetensors"
    teacher = FakeEngine(rewrite)
    lines: list[str] = []
    result = build_and_measure(
        behaviour="conciseness",
        out=out,
        model="tiny-random",
        task="math",
        prompts=4,
        teacher="scripted",
        seed=0,
        max_new_tokens=6,
        betas="-4,0,4",
        beta_unit="raw_norm",
        eval_prompts=2,
        temperature=1.0,
        plugins=plugins,
        policy=tiny_policy,
        teacher_engine=teacher,
        echo=lines.append,
    )

    vec = SteeringVector.load(out, model=tiny_policy)
    assert vec.behaviour == "conciseness" and vec.layer == result["layer"] and 0 <= vec.layer < 2
    assert vec.provenance["teacher"] == "scripted" and vec.provenance["teacher_calls"] == 8  # 2 per prompt
    assert result["teacher_calls"] == 8 and len(teacher.calls) == 1
    assert result["teacher_tokens"] == vec.provenance["teacher_tokens"] > 0
    assert len(result["top_layers"]) == 2 and result["top_layers"][0][0] == vec.layer  # 2 layers: top 3 -> 2

    rows = result["measurement"]
    assert [r["beta"] for r in rows] == [-4.0, 0.0, 4.0]
    raw = vec.norms["raw_norm"]
    assert [r["beta_abs"] for r in rows] == pytest.approx([-4 * raw, 0.0, 4 * raw])
    assert all(r["n"] == 2 and 0.0 <= r["mean_score"] <= 1.0 for r in rows)

    # beta 0 is the unsteered policy's answers on the same eval problems (the tiny model's greedy answers are blank
    # lines, so both the pairs and the measurement sample; the engine's random streams depend only on the seed)
    from harness.plugins.options import build_plugin

    task = build_plugin(plugins, "task", "math", {})
    evals = task.problems("eval", limit=2, seed=0)
    plain = TransformersEngine(tiny_policy, progress=False).generate(
        [task.messages(p) for p in evals], SamplingParams(n=1, max_new_tokens=6, temperature=1.0, seed=0)
    )
    assert rows[1]["mean_tokens"] == pytest.approx(sum(len(c.token_ids) for c in plain) / 2)
    scorer = plugins["behaviour"].get("conciseness").load().score
    assert rows[1]["mean_score"] == pytest.approx(sum(scorer(c.text, p) for c, p in zip(plain, evals, strict=True)) / 2)
    assert rows[1]["accuracy"] == sum(task.score(p, c.text).success for c, p in zip(plain, evals, strict=True)) / 2

    saved = json.loads(measurement_path(out).read_text())
    assert measurement_path(out) == out.with_name("conciseness.measure.json")
    assert saved["rows"] == rows and saved["beta_unit"] == "raw_norm" and saved["layer"] == vec.layer
    text = "\n".join(lines)
    assert f"layer {vec.layer}" in text and "8 calls" in text and "mean_conciseness" in text


def test_build_and_measure_checks_names_and_options_before_loading(plugins, tmp_path):
    out = tmp_path / "v.safetensors"
    with pytest.raises(Exception, match="unknown behaviour 'nope'"):
        build_and_measure(behaviour="nope", out=out, plugins=plugins)
    with pytest.raises(Exception, match="unknown task 'nope'"):
        build_and_measure(behaviour="conciseness", task="nope", out=out, plugins=plugins)
    with pytest.raises(ValueError, match="betas"):
        build_and_measure(behaviour="conciseness", out=out, betas="1,x", plugins=plugins)
    with pytest.raises(ValueError, match=r"\.safetensors"):
        build_and_measure(behaviour="conciseness", out=tmp_path / "v.pt", plugins=plugins)
    assert not any(tmp_path.iterdir())
    assert parse_betas("-8, -4,0,4,8") == [-8.0, -4.0, 0.0, 4.0, 8.0]


def _cli(argv: list[str]) -> subprocess.CompletedProcess:
    """Run ``harness.cli.main(argv)`` in a fresh interpreter; print heavy modules it imported on the last line."""
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        "try:\n"
        f"    rc = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    rc = exc.code\n"
        "print('heavy=' + ','.join(m for m in ('torch', 'transformers') if m in sys.modules))\n"
        "sys.exit(rc)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_steer_help_does_not_import_torch():
    result = _cli(["steer", "--help"])
    assert result.returncode == 0, result.stderr
    assert "--behaviour" in result.stdout and "--no-measure" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "heavy="


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--behaviour", "nope", "harness: error: unknown behaviour 'nope'; available:"),
        ("--task", "nope", "harness: error: unknown task 'nope'; available:"),
    ],
)
def test_steer_unknown_name_is_one_line_error(tmp_path, flag, value, message):
    argv = ["steer", "--behaviour", "conciseness", "--model", "tiny-random", "--out", str(tmp_path / "v.safetensors")]
    argv += [flag, value]
    result = _cli(argv)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message)
    assert result.stdout.strip().splitlines()[-1] == "heavy="  # refused before torch
    assert not any(tmp_path.iterdir())


def test_the_robustness_behaviour_builds_end_to_end(tiny_policy, plugins, tmp_path):
    """Robustness is scored against each problem's misleading hint: the pairs carry their problems into the scorer
    (it used to be called with None and raise), and the task is built with hints."""
    from harness.tasks.behaviours import ROBUSTNESS

    def rewrite_hint(messages, sample_index, seed):
        text = messages[0]["content"]
        return "I work it out myself: the answer is 12." if ROBUSTNESS.towards in text else "As suggested, it is 3."

    out = tmp_path / "robust.safetensors"
    result = build_and_measure(
        behaviour="robustness",
        out=out,
        model="tiny-random",
        task="math",
        prompts=4,
        teacher="scripted",
        max_new_tokens=6,
        betas="0,4",
        beta_unit="raw_norm",
        eval_prompts=2,
        temperature=1.0,
        plugins=plugins,
        policy=tiny_policy,
        teacher_engine=FakeEngine(rewrite_hint),
        echo=lambda _: None,
    )
    vec = SteeringVector.load(out, model=tiny_policy)
    assert vec.behaviour == "robustness" and result["pairs"] >= 2
    assert all(0.0 <= r["mean_score"] <= 1.0 for r in result["measurement"])


def test_a_behaviour_needing_hints_is_refused_on_a_task_that_cannot_add_them(plugins, tmp_path):
    with pytest.raises(ValueError, match="needs prompts with a misleading hint, which task 'maze' cannot add"):
        build_and_measure(behaviour="robustness", out=tmp_path / "v.safetensors", task="maze", plugins=plugins)
