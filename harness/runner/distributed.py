"""Data-parallel training: this process's place among the processes of one run (torchrun / accelerate launch).

``harness run`` started by ``torchrun --nproc_per_node N`` or ``accelerate launch --num_processes N -m harness run``
is N processes; each reads RANK / WORLD_SIZE from its environment. How a GRPO step is split among them:

- every rank draws the same problems for the step (same seed) and rolls out its contiguous block of them;
- the blocks' completions and scores are gathered, so every rank holds the whole batch: advantages, loss normalisers
  (rows, tokens) and metrics are those of the whole batch, exactly as one process would compute them;
- each rank's loss covers its own rows but is normalised by the whole batch's totals; accelerate's
  DistributedDataParallel averages the gradients, so the loss is scaled by the world size and the synchronised
  gradient is the whole batch's gradient;
- with ``--shard fsdp`` the update runs through an FSDP2-sharded copy of the policy instead of DDP (each rank holds
  1/N of the trained weights, gradients and optimizer state; harness/runner/sharding.py), whose trained weights are
  gathered into the plain policy after every step; accelerate's own FSDP / DeepSpeed configs are refused
  (SHARDING_ERROR);
- evaluation is split too when the searcher declares ``SearcherCapabilities.data_parallel`` (best-of-k, evolve): each
  rank takes its contiguous ``share`` of the problems and every rank gathers the results (else rank 0 evaluates
  alone while the others wait);
- rank 0 alone writes the run folder and saves checkpoints (under ``--shard fsdp`` every rank first gathers the
  optimizer state with it); the others restore from them on resume.

A single process never imports accelerate or touches torch.distributed: ``Parallel()`` is the identity.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

# Ranks other than 0 wait in the first collective of training while rank 0 runs the "before" evaluation, which can
# take hours on a big eval set; torch's default 30 min would kill them. A rank that dies is noticed by torchrun /
# accelerate, which stops the others, so a long timeout does not mean a long hang.
TIMEOUT = timedelta(hours=int(os.environ.get("HARNESS_DIST_TIMEOUT_H", "12")))


# accelerate's FSDP plugin would wrap the policy the rollouts generate with, whose forward passes differ in number
# between ranks; the harness shards a training copy itself (harness/runner/sharding.py), asked for with --shard.
SHARDING_ERROR = (
    "accelerate's FSDP / DeepSpeed configs are not used: launch plain data parallel (torchrun, or "
    "accelerate launch --multi_gpu) and add --shard fsdp to shard the training state"
)
SHARDINGS = ("", "fsdp")  # --shard: none (DDP), or torch's FSDP2


def world_size_from_env() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


class Parallel:
    """This process's rank in a data-parallel run; the identity when there is one process."""

    def __init__(self, world_size: int | None = None) -> None:
        """``world_size`` 1: this process alone whatever the launcher says (an SFT warm-up every rank runs whole)."""
        self.world_size = world_size_from_env() if world_size is None else world_size
        self.rank = int(os.environ.get("RANK", "0")) if self.world_size > 1 else 0
        self.accelerator = None
        self.shard = ""  # "fsdp": the update through a sharded copy (use_sharding)
        if self.world_size > 1:
            import torch
            from accelerate import Accelerator
            from accelerate.utils import InitProcessGroupKwargs

            # accelerate picks the backend: nccl on GPUs; gloo on CPU, which it only considers when told `cpu`.
            self.accelerator = Accelerator(
                cpu=not torch.cuda.is_available(), kwargs_handlers=[InitProcessGroupKwargs(timeout=TIMEOUT)]
            )
            self.rank = self.accelerator.process_index
            if self.accelerator.distributed_type.name in ("FSDP", "DEEPSPEED"):
                raise ValueError(SHARDING_ERROR)

    def use_sharding(self, shard: str) -> None:
        """``--shard``: "" (data parallel, full copies) or "fsdp"; sharding needs several processes."""
        if shard not in SHARDINGS:
            raise ValueError(f"--shard {shard!r}: expected fsdp")
        if shard and self.world_size == 1:
            raise ValueError(
                f"--shard {shard} splits the training state over processes: launch with torchrun "
                "--nproc_per_node N (N >= 2)"
            )
        self.shard = shard

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def device(self):
        import torch

        if self.accelerator is not None:
            return self.accelerator.device
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def block(self, n: int) -> slice:
        """This rank's contiguous share of ``n`` items (n must divide evenly: every rank does the same work)."""
        if n % self.world_size:
            raise ValueError(f"data-parallel: {n} items cannot be split evenly over {self.world_size} processes")
        size = n // self.world_size
        return slice(self.rank * size, (self.rank + 1) * size)

    def share(self, n: int) -> slice:
        """This rank's contiguous part of ``n`` items of work that need not split evenly (samples to draw for SFT
        targets, evaluation problems): the first ``n % world_size`` ranks take one item more."""
        size, extra = divmod(n, self.world_size)
        start = self.rank * size + min(self.rank, extra)
        return slice(start, start + size + (self.rank < extra))

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank (pickled: completions and scores, not weights)."""
        if self.world_size == 1:
            return [obj]
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, obj)
        return parts

    def sum(self, values: dict[str, float]) -> dict[str, float]:
        """Each value summed over the ranks (one all-reduce for the whole dict)."""
        if self.world_size == 1 or not values:
            return values
        import torch

        tensor = torch.tensor(list(values.values()), dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(tensor)
        return dict(zip(values, tensor.tolist(), strict=True))

    def prepare(self, model, optimizer):
        """The model to run the update through and its optimizer; unchanged in one process. DDP wraps ``model``
        (sharing its parameters) and broadcasts rank 0's weights, so every rank starts from the same ones;
        ``--shard fsdp`` returns a sharded copy and an optimizer over it that holds ``optimizer``'s state, split."""
        if self.accelerator is None:
            return model, optimizer
        if self.shard:
            from harness.runner import sharding

            trained = sharding.sharded_copy(model)
            return trained, sharding.moved_optimizer(optimizer, model, trained)
        return self.accelerator.prepare(model, optimizer)

    def gather_weights(self, trained, model) -> None:
        """After an optimizer step: the sharded copy's trained weights into the plain policy (the rollouts' and
        checkpoints'); nothing to do when they share parameters (one process, DDP)."""
        if self.shard:
            from harness.runner import sharding

            sharding.gather_into(trained, model)

    def optimizer_state(self, optimizer) -> dict[str, Any]:
        """The state a checkpoint saves: gathered whole under ``--shard fsdp`` (every rank must call it)."""
        if self.shard:
            from harness.runner import sharding

            return sharding.full_optimizer_state(optimizer)
        return optimizer.state_dict()

    def agree(self, decision: bool) -> bool:
        """Rank 0's ``decision`` on every rank (whether a checkpoint is due by the clock: one the ranks must take
        together under --shard fsdp)."""
        return bool(self.broadcast(decision))

    def no_sync(self, model, last: bool):
        """Skip the gradient all-reduce on every micro-batch but the last (they accumulate locally first). A
        sharded copy reduce-scatters every micro-batch: its gradients stay sharded, 1/N of the memory."""
        if self.accelerator is None or last or self.shard:
            return contextlib.nullcontext()
        return self.accelerator.no_sync(model)

    def backward(self, loss) -> None:
        # DDP averages gradients over ranks; the loss is normalised by the whole batch, so scale to get its sum.
        if self.accelerator is None:
            loss.backward()
        else:
            self.accelerator.backward(loss * self.world_size)

    def clip_grad_norm_(self, model, max_norm: float):
        import torch

        if self.accelerator is None:
            return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if self.shard:
            from harness.runner import sharding

            return sharding.clip_grad_norm_(model, max_norm)
        return self.accelerator.clip_grad_norm_(model.parameters(), max_norm)

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (the run folder's name)."""
        if self.world_size == 1:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()

    def close(self, finished: bool = True) -> None:
        """Destroy the process group. ``finished`` (the run ended without an error on this rank): first wait for
        every rank, so none tears down its connections while another still sends over them; a follower that left
        early aborted now and then (gloo's ``std::terminate`` at exit) while rank 0 was still writing a checkpoint,
        which took rank 0 down with it. A rank that failed does not wait: the launcher stops the others."""
        if self.accelerator is not None:
            if finished:
                self.accelerator.wait_for_everyone()
            self.accelerator.end_training()
            self.accelerator = None


_current: Parallel | None = None


@contextlib.contextmanager
def alone():
    """Within it, ``current()`` is this process alone: rank 0 evaluating during training (``--eval-every``) while
    the other ranks wait in training's next collective, so a searcher that splits over ranks takes every problem."""
    global _current
    saved, _current = _current, Parallel(world_size=1)
    try:
        yield
    finally:
        _current = saved


def current() -> Parallel:
    """The process's Parallel, created on first use (the process group is per process, like torch's)."""
    global _current
    if _current is None:
        _current = Parallel()
    return _current


def generate_shared(engine: Any, prompts: Sequence[Any], params: Any, **kwargs: Any) -> list[Any]:
    """``engine.generate`` with the prompts shared out over the ranks and the completions gathered on every rank,
    prompt-major with the whole list's prompt indices: what one process returns, since every engine seeds a sample
    by (seed, prompt, sample index), not by its place in the batch."""
    dp = current()
    if dp.world_size == 1:
        return engine.generate(prompts, params, **kwargs)
    mine = dp.share(len(prompts))
    done = engine.generate(list(prompts[mine]), params, **kwargs) if mine.stop > mine.start else []
    return [
        dataclasses.replace(c, prompt_index=c.prompt_index + start)
        for start, part in dp.gather((mine.start, done))
        for c in part
    ]


class SharedEngine:
    """An engine whose every ``generate`` is shared out over the ranks (``generate_shared``): the samples and rewrites
    SFT's targets are built from, each rank sampling its part of the prompts."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @property
    def capabilities(self) -> Any:
        from harness.types import EngineCapabilities, capabilities_of

        return capabilities_of(self.engine, EngineCapabilities)

    def generate(self, prompts: Sequence[Any], params: Any, **kwargs: Any) -> list[Any]:
        return generate_shared(self.engine, prompts, params, **kwargs)
