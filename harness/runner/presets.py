"""Named option bundles for the built-in plugins. ``quick`` is sized so `make demo` finishes on a 2-core CPU in
minutes; ``full`` is a starting point for a GPU. Explicit flags and ``--set`` override any preset value."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "limit": 16,  # eval problems
        "train_limit": 64,
        "task": {},
        "trainer": {"grpo": {"steps": 10, "prompts_per_step": 2, "group_size": 8, "max_new_tokens": 96,
                             "temperature": 1.0, "lr": 5e-5},
                    # VPO: G=4 rollouts of M=4 answers = 16 candidates per prompt, as many as GRPO's 2 x 8 rollouts
                    "vpo": {"steps": 4, "prompts_per_step": 2, "group_size": 4, "answers_per_rollout": 4,
                            "max_new_tokens": 96, "temperature": 1.0, "lr": 5e-5, "warmup_steps": 2,
                            "warmup_samples": 4,
                            # rollouts of M answers are long: 8 rows of ~700 tokens took 13.7 GB in one backward
                            "micro_batch": 2},
                    # VSPO builds a conciseness vector in the run (16 problems) unless trainer.vector is set
                    "vspo": {"steps": 8, "prompts_per_step": 2, "group_size": 8, "max_new_tokens": 96,
                             "temperature": 1.0, "lr": 5e-5, "behaviour": "conciseness", "vector_prompts": 16},
                    "rlaif": {"steps": 8, "prompts_per_step": 2, "group_size": 8, "max_new_tokens": 96,
                              "temperature": 1.0, "lr": 5e-5, "behaviour": "conciseness"},
                    "sft": {"steps": 8, "batch_size": 4, "lr": 2e-5}},
        "searcher": {"best-of-k": {"n": 4, "k": "1,4", "max_new_tokens": 96, "temperature": 1.0},
                     # 16 model calls per problem: 4 seeds (best-of-k's own first 4 samples) + 3 generations of 4
                     "evolve": {"seeds": 4, "children": 4, "calls": 16, "k": "1,4,8,16", "max_new_tokens": 96,
                                "temperature": 1.0, "top": 1, "diverse": 1, "max_chars": 1200}},
    },
    "full": {
        "limit": 500,
        "train_limit": None,
        "task": {},
        "trainer": {"grpo": {"steps": 200, "prompts_per_step": 16, "group_size": 8, "max_new_tokens": 512,
                             "lr": 1e-6, "micro_batch": 16},
                    "vpo": {"steps": 200, "prompts_per_step": 16, "group_size": 8, "answers_per_rollout": 4,
                            "max_new_tokens": 512, "lr": 1e-6, "micro_batch": 16, "warmup_steps": 50}},
        "searcher": {"best-of-k": {"n": 16, "k": "1,4,16", "max_new_tokens": 512},
                     "evolve": {"seeds": 8, "children": 8, "calls": 64, "k": "1,4,16,64", "max_new_tokens": 512,
                                "islands": 4, "top": 2, "diverse": 2, "max_chars": 3000}},
    },
}


def preset_options(preset: str, kind: str, name: str) -> dict[str, Any]:
    """The preset's options for plugin ``name`` of ``kind`` (empty for plugins the preset does not know)."""
    return dict(get_preset(preset)[kind].get(name, {}))


def get_preset(preset: str) -> dict[str, Any]:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; available: {', '.join(PRESETS)}")
    return PRESETS[preset]
