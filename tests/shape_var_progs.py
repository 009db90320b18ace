"""Models for tests/test_shape_vars.py: shape reads held in variables (`n = h.shape[0]`, `B, L = h.shape`,
`d = h.size(-1) // p.heads`, `n = len(h)`) and then used inside tensor operators, the way researchers write
them (acrobat.analysis.shape_vars). Each runs as plain Python per instance.
"""

# ruff: noqa
from __future__ import annotations

import math

import torch
from torch import nn

import acrobat as ab

HIDDEN = 8


class Params(nn.Module):
    """An embedding table, two linear layers and an attention's projections, with `heads` a plain int."""

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(10, HIDDEN)
        self.lin = nn.Linear(HIDDEN, HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)
        self.heads = 2


@ab.program
def brief(toks, p):
    h = p.lin(p.emb(torch.tensor(toks[0])))
    n = h.shape[0]
    d = h.size(-1) // 2
    return h.view(2, d).sum(0) * n, h.reshape(n // 2, -1)


@ab.program
def unpacked(toks, p):
    h = p.lin(p.emb(torch.tensor([toks[0], toks[1]])))  # (2, HIDDEN)
    B, L = h.shape
    *_, d = h.size()
    return h.reshape(L, B).sum(1) * B, h.view(B, 2, d // 2).transpose(0, 1)


@ab.program
def heads(toks, p):
    x = p.lin(p.emb(torch.tensor([toks[0], toks[1]])))
    d = x.size(-1) // p.heads
    y = x.view(-1, p.heads, d)
    return torch.softmax(y / math.sqrt(d), dim=-1).flatten()


@ab.program
def length(toks, p):
    h = torch.tanh(p.emb(torch.tensor([toks[0], toks[1], toks[0]])))  # (3, HIDDEN)
    n = len(h)
    half = HIDDEN // 2
    return h.reshape(n * 2, half).sum(0), h.expand(2, n, HIDDEN).sum((0, 1))


@ab.program
def instance_attention(x, p):
    n = x.shape[0]
    d = HIDDEN // p.heads
    q, k, v = p.qkv(x).chunk(3, dim=-1)  # (n, H) each
    q = q.view(n, p.heads, d).transpose(0, 1)  # (h, n, d)
    k = k.reshape(n, p.heads, d).permute(1, 2, 0)  # (h, d, n)
    v = v.view(n, p.heads, d).transpose(0, 1)
    a = torch.softmax(torch.bmm(q, k) / math.sqrt(d), dim=-1)
    y = torch.bmm(a, v).transpose(0, 1).reshape(n, HIDDEN)
    return p.o(y).mean(0)


@ab.program
def host_uses(toks, p):
    h = p.lin(p.emb(torch.tensor([toks[0], toks[1], toks[-1]])))
    n = h.shape[0]
    acc = h[0]
    for i in range(1, n):
        acc = acc + h[i] * i
    if n > 2:
        acc = acc + h.view(n, 2, -1).sum((0, 1)).repeat(2)
    return acc * n


@ab.program
def rebound(toks, p):
    h = p.lin(p.emb(torch.tensor([toks[0], toks[1]])))
    n = h.shape[0]
    h = torch.cat([h, h])  # (2n, HIDDEN): `n` is no longer h's first size
    return h.view(n, -1)


@ab.program
def number_and_size(toks, p):
    h = p.lin(p.emb(torch.tensor([toks[0], toks[1]])))
    n = h.shape[0]
    k = 2
    return h * n + n / 4, (h - n).view(k, n, -1).sum(0) / k


@ab.program
def host_number_size(toks, p):
    h = p.lin(p.emb(torch.tensor([toks[0], toks[1]])))
    n = len(toks) % 2 + 1  # host data of the instance, no shape read
    return h.reshape(n, -1).sum(0)


@ab.program
def rebound_fixed(toks, p):
    h0 = p.lin(p.emb(torch.tensor([toks[0], toks[1]])))
    n = h0.shape[0]
    h = torch.cat([h0, h0])
    return h.view(n, -1)
