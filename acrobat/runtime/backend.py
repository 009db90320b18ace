"""Backends by name: how a static block's batched launch is gathered and run (the kernel seam, §5).

A backend (the ``Backend`` protocol of ``acrobat.runtime.executor``, its
consumer) turns a block into a ``BlockKernel``: called with a group (the
DFG nodes of one launch) and the runtime, it gathers the batched
arguments, runs the batched computation and returns one ``(B, ...)``
tensor per block output. Two backends exist:

- ``eager``: ``torch.func.vmap`` run op by op by PyTorch, explicit gathers
  (``acrobat.runtime.eager``); ``eager-accum`` the same with gathers whose
  backward accumulates gradient rows into one buffer per source output
  (``acrobat.runtime.accumulate``): faster training steps, same gradients;
- ``compiled``: one TorchInductor kernel per block with arena memory and
  profile-guided gather fusion (``acrobat.runtime.compiled``); inference
  only: while autograd records, ``compiled`` runs ``compiled-train``;
- ``compiled-train``: ``eager-accum``'s traced graphs compiled by
  TorchInductor with AOTAutograd, a forward and a backward kernel per block
  (``acrobat.runtime.compiled_train``).

``auto`` (the default of ``Program.run``) is no backend of its own: each
run picks ``eager-accum`` while autograd records (grad mode on and a shared
value or a tensor inside an instance requires grad: training needs the
out-of-place eager path), else ``compiled`` (``choose_backend``). A backend
that cannot train (``Backend.trains`` false) refuses a run through which
autograd would record (``check_trains``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import torch
import torch.utils._pytree as pytree

from acrobat.errors import AcrobatError
from acrobat.runtime.eager import EagerBackend
from acrobat.runtime.plan import Form

if TYPE_CHECKING:
    from acrobat.runtime.executor import Backend


def _compiled(gather: str) -> Callable[[], Backend]:
    def make() -> Backend:
        from acrobat.runtime.compiled import CompiledBackend  # imports torch._inductor lazily

        return CompiledBackend(gather)

    return make


def _compiled_train() -> Backend:
    from acrobat.runtime.compiled_train import CompiledTrainBackend  # imports torch._inductor lazily

    return CompiledTrainBackend()


BACKENDS: dict[str, Callable[[], Backend]] = {
    "eager": EagerBackend,
    "compiled": _compiled("auto"),  # profile-guided gather choice per block
    "compiled-explicit": _compiled("explicit"),
    "compiled-fused": _compiled("fused"),
    "eager-accum": lambda: EagerBackend(accumulate=True),  # traced graphs, gathers' gradients accumulated
    "compiled-train": _compiled_train,  # eager-accum's traced graphs compiled with their backward
}


TRAINING = "eager-accum"
"""The backend ``auto`` picks while autograd records (``choose_backend``): 1.05-2.4x ``eager``'s training
step (``acrobat bench --train``, BENCHMARKS.md "Training"), the same gradients."""
COMPILED_TRAINING = "compiled-train"
"""The backend ``"compiled"`` runs while autograd records (``choose_backend``): its kernels compiled with
their backward (``acrobat.runtime.compiled_train``)."""
AUTO = "auto"
"""The backend name that picks one per run (``choose_backend``)."""
BACKEND_NAMES = (AUTO, *BACKENDS)
"""Every name ``Program.run(backend=...)`` and the command line take."""


def records_grad(slots: Sequence[Any], instances: Sequence[Any] = ()) -> bool:
    """Whether autograd records through a run over the shared values ``slots`` and the batch ``instances``:
    grad mode is on and a shared tensor (a tensor, a module's parameter, a module form's tensor) or a
    tensor inside an instance (``instance_tensors``) requires grad. Instances are walked only when no
    shared value requires grad."""
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
    return any(t.requires_grad for t in instance_tensors(instances))


_ATOMS = frozenset({int, float, complex, bool, str, bytes, type(None), range})


def instance_tensors(instances: Sequence[Any]) -> Iterator[torch.Tensor]:
    """The tensors held in ``instances``: through lists, tuples, sets, dict values and the attributes of
    objects (``__dict__`` and ``__slots__``, dataclasses included), each object visited once (shared
    subtrees and cycles are walked once). 2-4 ms for 64 SST trees (2,400 nodes) on a loaded 2-core
    machine; ``records_grad`` walks them only with grad mode on and no shared value requiring grad.

    A tensor an instance makes only when a method is called cannot be seen here.
    """
    seen: set[int] = set()
    stack: list[Any] = list(instances)
    slots = _slot_names
    while stack:
        x = stack.pop()
        t = type(x)
        if t in _ATOMS or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, torch.Tensor):
            yield x
        elif t is list or t is tuple or isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif not isinstance(x, (type, torch.nn.Module)):
            d = getattr(x, "__dict__", None)
            if d is not None:
                stack.extend(d.values())
            names = slots.get(t)
            if names is None:
                names = slots[t] = tuple(n for c in t.__mro__ for n in c.__dict__.get("__slots__", ())
                                         if n not in ("__dict__", "__weakref__"))
            for name in names:
                stack.append(getattr(x, name, None))


_slot_names: dict[type, tuple[str, ...]] = {}  # per class, the ``__slots__`` of it and its bases


AUTO_ENV = "ACROBAT_AUTO_BACKEND"
"""Environment variable: the backend ``auto`` picks when autograd does not record (default ``compiled``;
the test suite sets ``eager``, which compiles nothing)."""


def choose_backend(name: str, slots: Sequence[Any], instances: Sequence[Any] = ()) -> str:
    """The backend a run with ``backend=name`` uses: ``name`` itself; ``COMPILED_TRAINING``
    (``"compiled-train"``) for ``"compiled"`` when autograd records through the shared values ``slots`` or a
    tensor in ``instances`` (``records_grad``); for ``"auto"`` ``TRAINING`` (``"eager-accum"``) when autograd
    records, else ``"compiled"`` (or the backend named by ``$ACROBAT_AUTO_BACKEND``).
    """
    if name == "compiled":
        return COMPILED_TRAINING if records_grad(slots, instances) else name
    if name != AUTO:
        return name
    if records_grad(slots, instances):
        return TRAINING
    fast = os.environ.get(AUTO_ENV) or "compiled"
    if fast not in BACKENDS:
        raise ValueError(f"${AUTO_ENV}={fast!r} names no backend; available: {', '.join(BACKENDS)}")
    return fast


def check_trains(be: Backend, slots: Sequence[Any], instances: Sequence[Any]) -> None:
    """Raise when autograd would record through a run on ``be`` and ``be`` cannot train (``be.trains``).

    Raises:
        AcrobatError: names the backend, what requires grad, and the fix (``backend="eager-accum"``, or run
            under ``torch.no_grad()``/``torch.inference_mode()`` for inference).
    """
    if be.trains or not torch.is_grad_enabled():
        return
    if records_grad(slots):
        what = "a shared parameter requires grad"
    elif any(t.requires_grad for t in instance_tensors(instances)):
        what = "a tensor inside an instance requires grad"
    else:
        return
    raise AcrobatError(f"backend {be.name!r} runs inference only (outputs live in reused arena memory), but grad "
                       f"mode is on and {what}: use backend='eager-accum' or 'eager' (or 'auto', which picks "
                       f"{TRAINING!r}), or 'compiled' (which trains on {COMPILED_TRAINING!r}) for training, or "
                       "run under torch.no_grad()/torch.inference_mode() for inference")


def get_backend(name: str) -> Backend:
    """A new backend called ``name`` (``"eager"``, ``"eager-accum"``, ``"compiled"``, ``"compiled-explicit"``,
    ``"compiled-fused"``, ``"compiled-train"``).

    Raises:
        ValueError: unknown backend name (the message lists the known ones).
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    return BACKENDS[name]()
