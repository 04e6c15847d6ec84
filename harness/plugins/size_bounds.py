"""The upper ends every built-in plugin's size options share, each with why it is that number: far past anything a
real run needs, well short of what takes a machine down. Each option declares its bounds where it is written
(``metadata={"bounds": Bounds(1, COUNT)}`` on a config field, ``Annotated[int, Bounds(1, COUNT)]`` on a factory's
parameter); the converter (harness/plugins/options.py) refuses a value outside them in one line, before the model
loads. Before, ``--set trainer.group_size=1e12`` (or evolve's ``seeds``, ``islands``) grew past 3 GB in ten
seconds, and ``--set searcher.seed=1e23`` ran to the end, while ``trainer.seed=1e23`` failed after the model had
loaded. tests/test_size_bounds.py holds every int option of every built-in to an upper end.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.plugins.option_help import Bounds

# Seeds: numpy's and most samplers' range (np.random.seed, RandomState and torch's CUDA generators take 32 bits); the
# run-level --seed has the same range (harness/runner/run_settings.py), and SQLite's integers end at 2^63 - 1.
MAX_SEED = (1 << 32) - 1
SEED = Bounds(0, MAX_SEED)  # every option named seed or *_seed: exactly these bounds

# Samples, candidates, rows and problems per step, call or batch (n, group_size, seeds, children, prompts_per_step,
# micro_batch, ...): pass@k papers stop near k = 1024, and samples are kept until scored: an n of 1e20 grew to 18 GB
# before the kernel killed the process.
COUNT = 100_000

# A generation budget in tokens (max_new_tokens, a target's tokens, overlong_buffer): the longest contexts in common
# use are near 128k tokens.
TOKENS = 131_072

# A model's whole context (vLLM's max_model_len): past the longest any model offers (10M tokens, Llama 4 Scout).
CONTEXT = 1 << 24

# Tokens generated per problem over a whole search (evolve's tokens budget): the most calls at the longest budget.
TOKEN_BUDGET = COUNT * TOKENS

# Characters of text (a prompt's excerpts, a length target): twice the longest budget at ~4 characters a token.
CHARS = 8 * TOKENS

# Optimizer steps and anything counted in them (warm-up steps, sync and check intervals): as --steps
# (harness/runner/config.py MAX_STEPS: 1e23 steps ran until killed).
STEPS = 10_000_000

# Threads and requests in flight (workers, max_concurrency): as --threads (harness/runner/config.py MAX_THREADS:
# 100000 segfaulted in torch's thread pool); past the cores of any machine.
THREADS = 1024

# Problems a task generates before its split (pool_size): a million is minutes to generate and about a GB held.
POOL = 1_000_000

# A LoRA rank: at most a layer's width, and no model's is past 65,536.
RANK = 65_536

# Memory in MiB (one sandboxed program's): 1 TiB, past any machine this runs on.
MEMORY_MB = 1 << 20


def bounded(default: Any, low: float | Bounds | None, high: float | None = None) -> Any:
    """A config field with its bounds, ``metadata={"bounds": Bounds(low, high)}`` in short, so that the option's
    help still fits beside it: ``group_size: int = bounded(8, 1, COUNT)  # G: ...``; ``bounded(0, SEED)``."""
    bounds = low if isinstance(low, Bounds) else Bounds(low, high)
    return dataclasses.field(default=default, metadata={"bounds": bounds})
