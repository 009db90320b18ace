"""Models for tests/test_regions.py: a tree or sequence model, static but for one helper that holds a construct
the static tier rejects (``acrobat.analysis.regions``). Each runs as plain Python per instance.
"""

# ruff: noqa
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

import acrobat as ab


@dataclass
class Node:
    word: int = 0
    left: "Node | None" = None
    right: "Node | None" = None


class Params(nn.Module):
    def __init__(self, seed: int = 0, dtype: torch.dtype = torch.float64):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(8, 4, generator=g) * 0.5)
        self.U = nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)
        self.b = nn.Parameter(torch.randn(4, generator=g) * 0.1)
        self.to(dtype)


# -- helpers the static tier rejects, each free of effects on what it did not make --------------------------


def with_dict(h, word):
    """A dict filled by item assignment (the static tier takes dicts with constant keys only)."""
    parts = {}
    parts["gate"] = torch.sigmoid(h)
    parts["word"] = word
    return h * parts["gate"] + parts["word"] * 0.1


def with_try(h, word):
    """`try`/`except`."""
    try:
        scale = 1.0 / (word - 3)
    except ZeroDivisionError:
        scale = 0.0
    return torch.tanh(h * scale)


def with_lambda(h, word):
    """A lambda stored in a variable."""
    act = lambda v: torch.relu(v) - 0.5 * v
    return act(h) + word


def with_generator(h, word):
    """A generator function inside it; its sum over `word + 1` items is always a tensor."""
    def powers():
        x = h
        for _ in range(word + 1):
            yield x
            x = x * 0.5
    return sum(powers())


def with_isinstance(h, word):
    """`isinstance` on a tensor."""
    if isinstance(h, torch.Tensor) and word % 2 == 0:
        return h * 2.0
    return -h


def two_results(h, word):
    """A tuple of two tensors through a dict and a try."""
    out = {}
    try:
        out["a"] = torch.tanh(h)
    except RuntimeError:
        out["a"] = h
    out["b"] = h * float(word)
    return out["a"], out["b"]


HELPERS = {"dict": with_dict, "try": with_try, "lambda": with_lambda, "generator": with_generator,
           "isinstance": with_isinstance}


def _tree_program(helper):
    @ab.function
    def encode(node, p):
        if node.left is None or node.right is None:
            return torch.tanh(p.emb[node.word])
        l, r = ab.concurrent(encode(node.left, p), encode(node.right, p))
        h = torch.tanh(torch.cat([l, r]) @ p.W + p.b)
        return helper(h, node.word)

    @ab.program
    def tree(node, p):
        return torch.tanh(encode(node, p) @ p.U)

    return tree


TREES = {name: _tree_program(fn) for name, fn in HELPERS.items()}


@ab.program
def sequence(tokens, p):
    """An RNN over a token list whose cell output goes through a region returning a tuple."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        x = torch.tanh(p.emb[t] @ p.U + h)
        a, b = two_results(x, t)
        h = a + 0.1 * b
    return h @ p.U


# -- helpers a region cannot take: the whole program stays in the dynamic tier ----------------------------------


def stores_on_node(h, node):
    """Stores on the caller's object (and holds a `try`)."""
    try:
        node.seen = True
    except AttributeError:
        pass
    return h * 2.0


def appends_to_param(h, log):
    """Appends to a list it was given."""
    extra = {}
    extra["h"] = h
    log.append(1)
    return extra["h"]


@ab.program
def impure_store(node, p):
    return stores_on_node(torch.tanh(p.emb[node.word]), node)


@ab.program
def impure_append(node, p):
    log = []
    h = appends_to_param(torch.tanh(p.emb[node.word]), log)
    return h * len(log)


def tree_of(depth: int, word: int) -> Node:
    """A complete binary tree of ``depth`` levels with words counting up from ``word``."""
    if depth == 0:
        return Node(word % 10)
    return Node(word % 10, tree_of(depth - 1, word + 1), tree_of(depth - 1, word + 2))


def random_tree(rng, size: int) -> Node:
    """A random binary tree of ``size`` leaves (``rng``: a ``random.Random``)."""
    if size <= 1:
        return Node(rng.randrange(10))
    k = rng.randrange(1, size)
    return Node(rng.randrange(10), random_tree(rng, k), random_tree(rng, size - k))
