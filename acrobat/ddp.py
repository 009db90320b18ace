"""Data-parallel training across processes: ``acrobat train MODEL --ddp`` under ``torchrun`` (gloo on CPU).

Every process reads the same global batches (the same seeded shuffle);
``shard_by_nodes`` splits each by node count, so the processes do similar
work, and each process runs its shard through acrobat (one batched run).
``torch.nn.parallel.DistributedDataParallel`` all-reduces the gradients
(sparse embedding gradients included: gloo all-reduces sparse tensors);
each process's loss is its trees' summed losses times ``world / global
trees``, so the all-reduced mean is the gradient of the whole global batch's
loss normalised by its tree count, as one process would compute it.

- Parameters a shard does not reach (a shard of one-word sentences never
  runs the internal-node cell): ``find_unused_parameters=True``; DDP finds
  them from the autograd graph each step and all-reduces a zero for them,
  so they get the single-process gradient (a weight no shard reaches keeps
  ``grad is None``).
- A global batch with fewer trees than processes leaves some process
  without a shard: it skips the step, and
  ``torch.distributed.algorithms.Join`` shadows its collectives
  (``DDPTrainer.join``); after that epoch every process takes rank 0's
  weights and optimizer state (``sync_from_lead``), so they go on alike.
- Timing per step: ``straggler_ms``, the time a process waits at the
  first gradient all-reduce for the slowest process's forward (from every
  process's forward times, gathered at the end), and ``allreduce_ms``, from
  the first gradient bucket's all-reduce launch to the last one's
  completion (a DDP communication hook; it includes waiting for the slower
  process's backward).
"""

import os
import time
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel

from acrobat.data.tree import Tree


def shard_by_nodes(batch: Sequence[Tree], world: int) -> list[list[Tree]]:
    """``batch`` split into ``world`` shards of similar total node count: trees by size, largest first,
    each to the shard with the fewest nodes so far (ties: the lower rank). Each shard keeps the trees in
    their order in ``batch``; a shard may be empty when ``batch`` has fewer trees than ``world``."""
    loads = [0] * world
    owner: dict[int, int] = {}
    for i in sorted(range(len(batch)), key=lambda i: -batch[i].size()):
        r = min(range(world), key=lambda r: (loads[r], r))
        owner[i] = r
        loads[r] += batch[i].size()
    return [[t for i, t in enumerate(batch) if owner[i] == r] for r in range(world)]


class _Forward(nn.Module):
    """The module DDP wraps: ``forward(trees)`` is the batched node-logits function over ``params``.

    DDP expects a sparse gradient only for the weight of an ``nn.Embedding(sparse=True)`` (it puts any other
    parameter's gradient into a dense bucket): each table in ``sparse`` is registered first as the weight of
    such a module (the same ``Parameter``), so DDP all-reduces its sparse gradient as one.
    """

    def __init__(self, params: nn.Module, fn: Callable[[list[Tree]], Tensor], sparse: Sequence[nn.Parameter]):
        super().__init__()
        self.tables = nn.ModuleList()
        for table in sparse:
            holder = nn.Embedding(1, 1, sparse=True)
            holder.weight = table
            self.tables.append(holder)
        self.params = params
        self.fn = fn

    def forward(self, trees: list[Tree]) -> Tensor:
        return self.fn(trees)


