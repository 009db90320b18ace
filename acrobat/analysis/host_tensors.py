"""Tensors made from host numbers inside static blocks (§5: a block's batched form).

Inside a static block, a per-instance host number (``node.word_id``) is a
batched 0-d tensor under ``vmap``, so ``torch.tensor(node.word_id)`` would
ask PyTorch to build a tensor from a batched value, which it refuses.
The block lowering (``acrobat.analysis.blocks``) calls the forms below in
place of those functions where their data is a host value; on plain data
they do what the function does.

**Narrow integer dtypes.** ``torch.tensor(n, dtype=torch.int8)`` of a number out of int8's range raises
("value cannot be converted to type int8 without overflow"), where ``.to(int8)`` of the batched number would
wrap it silently. So the lowering gives such a constructor (int8, uint8, int16, int32; ``torch.IntTensor``) its
host numbers through ``in_range`` (``range_checked``), which the skeleton runs per instance before the launch:
the plain call's error, raised where the plain call raises it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from acrobat.frontend import ir


def tensor_of(data: Any, dtype: torch.dtype | None = None, device: Any = None, requires_grad: bool = False,
              pin_memory: bool = False) -> torch.Tensor:
    """``torch.tensor(data, ...)`` that also takes tensors (a batched host number) and lists of them.

    A tensor keeps its values; its dtype becomes ``dtype``, or what
    ``torch.tensor`` infers from the Python number it stands for (the
    default dtype for a float, int64 for an int, bool for a bool).
    """
    if isinstance(data, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in data):
        ref = next(x for x in data if isinstance(x, torch.Tensor))
        # a constant beside them as an operator on a batched one (`full_like`), not a tensor made in the traced
        # graph, which the kernel compiler would take for one more input of the kernel
        data = torch.stack([x if isinstance(x, torch.Tensor) else torch.full_like(ref, x, dtype=_dtype_of(x))
                            for x in data])
    if not isinstance(data, torch.Tensor):
        return torch.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad, pin_memory=pin_memory)
    if dtype is None:
        dtype = torch.get_default_dtype() if data.is_floating_point() else data.dtype
    out = data.to(dtype=dtype, device=device)
    return out.requires_grad_() if requires_grad else out


def full_of(size: Any, fill_value: Any, *, dtype: torch.dtype | None = None, device: Any = None,
            requires_grad: bool = False, **kwargs: Any) -> torch.Tensor:
    """``torch.full(size, fill_value, ...)`` that also takes a tensor fill value (a batched host number, §5).

    Shape ``size``; dtype ``dtype``, or what ``torch.full`` infers from the Python number the tensor stands
    for (the default dtype for a float, int64 for an int, bool for a bool); no gradient flows to the fill
    value, as ``torch.full`` reads it as a number. A Python number goes to ``torch.full`` itself (``kwargs``:
    its other keywords)."""
    if not isinstance(fill_value, torch.Tensor):
        return torch.full(size, fill_value, dtype=dtype, device=device, requires_grad=requires_grad, **kwargs)
    if dtype is None:
        dtype = torch.get_default_dtype() if fill_value.is_floating_point() else _dtype_of(
            True if fill_value.dtype == torch.bool else 0)
    out = fill_value.detach().to(dtype=dtype, device=device).expand(size).clone()
    return out.requires_grad_() if requires_grad else out


def _dtype_of(x: bool | int | float) -> torch.dtype:
    """The dtype a Python number keeps exactly until ``tensor_of`` infers the result's (float64, int64, bool)."""
    return torch.bool if type(x) is bool else torch.int64 if type(x) is int else torch.float64


