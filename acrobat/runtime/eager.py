"""The eager backend: each static block as ``torch.func.vmap`` of its per-instance function, run op by op (§5).

Explicit gathers (§5.2) and no arena: every output is a fresh tensor, out
of place, so autograd can run ``backward`` through a batched run
(training). The compiled backend (``acrobat.runtime.compiled``) runs a
block through ``EagerKernel`` when TorchInductor cannot compile it.

``eager-accum`` (``EagerBackend(accumulate=True)``, what ``auto`` runs while
autograd records) is the training path: ``TracedKernel`` runs each block's
batched aten graph, traced once per argument signature, instead of ``vmap``,
and gathers go through ``acrobat.runtime.accumulate`` (backward adds gradient
rows into one buffer per large source output). Issue 19; measured in
BENCHMARKS.md ("Training").
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, ContextManager

import torch
import torch.utils._pytree as pytree
from torch.func import vmap

from acrobat.runtime.accumulate import accumulating_gather
from acrobat.runtime.dfg import Group
from acrobat.runtime.gather import columns, gather
from acrobat.runtime.lookup import sparse_on
from acrobat.runtime.plan import BlockCode, RowSpec, Tracer, flatten_forms
from acrobat.runtime.remembered import ChoiceMemory
from acrobat.runtime.stats import timed
from acrobat.runtime.threads import ThreadPolicy
from acrobat.runtime.tier import TierChoice

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime


class EagerKernel:
    """A block as ``torch.func.vmap`` over its batched parameters, run op by op; explicit gathers.

    Shared parameters get ``in_dims=None``: passed once, not copied per
    instance (parameter reuse, §5.1). ``accumulate``: gathers through
    ``acrobat.runtime.accumulate`` (backward adds gradient rows into one
    buffer per source output instead of a zero-filled copy per gather).
    """

    def __init__(self, block: BlockCode, batched: Callable[..., tuple[torch.Tensor, ...]] | None = None,
                 accumulate: bool = False):
        self.block = block
        self.accumulate = accumulate
        dims = (0,) * len(block.params) + (None,) * len(block.shared_slots)
        # the batched call: vmap of the block's function, or one a batching rule gives (acrobat.runtime.batching)
        self.batched = batched or vmap(block.fn, in_dims=dims, randomness="different")

    def __call__(self, g: Group, rt: Runtime) -> tuple[torch.Tensor, ...]:
        args = self.arguments(g, rt)
        return timed(rt.stats, "kernel_ms", rt.sync, lambda: self.batched(*args, *rt.shared[self.block.id]))

    def arguments(self, g: Group, rt: Runtime) -> list[torch.Tensor]:
        """The launch's batched arguments, ``(B, ...)`` each, in parameter order (explicit gathers)."""
        handles, hosts = columns(g, rt.device)
        if handles is None:
            gathered = iter(())
        elif self.accumulate:
            gathered = iter(timed(rt.stats, "gather_ms", rt.sync, lambda: [accumulating_gather(rt, h) for h in handles]))
        else:
            gathered = iter(timed(rt.stats, "gather_ms", rt.sync, lambda: [gather(rt.table, h, rt.device)
                                                                           for h in handles]))
        return [next(gathered) if h is None else h for h in hosts]


class TracedKernel(EagerKernel):
    """``EagerKernel`` whose launches under autograd run the block's batched aten graph instead of ``vmap``.

    Per argument signature (per-instance shapes and dtypes of the batched arguments, the shared
    arguments' shapes, dtypes and which require grad, whether lookups give sparse gradients, and
    torch's default dtype, which constants made in the block take) the
    block is traced once through ``vmap`` into an aten graph with a symbolic batch size
    (``trace(..., store=False)``, ``acrobat.codegen.kernels.trace_block``), which then runs eagerly,
    op by op, for every batch size: autograd records the same operators as through ``vmap`` (the
    same gradients), without ``vmap``'s cost per operator and launch (about 0.5 ms a launch of a
    three-operator block under grad on a loaded 2-core machine, half of its forward and backward).
    Horizontally fused matmuls run weight by weight in the graph (``acrobat.analysis.fusion.unfused``).
    A launch of one row, launches without grad mode, and a block that cannot be traced run through
    ``vmap`` (``EagerKernel``).
    """

    def __init__(self, block: BlockCode, trace: Tracer):
        super().__init__(block, accumulate=True)
        self.trace = trace
        self.graphs: dict[tuple, Callable[..., tuple[torch.Tensor, ...]]] = {}
        self.untraceable = False
        self.run_shared: tuple[int, list, tuple] = (0, [], ())  # run serial, shared leaves, their signature

    def __call__(self, g: Group, rt: Runtime) -> tuple[torch.Tensor, ...]:
        if self.untraceable or not torch.is_grad_enabled() or g.size() < 2:
            return super().__call__(g, rt)
        args = self.arguments(g, rt)
        shared = rt.shared[self.block.id]
        serial, leaves, sig = self.run_shared
        if serial != rt.serial:  # the shared arguments' leaves and signature, once per run
            leaves = pytree.tree_leaves(flatten_forms(shared)[0])
            sig = (sparse_on(), rt.device, torch.get_default_dtype(),
                   tuple((tuple(x.shape), x.stride(), x.dtype, x.requires_grad) if isinstance(x, torch.Tensor) else x
                         for x in leaves))
            self.run_shared = (rt.serial, leaves, sig)
        key = self.signature(args, sig)
        fn = self.graphs.get(key)
        if fn is None:
            try:
                fn = self.graphs[key] = self.graph(args, shared, leaves, rt)
            except Exception:  # noqa: BLE001 - vmap runs it (and reports a real failure with its source line)
                self.untraceable = True
                return timed(rt.stats, "kernel_ms", rt.sync, lambda: self.batched(*args, *shared))
        return timed(rt.stats, "kernel_ms", rt.sync, lambda: tuple(fn(*args, *leaves)))

    def signature(self, args: list[torch.Tensor], shared_sig: tuple) -> tuple:
        """The key of a launch's graph: its batched arguments' per-instance specs and ``shared_sig`` (the shared
        arguments' signature, sparse lookups, device and default dtype)."""
        return tuple(RowSpec.of(a) for a in args), shared_sig

    def graph(self, args: list[torch.Tensor], shared: list[Any], leaves: list[Any],
              rt: Runtime) -> Callable[..., tuple[torch.Tensor, ...]]:
        """The callable a new signature's launches run, ``fn(*args, *leaves) -> tuple of (B, ...)``: the block's
        batched aten graph, traced for the launch's arguments ``args`` and shared arguments ``shared``
        (``leaves``: their pytree leaves, what the graph takes).

        Raises:
            Exception: the block cannot be traced (the launch then runs through ``vmap``).
        """
        rows = [RowSpec.of(a) for a in args]
        return self.trace(self.block, rows, shared, False, rt.device, store=False).gm


