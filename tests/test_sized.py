"""Tensors whose first size is a per-instance host number (``acrobat.analysis.sized``): ``torch.arange(len(toks))``,
``torch.zeros(n, D)``, ``torch.ones(n)``, ``torch.full((n, 2), v)`` are stacked lists of their rows in the static
tier, checked against plain per-instance calls on both backends."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import acrobat as ab
from acrobat.errors import DynamicFallbackWarning

STRICT = ab.Options(strict=True)
D = 4


class _Emb(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.pos = nn.Embedding(10, D), nn.Embedding(12, D)
        self.lin = nn.Linear(D, D)


@ab.program
def _positional(toks, p):
    """Token and positional embeddings (the Transformer idiom), pooled: a (D,) float tensor."""
    x = p.emb(torch.tensor(toks)) + p.pos(torch.arange(len(toks)))
    return torch.tanh(p.lin(x)).sum(0)


@ab.program
def _factories(toks, p):
    """Each factory form with a per-instance first size, combined row-wise with a tensor and reduced: (D,)."""
    n = len(toks)
    h = p.emb(torch.tensor(toks))
    z = torch.zeros(n, D) + h * 2
    o = torch.ones((n,), dtype=torch.float64) * 0.5
    f = torch.full((n, D), 3)
    r = torch.arange(1, 2 * n + 1, 2, dtype=torch.float32)
    return z.sum(0) + f.sum(0) + o.sum() + r.sum() + torch.arange(0.5, n).sum()


@ab.program
def _int_positions(toks, p):
    """``torch.arange(n)`` kept as int64 rows, reduced: a 0-d int64 tensor and its maximum."""
    idx = torch.arange(len(toks))
    return (idx * 3).sum(), idx.max()


@ab.program
def _new_factories(toks, p):
    """``x.new_zeros(n, D)``, ``x.new_ones((n,))``, ``x.new_full((n, D), 7)`` of a (D,) float tensor ``x``, with
    ``x``'s dtype (float64 here) and its device: a (D,) float64 tensor."""
    x = p.lin(p.pos.weight[len(toks)]).double()
    z = x.new_zeros(len(toks), D) + x
    return z.sum(0) + x.new_ones((len(toks),)).sum() + x.new_full((len(toks), D), 7).sum(0)


@ab.program
def _position_sum(toks, p):
    """The sum of ``torch.arange(len(toks))``: a 0-d int64 tensor (0 for an empty list)."""
    return torch.arange(len(toks)).sum()


def _batch(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 8))] for _ in range(n)]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 7])
@pytest.mark.parametrize("prog", [_positional, _factories, _int_positions, _new_factories])
def test_factories_of_a_per_instance_size_equal_plain_calls(prog, n, backend):
    p, batch = _Emb(), _batch(n)
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
        got = prog.run(batch, p, backend=backend, options=STRICT)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("prog", [_positional, _factories, _new_factories])
def test_gradients_through_positional_rows_equal_plain_calls(prog):
    p, batch = _Emb(), _batch(7, seed=1)
    sum(prog(x, p).sum() for x in batch).backward()
    want = {k: torch.zeros_like(q) if q.grad is None else q.grad.clone() for k, q in p.named_parameters()}
    p.zero_grad(set_to_none=True)
    sum(t.sum() for t in prog.run(batch, p, backend="eager", options=STRICT)).backward()
    for k, q in p.named_parameters():
        got = torch.zeros_like(q) if q.grad is None else q.grad
        torch.testing.assert_close(got, want[k], msg=lambda s, k=k: f"gradient of {k}: {s}")


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=9), min_size=1, max_size=7))
def test_positional_rows_on_random_lengths(batch):
    p = _Emb()
    with torch.no_grad():
        got = _positional.run(batch, p, backend="eager", options=STRICT)
        torch.testing.assert_close(got, [_positional(x, p) for x in batch])


