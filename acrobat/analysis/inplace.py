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
  variable, never unpacked into) whose every binding is a fresh result, one
  no other name holds (an arithmetic operator, a factory such as
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
            if s.target.name != name or not (_fresh(s.value) or augmented(s) is not None):
                return False
        if isinstance(s, ir.Return) and s.value is not None:  # the function ends: nobody sees a later update
            ok.update(id(x) for x in (s.value.items if isinstance(s.value, ir.TupleExpr) else [s.value]))
        for root in ir.stmt_exprs(s):
            for e in ir.walk(root):
                if isinstance(e, ir.Name) and e.id == name:
                    reads.append(e)
                ok.update(id(x) for x in _reading_operands(e))
    return all(id(x) in ok for x in reads)


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
