"""Rankings of a stacked list: ``torch.topk``, ``torch.sort`` and ``torch.argsort`` over its list axis (issue 18 §2).

Beyond the paper's §3 language, like the other segment operators of
``acrobat.analysis.ragged``. ``torch.sort(S)``/``S.argsort()`` of a stacked
list ``S`` whose length differs per instance is a segment operator whose
outputs have one row per row of ``S`` (``ragged_out``): one DFG node per
instance, one stable segmented sort for the launch
(``acrobat.runtime.segments``). ``torch.topk(S, k)`` is the same node sorting
the whole list, largest first (``largest=``), and host code then keeps each
output's first ``k`` rows (``top_rows``): ``k`` is a host int that may differ
per instance. The results are stacked lists again: ``.values``/``.indices``
reduce, map or ``.tolist()`` like any other.

Ties: the batched rankings order equal rows by their list position (as
``torch.sort(..., stable=True)``). PyTorch leaves the order of ties of
``topk`` and of an unstable ``sort`` unspecified (on CPU it differs with the
list's length), so their indices equal PyTorch's where the ranked values are
distinct; the values always do.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable

import torch

from acrobat.analysis import ranks
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind, known
from acrobat.runtime.plan import NoRows, SegmentOp
from acrobat.runtime.segments import RANKINGS, SEGMENT_FUNCTIONS, SEGMENT_OPS

#: The positional parameters after the tensor, then the keyword-only ones, as PyTorch names them.
_PARAMS = {"topk": ("k", "dim", "largest", "sorted"), "sort": ("dim", "descending"),
           "argsort": ("dim", "descending")}
_KEYWORD_ONLY = {"topk": (), "sort": ("stable",), "argsort": ("stable",)}
#: The flags each ranking takes, and their defaults.
_FLAGS = {"largest": True, "sorted": True, "descending": False, "stable": False}

Error = Callable[[ir.Expr, str], CompileError]


def ranking_name(e: ir.Call) -> str | None:
    """``"topk"``, ``"sort"`` or ``"argsort"`` when ``e`` calls that torch function or tensor method, else None."""
    if e.kind is CallKind.METHOD:
        return e.target if e.target in RANKINGS else None  # type: ignore[return-value]
    name = known(SEGMENT_FUNCTIONS, e.target) if e.kind is CallKind.TORCH else None
    return name if name in RANKINGS else None


def ranked_operand(e: ir.Call) -> ir.Expr:
    """The tensor a ranking call ranks: the method's receiver or the function's first argument."""
    return e.receiver if e.kind is CallKind.METHOD and e.receiver is not None else e.args[0]


def arguments(e: ir.Call, name: str, error: Error) -> dict[str, ir.Expr]:
    """The arguments of ranking call ``e`` after the ranked tensor, by PyTorch's parameter names.

    Raises:
        CompileError: more positional arguments than the ranking takes, or a keyword it does not take.
    """
    rest = e.args if e.kind is CallKind.METHOD else e.args[1:]
    params = _PARAMS[name]
    if len(rest) > len(params):
        raise error(e, f"{name} takes at most {len(params)} arguments after the tensor ({', '.join(params)})")
    bound = dict(zip(params, rest))
    for key, value in e.kwargs.items():
        if key in bound or key not in params + _KEYWORD_ONLY[name]:
            raise error(e, f"{name} of a stacked list: unexpected or repeated argument `{key}=`")
        bound[key] = value
    return bound


def ranking_form(e: ir.Call, name: str, fn: ir.Function, is_host: Callable[[ir.Expr], bool],
                 error: Error) -> SegmentOp:
    """The segment operator ranking call ``e`` (``name``) applies to a stacked list of ``fn``: over the list axis,
    ``dim=0`` or a negative dim (default -1). Where the rank of the list's items is known
    (``acrobat.analysis.ranks``) a negative dim is resolved here; else it is read against the rows at run time
    (the list axis, or for ``sort``/``argsort`` an axis of every row). ``is_host(x)``: ``x`` is host data.

    Raises:
        CompileError: a positive dim; a flag that is not a constant bool; ``sorted=False``; a ``k`` that is not
            host data; a dim known to be an axis of each item (``topk``) or out of range.
    """
    bound = arguments(e, name, error)
    flags: dict[str, bool] = {}
    for flag, default in _FLAGS.items():
        x = bound.get(flag)
        if x is not None and not (isinstance(x, ir.Const) and isinstance(x.value, bool)):
            raise error(x, f"{name}'s `{flag}` of a stacked list must be a constant True or False")
        flags[flag] = default if x is None else x.value  # type: ignore[union-attr]
    if not flags["sorted"]:
        raise error(e, "topk(sorted=False) of a stacked list: PyTorch leaves the order of its result unspecified, "
                       "so acrobat cannot give the same one; write sorted=True (the default)")
    if name == "topk" and ("k" not in bound or not is_host(bound["k"])):
        raise error(e, "topk of a stacked list takes `k` as a host int (e.g. `min(3, len(xs))`), not a tensor")
    dim = bound.get("dim")
    d = -1 if dim is None else dim.value if isinstance(dim, ir.Const) else None
    if type(d) is not int or d > 0:
        raise error(e, f"{name} of a list whose length differs per instance must work along the list axis: write "
                       "dim=0 or the negative dim that is the list axis (a constant)")
    r = ranks.row_rank(ranked_operand(e), fn) if d < 0 else None
    if r is not None and d < -(r + 1):
        raise error(e, f"{name} with dim={d} of a stacked list of {r}-D items is out of range (its list axis is "
                       f"dim=0, or dim={-(r + 1)})")
    if r is not None and d == -(r + 1):
        d = 0
    if name == "topk" and r is not None and d < 0:
        raise error(e, f"topk with dim={d} of a stacked list of {r}-D items picks within each item: acrobat "
                       f"batches topk over the list axis only (dim=0, or dim={-(r + 1)}); loop over the list")
    descending = flags["largest"] if name == "topk" else flags["descending"]
    return dataclasses.replace(SEGMENT_OPS[name], dim=d, descending=descending)


def top_rows(ranked: Any, k: int) -> torch.return_types.topk:
    """``torch.topk(S, k)`` for one instance, from ``ranked``, the ``(values, indices)`` lists of rows of ``S``
    sorted over the list axis: each list's first ``k`` rows (host code; ``k`` a host int).

    Raises:
        RuntimeError: ``k`` is negative or larger than the list (PyTorch's message; the skeleton names the
            instance and source line).
        TypeError: ``k`` is not an int.
    """
    values, indices = ranked
    k = operator.index(k)
    if not 0 <= k <= len(values):
        raise RuntimeError(f"selected index k out of range (k={k} for a stacked list of {len(values)} items)")
    if k == 0:  # an empty result keeps a row of the list, for its shape (``NoRows``)
        return torch.return_types.topk((NoRows(values[0]), NoRows(indices[0])))  # type: ignore[arg-type]
    return torch.return_types.topk((values[:k], indices[:k]))
