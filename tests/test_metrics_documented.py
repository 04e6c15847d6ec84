"""docs/reference/metrics.md names every key a trainer or searcher logs. Tiny runs (the 2-layer random model, a few
tokens each) of GRPO with its optional terms on (KL, TR-DPO's reference sync, dynamic sampling, the overlong
penalty, a behaviour reward, a format warm-up, evaluations during training), VPO (two answers per rollout, so the
set-level and pooled figures), VSPO (with a given vector), RLAIF and SFT, each with best-of-k before and after, and
an evolve evaluation; every key of their steps.jsonl and metrics.json must match a key the page documents in the
section for its kind, a number or a component name standing for its placeholder (`pass@<k>`,
`mean_reward/<component>`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from harness.run import RunConfig, run
from harness.steering.vectors import SteeringVector

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "metrics.md"
# The page's sections, by the start of their heading, and which logged keys each documents.
SECTIONS = {
    "Evaluations": "search",
    "Training steps": "train",
    "Format warm-up": "warmup",
    "Run summaries": "summary",
    "Line fields": "line",
}
PHASES = ("before", "after", "eval", "during")

SEARCH = {"n": 2, "max_new_tokens": 4}
RL = {"group_size": 2, "prompts_per_step": 2, "max_new_tokens": 4}
WARMUP = {"warmup_steps": 1, "warmup_check_every": 1, "warmup_check_problems": 1}


def _runs(vector: str) -> dict[str, dict]:
    return {
        "grpo": dict(
            trainer="grpo",
            steps=2,
            eval_every=1,
            eval_every_limit=1,
            options={
                "trainer": {
                    **RL,
                    **WARMUP,
                    "warmup_format": "boxed",
                    "beta": 0.04,
                    "sync_ref_model": True,
                    "ref_model_sync_steps": 1,
                    "dynamic_sampling": True,
                    "max_resample_rounds": 1,
                    "overlong_penalty": 0.5,
                    "overlong_buffer": 2,
                    "behaviour": "conciseness",
                    "behaviour_weight": 0.5,
                },
                "searcher": SEARCH,
            },
        ),
        "vpo": dict(
            trainer="vpo",
            steps=1,
            k="2",
            options={
                "trainer": {**RL, **WARMUP, "answers_per_rollout": 2, "draws": 4},
                "searcher": {"n": 4, "max_new_tokens": 4},
            },
        ),
        "vspo": dict(
            trainer="vspo",
            steps=1,
            options={"trainer": {**RL, "vector": vector, "betas": "0,4", "beta_unit": "absolute"}, "searcher": SEARCH},
        ),
        "rlaif": dict(trainer="rlaif", steps=1, options={"trainer": RL, "searcher": SEARCH}),
        "sft": dict(
            trainer="sft",
            steps=1,
            options={"trainer": {"max_target_tokens": 8, "samples_per_problem": 2}, "searcher": SEARCH},
        ),
        "evolve": dict(
            trainer="none",
            searcher="evolve",
            options={"searcher": {"calls": 4, "seeds": 2, "children": 1, "max_new_tokens": 4}},
        ),
    }


def logged_keys(folder: Path) -> set[tuple[str, str]]:
    """(section, key) for every key of a run folder's steps.jsonl and metrics.json."""
    keys = set()
    steps = folder / "steps.jsonl"
    for line in steps.read_text().splitlines() if steps.exists() else []:
        record = json.loads(line)
        stage = {"during": "search"}.get(record["stage"], record["stage"])
        keys |= {("line", k) if k in ("stage", "step") else (stage, k) for k in record}
    for key in json.loads((folder / "metrics.json").read_text()):
        prefix, _, rest = key.partition("/")
        section = "search" if prefix in PHASES else prefix if prefix in ("train", "warmup") else "summary"
        keys.add((section, key if section == "summary" else rest))
    return keys


