"""Padded values: a user's function run once over a whole launch on ``(B, Lmax, ...)`` tensors (issue 18 §2).

A *padded function* (``acrobat.runtime.padded``) calls the user's own Python once per launch with its stacked-list
arguments as ``Padded`` values: each holds a ``(B, *shape)`` tensor (B instances, its hidden batch dim) and, per
logical dim, the ``Lengths`` that pad it (a padded axis: size ``Lmax`` in the tensor, the instance's own length
``L_i`` in plain PyTorch) or None. Every torch operator reaching a ``Padded`` (its methods, Python operators and
``__torch_function__``) goes through an **allowlist of rules** that keep the batched value equal, at every
position below each instance's lengths, to what plain PyTorch computes for that instance alone:

- pointwise operators (padding may hold garbage: it is never read into a valid position; ``exp``, ``square`` and
  powers see it set to 0 first, so no inf there makes a NaN gradient, 0 * inf); padded axes must
  align under broadcasting with the same padded axis or a unit dim; a division by a padded value, ``log``,
  ``sqrt`` and friends are refused (their gradient at the padding's values may be infinite, and 0 * inf is NaN);
  a per-instance 0-d operand (batched ``(B,)``) gives the result one instance's dtype (``_promoted``);
- ``@``/``matmul``/``mm``/``bmm`` (a contracted padded axis: both operands masked to 0 with ``torch.where``
  first), ``F.linear`` and ``F.embedding`` over non-padded dims;
- ``softmax``/``log_softmax`` over a padded axis (masked to -inf first), ``sum``/``mean``/``amax``/``amin``/
  ``max``/``min``/``logsumexp`` (identity-masked, in the value's dtype: ``_identity``; ``mean`` divides by the
  true lengths);
- ``F.layer_norm``/``F.normalize`` over non-padded trailing dims;
- ``view``/``reshape`` keeping every padded axis as its own dim (given as the ``PaddedSize`` that
  ``x.shape[i]``/``x.size(i)`` gives), ``transpose``/``permute``/``.T``/``.mT`` (the tags move), ``unsqueeze``/
  ``squeeze``, ``chunk``/``split``/``unbind`` and indexing over non-padded dims, casts, ``zeros_like``.

Any other operator on a value with a padded axis raises ``LimitError`` (``acrobat.errors``): the batch then reruns
in the dynamic tier, exact. ``PaddedSize`` raises it too in arithmetic, comparisons, ``bool``/``int``/``float``
(``x.sum(0) / x.shape[0]`` never divides by Lmax); ``len(x)`` of a padded axis raises it (Python's ``len`` must
give an int). Beyond the paper (§3's language has no tensors of per-instance shape; §4.1 batches one operator's
nodes, never a user's whole function): the padded batch of a function is this repository's own.

A hidden batch dim on a wrapper (like the dynamic tier's ``Lazy``) rather than ``torch.func.vmap``: vmap cannot
batch tensors whose per-instance shapes differ, and its batching rules do not know which positions are padding
(a softmax over a padded axis needs its mask); the wrapper sees every operator by name, so a missing rule is a
``LimitError`` before any wrong value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from acrobat.errors import LimitError

@dataclass(eq=False)
class Lengths:
    """The true lengths ``t`` (``(B,)`` int64) of one padded axis across a launch; ``max`` is Lmax (an int).
    Two padded axes align only when they hold the same ``Lengths`` object."""

    t: torch.Tensor
    max: int

    def mask(self, dim: int, rank: int) -> torch.Tensor:
        """``(B, 1.., Lmax, 1..)`` bool: True at valid positions of logical dim ``dim`` of a rank-``rank`` value."""
        valid = torch.arange(self.max, device=self.t.device)[None, :] < self.t[:, None]
        shape = [valid.shape[0]] + [1] * rank
        shape[dim + 1] = self.max
        return valid.reshape(shape)


class PaddedSize:
    """``x.shape[i]`` of a padded axis: each instance's own length. It is a size in ``view``/``reshape``/
    ``new_zeros`` of a padded value; as a number (arithmetic, comparison, ``int``/``float``/``bool``, an index)
    it raises ``LimitError``, since no one number is every instance's."""

    __slots__ = ("lengths",)

    def __init__(self, lengths: Lengths):
        self.lengths = lengths

    def _refuse(self, *_: Any) -> Any:
        raise LimitError("the length of a stacked list inside a padded function is each instance's own: it is a "
                         "size in view/reshape/new_zeros, not a number (arithmetic, comparison, int/float/bool)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __floordiv__ = __rfloordiv__ = __mod__ = __pow__ = __rpow__ = __neg__ = __index__ = __int__ = _refuse
    __float__ = __bool__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _refuse
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"PaddedSize(max={self.lengths.max})"


def _refused(what: str) -> LimitError:
    return LimitError(f"{what} of a value with a padded axis (a stacked list's length) has no rule in a padded "
                      "function (acrobat.runtime.padding): the batch runs in the dynamic tier")


class Padded:
    """A value of a padded function: ``_batched`` ``(B, *shape)`` with ``_tags[i]`` the ``Lengths`` of logical dim
    ``i`` (None: not padded). See the module docstring for the rules; an operator without one raises
    ``LimitError`` (``x.data`` too: the padded tensor is no value of the instance's)."""

    __slots__ = ("_batched", "_tags")

    def __init__(self, data: torch.Tensor, tags: tuple):
        assert data.dim() == len(tags) + 1
        self._batched = data
        self._tags = tags

    # -- what a tensor tells about itself
    @property
    def shape(self) -> tuple:
        return tuple(PaddedSize(t) if t is not None else n for t, n in zip(self._tags, self._batched.shape[1:]))

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self._tags)

    ndim = property(dim)
    dtype = property(lambda self: self._batched.dtype)
    device = property(lambda self: self._batched.device)
    requires_grad = property(lambda self: self._batched.requires_grad)
    is_cuda = property(lambda self: self._batched.is_cuda)

    def is_floating_point(self) -> bool:
        return self._batched.is_floating_point()

    def __len__(self) -> int:
        if not self._tags or self._tags[0] is not None:
            raise _refused("len()")
        return self._batched.shape[1]

    def _value_read(self, *_: Any) -> Any:
        """``bool(x)``, ``float(x)``, ``int(x)``, ``str(x)``, an f-string of ``x``: each instance's own value, which
        no one Python value is (``bool`` would otherwise fall back on ``len``, the same for every instance)."""
        raise _refused("a read of the value (bool, int, float, str, an index)")

    __bool__ = __float__ = __int__ = __index__ = __complex__ = __str__ = __format__ = _value_read

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        fn = getattr(torch.Tensor, name, None)
        if fn is None:
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        if isinstance(fn, property) or not callable(fn):
            raise _refused(f"`.{name}`")
        return lambda *args, **kwargs: dispatch(fn, (self, *args), kwargs)

    T = property(lambda self: dispatch(torch.Tensor.t if self.dim() == 2 else torch.Tensor.permute, (self,), {}))
    mT = property(lambda self: dispatch(torch.transpose, (self, -2, -1), {}))

    @classmethod
    def __torch_function__(cls, func: Callable, types: Any, args: Sequence = (), kwargs: dict | None = None) -> Any:
        return dispatch(func, tuple(args), kwargs or {})

    def __repr__(self) -> str:
        return f"Padded(shape={self.shape}, dtype={self.dtype})"


