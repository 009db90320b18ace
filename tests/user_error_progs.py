"""Models for test_user_errors.py: errors a user meets with a correct model and wrong inputs.

They live in a real .py file because acrobat reads their source with
``inspect``. Lines the tests look up carry a ``# U:<key>`` marker comment.
"""

# ruff: noqa
from __future__ import annotations

import torch
from torch import nn

import acrobat as ab


class Params(nn.Module):
    """``emb`` (10, 4), ``W`` (4, 4), ``W_out`` (4, 3), ``enc.W`` (4, 4), ``layers[0]`` (4, 4)."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g))
        self.W = nn.Parameter(torch.randn(4, 4, generator=g))
        self.W_out = nn.Parameter(torch.randn(4, 3, generator=g))
        self.enc = nn.Module()
        self.enc.W = nn.Parameter(torch.randn(4, 4, generator=g))
        self.layers = nn.ParameterList([nn.Parameter(torch.randn(4, 4, generator=g))])


class NoOut:
    """Has ``emb`` and ``W`` but no ``W_out``."""

    def __init__(self, p: Params) -> None:
        self.emb, self.W = p.emb, p.W


@ab.program
def classify(tok, p):
    h = torch.tanh(p.emb[tok] @ p.W)  # U:classify_h
    return h @ p.W_out  # U:classify_out


@ab.program
def nested(tok, p):
    return p.emb[tok] @ p.enc.W  # U:nested


@ab.program
def indexed(tok, p):
    return p.emb[tok] @ p.layers[0]  # U:indexed


@ab.program
def two_params(tok, p, q):
    return p.emb[tok] @ q.W


@ab.program
def shared_mismatch(tok, p):
    WO = p.W_out @ p.W  # U:shared_mismatch
    return p.emb[tok] @ WO


@ab.program
def host_failure(inst, p):
    h = p.emb[inst["tok"]]
    n = inst["steps"] + 1  # U:host_failure
    for i in range(n):
        h = torch.tanh(h @ p.W)
    return h


@ab.program
def host_failure_fibers(inst, p):
    """Tensor-dependent control flow (instances on fibers), then a host failure."""
    h = p.emb[inst["tok"]]
    if h.sum() > 100:
        h = h * 2
    n = inst["steps"] + 1  # U:host_failure_fibers
    return h * n


@ab.program
def bad_host_operand(inst, p):
    return p.emb[inst["tok"]] * inst["scale"]  # U:bad_host_operand


@ab.program
def operator_failure(tok, p):
    return p.emb[tok] @ p.W_out @ p.W  # U:operator_failure


class Tagger(nn.Module):
    """An ``nn.Module`` whose batched forward is an ``@acrobat.program`` method."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g))
        self.W = nn.Parameter(torch.randn(4, 4, generator=g))

    @ab.function
    def cell(self, h, x):
        return torch.tanh(h @ self.W + x)

    @ab.program
    def encode(self, toks):
        h = self.emb[0] * 0
        for t in toks:
            h = self.cell(h, self.emb[t])
        return h

    @ab.program
    def encode_scaled(self, toks, scale):
        h = self.emb[0] * 0
        for t in toks:
            h = self.cell(h, self.emb[t]) * scale
        return h


class Leaf:
    """A tiny tree node for ``TreeModule``: a word id, or two children."""

    def __init__(self, word: int = 0, left: "Leaf | None" = None, right: "Leaf | None" = None) -> None:
        self.word, self.left, self.right = word, left, right


class TreeModule(nn.Module):
    """Recursion inside an ``nn.Module`` method: ``self.encode(tree)`` called with the instance."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(2)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g))
        self.W = nn.Parameter(torch.randn(8, 4, generator=g))

    @ab.function
    def encode(self, node):
        if node.left is None:
            return self.emb[node.word]
        return torch.tanh(torch.cat([self.encode(node.left), self.encode(node.right)]) @ self.W)

    @ab.program
    def forward_batch(self, tree):
        return self.encode(tree)  # U:method_recursion
