"""Augmented assignment of a tensor variable, ``x += y`` (``-=``, ``*=``, ``/=``), where it equals ``x = x op y``
(issue 18 §2; beyond the paper's §3 language, which has no in-place updates).

PyTorch's ``x += y`` on a tensor writes the result into ``x``'s own memory
and keeps the object: every other holder of that memory (a variable bound
to the same tensor, a view of it, a list or attribute that stores it, a
parameter, the instance's own tensor) sees the change. The static tier
batches values, not memory, so it takes ``x op= y`` only where that
difference cannot be seen, and there computes ``x op y`` out of place:

- **nothing else holds x** (``sole_holder``, over the function's text,
  flow-insensitive): ``x`` is a local variable (not a parameter or a loop
  variable, never unpacked into) whose every binding is None or a fresh result,
  one no other name holds (an arithmetic operator, a factory such as
  ``torch.zeros(())``, a loss, a pointwise function or reduction known to
  allocate: ``FRESH_FUNCTIONS``/``FRESH_METHODS``, or ``x op= y`` itself), and
  whose every read gives nothing that shares its memory (an operand of an
  arithmetic operator or comparison, of a fresh function or method, a host
  read such as ``.item()``/``.shape``, or the function's returned value).
  A view (``x[0]``, ``x.view(-1)``), a plain copy of the name (``z = x``),
  a list's ``append``, an attribute, a module or program call is a holder
  that might see the change: kept rejected, with the fix.
- **the value is PyTorch's** (``inplace_result``, at run time, per
  instance): in place, PyTorch computes ``x op y`` in the promoted dtype,
  casts it to ``x``'s dtype where that cast is allowed (``torch.can_cast``:
  ``float32 += float64`` keeps float32) and raises where it is not
  (``int64 += 0.5``, ``int64 /= 2``); it raises where the broadcast shape is
  not ``x``'s (a 0-D ``x`` and a vector ``y``). The out-of-place result cast
  so, and the same errors (naming the instance and source line), are what
  the batched run gives.

Item assignment ``x[idx] = v`` of such a tensor (the CRF tutorial's ``forward_var = torch.full((n,), -1e4)``
then ``forward_var[0] = 0.``) is taken likewise, as ``x = item_set(x, idx, v)`` (``item_assignment``, the kind
analysis's rewrite): where ``sole_holder`` holds, or where the write comes right after ``x``'s fresh binding
(``written_fresh``: only other item assignments of ``x`` between them, so nothing has read ``x`` yet). The index
is ints and slices (``x[0]``, ``x[i, 1:3]``: constants, or per-instance host ints, which a static block holds as
0-D integer tensors); ``v`` is cast to ``x``'s dtype as PyTorch's write casts it.

Autograd: plain PyTorch refuses ``backward`` through an in-place update of a
value an operator saved (``x = torch.tanh(h); x += y``) or of a leaf that
requires grad; the batched run computes those gradients as ``x = x op y``
would. Everything else, values and gradients, equals the plain call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind, known

#: The augmented operators taken: those whose out-of-place form is ``ir.BinOp``'s arithmetic.
OPS = frozenset({"+", "-", "*", "/"})

Index = int | slice | torch.Tensor
"""One part of an item assignment's index: an int (a 0-D integer tensor inside a static block) or a slice."""

#: The dtype that holds a Python number of each type exactly.
_NUMBER_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}

