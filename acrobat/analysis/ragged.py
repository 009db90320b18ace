"""Lists of per-instance tensors as operands: ragged tensors (issue 10 §4, beyond the paper's §3 language).

``torch.stack(xs)`` of a list whose length differs per instance is a
*ragged* tensor: dim 0 (the list axis) has a different size in every
instance, so no batched (B, k, ...) tensor holds a launch's inputs. acrobat
keeps it as what it is, the list of its rows (``RaggedK``; at run time a
Python list of handles: stacking is free), and batches the operators
users apply to it in two ways, each one launch for the whole batch
whatever the lists' lengths:

- **row-wise operators** (``S @ W``, ``S @ q``, ``S + h``, ``S != 0``,
  ``torch.tanh(S)``, ``S.float()``, ``F.linear(S, W, b)``, ``F.embedding(S, W)``,
  ``alpha * S`` of two ragged tensors of one length) act on every row alone:
  they run as a map loop over the rows, whose nodes batch across rows and
  instances (§4.1); so do indices within the rows (``S[:, j]``, ``S[..., :k]``:
  ``keeps_list_axis``, ``row_within``) and the operator families of
  ``acrobat.analysis.rowops`` (``torch.where``, ``masked_fill``, ``F.layer_norm``,
  ``chunk``/``transpose``/``flatten`` along the rows' axes, ...: one rule per
  family); ``S.shape[0]``/``S.size(0)`` is the list's length;
- **reductions over the list axis** (``sum(xs)``, ``S.sum(0)``, ``mean``,
  ``max``/``amax``, ``min``/``amin``, ``logsumexp``) and **normalizations**
  over it (``softmax``/``log_softmax`` with ``dim=0``) are *segment*
  operators: one DFG node per instance holding all its rows, run as one
  segment reduction over the rows of the launch (``acrobat.runtime.segments``,
  whose ``defsegment`` table names them, their torch functions and kernels).
  ``a @ S`` of two ragged tensors is a row-wise product and a segment sum.
  A negative ``dim`` is the list axis where it is ``-(r+1)`` for rows of rank
  r: a reduction's where the text fixes r (``acrobat.analysis.ranks``), a
  normalization's read against the rows at run time (issue 18 §2).
- **rankings** over the list axis (``sort``, ``argsort``, ``topk`` with a host
  ``k``) are segment operators too, whose outputs have one row per row
  (``acrobat.analysis.rankings``); ``S.tolist()`` reads every row.

``torch.tensor(tokens)`` of a host list of per-instance length is a stacked
list of 0-D rows (``acrobat.analysis.token_lists``).

``torch.cat`` of a comprehension's items each written with a leading unit
axis (``e.unsqueeze(0)``) is rewritten into ``torch.stack`` of the items by
a call rule (``acrobat.analysis.rules``).

The per-instance functions below are what a row or a segment computes for
one instance; generated block code calls them (the runtime's batched
kernels must equal them).
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch.nn.functional as F

from acrobat.errors import LimitError
from acrobat.frontend import ir
from acrobat.frontend.ir import known
from acrobat.runtime.plan import SegmentOp
from acrobat.runtime.segments import FLAT_OK, RANKINGS, SEGMENT_FUNCTIONS, SEGMENT_OPS


#: Tensor methods that give the tensor another dtype (a row's own: the stacked list's).
CASTS = frozenset({"float", "double", "half", "long", "int", "bool"})
#: Pointwise operators applied to a ragged tensor alone: one row at a time gives the same rows.
_ROWWISE_FUNCTIONS = dict.fromkeys((
    torch.tanh, torch.sigmoid, torch.relu, torch.exp, torch.log, torch.abs, torch.neg, torch.sqrt, torch.sin,
    torch.cos, torch.square, F.relu, F.gelu, F.silu, F.elu, F.leaky_relu, F.softplus, F.tanh, F.sigmoid,
), True)
_ROWWISE_METHODS = frozenset({"tanh", "sigmoid", "relu", "exp", "log", "abs", "neg", "sqrt", "sin", "cos", "square",
                              *CASTS})
#: Row-wise with further operands that must not reach into the list axis.
_ROWWISE_WITH_OPERANDS = dict.fromkeys((F.linear, F.embedding, torch.matmul, torch.mul, torch.add, torch.sub,
                                        torch.div), True)
#: Arithmetic as torch functions (``torch.mul(f, S)``): row by row as the operators ``f * S`` are, whichever
#: operands are stacked lists.
_ELEMENTWISE = dict.fromkeys((torch.mul, torch.add, torch.sub, torch.div), True)
#: Row-wise with further operands that never meet the list axis: ``F.linear`` acts on the last dim only,
#: ``F.embedding`` looks each index of its first operand up in its weight.
_PER_ROW_OPERANDS = dict.fromkeys((F.linear, F.embedding), True)


def segment_function(fn: Any) -> str | None:
    """The segment operator name of a torch function (``torch.sum`` -> ``"sum"``), else None."""
    return known(SEGMENT_FUNCTIONS, fn)


def is_rowwise_function(fn: Any, only_operand: bool) -> bool:
    """True when the torch function ``fn`` applied to a ragged first operand acts row by row."""
    return bool(known(_ROWWISE_FUNCTIONS, fn) or not only_operand and known(_ROWWISE_WITH_OPERANDS, fn))


def is_elementwise(fn: Any) -> bool:
    """True for the torch functions of arithmetic (``torch.mul``), which act row by row on stacked lists as the
    operators do (``torch.mul(f, S)`` as ``f * S``), a stacked list as either operand."""
    return bool(known(_ELEMENTWISE, fn))


def takes_dense_whole(fn: Any) -> bool:
    """True when the torch function ``fn``, row-wise on a ragged first operand, takes its other operands whole
    (their dimensions never meet the list axis: ``F.linear``'s weight, ``F.embedding``'s table)."""
    return bool(known(_PER_ROW_OPERANDS, fn))


def is_rowwise_method(name: str) -> bool:
    """True when the tensor method ``name`` with no arguments acts row by row."""
    return name in _ROWWISE_METHODS


def is_stack(fn: Any) -> bool:
    """True for ``torch.stack``."""
    return fn is torch.stack


# --------------------------------------------------- per-instance semantics


def fitted(dense: Any, row: torch.Tensor) -> Any:
    """A dense operand of an operator on a stacked list as it meets one of its rows ``row``: a tensor of one
    more dimension than the row whose size there is 1 broadcasts along the list axis, so each row meets its
    ``[0]`` (``S - S.mean(0, keepdim=True)``: ``row - m[0]``, issue 18 §2); any other operand is itself
    (``row_operands`` rejects one with more dimensions than the row)."""
    if isinstance(dense, torch.Tensor) and dense.dim() == row.dim() + 1 and dense.shape[0] == 1:
        return dense[0]
    return dense


def row_operands(value: torch.Tensor, rows: tuple[torch.Tensor, ...], dense: tuple[Any, ...],
                 keep_dtype: bool = False) -> torch.Tensor:
    """``value`` (an operator applied to ``rows`` and ``dense``, each ``fitted`` to the rows), once checked to
    equal the stacked operator's row (``keep_dtype``: the operator names its dtype, ``zeros_like(S, dtype=...)``,
    so no promotion of the operands decides it).

    Row by row equals the operator on whole stacked lists only when every
    stacked operand has rows of one rank (broadcasting then pairs their list
    axes) and no dense operand has more dimensions than a row (it would
    broadcast against the list axis, where it has not size 1: ``fitted``).

    Raises:
        LimitError: an operand would reach into a list axis.
    """
    rank = rows[0].dim()
    if any(r.dim() != rank for r in rows):
        raise LimitError(f"stacked lists with rows of shapes {[tuple(r.shape) for r in rows]}: PyTorch would "
                         "broadcast one's list axis against the other's rows; give their rows one rank")
    for d in dense:
        if isinstance(d, torch.Tensor) and d.dim() > rank:
            raise LimitError(f"an operand of shape {tuple(d.shape)} would broadcast against the list axis of a "
                             f"stacked list (rows of shape {tuple(rows[0].shape)}): acrobat applies operators to "
                             "such a tensor row by row; reduce it first or use operands with fewer dimensions")
    want = value.dtype if keep_dtype else stacked_dtype(rows, dense)
    if value.dtype != want and _category(value.dtype) == _category(want) >= 1:
        return value.to(want)  # a width PyTorch's promotion of 0-D operands chose (an operator's own kept)
    return value


def _category(dtype: torch.dtype) -> int:
    """PyTorch's type-promotion category: 0 bool, 1 integer, 2 floating, 3 complex."""
    return 0 if dtype == torch.bool else 3 if dtype.is_complex else 2 if dtype.is_floating_point else 1


