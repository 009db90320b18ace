"""A loop over a shared container of modules or parameters, unrolled into its iterations (§3, §4.1, §5.1).

Research code stacks layers in containers and loops over them::

    for lyr in p.layers:                       # nn.ModuleList, nn.Sequential, nn.ParameterList, ...
        h = torch.relu(lyr(h)) + h
    for lin, ln in zip(p.lins, p.norms): ...   # enumerate(...), reversed(...), p.experts.items()/values()/keys()

The container is a shared argument's: every instance sees the same items, and how many there are is a fact of
the run (``kinds.shared_fact`` records its keys, so a run with another number of layers compiles again). The
kind analysis (``kinds._Analyzer.stmt``) asks ``loop_over`` for the containers such a ``for`` iterates; where all
of them are shared containers of the run, it raises a ``CompileError`` carrying ``unroll`` (the function, the
loop's node id and the containers' keys), and ``kinds.analyze_kinds`` replaces the loop with ``unrolled`` and
analyses again. Each iteration's item is then a shared path with a constant index (``p.layers[0]``,
``p.experts['a']``): a module of its own class called directly (no per-instance choice, ``kinds.ChoiceK``, and
modules of different classes in one container), a parameter the prologue reads once per run (§5.1), and the
static blocks of consecutive iterations fuse and batch like any straight-line code (§4).

Unrolling over a host ``range`` with the item chosen by a per-iteration index (``p.layers[i]``) was the other
way: it keeps one body, but each call is then a ``ChoiceK`` (one branch per module, dispatched on ``i``), an
item that is only ever called (a parameter of a ``ParameterList`` is no module, ``lyr.weight`` no call), and at
most ``MAX_CHOICES`` modules; the unrolled form has none of these limits.

``break`` and ``continue`` stay exact: where the body continues its loop, each iteration runs inside a
one-iteration host loop (``for _u_ in range(1):``), whose own ``continue`` ends that iteration; where it breaks,
the iterations run inside one more such loop, whose ``break`` leaves them all (a flag carries a ``break`` out of
an iteration's own loop). A ``return`` inside needs nothing. The loop variables are renamed per iteration
(``_u_lyr_7``; ``parser.shown_name`` shows ``lyr``) so that each holds one shared path, unless code after the
loop reads them (Python's loop variable keeps the last item), where they keep their name.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import torch

from acrobat.frontend import ir

UNROLLED = "u"
"""Hint of the names ``unrolled`` makes (``_u_lyr_7``); ``parser.shown_name`` shows ``lyr``."""

#: The most iterations a loop over a shared container is unrolled into; a longer container's loop is rejected
#: (the dynamic tier runs it).
MAX_UNROLL = 64

Keys = range | tuple
"""A container's keys (``container_keys``): ``range(n)`` of a list-like container, the keys of a dict-like one."""


@dataclass(frozen=True)
class LoopOver:
    """What a ``for`` iterates: ``form`` (``"items"``, ``"reversed"``, ``"zip"``, or a dict view ``"keys"``,
    ``"values"``, ``"dict_items"``) over the container expressions ``containers`` (one, or one per ``zip``
    argument); ``start``: the first count where an ``enumerate`` counts the items, else None."""

    form: str
    containers: tuple[ir.Expr, ...]
    start: int | None = None


def container_keys(v: object) -> Keys | None:
    """The keys of the shared container ``v``: ``range(len(v))`` of an ``nn.ModuleList``, ``nn.Sequential``,
    ``nn.ParameterList`` (or a list or tuple of modules), the keys in order of an ``nn.ModuleDict`` or
    ``nn.ParameterDict`` (or a dict of modules); None for anything else."""
    if isinstance(v, (torch.nn.ModuleDict, torch.nn.ParameterDict)):
        return tuple(v.keys())
    if isinstance(v, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ParameterList)):
        return range(len(v))
    if isinstance(v, dict) and v and all(isinstance(m, torch.nn.Module) for m in v.values()):
        return tuple(v.keys())
    if isinstance(v, (list, tuple)) and v and all(isinstance(m, torch.nn.Module) for m in v):
        return range(len(v))
    return None