#: Torch functions whose result is a new tensor that no operand shares memory with (with no ``out=``/``inplace=``).
FRESH_FUNCTIONS = dict.fromkeys((
    torch.zeros, torch.ones, torch.full, torch.zeros_like, torch.ones_like, torch.full_like, torch.tensor,
    torch.rand, torch.randn, torch.arange, torch.eye, torch.clone,
    torch.tanh, torch.sigmoid, torch.relu, torch.exp, torch.log, torch.abs, torch.neg, torch.sqrt, torch.sin,
    torch.cos, torch.square, torch.pow, torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum,
    torch.clamp, torch.where, torch.matmul, torch.mm, torch.mv, torch.dot, torch.outer, torch.bmm,
    torch.sum, torch.mean, torch.prod, torch.amax, torch.amin, torch.logsumexp, torch.norm,
    torch.softmax, torch.log_softmax, torch.stack, torch.cat,
    F.linear, F.relu, F.gelu, F.silu, F.elu, F.leaky_relu, F.softplus, F.tanh, F.sigmoid, F.softmax,
    F.log_softmax, F.normalize, F.layer_norm, F.cosine_similarity, F.cross_entropy, F.nll_loss, F.mse_loss,
    F.l1_loss, F.smooth_l1_loss, F.binary_cross_entropy, F.binary_cross_entropy_with_logits, F.kl_div,
), True)
#: Tensor methods whose result is a new tensor that shares no memory with the receiver or the arguments.
FRESH_METHODS = frozenset({
    "clone", "tanh", "sigmoid", "relu", "exp", "log", "abs", "neg", "sqrt", "sin", "cos", "square", "pow",
    "add", "sub", "mul", "div", "matmul", "mm", "mv", "dot", "sum", "mean", "prod", "amax", "amin", "logsumexp",
    "norm", "softmax", "log_softmax",
})
#: Tensor methods that read their receiver and give host data or new tensors (never a view of it).
_READING_METHODS = FRESH_METHODS | {"item", "tolist", "size", "dim", "numel", "max", "min", "argmax", "argmin",
                                    "topk", "sort", "argsort"}
#: Attributes that read a tensor's metadata (host data).
_READING_ATTRS = frozenset({"shape", "dtype", "ndim", "device", "requires_grad", "is_cuda"})
#: Builtins that read a tensor into host data.
_READING_BUILTINS = frozenset({"float", "int", "bool", "len", "print", "str"})


def augmented(s: ir.Stmt) -> ir.BinOp | None:
    """The ``x op y`` of an augmented assignment ``x op= y`` statement (the parser's ``x = BinOp(inplace)``)."""
    if isinstance(s, ir.Assign) and isinstance(s.value, ir.BinOp) and s.value.inplace and \
            isinstance(s.value.left, ir.Name) and s.target.name == s.value.left.id:
        return s.value
    return None


def sole_holder(fn: ir.Function, name: str) -> bool:
    """Whether the tensor variable ``name`` of ``fn`` is the only holder of every value it has (see the module
    docstring), so that updating it in place and rebinding it to a new value cannot be told apart."""
    if name in fn.params:
        return False
    ok: set[int] = set()  # ids of the reads of `name` that give nothing sharing its memory
    reads: list[ir.Name] = []
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.For) and name in s.target.names():
            return False
        if isinstance(s, ir.Assign) and name in s.target.names():
            if s.target.name != name or not (_fresh(s.value) or augmented(s) is not None or
                                             isinstance(s.value, ir.Const) and s.value.value is None):
                return False
        if isinstance(s, ir.ExprStmt) and is_item_write(s.value, name):  # `x[i] = v`: x's own update
            ok.add(id(s.value.receiver))  # type: ignore[attr-defined]
        if isinstance(s, ir.Return) and s.value is not None:  # the function ends: nobody sees a later update
            ok.update(id(x) for x in (s.value.items if isinstance(s.value, ir.TupleExpr) else [s.value]))
        for root in ir.stmt_exprs(s):
            for e in ir.walk(root):
                if isinstance(e, ir.Name) and e.id == name:
                    reads.append(e)
                ok.update(id(x) for x in _reading_operands(e))
    return all(id(x) in ok for x in reads)


def is_item_write(e: ir.Expr, name: str | None = None) -> bool:
    """Whether ``e`` is the parser's ``x.__setitem__(idx, v)`` of a variable ``x`` (named ``name``, if given)."""
    return isinstance(e, ir.Call) and e.kind is CallKind.METHOD and e.target == "__setitem__" and \
        isinstance(e.receiver, ir.Name) and name in (None, e.receiver.id)


