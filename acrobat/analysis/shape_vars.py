"""Host variables bound to a shape read, read inside static blocks as the shape read itself (§4.2, §5).

A shape read of a per-instance tensor (``h.shape[0]``, ``h.size(-1) // 2``, ``len(h)``) is host data, read
like ``.item()`` (§4.2). Written inside a tensor operator, a block computes it itself, where ``vmap`` shows the
instance's own shape: a Python int (``_Lowerer.shape_query``). Held in a variable first,

    n = h.shape[0]
    d = h.size(-1) // 2
    y = h.view(n, 2, d)

the variable would be a host operand of the block, one number per instance: a batched 0-d tensor under
``vmap``, which no size can be. ``shape_definitions`` finds the definition to put in place of such a variable
inside tensor statements (forward substitution, ``_Lowerer.lower``) where that is exact:

- the variable has one binding in the function (the lowered body; parameters count as bindings), an
  assignment of a *shape definition* (``definition``) that dominates the use (it comes earlier in the same
  statement list as the use or as a statement holding it), and
- every variable the definition reads (the tensor, or another such variable) has one binding too, which
  dominates the definition: the tensor read at the use is the one the definition read.

A shape definition is a constant, a metadata read (``x.shape[i]``, ``x.size(i)``, ``x.ndim``, ``x.dim()``,
``x.numel()``, ``x.dtype``, ``x.device``) of a variable ``x`` holding a per-instance tensor or the instance's
own tensor, ``len(x)`` of a per-instance tensor, a shared value (``p.heads``, §5.1), a variable that is one
itself, and ``+ - * // %`` of those (of constants alone: folded to their value);
``B, L = x.shape`` (or ``x.size()``) and ``*_, d = x.shape`` define each name as ``x.shape[i]``.

Elsewhere the variable stays a host operand; a host operand used as a size (``size_operands``) is rejected by
``_Lowerer.make_block`` with its file:line (a ``CompileError``: by default the dynamic tier runs it), where every
launch of the block failed before.
"""

from __future__ import annotations

import copy
import operator
from collections import Counter
from typing import Callable

import torch

from acrobat.analysis.kinds import HOST, SharedK, Spec, TensorK
from acrobat.analysis.lowered import ProgramCall
from acrobat.analysis.sized import metadata_read
from acrobat.frontend import ir

#: Tensor methods whose arguments are all sizes, dims or lengths: Python ints, never a batched tensor.
SIZE_METHODS = frozenset({"view", "reshape", "expand", "repeat", "tile", "narrow", "split", "unflatten", "new_zeros",
                          "new_ones", "new_empty", "new_full", "permute", "transpose", "flatten", "unsqueeze",
                          "squeeze", "movedim", "chunk", "roll", "unfold", "select"})
#: torch functions that take sizes, dims or lengths, each with the position of its first such argument (after
#: the tensor it applies to: ``torch.narrow(x, 0, 0, n)``; a factory's first: ``torch.zeros(n, d)``).
SIZE_FUNCTIONS: dict[Callable, int] = {
    **dict.fromkeys([torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.rand, torch.randn,
                     torch.eye], 0),
    **dict.fromkeys([torch.narrow, torch.split, torch.reshape, torch.tile, torch.chunk, torch.permute,
                     torch.transpose, torch.flatten, torch.unsqueeze, torch.squeeze, torch.movedim, torch.roll,
                     torch.select], 1)}
#: The keywords of those calls that are no size (``dtype=``, ``device=``, ...).
_NOT_SIZES = frozenset({"dtype", "device", "layout", "requires_grad", "pin_memory", "memory_format", "generator",
                        "out"})
_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
#: A path of a statement in a body: its index in its list, then for each enclosing statement, from the
#: outermost, its index and which of its statement lists (``ir.sub_bodies``) holds the next.
Path = tuple[int, ...]


def size_operands(e: ir.Call) -> list[ir.Expr]:
    """The operands of the call ``e`` that PyTorch takes as Python ints (sizes, dims, lengths), the items of a
    size tuple or list one by one: the arguments of a ``SIZE_METHODS`` method (the first only of ``new_full``),
    those of a ``SIZE_FUNCTIONS`` function from its first size on (the first only of ``torch.full``), and their
    keywords but ``_NOT_SIZES``; none of any other call."""
    first = ir.known(SIZE_FUNCTIONS, e.target) if e.kind is ir.CallKind.TORCH else None
    if e.kind is ir.CallKind.METHOD and e.target in SIZE_METHODS:
        args = e.args[:1] if e.target == "new_full" else e.args
    elif first is not None:
        args = e.args[:1] if e.target is torch.full else e.args[first:]
    else:
        return []
    args = [*args, *(v for k, v in e.kwargs.items() if k not in _NOT_SIZES)]
    return [y for x in args for y in (x.items if isinstance(x, (ir.TupleExpr, ir.ListExpr)) else [x])]


