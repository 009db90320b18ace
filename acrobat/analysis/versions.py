"""A variable rebound to a value of another kind: one variable per top-level binding (§3, the frontend's subset).

Code as its authors write it reuses a name for what a value becomes: ``inputs = self.emb(inputs)`` (token ids,
host data, then their embeddings, a per-instance tensor), ``tokens = [p.emb[t] for t in tokens]``. The kind
analysis gives each variable one kind, and host data has no join with a tensor (``kinds.KindConflict``). Where
a variable's kinds conflict, ``split`` gives it one variable per *version*: each assignment to it among the
function's top-level statements (run once, unconditionally, in order) starts a new version, read by every later
statement, nested ones included, until the next such assignment. This is what Python's name lookup gives (each
read sees the last assignment before it), so the program means the same; only the names differ, ``_v_inputs_1``,
which messages show as the model's own (``parser.shown_name``). A rebinding inside a branch or a loop is a join
of the paths and stays one variable (a conflict there is rejected, with "use separate variables").
"""

from __future__ import annotations

import copy

from acrobat.frontend import ir

VERSION = "v"
"""Hint of the names of a variable's later versions (``_v_inputs_1``; ``parser.shown_name`` shows ``inputs``)."""


def version_name(name: str, k: int) -> str:
    """The name of version ``k`` (1, 2, ...) of variable ``name``."""
    return f"_{VERSION}_{name}_{k}"


def split(fn: ir.Function, name: str) -> ir.Function | None:
    """A copy of ``fn`` (node ids kept) with variable ``name`` split into one variable per top-level binding; None
    when no top-level statement rebinds it (assigns a parameter, or a variable bound or read before), where
    splitting cannot separate its kinds."""
    out = copy.deepcopy(fn)
    current, k, seen = name, 0, name in fn.params
    for s in out.body:
        if seen and isinstance(s, ir.Assign) and name in s.target.names():
            _rename_exprs(s.value, name, current)  # the value reads the version before this assignment
            k += 1
            current = version_name(name, k)
            _rename_target(s.target, name, current)
            continue
        seen = seen or name in _reads_or_binds(s)
        for t in ir.walk_stmts([s]):
            for root in ir.stmt_exprs(t):
                _rename_exprs(root, name, current)
            if isinstance(t, (ir.Assign, ir.For)):
                _rename_target(t.target, name, current)
    return out if k else None


def _reads_or_binds(s: ir.Stmt) -> set[str]:
    """The names statement ``s`` (nested ones included) reads or binds."""
    return ir.assigned_names(s) | {n for t in ir.walk_stmts([s]) for root in ir.stmt_exprs(t)
                                   for n in ir.names_read(root)}


def _rename_exprs(root: ir.Expr, name: str, to: str) -> None:
    for e in ir.walk(root):
        if isinstance(e, ir.Name) and e.id == name:
            e.id = to


def _rename_target(t: ir.Target, name: str, to: str) -> None:
    if t.name == name:
        t.name = to
    for item in t.items or []:
        _rename_target(item, name, to)
