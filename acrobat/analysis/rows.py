"""Iterating a tensor's rows: ``for h in x``, ``enumerate(x)``, ``zip(w, idx)``, ``reversed(x)``, ``list(x)`` (§3, §4).

Python iterates a tensor by its rows, ``x[0], x[1], ..., x[len(x) - 1]`` (``Tensor.__iter__`` unbinds dim 0;
a 0-d tensor raises ``TypeError``). The static tier's language (§3) runs loops over host data and over lists of
tensors, and the rows of a per-instance tensor are as many as its per-instance shape says: a shape read, which
host code makes at a sync point (§4.2). So each tensor the model iterates becomes the list of its rows, built
where the value was, as the comprehension ``[x[i] for i in range(len(x))]`` (which the parser would hoist so):

    for w, e in zip(weights, idx.tolist()):        _comp0 = []
        ...                                  ->    for _c_row_1 in range(len(weights)):
                                                       _comp0.append(weights[_c_row_1])
                                                   for w, e in zip(_comp0, idx.tolist()):
                                                       ...

Everything that takes a list then applies unchanged, with Python's meaning: ``enumerate``'s ``start``, ``zip``
stopping at its shortest argument, ``reversed``, ``list``, nested targets, ``break``. ``len(x)`` of a 0-d
tensor raises ``TypeError`` in the instance that has one, as iterating it does in PyTorch.

**Why a rewrite in the kind analysis.** Whether ``for v in xs`` iterates a tensor or a list is a fact of the kind
analysis (§4), not of the syntax, and may differ between two specializations of one function (called with a
list in one place, a tensor in another). So the analysis marks each iterated expression of a tensor kind
(``_Analyzer.rows_of``), and after its pass over the specialization, ``rewritten`` gives that specialization a
copy of its function (node ids kept, as ``acrobat.analysis.unpacking`` does for starred arguments) with the
rows built before the statement; the fixpoint then analyses the copy. A list keeps Python's own iteration (its
changes during the loop are seen), and other specializations keep the function as written.

**Order.** The rows are built before their statement. What the statement evaluates before the tensor, and is
not a plain variable or constant (``zip(f(xs), x)``: ``f(xs)``), is put in a fresh variable first, so
Python's order holds; of a called module or method read off a variable (``p.experts[len(xs) % 3](sum(list(x)))``)
only the indices are (the module choice, ``rules._module_choice``, takes the call as written). A tensor iterated only sometimes (under ``a if c else b``, a later operand of
``and``/``or`` or of a chained comparison, a ``while`` test) is rejected with a ``CompileError`` saying to
build its rows in a statement of their own.

**Cuts by per-instance bounds.** ``W[:n]``, ``W[a:b]``, ``W[:len(tokens)]`` of a tensor (a shared weight, or a
per-instance tensor) by bounds that are host data of the instance has a per-instance length: a stacked list
(``acrobat.analysis.ragged``, issue 18 §2). Such a cut is a site too (``cuts``), built as the stack of the rows
it keeps, with Python's slice meaning for any bounds and step (those of ``range(len(W))[a:b:c]``):

    x = p.pos[:len(tokens)]        ->    _comp0 = []
                                         for _c_row_1 in range(len(p.pos))[:len(tokens)]:
                                             _comp0.append(p.pos[_c_row_1])
                                         x = torch.stack(_comp0)

**Tensors of host lists.** ``torch.tensor(tokens)`` of a host list whose length differs per instance
(``acrobat.analysis.token_lists``) is a site too, built as the stack of ``torch.tensor(tokens[i])`` of its items;
so is a factory whose first size is per-instance host data (``torch.arange(len(tokens))``,
``acrobat.analysis.sized``), built as the stack of its rows made on the host.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

import torch

from acrobat.analysis import ragged, sized, token_lists
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.frontend.parser import COMPREHENSION

_ROWS = "rows"  # hint of the variable a tensor that is not a variable is put in before its rows are taken
_ROW = "c_row_"  # hint of the comprehension's position variable (a comprehension's variable, as messages show it)


def rewritten(fn: ir.Function, sites: Mapping[int, ir.Expr], forms: Mapping[int, str] | None = None) -> ir.Function:
    """A copy of ``fn`` (node ids kept) in which each expression of ``sites`` (by node id: the tensors it
    iterates, ``x`` of ``for v in x`` and of ``zip(x, ys)``) is the list of its rows, built just before its
    statement (see the module docstring); a site whose node id ``forms`` maps to ``"cut"`` (a cut ``W[a:b]`` by
    per-instance bounds) is instead the stack of the rows it keeps, to ``"embed"`` (``emb(tokens)`` feeding a
    recurrent module, ``acrobat.analysis.recurrent``) the stack of one lookup per token, and to ``"tokens"``
    (``torch.tensor(tokens)`` of a host list, ``acrobat.analysis.token_lists``) the stack of one tensor per item,
    to ``"sized"`` (a factory of a per-instance first size, ``acrobat.analysis.sized``) the stack of its rows,
    to ``"unit_items"`` (``torch.cat(cs, dim=0)`` of unzipped ``(1, ...)`` items, ``rules._cat_of_unzipped``) the
    stack of their rows ``ragged.unit_row(cs[i])``, to ``"repeat"`` (``t.repeat(len(S), 1)``,
    ``_Analyzer.repeats_rows``) the stack of ``len(S)`` rows ``ragged.unit_row(t)``, and to ``"stacked"`` (a tensor
    assigned to a variable that is a stacked list elsewhere, ``kinds.stacked_join``) the stack of its own rows;
    ``fn`` itself when ``sites`` is empty (issue 18 §2 for the stacks).

    Raises:
        CompileError: at a site evaluated only sometimes (a branch of ``a if c else b``, a later operand of
            ``and``/``or`` or of a chained comparison, a ``while`` test), or found in no statement of ``fn``.
    """
    if not sites:
        return fn
    out = copy.deepcopy(fn, {id(fn.source_lines): fn.source_lines})
    fresh = _Fresh(out)
    left = set(sites)
    out.body = _body(out.body, left, fresh, forms or {})
    if left:  # in no statement's expressions: none the analysis should have found
        raise _error(sites[min(left)], "iterating a tensor's rows here is not analysed statically")
    return out


def _body(stmts: list[ir.Stmt], left: set[int], fresh: _Fresh, forms: Mapping[int, str]) -> list[ir.Stmt]:
    """``stmts`` with the sites in ``left`` rewritten (each one removed from ``left``), nested bodies too."""
    out: list[ir.Stmt] = []
    for s in stmts:
        match s:
            case ir.If():
                s.body, s.orelse = _body(s.body, left, fresh, forms), _body(s.orelse, left, fresh, forms)
            case ir.For() | ir.While():
                s.body = _body(s.body, left, fresh, forms)
        out += _statement(s, left, fresh, forms)
    return out


def _statement(s: ir.Stmt, left: set[int], fresh: _Fresh, forms: Mapping[int, str]) -> list[ir.Stmt]:
    """``s`` preceded by the statements that build the rows of its sites, innermost (first evaluated) first
    (``forms``: the sites that are a cut or an embedding, by node id; the rest are iterated)."""
    for root in ir.stmt_exprs(s):
        x = next((e for e in _post_order(root) if e.nid in left), None)
        if x is None:
            continue
        if isinstance(s, ir.While):
            raise _error(x, "a `while` test iterates a tensor's rows, once per test")
        left.discard(x.nid)
        pre = _hoisted(s, root, x, fresh, forms.get(x.nid, "rows"))
        return [t for p in pre for t in _statement(p, left, fresh, forms)] + _statement(s, left, fresh, forms)
    return [s]


def _hoisted(s: ir.Stmt, root: ir.Expr, x: ir.Expr, fresh: _Fresh, form: str) -> list[ir.Stmt]:
    """The statements that build the rows of ``x`` (in ``root``, an expression of ``s``) into a fresh list, which
    ``x``'s place then reads (``form`` ``"cut"``: ``x`` is ``W[a:b]``, built from the rows of ``W`` it keeps, and
    its place reads their ``torch.stack``; ``"embed"``: ``x`` is ``emb(tokens)``, built from one lookup per token,
    ``emb(tokens[i])`` or ``emb(torch.tensor(tokens[i]))`` for ``emb(torch.tensor(tokens))``, and its place reads
    their ``torch.stack``; ``"tokens"``: ``x`` is ``torch.tensor(tokens)``, built from ``torch.tensor(tokens[i])``
    of the items ``token_lists.host_rows`` checks, and its place reads their ``torch.stack``; ``"sized"``: ``x`` is
    a factory call, built from ``torch.tensor`` of the rows ``sized.factory_rows`` makes on the host, and its place
    reads their ``torch.stack``); before them, what
    ``root`` evaluates before ``x`` (and is no variable or constant) put in fresh variables."""
    pre: list[ir.Stmt] = []
    path = _path(root, x)
    for parent, child in zip(path, path[1:]):
        if not _always(parent, child):
            raise _error(x, "a tensor's rows are iterated only sometimes here (under `a if c else b`, a later "
                            "operand of `and`/`or` or of a chained comparison)")
        if isinstance(parent, ir.Concurrent):
            continue  # calls declared independent (`acrobat.concurrent`): in any order, each a call in its place
        for before in ir.children(parent)[:[id(c) for c in ir.children(parent)].index(id(child))]:
            if isinstance(before, (ir.Name, ir.Const, ir.Starred)):
                continue
            if before is _callee(parent) and _chain(before):  # `p.experts[t % 3](...)`: its indices first
                for holder, index in _chain_indices(before):
                    pre += _into_variable(holder, index, fresh)
                continue
            pre += _into_variable(parent, before, fresh)
    loc = x.loc
    tensor = x.obj if form == "cut" else _tokens(x) if form == "embed" else x.args[0] if form == "unit_items" else \
        x.receiver if form == "repeat" else x  # type: ignore[attr-defined, arg-type]
    if form == "tokens":  # the host list, checked and read once
        where = ir.Const(loc, f"{loc.file}:{loc.line}")
        tensor = ir.Call(loc, ir.CallKind.HOST, token_lists.host_rows, [x.args[0], where], {})  # type: ignore[attr-defined]
    elif form == "sized":  # the factory's rows, made on the host of the instance's numbers
        tensor = sized.host_rows_call(x)  # type: ignore[arg-type]
    src = tensor.id if isinstance(tensor, ir.Name) else fresh(_ROWS)  # the tensor, read once per row
    if not isinstance(tensor, ir.Name):
        pre.append(ir.Assign(loc, ir.Target(src), tensor))
    rows, i = fresh(COMPREHENSION), fresh(_ROW)
    positions: ir.Expr = ir.Call(loc, ir.CallKind.BUILTIN, "range", [ir.Call(loc, ir.CallKind.BUILTIN, "len",
                                                                              [ir.Name(loc, src)], {})], {})
    if form == "cut":  # the positions the cut keeps: `range(len(W))[a:b:c]`, Python's slice meaning for any bounds
        positions = ir.Subscript(loc, positions, x.index)  # type: ignore[attr-defined]
    elif form == "repeat":  # `t.repeat(n, 1, ...)`: n rows
        positions = ir.Call(loc, ir.CallKind.BUILTIN, "range", [x.args[0]], {})  # type: ignore[attr-defined]
    item: ir.Expr = ir.Subscript(loc, ir.Name(loc, src), ir.Name(loc, i))
    if form in ("unit_items", "repeat"):  # each item (the repeated tensor) of shape (1, ...) gives its one row
        one = item if form == "unit_items" else ir.Name(loc, src)
        rank = 0 if form == "unit_items" else len(x.args)  # type: ignore[attr-defined]
        item = ir.Call(loc, ir.CallKind.TORCH, ragged.unit_row,
                       [one, ir.Const(loc, rank), ir.Const(loc, f"{loc.file}:{loc.line}")], {})
    elif form == "embed":
        item = _lookup(x, item)  # type: ignore[arg-type]
    elif form == "tokens":
        item = token_lists.row_constructor(x, item)  # type: ignore[arg-type]
    elif form == "sized":
        item = sized.row_constructor(x, item)  # type: ignore[arg-type]
    append = ir.Call(loc, ir.CallKind.METHOD, "append", [item], {}, receiver=ir.Name(loc, rows))
    pre += [ir.Assign(loc, ir.Target(rows), ir.ListExpr(loc, [])),
            ir.For(loc, ir.Target(i), positions, [ir.ExprStmt(loc, append)])]
    value: ir.Expr = ir.Name(loc, rows)
    if form != "rows":
        value = ir.Call(loc, ir.CallKind.TORCH, torch.stack, [value], {})
    _replace(path[-2] if path[:-1] else s, x, value)
    return pre


def _tokens(emb: ir.Call) -> ir.Expr:
    """What the embedding call ``emb`` looks up, token by token: ``tokens`` of ``emb(torch.tensor(tokens))``, else
    its argument (a per-instance int tensor)."""
    x = emb.args[0]
    return x.args[0] if isinstance(x, ir.Call) and x.kind is ir.CallKind.TORCH else x  # type: ignore[union-attr]


def _lookup(emb: ir.Call, token: ir.Expr) -> ir.Call:
    """``emb`` applied to one ``token`` (``torch.tensor(token)`` where ``emb`` is of ``torch.tensor(tokens)``): a
    copy of the call (its module read again, a chain of attributes)."""
    x = emb.args[0]
    if isinstance(x, ir.Call) and x.kind is ir.CallKind.TORCH:
        token = ir.Call(token.loc, ir.CallKind.TORCH, torch.tensor, [token], {})
    return ir.Call(emb.loc, emb.kind, emb.target, [token], {}, receiver=copy.deepcopy(emb.receiver))


def _into_variable(parent: ir.Expr, e: ir.Expr, fresh: _Fresh) -> list[ir.Assign]:
    """``_rowsN = e``, ``e`` (held by ``parent``) then read from the fresh variable; none for a variable or constant.
    Of a metadata read (``y.shape[0]``, ``y.dtype``: ``sized.metadata_read``) the object alone (``_rowsN = y``,
    read ``_rowsN.shape[0]`` in place): the read stays one a block makes itself, as written, where a variable
    holding the number would be per-instance host data (``torch.zeros(y.shape[0])`` then a factory of a
    per-instance size, built as a stacked list of its rows)."""
    if isinstance(e, (ir.Name, ir.Const)):
        return []
    o = sized.metadata_read(e)
    if o is not None:
        return _into_variable(next(h for h in ir.walk(e) if any(c is o for c in ir.children(h))), o, fresh)
    name = fresh(_ROWS)
    _replace(parent, e, ir.Name(e.loc, name))
    return [ir.Assign(e.loc, ir.Target(name), e)]


def _callee(e: ir.Expr) -> ir.Expr | None:
    """What ``e`` calls when it is a call of a value (``p.experts[k](x)``) or a method (``p.out.forward(x)``)."""
    return e.receiver if isinstance(e, ir.Call) else None


def _chain(e: ir.Expr) -> bool:
    """Whether ``e`` is a variable's attributes and items (``p.experts[t % 3]``, ``self.layers[i].lin``)."""
    while isinstance(e, (ir.Attr, ir.Subscript)):
        e = e.obj
    return isinstance(e, ir.Name)


