"""Batching rules for the dynamic tier's operators: one call on the stacked rows instead of ``vmap`` (§5).

A DFG node the dynamic tier records (``acrobat.runtime.dynamic``) is one
operator call; a launch of its group runs it for every row. ``vmap`` does
that for any operator, at a fixed cost per launch that small operators
feel. For the operators models use most the batched call is known, and
this module keeps it per operator as a *rule* (as JAX keeps
``primitive_batchers``): ``rule(func, leaves, unflatten)`` turns a call's
signature into a function of the stacked ``(B, ...)`` arguments that
PyTorch runs directly, or returns None where it does not apply, and the
launch uses ``vmap``:

- pointwise operators (``defpointwise``): each batched argument gets the
  leading batch axis and ones up to the call's rank; shared tensors
  broadcast from the right as they do per row;
- operators with a ``dim`` (``defdim``): non-negative dims move one to the right;
- ``x @ W``, ``W @ x`` and ``F.linear(x, W, b)`` with shared weights;
  ``W[i]`` of a shared table by per-row numbers; ``F.embedding``;
- ``torch.cat``/``torch.stack`` of batched tensors; indexing with ints and
  slices; ``reshape``/``view``;
- the recurrent cells ``nn.LSTMCell``/``nn.GRUCell``/``nn.RNNCell`` call
  (``torch.lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell``)
  with shared weights: their rows of ``(n, H)`` are one ``(B*n, H)`` call
  (vmap has no rule for them: it would loop over the rows).

Every rule computes exactly what the per-row calls do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Leaf:
    """One leaf of a recorded call: ``role`` ``"B"`` (batched: one value per row, each of ``shape`` and
    ``dtype``), ``"S"`` (a shared tensor: ``value``) or ``"C"`` (a constant: ``value``)."""

    role: str
    shape: tuple[int, ...] = ()
    dtype: torch.dtype | None = None
    value: Any = None

    @property
    def rank(self) -> int:
        return len(self.shape) if self.role == "B" else self.value.dim()


Unflatten = Callable[[list], tuple[tuple, dict]]
"""Leaves (in call order) to the call's ``(args, kwargs)``."""
Batched = Callable[..., tuple[torch.Tensor, ...]]
"""``batched(*leaves)``: every leaf in call order (batched ones ``(B, *shape)``); the tensor outputs ``(B, ...)``."""
Rule = Callable[[Any, list[Leaf], Unflatten], Batched | None]

RULES: dict[Any, Rule] = {}


class RuleMismatch(Exception):
    """A rule's batched call gave outputs of other shapes or dtypes than the per-row call's, stacked: the
    launch runs row by row instead (``acrobat.runtime.eager.RowLoopKernel``), never with the rule's result."""


