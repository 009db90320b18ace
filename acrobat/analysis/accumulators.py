"""A host-number accumulator, ``loss = 0`` then ``loss = loss + t`` in a loop: the number and the tensor apart
(issue 18 §2; the paper's §3 language has one kind per variable, §4.2 the host code that tests it).

The commonest training idiom starts a sum at a Python number and adds tensors to it::

    loss = 0                                  # host data (an int)
    for t in toks:
        loss = loss + F.cross_entropy(...)    # a tensor from the first iteration on (`loss += ...` alike)
    return loss / len(toks)                   # a tensor, or 0 / 0 where the loop never ran

The kind analysis gives a variable one kind, and host data has no join with a tensor (``kinds.KindConflict``).
Turning the number into a 0-D tensor is not exact (``0`` plus an int32 0-D tensor is int32, a 0-D int64 tensor
plus it is int64; ``0.0`` plus a float16 0-D tensor is float16), nor is returning ``tensor(0)`` for an instance
whose loop never ran (plain Python gives back the int ``0``). ``split`` therefore keeps the variable ``x`` for
the number and adds an optional tensor ``_a_x_0`` (None until the first update), so that at every point the
value of ``x`` in the plain program is ``x if _a_x_0 is None else _a_x_0``:

- an *initialisation* ``x = c`` (``c`` an int, float or bool constant, possibly negated) also sets
  ``_a_x_0 = None`` (and the function starts with ``_a_x_0 = None``);
- an *update* ``x = x op e`` or ``x op= e`` (``op`` one of ``+ - *``; ``e`` does not read ``x``) becomes
  ``if _a_x_0 is None: _a_x_0 = x op e`` (a Python number has no in-place operator: ``x op= e`` is ``x op e``)
  ``else: _a_x_0 = _a_x_0 op e`` (``op=`` kept: in place on the tensor, ``acrobat.analysis.inplace``); ``e`` is
  evaluated once either way, after ``x`` is read, as in the plain program;
- a *read* of ``x`` anywhere else is answered by duplicating what follows it: a ``return`` reading ``x``
  becomes ``if _a_x_0 is None: return ...x... else: return ..._a_x_0...``; any other statement of the
  function's top level reading ``x`` (with no initialisation or update of ``x`` from it on) has the rest of the
  function duplicated the same way, the copy for the tensor reading ``_a_x_0`` and binding its own variables
  (``_a_y_1``, where ``y`` is first bound there), so neither copy's kinds meet the other's.

Each path then has one kind per variable; the ``is None`` tests run in the skeleton (host code, per instance) and
narrow ``_a_x_0`` to its tensor (``kinds._none_test``). A function whose result is the number on one path and the
tensor on another returns a ``kinds.HostOrK``: each instance gets back what its own path gave, a Python number
as the number (``acrobat.runtime.plan.HostResult``). Anything else (a read inside the loop, a parameter or loop
variable, an initialisation that is not a number constant, an update reading ``x`` in ``e``) is left as it was:
``split`` returns None and the conflict is reported, so the dynamic tier runs the program.
"""

from __future__ import annotations

import copy
import re

from acrobat.frontend import ir
from acrobat.frontend.parser import COMPREHENSION, STARRED, is_comprehension_list

ACCUMULATOR = "a"
"""Hint of the names ``split`` makes (``_a_loss_0``, ``_a_y_1``); ``parser.shown_name`` shows ``loss``, ``y``."""

#: The operators of an update ``x = x op e`` / ``x op= e`` taken: a Python number's ``x op e`` with a tensor ``e``
#: is the tensor's reflected operator, which a static block computes with ``x`` as a host operand.
UPDATE_OPS = frozenset({"+", "-", "*"})


def tensor_name(name: str) -> str:
    """The variable holding the tensor of accumulator ``name`` (None while it holds its number)."""
    return f"_{ACCUMULATOR}_{name}_0"


def split(fn: ir.Function, name: str) -> ir.Function | None:
    """A copy of ``fn`` with the accumulator ``name`` split into its number and its optional tensor (see the module
    docstring; original nodes keep their ids, duplicated ones get new ones); None when ``name`` is not such an
    accumulator of ``fn``, or is read where the split cannot follow it."""
    if name in fn.params or not _is_accumulator(fn.body, name):
        return None
    out = copy.deepcopy(fn)
    body = _Splitter(name, set(fn.params)).body(out.body, top=True)
    if body is None:
        return None
    out.body = [_none(name, out.loc), *body]
    return out


def _is_accumulator(body: list[ir.Stmt], name: str) -> bool:
    """Whether every binding of ``name`` in ``body`` is an initialisation to a number constant or an update, and
    there is at least one of each."""
    inits = updates = 0
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.For) and name in s.target.names():
            return False
        if isinstance(s, ir.Assign) and name in s.target.names():
            if s.target.name != name:
                return False
            if _update(s, name) is not None:
                updates += 1
            elif _number(s.value):
                inits += 1
            else:
                return False
    return inits > 0 and updates > 0


