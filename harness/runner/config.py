"""What one run is: the settings `harness run` turns its flags (or an experiment file's row) into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")


# Bounds no real run needs to pass, checked before anything starts (a typo of 1e23 steps ran until killed).
MAX_THREADS = 1024
MAX_STEPS = 10_000_000


@dataclass
class RunConfig:
    task: str = "math"
    trainer: str = "grpo"  # "none" evaluates only
    searcher: str = "best-of-k"
    model: str = "smollm2-135m"
    preset: str = "quick"
    steps: int | None = None  # trainer's optimizer steps (None: the preset's)
    limit: int | None = None  # eval problems (None: the preset's)
    train_limit: int | None = None  # train problems (None: the preset's)
    k: str | None = None  # e.g. "1,4,16" (None: the preset's)
    seed: int = 0
    out: str = "runs"
    threads: int | None = None  # torch CPU threads (None: torch's default)
    # --set KIND.KEY=VALUE, by kind: task, trainer, searcher (and engine, only when given)
    options: dict[str, dict[str, Any]] = field(default_factory=lambda: {"task": {}, "trainer": {}, "searcher": {}})
    # training checkpoint every N optimizer steps ("5"), or once N minutes have passed since the last ("10m"), and
    # after the last step; 0: none. By time by default: a state written every step cost 4 s of a 23 s step on the
    # default model (1.6 GB), and would be many GB per step for a 1.5B model
    checkpoint_every: int | str = "10m"
    # a loadable model (Hugging Face format) every N optimizer steps, kept in <run>/checkpoints/step-N/; 0: none
    save_every: int = 0
    # --eval-every N: the searcher on the first eval_every_limit eval problems before training and after every N-th
    # training step, as "during" lines in steps.jsonl (harness/runner/during_training.py); 0: none
    eval_every: int = 0
    eval_every_limit: int = 8
    loggers: str = ""  # metric loggers beyond JSONL (always on), e.g. "tensorboard,mlflow"
    # a table of every N-th training step's completions to the loggers that take one (TensorBoard, W&B); 0: none
    log_completions_every: int = 10
    name: str | None = None  # the run folder's name under out (grids name cells by config); None: timestamped
    engine: str = "transformers"  # a registered rollout engine (`harness list`)
    engine_url: str = ""  # the engine's option url (--engine-url: a vLLM server)
    engine_weights_dir: str = ""  # its option weights_dir: a folder the server reads too (another machine)
    arm: str = ""  # the experiment file's arm this cell belongs to ([[arm]] tables); "" outside arms
    dtype: str = "float32"  # the policy's weights: float32, bfloat16 or float16 (trainer.autocast: mixed precision)
    # --rollout-dtype: the precision the engine samples and evaluates in; "auto": training rollouts in bf16 where the
    # device computes it natively and the trainer recomputes the old log-probs, every evaluation in the weights'
    # (harness/runner/precision.py); "": the weights' everywhere (runs from before "auto")
    rollout_dtype: str = "auto"
    save_model: bool = True  # a trained policy is saved to <run>/model/ (Hugging Face format, with a model card)
    push_to_hub: str = ""  # a hub repo id the saved policy is uploaded to when the run completes
    batch_size: int | None = None  # --batch-size: sequences the engine decodes together (None: the engine's default)
    model_revision: str = ""  # --model-revision: the hub revision (branch, tag, commit) of a hub model; "": latest
    # --reward MODULE:FN[=WEIGHT]: reward functions added to the task's vector (harness/reward_functions.py)
    rewards: list[str] = field(default_factory=list)
    # --plugin FILE.py|MODULE: local plugins registered before the run (harness/plugins/local.py)
    plugins: list[str] = field(default_factory=list)
    # --shard fsdp: under torchrun, the training state split over the processes (harness/runner/sharding.py); "": DDP
    shard: str = ""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}; choose one of {', '.join(DTYPES)}")
        # Sizes are checked here, before any plugin or model: `--train-limit 0` used to fail after the first
        # evaluation, `--checkpoint-every -1` after the model had loaded, each leaving a folder that said "running".
        self.save_every = positive_int(self.save_every, "--save-every", minimum=0)
        self.eval_every = positive_int(self.eval_every, "--eval-every", minimum=0)
        self.log_completions_every = positive_int(self.log_completions_every, "--log-completions-every", minimum=0)
        self.eval_every_limit = positive_int(self.eval_every_limit, "--eval-every-limit")
        for name in ("batch_size", "steps", "limit", "train_limit", "threads"):
            if getattr(self, name) is not None:
                setattr(self, name, positive_int(getattr(self, name), f"--{name.replace('_', '-')}"))
        if self.threads is not None and self.threads > MAX_THREADS:  # 100000 segfaulted in torch's thread pool
            raise ValueError(f"--threads {self.threads}: at most {MAX_THREADS}")
        if self.steps is not None and self.steps > MAX_STEPS:  # 1e23 ran until killed
            raise ValueError(f"--steps {self.steps}: at most {MAX_STEPS}")
        self.checkpoint_every = checkpoint_interval(self.checkpoint_every)
        if self.rollout_dtype not in ("", "auto", *DTYPES):
            raise ValueError(f"unknown rollout dtype {self.rollout_dtype!r}; choose one of auto, {', '.join(DTYPES)}")
        if self.rollout_dtype == "float32" and self.dtype != "float32":
            raise ValueError(
                f"--rollout-dtype float32 needs float32 weights (--dtype is {self.dtype}): sampling "
                "cannot be more precise than the weights"
            )
        for key in ("rewards", "plugins"):  # a file may give one string; the manifest keeps a list
            value = getattr(self, key)
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
                raise ValueError(f"{key} should be a list of strings, got {getattr(self, key)!r}")
            setattr(self, key, [v.strip() for v in value])

    def engine_options(self) -> dict[str, Any]:
        """The engine's options: --engine-url and --engine-weights-dir, then --set engine.KEY=VALUE."""
        given = {"url": self.engine_url, "weights_dir": self.engine_weights_dir}
        return {**{k: v for k, v in given.items() if v}, **self.options.get("engine", {})}


def checkpoint_interval(value: Any) -> int | str:
    """``--checkpoint-every``: steps (an int >= 0; 0: never) or minutes ("10m", "2.5m" > 0), as given; otherwise one
    line saying what it takes."""
    text = str(value).strip()
    if isinstance(value, str) and text.endswith("m"):
        try:
            minutes = float(text[:-1])
        except ValueError:
            minutes = float("nan")
        if not 0 < minutes < 1e6:  # (a NaN fails too)
            raise ValueError(f"--checkpoint-every should be steps (an integer >= 0) or minutes like 10m, got {value!r}")
        return text
    try:
        return positive_int(value, "--checkpoint-every", minimum=0)
    except ValueError:
        raise ValueError(
            f"--checkpoint-every should be steps (an integer >= 0) or minutes like 10m, got {value!r}"
        ) from None


def positive_int(value: Any, what: str, minimum: int = 1) -> int:
    """``value`` (an int, or its digits as a string) as an int >= ``minimum``; otherwise one line naming ``what``."""
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not text.isdigit() or int(text) < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{what} should be {kind}, got {value!r}")
    return int(text)