def written_fresh(fn: ir.Function, s: ir.ExprStmt) -> bool:
    """Whether the item assignment ``s`` (``x[idx] = v``) comes right after a binding of ``x`` to a fresh value in
    the same statement list, with only item assignments of ``x`` between them, and neither its index nor its
    value reads ``x``: nothing can hold ``x``'s memory yet, so writing into it and rebinding it are the same."""
    x = s.value.receiver.id  # type: ignore[attr-defined]
    body = next(b for b in [fn.body, *(sub for t in ir.walk_stmts(fn.body) for sub in ir.sub_bodies(t))]
                if any(t is s for t in b))
    for t in reversed(body[:next(i for i, t in enumerate(body) if t is s) + 1]):
        if isinstance(t, ir.Assign) and t.target.name == x:
            return _fresh(t.value)
        if not (isinstance(t, ir.ExprStmt) and is_item_write(t.value, x) and not any(
                isinstance(n, ir.Name) and n.id == x for a in t.value.args for n in ir.walk(a))):  # type: ignore
            return False
    return False


def item_assignment(s: ir.ExprStmt) -> ir.Assign:
    """``x = item_set(x, idx, v)`` for the item assignment ``x[idx] = v`` (``s``): the call keeps the node id of
    ``s``'s ``__setitem__`` call, so the kinds found for it are the rewrite's."""
    e = s.value
    assert isinstance(e, ir.Call) and isinstance(e.receiver, ir.Name)
    call = ir.Call(e.loc, CallKind.TORCH, item_set, [e.receiver, *e.args], {})
    call.nid = e.nid
    return ir.Assign(s.loc, ir.Target(name=e.receiver.id), call)


def item_set(x: torch.Tensor, index: Index | tuple[Index, ...], v: torch.Tensor | float | int | bool) -> torch.Tensor:
    """What ``x[index] = v`` leaves in ``x``, computed out of place (the result shares no memory with ``x``):
    ``x``'s shape and dtype, ``v`` broadcast to ``x[index]``'s shape and cast to ``x``'s dtype as PyTorch's write
    casts it. ``index``: ints and slices, an int possibly a 0-D integer tensor (a per-instance host int inside a
    static block); differentiable in ``x`` and ``v``.

    Raises:
        IndexError: as PyTorch does: more indices than ``x`` has dimensions, an int out of bounds (a tensor
            one inside a compiled kernel: its bounds check), an index that is neither an int nor a slice.
        RuntimeError: ``v`` does not broadcast to ``x[index]``'s shape (PyTorch's message).
        TypeError: ``v`` is neither a tensor nor a number.
    """
    parts = index if isinstance(index, tuple) else (index,)
    if len(parts) > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()}")
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, (int, slice, torch.Tensor)) or isinstance(p, torch.Tensor) and (
                p.dim() != 0 or p.dtype.is_floating_point or p.dtype == torch.bool):
            raise IndexError("only integers and slices are valid indices of an item assignment the static tier "
                             f"batches (got {type(p).__name__})")
    sizes = [len(range(n)[p]) if isinstance(p, slice) else None for n, p in zip(x.shape, parts)]
    if not isinstance(v, torch.Tensor) and type(v) not in _NUMBER_DTYPES:
        raise TypeError(f"the value of an item assignment the static tier batches is a tensor or a number, not a "
                        f"{type(v).__name__}")
    if not isinstance(v, torch.Tensor):  # a factory, not a constant tensor: a traced kernel takes no new input
        v = torch.full((), v, dtype=_NUMBER_DTYPES[type(v)], device=x.device)  # the number's own precision
    value = torch.broadcast_to(v.to(x.dtype),
                               [n for n in sizes if n is not None] + list(x.shape[len(parts):]))
    for d, n in enumerate(sizes):
        if n is None:
            value = value.unsqueeze(d)  # an int keeps its dimension, of size 1, until the write
    return _put(x, parts, value, 0)