def _update(s: ir.Stmt, name: str) -> ir.BinOp | None:
    """The ``x op e`` of an update ``x = x op e`` / ``x op= e`` of ``name`` whose ``e`` does not read it."""
    if isinstance(s, ir.Assign) and s.target.name == name and isinstance(v := s.value, ir.BinOp) and \
            v.op in UPDATE_OPS and isinstance(v.left, ir.Name) and v.left.id == name and \
            name not in ir.names_read(v.right):
        return v
    return None


def _number(e: ir.Expr) -> bool:
    """``e`` is an int, float or bool constant, possibly negated (``0``, ``0.0``, ``-1``)."""
    if isinstance(e, ir.UnaryOp) and e.op == "-":
        e = e.operand
    return isinstance(e, ir.Const) and type(e.value) in (int, float, bool)


def _none(name: str, loc: ir.Loc) -> ir.Assign:
    """``_a_x_0 = None``."""
    return ir.Assign(loc, ir.Target(name=tensor_name(name)), ir.Const(loc, None))


def _is_none(name: str, loc: ir.Loc) -> ir.Compare:
    """``_a_x_0 is None``."""
    return ir.Compare(loc, ["is"], [ir.Name(loc, tensor_name(name)), ir.Const(loc, None)])


class _Splitter:
    """Rewrites one function's statements for accumulator ``name`` (``split``)."""

    def __init__(self, name: str, params: set[str]):
        self.name = name
        self.tensor = tensor_name(name)
        self.bound_before = set(params) | {name}  # names bound before the statement being rewritten (top level)

    def body(self, stmts: list[ir.Stmt], top: bool) -> list[ir.Stmt] | None:
        """``stmts`` rewritten (nested bodies in place), or None where a read of the accumulator cannot be split."""
        out: list[ir.Stmt] = []
        for i, s in enumerate(stmts):
            update = _update(s, self.name)
            if update is not None:
                out.append(self.update(s, update))
            elif isinstance(s, ir.Assign) and s.target.name == self.name:
                out += [s, _none(self.name, s.loc)]
            elif any(self.name in ir.names_read(e) for e in ir.stmt_exprs(s)):
                if isinstance(s, ir.Return):
                    out.append(self.both([s]))
                elif top and not any(self.name in ir.assigned_names(t) for t in stmts[i:]) and \
                        not any(isinstance(t, ir.PhaseMark) for t in ir.walk_stmts(stmts[i:])):
                    return out + [self.both(stmts[i:])]  # the rest of the function, once per path
                else:
                    return None  # read inside a loop or branch where the rest goes on: not split
            else:
                for sub in ir.sub_bodies(s):
                    new = self.body(sub, top=False)
                    if new is None:
                        return None
                    sub[:] = new
                out.append(s)
            if top:
                self.bound_before |= ir.assigned_names(s)
        return out

    def update(self, s: ir.Assign, v: ir.BinOp) -> ir.If:
        """``if _a_x_0 is None: _a_x_0 = x op e`` ``else: _a_x_0 = _a_x_0 op e`` (``op=`` kept) for update ``s``."""
        later = ir.BinOp(v.loc, v.op, ir.Name(v.left.loc, self.tensor), ir.renumbered(v.right), inplace=v.inplace)
        v.inplace = False  # the number's `x op e`: the operator the model wrote, its node id kept
        return ir.If(s.loc, _is_none(self.name, s.loc), [ir.Assign(s.loc, ir.Target(name=self.tensor), v)],
                     [ir.Assign(s.loc, ir.Target(name=self.tensor), later)])

    def both(self, stmts: list[ir.Stmt]) -> ir.If:
        """``if _a_x_0 is None: stmts`` ``else: stmts'``: ``stmts'`` a copy with new node ids reading the tensor
        for the accumulator, and its own variable ``_a_y_k`` for each ``y`` first bound in ``stmts``."""
        fresh = set().union(*(ir.assigned_names(s) for s in stmts)) - self.bound_before
        # a hoisted comprehension's list or a starred call's temporary gets a fresh name of its own form: the
        # rules find a comprehension's appends by its list's name (``ranks.comprehension_puts``), so two copies
        # sharing one name had one copy's `torch.cat` rewritten to a stack and the other's appends with it (the
        # items lost their unit axis, the other cat became a fold of them: a silent wrong answer)
        names = {self.name: self.tensor} | {
            y: f"_{COMPREHENSION}{ir.fresh_id()}" if is_comprehension_list(y) else
            f"_{STARRED}{ir.fresh_id()}" if re.fullmatch(f"_{STARRED}\\d+", y) else f"_{ACCUMULATOR}_{y}_{k}"
            for k, y in enumerate(sorted(fresh), 1)}
        copied = copy.deepcopy(stmts)
        for s in ir.walk_stmts(copied):
            s.nid = ir.fresh_id()
            for root in ir.stmt_exprs(s):
                for e in ir.walk(root):
                    e.nid = ir.fresh_id()
                    if isinstance(e, ir.Name) and e.id in names:
                        e.id = names[e.id]
            if isinstance(s, (ir.Assign, ir.For)):
                s.target.rename(names)
        return ir.If(stmts[0].loc, _is_none(self.name, stmts[0].loc), stmts, copied)