def rule_for(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    """The batched call of ``func`` for a call of this signature, or None (the launch uses ``vmap``)."""
    rule = RULES.get(func)
    if rule is None:
        return None
    try:
        return rule(func, leaves, unflatten)
    except Exception:  # noqa: BLE001 - a signature the rule does not understand: vmap
        return None


def _ops(names: list[str]) -> list[Any]:
    """The torch function, ``torch.Tensor`` method and ``torch.nn.functional`` function of each name."""
    out: list[Any] = []
    for n in names:
        for where in (torch, torch.Tensor, F):
            f = getattr(where, n, None)
            if callable(f) and f not in out:
                out.append(f)
    return out


def defrule(funcs: list[Any], rule: Rule) -> None:
    """Register ``rule`` for every function of ``funcs``."""
    for f in funcs:
        RULES[f] = rule


def _single(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


# ---------------------------------------------------------------- pointwise


def _pointwise(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    tensors = [x for x in leaves if x.role in "BS"]
    if not any(x.role == "B" for x in tensors):
        return None
    dtypes = {x.dtype if x.role == "B" else x.value.dtype for x in tensors}
    if len(dtypes) > 1 and any(x.role == "B" and not x.shape for x in tensors):
        return None  # a 0-d row among other dtypes: stacked, it would promote like a dimensioned tensor
    top = max(x.rank for x in tensors)
    fill = [top - len(x.shape) if x.role == "B" else 0 for x in leaves]

    def batched(*vals: Any) -> tuple[torch.Tensor, ...]:
        vals = tuple(v.reshape(v.shape[0], *([1] * k), *v.shape[1:]) if k else v for v, k in zip(vals, fill))
        args, kwargs = unflatten(list(vals))
        return _single(func(*args, **kwargs))

    return batched


def defpointwise(names: list[str]) -> None:
    """Register the pointwise operators ``names`` (torch functions, tensor methods, dunders, F functions)."""
    defrule(_ops(names), _pointwise)


defpointwise(["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow", "neg", "abs", "exp",
              "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu",
              "softplus", "elu", "leaky_relu", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "where",
              "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not", "sign", "reciprocal",
              "square", "erf", "floor", "ceil", "round", "trunc", "relu6", "hardtanh", "mish", "selu", "celu",
              "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__pow__", "__rpow__", "__neg__", "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__",
              "__ne__", "__and__", "__or__", "__xor__", "__invert__", "float", "double", "long", "int", "bool",
              "detach", "clone", "contiguous", "dropout"])


# ---------------------------------------------------------------- products with shared weights, lookups


def _positional(leaves: list[Leaf], unflatten: Unflatten) -> tuple[list[Leaf], dict]:
    args, kwargs = unflatten(list(leaves))
    return list(args), kwargs


def _matmul(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    args, kwargs = _positional(leaves, unflatten)
    if len(args) != 2 or kwargs:
        return None
    x, w = args
    if x.role == "B" and w.role == "S" and len(x.shape) in (1, 2) and w.value.dim() == 2:
        return lambda xv, wv: (xv @ wv,)
    if x.role == "S" and w.role == "B" and x.value.dim() == 2 and len(w.shape) == 1:
        return lambda xv, wv: (wv @ xv.T,)
    return None


def _rmatmul(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    inner = _matmul(func, leaves[::-1], lambda ls: (tuple(ls), {}))
    return None if inner is None else (lambda a, b: inner(b, a))


def _linear(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    args, kwargs = _positional(leaves, unflatten)
    rest = [*args[1:], *kwargs.values()]
    if args and args[0].role == "B" and args[0].shape and all(x.role != "B" for x in rest):
        return lambda *vals: _single(func(*unflatten(list(vals))[0], **unflatten(list(vals))[1]))
    return None


def _getitem(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    if (len(leaves) == 2 and leaves[0].role == "S" and leaves[1].role == "B" and not leaves[1].shape
            and leaves[1].dtype in (torch.int64, torch.int32, torch.int16, torch.int8)):
        return lambda table, idx: (table[idx],)  # a shared table by a number per row: one gather
    if not leaves or leaves[0].role != "B" or any(x.role != "C" for x in leaves[1:]):
        return None
    args, _ = unflatten([x.value for x in leaves])
    idx = args[1] if isinstance(args[1], tuple) else (args[1],)
    if not all(i is None or isinstance(i, slice) or type(i) is int for i in idx):
        return None
    full = (slice(None), *idx)
    return lambda x, *rest: (x[full],)


def _embedding(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    args, _ = _positional(leaves, unflatten)
    if len(args) >= 2 and args[0].role == "B" and args[1].role == "S" and all(x.role != "B" for x in args[1:]):
        return lambda *vals: _single(func(*unflatten(list(vals))[0], **unflatten(list(vals))[1]))
    return None


defrule([torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm, torch.mv,
         torch.Tensor.mv], _matmul)
defrule([torch.Tensor.__rmatmul__], _rmatmul)
defrule([F.linear], _linear)
defrule([torch.Tensor.__getitem__], _getitem)
defrule([F.embedding], _embedding)


# ---------------------------------------------------------------- operators along a dim


def _shift(d: Any, rank: int) -> Any:
    """A per-row dim as a dim of the stacked rows (``rank``: the per-row rank the dim indexes)."""
    if isinstance(d, (tuple, list)):
        return type(d)(_shift(i, rank) for i in d)
    if type(d) is not int or not -rank <= d < max(rank, 1):
        raise ValueError(d)
    return d + 1 if d >= 0 else d


def defdim(names: list[str], position: int, default: int | None, out_rank: int = 0) -> None:
    """Register operators of one batched tensor that take a ``dim`` as positional argument ``position`` or
    the keyword ``dim`` (``default`` when absent; None: the call has no rule without a dim). ``out_rank``:
    how many axes the operator adds (1 for ``stack``/``unsqueeze``: a negative dim counts from there)."""

    def rule(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
        args, kwargs = _positional(leaves, unflatten)
        if not args:
            return None
        first = args[0]
        items = list(first) if isinstance(first, (list, tuple)) else [first]
        if not items or any(x.role != "B" for x in items) or len({x.shape for x in items}) > 1 or any(
                isinstance(x, Leaf) and x.role == "B" for x in [*args[1:], *kwargs.values()]):
            return None
        at_kw = "dim" in kwargs or len(args) <= position
        dim = kwargs["dim"].value if "dim" in kwargs else args[position].value if len(args) > position else default
        if dim is None:
            return None
        new = _shift(dim, len(items[0].shape) + out_rank)

        def batched(*vals: Any) -> tuple[torch.Tensor, ...]:
            a, kw = unflatten(list(vals))
            a = list(a)
            if at_kw:
                kw = {**kw, "dim": new}
            else:
                a[position] = new
            return _single(func(*a, **kw))

        return batched

    defrule(_ops(names), rule)


defdim(["sum", "mean", "amax", "amin", "prod", "logsumexp", "argmax", "argmin", "max", "min", "cumsum", "std",
        "var", "all", "any"], 1, None)
defdim(["softmax", "log_softmax"], 1, None)
defdim(["cat", "concat", "concatenate"], 1, 0)
defdim(["stack"], 1, 0, out_rank=1)
defdim(["unsqueeze"], 1, None, out_rank=1)
defdim(["squeeze"], 1, None)
defdim(["chunk"], 2, 0)
defdim(["split"], 2, 0)
defdim(["unbind"], 1, 0)


def _reshape(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    if not leaves or leaves[0].role != "B" or any(x.role != "C" for x in leaves[1:]):
        return None
    args, kwargs = unflatten([x.value for x in leaves])
    shape = tuple(args[1]) if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else tuple(args[1:])
    if kwargs or not shape or not all(type(s) is int for s in shape):
        return None
    return lambda x, *rest: (x.reshape(x.shape[0], *shape),)


defrule([torch.Tensor.reshape, torch.Tensor.view, torch.reshape], _reshape)


def _rnn_cell(func: Any, leaves: list[Leaf], unflatten: Unflatten) -> Batched | None:
    args, kwargs = _positional(leaves, unflatten)
    if kwargs or len(args) < 3:
        return None
    x, hx, *weights = args
    states = list(hx) if isinstance(hx, (tuple, list)) else [hx]
    if x.role != "B" or len(x.shape) != 2 or any(h.role != "B" or h.shape[:1] != x.shape[:1] for h in states) or any(
            isinstance(w, Leaf) and w.role == "B" for w in weights):
        return None
    batched_leaf = [x.role == "B" for x in leaves]

    def batched(*vals: Any) -> tuple[torch.Tensor, ...]:
        B = vals[0].shape[0]
        flat = [v.reshape(B * v.shape[1], *v.shape[2:]) if b else v for v, b in zip(vals, batched_leaf)]
        a, kw = unflatten(flat)
        return tuple(o.reshape(B, -1, *o.shape[1:]) for o in _single(func(*a, **kw)))

    return batched


defrule([torch.lstm_cell, torch.gru_cell, torch.rnn_tanh_cell, torch.rnn_relu_cell], _rnn_cell)