def shape_definitions(body: list[ir.Stmt], spec: Spec, is_tensor_stmt: Callable[[ir.Stmt], bool]) -> dict[int, ir.Expr]:
    """What to put in place of each host variable of the tensor statements of ``body`` (``is_tensor_stmt``: they
    form static blocks) whose value is a shape definition (module docstring), where that is exact: a copy of
    the definition, by the ``id`` of the ``ir.Name`` it replaces. The copies' nodes have the kinds and value
    reads (§4.2) of the nodes they copy."""
    bindings: Counter[str] = Counter(spec.fn.params)
    paths: dict[int, Path] = {}
    binder: dict[str, ir.Stmt] = {}
    for s, path in _walk(body, ()):
        paths[id(s)] = path
        target = s.target if isinstance(s, (ir.Assign, ir.For, ProgramCall)) else None
        for name in target.names() if target is not None else []:
            bindings[name] += 1
            binder[name] = s

    def bound_before(name: str, at: ir.Stmt) -> ir.Stmt | None | bool:
        """The statement binding ``name`` once, dominating ``at``; True for a parameter never rebound; else None."""
        if bindings[name] != 1:
            return None
        if name in spec.fn.params:
            return True
        b = binder[name]
        return b if _dominates(paths[id(b)], isinstance(b, ir.For), paths[id(at)]) else None

    def resolved(e: ir.Expr, at: ir.Stmt) -> ir.Expr | None:
        """A copy of the shape definition ``e`` (read by statement ``at``) with its variables resolved, or None."""
        k = spec.kinds.get(e.nid)
        if isinstance(k, SharedK) and k.host:  # `p.heads`: one number for every instance (§5.1)
            return _copy(e, spec)
        match e:
            case ir.Const(value=v) if type(v) in (int, bool):
                return _copy(e, spec)
            case ir.Name(id=name) if spec.kinds.get(e.nid, HOST) is HOST:
                b = bound_before(name, at)
                d = definition(b, name) if isinstance(b, ir.Assign) else None
                return None if d is None else resolved(d, b)  # type: ignore[arg-type]
            case ir.BinOp(left=a, right=c) if e.op in _ARITHMETIC and not e.inplace:
                left, right = resolved(a, at), resolved(c, at)
                if left is None or right is None:
                    return None
                if isinstance(left, ir.Const) and isinstance(right, ir.Const):  # `HIDDEN // 2`: its value
                    try:
                        return ir.Const(e.loc, _ARITHMETIC[e.op](left.value, right.value))
                    except ArithmeticError:  # the host code raises it first
                        return None
                out = _copy(e, spec, shallow=True)
                out.left, out.right = left, right  # type: ignore[attr-defined]
                return out
            case ir.Call(kind=ir.CallKind.BUILTIN, target="len", args=[ir.Name() as x]) if \
                    isinstance(spec.kinds.get(x.nid), TensorK) and bound_before(x.id, at):
                return _copy(e, spec)
        read = metadata_read(e)
        if isinstance(read, ir.Name) and (isinstance(spec.kinds.get(read.nid), TensorK) or spec.kinds.get(
                read.nid, HOST) is HOST) and bound_before(read.id, at):
            return _copy(e, spec)
        return None

    found: dict[int, ir.Expr] = {}
    for s in ir.walk_stmts(body):
        for e in ir.walk(s.value) if is_tensor_stmt(s) else []:  # type: ignore[attr-defined]
            value = resolved(e, s) if isinstance(e, ir.Name) and spec.kinds.get(e.nid, HOST) is HOST else None
            if value is not None:
                found[id(e)] = value
    return found


def definition(s: ir.Assign, name: str) -> ir.Expr | None:
    """What ``s`` binds ``name`` to, where that can be written as an expression: the value of ``name = value``;
    ``x.shape[i]`` for the name at item ``i`` of ``B, L = x.shape`` (or ``x.size()``), counted from the end for
    items after a starred one (``*_, d = x.shape``); else None."""
    t, v = s.target, s.value
    if t.name == name:
        return v
    if t.items is None or any(x.items is not None for x in t.items):
        return None
    shape = _whole_shape(v)
    names = [x.name for x in t.items]
    if shape is None or name not in names:
        return None
    i = names.index(name)
    if t.items[i].starred:
        return None
    star = next((j for j, x in enumerate(t.items) if x.starred), None)
    index = i if star is None or i < star else i - len(names)
    attr = ir.Attr(v.loc, shape, "shape")
    item = ir.Subscript(v.loc, attr, ir.Const(v.loc, index))
    return item


def _whole_shape(v: ir.Expr) -> ir.Expr | None:
    """``x`` of ``x.shape`` or ``x.size()``, else None."""
    match v:
        case ir.Attr(obj=x, attr="shape"):
            return x
        case ir.Call(kind=ir.CallKind.METHOD, target="size", receiver=x, args=[], kwargs={}) if x is not None:
            return x
    return None


def _walk(body: list[ir.Stmt], at: Path):
    """Each statement of ``body`` (nested ones too) with its ``Path``."""
    for i, s in enumerate(body):
        yield s, at + (i,)
        for j, sub in enumerate(ir.sub_bodies(s)):
            yield from _walk(sub, at + (i, j))


def _dominates(b: Path, is_loop: bool, s: Path) -> bool:
    """Whether the statement at ``b`` runs before the one at ``s`` on every path to it: it comes earlier in a list
    holding ``s`` or a statement that holds ``s``, or it is the ``for`` loop (binding its target) holding ``s``."""
    k = len(b) - 1
    if len(s) <= k or s[:k] != b[:k]:
        return False
    return s[k] > b[k] or is_loop and s[k] == b[k] and len(s) > len(b)


def _copy(e: ir.Expr, spec: Spec, shallow: bool = False) -> ir.Expr:
    """A copy of ``e`` with new node ids (its own node only where ``shallow``), each with the kind and the value
    read (§4.2) of the node it copies."""
    out = copy.copy(e) if shallow else copy.deepcopy(e)
    for old, new in zip([e] if shallow else ir.walk(e), [out] if shallow else ir.walk(out)):
        new.nid = ir.fresh_id()
        if old.nid in spec.kinds:
            spec.kinds[new.nid] = spec.kinds[old.nid]
        if old.nid in spec.reads:
            spec.reads.add(new.nid)
    return out

