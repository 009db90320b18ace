"""Static ranks: the number of dimensions of a tensor expression, where the program text fixes it (issue 18 §2).

A stacked list's rows may have any rank, which the kinds do not record. A
reduction over a negative ``dim`` of ``torch.stack(xs)`` (``S.sum(-1)``) is a
reduction over the list axis exactly when the items have rank ``-dim - 1``,
so the kind analysis (``_Analyzer.segment_form``) asks ``row_rank`` here and
batches it as a segment operator (``acrobat.analysis.ragged``) only where the
rank is known. The facts are syntactic and flow-insensitive over one
function's IR: a variable's rank is the rank every assignment in the function
gives it (none for a parameter or a loop variable), an item of a
comprehension's list the rank of every value its loop appends. Full
reductions (``x.sum()``, ``torch.dot(a, b)``) and ``torch.tensor`` of a number
are 0-D, ``torch.stack([a, b])`` of a literal list adds one to its items'
rank, pointwise operators keep their operand's rank; anything else is not
known (None).
"""

from __future__ import annotations

import torch

from acrobat.analysis import ragged
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind, known
from acrobat.frontend.parser import is_comprehension_list

#: Tensor methods that, with no arguments, reduce the whole tensor to a 0-D one.
_FULL_METHODS = frozenset({"sum", "mean", "prod", "max", "min", "amax", "amin", "norm", "std", "var", "all", "any"})
#: Torch functions that, given the tensor alone, reduce it to a 0-D one; ``torch.dot``/``vdot`` of two vectors.
_FULL_FUNCTIONS = dict.fromkeys((torch.sum, torch.mean, torch.prod, torch.max, torch.min, torch.amax, torch.amin,
                                 torch.norm, torch.std, torch.var, torch.all, torch.any), True)
_DOTS = dict.fromkeys((torch.dot, torch.vdot), True)


def comprehension_puts(fn: ir.Function, name: str) -> list[ir.Call]:
    """The ``append`` calls by which the loop of a comprehension fills its list ``name`` in ``fn`` (the parser's
    hoisted ``_compN``: a fresh list that only its own loop appends to); empty for any other list."""
    if not is_comprehension_list(name):
        return []
    return [e for s in ir.walk_stmts(fn.body) for root in ir.stmt_exprs(s) for e in ir.walk(root)
            if isinstance(e, ir.Call) and e.kind is CallKind.METHOD and e.target == "append"
            and isinstance(e.receiver, ir.Name) and e.receiver.id == name]


def sole_reader_puts(fn: ir.Function, name: str, reader: ir.Call) -> list[ir.Call]:
    """The ``append`` calls that fill the list ``name`` of ``fn`` when the call ``reader`` (whose first argument
    is ``name``) is the only expression that reads its items, so that rewriting what the appends put changes
    nothing else: a comprehension's list, or a variable bound once, to ``[]`` or to a comprehension's list, and
    read elsewhere only by its own ``append`` calls and ``len(name)``. Empty in any other case (a parameter, a
    loop variable, a second binding, the list passed, indexed, iterated or returned)."""
    if is_comprehension_list(name):
        return comprehension_puts(fn, name)
    if name in fn.params:
        return []
    values = []
    allowed = {id(reader.args[0])}
    reads = []
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.For) and name in s.target.names():
            return []
        if isinstance(s, ir.Assign) and name in s.target.names():
            if s.target.name != name:
                return []
            values.append(s.value)
        for e in (e for root in ir.stmt_exprs(s) for e in ir.walk(root)):
            if isinstance(e, ir.Name) and e.id == name:
                reads.append(e)
            elif isinstance(e, ir.Call) and (
                    e.kind is CallKind.METHOD and e.target == "append" and len(e.args) == 1 and not e.kwargs
                    and isinstance(e.receiver, ir.Name) and e.receiver.id == name
                    or e.kind is CallKind.BUILTIN and e.target == "len" and len(e.args) == 1
                    and isinstance(e.args[0], ir.Name) and e.args[0].id == name):
                allowed.add(id(e.receiver if e.kind is CallKind.METHOD else e.args[0]))
    if len(values) != 1 or any(id(x) not in allowed for x in reads):
        return []
    match values[0]:
        case ir.ListExpr(items=[]):
            return [e for s in ir.walk_stmts(fn.body) for root in ir.stmt_exprs(s) for e in ir.walk(root)
                    if isinstance(e, ir.Call) and e.kind is CallKind.METHOD and e.target == "append"
                    and isinstance(e.receiver, ir.Name) and e.receiver.id == name]
        case ir.Name(id=comp) if is_comprehension_list(comp):
            return comprehension_puts(fn, comp)
    return []


