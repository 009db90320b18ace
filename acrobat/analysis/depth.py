"""Inline depth computation's static part: which loops are maps, the base depth (§4.1, App. A.1).

The generated skeleton threads a depth counter ``_d`` through the program
(§4.1, Listing 2): a recursion-dependent block runs at ``_d`` and bumps it;
independent calls (``acrobat.concurrent``) and the iterations of a *map*
loop all start from the same ``_d`` and join with ``max``, so the
instance parallelism they hold lands at equal depths. A ``for`` loop is a
map when no tensor value flows from one iteration to the next (no
loop-carried tensor variable, no list of tensors both read and grown in
the body, and no dict keyed by host data read or filled there, also by a
callee it is passed to: a memo table hit in one iteration holds a value another
computed); that is decided here, statically. Hoisted blocks run at their
static depths ``0..S``; the counter starts at ``S + 1``.
"""

from __future__ import annotations

from acrobat.analysis.kinds import MapK, Spec, contains, has_tensor
from acrobat.analysis.lowered import BlockCall, ProgramCall
from acrobat.analysis.rules import LIST_METHODS, MAP_METHODS
from acrobat.frontend import ir


def stmt_reads(s: ir.Stmt) -> set[str]:
    """Names a statement reads (nested bodies included); ``xs.append(v)`` does not read ``xs``."""
    names: set[str] = set()
    for t in ir.walk_stmts([s]):
        for e in ir.stmt_exprs(t):
            if _is_append(e):
                for a in e.args:  # type: ignore[union-attr]
                    names |= ir.names_read(a)
            else:
                names |= ir.names_read(e)
        if isinstance(t, BlockCall):
            for p in t.block.batched_params:
                names |= ir.names_read(p.expr)  # type: ignore[arg-type]
        if isinstance(t, ProgramCall):
            for _, args in t.calls:
                for a in args:
                    names |= ir.names_read(a)
    return names


def stmt_writes(s: ir.Stmt, maps: frozenset[str] = frozenset()) -> set[str]:
    """Names a statement assigns or mutates (nested bodies included); ``maps``: variables holding dicts keyed by
    host data (``maps_of``), which a program call they are passed to may fill."""
    names = ir.assigned_names(s)
    for t in ir.walk_stmts([s]):
        if isinstance(t, BlockCall):
            names |= set(t.block.outputs)
        if isinstance(t, ProgramCall):
            names |= set(t.target.names())
            names |= {a.id for _, args in t.calls for a in args if isinstance(a, ir.Name) and a.id in maps}
        for e in ir.stmt_exprs(t):
            for sub in ir.walk(e):
                if isinstance(sub, ir.Call) and sub.kind is ir.CallKind.METHOD and \
                        sub.target in LIST_METHODS | MAP_METHODS and isinstance(sub.receiver, ir.Name):
                    names.add(sub.receiver.id)
    return names


def maps_of(spec: Spec) -> frozenset[str]:
    """The variables of ``spec`` holding dicts keyed by host data (``kinds.MapK``)."""
    return frozenset(n for n, k in spec.var.items() if contains(k, MapK))


def _is_append(e: ir.Expr) -> bool:
    return isinstance(e, ir.Call) and e.kind is ir.CallKind.METHOD and e.target == "append" \
        and isinstance(e.receiver, ir.Name)


def contains_work(s: ir.Stmt) -> bool:
    """True when the statement (or a nested one) invokes a block or a program function."""
    return any(isinstance(t, (BlockCall, ProgramCall)) for t in ir.walk_stmts([s]))


def loop_carried(body: list[ir.Stmt], aliases: dict[str, set[str]] | None = None,
                 maps: frozenset[str] = frozenset()) -> set[str]:
    """Names whose value may flow from one iteration of ``body`` to the next. ``aliases``: for a list
    variable, the variables that may hold the same list (``ys = xs; ys.append(h)`` changes ``xs`` too);
    ``maps``: as ``stmt_writes`` takes them."""
    defined: set[str] = set()
    exposed: set[str] = set()
    for s in body:
        exposed |= stmt_reads(s) - defined
        if isinstance(s, (ir.Assign, BlockCall, ProgramCall)):
            defined |= stmt_writes(s)
    written: set[str] = set()
    for s in body:
        written |= stmt_writes(s, maps)
    for n in list(written):
        written |= (aliases or {}).get(n, set())
    return exposed & written


def list_aliases(spec: Spec) -> dict[str, set[str]]:
    """Per list variable of ``spec``, the variables that may hold the same list (its ``ListFlow`` edges
    between whole lists, closed transitively)."""
    groups: dict[str, set[str]] = {}
    for (a, da), (b, db) in spec.lists.edges:
        if da == db == 0:
            merged = groups.get(a, {a}) | groups.get(b, {b})
            for n in merged:
                groups[n] = merged
    return groups


def leaves_early(body: list[ir.Stmt]) -> bool:
    """True when a loop body holds a ``return``, or a ``break``/``continue`` of this loop (not of a nested one)."""
    for s in body:
        if isinstance(s, (ir.Break, ir.Continue)) or any(isinstance(t, ir.Return) for t in ir.walk_stmts([s])):
            return True
        if isinstance(s, ir.If) and (leaves_early(s.body) or leaves_early(s.orelse)):
            return True
    return False


def parallel_loops(spec: Spec, body: list[ir.Stmt]) -> set[int]:
    """The nids of the ``for`` loops of ``body`` whose iterations are independent (maps).

    A loop that can leave an iteration early (``break``, ``continue``,
    ``return``) is never a map: the generated map loop joins each
    iteration's depth at its end, which an early exit skips.
    """
    out: set[int] = set()
    aliases = list_aliases(spec)
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.For) and contains_work(s) and not leaves_early(s.body):
            carried = loop_carried(s.body, aliases, maps_of(spec))
            if not any(has_tensor(spec.var.get(n)) for n in carried if n in spec.var):
                out.add(s.nid)
    return out


def base_depth(bodies: list[list[ir.Stmt]]) -> int:
    """First depth of the inline counter: one above every hoisted block's static depth."""
    depths = [s.block.sdepth for b in bodies for s in ir.walk_stmts(b)
              if isinstance(s, BlockCall) and s.block.sdepth is not None]
    return max(depths, default=-1) + 1