def _chain_indices(e: ir.Expr) -> list[tuple[ir.Subscript, ir.Expr]]:
    """The items' indices of the chain ``e`` with their subscripts, in the order Python evaluates them."""
    out: list[tuple[ir.Subscript, ir.Expr]] = []
    while isinstance(e, (ir.Attr, ir.Subscript)):
        if isinstance(e, ir.Subscript):
            out.append((e, e.index))
        e = e.obj
    return out[::-1]


def _always(parent: ir.Expr, child: ir.Expr) -> bool:
    """Whether evaluating ``parent`` always evaluates its sub-expression ``child``."""
    match parent:
        case ir.IfExp(test=t):
            return child is t
        case ir.BoolOp(values=vs):
            return child is vs[0]
        case ir.Compare(operands=ops):  # `a < b < c` evaluates c only where a < b
            return any(child is o for o in ops[:2])
    return True


def _post_order(e: ir.Expr) -> list[ir.Expr]:
    """The sub-expressions of ``e``, each after those it contains: the order in which Python finishes them."""
    return [x for c in ir.children(e) for x in _post_order(c)] + [e]


def _path(root: ir.Expr, x: ir.Expr) -> list[ir.Expr]:
    """The expressions from ``root`` down to ``x``, both included."""
    if root is x:
        return [x]
    for c in ir.children(root):
        below = _path(c, x)
        if below:
            return [root, *below]
    return []


