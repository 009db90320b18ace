"""Backends: how a static block's batched form is produced and run (the kernel seam, §5).

A backend turns a block's per-instance function into a batched callable
``f(*batched_args, *shared_args) -> tuple of (B, ...) tensors``. The eager
backend uses ``torch.func.vmap`` (PyTorch runs it op by op); a compiled
backend (TorchInductor or TVM) plugs in here with the same signature.
"""

from __future__ import annotations

from typing import Callable, Protocol

from torch.func import vmap

from acrobat.analysis.lowered import Block


class Backend(Protocol):
    """What the runtime needs from a kernel backend."""

    name: str

    def batched(self, block: Block, fn: Callable) -> Callable:
        """The batched form of ``block`` whose per-instance function is ``fn``."""
        ...


class EagerBackend:
    """Batched blocks as ``torch.func.vmap`` over the batched parameters, run eagerly.

    Shared parameters get ``in_dims=None``: passed once, not copied per
    instance (parameter reuse, §5.1).
    """

    name = "eager"

    def batched(self, block: Block, fn: Callable) -> Callable:
        dims = (0,) * len(block.batched_params) + (None,) * len(block.shared_params)
        return vmap(fn, in_dims=dims)


BACKENDS: dict[str, Callable[[], Backend]] = {"eager": EagerBackend}


def get_backend(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        ValueError: unknown backend name (the message lists the known ones).
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    return BACKENDS[name]()
