"""A list a shared module holds for the run (``self.outputs``) as a variable of the run (issue 18 §2).

A researcher collecting per-node results writes ``model.outputs = []`` in the entry and
``self.outputs.append(h)`` in the module's methods. The module is shared by every instance, so the static
tier cannot store on it (``rules._field_store``). But when the entry assigns a fresh ``[]`` to the attribute
before anything reads it, every instance's run starts from an empty list of its own: the list is a value of
the run, as a local list threaded through the calls would be. ``found`` rewrites the entry so: the assignment
becomes a variable ``_r_outputs_0 = []``, the entry's reads ``model.outputs`` read it, and every ``return x``
returns ``(x, _r_outputs_0)``; the kind analysis then threads the variable through the functions that read the
attribute (``threaded``: a trailing parameter, which every call of such a function passes), so the lists a
callee appends to are the caller's, in Python's order (§4.2: host effects keep program order).

Plain calls run instance after instance, so they leave the attribute holding the LAST instance's list;
the runtime sets it so after a batched run (``acrobat.runtime.plan.RunList``, ``acrobat.runtime.run_list``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from acrobat.frontend import ir
from acrobat.runtime.plan import RunList

HINT = "r"
"""Hint of the names of the run's lists (``_r_outputs_0``; ``parser.shown_name`` shows ``outputs``)."""

#: Calls that may reach a shared module some way the entry's statements do not show.
_OPAQUE = (ir.CallKind.PROGRAM, ir.CallKind.VALUE, ir.CallKind.HOST, ir.CallKind.METHOD)


def found(fn: ir.Function, instance: int) -> tuple[ir.Function, RunList | None]:
    """The entry ``fn`` rewritten to hold the run's list (module docstring), or ``fn`` and None where it does not
    have the form: a top-level ``p.attr = []`` of a shared parameter ``p`` (any but ``instance``'s) that the entry
    never rebinds, before which no statement reads ``.attr`` or calls anything that could (a program function,
    a method, a called value, plain Python). Only the first such assignment is rewritten."""
    for i, s in enumerate(fn.body):
        target = _assigned_list(s)
        if target is None:
            continue
        name, attr = target
        pos = fn.params.index(name) if name in fn.params else -1
        if pos < 0 or pos == instance or any(name in ir.assigned_names(t) for t in fn.body) \
                or any(_touches(t, attr) for t in fn.body[:i]):
            return fn, None
        out = copy.deepcopy(fn)
        rl = RunList(pos, pos - (pos > instance), attr, f"_{HINT}_{attr}_0")
        out.body[i] = ir.Assign(s.loc, ir.Target(rl.var), ir.ListExpr(s.loc, []))
        _replace_reads(out.body[i + 1:], name, attr, rl.var)
        _return_list(out, rl.var)
        return out, rl
    return fn, None


def threaded(fn: ir.Function, param: str | None, rl: RunList) -> ir.Function:
    """A copy of ``fn`` taking the run's list as a trailing parameter: its reads ``param.attr`` (``param``: the
    parameter holding the module, or None where ``fn`` only passes the list on to its callees) read it."""
    out = copy.deepcopy(fn)
    out.params = [*out.params, rl.var]
    if param is not None:
        _replace_reads(out.body, param, rl.attr, rl.var)
    return out


def _assigned_list(s: ir.Stmt) -> tuple[str, str] | None:
    """``(p, attr)`` of a statement ``p.attr = []`` (parsed as ``setattr(p, "attr", [])``), else None."""
    c = s.value if isinstance(s, ir.ExprStmt) else None
    if isinstance(c, ir.Call) and c.kind is ir.CallKind.BUILTIN and c.target == "setattr" and len(c.args) == 3 \
            and isinstance(c.args[0], ir.Name) and isinstance(c.args[1], ir.Const) \
            and isinstance(c.args[2], ir.ListExpr) and not c.args[2].items:
        return c.args[0].id, c.args[1].value
    return None


def _touches(s: ir.Stmt, attr: str) -> bool:
    """Whether ``s`` (nested bodies included) reads or stores ``.attr``, or calls code that could."""
    for t in ir.walk_stmts([s]):
        for root in ir.stmt_exprs(t):
            for e in ir.walk(root):
                if isinstance(e, ir.Attr) and e.attr == attr:
                    return True
                if isinstance(e, ir.Call) and (e.kind in _OPAQUE or e.target == "setattr"):
                    return True
                if isinstance(e, ir.Concurrent):
                    return True
    return False


def _replace_reads(body: list[ir.Stmt], name: str, attr: str, var: str) -> None:
    """Every ``name.attr`` in ``body`` (nested bodies included) replaced by the variable ``var``, in place."""
    def sub(x: Any) -> Any:
        if isinstance(x, ir.Attr) and x.attr == attr and isinstance(x.obj, ir.Name) and x.obj.id == name:
            return ir.Name(x.loc, var)
        if isinstance(x, (ir.Expr, ir.Stmt)):
            for f in dataclasses.fields(x):
                setattr(x, f.name, sub(getattr(x, f.name)))
        elif isinstance(x, list):
            return [sub(v) for v in x]
        elif isinstance(x, dict):
            return {k: sub(v) for k, v in x.items()}
        return x

    body[:] = sub(body)


def _return_list(fn: ir.Function, var: str) -> None:
    """Every ``return x`` of ``fn`` returns ``(x, var)``; falling off the end returns ``(None, var)``."""
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Return):
            value = s.value if s.value is not None else ir.Const(s.loc, None)
            s.value = ir.TupleExpr(s.loc, [value, ir.Name(s.loc, var)])
    if not fn.body or not isinstance(fn.body[-1], ir.Return):
        fn.body.append(ir.Return(fn.loc, ir.TupleExpr(fn.loc, [ir.Const(fn.loc, None), ir.Name(fn.loc, var)])))

