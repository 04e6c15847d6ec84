"""The persona task: persona rewards that trade off, the packaged embedding model offline, reward-model personas
(a tiny random classifier saved locally), prompt sources and splits."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.tasks.persona import (
    PERSONAS,
    PRIMARY,
    PersonaTask,
    embed,
    embedding_model_path,
    reward_model_score,
    style_scores,
)
from harness.types import Problem, Task

FIXTURES = Path(__file__).parent / "fixtures" / "persona"
REPO = Path(__file__).resolve().parents[1]
QUESTION = Problem(id="q", prompt="How does photosynthesis work?")

EXPERT = (
    "Photosynthesis couples the light-dependent reactions in the thylakoid membrane, where photosystem II "
    "oxidises H2O and drives a proton gradient for ATP synthase, to the Calvin-Benson cycle in the stroma, "
    "where RuBisCO fixes CO2 into 3-phosphoglycerate using ATP and NADPH. Net: 6CO2 + 6H2O -> C6H12O6 + 6O2."
)
TEACHER = (
    "Great question! Imagine a plant is like a little kitchen. It takes in sunlight, water and air, and "
    "cooks its own food, kind of like when you bake a cake. For example, a sunflower turns toward the sun to "
    "get more light for cooking. Don't worry, it's easy: light plus water plus air makes sugar for the "
    "plant, and it gives us fresh air to breathe too! Next time you see a leaf, remember it's a tiny "
    "solar-powered kitchen working all day long."
)


@pytest.fixture(scope="module")
def task() -> PersonaTask:
    return PersonaTask(personas="expert,teacher,concise,skeptic")


def test_import_loads_no_model() -> None:
    code = "import sys, harness.tasks.persona; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_packaged_embedding_model_loads_offline() -> None:
    assert (embedding_model_path() / "model.safetensors").is_file()
    vectors = embed(["A cat sits on the mat.", "A kitten rests on a rug.", "Quarterly earnings rose by 4%."])
    assert tuple(vectors.shape) == (3, 384)
    assert [round(float(v.norm()), 4) for v in vectors] == [1.0, 1.0, 1.0]
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > 0.4 > 0.2 > unrelated


def test_expert_and_teacher_answers_trade_off_across_personas(task: PersonaTask) -> None:
    expert = task.score(QUESTION, EXPERT).rewards
    teacher = task.score(QUESTION, TEACHER).rewards
    # Opposite directions: the terse technical answer wins "expert" and "concise", the friendly one "teacher".
    assert expert["expert"] > teacher["expert"] + 0.3
    assert expert["concise"] > teacher["concise"] + 0.2
    assert teacher["teacher"] > expert["teacher"] + 0.3
    assert expert[PRIMARY] == teacher[PRIMARY] == 1.0  # each pleases some persona well


def test_the_embedding_half_alone_trades_off_too() -> None:
    expert = style_scores(EXPERT, ["expert", "teacher", "concise"])
    teacher = style_scores(TEACHER, ["expert", "teacher", "concise"])
    assert expert["expert"] > teacher["expert"] + 0.2 and expert["concise"] > teacher["concise"] + 0.2
    assert teacher["teacher"] > expert["teacher"] + 0.2


def test_rewards_vector_weights_and_success(task: PersonaTask) -> None:
    score = task.score(QUESTION, EXPERT)
    assert list(score.rewards) == ["expert", "teacher", "concise", "skeptic", PRIMARY]
    assert score.primary == PRIMARY and all(0.0 <= v <= 1.0 for v in score.rewards.values())
    assert score.rewards[PRIMARY] == float(max(v for k, v in score.rewards.items() if k != PRIMARY) >= 0.8)
    assert task.reward_weights == dict.fromkeys(["expert", "teacher", "concise", "skeptic"], 0.25)
    assert not score.unparsed and score.extracted == "concise"  # the persona that likes it most
    strict = PersonaTask(success_threshold=1.01).score(QUESTION, EXPERT)
    assert strict.rewards[PRIMARY] == 0.0 and not strict.success


def test_off_topic_and_empty_answers_earn_nothing(task: PersonaTask) -> None:
    off_topic = task.score(QUESTION, "Paris is the capital of France, and its museums are world famous.")
    assert all(v == 0.0 for v in off_topic.rewards.values())
    for empty in ("", "   \n"):
        score = task.score(QUESTION, empty)
        assert score.unparsed and score.extracted is None and all(v == 0.0 for v in score.rewards.values())


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.text(max_size=400), st.sampled_from(["\ud800 lone surrogate", "\x00" * 50, "🌱" * 300, "word " * 2000])
    )
)
def test_score_never_raises(task: PersonaTask, completion: str) -> None:
    score = task.score(QUESTION, completion)
    assert all(0.0 <= v <= 1.0 for v in score.rewards.values())


# ----------------------------------------------------------------------------------------------------------------
# Reward models as personas
# ----------------------------------------------------------------------------------------------------------------


def _tiny_classifier(folder: Path, num_labels: int, chat_template: str | None = None) -> str:
    """A randomly initialised 2-layer BERT sequence classifier with MiniLM's tokenizer, saved like a hub model."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(str(embedding_model_path()))
    if chat_template:
        tokenizer.chat_template = chat_template
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=num_labels,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _logits(path: str, *text: str, **tokenizer_options: bool) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        return model(**tokenizer(*text, return_tensors="pt", **tokenizer_options)).logits[0].tolist()