def _dunder(fn: Callable) -> Callable:
    return lambda self, *args: dispatch(fn, (self, *args), {})


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__matmul__", "__rmatmul__", "__neg__", "__pow__", "__rpow__", "__eq__", "__ne__", "__lt__", "__le__",
              "__gt__", "__ge__", "__invert__", "__and__", "__or__", "__getitem__", "__abs__"):
    setattr(Padded, _name, _dunder(getattr(torch.Tensor, _name)))
Padded.__hash__ = object.__hash__  # type: ignore[assignment]


RULES: dict[Callable, Callable[..., Any]] = {}


def dispatch(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``func(*args, **kwargs)`` with ``Padded`` operands, by its rule.

    Raises:
        LimitError: ``func`` has no rule, or its rule refuses these operands (see the module docstring).
    """
    rule = RULES.get(func)
    if rule is None:
        raise _refused(f"`{getattr(func, '__name__', func)}`")
    return rule(func, args, kwargs)


def rule(*funcs: Callable) -> Callable:
    """Register the decorated rule for ``funcs`` (torch functions, ``torch.Tensor`` methods)."""
    def install(r: Callable) -> Callable:
        RULES.update(dict.fromkeys([f for f in funcs if f is not None], r))
        return r
    return install


def _methods(*names: str) -> list[Any]:
    """``torch.X``, ``torch.Tensor.X`` and ``F.X`` of each name, where they exist."""
    return [getattr(m, n, None) for n in names for m in (torch, torch.Tensor, F)]


def _rank(x: Any) -> int:
    return x.dim() if isinstance(x, (Padded, torch.Tensor)) else 0


def _lift(x: Any, r: int) -> Any:
    """Operand ``x`` for a batched call where the logical rank is ``r``: a ``Padded``'s data with unit dims after
    its batch dim up to rank r; anything else as it is (right-aligned broadcasting puts the batch dim left)."""
    if isinstance(x, Padded) and x.dim() < r:
        return x._batched.reshape(x._batched.shape[0], *([1] * (r - x.dim())), *x._batched.shape[1:])
    return x._batched if isinstance(x, Padded) else x


def _aligned_tags(operands: Sequence, r: int) -> tuple:
    """The tags of a broadcast of ``operands`` of logical rank ``r``.

    Raises:
        LimitError: two different padded axes meet, or a padded axis meets a non-padded dim of size other than 1.
    """
    tags = []
    for i in range(r):
        found = None
        sizes = []
        for x in operands:
            k = i - (r - _rank(x))
            if k < 0 or not isinstance(x, (Padded, torch.Tensor)):
                continue
            if isinstance(x, Padded) and x._tags[k] is not None:
                if found is not None and found is not x._tags[k]:
                    raise LimitError("two stacked lists of different lengths meet in one operator of a padded "
                                     "function")
                found = x._tags[k]
            else:
                sizes.append(x._batched.shape[k + 1] if isinstance(x, Padded) else x.shape[k])
        if found is not None and any(n != 1 for n in sizes):
            raise LimitError("a stacked list's axis meets a dim of fixed size under broadcasting in a padded "
                             "function (each instance's length would have to equal it)")
        tags.append(found)
    return tuple(tags)


# -- pointwise -----------------------------------------------------------------------------------------------

_POINTWISE = _methods(
    "add", "sub", "mul", "where", "tanh", "sigmoid", "relu", "exp", "neg", "abs", "square", "sin", "cos",
    "gelu", "silu", "elu", "leaky_relu", "softplus", "maximum", "minimum", "clamp", "clip", "eq", "ne", "lt",
    "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "masked_fill", "float", "double", "half",
    "long", "int", "bool", "to", "type_as", "clone", "detach", "contiguous", "zeros_like", "ones_like",
    "full_like", "sign", "erf", "tanh_")
_POINTWISE += [torch.Tensor.__add__, torch.Tensor.__radd__, torch.Tensor.__sub__, torch.Tensor.__rsub__,
               torch.Tensor.__mul__, torch.Tensor.__rmul__, torch.Tensor.__neg__, torch.Tensor.__eq__,
               torch.Tensor.__ne__, torch.Tensor.__lt__, torch.Tensor.__le__, torch.Tensor.__gt__,
               torch.Tensor.__ge__, torch.Tensor.__invert__, torch.Tensor.__and__, torch.Tensor.__or__,
               torch.Tensor.__abs__, torch.Tensor.__rpow__, F.relu, F.gelu, F.silu, F.elu, F.leaky_relu, F.tanh,
               F.sigmoid, F.softplus, torch.rsub]


@rule(*[f for f in _POINTWISE if f is not torch.Tensor.tanh_])
def pointwise(func: Callable, args: tuple, kwargs: dict) -> Any:
    """Pointwise ``func``: operands broadcast as logical values, the batch dim leftmost."""
    operands = [*args, *kwargs.values()]
    for x in operands:
        if isinstance(x, PaddedSize):
            x._refuse()
    if func in _OVERFLOWING:
        args = tuple(_tame(a) for a in args)
    r = max(_rank(x) for x in operands)
    tags = _aligned_tags(operands, r)
    out = func(*(_lift(a, r) for a in args), **{k: _lift(v, r) for k, v in kwargs.items()})
    if r and any(isinstance(x, Padded) and not x.dim() for x in operands):
        out = out.to(_promoted(func, args, kwargs))
    return Padded(out, tags)


#: Operators that overflow to inf on values of a moderate size: their padded operands' padding is set to 0 first.
_OVERFLOWING = frozenset([f for f in _methods("exp", "square", "pow") if f is not None] +
                          [torch.Tensor.__pow__, torch.Tensor.__rpow__])


def _tame(x: Any) -> Any:
    """``x`` with its padding set to 0 (a ``Padded`` with a padded axis; anything else as it is): whatever the
    padding holds (an embedding of token 0, a bias, a difference to a maximum), an overflowing operator's value
    and gradient there stay finite, so the padding's gradient (0, the masks'), times that derivative, is 0 and
    not NaN (0 * inf), which would reach the parameters through the padding rows (their gradients sum every row)."""
    if isinstance(x, Padded) and any(t is not None for t in x._tags):
        return Padded(_zero_padding(x, range(x.dim())), x._tags)
    return x


def _promoted(func: Callable, args: tuple, kwargs: dict) -> torch.dtype:
    """The dtype of pointwise ``func`` on one instance's values. PyTorch's type promotion lets a 0-d tensor's
    dtype give way to a dimensioned tensor's of its category (a float32 ``(L, H)`` times a float64 0-d value is
    float32); the batched value of a 0-d one is ``(B,)``, dimensioned, so the batched call may promote further.
    Found on ``meta`` stand-ins of the logical shapes.

    Raises:
        LimitError: ``func`` does not run on ``meta`` stand-ins.
    """
    def stand_in(x: Any) -> Any:
        if isinstance(x, (Padded, torch.Tensor)):
            shape = x._batched.shape[1:] if isinstance(x, Padded) else x.shape
            return torch.empty(shape, dtype=x.dtype, device="meta")
        return x
    try:
        return func(*map(stand_in, args), **{k: stand_in(v) for k, v in kwargs.items()}).dtype
    except Exception as exc:  # noqa: BLE001 - without its dtype, no batched call
        raise LimitError(f"`{getattr(func, '__name__', func)}` of a per-instance 0-d value and a tensor in a "
                         f"padded function: its dtype on one instance is unknown ({exc})") from exc


def _check_divisor(x: Any) -> None:
    if isinstance(x, Padded) and any(t is not None for t in x._tags):
        raise LimitError("a division by a value with a padded axis in a padded function (its padding may be 0: "
                         "an infinite gradient there)")


@rule(torch.div, torch.Tensor.div, torch.true_divide, torch.Tensor.__truediv__)
def divide(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``a / b``: pointwise, where ``b`` has no padded axis."""
    _check_divisor(args[1])
    return pointwise(func, args, kwargs)