def test_a_factory_of_no_rows_is_the_static_tiers_limit():
    """``torch.arange(0)`` has no rows to stack: strict raises a ShapeError naming the line; the default options
    run the batch in the dynamic tier, with the plain calls' results."""
    p, batch = _Emb(), [[1, 2], [], [3]]
    with torch.no_grad():
        with pytest.raises(ab.ShapeError, match=r"torch.arange\(...\)` at .*test_sized.py:\d+ .*at least one row"):
            _position_sum.run(batch, p, backend="eager", options=STRICT)
        with pytest.warns(DynamicFallbackWarning):
            got = _position_sum.run(batch, p, backend="eager")
        torch.testing.assert_close(got, [_position_sum(x, p) for x in batch])


@ab.program
def _narrow_ints(nums, p):
    """``torch.tensor`` of per-instance host numbers (one, or a list) in narrow integer dtypes, summed as int64: a
    0-d int64 tensor. Plain PyTorch raises where a number is out of its dtype's range."""
    a = torch.tensor(nums[0], dtype=torch.int8).long() + torch.tensor([nums[1], 1], dtype=torch.uint8).long().sum()
    b = torch.tensor(nums[2], dtype=torch.int16).long() + torch.IntTensor([nums[3]]).long().sum()
    return a + b + p.long().sum()


#: Per dtype, an instance with one number past that dtype's range.
_PAST = {"int8": [128, 0, 0, 0], "uint8": [0, 256, 0, 0], "int16": [0, 0, -2 ** 15 - 1, 0], "int32": [0, 0, 0, 2 ** 31]}


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", ["default", "strict"])
@pytest.mark.parametrize("dtype", sorted(_PAST))
def test_narrow_int_tensors_of_host_numbers_raise_as_plain_calls(dtype, option, backend):
    """In range, a batch of 7 equals the plain calls; an instance with a number past its dtype's range raises the
    plain call's error, naming the instance and the line (a static block converted the batched number with
    `.to(dtype)`, which wraps, before the host check)."""
    p = torch.ones(2)
    ok = [[127, 255, 2 ** 15 - 1, 2 ** 31 - 1], [-128, 0, -2 ** 15, -2 ** 31]]
    ok += [[i, 2 * i, -3 * i, 7 * i] for i in range(5)]
    options = {"options": STRICT} if option == "strict" else {}
    with torch.no_grad():
        got = _narrow_ints.run(ok, p, backend=backend, **options)
        torch.testing.assert_close(got, [_narrow_ints(x, p) for x in ok])
        bad = ok[:3] + [_PAST[dtype]]
        with pytest.raises(RuntimeError, match=f"type {dtype} without overflow"):
            _narrow_ints(bad[3], p)
        with pytest.raises(ab.InstanceError, match=rf"instance 3: RuntimeError: value cannot be converted to type "
                                                   rf"{dtype} without overflow\n.*test_sized\.py:\d+"):
            _narrow_ints.run(bad, p, backend=backend, **options)


@ab.program
def _later_size(toks, p):
    """``torch.zeros(2, len(toks))``: a per-instance size after the first, a (2,) float tensor."""
    return torch.zeros(2, len(toks)).sum(1) + p


def test_a_later_per_instance_size_is_rejected_at_compile_time():
    """Only a later size per-instance: strict raises a CompileError naming the line (the batched size failed every
    launch inside the block before, an InternalError); the default options run the plain calls' results."""
    p, batch = torch.ones(2), [[1, 2], [3]]
    with torch.no_grad():
        with pytest.raises(ab.CompileError, match=r"test_sized\.py:\d+:\d+: a tensor factory whose size after the "
                                                  r"first is host data of the instance"):
            _later_size.run(batch, p, backend="eager", options=STRICT)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DynamicFallbackWarning)
            got = _later_size.run(batch, p, backend="eager")
        torch.testing.assert_close(got, [_later_size(x, p) for x in batch])