def test_a_reward_model_is_a_persona(tmp_path: Path) -> None:
    path = _tiny_classifier(tmp_path / "rm", num_labels=1)
    task = PersonaTask(reward_models=f"judge={path}")
    score = task.score(QUESTION, EXPERT)
    assert list(score.rewards) == ["expert", "teacher", "concise", "judge", PRIMARY]
    (logit,) = _logits(path, QUESTION.prompt, EXPERT)  # no chat template: question and answer as a text pair
    assert score.rewards["judge"] == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-5)
    assert task.data_source()["reward_models"] == {"judge": path}
    only = PersonaTask(personas="", reward_models={"judge": path})
    assert list(only.score(QUESTION, "").rewards) == ["judge", PRIMARY]
    assert only.reward_weights == {"judge": 1.0}


def test_two_label_reward_model_and_chat_template(tmp_path: Path) -> None:
    template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    path = _tiny_classifier(tmp_path / "rm2", num_labels=2, chat_template=template)
    reward = reward_model_score(path, "Why?", "Because.")
    # The chat template's text, tokenized as it is (the template decides the special tokens); then P(last label).
    a, b = _logits(path, "[user] Why?\n[assistant] Because.\n", add_special_tokens=False)
    assert reward == pytest.approx(math.exp(b) / (math.exp(a) + math.exp(b)), abs=1e-5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"personas": "expert,pirate"}, "unknown persona.*pirate.*built-in: expert, teacher, concise, skeptic"),
        ({"reward_models": "judge"}, "name=hub_id_or_path"),
        ({"reward_models": "a=x,a=y"}, "given twice"),
        ({"reward_models": "expert=x"}, "already used"),
        ({"reward_models": "judge=/no/such/folder"}, "neither a local folder nor a hub id"),
        ({"personas": "", "reward_models": None}, "no personas"),
        ({"source": "jsonl"}, "path"),
        ({"eval_fraction": 1}, "eval_fraction"),
    ],
)
def test_bad_options_fail_at_construction(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PersonaTask(**options)


def test_a_missing_reward_model_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^persona: reward model '/no/such/model' failed to load: [^\n]*$"):
        reward_model_score("/no/such/model", "Why?", "Because.")


# ----------------------------------------------------------------------------------------------------------------
# Prompts and splits
# ----------------------------------------------------------------------------------------------------------------


def test_builtin_prompts_are_disjoint_and_stable() -> None:
    task = PersonaTask()
    assert isinstance(task, Task)
    train, evaluation = task.problems("train"), task.problems("eval")
    assert 40 <= len(train) + len(evaluation) <= 60 and len(evaluation) >= 8
    assert not {p.prompt.lower() for p in train} & {p.prompt.lower() for p in evaluation}
    assert len({p.id for p in train + evaluation}) == len(train) + len(evaluation)
    assert all(p.answer is None and p.meta["topic"] for p in train + evaluation)
    assert PersonaTask().problems("eval", limit=4, seed=2) == task.problems("eval", limit=4, seed=2)
    message = task.messages(evaluation[0])[0]["content"]
    assert message.startswith(evaluation[0].prompt)
    source = task.data_source()
    assert source["version"].startswith("sha256:") and set(source["personas"]) == {"expert", "teacher", "concise"}
    assert "all-MiniLM-L6-v2" in source["embedding_model"] and "0.8" in source["success"]


def test_jsonl_prompts(tmp_path: Path) -> None:
    task = PersonaTask(source="jsonl", path=str(FIXTURES / "prompts.jsonl"), eval_fraction=0.5)
    problems = {p.id: p for p in task.problems("train") + task.problems("eval")}
    assert sorted(problems)[:2] == ["p1", "p3"] and len(problems) == 3  # "why is the  sky blue?" is p1 again
    assert problems["p1"].meta == {"topic": "science"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "Fine?"}\n\n{"prompt": 3}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl row 1 \(line 3\): 'prompt' must be a non-empty string"):
        PersonaTask(source="jsonl", path=str(bad)).problems("eval")


def test_every_builtin_persona_has_anchors_and_a_signal() -> None:
    import json

    from harness.tasks.persona import ANCHORS

    anchors = json.loads(ANCHORS.read_text())
    for name, persona in PERSONAS.items():
        assert len(anchors[name]["good"]) == len(anchors[name]["bad"]) >= 4
        assert 0.0 <= persona.signal(EXPERT) <= 1.0