def loop_over(it: ir.Expr) -> LoopOver | None:
    """The containers the loop iterable ``it`` runs over where it has a form ``unrolled`` takes, each a path (a
    name and constant attributes or indexes, ``p.blocks[0].layers``: evaluating it again has no effect), else
    None. Whether they are shared containers is the kind analysis' question."""
    match it:
        case ir.Call(kind=ir.CallKind.BUILTIN, target="enumerate", args=[c], kwargs=kw) if not kw:
            inner = loop_over(c)
            return None if inner is None or inner.start is not None else dataclasses.replace(inner, start=0)
        case ir.Call(kind=ir.CallKind.BUILTIN, target="enumerate", args=[c, ir.Const(value=int() as s)],
                     kwargs=kw) if not kw:
            inner = loop_over(c)
            return None if inner is None or inner.start is not None else dataclasses.replace(inner, start=s)
        case ir.Call(kind=ir.CallKind.BUILTIN, target="reversed", args=[c], kwargs=kw) if not kw:
            return LoopOver("reversed", (c,)) if _is_path(c) else None
        case ir.Call(kind=ir.CallKind.BUILTIN, target="zip", args=cs, kwargs=kw) if cs and not kw:
            return LoopOver("zip", tuple(cs)) if all(_is_path(c) for c in cs) else None
        case ir.Call(kind=ir.CallKind.METHOD, target="keys" | "values" | "items" as view, receiver=c, args=[],
                     kwargs=kw) if not kw and c is not None:
            return LoopOver("dict_items" if view == "items" else view, (c,)) if _is_path(c) else None
    return LoopOver("items", (it,)) if _is_path(it) else None


def _is_path(e: ir.Expr) -> bool:
    match e:
        case ir.Name():
            return True
        case ir.Attr(obj=o):
            return _is_path(o)
        case ir.Subscript(obj=o, index=ir.Const()):
            return _is_path(o)
    return False


def count(over: LoopOver, keys: tuple[Keys, ...]) -> int | None:
    """How many iterations ``over`` has with its containers' keys ``keys``, or None where its form does not
    apply to them (a dict view of a list-like container, ``reversed`` of a dict-like one)."""
    listlike = [isinstance(k, range) for k in keys]
    if over.form in ("keys", "values", "dict_items") and listlike[0] or over.form == "reversed" and not listlike[0]:
        return None
    return min(len(k) for k in keys)


def unrolled(fn: ir.Function, loop: int, keys: tuple[Keys, ...]) -> tuple[ir.Function, ir.Pass, LoopOver]:
    """A copy of ``fn`` whose ``for`` statement of node id ``loop`` (a loop ``loop_over`` takes, over containers
    with keys ``keys``) is replaced by its iterations: each binds the loop target to its item, a shared path with
    a constant index or a constant key (see the module docstring), and runs a copy of the body with fresh node
    ids. Also the ``pass`` statement put first in the loop's place, where the kind analysis checks that the
    containers have these keys in every specialization (``kinds._Analyzer.unrolled_here``), and what the loop
    iterated.

    Raises:
        ValueError: no such loop in ``fn``, or its form does not apply to ``keys`` (``count``).
    """
    out = copy.deepcopy(fn)
    for body in _bodies(out.body):
        for i, s in enumerate(body):
            if isinstance(s, ir.For) and s.nid == loop:
                over = loop_over(s.iter)
                n = count(over, keys) if over is not None else None
                if over is None or n is None:
                    raise ValueError(f"the loop at {s.loc} does not iterate over containers of keys {keys}")
                anchor = ir.Pass(s.loc)
                body[i:i + 1] = [anchor, *_iterations(s, over, keys, n, _read_outside(out.body, s))]
                return out, anchor, over
    raise ValueError(f"no loop {loop} in {fn.name}")


def _bodies(body: list[ir.Stmt]):
    yield body
    for s in body:
        for sub in ir.sub_bodies(s):
            yield from _bodies(sub)


def _read_outside(body: list[ir.Stmt], loop: ir.For) -> bool:
    """Whether a statement of ``body`` outside ``loop`` may read one of its target's names bound by ``loop``: any
    read of them outside the loops binding them as their own target (``loop``'s, another loop's, which binds them
    before each iteration)."""
    return _reads(body, loop, frozenset(loop.target.names()))


def _reads(body: list[ir.Stmt], loop: ir.For, names: frozenset[str]) -> bool:
    for s in body:
        if s is loop:
            continue
        if any(names & ir.names_read(e) for e in ir.stmt_exprs(s)):
            return True
        inner = names - set(s.target.names()) if isinstance(s, ir.For) else names
        if inner and any(_reads(sub, loop, inner) for sub in ir.sub_bodies(s)):
            return True
    return False