def _replace(node: ir.Expr | ir.Stmt, old: ir.Expr, new: ir.Expr) -> None:
    """Put ``new`` where ``node`` holds ``old`` (a field, an item of a list field, a value of a dict field)."""
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        v = getattr(node, f.name)
        if v is old:
            setattr(node, f.name, new)
            return
        if isinstance(v, list) and any(item is old for item in v):
            v[[id(item) for item in v].index(id(old))] = new
            return
        if isinstance(v, dict) and any(item is old for item in v.values()):
            v[next(k for k, item in v.items() if item is old)] = new
            return
    raise AssertionError(f"{old} is not held by {node}")


class _Fresh:
    """Fresh variable names for a function: ``_{hint}{n}``, none of them a name the function uses."""

    def __init__(self, fn: ir.Function):
        self.used = set(fn.params) | {n for s in ir.walk_stmts(fn.body) for n in ir.assigned_names(s)} | {
            e.id for s in ir.walk_stmts(fn.body) for root in ir.stmt_exprs(s) for e in ir.walk(root)
            if isinstance(e, ir.Name)}
        self.n = 0

    def __call__(self, hint: str) -> str:
        while f"_{hint}{self.n}" in self.used:
            self.n += 1
        name = f"_{hint}{self.n}"
        self.used.add(name)
        return name


def _error(x: ir.Expr, what: str) -> CompileError:
    return CompileError(f"{what}: build the rows in a statement of their own first (`rows = list(x)`), and use "
                        "`rows` there", x.loc.file, x.loc.line, x.loc.col)