class DDPTrainer:
    """This process's part of data-parallel training: its rank, its shard of each global batch, the DDP
    model, and per-step timing (forward times, gathered across processes at the end for the straggler
    wait; the all-reduce span from a communication hook).

    Raises (``from_env``):
        RuntimeError: not started by ``torchrun`` (no ``RANK``/``WORLD_SIZE`` in the environment).
    """

    def __init__(self, rank: int, world: int):
        self.rank, self.world = rank, world
        self.model: DistributedDataParallel | None = None
        self._span: list[float] = []  # this step's all-reduce launch and completion times (s)
        self.forward_ms: list[float] = []  # per step this process ran, its forward time
        self.allreduce_ms: list[float] = []  # per step, first bucket launch to last completion

    @classmethod
    def from_env(cls) -> "DDPTrainer":
        """Join the process group ``torchrun`` describes (gloo; NCCL when CUDA is there)."""
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            raise RuntimeError("--ddp needs torchrun: torchrun --standalone --nproc_per_node=2 -m acrobat train "
                               "MODEL --ddp ...")
        if not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        return cls(dist.get_rank(), dist.get_world_size())

    # -- the model -------------------------------------------------------------
    def wrap(self, params: nn.Module, fn: Callable[[list[Tree]], Tensor],
             sparse: Sequence[nn.Parameter] = ()) -> Callable[[list[Tree]], Tensor]:
        """``fn`` run through DDP over ``params`` (broadcast from rank 0 first, as DDP does); the tables in
        ``sparse`` get sparse gradients from ``fn`` (acrobat's ``sparse_grads``)."""
        self.model = DistributedDataParallel(_Forward(params, fn, sparse), find_unused_parameters=True)
        self.model.register_comm_hook(self, _timed_allreduce)
        return self.model

    def shard(self, batch: Sequence[Tree]) -> tuple[list[Tree], float]:
        """This process's shard of the global ``batch``, and its loss scale ``world / len(batch)``."""
        return shard_by_nodes(batch, self.world)[self.rank], self.world / len(batch)

    def join(self) -> Join:
        """The context for an epoch: a process whose last global batch left it no shard shadows the
        others' DDP collectives (only the last global batch of an epoch can have fewer trees than processes,
        when the batch size is at least the process count)."""
        assert self.model is not None
        return Join([self.model])

    # -- timing ----------------------------------------------------------------
    def account(self, forward_ms: float) -> None:
        """Keep this step's forward time and all-reduce span (ms)."""
        self.forward_ms.append(forward_ms)
        self.allreduce_ms.append((max(self._span) - min(self._span)) * 1e3 if self._span else 0.0)
        self._span = []

    def timing(self) -> dict[str, float]:
        """Per step, averaged over steps and processes (ms): ``straggler_ms``, how long a process waits at
        the first gradient all-reduce for the slowest process's forward (the slowest forward of the step
        minus its own), and ``allreduce_ms``. A collective: every process calls it."""
        runs: list[Any] = [None] * self.world
        dist.all_gather_object(runs, (self.forward_ms, self.allreduce_ms))
        waits, spans = [], []
        for s in range(max(len(f) for f, _ in runs)):
            fwd = [f[s] for f, _ in runs if s < len(f)]
            waits += [max(fwd) - x for x in fwd]
            spans += [a[s] for _, a in runs if s < len(a)]
        return {"straggler_ms": sum(waits) / max(len(waits), 1), "allreduce_ms": sum(spans) / max(len(spans), 1)}

    def barrier(self) -> None:
        dist.barrier()

    def sync_from_lead(self, params: nn.Module, optimizers: Sequence[torch.optim.Optimizer]) -> None:
        """Rank 0's weights and optimizer state on every process (a collective). Called after an epoch whose
        last global batch left some process without a shard: that process skipped the step under ``Join``
        (DDP syncs the weights when the join ends, not the optimizer's state). Rank 0 never lacks a shard:
        ``shard_by_nodes`` gives it the first tree."""
        with torch.no_grad():
            for p in params.parameters():
                dist.broadcast(p.data, src=0)
        for opt in optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    for v in opt.state[p].values():
                        if isinstance(v, torch.Tensor):
                            dist.broadcast(v, src=0)

    def agree(self, flag: bool) -> bool:
        """Rank 0's ``flag`` on every process (a broadcast: a collective, called by all outside ``join``)."""
        t = torch.tensor([int(flag)])
        dist.broadcast(t, src=0)
        return bool(t.item())

    def describe(self) -> dict:
        return {"world": self.world, "backend": dist.get_backend(), "find_unused_parameters": True,
                **self.timing()}

    def close(self) -> None:
        """Leave the process group once every process is done (a process that left while another still ran a
        collective aborted gloo's threads: ``terminate called without an active exception``)."""
        dist.barrier()
        dist.destroy_process_group()


def _timed_allreduce(state: DDPTrainer, bucket: dist.GradBucket) -> torch.futures.Future[Tensor]:
    """DDP's all-reduce of one gradient bucket (the mean over processes), with its launch and completion
    times kept in ``state._span``. (This module has no ``from __future__ import annotations``: DDP checks
    the hook's annotations as objects.)"""
    state._span.append(time.perf_counter())
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()

    def done(f: torch.futures.Future) -> Tensor:
        state._span.append(time.perf_counter())
        return f.value()[0].div_(state.world)  # after the all-reduce: a sparse bucket cannot be divided in place before

    return fut.then(done)