def rank(e: ir.Expr, fn: ir.Function) -> int | None:
    """The number of dimensions of the tensor ``e`` (an expression of ``fn``), or None where the text does not
    fix it."""
    return _Ranks(fn).rank(e)


def row_rank(e: ir.Expr, fn: ir.Function) -> int | None:
    """The rank of the rows of the stacked list ``e`` (``torch.stack(xs)``, a variable holding one, or a
    pointwise operator of one), or None where the text does not fix it."""
    return _Ranks(fn).rows(e)


def _agree(ranks: list[int | None]) -> int | None:
    """The one rank all of ``ranks`` are, else None (also for none at all)."""
    return ranks[0] if ranks and ranks[0] is not None and all(r == ranks[0] for r in ranks) else None


class _Ranks:
    """Rank facts of one function; ``busy`` guards a variable assigned from itself (``h = h + x``)."""

    def __init__(self, fn: ir.Function):
        self.fn = fn
        self.busy: set[str] = set()

    def assigned(self, name: str) -> list[ir.Expr] | None:
        """The values every binding of ``name`` in the function assigns, or None where one binding is not a plain
        ``name = value`` (a parameter, a loop variable, tuple unpacking) or the variable is being looked at."""
        if name in self.fn.params or name in self.busy:
            return None
        values = []
        for s in ir.walk_stmts(self.fn.body):
            if isinstance(s, ir.For) and name in s.target.names():
                return None
            if isinstance(s, ir.Assign) and name in s.target.names():
                if s.target.name != name:
                    return None
                values.append(s.value)
        return values

    def through(self, name: str, of: str) -> int | None:
        """The rank (``of="rank"``) or row rank (``of="rows"``) every value assigned to ``name`` has."""
        values = self.assigned(name)
        if not values:
            return None
        self.busy.add(name)
        try:
            return _agree([getattr(self, of)(v) for v in values])
        finally:
            self.busy.discard(name)

    def rank(self, e: ir.Expr) -> int | None:
        match e:
            case ir.Name(id=name):
                return self.through(name, "rank")
            case ir.UnaryOp(op="-", operand=x):
                return self.rank(x)
            case ir.BinOp(op="+" | "-" | "*" | "/", left=a, right=b):
                ranks = [self.rank(x) for x in (a, b) if not _is_number(x)]
                return max(ranks) if ranks and None not in ranks else None  # type: ignore[type-var]
            case ir.Call(kwargs=kw) if kw:
                return None
            case ir.Call(kind=CallKind.METHOD, target=m, receiver=x, args=[]) if x is not None:
                return 0 if m in _FULL_METHODS else self.rank(x) if ragged.is_rowwise_method(m) else None
            case ir.Call(kind=CallKind.TORCH, target=f, args=[ir.ListExpr(items=items)]) if ragged.is_stack(f):
                r = _agree([self.rank(x) for x in items])
                return None if r is None else r + 1
            case ir.Call(kind=CallKind.TORCH, target=f, args=[x]):
                if known(_FULL_FUNCTIONS, f):
                    return 0
                if f is torch.tensor:
                    return 0 if _is_number(x) else None
                return self.rank(x) if ragged.is_rowwise_function(f, only_operand=True) else None
            case ir.Call(kind=CallKind.TORCH, target=f, args=[_, _]) if known(_DOTS, f):
                return 0
        return None

    def rows(self, e: ir.Expr) -> int | None:
        match e:
            case ir.Name(id=name):
                return self.through(name, "rows")
            case ir.Subscript(obj=s, index=ir.Slice()):
                return self.rows(s)
            case ir.BinOp(op="+" | "-" | "*" | "/", left=a, right=b) if _is_number(a) or _is_number(b):
                return self.rows(b if _is_number(a) else a)
            case ir.Call(kwargs=kw) if kw:
                return None
            case ir.Call(kind=CallKind.TORCH, target=f, args=[ir.Name(id=xs)]) if ragged.is_stack(f):
                return _agree([self.rank(put.args[0]) for put in comprehension_puts(self.fn, xs)])
            case ir.Call(kind=CallKind.METHOD, target=m, receiver=s, args=[]) if s is not None and \
                    ragged.is_rowwise_method(m):
                return self.rows(s)
            case ir.Call(kind=CallKind.TORCH, target=f, args=[s]) if ragged.is_rowwise_function(f, only_operand=True):
                return self.rows(s)
        return None


def _is_number(e: ir.Expr) -> bool:
    """A literal number (it does not change the rank of what it meets)."""
    return isinstance(e, ir.Const) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
