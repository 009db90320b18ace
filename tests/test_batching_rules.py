"""The dynamic tier's batching rules (acrobat.runtime.batching): each rule's call on stacked rows equals the
per-row calls stacked, for random shapes, dtypes and batch sizes; a rule that does not apply gives None."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.runtime.batching import Leaf, rule_for

SHAPES = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


def _leaves(args: list, roles: str) -> list[Leaf]:
    """``args``' first rows as leaves: ``B`` batched (the row's shape), ``S`` shared, ``C`` constant."""
    out = []
    for a, r in zip(args, roles):
        if r == "B":
            out.append(Leaf("B", tuple(a[0].shape), a.dtype))
        else:
            out.append(Leaf(r, value=a))
    return out


def _stacked_vs_rows(func, args: list, roles: str, kwargs: dict | None = None):
    """The rule's result on the stacked rows, and the per-row calls stacked (None when no rule applies)."""
    kwargs = kwargs or {}
    leaves = _leaves(args, roles) + [Leaf("C", value=v) for v in kwargs.values()]
    names = list(kwargs)

    def unflatten(ls: list) -> tuple[tuple, dict]:
        return tuple(ls[:len(args)]), dict(zip(names, ls[len(args):]))

    rule = rule_for(func, leaves, unflatten)
    if rule is None:
        return None
    got = rule(*args, *kwargs.values())
    rows = args[0].shape[0] if roles[0] == "B" else args[roles.index("B")].shape[0]
    per_row = [func(*(a[i] if r == "B" else a for a, r in zip(args, roles)), **kwargs) for i in range(rows)]
    per_row = [p if isinstance(p, (tuple, list)) else (p,) for p in per_row]
    want = tuple(torch.stack([p[k] for p in per_row]) for k in range(len(per_row[0])))
    return got, want


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), SHAPES, st.sampled_from([torch.add, torch.mul, torch.maximum, torch.Tensor.__sub__,
                                                    torch.Tensor.__truediv__, torch.where]),
       st.sampled_from(["BB", "BS", "SB"]), st.booleans())
def test_pointwise_rules_equal_the_rows(b, shape, func, roles, shorter):
    torch.manual_seed(b)
    other = shape[1:] if shorter and len(shape) > 1 else shape
    x = torch.randn(b, *shape) if roles[0] == "B" else torch.randn(*shape)
    y = torch.randn(b, *other) if roles[1] == "B" else torch.randn(*other)
    if func is torch.where:
        cond = torch.randn(b, *shape) > 0
        xs = x if roles[0] == "B" else x.expand(b, *shape).clone()
        out = _stacked_vs_rows(func, [cond, xs, y], "BB" + roles[1])
    else:
        out = _stacked_vs_rows(func, [x, y], roles)
    assert out is not None
    for g, w in zip(*out):
        torch.testing.assert_close(g, w)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), SHAPES, st.sampled_from(["sum", "mean", "softmax", "log_softmax", "cumsum", "amax",
                                                   "argmax", "max", "unsqueeze", "squeeze", "chunk", "unbind"]),
       st.integers(-3, 2), st.booleans())
def test_dim_rules_equal_the_rows(b, shape, name, dim, keyword):
    torch.manual_seed(b)
    x = torch.randn(b, *shape)
    if not -len(shape) <= dim < len(shape) + (name == "unsqueeze"):
        dim = 0
    func = getattr(torch, name)
    extra = [2] if name == "chunk" else []
    if keyword:
        out = _stacked_vs_rows(func, [x], "B", {**({"chunks": 2} if extra else {}), "dim": dim})
    else:
        out = _stacked_vs_rows_constants(func, [x, *extra, dim], "B" + "C" * (len(extra) + 1))
    assert out is not None
    for g, w in zip(*out):
        torch.testing.assert_close(g, w)


def _stacked_vs_rows_constants(func, args: list, roles: str):
    """Like :func:`_stacked_vs_rows` for calls whose trailing arguments are Python constants."""
    leaves = [Leaf("B", tuple(args[0][0].shape), args[0].dtype), *(Leaf("C", value=a) for a in args[1:])]
    rule = rule_for(func, leaves, lambda ls: (tuple(ls), {}))
    if rule is None:
        return None
    got = rule(*args)
    rows = [func(args[0][i], *args[1:]) for i in range(args[0].shape[0])]
    rows = [r if isinstance(r, (tuple, list)) else (r,) for r in rows]
    return got, tuple(torch.stack([r[k] for r in rows]) for k in range(len(rows[0])))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 5), st.booleans())
def test_products_and_lookups_equal_the_rows(b, n, m, two_d):
    torch.manual_seed(n * 7 + m)
    x = torch.randn(b, 3, n) if two_d else torch.randn(b, n)
    w = torch.randn(n, m)
    for func, args, roles in [(torch.matmul, [x, w], "BS"), (torch.Tensor.__matmul__, [x, w], "BS"),
                              (F.linear, [x, w.T.contiguous(), torch.randn(m)], "BSS")]:
        out = _stacked_vs_rows(func, args, roles)
        assert out is not None, func
        torch.testing.assert_close(*out)
    v = torch.randn(b, m)
    torch.testing.assert_close(*_stacked_vs_rows(torch.matmul, [w, v], "SB"))
    table = torch.randn(7, m)
    idx = torch.randint(-7, 7, (b,))
    torch.testing.assert_close(*_stacked_vs_rows(torch.Tensor.__getitem__, [table, idx], "SB"))


def test_rules_that_do_not_apply_give_none():
    table = torch.randn(4, 3)
    assert rule_for(torch.Tensor.__getitem__, [Leaf("S", value=table), Leaf("B", (), torch.bool)],
                    lambda ls: (tuple(ls), {})) is None, "a bool per row indexes as a mask, not as a row number"
    assert rule_for(torch.sum, [Leaf("B", (3,), torch.float32)], lambda ls: (tuple(ls), {})) is None, \
        "sum without a dim: vmap"
    assert rule_for(torch.mul, [Leaf("B", (3,), torch.float32), Leaf("B", (), torch.int64)],
                    lambda ls: (tuple(ls), {})) is None, "a number per row among floats promotes differently"


@pytest.mark.parametrize("shape,new", [((2, 3), (6,)), ((2, 3), (-1, 2)), ((4,), (2, 2))])
def test_reshape_rule(shape, new):
    x = torch.randn(5, *shape)
    out = _stacked_vs_rows_constants(torch.Tensor.reshape, [x, new], "BC")
    torch.testing.assert_close(*out)
