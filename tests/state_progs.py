"""Models for tests/test_object_state.py: per-node results stored on the instance's own objects (issue 18,
section 2), ``node.state = cell(...)`` read back as ``child.state``, the way a researcher writes them. Each
runs as plain Python per instance, with ``tests.container_progs.Params``: ``emb`` (10, 4), ``W`` (4, 4), ``W2``
(8, 4), ``b`` (4,).
"""

# ruff: noqa
from __future__ import annotations

import random

import torch

import acrobat as ab


class Node:
    """An n-ary tree node: a word id and children; the models store their results on it."""

    def __init__(self, word: int, children: list["Node"] | None = None):
        self.word = word
        self.children = children or []
        self.left = self.children[0] if len(self.children) == 2 else None
        self.right = self.children[1] if len(self.children) == 2 else None


def postorder(node: Node) -> list[Node]:
    """The nodes, children before parents (a plain helper, not a model function)."""
    out: list[Node] = []
    for child in node.children:
        out += postorder(child)
    out.append(node)
    return out


def trees(n: int, seed: int = 0, binary: bool = False) -> list[Node]:
    """``n`` random trees: n-ary (0-3 children) or binary (0 or 2), depth up to 4, words below 10."""
    rng = random.Random(seed)

    def make(depth: int) -> Node:
        fanout = 0 if depth == 0 else rng.choice([0, 2, 2] if binary else [0, 1, 2, 2, 3])
        return Node(rng.randrange(10), [make(depth - 1) for _ in range(fanout)])

    return [make(rng.randint(0, 4)) for _ in range(n)]


@ab.function
def childsum_cell(x, children, p):
    h = c = torch.zeros(p.hidden)
    for child in children:
        ch, cc = child.state
        h = h + ch
        c = c + torch.sigmoid(ch @ p.W) * cc
    c = torch.tanh(x + h @ p.W) + c
    return torch.tanh(c), c


@ab.program
def childsum_bottom_up(tree, p):
    """Child-sum TreeLSTM-like cell bottom-up over the post-order node list, state in ``node.state``."""
    for node in postorder(tree):
        node.state = childsum_cell(p.emb[node.word], node.children, p)
    h, _ = tree.state
    return h


@ab.function
def encode_up(node, p):
    """Each node's ``h`` stored on the way up, read back from the children."""
    if node.left is None:
        node.h = torch.tanh(p.emb[node.word])
    else:
        encode_up(node.left, p)
        encode_up(node.right, p)
        node.h = torch.tanh(torch.cat([node.left.h, node.right.h]) @ p.W2)
    return node.h


@ab.program
def recursive_h(tree, p):
    return encode_up(tree, p)


@ab.function
def encode_concurrent(node, p):
    """As ``encode_up``, the children encoded as concurrent calls (§4.1): one starts at the depth of the other."""
    if node.left is None:
        node.h = p.b + p.emb[node.word]
    else:
        ab.concurrent(encode_concurrent(node.left, p), encode_concurrent(node.right, p))
        node.h = torch.tanh(torch.cat([node.left.h, node.right.h]) @ p.W2)
    return node.h


@ab.program
def concurrent_h(tree, p):
    encode_concurrent(tree, p)
    return tree.h


@ab.program
def depths_and_optional(tree, p):
    """A host field (``node.depth``), a field that may hold None, a shared value stored (lifted) and a field
    read under a conditional expression."""
    tree.depth = 0
    nodes = postorder(tree)
    for node in nodes:
        node.best = None
        for child in node.children:
            child.depth = 1
    for node in nodes:
        left = node.left.best if node.left is not None else None
        right = node.right.best if node.right is not None else None
        if left is None or right is None:
            h = p.b
        else:
            h = left + right
        node.best = torch.tanh(h + p.emb[node.word])
    best = tree.best
    if best is None:
        best = p.b
    return best * (1 + tree.depth), best


@ab.program
def writes_a_parameter(tree, p):
    """Stores on the shared parameter module: rejected by the static tier (every instance shares it)."""
    p.last = torch.tanh(p.emb[tree.word])
    return p.last * 2


@ab.program
def reads_before_storing(tree, p):
    """Reads ``node.h`` of a node the run never stored on: plain Python reads what is there."""
    for child in tree.children:
        child.h = torch.tanh(p.emb[child.word])
    return tree.h + 1


@ab.program
def stores_a_list(tree, p):
    """Stores a list of tensors on a node: rejected (the list could still change after the store)."""
    hs = [torch.tanh(p.emb[tree.word])]
    tree.hs = hs
    return hs[0]


@ab.program
def stores_host_and_tensor(tree, p):
    """Stores a number under an attribute that holds a tensor elsewhere: rejected."""
    for child in tree.children:
        child.h = 0
    tree.h = torch.tanh(p.emb[tree.word])
    return tree.h


@ab.program
def walk_down(tree, p):
    """Down the first children while a test reads a stored field's value (a load in a ``while`` test, run again
    every iteration, and a value read: fibers, §4.2)."""
    node = tree
    node.h = p.emb[node.word]
    while len(node.children) > 0 and node.h.sum() > -1.0:
        child = node.children[0]
        child.h = torch.tanh(node.h @ p.W + p.emb[child.word])
        node = child
    return node.h


def ready(node: Node) -> bool:
    """A plain helper that reads the stored field (plain host Python, not a model function)."""
    return node.state is not None


@ab.program
def helper_reads_a_field(tree, p):
    """An undecorated helper reading ``node.state`` during the run: rejected (it would see handles)."""
    tree.state = torch.tanh(p.emb[tree.word])
    if ready(tree):
        return tree.state
    return p.b


# -- a list a shared module holds for the run: `m.outputs = []`, `self.outputs.append(h)` (issue 18 §2) ----------


class Collector(torch.nn.Module):
    """Embedding (10, 4), composition 8 -> 4, classifier 4 -> 3; ``outputs``: the list its methods append to."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.emb = torch.nn.Parameter(torch.randn(10, 4, generator=g))
        self.W = torch.nn.Parameter(torch.randn(8, 4, generator=g) / 3)
        self.C = torch.nn.Parameter(torch.randn(4, 3, generator=g) / 2)
        self.outputs: list = ["left from before the run"]

    @ab.function
    def forward(self, node):
        """The subtree's state (4,); appends every node's scores (3,) to ``self.outputs``, children first."""
        if node.left is None:
            h = torch.tanh(self.emb[node.word])
        else:
            h = torch.tanh(torch.cat([self.forward(node.left), self.forward(node.right)]) @ self.W)
        self.outputs.append(h @ self.C)
        return h


@ab.program
def collects_per_node(tree, m):
    """The root state and every node's scores stacked, from ``m.outputs`` (the recursive_module example's form)."""
    m.outputs = []
    root = m(tree)
    return root, torch.stack(m.outputs)


@ab.program
def collects_in_the_entry(tree, m):
    """A loop of the entry appending to ``m.outputs``; the result read from it."""
    m.outputs = []
    h = torch.zeros(4)
    for node in postorder(tree):
        h = torch.tanh(m.emb[node.word] + h)
        m.outputs.append(h * 2)
    return torch.stack(m.outputs).sum(0)


@ab.program
def reads_outputs_first(tree, m):
    n = len(m.outputs)
    m.outputs = []
    m(tree)
    return torch.stack(m.outputs).sum(0) + n


@ab.program
def sets_outputs_on_one_path(tree, m):
    if tree.left is None:
        m.outputs = []
    m(tree)
    return torch.stack(m.outputs).sum(0)


@ab.program
def appends_without_setting(tree, m):
    m(tree)
    return torch.stack(m.outputs).sum(0)