def stacked_dtype(rows: tuple[torch.Tensor, ...], dense: tuple[Any, ...]) -> torch.dtype:
    """The dtype an operator gives on the stacked lists ``rows`` (each at least 1-D in the plain program) and
    the ``dense`` operands. Row by row a stacked list's rows may be 0-D, and PyTorch promotes two 0-D
    operands by dtype (``float32`` row and a host ``float64`` number: ``float64``), where the plain
    program's stacked tensor has dimensions and keeps its dtype (``float32``): dimensioned operands decide,
    and 0-D ones only where their category (bool < integer < floating < complex) is higher."""
    dims = [r.dtype for r in rows] + [d.dtype for d in dense if isinstance(d, torch.Tensor) and d.dim() > 0]
    zero = [d.dtype for d in dense if isinstance(d, torch.Tensor) and d.dim() == 0]
    want = dims[0]
    for dt in dims[1:]:
        want = torch.promote_types(want, dt)
    if zero:
        z = zero[0]
        for dt in zero[1:]:
            z = torch.promote_types(z, dt)
        if _category(z) > _category(want):
            want = z
    return want


def keeps_list_axis(first: ir.Expr) -> bool:
    """Whether ``first``, the first item of a tuple index of a stacked list, leaves its list axis whole: a full
    slice ``:`` or ``...`` (``S[:, j]``, ``S[..., :k]``: the same index within every row, issue 18 §2)."""
    if isinstance(first, ir.Slice):
        return first.lower is None and first.upper is None and first.step is None
    return isinstance(first, ir.Const) and first.value is Ellipsis


