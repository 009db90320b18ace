"""Backends: how a static block's batched launch is gathered and run (the kernel seam, §5).

A backend turns a block's per-instance function into a ``BlockKernel``:
called with a group (the DFG nodes of one launch) and the runtime, it
gathers the batched arguments, runs the batched computation and returns
one ``(B, ...)`` tensor per block output. Two backends exist:

- ``eager``: ``torch.func.vmap`` run op by op by PyTorch, explicit gathers;
- ``compiled``: one TorchInductor kernel per block with arena memory and
  profile-guided gather fusion (``acrobat.runtime.compiled``).

``auto`` (the default of ``Program.run``) is no backend of its own: each
run picks ``eager`` while autograd records (grad mode on and a shared
value requires grad: training needs the out-of-place eager path), else
``compiled`` (``choose_backend``).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Protocol, Sequence

import numpy as np
import torch
import torch.utils._pytree as pytree
from torch.func import vmap

from acrobat.analysis.lowered import Block
from acrobat.codegen.modules import FORMS
from acrobat.runtime.arena import Arena
from acrobat.runtime.dfg import Group, handle_matrix
from acrobat.runtime.gather import gather, host_column
from acrobat.runtime.threads import ThreadPolicy

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime


class BlockKernel(Protocol):
    """One block's batched launch: ``kernel(group, runtime) -> tuple of (B, ...) outputs``.

    Adds its gather time to ``runtime.stats.gather_ms`` and its kernel
    time to ``runtime.stats.kernel_ms`` (ms).
    """

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        ...


class Backend(Protocol):
    """What the runtime needs from a kernel backend: per-block kernels, and the arena they write to (or None)."""

    name: str
    arena: Arena | None
    threads: ThreadPolicy  # threads per launch, chosen per block (kept across runs)

    def kernel(self, block: Block, fn: Callable) -> BlockKernel:
        """The batched launch of ``block`` whose per-instance function is ``fn``."""
        ...

    def report(self) -> str:
        """What the backend did (compiles, gather choices), for the run report; empty if nothing."""
        ...

    def exclusive(self) -> ContextManager[Any]:
        """A context held for a whole run: concurrent runs of one backend wait for each other
        where they share state (the compiled backend's arena), else a no-op."""
        ...

    def announce(self, program: str, n_blocks: int) -> None:
        """Called at the start of every run of ``program`` (``n_blocks`` kernel blocks): a backend that
        compiles says so on its first run (a progress line on stderr), else nothing."""
        ...


def columns(g: Group, device: torch.device) -> tuple[np.ndarray | None, list[torch.Tensor | None]]:
    """A group's batched arguments: the handles of its tensor parameters as an int64 array
    ``(tensor params, B)`` (None if it has none), and per batched parameter its host column as a
    ``(B,)`` tensor (``None`` for tensor parameters)."""
    block = g.block
    assert block is not None
    m = block.n_tensor_params
    if g.hosts:
        host_cols = iter(zip(*g.hosts))
        hosts = [None if role == "tensor" else host_column(next(host_cols), device) for role in block.batched_roles]
    else:
        hosts = [None] * m
    return (handle_matrix(g.tensors, m) if m else None), hosts


def timed(stats_field: str, rt: "Runtime", f: Callable[[], Any]) -> Any:
    """``f()``, adding its wall time in ms to ``rt.stats.<stats_field>`` (after a device sync when profiling)."""
    t0 = time.perf_counter()
    out = f()
    if rt.sync:
        torch.cuda.synchronize()
    setattr(rt.stats, stats_field, getattr(rt.stats, stats_field) + (time.perf_counter() - t0) * 1e3)
    return out


class EagerKernel:
    """A block as ``torch.func.vmap`` over its batched parameters, run op by op; explicit gathers.

    Shared parameters get ``in_dims=None``: passed once, not copied per
    instance (parameter reuse, §5.1).
    """

    def __init__(self, block: Block, fn: Callable):
        self.block = block
        dims = (0,) * len(block.batched_params) + (None,) * len(block.shared_params)
        self.batched = vmap(fn, in_dims=dims, randomness="different")

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        handles, hosts = columns(g, rt.device)
        gathered = iter(timed("gather_ms", rt, lambda: [] if handles is None else
                              [gather(rt.table, h, rt.device) for h in handles]))
        args = [next(gathered) if h is None else h for h in hosts]
        return timed("kernel_ms", rt, lambda: self.batched(*args, *rt.shared[self.block.id]))


class EagerBackend:
    """Batched blocks run eagerly by PyTorch through ``torch.func.vmap`` (no arena, explicit gathers)."""

    name = "eager"
    arena = None

    def __init__(self) -> None:
        self.threads = ThreadPolicy()

    def kernel(self, block: Block, fn: Callable) -> BlockKernel:
        return EagerKernel(block, fn)

    def report(self) -> str:
        """The thread count of each block's launches (and what was measured)."""
        return self.threads.report()

    def exclusive(self) -> ContextManager[Any]:
        return contextlib.nullcontext()  # each run's values live in its own Runtime: runs may overlap

    def announce(self, program: str, n_blocks: int) -> None:
        pass  # nothing to compile


def _compiled(gather: str) -> Callable[[], Backend]:
    def make() -> Backend:
        from acrobat.runtime.compiled import CompiledBackend  # imports torch._inductor lazily

        return CompiledBackend(gather)

    return make


BACKENDS: dict[str, Callable[[], Backend]] = {
    "eager": EagerBackend,
    "compiled": _compiled("auto"),  # profile-guided gather choice per block
    "compiled-explicit": _compiled("explicit"),
    "compiled-fused": _compiled("fused"),
}


AUTO = "auto"
"""The backend name that picks one per run (``choose_backend``)."""
BACKEND_NAMES = (AUTO, *BACKENDS)
"""Every name ``Program.run(backend=...)`` and the command line take."""


def records_grad(slots: Sequence[Any]) -> bool:
    """Whether autograd records through a run over the shared values ``slots``: grad mode is on and a
    shared tensor (a tensor, a module's parameter, a module form's tensor) requires grad."""
    if not torch.is_grad_enabled():
        return False
    for v in slots:
        if isinstance(v, torch.Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, torch.nn.Module):
            if any(p.requires_grad for p in v.parameters()):
                return True
        elif isinstance(v, FORMS):
            if any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(v)):
                return True
    return False


