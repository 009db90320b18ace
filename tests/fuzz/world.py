"""What the fuzzer's random programs run on: instances (trees, n-ary trees, token lists) and parameters.

Every generated program is ``main(inst, p)`` over one of the instance kinds
here and a ``Params`` module: all tensors a program makes have shape
``(H,)`` (or a few fixed shapes), so any expression the generator composes
is well-shaped, and every program runs as plain Python. A ``Doc`` instance
holds host data a program may change in place (its token list, its
tensor), as token lists of the ``seq`` kind are.
"""

from __future__ import annotations

import random

import torch
from torch import nn

import acrobat as ab

H = 4  # hidden size of every vector
V = 7  # vocabulary size: word ids are taken modulo V
INSTANCE_KINDS = ("seq", "tree", "nary", "doc")


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


class Doc:
    """A document: ``tokens``, a list of 1-6 word ids (host ints in ``[0, V)``), and ``x``, a feature tensor of shape
    ``(H,)``; a program may change both in place (``inst.tokens.pop()``, ``inst.x.add_(1)``)."""

    def __init__(self, tokens: list[int], x: torch.Tensor):
        self.tokens = tokens
        self.x = x

    def __repr__(self) -> str:
        return f"Doc({self.tokens}, {self.x.tolist()})"


class Params(nn.Module):
    """The parameters every fuzz program may read (seeded, small values so that nothing overflows).

    ``W``/``U`` (H, H), ``W2`` (2H, H), ``b``/``h0``/``v`` (H,), ``emb`` (V, H), ``Ws`` (3, H, H) stacked,
    ``cell`` an ``nn.GRUCell(H, H)``, ``lstm`` an ``nn.LSTMCell(H, H)``, ``lin`` an ``nn.Linear(H, H)``,
    ``scale`` a float, ``steps`` an int; ``embed`` an ``nn.Embedding(V, H)``, ``biases`` an ``nn.ParameterList`` of
    three (H,) tensors, ``head`` an ``nn.Sequential`` of ``Linear``, ``Tanh``, ``LayerNorm``, ``Linear``; the methods ``mix``
    and ``squash`` (``@ab.function``s called as ``p.mix(x, h)``, ``mix`` calling ``self.squash``).
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
        self.embed = nn.Embedding(V, H)  # made after the modules above: their values stay what they were
        self.biases = nn.ParameterList(param(H, scale=0.2) for _ in range(3))
        self.head = nn.Sequential(nn.Linear(H, H), nn.Tanh(), nn.LayerNorm(H), nn.Linear(H, H))  # (a LayerNorm's sum is 0)
        self.scale = 0.75
        self.steps = 2
        self.to(dtype)

    @ab.function
    def squash(self, h: torch.Tensor) -> torch.Tensor:
        """``sigmoid(h @ U)``: (H,) -> (H,)."""
        return torch.sigmoid(h @ self.U)

    @ab.function
    def mix(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """A cell as a module method calling another (``self.squash``): (H,), (H,) -> (H,)."""
        return torch.tanh(self.lin(x)) * self.squash(h)


def make_instances(kind: str, n: int, seed: int, dtype: torch.dtype = torch.float32) -> list:
    """``n`` seeded instances of ``kind`` (see ``INSTANCE_KINDS``); a ``Doc``'s tensor has ``dtype``."""
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
    if kind == "doc":
        return [Doc([rng.randrange(V) for _ in range(rng.randint(1, 6))],
                    torch.tensor([rng.uniform(-1, 1) for _ in range(H)], dtype=dtype)) for _ in range(n)]
    raise ValueError(f"unknown instance kind {kind!r}")