def _put(x: torch.Tensor, parts: tuple[Index, ...], value: torch.Tensor, d: int) -> torch.Tensor:
    """``x`` with the positions ``parts`` selects, from dimension ``d`` on, set to ``value`` (whose shape is that
    selection's, an int's dimension kept as size 1): ``index_copy`` of each dimension's positions."""
    if not parts:
        return value
    p, n = parts[0], x.shape[d]
    if isinstance(p, slice):  # positions by `arange`, not a constant tensor (a traced kernel takes no new input)
        start, _, step = p.indices(n)
        at = torch.arange(len(range(n)[p]), device=x.device) * step + start
    elif isinstance(p, torch.Tensor):
        at = torch.where(p < 0, p + n, p).reshape(1).long()
    elif -n <= p < n:
        at = torch.arange(p % n, p % n + 1, device=x.device)
    else:
        raise IndexError(f"index {p} is out of bounds for dimension {d} with size {n}")
    return x.index_copy(d, at, _put(x.index_select(d, at), parts[1:], value, d + 1))


def _fresh(e: ir.Expr) -> bool:
    """``e`` gives a new tensor no other name holds."""
    match e:
        case ir.BinOp(inplace=False) | ir.Compare() | ir.UnaryOp(op="-"):
            return True
        case ir.Call(kind=CallKind.TORCH, target=f, kwargs=kw):
            return bool(known(FRESH_FUNCTIONS, f)) and not {"out", "inplace"} & set(kw)
        case ir.Call(kind=CallKind.METHOD, target=m, receiver=r):
            return r is not None and m in FRESH_METHODS
    return False


def _reading_operands(e: ir.Expr) -> list[ir.Expr]:
    """The operands of ``e`` that it only reads: what it gives shares no memory with them."""
    match e:
        case ir.BinOp(inplace=False, left=a, right=b):
            return [a, b]
        case ir.BinOp(inplace=True, left=a, right=b):  # `z += x` reads x; `x += y` is x's own update
            return [a, b]
        case ir.Compare(operands=xs):
            return list(xs)
        case ir.UnaryOp(op="-" | "not", operand=a):
            return [a]
        case ir.Attr(obj=o, attr=a) if a in _READING_ATTRS:
            return [o]
        case ir.Call(kind=CallKind.TORCH) if _fresh(e):
            return [*e.args, *e.kwargs.values()]
        case ir.Call(kind=CallKind.METHOD, target=m, receiver=r) if r is not None and m in _READING_METHODS:
            return [r, *e.args, *e.kwargs.values()]
        case ir.Call(kind=CallKind.BUILTIN, target=b) if b in _READING_BUILTINS:
            return list(e.args)
    return []


def inplace_result(x: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """What PyTorch's in-place ``x op= y`` leaves in ``x``, from ``result = x op y`` computed out of place: the
    same shape as ``x`` and ``x``'s dtype (a cast PyTorch allows).

    Raises:
        RuntimeError: as PyTorch does in place: the broadcast shape is not ``x``'s, or the result's dtype cannot
            be cast to ``x``'s (a float result into an integer ``x``); the batched run names the instance and line.
    """
    if result.shape != x.shape:
        raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)} (an in-place `op=` keeps the shape of its left operand)")
    if result.dtype != x.dtype:
        if not torch.can_cast(result.dtype, x.dtype):
            raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the desired output type "
                               f"{_type_name(x.dtype)} (an in-place `op=` keeps the dtype of its left operand)")
        return result.to(x.dtype)
    return result


def _type_name(dtype: torch.dtype) -> str:
    """A dtype as PyTorch's messages name it (``Float``, ``Long``)."""
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
            torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
            torch.bool: "Bool"}.get(dtype, str(dtype))
