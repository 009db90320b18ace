"""``Lazy``: a per-instance tensor of the dynamic tier, a DFG value not computed yet (DyNet's expressions).

Code the static analysis does not take runs as the user's own Python on its
instance's fiber (§4.2), and every torch operator on its per-instance
tensors is recorded as a DFG node instead of run (``acrobat.runtime.dynamic``).
What such an operator returns is a ``Lazy``: the node's output handle, with
the shape and dtype the operator will give it (found on meta tensors, so
``x.shape`` needs no value), and its depth (one more than its deepest input:
DyNet's schedule). Operators, methods and torch functions on it record
further nodes; anything that needs its value (``bool``, ``float``,
``.item()``, ``.tolist()``, printing, indexing a list with it) waits for it
on the fiber, as value reads of the static tier do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from acrobat.runtime.dfg import LazyBase

if TYPE_CHECKING:
    from acrobat.runtime.dynamic import Recorder

#: Tensor methods and attributes answered from the value's shape and dtype (no node, no wait).
_SHAPE_ONLY = {"dim", "ndimension", "numel", "nelement", "is_floating_point", "is_complex", "element_size",
               "get_device"}


class Meta:
    """The shape and dtype of a value a node will compute, interned (``meta_of``): one object per pair, so
    an operator's signature compares and hashes its inputs' metas by identity (``acrobat.runtime.dynamic``).
    ``host`` is the marker of the same shape and dtype for the instance's own tensors (batched host data)."""

    __slots__ = ("shape", "dtype", "floating", "host")

    class Host:
        """The signature part of an instance's own tensor of one shape and dtype."""

        __slots__ = ("meta",)

        def __init__(self, meta: "Meta"):
            self.meta = meta

    def __init__(self, shape: torch.Size, dtype: torch.dtype):
        self.shape = shape
        self.dtype = dtype
        self.floating = dtype.is_floating_point or dtype.is_complex
        self.host = Meta.Host(self)


_METAS: dict[tuple[torch.Size, torch.dtype], Meta] = {}


def meta_of(shape: torch.Size, dtype: torch.dtype) -> Meta:
    """The interned ``Meta`` of ``shape`` and ``dtype``."""
    m = _METAS.get((shape, dtype))
    if m is None:
        m = _METAS[(torch.Size(shape), dtype)] = Meta(torch.Size(shape), dtype)
    return m