def _iterations(s: ir.For, over: LoopOver, keys: tuple[Keys, ...], n: int, keep_names: bool) -> list[ir.Stmt]:
    """The ``n`` iterations of loop ``s`` over ``over``, with the loop's exits kept (see the module docstring);
    ``keep_names``: the loop variables keep their names (code after the loop reads them)."""
    leaves = _exits(s.body)
    flag = f"_{UNROLLED}_break_{s.nid}"
    out: list[ir.Stmt] = [_assign(s.loc, flag, ir.Const(s.loc, False))] if leaves == {"break", "continue"} else []
    for j in range(n):
        names = {} if keep_names else {x: f"_{UNROLLED}_{x}_{ir.fresh_id()}" for x in s.target.names()}
        target = copy.deepcopy(s.target)
        target.rename(names)
        body = [ir.Assign(s.loc, target, _item(s.loc, over, keys, j, n)), *_fresh(s.body, names)]
        if "continue" in leaves:  # an iteration of its own: its `continue` ends it
            if "break" in leaves:
                _flag_breaks(body, flag)
            out.append(_once(s.loc, body))
            if "break" in leaves:
                out.append(ir.If(s.loc, ir.Name(s.loc, flag), [ir.Break(s.loc)], []))
        else:
            out.extend(body)
    return [_once(s.loc, out)] if "break" in leaves else out


def _item(loc: ir.Loc, over: LoopOver, keys: tuple[Keys, ...], j: int, n: int) -> ir.Expr:
    """Iteration ``j``'s item (of ``n``)."""
    def at(c: ir.Expr, k: Keys, pos: int) -> ir.Expr:  # what iterating container c gives at pos: an item or a key
        return ir.Subscript(loc, ir.renumbered(c), ir.Const(loc, k[pos])) if isinstance(k, range) else \
            ir.Const(loc, k[pos])

    c, k = over.containers[0], keys[0]
    match over.form:
        case "items" | "keys":
            item = at(c, k, j)
        case "reversed":
            item = at(c, k, n - 1 - j)
        case "zip":
            item = ir.TupleExpr(loc, [at(ci, ki, j) for ci, ki in zip(over.containers, keys)])
        case "values":
            item = ir.Subscript(loc, ir.renumbered(c), ir.Const(loc, k[j]))
        case _:
            item = ir.TupleExpr(loc, [ir.Const(loc, k[j]), ir.Subscript(loc, ir.renumbered(c), ir.Const(loc, k[j]))])
    return item if over.start is None else ir.TupleExpr(loc, [ir.Const(loc, over.start + j), item])


def _exits(body: list[ir.Stmt]) -> set[str]:
    """Which of ``break``/``continue`` of the loop around ``body`` it holds (not of a loop inside it)."""
    found: set[str] = set()
    for s in body:
        if isinstance(s, (ir.Break, ir.Continue)):
            found.add(type(s).__name__.lower())
        elif not isinstance(s, (ir.For, ir.While)):
            for sub in ir.sub_bodies(s):
                found |= _exits(sub)
    return found


def _flag_breaks(body: list[ir.Stmt], flag: str) -> None:
    """Each ``break`` of the loop around ``body`` sets ``flag`` first (the iteration's own loop ends; the flag
    then leaves the iterations' loop)."""
    for i in reversed(range(len(body))):
        s = body[i]
        if isinstance(s, ir.Break):
            body[i:i + 1] = [_assign(s.loc, flag, ir.Const(s.loc, True)), s]
        elif not isinstance(s, (ir.For, ir.While)):
            for sub in ir.sub_bodies(s):
                _flag_breaks(sub, flag)


def _once(loc: ir.Loc, body: list[ir.Stmt]) -> ir.For:
    """``for _u_ in range(1): body``: a one-iteration host loop that ``break`` and ``continue`` leave."""
    one = ir.Call(loc, ir.CallKind.BUILTIN, "range", [ir.Const(loc, 1)], {})
    return ir.For(loc, ir.Target(name=f"_{UNROLLED}_once_{ir.fresh_id()}"), one, body)


def _assign(loc: ir.Loc, name: str, value: ir.Expr) -> ir.Assign:
    return ir.Assign(loc, ir.Target(name=name), value)


def _fresh(body: list[ir.Stmt], names: dict[str, str]) -> list[ir.Stmt]:
    """A deep copy of ``body`` with new node ids, reading and binding ``names`` (old -> new) renamed."""
    out = copy.deepcopy(body)
    for s in ir.walk_stmts(out):
        s.nid = ir.fresh_id()
        if isinstance(s, (ir.Assign, ir.For)):
            s.target.rename(names)
        for root in ir.stmt_exprs(s):
            for e in ir.walk(root):
                e.nid = ir.fresh_id()
                if isinstance(e, ir.Name) and e.id in names:
                    e.id = names[e.id]
    return out