def row_within(row: torch.Tensor, axes: int) -> torch.Tensor:
    """``row``, once checked to have at least ``axes`` dimensions: ``S[..., i1, ..., ik]`` of a stacked list indexes
    ``axes`` (k) trailing axes of every row, as ``row[..., i1, ..., ik]``.

    Raises:
        LimitError: the rows have fewer dimensions (the index would reach the list axis).
    """
    if row.dim() < axes:
        raise LimitError(f"`S[..., ...]` indexes {axes} trailing axes of a stacked list with rows of shape "
                         f"{tuple(row.shape)}, so it would reach its list axis, whose length differs per instance: "
                         "index its rows (`S[:, j]`) or the list (`S[i]`, `S[a:b]`)")
    return row


def row_matmul(row: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """One row of ``torch.stack(xs) @ w``: ``row @ w`` for a matrix or vector ``w``.

    Raises:
        LimitError: ``w`` has more than 2 dimensions (a batched matmul would broadcast over the list axis).
    """
    if w.dim() > 2 or row.dim() == 0:
        raise LimitError(f"`torch.stack(xs) @ w` with rows of shape {tuple(row.shape)} and w of shape "
                         f"{tuple(w.shape)}: acrobat batches it row by row, which needs a 1-D row and a 1-D or 2-D w")
    return row @ w


def row_squeeze(row: torch.Tensor, dim: int) -> torch.Tensor:
    """One row of ``torch.stack(xs).squeeze(dim)`` for a negative ``dim`` (a trailing axis).

    Raises:
        LimitError: ``dim`` reaches the list axis (the rows have fewer than ``-dim`` dimensions).
    """
    if row.dim() < -dim:
        raise LimitError(f"squeeze({dim}) of a stacked list with rows of shape {tuple(row.shape)} would reach its "
                         "list axis, whose length differs per instance")
    return row.squeeze(dim)


def unit_row(x: torch.Tensor, rank: int, where: str) -> torch.Tensor:
    """``x[0]`` for a tensor ``x`` of shape ``(1, ...)``: the one row ``x`` adds to a stacked list where the model
    concatenates such tensors along dim 0 (``torch.cat(cs, dim=0)`` of a per-instance list of ``(1, H)`` states:
    the stack of their ``(H,)`` rows) or repeats one along dim 0 (``t.repeat(len(S), 1)``: ``len(S)`` rows
    ``t[0]``), issue 18 §2. ``rank``: the rank ``x`` must have (the number of ``repeat``'s sizes), 0 for any
    rank of at least 1; ``where``: the model's file:line. A tensor of fewer than ``rank`` dimensions is repeated
    as ``repeat`` takes it, with leading dimensions of size 1: ``t.repeat(n, 1)`` of an ``(H,)`` ``t`` is ``n``
    rows ``t`` (treelstm.pytorch's ``self.fx(inputs).repeat(len(child_h), 1)`` of one word's ``(D,)`` input).

    Raises:
        LimitError: ``x`` is 0-D (for ``rank`` 0), of more than ``rank`` dimensions, or of ``rank`` with a dim 0
            that is not 1 (it would add other rows than one: the dynamic tier runs the instance).
    """
    if rank and x.dim() < rank:
        return x.reshape((1,) * (rank - 1 - x.dim()) + tuple(x.shape))
    if x.dim() == 0 or rank and x.dim() != rank or x.shape[0] != 1:
        raise LimitError(f"acrobat takes a tensor of shape {tuple(x.shape)} at {where} as the one row of a stacked "
                         f"list, which needs a shape (1, ...){f' of {rank} dimensions' if rank else ''}")
    return x[0]


def row_scale(a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """One term of ``a @ torch.stack(xs)`` for a 1-D ragged ``a``: ``a_j * s_j`` (then summed over j).

    Raises:
        LimitError: ``a``'s rows are not scalars (``a`` is not 1-D).
    """
    if a.dim() != 0 or s.dim() > 1:
        raise LimitError(f"`a @ torch.stack(xs)` is batched for a 1-D `a` (one weight per list item) and a 1-D or "
                         f"2-D stack; their rows have shapes {tuple(a.shape)} and {tuple(s.shape)}")
    return a * s


#: Methods and functions whose ``dim`` is an axis of a stacked list: a positive one (past the list axis) is the
#: axis ``dim - 1`` of every row, so they act row by row (``torch.stack(xs).unsqueeze(1)``, ``F.log_softmax(S,
#: dim=1)``; issue 18 §2).
ROW_AXIS_METHODS = frozenset({"squeeze", "unsqueeze", "softmax", "log_softmax"})
ROW_AXIS_FUNCTIONS = dict.fromkeys((torch.softmax, torch.log_softmax, F.softmax, F.log_softmax), True)
#: Methods that give a stacked list new row shapes: ``S.view(len(xs), 1, -1)`` is ``row.view(1, -1)`` of each row.
RESHAPE_METHODS = frozenset({"view", "reshape"})


def dim_operand(e: ir.Call) -> ir.Expr | None:
    """The ``dim`` argument of a call of ``ROW_AXIS_METHODS``/``ROW_AXIS_FUNCTIONS`` (positional or keyword), or
    None where it has none."""
    at = 0 if e.kind is ir.CallKind.METHOD else 1
    return e.args[at] if len(e.args) > at else e.kwargs.get("dim")


def row_axis(e: ir.Call) -> int | None:
    """The constant positive ``dim`` of a call of ``ROW_AXIS_METHODS``/``ROW_AXIS_FUNCTIONS`` given its operand
    and ``dim`` only (applied to a stacked list, the same call along ``dim - 1`` of every row), else None."""
    if not (e.kind is ir.CallKind.METHOD and e.target in ROW_AXIS_METHODS or
            e.kind is ir.CallKind.TORCH and known(ROW_AXIS_FUNCTIONS, e.target)):
        return None
    dim = dim_operand(e)
    extra = len(e.args) + len(e.kwargs) - (1 if e.kind is ir.CallKind.METHOD else 2)
    ok = extra == 0 and isinstance(dim, ir.Const) and type(dim.value) is int and dim.value > 0
    return dim.value if ok else None  # type: ignore[union-attr]


def row_count(rows: list, n: Any, later: tuple) -> list:
    """``rows`` (the row handles of a stacked list ``S``), once checked against ``n``, the first size given to
    ``S.view(n, ...)``/``S.reshape(n, ...)`` (host code before its row-by-row form; ``later``: the sizes after
    it, constant or host ints). The first size must be the list's length, or -1 where no later size is.

    Raises:
        RuntimeError: ``n`` is neither (PyTorch's view would make other rows, or raise).
        TypeError: ``n`` is not an int.
    """
    infers = any(operator.index(m) == -1 for m in later)
    n = operator.index(n)
    if n != len(rows) and not (n == -1 and not infers):
        raise RuntimeError(f"`.view({n}, ...)` of a stacked list of {len(rows)} rows: acrobat reshapes it row by "
                           f"row, which needs the list's length ({len(rows)}) as its first size")
    return rows


def segment_reference(op: SegmentOp) -> Callable[[list[torch.Tensor]], Any]:
    """What segment operator ``op`` computes for one instance's list of rows (plain PyTorch): ``op`` of their
    stack over ``op.dim``, with ``keepdim`` where it is set (``flat``: over all of it); for a ranking, their stable sort (``topk``: all of
    it, values and indices)."""
    def run(rows: list[torch.Tensor]) -> Any:
        if op.op in RANKINGS:  # a topk node sorts the whole list; host code keeps its first k rows
            ranked = torch.sort(torch.stack(rows), dim=op.dim, descending=op.descending, stable=True)
            return ranked.indices if op.op == "argsort" else ranked
        if op.flat:
            return getattr(torch, op.op)(torch.stack(rows))
        keep = {"keepdim": True} if op.keepdim else {}
        return getattr(torch, op.op)(torch.stack(rows), op.dim, **keep)
    run.__name__ = f"segment_{op.op}"
    return run