class Lazy(LazyBase):
    """A per-instance tensor whose value a DFG node computes later (see the module docstring).

    ``Lazy(h, meta, depth, requires_grad, rec)``: ``h`` is the node's output handle (``acrobat.runtime.dfg``);
    ``meta`` the shape and dtype the value will have; ``depth`` its scheduling depth; ``rec`` the run's
    ``Recorder``. The fields are read-only and live in C (``acrobat._native.LazyBase``), where the recorder's
    common path reads and makes them (``acrobat._native.Recording``).
    """

    __slots__ = ()

    @property
    def shape(self) -> torch.Size:
        return self.meta.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.meta.dtype

    # -- what the shape tells -------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.rec.rt.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_cuda(self) -> bool:
        return self.rec.rt.device.type == "cuda"

    @property
    def layout(self) -> torch.layout:
        return torch.strided

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def dim(self) -> int:
        return len(self.shape)

    ndimension = dim

    def numel(self) -> int:
        return self.shape.numel()

    nelement = numel

    # -- operators record nodes -----------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        """A tensor method: a bound recorder (``x.sum(0)``; the method is then ``Lazy``'s own, ``_method``, so
        later calls find it on the class), or what the shape tells (``x.dim()``)."""
        attr = getattr(torch.Tensor, name)  # AttributeError for what a tensor does not have
        if name in _SHAPE_ONLY:
            with torch._C.DisableTorchFunction():
                return getattr(torch.empty(self.shape, dtype=self.dtype, device="meta"), name)
        if not callable(attr):  # a tensor property (`x.T`, `x.mT`, `x.real`): a node of its getter
            return self.rec.call(_getter(name), (self,), {})
        method = _method(attr)
        setattr(Lazy, name, method)
        return method.__get__(self, Lazy)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        """A torch function given a lazy value: recorded (the run's recorder is found on an argument)."""
        rec = _recorder_of(args, kwargs)
        return rec.call(func, args, kwargs or {})

    def __setitem__(self, key: Any, value: Any) -> None:
        self.rec.call(torch.Tensor.__setitem__, (self, key, value), {})

    def __iter__(self) -> Any:
        return iter(self.rec.call(torch.Tensor.unbind, (self,), {}))

    __hash__ = object.__hash__

    @property
    def __class__(self) -> type:  # type: ignore[override]
        """``torch.Tensor``, as a plain call's value is: ``isinstance(x, torch.Tensor)`` in the model's code is
        True of a lazy value (which is no subclass of it: ``type(x)`` stays ``Lazy``)."""
        return torch.Tensor

    # -- what needs the value waits for it ----------------------------------------
    def value(self) -> torch.Tensor:
        """The computed tensor (on a fiber, waits for it: a value read, §4.2)."""
        return self.rec.value(self)

    def __bool__(self) -> bool:
        return bool(self.value())

    def __float__(self) -> float:
        return float(self.value())

    def __int__(self) -> int:
        return int(self.value())

    def __index__(self) -> int:
        return self.value().__index__()

    def __complex__(self) -> complex:
        return complex(self.value())

    def __repr__(self) -> str:
        return repr(self.value())

    def __str__(self) -> str:
        return str(self.value())

    def __format__(self, spec: str) -> str:
        return format(self.value(), spec)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self.value().__array__(*args, **kwargs)

    def __contains__(self, x: Any) -> bool:
        return x in self.value()

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.value().__reduce_ex__(protocol)


def _method(attr: Any) -> Any:
    """``Lazy``'s method recording tensor method ``attr`` (``x.unsqueeze(0)``, ``x.chunk(3, dim=-1)``): the
    call ``Recorder.call`` records, its common case (in C) first."""

    def method(self: Lazy, *args: Any, **kwargs: Any) -> Any:
        rec = self.rec
        call = (self, *args)
        out = rec.record(attr, call, kwargs)
        return out if out is not NotImplemented else rec.call(attr, call, kwargs)

    method.__name__ = getattr(attr, "__name__", "method")
    return method


def _binary(name: str) -> Any:
    method = getattr(torch.Tensor, name)

    def op(self: Lazy, *args: Any) -> Any:  # `Recorder.call`, its common case (in C) first
        rec = self.rec
        out = rec.record(method, (self, *args))
        return out if out is not NotImplemented else rec.call(method, (self, *args), {})

    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__matmul__",
              "__rmatmul__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lshift__",
              "__rshift__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__neg__", "__pos__",
              "__abs__", "__invert__", "__getitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__"
              ):
    setattr(Lazy, _name, _binary(_name))


_GETTERS: dict[str, Any] = {}


def _getter(name: str) -> Any:
    """The function reading tensor property ``name`` (one object per name: a recorded operator's identity)."""
    g = _GETTERS.get(name)
    if g is None:
        def g(x: torch.Tensor) -> Any:
            return getattr(x, name)
        g.__name__ = name
        _GETTERS[name] = g
    return g


def _recorder_of(args: tuple, kwargs: dict | None) -> "Recorder":
    """The recorder of the first lazy value among ``args``/``kwargs`` (nested in lists and tuples too)."""
    stack: list[Any] = [*args, *(kwargs or {}).values()]
    while stack:
        x = stack.pop()
        if type(x) is Lazy:
            return x.rec
        if isinstance(x, (list, tuple)):
            stack.extend(x)
    raise TypeError("no lazy value among the arguments")
