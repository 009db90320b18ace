"""Operators within the rows of a stacked list, by rules (issue 18 §2 and §3, beyond the paper's §3 language).

A stacked list ``S`` (``torch.stack(xs)``, ``p.emb(torch.tensor(tokens))``:
dim 0, the list axis, differs per instance) is held as the list of its rows
(``acrobat.analysis.ragged``). An operator that acts within each row runs
as a map loop over the rows, whose nodes batch across rows and instances
(§4.1). ``ROW_RULES`` says, per operator family, how a call on ``S`` becomes
the call on one row, in the style of JAX's ``primitive_batchers``: one
entry per operator, no branch per operator.

- **pointwise** (``POINTWISE``): ``torch.where``, ``torch.maximum``,
  ``clamp``, ``pow``, ``masked_fill``, ``zeros_like``, ``F.dropout``, ...:
  any tensor operand may be a stacked list (of one length), a dense one
  broadcasts against every row (``ragged.fitted``/``ragged.row_operands``
  reject one that would reach the list axis);
- **whole** (``WHOLE``): ``.to()``, ``.type_as()``, ``.clone()``,
  ``.contiguous()``, ``.detach()``: the stacked list is the first operand,
  the others are taken whole (a dtype, a tensor whose dtype is read);
- **dims** (``RowRule.dims``): a ``dim`` of ``S`` is a row's ``dim - 1``
  where it is positive, the same where negative (checked at run time to
  miss the list axis: ``reaches``); dim 0, the list axis, is rejected
  (``F.normalize``, ``narrow``, ``transpose``, ``permute``, ``flatten``,
  ``chunk``, ``split`` with a list of sizes); ``F.layer_norm``'s
  ``normalized_shape`` names trailing axes (``RowRule.trailing``);
  ``expand``/``repeat`` take the list axis' size first (``RowRule.lead``:
  ``-1``, or ``1`` for ``repeat``).

Anything that could mix rows (dim 0, a reduction without ``dim``, a view that
merges the list axis with others) stays rejected with the message of the
call (``message``), or is a segment operator (``acrobat.analysis.ragged``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from acrobat.errors import LimitError
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind, known


@dataclass(frozen=True)
class Arg:
    """An argument of a call, by its position (among the arguments after the stacked list: a method's receiver
    or a function's first argument) and its keyword ``name``; ``default`` where it may be left out
    (``MISSING``: it may not)."""

    at: int
    name: str
    default: Any = None


MISSING = object()


@dataclass(frozen=True)
class RowRule:
    """How a call on a stacked list ``S`` becomes the call on one of its rows.

    ``pointwise``: any tensor operand may be a stacked list, dense ones
    broadcast against the rows (else only the first operand is one, the others
    are taken whole). ``dims``: arguments that are a dim of ``S`` (a row's
    ``dim - 1``; ``varargs``: the dims are all the positional arguments, as
    ``permute(0, 2, 1)``, whose first must then be 0). ``trailing``: an
    argument naming trailing axes by their sizes (``normalized_shape``).
    ``lead``: the sizes are all the positional arguments, the first the list
    axis', which must be ``lead`` (``expand(-1, 3, 4)``, ``repeat(1, 2)``).
    ``outputs``: the argument that is the constant number of results
    (``chunk``: a tuple of stacked lists). ``einsum``: a constant equation
    first, then operands any of which may be stacked lists, each with the list
    axis' letter first; the output's first letter too (``row_equation``).
    ``join``: ``joined``, the form ``torch.cat``/``torch.stack`` of a list
    display of stacked lists takes (``join_call``): every tensor operand a
    stacked list, the dim the first argument after the operator's name.
    """

    pointwise: bool = False
    dims: tuple[Arg, ...] = ()
    varargs: bool = False
    trailing: Arg | None = None
    lead: int | None = None
    outputs: Arg | None = None
    einsum: bool = False
    join: bool = False


POINTWISE = RowRule(pointwise=True)
WHOLE = RowRule()
_DIM = Arg(0, "dim", MISSING)

#: ``ROW_RULES[(CallKind, target)]``: the rule of an operator applied within the rows of a stacked list.
ROW_RULES: dict[tuple[CallKind, object], RowRule] = {}


def defrow(kind: CallKind, rule: RowRule, *targets: object) -> None:
    """Install ``rule`` for calls of ``kind`` to each of ``targets``."""
    for target in targets:
        ROW_RULES[(kind, target)] = rule


defrow(CallKind.TORCH, POINTWISE, torch.where, torch.maximum, torch.minimum, torch.fmax, torch.fmin, torch.clamp,
       torch.clip, torch.clamp_min, torch.clamp_max, torch.pow, torch.floor, torch.ceil, torch.trunc, torch.round,
       torch.sign, torch.rsqrt, torch.reciprocal, torch.log1p, torch.expm1, torch.log2, torch.erf, torch.tan,
       torch.atan2, torch.remainder, torch.fmod, torch.lerp, torch.logical_and, torch.logical_or, torch.logical_xor,
       torch.logical_not, torch.bitwise_not, torch.masked_fill, torch.zeros_like, torch.ones_like, torch.full_like,
       torch.rand_like, torch.randn_like, torch.isnan, torch.isinf, torch.nan_to_num, F.dropout, F.hardtanh,
       F.relu6, F.selu, F.celu, F.softsign, F.mish, F.hardswish, F.hardsigmoid, F.logsigmoid, F.threshold)
defrow(CallKind.METHOD, POINTWISE, "where", "maximum", "minimum", "clamp", "clip", "clamp_min", "clamp_max", "pow",
       "floor", "ceil", "trunc", "round", "sign", "rsqrt", "reciprocal", "log1p", "expm1", "masked_fill", "mul",
       "add", "sub", "div", "logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "isinf",
       "nan_to_num", "lerp", "remainder", "fmod")
defrow(CallKind.METHOD, WHOLE, "to", "type_as", "clone", "contiguous", "detach")
defrow(CallKind.TORCH, WHOLE, torch.clone)
defrow(CallKind.TORCH, RowRule(dims=(Arg(1, "dim", 1),)), F.normalize)  # F.normalize(x, p=2.0, dim=1, eps)
defrow(CallKind.TORCH, RowRule(trailing=Arg(0, "normalized_shape", MISSING)), F.layer_norm)
defrow(CallKind.METHOD, RowRule(dims=(_DIM,)), "narrow")
defrow(CallKind.TORCH, RowRule(dims=(_DIM,)), torch.narrow)
defrow(CallKind.METHOD, RowRule(dims=(Arg(0, "dim0", MISSING), Arg(1, "dim1", MISSING))), "transpose", "swapaxes")
defrow(CallKind.TORCH, RowRule(dims=(Arg(0, "dim0", MISSING), Arg(1, "dim1", MISSING))), torch.transpose)
defrow(CallKind.METHOD, RowRule(varargs=True), "permute")
defrow(CallKind.METHOD, RowRule(dims=(Arg(0, "start_dim", 0), Arg(1, "end_dim", -1))), "flatten")
defrow(CallKind.TORCH, RowRule(dims=(Arg(0, "start_dim", 0), Arg(1, "end_dim", -1))), torch.flatten)
defrow(CallKind.METHOD, RowRule(dims=(Arg(1, "dim", 0),), outputs=Arg(0, "chunks", MISSING)), "chunk")
defrow(CallKind.TORCH, RowRule(dims=(Arg(1, "dim", 0),), outputs=Arg(0, "chunks", MISSING)), torch.chunk)
defrow(CallKind.METHOD, RowRule(dims=(Arg(1, "dim", 0),), outputs=Arg(0, "split_size", MISSING)), "split")
defrow(CallKind.TORCH, RowRule(einsum=True), torch.einsum)
defrow(CallKind.METHOD, RowRule(lead=-1), "expand")
defrow(CallKind.METHOD, RowRule(lead=1), "repeat")


def joined(op: str, dim: int, *rows: torch.Tensor) -> torch.Tensor:
    """``torch.cat(rows, dim)`` (``op`` ``"cat"``) or ``torch.stack(rows, dim)``: one row of ``torch.cat([S, T],
    dim=d)`` of stacked lists of one length along a row axis (``dim``, the rows' ``d - 1``, or the same negative)."""
    return getattr(torch, op)(rows, dim)


_JOINS = {torch.cat: "cat", torch.concat: "cat", torch.concatenate: "cat", torch.stack: "stack"}


def join_call(e: ir.Call, stacked: Callable[[ir.Expr], bool]) -> bool:
    """Rewrite ``e``, ``torch.cat([S, T], dim=d)`` / ``torch.stack((S, T), d)`` of a list or tuple display one of
    whose items is a stacked list (``stacked``), into ``joined("cat", d, S, T)``, whose rule (``join``) applies it
    row by row; True where it did. A display's items are operands one by one (a list variable's are not: the
    list's own rules, ``acrobat.analysis.rules``); only along a constant dim other than 0 (the list axis)."""
    op = known(_JOINS, e.target) if e.kind is CallKind.TORCH else None
    items = e.args[0] if e.args else None
    if op is None or not isinstance(items, (ir.ListExpr, ir.TupleExpr)) or len(e.args) > 2 or \
            any(k != "dim" for k in e.kwargs) or not any(map(stacked, items.items)):
        return False
    dim = e.args[1] if len(e.args) == 2 else e.kwargs.get("dim", ir.Const(e.loc, 0))
    if not isinstance(dim, ir.Const) or dim.value == 0:
        return False  # along the list axis (or a dim the text does not fix): the list's own rules judge it
    e.target, e.args, e.kwargs = joined, [ir.Const(e.loc, op), dim, *items.items], {}
    return True


defrow(CallKind.TORCH, RowRule(dims=(_DIM,), join=True), joined)


def rule_of(e: ir.Call) -> RowRule | None:
    """The row rule of the call ``e``, else None."""
    return known(ROW_RULES, (e.kind, e.target)) if e.kind in (CallKind.TORCH, CallKind.METHOD) else None


def rest(e: ir.Call) -> list[ir.Expr]:
    """The positional arguments of ``e`` after its stacked operand (a method's receiver, a function's first)."""
    return list(e.args) if e.kind is CallKind.METHOD else list(e.args[1:])  # `joined`: its dim, then the rows


def argument(e: ir.Call, arg: Arg) -> ir.Expr | None:
    """The expression ``e`` passes for ``arg`` (positional or by keyword), None where it leaves it out."""
    after = rest(e)
    return after[arg.at] if len(after) > arg.at else e.kwargs.get(arg.name)


def _const_str(x: ir.Expr) -> str | None:
    """The value of ``x`` where it is a constant str, else None."""
    return x.value if isinstance(x, ir.Const) and isinstance(x.value, str) else None


def _int(x: ir.Expr | None) -> int | None:
    """The value of ``x`` where it is a constant int, else None."""
    return x.value if isinstance(x, ir.Const) and type(x.value) is int else None


@dataclass(frozen=True)
class RowForm:
    """What a call on a stacked list is, row by row: ``dims``, each dim argument with the row's dim in place of the
    stacked list's; ``rank``, how many dims every row must have at least (a negative dim ``-rank``; ``trailing``:
    the argument whose length is such a rank, ``normalized_shape``) or exactly (``exact``: ``lead``'s sizes);
    ``outputs``, None for one stacked list, else the size of the tuple of stacked lists the call gives;
    ``equation``, an einsum's for one row."""

    dims: tuple[tuple[Arg, int], ...] = ()
    rank: int = 0
    exact: bool = False
    outputs: int | None = None
    equation: str | None = None


def form(e: ir.Call, rule: RowRule, what: str, stacked: list[bool]) -> RowForm | str:
    """``e`` under ``rule`` row by row, or why acrobat cannot batch it so (``what``: how the message names the
    call, ``.chunk()``; ``stacked``: which of its ``operands`` are stacked lists).

    A dim must be a constant int: a positive one is the row's ``dim - 1``, a
    negative one the same (the rows must have at least ``|dim|`` dims:
    ``rank``); 0 is the list axis, which no row holds."""
    if rule.einsum:
        return row_equation(e, stacked, what)
    if rule.varargs or rule.lead is not None:
        if e.kwargs or not rest(e):
            return f"`{what}` of a stacked list is batched row by row with its sizes or dims given one by one"
        given: list[tuple[Arg, ir.Expr | None]] = [(Arg(i, ""), x) for i, x in enumerate(rest(e))]
    else:
        given = [(a, argument(e, a)) for a in rule.dims]
    dims: list[tuple[Arg, int]] = []
    rank = 0
    for i, (a, x) in enumerate(given):
        if x is None and a.default is MISSING:
            return f"`{what}` of a stacked list is batched row by row with its dim given"
        d = a.default if x is None else _int(x)
        if d is None:
            return f"`{what}` of a stacked list is batched row by row with constant int dims and sizes"
        if rule.lead is not None:
            if i == 0 and d != rule.lead:
                return (f"`{what}` of a stacked list is batched row by row, which keeps its list axis: write "
                        f"{rule.lead} as its first size (the list's length differs per instance)")
            continue
        if rule.varargs and i == 0:
            if d != 0:
                return f"`{what}` of a stacked list moves its list axis: acrobat keeps it first (`.permute(0, ...)`)"
            continue
        if d == 0:
            default = " (its default)" if x is None else ""
            return (f"`{what}` with dim 0{default} acts on the list axis of a stacked list, whose length differs per "
                    "instance: acrobat batches it within the rows only (a dim >= 1, or a negative dim of the rows)")
        dims.append((a, d - 1 if d > 0 else d))
        # the rows' dims the stacked list's dim d needs (d - 1 must exist for d > 0: PyTorch takes dim 0 of a 0-D
        # tensor); a stack's new axis may also come after them all
        rank = max(rank, abs(d) - (1 if rule.join and _const_str(e.args[0]) == "stack" else 0))
    if rule.lead is not None:
        return RowForm(rank=len(given) - 1, exact=True)
    outputs = None
    if rule.outputs is not None:
        n = argument(e, rule.outputs)
        if e.target == "split" and isinstance(n, (ir.ListExpr, ir.TupleExpr)) and n.items:
            outputs = len(n.items)  # `split([2, 2], dim=1)`: as many parts
        elif e.target != "split" and _int(n) is not None and 0 < _int(n) <= 16:  # type: ignore[operator]
            outputs = _int(n)
        else:
            return (f"`{what}` of a stacked list is batched row by row into a constant number of parts: "
                    "`.chunk(n, dim)` with a constant n, or `.split([a, b, ...], dim)`")
    return RowForm(tuple(dims), rank, False, outputs)


def row_equation(e: ir.Call, stacked: list[bool], what: str) -> RowForm | str:
    """``torch.einsum(eq, *xs)`` for one row: every stacked operand's subscripts and the output's start with one
    letter, the list axis', found nowhere else; the row's equation drops it (``"ld,de->le"``: ``"d,de->e"``)."""
    eq = e.args[0].value if e.args and isinstance(e.args[0], ir.Const) else None
    why = (f"`{what}` of a stacked list is batched row by row with a constant equation `\"...->...\"` whose "
           "stacked operands and output each start with the list axis' letter, which no other subscript uses, and "
           "its operands given one by one")
    if not isinstance(eq, str) or e.kwargs or "..." in eq or "->" not in eq:
        return why
    ins, out = eq.replace(" ", "").split("->")
    subs = ins.split(",")
    if len(subs) != len(e.args) - 1 or not out:
        return why
    axis = out[0]
    for sub, s in zip(subs, stacked[1:]):
        if s and not sub.startswith(axis) or sub.count(axis) != (1 if s else 0):
            return why
    if out.count(axis) != 1:
        return why
    row = ",".join(sub.replace(axis, "") for sub in subs) + "->" + out[1:]
    return RowForm(equation=row)


def row_call(e: ir.Call, rule: RowRule, f: RowForm, args: list[ir.Expr], node: Callable[[ir.Expr], ir.Expr],
             part: int | None = None) -> ir.Expr:
    """The call ``e`` on one row: ``args`` are ``e``'s ``operands`` (receiver,
    positional, keyword), the row in place of the stacked list; every dim of ``f`` becomes the row's (a left out
    default written out), ``lead``'s first size goes, the row is checked first where ``f`` needs a rank
    (``reaches``, ``exact_rank``), and ``part`` picks a result of ``chunk``/``split`` (``chunk_of``). ``node``
    registers each new operator node."""
    loc = e.loc
    n = len(e.args) + (e.receiver is not None)
    pos, kws = list(args[:n]), dict(zip(e.kwargs, args[n:]))
    first = 1  # after the stacked operand (a receiver or first argument): what `rest` lists
    what = describe(e)
    if f.equation is not None:
        return ir.Call(loc, e.kind, e.target, [ir.Const(loc, f.equation), *pos[1:]], kws)
    if f.exact:
        pos[0] = node(ir.Call(loc, CallKind.TORCH, exact_rank, [pos[0], ir.Const(loc, f.rank), ir.Const(loc, what)],
                              {}))
        pos = pos[:first] + pos[first + 1:]
    elif f.rank or rule.trailing is not None:
        trailing = argument(e, rule.trailing) if rule.trailing is not None else None
        shape = args[[id(x) for x in operands(e)].index(id(trailing))] if trailing is not None else ir.Const(loc, None)
        at = 2 if rule.join else 0  # `joined(op, dim, *rows)`: its first row
        pos[at] = node(ir.Call(loc, CallKind.TORCH, reaches, [pos[at], ir.Const(loc, f.rank), shape,
                                                               ir.Const(loc, what)], {}))
    for a, d in f.dims:
        if rule.varargs or len(rest(e)) > a.at:
            pos[first + a.at] = ir.Const(loc, d)
        else:
            kws[a.name] = ir.Const(loc, d)
    if rule.varargs:  # `permute(0, ...)`: the list axis' 0 goes
        pos = pos[:first] + pos[first + 1:]
    call = ir.Call(loc, e.kind, e.target, pos if e.receiver is None else pos[1:], kws,
                   receiver=pos[0] if e.receiver is not None else None)
    if part is None:
        return call
    method = "split" if e.target == "split" else "chunk"
    parts = argument(e, rule.outputs)  # type: ignore[arg-type]
    dim = next((d for _, d in f.dims), 0)
    return ir.Call(loc, CallKind.TORCH, chunk_of, [pos[0], ir.Const(loc, part), ir.Const(loc, method),
                                                   args[[id(x) for x in operands(e)].index(id(parts))],
                                                   ir.Const(loc, dim)], {})


def operands(e: ir.Call) -> list[ir.Expr]:
    """The operands of the call ``e`` as its operator node takes them: receiver, positional, keyword arguments."""
    return ([e.receiver] if e.receiver is not None else []) + list(e.args) + list(e.kwargs.values())


def reaches(row: torch.Tensor, rank: int, trailing: Any, what: str) -> torch.Tensor:
    """``row``, once checked to have at least ``rank`` dims (a negative dim ``-rank`` of the stacked list) and at
    least as many as ``trailing`` names (``F.layer_norm``'s ``normalized_shape``, an int or a sequence of sizes):
    else the operator ``what`` would reach the list axis of the stacked list and mix its rows.

    Raises:
        LimitError: the rows have fewer dims.
    """
    need = max(rank, 0 if trailing is None else 1 if isinstance(trailing, int) else len(trailing))
    if row.dim() < need:
        raise LimitError(f"`{what}` of a stacked list with rows of shape {tuple(row.shape)} would reach its list "
                         "axis, whose length differs per instance: acrobat applies it within the rows")
    return row


def exact_rank(row: torch.Tensor, rank: int, what: str) -> torch.Tensor:
    """``row``, once checked to have exactly ``rank`` dims: ``S.expand(-1, a, b)`` and ``S.repeat(1, a, b)`` with
    the list axis' size first (more sizes would put new axes in front of the list axis).

    Raises:
        LimitError: the rows have another rank.
    """
    if row.dim() != rank:
        raise LimitError(f"`{what}` of a stacked list with rows of shape {tuple(row.shape)} is given {rank + 1} "
                         "sizes: acrobat batches it row by row when the first size is the list axis' (as many sizes "
                         "as the stacked list has dims)")
    return row


def chunk_of(row: torch.Tensor, i: int, method: str, parts: Any, dim: int) -> torch.Tensor:
    """Result ``i`` of ``row.chunk(parts, dim)`` (``method`` ``"chunk"``) or ``row.split(parts, dim)``: part ``i``
    of a stacked list's ``chunk``/``split`` along a row's axis.

    Raises:
        LimitError: the row has fewer parts than the call's result is unpacked into.
    """
    got = getattr(row, method)(parts, dim)
    if i >= len(got):
        raise LimitError(f"`.{method}({parts}, ...)` of a row of shape {tuple(row.shape)} gives {len(got)} parts, "
                         f"fewer than the {i + 1} acrobat takes: give the rows at least as many elements there")
    return got[i]


def pointwise_dtype_kept(e: ir.Call) -> bool:
    """Whether a pointwise call's dtype is its own (a ``dtype=`` keyword), not PyTorch's promotion of its operands
    (``ragged.row_operands`` then leaves the row's dtype as it is)."""
    return "dtype" in e.kwargs


def describe(e: ir.Call) -> str:
    """How a message names the call ``e``: ``.chunk()``, ``torch.where()``."""
    if e.kind is CallKind.METHOD:
        return f".{e.target}()"
    if e.target is joined:
        return f"torch.{_const_str(e.args[0])}()"
    name = getattr(e.target, "__name__", "this operator")
    return f"{'F' if getattr(e.target, '__module__', '') == 'torch.nn.functional' else 'torch'}.{name}()"
