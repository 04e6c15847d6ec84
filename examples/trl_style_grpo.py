"""GRPO from a script or a notebook, as a TRL user writes it: a prompt-only conversational ``datasets.Dataset``, two
reward functions in TRL's form, TRL's option names, then the report. Each block below is a notebook cell.

    python examples/trl_style_grpo.py                     # SmolLM2-135M, 20 steps: a few minutes on a CPU
    python examples/trl_style_grpo.py tiny-random 2       # the tiny model, 2 steps: seconds (the test runs this)
"""

from __future__ import annotations

import sys

import datasets

import harness

# %% The data: prompts only (no reference answer), in TRL's conversational format, with a column of its own.
rows = [
    {
        "prompt": [
            {"role": "system", "content": "Answer in one short sentence."},
            {"role": "user", "content": f"Name a colour that goes with {thing}."},
        ],
        "thing": thing,
    }
    for thing in ["the sea", "grass", "snow", "fire", "night", "sand", "a lemon", "a rose", "ash", "the sky"]
]
dataset = datasets.Dataset.from_list(rows)


# %% Two reward functions in TRL's form: prompts and completions (as conversations), the dataset's columns by name.
def brevity(prompts, completions, **kwargs) -> list[float]:
    return [1.0 / (1 + len(c[0]["content"].split())) for c in completions]


def mentions_thing(prompts, completions, thing, **kwargs) -> list[float | None]:
    # None: not applicable (TRL's convention), left out of this component's mean and of the summed reward
    texts = [c[0]["content"].lower() for c in completions]
    return [None if t == "ash" else float(t.split()[-1] in text) for text, t in zip(texts, thing, strict=True)]


# %% Train: TRL's option names (learning_rate, num_generations, max_completion_length) work as the harness's own.
def main(model: str = "smollm2-135m", steps: int = 20, out: str = "runs", tiny: bool = False) -> harness.RunResult:
    small = {"limit": 2, "train_limit": 4, "k": 1, "threads": 1, "save_model": True} if tiny else {}
    result = harness.train(
        model,
        dataset,
        reward_funcs=[brevity, mentions_thing],
        success="brevity>=0.5",  # what pass@k counts: a reply of one word
        steps=steps,
        out=out,
        learning_rate=1e-4,
        num_generations=2 if tiny else 8,
        max_completion_length=4 if tiny else 32,
        prompts_per_step=1 if tiny else 4,
        searcher_options={"n": 2, "max_new_tokens": 4} if tiny else None,
        **small,
    )
    print(result.run_dir, {k: v for k, v in result.metrics.items() if k.startswith("train/reward")})
    # %% The report: the same page `harness report` writes
    print("report:", result.report())
    return result


if __name__ == "__main__":
    model = sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m"
    main(model, int(sys.argv[2]) if len(sys.argv) > 2 else 20, tiny=model == "tiny-random")
