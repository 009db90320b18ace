"""What the fuzzer's random programs run on: instances (trees, n-ary trees, token lists) and parameters.

Every generated program is ``main(inst, p)`` over one of the instance kinds
here and a ``Params`` module: all tensors a program makes have shape
``(H,)`` (or a few fixed shapes), so any expression the generator composes
is well-shaped, and every program runs as plain Python.
"""

from __future__ import annotations

import random

import torch
from torch import nn

H = 4  # hidden size of every vector
V = 7  # vocabulary size: word ids are taken modulo V
INSTANCE_KINDS = ("seq", "tree", "nary")


class Node:
    """A binary tree node: a leaf has ``word`` and no children; an internal node ``left`` and ``right``."""

    def __init__(self, word: int, left: "Node | None" = None, right: "Node | None" = None):
        self.word = word
        self.left = left
        self.right = right
        self.is_leaf = left is None

    def __repr__(self) -> str:
        return f"{self.word}" if self.is_leaf else f"({self.left!r} {self.right!r})"


class NaryNode:
    """An n-ary tree node: ``word`` and a list of 0-3 ``children``."""

    def __init__(self, word: int, children: list["NaryNode"]):
        self.word = word
        self.children = children

    def __repr__(self) -> str:
        return f"{self.word}" if not self.children else f"({self.word} {' '.join(map(repr, self.children))})"


class Params(nn.Module):
    """The parameters every fuzz program may read (seeded, small values so that nothing overflows).

    ``W``/``U`` (H, H), ``W2`` (2H, H), ``b``/``h0``/``v`` (H,), ``emb`` (V, H), ``Ws`` (3, H, H) stacked,
    ``cell`` an ``nn.GRUCell(H, H)``, ``lstm`` an ``nn.LSTMCell(H, H)``, ``lin`` an ``nn.Linear(H, H)``,
    ``scale`` a float, ``steps`` an int.
    """

    def __init__(self, seed: int = 0, dtype: torch.dtype = torch.float32):
        super().__init__()
        g = torch.Generator().manual_seed(seed)

        def param(*shape: int, scale: float = 0.5) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g) * scale)

        self.W, self.U, self.W2 = param(H, H), param(H, H), param(2 * H, H)
        self.b, self.h0, self.v = param(H, scale=0.1), param(H, scale=0.3), param(H)
        self.emb = param(V, H)
        self.Ws = param(3, H, H)
        torch.manual_seed(seed)
        self.cell, self.lstm, self.lin = nn.GRUCell(H, H), nn.LSTMCell(H, H), nn.Linear(H, H)
        self.experts = nn.ModuleList(nn.Linear(H, H) for _ in range(3))
        self.scale = 0.75
        self.steps = 2
        self.to(dtype)


def make_instances(kind: str, n: int, seed: int) -> list:
    """``n`` seeded instances of ``kind`` (see ``INSTANCE_KINDS``)."""
    rng = random.Random(seed)

    def tree(depth: int) -> Node:
        if depth == 0 or rng.random() < 0.3:
            return Node(rng.randrange(V))
        return Node(-1, tree(depth - 1), tree(depth - 1))

    def nary(depth: int) -> NaryNode:
        k = 0 if depth == 0 else rng.choice((0, 1, 2, 2, 3))
        return NaryNode(rng.randrange(V), [nary(depth - 1) for _ in range(k)])

    if kind == "seq":
        return [[rng.randrange(V) for _ in range(rng.randint(1, 6))] for _ in range(n)]
    if kind == "tree":
        return [tree(rng.randint(0, 4)) for _ in range(n)]
    if kind == "nary":
        return [nary(rng.randint(0, 3)) for _ in range(n)]
    raise ValueError(f"unknown instance kind {kind!r}")