def documented() -> dict[str, list[re.Pattern]]:
    """Per section, a pattern for each key in the first column of its tables: `<k>` and `<c>` stand for a number,
    any other `<placeholder>` for a name (which may hold "/": `behaviour/conciseness`). Format warm-up steps are SFT
    steps, so that section also takes SFT's keys."""
    patterns: dict[str, list[re.Pattern]] = {}
    sections = re.split(r"^## ", PAGE.read_text(), flags=re.M)[1:]
    for section in sections:
        name = (
            next(v for k, v in SECTIONS.items() if section.startswith(k))
            if any(section.startswith(k) for k in SECTIONS)
            else None
        )
        if name is None:
            continue
        cells = re.findall(r"^\| ((?:`[^`]+`(?:, )?)+) \|", section, re.M)
        keys = [k for cell in cells for k in re.findall(r"`([^`]+)`", cell)]
        patterns[name] = [re.compile(_pattern(k)) for k in keys]
        if name == "train":
            sft = section.split("### SFT", 1)[1]
            patterns["sft"] = [re.compile(_pattern(k)) for k in re.findall(r"^\| `([^`]+)` \|", sft, re.M)]
    patterns["warmup"] += patterns.pop("sft")
    return patterns


def _pattern(key: str) -> str:
    parts = re.split(r"(<[a-z]+>)", key)
    return "".join({"<k>": r"\d+", "<c>": r"\d+"}.get(p, ".+") if p.startswith("<") else re.escape(p) for p in parts)


def undocumented(keys: set[tuple[str, str]], patterns: dict[str, list[re.Pattern]]) -> list[str]:
    return sorted(
        f"{section}: {key}" for section, key in keys if not any(p.fullmatch(key) for p in patterns.get(section, []))
    )


@pytest.fixture(scope="module")
def keys(tmp_path_factory, plugins) -> set[tuple[str, str]]:
    out = tmp_path_factory.mktemp("metrics")
    vector = out / "vector.safetensors"
    SteeringVector(
        vector=torch.randn(64, generator=torch.Generator().manual_seed(0)),
        layer=1,
        model="tiny-random",
        behaviour="conciseness",
    ).save(vector)
    found = set()
    for name, settings in _runs(str(vector)).items():
        settings = {"k": "1,2", **settings}
        settings["options"] = {"task": {}, "trainer": {}, "searcher": {}, **settings["options"]}
        folder = run(
            RunConfig(model="tiny-random", limit=2, train_limit=4, threads=1, out=str(out / name), **settings),
            plugins=plugins,
            echo=lambda _: None,
        )
        assert json.loads((folder / "manifest.json").read_text())["status"] == "complete", name
        found |= logged_keys(folder)
    return found


def test_the_runs_log_what_the_page_is_about(keys):
    sections = {section for section, _ in keys}
    assert sections == {"search", "train", "warmup", "summary", "line"}
    assert {
        ("search", "pass@2"),
        ("search", "pooled_pass@2"),
        ("search", "solved@2"),
        ("search", "step"),
        ("train", "reward/overlong"),
        ("train", "dynamic_sampling/dropped_groups"),
        ("train", "ref_synced"),
        ("train", "steer_logratio"),
        ("train", "teacher_calls"),
        ("warmup", "well_formed_after"),
        ("summary", "sft/examples"),
        ("summary", "rlaif/teacher_calls"),
    } <= keys


def test_every_logged_key_is_documented(keys):
    assert undocumented(keys, documented()) == [], "add these keys to docs/reference/metrics.md"


def test_an_undocumented_key_is_found():
    patterns = documented()
    assert (
        undocumented(
            {
                ("search", "pass@16"),
                ("search", "mean_reward/behaviour/conciseness"),
                ("train", "time/backward"),
                ("summary", "sft/self_tokens"),
            },
            patterns,
        )
        == []
    )
    assert undocumented(
        {("train", "brand_new"), ("search", "pass@x"), ("summary", "train_loss"), ("warmup", "reward_mean")}, patterns
    ) == ["search: pass@x", "summary: train_loss", "train: brand_new", "warmup: reward_mean"]