def number_operand(op: Callable[[Any, Any], Any], a: Any, b: Any, host: int) -> Any:
    """``op(a, b)`` where operand ``host`` (0: ``a``, 1: ``b``) is a per-instance host number: inside a block a
    0-d tensor (a Python float as float64, an int as int64), which PyTorch promotes as a tensor, where the
    plain program's Python number is promoted as a number, below every tensor. So the 0-d value takes
    the dtype the number would give beside the other operand: that operand's dtype in its own category
    (a float beside a float32 tensor stays float32; an int beside an int32 tensor, int32), the default
    float dtype for a float beside an integer or bool tensor. A host value that is a tensor of the
    instance data with dimensions is left as it is; a 0-d one is taken for the number it holds.
    """
    h, other = (a, b) if host == 0 else (b, a)
    if isinstance(h, torch.Tensor) and h.dim() == 0 and isinstance(other, torch.Tensor) and h.dtype != torch.bool:
        floating = other.is_floating_point() or other.is_complex()
        if h.is_floating_point():
            h = h.to(other.dtype if floating else torch.get_default_dtype())
        elif not floating and other.dtype != torch.bool:
            h = h.to(other.dtype)
    return op(h, b) if host == 0 else op(a, h)


def _legacy(constructor: Callable, dtype: torch.dtype, args: tuple) -> torch.Tensor:
    """A legacy constructor (``torch.LongTensor([tokens[i]])``, of ``dtype``) that takes batched host numbers in a
    list or tuple as ``tensor_of`` does; any other argument (``torch.LongTensor(3)``: a size) goes to the
    constructor itself."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tensor_of(args[0], dtype=dtype)
    return constructor(*args)


def long_tensor_of(*args: Any) -> torch.Tensor:
    """``torch.LongTensor(data)`` in a block (``_legacy``)."""
    return _legacy(torch.LongTensor, torch.int64, args)


def int_tensor_of(*args: Any) -> torch.Tensor:
    """``torch.IntTensor(data)`` in a block (``_legacy``)."""
    return _legacy(torch.IntTensor, torch.int32, args)


def float_tensor_of(*args: Any) -> torch.Tensor:
    """``torch.FloatTensor(data)`` in a block (``_legacy``)."""
    return _legacy(torch.FloatTensor, torch.float32, args)


def double_tensor_of(*args: Any) -> torch.Tensor:
    """``torch.DoubleTensor(data)`` in a block (``_legacy``)."""
    return _legacy(torch.DoubleTensor, torch.float64, args)


#: torch functions that make a tensor from host data, and the forms blocks call instead.
FROM_HOST: dict[Callable, Callable] = {torch.tensor: tensor_of, torch.as_tensor: tensor_of, torch.full: full_of,
                                       torch.LongTensor: long_tensor_of, torch.IntTensor: int_tensor_of,
                                       torch.FloatTensor: float_tensor_of, torch.DoubleTensor: double_tensor_of}


#: The integer dtypes narrower than the int64 of a batched Python int: converting a number into one may overflow.
NARROW_INTS = frozenset({torch.int8, torch.uint8, torch.int16, torch.int32})
#: The legacy constructors of a narrow integer dtype.
_NARROW_LEGACY = {torch.IntTensor: torch.int32}


def in_range(value: Any, dtype: torch.dtype) -> Any:
    """``value`` (one instance's host number, or list of them), after ``torch.tensor(value, dtype=dtype)`` on the
    host has taken it: run by the skeleton before the launch whose block converts the batched value to ``dtype``.

    Raises:
        RuntimeError: as ``torch.tensor`` raises it ("value cannot be converted to type int8 without overflow").
    """
    torch.tensor(value, dtype=dtype)
    return value


def range_checked(e: ir.Call, is_host_data: Callable[[ir.Expr], bool]) -> None:
    """Give the constructor call ``e`` (``torch.tensor(n, dtype=torch.int8)``, ``torch.IntTensor([n])``) of a
    narrow integer dtype its host operands (``is_host_data``: not constants) through ``in_range``, in place; any
    other call is left as it is."""
    dtype = e.kwargs.get("dtype")
    narrow = dtype.value if isinstance(dtype, ir.Const) else ir.known(_NARROW_LEGACY, e.target)
    if narrow not in NARROW_INTS or not e.args:
        return
    data = e.args[0]
    holder, items = (data, data.items) if isinstance(data, (ir.ListExpr, ir.TupleExpr)) else (e, e.args)
    for i, x in enumerate(items[:len(items) if holder is data else 1]):
        if is_host_data(x):
            items[i] = ir.Call(x.loc, ir.CallKind.HOST, in_range, [x, ir.Const(x.loc, narrow)], {})
