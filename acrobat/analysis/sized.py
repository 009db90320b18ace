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

**Which calls** (``size_operands``, ``Kinds.sized_rows``): ``torch.arange(...)`` whose bounds or step are host data, not all constants;
``torch.zeros(n, *rest)``, ``torch.ones(n, *rest)`` (sizes as arguments or as one tuple or list) and
``torch.full((n, *rest), v)`` whose FIRST size is host data of the instance, and ``x.new_zeros``/``new_ones``/
``new_full`` of such sizes on a variable ``x`` (rows of ``x``'s dtype and device); ``dtype=`` and ``device=`` at most.
A factory whose first size is not per-instance and a later one is (``torch.zeros(3, n)``) has a per-instance
shape no stacked list holds: the static tier rejects it (a ``CompileError``, so the default options run the
dynamic tier), where the batched size failed every launch before.
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
#: The factory methods of a tensor (``x.new_zeros(n, D)``: ``x``'s dtype and device), as the factory whose rows
#: they make and how its arguments give its first size.
METHODS: dict[str, tuple[Callable, str]] = {"new_zeros": (torch.zeros, "sizes"), "new_ones": (torch.ones, "sizes"),
                                            "new_full": (torch.full, "size_tuple")}
#: The keywords a row's constructor takes as they are.
_KEYWORDS = frozenset({"dtype", "device"})
#: What marks a ShapeError as the static tier's limit for factories (``static_limit``).
_LIMIT = "a tensor factory sized by per-instance host data"


def size_operands(e: ir.Call) -> tuple[list[ir.Expr], list[ir.Expr]] | None:
    """The operands of the factory call ``e`` that give its sizes: those of its first size (the bounds and step of
    ``torch.arange``, the first size of ``torch.zeros``/``ones``/``full``), and its later sizes; None where ``e``
    is no such call (another target, keywords other than ``dtype=``/``device=``, a starred argument, sizes not
    written out)."""
    how = known(FACTORIES, e.target) if e.kind is CallKind.TORCH else _method(e)[1]
    if how is None or not e.args or not set(e.kwargs) <= _KEYWORDS or any(isinstance(a, ir.Starred) for a in e.args):
        return None
    if how == "bounds":
        return (list(e.args), []) if len(e.args) <= 3 else None
    if how == "size_tuple" and len(e.args) != 2:
        return None
    first = e.args[0]
    if isinstance(first, (ir.TupleExpr, ir.ListExpr)):
        ok = first.items and (how == "size_tuple" or len(e.args) == 1)
        return ([first.items[0]], list(first.items[1:])) if ok else None
    return ([first], list(e.args[1:])) if how == "sizes" else None


def _method(e: ir.Call) -> tuple[Callable | None, str | None]:
    """The factory and the size form of ``x.new_zeros(...)`` (``METHODS``) called on a variable or a chain of its
    attributes (read again for each row), else ``(None, None)``."""
    r = e.receiver
    while isinstance(r, ir.Attr):
        r = r.obj
    if e.kind is not CallKind.METHOD or not isinstance(r, ir.Name) or e.target not in METHODS:
        return None, None
    return METHODS[e.target]  # type: ignore[index]


#: Shape queries: host code reading them reads the (per-instance) tensor, like ``.item()`` (§4.2).
SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "device"})
SHAPE_METHODS = frozenset({"size", "dim", "numel"})


def metadata_read(e: ir.Expr) -> ir.Expr | None:
    """The object ``e`` reads the metadata of (``o.dtype``, ``o.device``, ``o.ndim``, ``o.shape``, ``o.shape[i]``,
    ``o.size(i)``, ``o.dim()``, ``o.numel()`` with constant arguments), or None: of a per-instance tensor, a block
    reads it itself, a Python int (a dtype) under vmap (``blocks._Lowerer.shape_query``), and so does a factory's
    size read in its block (``Kinds.read_in_block``) where a stacked list's rows are built before it
    (``acrobat.analysis.rows``: the object alone goes in a variable first)."""
    match e:
        case ir.Attr(obj=o, attr=a) if a in SHAPE_ATTRS:
            return o
        case ir.Subscript(obj=ir.Attr(obj=o, attr="shape"), index=ir.Const()):
            return o
        case ir.Call(kind=CallKind.METHOD, target=t, receiver=o, args=args, kwargs=kw) if t in SHAPE_METHODS and \
                o is not None and all(isinstance(a, ir.Const) for a in [*args, *kw.values()]):
            return o
    return None


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
    """``torch.tensor(item, dtype=..., device=...)``: one row of the factory call ``e``, with ``e``'s keywords; of a
    factory method (``x.new_zeros(n)``) ``x.dtype`` and ``x.device`` where ``e`` gives none (``x`` read again)."""
    kwargs = dict(e.kwargs)
    if e.kind is CallKind.METHOD:
        for k in _KEYWORDS - set(kwargs):
            kwargs[k] = ir.Attr(e.loc, ir.renumbered(e.receiver), k)  # type: ignore[arg-type]
    return ir.Call(e.loc, CallKind.TORCH, torch.tensor, [item], kwargs)


def host_rows_call(e: ir.Call) -> ir.Call:
    """``factory_rows(factory, "file:line", *args, **kwargs)`` of the factory call ``e``: host code (its
    arguments move there). The keywords are copies (new node ids) of those ``row_constructor`` gives each row: a
    metadata read among them (``dtype=S.max(0).values.dtype``) is read in the row's block there and by host code
    here, which waits for the tensor (a value read, §4.2), where one node would be analysed as one or the other."""
    where = ir.Const(e.loc, f"{e.loc.file}:{e.loc.line}")
    factory = _method(e)[0] or e.target
    return ir.Call(e.loc, CallKind.HOST, factory_rows, [ir.Const(e.loc, factory), where, *e.args],
                   {k: ir.renumbered(v) for k, v in e.kwargs.items()})
