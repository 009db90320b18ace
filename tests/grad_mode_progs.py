"""Programs for tests/test_grad_mode.py: a model's own ``with torch.no_grad():`` while the batched run records
autograd, shrunk from the models of tests/unseen_progs.py that showed wrong gradients."""

# ruff: noqa
from __future__ import annotations

import torch
from torch import nn

import acrobat as ab

H = 4


class Params(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, H))
        self.W = nn.Parameter(torch.randn(H, H) * 0.5)


@ab.program
def no_grad_scale(tokens, p):
    """A scale computed without autograd: the plain call gives `emb` no gradient through `m`."""
    h = torch.zeros(H)
    for t in tokens:
        with torch.no_grad():
            m = torch.tanh(p.emb[t] @ p.W).max()
        h = torch.tanh(h @ p.W + p.emb[t]) * m
    return h


@ab.program
def no_grad_read(tokens, p):
    """The same, with a value read inside the block: the fiber waits there, with autograd off."""
    h = torch.zeros(H)
    for t in tokens:
        with torch.no_grad():
            s = (p.emb[t] @ p.W).sum()
            if s > 0:
                s = s * 2
        h = torch.tanh(h @ p.W + p.emb[t] * s)
    return h


@ab.program
def same_op_with_and_without_grad(tokens, p):
    """The same operator signature recorded with autograd on, then under `no_grad` (the recorder's fast path
    must not put the second into the first's launches, which record autograd)."""
    h = torch.zeros(H)
    for t in tokens:
        x = torch.tanh(p.emb[t] @ p.W)
        with torch.no_grad():
            m = torch.tanh(p.emb[t] @ p.W)
        h = h + x * m
    return h
