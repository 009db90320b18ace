"""The explicit gather of a launch's column (acrobat.runtime.gather.gather, §5.2): the values of any handles, from
one group output or several, in any order, equal the values stacked one by one, and so do their gradients."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.runtime.dfg import ROW_BITS
from acrobat.runtime.gather import gather


class _Group:
    def __init__(self, out: torch.Tensor):
        self.out = out

    def outputs(self) -> tuple[torch.Tensor, ...]:
        return (self.out,)


class _Table:
    """Sources ``s`` of ``outs[s]`` rows: handle ``s << ROW_BITS | row``."""

    def __init__(self, outs: list[torch.Tensor]):
        self.groups = [_Group(o) for o in outs]

    def source(self, s: int) -> tuple[_Group, int]:
        return self.groups[s], 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4).flatmap(
    lambda sizes: st.tuples(st.just(sizes), st.lists(st.tuples(st.integers(0, len(sizes) - 1), st.integers(0, 5)),
                                                     min_size=1, max_size=12))), st.booleans())
def test_gather_equals_stacking_the_values_one_by_one(case, strided):
    sizes, picks = case
    g = torch.Generator().manual_seed(len(picks))
    leaves = [torch.randn(n, 3 if strided else 2, generator=g, dtype=torch.float64, requires_grad=True)
              for n in sizes]
    outs = [leaf[:, :2] * 1.0 for leaf in leaves]  # strided: column views of wider outputs (chunk's results)
    picks = [(s, r % sizes[s]) for s, r in picks]
    handles = np.array([s << ROW_BITS | r for s, r in picks], dtype=np.int64)
    got = gather(_Table(outs), handles, torch.device("cpu"))
    want = torch.stack([outs[s][r] for s, r in picks])
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    weights = torch.randn(want.shape, generator=g, dtype=torch.float64)
    got_grads = torch.autograd.grad((got * weights).sum(), leaves, allow_unused=True, retain_graph=True)
    want_grads = torch.autograd.grad((want * weights).sum(), leaves, allow_unused=True)
    for a, b in zip(got_grads, want_grads):
        if a is None or b is None:
            assert a is None and b is None or (a if b is None else b).abs().sum() == 0
        else:
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
