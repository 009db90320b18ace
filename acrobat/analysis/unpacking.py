"""Starred call arguments, ``f(*pair, q)`` and ``f(**kw)``, expanded into plain ones (§3, the frontend's subset).

How many items a tuple has, and which keys a dict has, is a fact of the kind analysis (``TupleK``, ``DictK``),
not of the syntax: ``pair`` may be a loop variable over ``list(enumerate(xs))`` or what a function returned.
So the parser leaves ``*name``/``**name`` as ``ir.Starred`` (having put any other value in a variable first,
``parser._Translator.hoist_starred``), and the kind analysis expands each such call once the variable's kind is
known: ``f(a, *pair, k=b, **kw)`` becomes ``f(a, pair[0], pair[1], k=b, x=kw["x"])``, a program call's
arguments then bound to its parameters. This is Python's meaning and order: the items are read where the ``*``
stood, and reading a variable's item has no effect. The analysis's later passes see the expanded calls
(``rewritten``), so the static blocks and the generated code (§4, §5) are those of the explicit call.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping

import torch

from acrobat.analysis.kinds import DictK, Kind, ListK, TupleK, has_tensor
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.frontend.parser import bind_arguments

Shape = int | tuple[str, ...]
"""What an expansion depends on: a tuple's size, or a dict's keys; ``WHOLE`` for a list passed whole."""

WHOLE = -1
"""The ``Shape`` of a list of per-instance length unpacked into a program function's ``*rest`` and nothing else
(``f(*xs)``, ``def f(*hs)``): the call passes the list itself as ``rest`` (``whole_rest``)."""

#: Builtins that only read the sequence they are given, and give the same for a list as for a tuple.
_READERS = frozenset({"len", "sum", "list", "tuple", "enumerate", "zip", "reversed", "sorted", "max", "min", "any",
                      "all"})


def starred(e: ir.Call) -> list[ir.Starred]:
    """The starred arguments of ``e``, in Python's order (positional ones, then keywords)."""
    return [a for a in [*e.args, *e.kwargs.values()] if isinstance(a, ir.Starred)]


def shape(call: ir.Call, s: ir.Starred, k: Kind) -> Shape | str:
    """The size (keys) of the value ``s`` (an argument of ``call``) unpacks, of kind ``k``; or, when the static
    tier cannot unpack it, why and what to write instead."""
    if s.double:
        if isinstance(k, DictK):
            return k.keys
        return (f"`**` unpacks a {k}: the static tier unpacks dicts with constant string keys "
                "(`kw = {\"dim\": 0}`, then `f(x, **kw)`); pass the arguments as keywords (`f(x, dim=d)`)")
    if isinstance(k, TupleK):
        return len(k.items)
    if isinstance(k, ListK) and is_unzip(call):
        return ("`zip(*xs)` is static only unpacked at once into names, `a, b = zip(*pairs)` (a list of tuples "
                "transposed): write it so, or build each sequence in a loop (`cs = [x[0] for x in xs]`)")
    if isinstance(k, ListK) and whole_rest(call, s):
        return WHOLE
    if isinstance(k, ListK):
        return ("`*` unpacks a list, whose length may differ per instance: the static tier unpacks tuples (a "
                "tuple display `pair = (a, b)`, a tuple a function returns, `torch.chunk(x, 3)`); pass the list "
                "as one argument (`f(regions, xs)`, the function taking a list), or the dynamic tier runs it")
    what = "a tensor (its rows)" if has_tensor(k) else f"a {k}, whose length the analysis does not know"
    return (f"`*` unpacks {what}: the static tier unpacks tuples (a tuple display `pair = (a, b)`, a tuple a "
            "function returns, `torch.chunk(x, 3)`); pass the items explicitly (`f(t[0], t[1])`)")