AUTO_ENV = "ACROBAT_AUTO_BACKEND"
"""Environment variable: the backend ``auto`` picks when autograd does not record (default ``compiled``;
the test suite sets ``eager``, which compiles nothing)."""


def choose_backend(name: str, slots: Sequence[Any]) -> str:
    """The backend a run with ``backend=name`` uses: ``name`` itself, or for ``"auto"`` ``"eager"`` when
    autograd records through the shared values ``slots`` (``records_grad``), else ``"compiled"``
    (or the backend named by ``$ACROBAT_AUTO_BACKEND``).

    Per-instance tensors are not looked at: a model whose instances hold tensors that require grad
    (and no shared one does) should pass ``backend="eager"`` for training.
    """
    if name != AUTO:
        return name
    if records_grad(slots):
        return "eager"
    fast = os.environ.get(AUTO_ENV) or "compiled"
    if fast not in BACKENDS:
        raise ValueError(f"${AUTO_ENV}={fast!r} names no backend; available: {', '.join(BACKENDS)}")
    return fast


def get_backend(name: str) -> Backend:
    """A new backend called ``name`` (``"eager"``, ``"compiled"``, ``"compiled-explicit"``, ``"compiled-fused"``).

    Raises:
        ValueError: unknown backend name (the message lists the known ones).
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    return BACKENDS[name]()
