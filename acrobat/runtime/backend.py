"""Backends by name: how a static block's batched launch is gathered and run (the kernel seam, §5).

A backend (the ``Backend`` protocol of ``acrobat.runtime.executor``, its
consumer) turns a block into a ``BlockKernel``: called with a group (the
DFG nodes of one launch) and the runtime, it gathers the batched
arguments, runs the batched computation and returns one ``(B, ...)``
tensor per block output. Two backends exist:

- ``eager``: ``torch.func.vmap`` run op by op by PyTorch, explicit gathers
  (``acrobat.runtime.eager``);
- ``compiled``: one TorchInductor kernel per block with arena memory and
  profile-guided gather fusion (``acrobat.runtime.compiled``).

``auto`` (the default of ``Program.run``) is no backend of its own: each
run picks ``eager`` while autograd records (grad mode on and a shared
value requires grad: training needs the out-of-place eager path), else
``compiled`` (``choose_backend``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree

from acrobat.runtime.eager import EagerBackend
from acrobat.runtime.plan import Form

if TYPE_CHECKING:
    from acrobat.runtime.executor import Backend


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
        elif isinstance(v, Form):
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