def whole_rest(call: ir.Call, s: ir.Starred) -> bool:
    """Whether ``s``, a starred list in ``call``, can be passed whole as the callee's ``*rest``: ``call`` calls a
    program function taking ``*rest`` whose named parameters the positional arguments before ``s`` fill exactly,
    and ``s`` is the last argument (no keywords). The kind analysis then checks that the callee only reads
    ``rest`` in ways that give the same for the list as for the tuple Python makes (``read_only``): its length
    may then differ per instance (issue 18 §2, "``*args`` calls")."""
    if call.kind is not ir.CallKind.PROGRAM or s.double or call.kwargs or call.args[-1] is not s:
        return False
    fn = getattr(call.target, "fn", call.target)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    named = params[:-1]
    if not params or params[-1].kind is not inspect.Parameter.VAR_POSITIONAL or len(call.args) - 1 != len(named) \
            or any(q.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for q in named) \
            or any(isinstance(a, ir.Starred) for a in call.args[:-1]):
        return False
    return True


def read_only(fn: ir.Function, name: str) -> bool:
    """Whether ``fn`` only reads its parameter ``name`` where a list and a tuple of the same items give the same:
    iterated (``for h in hs``), given to a reading builtin (``len``, ``sum``, ``zip``, ... ``_READERS``) or to
    ``torch.stack``/``torch.cat`` as the sequence, indexed by a non-slice, or tested for truth; never bound,
    returned, stored, passed on or called a method of (a tuple has no ``append``; ``hs + [x]`` raises)."""
    for st in ir.walk_stmts(fn.body):
        if name in ir.assigned_names(st) and not isinstance(st, (ir.If, ir.While, ir.For)) or \
                isinstance(st, ir.For) and name in st.target.names():
            return False
        for root in ir.stmt_exprs(st):
            if _is_name(root, name) and not isinstance(st, (ir.For, ir.If, ir.While)):
                return False
            for e in ir.walk(root):
                kids = ir.children(e)
                if any(_is_name(c, name) for c in kids) and not _reads(e, name):
                    return False
    return True


def _is_name(e: ir.Expr, name: str) -> bool:
    return isinstance(e, ir.Name) and e.id == name


def _reads(parent: ir.Expr, name: str) -> bool:
    """Whether every use of ``name`` directly under ``parent`` is a read that treats a list as a tuple."""
    if isinstance(parent, ir.Subscript):
        return _is_name(parent.obj, name) and not isinstance(parent.index, ir.Slice) and \
            not _is_name(parent.index, name)
    if isinstance(parent, ir.UnaryOp):
        return parent.op == "not"
    if isinstance(parent, ir.Call) and not (parent.receiver is not None and _is_name(parent.receiver, name)) \
            and not any(_is_name(v, name) for v in parent.kwargs.values()):
        if parent.kind is ir.CallKind.BUILTIN:
            return parent.target in _READERS
        if parent.kind is ir.CallKind.TORCH:
            return parent.target in (torch.stack, torch.cat) and _is_name(parent.args[0], name) and \
                not any(_is_name(a, name) for a in parent.args[1:])
    return False


def is_unzip(e: ir.Expr) -> bool:
    """Whether ``e`` is ``zip(*xs)`` of one variable ``xs`` (the transpose of a list of tuples)."""
    return isinstance(e, ir.Call) and e.kind is ir.CallKind.BUILTIN and e.target == "zip" and not e.kwargs and \
        len(e.args) == 1 and isinstance(e.args[0], ir.Starred) and not e.args[0].double


def bound_by_unzip(fn: ir.Function, name: str) -> bool:
    """Whether every binding of variable ``name`` in ``fn`` is one of the names of ``a, b = zip(*xs)`` (so it
    holds item i of every tuple of ``xs``, as many as ``xs`` has: a length that differs per instance where
    ``xs`` is the instance's, the child-sum TreeLSTM's ``child_c, child_h = zip(*states)``); False for a
    parameter or a variable bound otherwise too (issue 18 §2)."""
    if name in fn.params:
        return False
    found = False
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.For) and name in s.target.names():
            return False
        if isinstance(s, ir.Assign) and name in s.target.names():
            flat = s.target.items is not None and all(t.name is not None for t in s.target.items)
            if not (flat and is_unzip(s.value)):
                return False
            found = True
    return found


