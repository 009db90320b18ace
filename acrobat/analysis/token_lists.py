"""``torch.tensor(tokens)`` of a host list whose length differs per instance: a stacked list (issue 18 §2).

``m.emb(torch.tensor(toks)).sum(0)`` is the commonest NLP idiom: a tensor
made from the instance's list of numbers. Its length differs per instance,
so no batched tensor holds it; acrobat makes it what ``torch.stack`` of its
numbers would be, a stacked list (``acrobat.analysis.ragged``) whose rows are
the list's items (0-d tensors for numbers), built before the statement as

    _rows0 = host_rows(toks, "file:line")
    _comp0 = []
    for _c_row_1 in range(len(_rows0)):
        _comp0.append(torch.tensor(_rows0[_c_row_1]))       # dtype= kept; a legacy type's dtype given
    ... torch.stack(_comp0) ...

(``acrobat.analysis.rows``, form ``"tokens"``). Row-wise operators
(``emb(...)``, ``F.embedding``, arithmetic, comparisons), reductions over the
list axis, indexing by host ints and ``len`` then apply as to any stacked list.

**Which calls.** Whether a host value is a list or a number is not in the
kinds (both are host data), and ``torch.tensor(t)`` of a token is as common
as of a list. The text decides (``is_host_list``): the argument is a
comprehension's list, a variable every binding of which is a list (``[]``,
a comprehension, ``list(...)``, ``sorted(...)``, a slice or a sum of such), a
value the function also uses as a list (``len(x)``, ``for t in x``,
``x[i]``, ``x.append(...)``), or the program's instance itself (the entry's
instance parameter, never rebound), or an item of it (``tree, toks = example``,
``example[1]``) that is a list in every instance of the run's batch (a fact of
the batch, ``kinds.INSTANCE_LISTS``: a batch where it is not compiles again).
Any other ``torch.tensor(x)`` is a tensor of one shape across the batch, as
before. At run time ``host_rows`` checks
the guess: a value that is no list or tuple of numbers (a number, a host
tensor, an empty list) is a ``ShapeError`` marked as the static tier's limit,
so the default run reruns the batch in the dynamic tier and ``strict``
raises it.
"""

from __future__ import annotations

from typing import Any

import torch

from acrobat.errors import ShapeError
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind, known
from acrobat.frontend.parser import is_comprehension_list

#: The constructors that make a tensor of a host list, inferring its dtype (or taking ``dtype=``) ...
_INFERRED = dict.fromkeys((torch.tensor, torch.as_tensor), True)
#: ... and the legacy types, with the dtype each gives.
_LEGACY = {torch.LongTensor: torch.int64, torch.IntTensor: torch.int32, torch.FloatTensor: torch.float32,
           torch.DoubleTensor: torch.float64}
#: The keywords a row's constructor takes as they are.
_KEYWORDS = frozenset({"dtype", "device"})
#: Builtins whose result is a fresh list of their argument's items.
_LIST_BUILTINS = frozenset({"list", "sorted"})
#: Python's number types in promotion order: a list mixing them gives the last one's dtype (``torch.tensor``).
_NUMBERS = (bool, int, float)


def is_constructor(target: Any) -> bool:
    """Whether the torch callable ``target`` makes a tensor of host data (``torch.tensor``, ``torch.LongTensor``)."""
    return bool(known(_INFERRED, target) or known(_LEGACY, target))


def constructs_from_list(e: ir.Call) -> bool:
    """Whether ``e`` is ``torch.tensor(x)`` (``as_tensor``, ``LongTensor``, ...) of one positional argument, with
    ``dtype=``/``device=`` at most (``torch.tensor`` and ``as_tensor`` only)."""
    if e.kind is not CallKind.TORCH or not is_constructor(e.target) or len(e.args) != 1:
        return False
    return not e.kwargs or bool(known(_INFERRED, e.target)) and set(e.kwargs) <= _KEYWORDS


def is_host_list(fn: ir.Function, x: ir.Expr, instance: str | None) -> bool:
    """Whether the program text says that the host value ``x`` (an argument of ``torch.tensor`` in ``fn``) is a
    list whose length may differ per instance (the module docstring's cases; ``instance``: the name of the
    instance parameter where ``fn`` is the entry, else None)."""
    if _list_value(fn, x, frozenset()):
        return True
    key = _chain_key(x)
    if key is None:
        return False
    if isinstance(x, ir.Name) and x.id == instance and not _bindings(fn, x.id):
        return True
    return any(_used_as_list(e, key) for s in ir.walk_stmts(fn.body) for e in _uses(s))


def instance_item(fn: ir.Function, x: ir.Expr, instance: str | None) -> int | None:
    """The position ``i`` where ``x`` is item ``i`` of the entry's instance parameter ``instance``, neither of
    them rebound: a name of ``a, b = instance`` (its only binding) or ``instance[i]``; else None. Whether that
    item is a list is a fact of the batch (``kinds.INSTANCE_LISTS``)."""
    if instance is None or _bindings(fn, instance):
        return None
    if isinstance(x, ir.Subscript) and isinstance(x.obj, ir.Name) and x.obj.id == instance and \
            isinstance(x.index, ir.Const) and type(x.index.value) is int and x.index.value >= 0:
        return x.index.value
    if not isinstance(x, ir.Name) or x.id in fn.params:
        return None
    found = [s for s in ir.walk_stmts(fn.body) if x.id in ir.assigned_names(s)]
    if len(found) != 1 or not isinstance(found[0], ir.Assign):
        return None
    s = found[0]
    if not (isinstance(s.value, ir.Name) and s.value.id == instance and s.target.items is not None):
        return None
    names = [t.name if not t.starred else None for t in s.target.items]
    return names.index(x.id) if x.id in names and not any(t.starred for t in s.target.items) else None


