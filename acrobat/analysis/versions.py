"""A variable rebound to a value of another kind: one variable per top-level binding (§3, the frontend's subset).

Code as its authors write it reuses a name for what a value becomes: ``inputs = self.emb(inputs)`` (token ids,
host data, then their embeddings, a per-instance tensor), ``tokens = [p.emb[t] for t in tokens]``. The kind
analysis gives each variable one kind, and host data has no join with a tensor (``kinds.KindConflict``). Where
a variable's kinds conflict, ``split`` gives it one variable per *version*: each assignment to it among the
function's top-level statements (run once, unconditionally, in order) starts a new version, read by every later
statement, nested ones included, until the next such assignment. This is what Python's name lookup gives (each
read sees the last assignment before it), so the program means the same; only the names differ, ``_v_inputs_1``,
which messages show as the model's own (``parser.shown_name``). Inside a branch or a loop body, an assignment
that the same body rebinds later (``xs = zip(*states)`` then ``xs = torch.cat(xs)`` under an ``else``) starts a
version read only until that rebinding (``_split_spans``): the value after it, which the paths join, keeps the
variable's name. A rebinding that is a join of the paths (one assignment per branch) stays one variable (a
conflict there is rejected, with "use separate variables").
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
    """A copy of ``fn`` (node ids kept) with variable ``name`` split into one variable per top-level binding (an
    assignment, or a ``for`` loop over it when no later statement reads it before rebinding it), and per span
    of a nested body between two of its assignments there (``_split_spans``); None
    when no top-level statement rebinds it (assigns a parameter, or a variable bound or read before), where
    splitting cannot separate its kinds."""
    out = copy.deepcopy(fn)
    k = _split_spans(out.body, name, 0, top=True)
    current, seen = name, name in fn.params
    for i, s in enumerate(out.body):
        if seen and isinstance(s, ir.Assign) and name in s.target.names():
            _rename_exprs(s.value, name, current)  # the value reads the version before this assignment
            k += 1
            current = version_name(name, k)
            s.target.rename({name: current})
            continue
        if seen and isinstance(s, ir.For) and s.target.name == name and not _read_after(out.body[i + 1:], name):
            _rename_exprs(s.iter, name, current)  # `for x in xs:` whose x nothing reads after the loop
            k += 1
            current = version_name(name, k)
            s.target.rename({name: current})
            _rename_body(s.body, name, current)
            continue
        seen = seen or name in _reads_or_binds(s)
        _rename_body([s], name, current)
    return out if k else None


def _rename_body(body: list[ir.Stmt], name: str, to: str) -> None:
    """Rename ``name`` to ``to`` in every statement of ``body``, nested ones included (reads and bindings)."""
    for t in ir.walk_stmts(body):
        for root in ir.stmt_exprs(t):
            _rename_exprs(root, name, to)
        if isinstance(t, (ir.Assign, ir.For)):
            t.target.rename({name: to})


def _read_after(rest: list[ir.Stmt], name: str) -> bool:
    """Whether a statement of ``rest`` reads ``name`` before a top-level assignment rebinds it (after a loop
    that ran no iteration, such a read would see the value from before the loop)."""
    for s in rest:
        if isinstance(s, ir.Assign) and s.target.name == name:
            return name in ir.names_read(s.value)
        if name in _reads_or_binds(s):
            return True
    return False


def _split_spans(body: list[ir.Stmt], name: str, k: int, top: bool) -> int:
    """Split ``name`` in the nested bodies of ``body`` (and in ``body`` itself unless ``top``, which ``split``
    versions whole): where a statement of a body assigns ``name`` and a later statement of the same body assigns
    it again, with no ``break``/``continue`` of the body's loop between them (which would let the first value
    outlive the span), the first binding and every use up to the second's value read version ``k + 1``, ``k + 2``,
    .... Innermost bodies first. The number of versions made so far (``k`` before)."""
    for s in body:
        for sub in ir.sub_bodies(s):
            k = _split_spans(sub, name, k, top=False)
    if top:
        return k
    binds = [(i, s) for i, s in enumerate(body) if isinstance(s, ir.Assign) and name in s.target.names()]
    for (i, first), (j, second) in zip(binds, binds[1:]):
        if _leaves_loop(body[i + 1:j]):
            continue
        k += 1
        to = version_name(name, k)
        first.target.rename({name: to})
        _rename_body(body[i + 1:j], name, to)
        _rename_exprs(second.value, name, to)
    return k


def _leaves_loop(stmts: list[ir.Stmt]) -> bool:
    """Whether ``stmts`` hold a ``break`` or ``continue`` of the loop around them (not of a loop inside them)."""
    for s in stmts:
        if isinstance(s, (ir.Break, ir.Continue)):
            return True
        if not isinstance(s, (ir.For, ir.While)) and any(_leaves_loop(b) for b in ir.sub_bodies(s)):
            return True
    return False


def _reads_or_binds(s: ir.Stmt) -> set[str]:
    """The names statement ``s`` (nested ones included) reads or binds."""
    return ir.assigned_names(s) | {n for t in ir.walk_stmts([s]) for root in ir.stmt_exprs(t)
                                   for n in ir.names_read(root)}


def _rename_exprs(root: ir.Expr, name: str, to: str) -> None:
    for e in ir.walk(root):
        if isinstance(e, ir.Name) and e.id == name:
            e.id = to