class RowLoopKernel(EagerKernel):
    """``EagerKernel``, falling back to running the block row by row (and stacking the rows' results) when
    ``vmap`` cannot batch it: an operator with no batching rule (``torch.lstm_cell``), met by the dynamic
    tier (``acrobat.runtime.dynamic``), runs as it would per instance rather than failing.

    ``merged``: the block's tensor parameters all take values of one shape and dtype (``torch.stack`` of a
    list of lazy values), so a launch gathers them all at once: one gather of its ``(P * B)`` handles, cut
    into the ``P`` columns ``(B, ...)`` (views), instead of one gather per column.
    """

    def __init__(self, block: BlockCode, batched: Callable[..., tuple[torch.Tensor, ...]] | None = None,
                 merged: bool = False):
        super().__init__(block, batched)
        self.row_by_row = False
        self.merged = merged

    def __call__(self, g: Group, rt: Runtime) -> tuple[torch.Tensor, ...]:
        if not self.row_by_row:
            try:
                return super().__call__(g, rt)
            except Exception:  # noqa: BLE001 - no batching rule: try it row by row (a real failure fails there too)
                self.row_by_row = True
        args = self.arguments(g, rt)
        shared = rt.shared[self.block.id]
        fn = self.block.fn

        def rows() -> tuple[torch.Tensor, ...]:
            outs = [fn(*(a[i] for a in args), *shared) for i in range(g.size())]
            return tuple(torch.stack(col) for col in zip(*outs))

        return timed(rt.stats, "kernel_ms", rt.sync, rows)

    def arguments(self, g: Group, rt: Runtime) -> list[torch.Tensor]:
        """The launch's batched arguments, ``(B, ...)`` each, in parameter order; a ``merged`` block's columns
        from one gather."""
        if not self.merged:
            return super().arguments(g, rt)
        handles, hosts = columns(g, rt.device)
        assert handles is not None
        p, b = handles.shape
        gathered = timed(rt.stats, "gather_ms", rt.sync, lambda: gather(rt.table, handles.reshape(p * b), rt.device))
        cols = iter(gathered.unflatten(0, (p, b)).unbind(0))
        return [next(cols) if h is None else h for h in hosts]


class EagerBackend:
    """Batched blocks run eagerly by PyTorch through ``torch.func.vmap`` (no arena, explicit gathers).

    ``accumulate`` (the ``eager-accum`` backend): gathers whose backward accumulates gradient rows into
    one buffer per source output (``acrobat.runtime.accumulate``); the same results and gradients.
    """

    arena = None
    trains = True  # out of place: autograd records through every launch

    def __init__(self, accumulate: bool = False, name: str | None = None) -> None:
        self.accumulate = accumulate
        self.name = name or ("eager-accum" if accumulate else "eager")
        self.threads = ThreadPolicy(memory=ChoiceMemory(self.name))  # settled choices kept across processes
        self.tiers = TierChoice()  # programs the static tier did not take: dynamic tier or plain calls

    def kernel(self, block: BlockCode, trace: Tracer) -> EagerKernel:
        if self.accumulate:
            return TracedKernel(block, trace)
        return EagerKernel(block)  # vmap runs the per-instance function: nothing to trace

    def report(self) -> str:
        """The thread count of each block's launches (and what was measured)."""
        return self.threads.report()

    def probing(self) -> list[str]:
        """The blocks (and launch rows) still probing their threads per launch, and the batch sizes whose tier
        is on trial."""
        return [f"{p}: threads" for p in self.threads.probing()] + self.tiers.probing()

    def tuned(self) -> bool:
        """Whether nothing is probing: every launched block's threads per launch and every batch size's tier
        (``acrobat.runtime.tier``) are chosen."""
        return not self.probing()

    def exclusive(self) -> ContextManager[Any]:
        return contextlib.nullcontext()  # each run's values live in its own Runtime: runs may overlap

    def compiling(self, program: str, n_blocks: int) -> ContextManager[None]:
        return contextlib.nullcontext()  # nothing to compile
