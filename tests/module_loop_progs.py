"""Programs that loop over a model's module and parameter containers (used by test_module_loops.py): the loops
the static tier unrolls into their iterations (``acrobat.analysis.unrolling``).

They live in a real .py file because acrobat reads their source with ``inspect``. ``ML`` holds the shared
parameters; ``ML(layers=n)`` has ``n`` items in each of its stacks (``layers``, ``lins``, ``norms``, ``cells``,
``projs``, ``weights``), so two models of different depths run one program in a row. Instances are token lists
(``list[int]``) or trees of ``Node``.
"""

# ruff: noqa
from __future__ import annotations

import torch
from torch import nn

import acrobat as ab

VOCAB, H = 12, 6


class Node:
    """A tree node: a token ``word`` and children ``kids`` (a leaf has none)."""

    def __init__(self, word: int, kids: list[Node]) -> None:
        self.word, self.kids = word, kids


class ML(nn.Module):
    """``emb`` VOCAB x H; ``layers`` an ``nn.ModuleList`` alternating ``nn.Linear(H, H)`` and an activation
    (``nn.ReLU``, ``nn.Tanh``: modules of different classes); ``lins``/``norms`` ``nn.Linear``/``nn.LayerNorm``
    stacks; ``cells`` ``nn.GRUCell(H, H)`` and ``projs`` ``nn.Linear(H, H)`` per layer of a stacked RNN;
    ``seq`` an ``nn.Sequential``; ``experts`` an ``nn.ModuleDict`` (Linear, Tanh, Linear); ``weights`` an
    ``nn.ParameterList`` of H x H matrices. ``layers`` items per stack (``seq`` and ``experts`` are fixed)."""

    def __init__(self, layers: int = 3, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        acts = [nn.ReLU(), nn.Tanh()]
        self.emb = nn.Parameter(torch.randn(VOCAB, H, generator=g))
        self.layers = nn.ModuleList([nn.Linear(H, H) if i % 2 == 0 else acts[i // 2 % 2] for i in range(layers)])
        self.lins = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])
        self.norms = nn.ModuleList([nn.LayerNorm(H) for _ in range(layers)])
        self.cells = nn.ModuleList([nn.GRUCell(H, H) for _ in range(layers)])
        self.projs = nn.ModuleList([nn.Linear(H, H) for _ in range(layers)])
        self.seq = nn.Sequential(nn.Linear(H, H), nn.Tanh(), nn.Linear(H, H), nn.Sigmoid())
        self.experts = nn.ModuleDict({"up": nn.Linear(H, H), "act": nn.Tanh(), "down": nn.Linear(H, H)})
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(H, H, generator=g) * 0.4) for _ in range(layers)])
        with torch.no_grad():
            for q in self.parameters():
                q.copy_(torch.randn(q.shape, generator=g) * 0.5)


@ab.function
def bag(toks, p):
    h = torch.zeros(H, dtype=p.emb.dtype)
    for t in toks:
        h = h + p.emb[t]
    return h


@ab.program
def stacked_rnn(toks, p):
    """A stacked GRUCell RNN: each layer's cell, then its projection, over the tokens."""
    states = []
    for cell in p.cells:
        states.append(torch.zeros(H, dtype=p.emb.dtype))
    x = torch.zeros(H, dtype=p.emb.dtype)
    for t in toks:
        x = p.emb[t]
        new = []
        for j, (cell, proj) in enumerate(zip(p.cells, p.projs)):
            h = cell(x.unsqueeze(0), states[j].unsqueeze(0)).squeeze(0)
            new.append(h)
            x = torch.tanh(proj(h))
        states = new
    return x


@ab.function
def residual_node(node, p):
    h = p.emb[node.word]
    for kid in node.kids:
        h = h + residual_node(kid, p)
    for lin, ln in zip(p.lins, p.norms):
        h = h + torch.relu(lin(ln(h)))
    return h / (1 + len(node.kids))


@ab.program
def residual_tree(tree, p):
    """A residual MLP stack (``zip(p.lins, p.norms)``) at each node of a tree."""
    return residual_node(tree, p)


@ab.program
def enumerate_skip_first(toks, p):
    """``enumerate(p.layers)`` over modules of different classes, the first one skipped; then ``range(len(p.layers))``
    with ``p.layers[i]`` (``kinds.ChoiceK``)."""
    h = bag(toks, p)
    for i, lyr in enumerate(p.layers):
        if i > 0:
            h = lyr(h) + h * 0.5
    for i in range(len(p.layers)):  # an index into the container: each call one static call per module
        if i % 2 == len(toks) % 2:
            h = p.layers[i](h)
    return h


@ab.program
def sequential_iterated(toks, p):
    """An ``nn.Sequential``'s children called one by one, the sum kept after each."""
    h = bag(toks, p) / len(toks)
    outs = []
    for m in p.seq:
        h = m(h)
        outs.append(h.sum())
    return h, torch.stack(outs)


@ab.program
def module_dict_views(toks, p):
    """An ``nn.ModuleDict`` (modules of different classes) iterated by its keys, ``.items()`` (the string keys
    host data) and ``.values()``."""
    h = p.emb[toks[0]]
    x = p.emb[toks[-1]]
    for name, m in p.experts.items():
        if name == "act" and len(toks) > 2:
            continue
        h = m(h) + x
    total = h
    for m in p.experts.values():
        total = total + m(x)
    for k in p.experts:
        if k != "act":
            total = total - 0.5 * p.experts[k](total)
    return h, total


@ab.program
def parameter_list(toks, p):
    """An ``nn.ParameterList`` of matrices, iterated and reversed."""
    h = bag(toks, p)
    for W in p.weights:
        h = torch.tanh(h @ W)
    for W in reversed(p.weights):
        h = h + h @ W.T
    return h


@ab.program
def loop_exits(toks, p):
    """``break``, ``continue`` and an early ``return`` inside loops over ``p.lins``, chosen per instance."""
    h = bag(toks, p)
    for i, lin in enumerate(p.lins):
        if i == len(toks) % 3:
            continue
        h = torch.tanh(lin(h))
        if i >= len(toks):
            break
    for ln in p.norms:
        h = ln(h)
        if len(toks) == 2:
            return h * 2
    return h


@ab.function
def through(h, stack):
    for m in stack:
        h = m(h)
    return h


@ab.program
def two_stacks(toks, p):
    """One function's loop over two containers of different lengths (``p.lins`` of the model's depth, ``p.seq``
    of four): the static tier unrolls a loop for one set of containers per function, and rejects this."""
    return through(through(p.emb[toks[0]], p.lins), p.seq)
