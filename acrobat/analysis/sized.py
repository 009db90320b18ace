"""Tensors whose first size is a per-instance host number: ``torch.arange(len(tokens))``, ``torch.zeros(n, D)``.

``p.pos(torch.arange(len(toks)))`` (positional ids) and ``torch.zeros(n, D)`` with ``n`` read from the
instance's data have a length that differs per instance, so no batched tensor holds them, and inside a static
block (§5) the size would be a batched 0-d tensor under ``vmap``, which a factory cannot take. As for
``torch.tensor(tokens)`` (``acrobat.analysis.token_lists``), acrobat makes such a tensor what ``torch.stack`` of
its rows would be, a stacked list (``acrobat.analysis.ragged``), built before the statement as

    _rows0 = factory_rows(torch.arange, "file:line", len(toks))
    _comp0 = []
    for _c_row_1 in range(len(_rows0)):
        _comp0.append(torch.tensor(_rows0[_c_row_1]))       # dtype= and device= kept
    ... torch.stack(_comp0) ...

(``acrobat.analysis.rows``, form ``"sized"``). ``factory_rows`` runs the factory on the host with the instance's
numbers, so the values, the length and the dtype (through the Python numbers of ``tolist``) are plain PyTorch's,
and so are its errors (a negative size). Row-wise operators, reductions over the list axis, ``emb(...)``,
indexing by host ints and ``len`` then apply as to any stacked list.

**Which calls** (``sized_call``): ``torch.arange(...)`` whose bounds or step are host data, not all constants;
``torch.zeros(n, *rest)``, ``torch.ones(n, *rest)`` (sizes as arguments or as one tuple or list) and
``torch.full((n, *rest), v)`` whose FIRST size is host data of the instance; ``dtype=`` and ``device=`` at most.
A factory whose first size is a constant and a later one per-instance (``torch.zeros(3, n)``) stays in its block,
there ``sizes_of`` reports it as the static tier's limit (``ShapeError``) where the batched size meets it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from acrobat.errors import ShapeError
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind, known

#: The factories made into stacked lists, each with how its arguments give its first size (``_first_size``).
FACTORIES: dict[Callable, str] = {torch.arange: "bounds", torch.zeros: "sizes", torch.ones: "sizes",
                                  torch.full: "size_tuple"}
#: The keywords a row's constructor takes as they are.
_KEYWORDS = frozenset({"dtype", "device"})
#: What marks a ShapeError as the static tier's limit for factories (``static_limit``).
_LIMIT = "a tensor factory sized by per-instance host data"


def size_operands(e: ir.Call) -> list[ir.Expr] | None:
    """The operands of the factory call ``e`` that decide its first size: the bounds and step of ``torch.arange``,
    the first size of ``torch.zeros``/``ones``/``full``; None where ``e`` is no such call (another target,
    keywords other than ``dtype=``/``device=``, a starred argument, sizes not written out)."""
    how = known(FACTORIES, e.target) if e.kind is CallKind.TORCH else None
    if how is None or not e.args or not set(e.kwargs) <= _KEYWORDS or any(isinstance(a, ir.Starred) for a in e.args):
        return None
    if how == "bounds":
        return list(e.args) if len(e.args) <= 3 else None
    if how == "size_tuple" and len(e.args) != 2:
        return None
    first = e.args[0]
    if isinstance(first, (ir.TupleExpr, ir.ListExpr)):
        return [first.items[0]] if first.items and (how == "size_tuple" or len(e.args) == 1) else None
    return [first] if how == "sizes" else None


def is_instance_data(e: ir.Expr) -> bool:
    """Whether the host expression ``e`` reads something (a variable, an attribute): not constants alone."""
    return any(not isinstance(y, ir.Const) for y in ir.walk(e) if not ir.children(y))


def factory_rows(factory: Callable, where: str, *args: Any, dtype: torch.dtype | None = None,
                 device: Any = None) -> list:
    """The rows of ``factory(*args, dtype=dtype)`` (a factory of ``FACTORIES`` of one instance's host numbers),
    made on the host, as Python numbers (or nested lists of them for a factory of more than one dimension):
    ``torch.tensor`` of a row, with ``dtype``, gives the factory's row. ``device`` is the rows' (ignored here).

    Raises:
        ShapeError: the factory makes no rows (a size or a range of 0, or a 0-d tensor), marked as the static
            tier's limit (``static_limit``), where the plain call gives an empty tensor the dynamic tier runs
            (``where``: the model's file:line).
        RuntimeError: as the plain factory raises it (a negative size, a step of 0).
    """
    del device
    made = factory(*args, dtype=dtype)
    if made.dim() == 0 or len(made) == 0:
        err = ShapeError(f"`torch.{factory.__name__}(...)` at {where} makes a tensor of shape "
                         f"{tuple(made.shape)}: acrobat batches a factory sized by per-instance host data as the "
                         "stacked list of its rows, which needs at least one row")
        err.static_limit = _LIMIT  # type: ignore[attr-defined]
        raise err
    return made.tolist()


def row_constructor(e: ir.Call, item: ir.Expr) -> ir.Call:
    """``torch.tensor(item, dtype=..., device=...)``: one row of the factory call ``e``, with ``e``'s keywords."""
    return ir.Call(e.loc, CallKind.TORCH, torch.tensor, [item], dict(e.kwargs))


def host_rows_call(e: ir.Call) -> ir.Call:
    """``factory_rows(factory, "file:line", *args, **kwargs)`` of the factory call ``e``: host code (its
    arguments move there)."""
    where = ir.Const(e.loc, f"{e.loc.file}:{e.loc.line}")
    return ir.Call(e.loc, CallKind.HOST, factory_rows, [ir.Const(e.loc, e.target), where, *e.args], dict(e.kwargs))
