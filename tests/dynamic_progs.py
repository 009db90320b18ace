"""Models for tests/test_dynamic.py: Python the static tier rejects (or that only runs in the dynamic tier),
written the way researchers write it. Each runs as plain Python per instance.
"""

# ruff: noqa
from __future__ import annotations

import collections

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab


class Params(nn.Module):
    def __init__(self, seed: int = 0, dtype: torch.dtype = torch.float64):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)
        self.b = nn.Parameter(torch.randn(4, generator=g) * 0.1)
        torch.manual_seed(seed)
        self.cell = nn.LSTMCell(4, 4)
        self.to(dtype)


@ab.program
def try_except(tokens, p):
    """`try`/`except` is outside the static subset."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        try:
            x = p.emb[t]
        except IndexError:
            x = p.b
        h = torch.tanh(x @ p.W + h)
    return h


@ab.program
def lambdas_and_sorting(tokens, p):
    """A lambda with `key=` and a value-dependent sort: host Python over tensors."""
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    hs = sorted(hs, key=lambda h: float(h.sum()))
    return hs[0] - hs[-1]


@ab.program
def accumulate_in_place(tokens, p):
    """`acc += x` writes into the instance's own tensor, as PyTorch does."""
    acc = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        acc += torch.sigmoid(p.emb[t] @ p.W)
    acc[0] = acc.sum()
    return acc


@ab.program
def data_dependent_shape(tokens, p):
    """`torch.nonzero` has a shape only values decide: it runs eagerly for the instance."""
    h = torch.tanh(p.emb[tokens[0]] @ p.W)
    idx = torch.nonzero(h > 0).flatten()
    return h[idx].sum() if len(idx) else h.sum() * 0.0


@ab.program
def lstm_state(tokens, p):
    """An nn.LSTMCell state kept whole, started from None (`torch.lstm_cell` has no batching rule)."""
    state = None
    for t in tokens:
        state = p.cell(p.emb[t], state)
    h, c = state
    return {"h": h, "c": c, "n": len(tokens)}


Pair = collections.namedtuple("Pair", "first last")


@ab.program
def value_reads(tokens, p):
    """Tensor-dependent control flow and a namedtuple result."""
    h = p.emb[tokens[0]]
    steps = 0
    while h.norm() < 2.0 and steps < 5:
        h = h * 1.5 + torch.tanh(h @ p.W)
        steps += 1
    best = int(torch.argmax(h))
    return Pair(h, p.emb[best] * h.max().item())


@ab.program
def inplace_on_a_parameter(tokens, p):
    """Writing into a parameter: in plain Python every instance would see the others' writes."""
    p.b.add_(1.0)
    return p.b * tokens[0]