def _list_value(fn: ir.Function, x: ir.Expr, seen: frozenset[str]) -> bool:
    """Whether ``x`` is a fresh list by its form: a comprehension's list, ``list(...)``/``sorted(...)``, an empty
    list literal, a slice or a sum of lists, or a variable every binding of which is one."""
    match x:
        case ir.Name(id=name) if is_comprehension_list(name):
            return True
        case ir.Name(id=name) if name not in seen and name not in fn.params:
            values = _bindings(fn, name)
            return bool(values) and all(v is not None and _list_value(fn, v, seen | {name}) for v in values)
        case ir.ListExpr(items=[]):
            return True
        case ir.Call(kind=CallKind.BUILTIN, target=t, args=[_]) if t in _LIST_BUILTINS:
            return True
        case ir.Subscript(obj=o, index=ir.Slice()):
            return _list_value(fn, o, seen) or is_host_list(fn, o, None)
        case ir.BinOp(op="+", left=a, right=b):
            return _list_value(fn, a, seen) and _list_value(fn, b, seen)
    return False


def _bindings(fn: ir.Function, name: str) -> list[ir.Expr | None]:
    """The values the statements of ``fn`` bind to ``name`` (None for a loop's, a tuple target's or an augmented
    one's)."""
    out: list[ir.Expr | None] = []
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.For) and name in s.target.names():
            out.append(None)
        elif isinstance(s, ir.Assign) and name in s.target.names():
            out.append(s.value if s.target.name == name else None)
        elif name in ir.assigned_names(s):
            out.append(None)
    return out


def _chain_key(e: ir.Expr) -> tuple[str, ...] | None:
    """``("pair", "src")`` for ``pair.src``: a variable and its attributes, else None."""
    attrs: list[str] = []
    while isinstance(e, ir.Attr):
        attrs.append(e.attr)
        e = e.obj
    return (e.id, *reversed(attrs)) if isinstance(e, ir.Name) else None


def _uses(s: ir.Stmt) -> list[ir.Expr]:
    """The expressions of ``s`` and, for a loop, its iterated value as a ``for`` statement (marked by itself)."""
    return [e for root in ir.stmt_exprs(s) for e in ir.walk(root)] + ([s] if isinstance(s, ir.For) else [])  # type: ignore[list-item]


def _used_as_list(e: ir.Expr | ir.Stmt, key: tuple[str, ...]) -> bool:
    """Whether ``e`` uses the chain ``key`` as a list: iterates it, takes its ``len``, an item or appends to it."""
    match e:
        case ir.For(iter=it):
            return _chain_key(it) == key
        case ir.Call(kind=CallKind.BUILTIN, target="len" | "enumerate" | "zip" | "reversed", args=args):
            return any(_chain_key(a) == key for a in args)
        case ir.Call(kind=CallKind.METHOD, target="append" | "extend" | "pop", receiver=r) if r is not None:
            return _chain_key(r) == key
        case ir.Subscript(obj=o, index=i) if not isinstance(i, ir.Slice):
            return _chain_key(o) == key
    return False


def host_rows(data: Any, where: str) -> list:
    """The items of ``data``, the host list ``torch.tensor(data)`` makes a tensor of, each a row of the stacked
    list acrobat makes of it: the list itself, or for a list mixing Python number types the numbers as the
    type ``torch.tensor`` promotes them to (``[1, 2.5]``: floats), so each row has the whole tensor's dtype.

    Raises:
        ShapeError: ``data`` is not a non-empty list or tuple of numbers (or of lists of them of one type),
            marked as the static tier's limit (``static_limit``): plain calls make a tensor of it, which the
            dynamic tier runs (``where``: the model's file:line).
    """
    if isinstance(data, (list, tuple)) and data:
        kinds = {type(v) for v in data}
        if kinds <= set(_NUMBERS):
            top = max(kinds, key=_NUMBERS.index)
            return list(data) if len(kinds) == 1 else [top(v) for v in data]
        leaves = {type(v) for row in data for v in row} if kinds <= {list, tuple} else set()
        if len(leaves) == 1 and leaves <= set(_NUMBERS):
            return list(data)
    what = "an empty list" if isinstance(data, (list, tuple)) and not data else f"a {type(data).__name__}"
    err = ShapeError(f"`torch.tensor(...)` at {where} is of {what}: acrobat batches it as the stacked list of a "
                     "host list's items, which needs a non-empty list or tuple of numbers (of one type inside "
                     "nested lists)")
    err.static_limit = "torch.tensor of a host list is the stacked list of its items"  # type: ignore[attr-defined]
    raise err


def row_constructor(e: ir.Call, item: ir.Expr) -> ir.Call:
    """``torch.tensor(item, ...)``: one row of the tensor constructor ``e`` of a host list, with ``e``'s keywords
    (``e`` itself is then replaced: its nodes move to the row) or, for a legacy type (``torch.LongTensor``), its dtype (``LongTensor(5)`` would be a size)."""
    dtype = known(_LEGACY, e.target)
    kwargs = dict(e.kwargs) if dtype is None else {"dtype": ir.Const(e.loc, dtype)}
    target = torch.as_tensor if e.target is torch.as_tensor else torch.tensor
    return ir.Call(e.loc, CallKind.TORCH, target, [item], kwargs)