def unzipped(k: Kind, names: int) -> Kind | str:
    """The kind of ``zip(*xs)`` unpacked into ``names`` names (``a, b = zip(*pairs)``), ``xs`` of kind ``k``: a
    tuple of ``names`` sequences, the i-th holding item i of every tuple of ``xs`` (a tuple as Python gives it; of
    kind ``ListK``, as long as ``xs``, which differs per instance); or, when the static tier cannot take it, why.
    Python raises ``ValueError`` for an empty ``xs`` (it gives no sequence to unpack): so does the run."""
    if isinstance(k, ListK) and isinstance(k.elem, TupleK):
        if len(k.elem.items) != names:
            return (f"`zip(*xs)` of a list of {len(k.elem.items)}-tuples gives {len(k.elem.items)} sequences, "
                    f"unpacked here into {names} names (Python raises ValueError)")
        return TupleK(tuple(ListK(x) for x in k.elem.items))
    return (f"`a, b = zip(*xs)` transposes a list of tuples (`xs = [(c, h), ...]`, a tuple each of the same size); "
            f"this `xs` is a {k}: build the sequences in a loop (`cs = [x[0] for x in xs]`)")


def expanded(e: ir.Call, shapes: Mapping[int, Shape]) -> ir.Call:
    """``e`` (same node id) with each starred argument ``s`` replaced by the items of the value it unpacks, of
    size (keys) ``shapes[s.nid]``; a program call's arguments bound to its parameters.

    Raises:
        CompileError: a keyword given twice (Python raises ``TypeError``), or one the callee has not.
    """
    args: list[ir.Expr] = []
    for a in e.args:
        if isinstance(a, ir.Starred) and shapes[a.nid] == WHOLE:
            out = copy.copy(e)
            out.args, out.kwargs = [*args, ir.Name(a.value.loc, a.value.id)], {}
            return out
        if isinstance(a, ir.Starred):
            args += [_item(a, i) for i in range(shapes[a.nid])]  # type: ignore[arg-type]
        else:
            args.append(a)
    kwargs: dict[str, ir.Expr] = {}
    for key, v in e.kwargs.items():
        entries = [(key, v)]
        if isinstance(v, ir.Starred):
            entries = [(k, _item(v, k)) for k in shapes[v.nid]]  # type: ignore[union-attr]
        for k, x in entries:
            if k in kwargs:
                raise CompileError(f"keyword argument `{k}` is given twice (Python raises TypeError): give it once",
                                   e.loc.file, e.loc.line, e.loc.col)
            kwargs[k] = x
    out = copy.copy(e)
    if e.kind is ir.CallKind.PROGRAM:
        out.args, out.kwargs = bind_arguments(e.target, args, kwargs, e.loc), {}
    else:
        out.args, out.kwargs = args, kwargs
    return out


def rewritten(fn: ir.Function, expansions: Mapping[int, ir.Expr],
              statements: Mapping[int, ir.Stmt] | None = None) -> ir.Function:
    """A copy of ``fn`` (node ids kept) whose calls are their expansions ``expansions[call nid]`` (and any other
    expression its rewrite there: ``x.data`` as ``x.detach()``, ``Spec.detached``) and whose
    statements are ``statements[statement nid]`` (an item assignment's rewrite, ``inplace.item_assignment``);
    ``fn`` itself when it has neither."""
    statements = statements or {}
    found = [e for s in ir.walk_stmts(fn.body) for root in ir.stmt_exprs(s) for e in ir.walk(root)
             if e.nid in expansions]
    rewrites = [s for s in ir.walk_stmts(fn.body) if s.nid in statements]
    if not found and not rewrites:
        return fn
    memo: dict[int, object] = {id(fn.source_lines): fn.source_lines}
    for e in reversed(found):  # a call inside another's arguments first: the outer expansion holds the original
        memo[id(e)] = copy.deepcopy(expansions[e.nid], memo)
    for s in rewrites:
        memo[id(s)] = copy.deepcopy(statements[s.nid], memo)
    return copy.deepcopy(fn, memo)


def _item(s: ir.Starred, key: int | str) -> ir.Subscript:
    """``value[key]`` of the variable ``s`` unpacks, at ``s``'s place."""
    return ir.Subscript(s.loc, ir.Name(s.value.loc, s.value.id), ir.Const(s.loc, key))