@rule(torch.Tensor.__rtruediv__)
def rdivide(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``c / x``: ``x`` is the divisor."""
    _check_divisor(args[0])
    return pointwise(func, args, kwargs)


@rule(torch.pow, torch.Tensor.pow, torch.Tensor.__pow__)
def power(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``x ** e`` of a number ``e`` that is 0 or at least 1 (a finite gradient at the padding's values)."""
    e = args[1]
    if isinstance(args[0], Padded) and not (isinstance(e, (int, float)) and (e == 0 or e >= 1)):
        raise LimitError("a power of a value with a padded axis by other than a number 0 or >= 1, in a padded "
                         "function")
    return pointwise(func, args, kwargs)


# -- contractions ----------------------------------------------------------------------------------------------

def _zero_padding(x: Padded, dims: Sequence[int], fill: float | int | bool = 0.0) -> torch.Tensor:
    """``x._batched`` with every position outside the lengths of its padded ``dims`` set to ``fill``."""
    data = x._batched
    for d in dims:
        t = x._tags[d]
        if t is not None:
            data = torch.where(t.mask(d, x.dim()), data, torch.full((), fill, dtype=data.dtype, device=data.device))
    return data


@rule(torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm, torch.bmm,
      torch.Tensor.bmm)
def matmul(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``a @ b``: the batch dims broadcast as pointwise; a contracted padded axis is masked to 0 in both."""
    a, b = args[0], args[1]
    ra, rb = _rank(a), _rank(b)
    if ra == 0 or rb == 0:
        raise LimitError("matmul of a 0-D value in a padded function")
    ka, kb = ra - 1, (rb - 2 if rb > 1 else 0)
    ta = a._tags[ka] if isinstance(a, Padded) else None
    tb = b._tags[kb] if isinstance(b, Padded) else None
    if ta is not tb:
        raise LimitError("matmul contracting a stacked list's axis with another axis in a padded function")
    da = _zero_padding(a, [ka]) if isinstance(a, Padded) else a
    db = _zero_padding(b, [kb]) if isinstance(b, Padded) else b
    # logical operands of rank >= 2 (a 1-D one as a row / column), batch dims equal in rank
    tags_a = list(a._tags) if isinstance(a, Padded) else [None] * ra
    tags_b = list(b._tags) if isinstance(b, Padded) else [None] * rb
    if ra == 1:
        da = da.unsqueeze(-2)
        tags_a.insert(0, None)
    if rb == 1:
        db = db.unsqueeze(-1)
        tags_b.append(None)
    batch = max(len(tags_a), len(tags_b)) - 2
    la = Padded(da, tuple(tags_a)) if isinstance(a, Padded) else da
    lb = Padded(db, tuple(tags_b)) if isinstance(b, Padded) else db
    tags_batch = _aligned_tags([_head(la, 2), _head(lb, 2)], batch)
    out = torch.matmul(_lift(la, batch + 2), _lift(lb, batch + 2))
    tags = [*tags_batch, tags_a[-2], tags_b[-1]]
    if rb == 1:
        out, tags = out.squeeze(-1), tags[:-1]
    if ra == 1:
        out, tags = out.squeeze(-2), tags[:-2] + tags[-1:]
    if not isinstance(out, torch.Tensor) or out.dim() != len(tags) + 1:
        raise LimitError("matmul of these ranks in a padded function")
    return Padded(out, tuple(tags))


def _head(x: Any, drop: int) -> Any:
    """``x`` without its last ``drop`` dims, for tag alignment (a stand-in of the right rank and sizes)."""
    if isinstance(x, Padded):
        return Padded(x._batched[(...,) + (0,) * drop], x._tags[:-drop])
    return x[(...,) + (0,) * drop]


@rule(F.linear)
def linear(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``F.linear(x, W, b)`` (``nn.Linear``): over the last dim of ``x``, which must not be padded."""
    x, *rest = args

    if not isinstance(x, Padded) or x._tags[-1] is not None or any(isinstance(r, Padded) for r in
                                                                  [*rest, *kwargs.values()]):
        raise _refused("F.linear over the padded axis, or with a padded weight,")
    return Padded(F.linear(x._batched, *rest, **kwargs), x._tags)


@rule(F.embedding)
def embedding(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``F.embedding(idx, W)`` of padded indices (the padding's indices are valid: the rows were zero). Without
    ``max_norm`` (it renormalizes the rows it looks up in place, the padding's row 0 too) and
    ``scale_grad_by_freq`` (it counts the padding's indices)."""
    x, *rest = args
    if not isinstance(x, Padded) or any(isinstance(r, Padded) for r in [*rest, *kwargs.values()]):
        raise _refused("F.embedding with a padded weight")
    named = dict(zip(("weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq"), rest), **kwargs)
    if named.get("max_norm") is not None or named.get("scale_grad_by_freq"):
        raise _refused("F.embedding with max_norm or scale_grad_by_freq")
    return Padded(F.embedding(x._batched, *rest, **kwargs), (*x._tags, None))


# -- normalizations and reductions ----------------------------------------------------------------------------

def _dim_arg(args: tuple, kwargs: dict, at: int = 1, default: Any = None) -> Any:
    return kwargs.get("dim", args[at] if len(args) > at else default)


def _norm_dim(d: int, r: int) -> int:
    if not -r <= d < max(r, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-r}, {r - 1}], but got {d})")
    return d % r if r else 0


@rule(*_methods("softmax", "log_softmax"))
def softmax(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``softmax``/``log_softmax`` over ``dim``: a padded one masked to -inf first."""
    x = args[0]
    d = _norm_dim(_dim_arg(args, kwargs), x.dim())
    data = _zero_padding(x, [d], -math.inf)
    rest = {k: v for k, v in kwargs.items() if k != "dim"}
    name = "log_softmax" if func in (torch.log_softmax, torch.Tensor.log_softmax, F.log_softmax) else "softmax"
    dtype = rest.get("dtype", args[3] if func in (F.softmax, F.log_softmax) and len(args) > 3 else
                     args[2] if len(args) > 2 and func not in (F.softmax, F.log_softmax) else None)
    return Padded(getattr(torch, name)(data, d + 1, dtype=dtype), x._tags)


_IDENTITY = {"sum": 0.0, "mean": 0.0, "amax": -math.inf, "max": -math.inf, "amin": math.inf, "min": math.inf,
             "logsumexp": -math.inf}


def _identity(name: str, dtype: torch.dtype) -> float | int | bool:
    """The identity of reduction ``name`` in ``dtype``: an infinity of a float, the least or greatest value of an
    int or bool (``-inf`` as a bool is True, which a ``max`` of bools would read as a valid position's)."""
    fill = _IDENTITY[name]
    if not math.isinf(fill) or dtype.is_floating_point or dtype.is_complex:
        return fill
    if dtype == torch.bool:
        return fill > 0
    info = torch.iinfo(dtype)
    return info.max if fill > 0 else info.min


@rule(*_methods("sum", "mean", "amax", "amin", "max", "min", "logsumexp"))
def reduction(func: Callable, args: tuple, kwargs: dict) -> Any:
    """A reduction over ``dim`` (an int, a tuple, or none: all dims), its padded dims identity-masked; ``mean``
    divides by the true counts. ``max``/``min`` with a dim give (values, indices)."""
    name = func.__name__
    x = args[0]
    r = x.dim()
    if set(kwargs) - {"dim", "keepdim"} or len(args) > 3:
        raise _refused(f"`{name}` with a dtype or an out tensor")
    dim = _dim_arg(args, kwargs)
    if name in ("max", "min") and len(args) > 1 and isinstance(args[1], (Padded, torch.Tensor)):
        return pointwise(torch.maximum if name == "max" else torch.minimum, args, kwargs)
    keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 and not isinstance(args[2], torch.dtype) else False)
    if name == "logsumexp" and dim is None:
        raise _refused("logsumexp without dim")
    dims = list(range(r)) if dim is None else [_norm_dim(d, r) for d in (dim if isinstance(dim, (tuple, list))
                                                                         else [dim])]
    data = _zero_padding(x, dims, _identity(name, x.dtype))
    if name == "sum" and not (data.is_floating_point() or data.is_complex()):
        data = data.to(torch.int64)
    keep_tags = tuple(t for i, t in enumerate(x._tags) if i not in dims) if not keepdim else \
        tuple(None if i in dims else t for i, t in enumerate(x._tags))
    if not dims:  # a 0-d value: PyTorch gives it back (an int sum as int64); no dims to torch.sum reduce them all
        if r or name == "mean" and not data.is_floating_point():
            raise _refused(f"`{name}` over an empty tuple of dims (or a mean of ints)")
        return Padded(data, x._tags)
    if name in ("max", "min") and dim is not None:
        if len(dims) != 1:
            raise _refused(f"{name} over several dims")
        values, indices = getattr(torch, name)(data, dims[0] + 1, keepdim=keepdim)
        return getattr(torch.return_types, name)((Padded(values, keep_tags), Padded(indices, keep_tags)))
    if name in ("max", "min"):
        name = "amax" if name == "max" else "amin"
    if name == "mean":
        if not data.is_floating_point():
            raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point "
                               "or complex dtype.")
        total = data.sum([d + 1 for d in dims], keepdim=keepdim)
        count = torch.ones((), dtype=data.dtype, device=data.device)
        for d in dims:
            t = x._tags[d]
            n = t.t.to(data.dtype) if t is not None else torch.tensor(float(data.shape[d + 1]), dtype=data.dtype)
            count = count * (n.reshape(-1, *([1] * (total.dim() - 1))) if t is not None else n)
        return Padded(total / count, keep_tags)
    return Padded(getattr(torch, name)(data, [d + 1 for d in dims], keepdim=keepdim), keep_tags)


@rule(F.layer_norm)
def layer_norm(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``F.layer_norm(x, shape, w, b, eps)`` (``nn.LayerNorm``) over trailing dims that are not padded."""
    x, shape, *rest = args
    n = len(shape) if isinstance(shape, (tuple, list, torch.Size)) else 1
    if any(t is not None for t in x._tags[x.dim() - n:]) or any(isinstance(v, Padded) for v in
                                                               [*rest, *kwargs.values()]):
        raise _refused("F.layer_norm over a padded axis")
    return Padded(F.layer_norm(x._batched, shape, *rest, **kwargs), x._tags)


@rule(F.normalize)
def normalize(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``F.normalize(x, p, dim)`` over a dim that is not padded."""
    x = args[0]
    d = _norm_dim(kwargs.get("dim", args[2] if len(args) > 2 else 1), x.dim())
    if x._tags[d] is not None:
        raise _refused("F.normalize over a padded axis")
    rest = dict(kwargs, dim=d + 1)
    return Padded(F.normalize(x._batched, *args[1:2], **rest), x._tags)


# -- shapes --------------------------------------------------------------------------------------------------

@rule(torch.Tensor.view, torch.Tensor.reshape, torch.reshape)
def reshape(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``view``/``reshape``: each padded axis kept as its own dim, given as its ``PaddedSize``; the dims between
    padded axes reshaped among themselves."""
    x = args[0]
    shape = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else args[1:]
    shape = kwargs.get("shape", shape)
    if isinstance(shape, torch.dtype) or (shape and isinstance(shape[0], torch.dtype)):
        raise _refused("view(dtype)")
    want = [s.lengths if isinstance(s, PaddedSize) else None for s in shape]
    if [t for t in want if t is not None] != [t for t in x._tags if t is not None]:
        raise LimitError("view/reshape of a padded value must keep every stacked list's axis as its own dim, "
                         "written as x.shape[i] (or a variable holding it)")
    out: list[int] = []
    src = 0
    for part in _parts(shape):
        if isinstance(part, PaddedSize):
            while x._tags[src] is None:
                src += 1
            out.append(part.lengths.max)
            src += 1
            continue
        nxt = next((i for i in range(src, x.dim()) if x._tags[i] is not None), x.dim())
        size = math.prod(x._batched.shape[src + 1:nxt + 1])
        known = math.prod(n for n in part if n != -1)
        sizes = [size // known if n == -1 and known else n for n in part]
        if math.prod(sizes) != size:  # the dims between two padded axes must stay between them
            raise LimitError("view/reshape of a padded value moves elements across a stacked list's axis")
        out.extend(sizes)
        src = nxt
    data = x._batched.reshape(x._batched.shape[0], *out)
    return Padded(data, tuple(w for w in want))


def _parts(shape: Sequence) -> list:
    """``shape`` split into its ``PaddedSize`` entries and the runs of ints between them (every run, even empty)."""
    parts: list = [[]]
    for s in shape:
        if isinstance(s, PaddedSize):
            parts += [s, []]
        else:
            parts[-1].append(int(s))
    return parts


@rule(torch.transpose, torch.Tensor.transpose, torch.swapaxes, torch.Tensor.swapaxes, torch.t, torch.Tensor.t)
def transpose(func: Callable, args: tuple, kwargs: dict) -> Any:
    """Two dims swapped, their tags with them."""
    x = args[0]
    r = x.dim()
    if kwargs or func in (torch.t, torch.Tensor.t) and r > 2:
        raise _refused(f"`{func.__name__}` with keywords, or t() of more than 2 dims,")
    a, b = (args[1], args[2]) if len(args) > 2 else (0, 1) if r >= 2 else (0, 0)
    a, b = _norm_dim(a, r), _norm_dim(b, r)
    tags = list(x._tags)
    tags[a], tags[b] = tags[b], tags[a]
    return Padded(x._batched.transpose(a + 1, b + 1), tuple(tags))


@rule(torch.permute, torch.Tensor.permute)
def permute(func: Callable, args: tuple, kwargs: dict) -> Any:
    """Dims permuted (none given: reversed, as ``.T``), their tags with them."""
    x = args[0]
    if kwargs:
        raise _refused("permute with keywords")
    dims = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
    dims = [_norm_dim(d, x.dim()) for d in (dims or reversed(range(x.dim())))]
    return Padded(x._batched.permute(0, *(d + 1 for d in dims)), tuple(x._tags[d] for d in dims))


@rule(torch.unsqueeze, torch.Tensor.unsqueeze)
def unsqueeze(func: Callable, args: tuple, kwargs: dict) -> Any:
    x = args[0]
    d = _norm_dim(_dim_arg(args, kwargs), x.dim() + 1)
    return Padded(x._batched.unsqueeze(d + 1), x._tags[:d] + (None,) + x._tags[d:])


@rule(torch.squeeze, torch.Tensor.squeeze)
def squeeze(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``squeeze(dim)`` of a non-padded dim (without dim: refused, a padded axis of length 1 would go)."""
    x = args[0]
    dim = _dim_arg(args, kwargs)
    if dim is None:
        raise _refused("squeeze() without dim")
    d = _norm_dim(dim, x.dim())
    if x._tags[d] is not None:
        raise _refused("squeeze of a padded axis")
    if x._batched.shape[d + 1] != 1:
        return x
    return Padded(x._batched.squeeze(d + 1), x._tags[:d] + x._tags[d + 1:])


@rule(torch.chunk, torch.Tensor.chunk, torch.split, torch.Tensor.split, torch.unbind, torch.Tensor.unbind)
def pieces(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``chunk``/``split``/``unbind`` over a dim that is not padded."""
    x = args[0]
    at = 1 if func in (torch.unbind, torch.Tensor.unbind) else 2
    d = _norm_dim(kwargs.get("dim", args[at] if len(args) > at else 0), x.dim())
    if x._tags[d] is not None:
        raise _refused(f"`{func.__name__}` over a padded axis")
    if func in (torch.unbind, torch.Tensor.unbind):
        return tuple(Padded(p, x._tags[:d] + x._tags[d + 1:]) for p in x._batched.unbind(d + 1))
    return tuple(Padded(p, x._tags) for p in getattr(torch, func.__name__)(x._batched, args[1], d + 1))


@rule(torch.Tensor.__getitem__)
def getitem(func: Callable, args: tuple, kwargs: dict) -> Any:
    """Indexing by ints, slices, None and ``...``: a padded axis only by ``:``."""
    x, key = args
    key = key if isinstance(key, tuple) else (key,)
    if any(not (k is None or k is Ellipsis or isinstance(k, (int, slice))) for k in key):
        raise _refused("indexing by a tensor or list")
    used = sum(k is not None and k is not Ellipsis for k in key)
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (x.dim() - used) + key[at + 1:]
    key = key + (slice(None),) * (x.dim() - sum(k is not None for k in key))
    tags: list[Lengths | None] = []
    src = 0
    for k in key:
        if k is None:
            tags.append(None)
            continue
        t = x._tags[src]
        if t is not None and k != slice(None):
            raise _refused("indexing a padded axis other than by `:`")
        if isinstance(k, slice):
            tags.append(t)
        src += 1
    return Padded(x._batched[(slice(None), *key)], tuple(tags))


@rule(torch.Tensor.new_zeros, torch.Tensor.new_ones)
def new_filled(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``x.new_zeros(size)``: a ``PaddedSize`` in ``size`` makes that dim padded."""
    x = args[0]
    size = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else args[1:]
    tags = tuple(s.lengths if isinstance(s, PaddedSize) else None for s in size)
    dims = [s.lengths.max if isinstance(s, PaddedSize) else int(s) for s in size]
    return Padded(func(x._batched, (x._batched.shape[0], *dims), **kwargs), tags)



PREFIX = "_acrobat_prefix"
"""The name under which a padded run (``acrobat.analysis.padded_runs``) reads ``prefix``."""


def prefix(x: Any, like: Any) -> Any:
    """``x[:len(tokens)]`` in a padded run, where ``acrobat.analysis.padded_runs`` rewrote it: ``x`` a shared
    tensor (learned positions ``(P, ...)``), ``like`` the token list's tensor (hoisted ``torch.tensor(tokens)``).
    For a ``Padded`` ``like`` of lengths ``L_i``: ``x[:Lmax]`` for every instance, ``(B, Lmax, ...)`` padded by
    those lengths (each instance's valid rows are its own ``x[:L_i]``); for a plain tensor, ``x[:len(like)]``.

    Raises:
        LimitError: ``x`` has a padded axis, or is shorter than Lmax (plain calls then judge each instance).
    """
    if not isinstance(like, Padded):
        return x[:len(like)]
    t = like._tags[0] if like._tags else None
    if isinstance(x, Padded) or not isinstance(x, torch.Tensor) or t is None or x.dim() == 0 or x.shape[0] < t.max:
        raise _refused("x[:len(tokens)] of a padded value, or longer than x,")
    return Padded(x[:t.max].unsqueeze(0).expand(like._batched.shape[0], *x[:t.max].shape), (t,) + (None,) * (x.dim() - 1))
