"""Models whose helpers are not decorated: only the entry carries ``@acrobat.program`` (issue 18: a user
decorates the entry, not every function it calls). ``tests/test_implicit_helpers.py`` runs them."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab


def scale(h, by=2.0):
    return h * by


def encode(node, W):
    """A recursive helper over a tree of dicts: leaves index ``W``, inner nodes sum their children."""
    if not node["kids"]:
        return torch.tanh(W[node["word"] % 3])
    return torch.tanh(sum(encode(k, W) for k in node["kids"]))


@ab.program
def helper_given_a_tensor(tokens, p):
    return scale(p.emb[tokens[0]] @ p.W, by=0.5) + scale(p.b)


@ab.program
def recursive_helper(tree, W):
    return encode(tree, W)


class ExprNet(nn.Module):
    """Tree of ("num", v) leaves and ("add"|"mul", left, right) nodes; ``forward`` is the only decorated method."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.leaf = nn.Parameter(torch.randn(dim, generator=g))
        self.ops = nn.ModuleDict({"add": nn.Linear(2 * dim, dim), "mul": nn.Linear(2 * dim, dim)})
        self.head = nn.Linear(dim, 1)

    def encode(self, e):
        if e[0] == "num":
            return torch.relu(self.leaf * float(e[1]))
        return torch.relu(self.ops[e[0]](torch.cat([self.encode(e[1]), self.encode(e[2])])))

    def squash(self, h):  # given only a tensor: one operator of a block, as before
        return F.normalize(h, dim=0)

    @ab.function
    def forward(self, e):
        return self.head(self.squash(self.encode(e))).squeeze(-1)


@ab.program
def undecorated_method(e, model):
    return model(e)


def needs_a_try(h):
    try:  # outside the static subset
        return h * 2.0
    except ValueError:
        return h


@ab.program
def helper_the_parser_rejects(tokens, p):
    return needs_a_try(p.emb[tokens[0]])


class Attention(nn.Module):
    """A hierarchical attention network whose ``attend`` is undecorated and given stacked lists (HAN)."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.emb = nn.Embedding(10, dim)
        self.att = nn.Linear(dim, 1)
        self.out = nn.Linear(dim, 2)

    def attend(self, H):  # a stacked list: analysed as a program function (one operator cannot take it)
        w = F.softmax(self.att(H).squeeze(-1), dim=0)
        return (w.unsqueeze(-1) * H).sum(0)

    def cell(self, x):  # only a tensor, but a pair returned: analysed, so its result keeps its tuple kind
        return torch.tanh(x), torch.sigmoid(self.att(x))

    @ab.function
    def forward(self, doc):
        sents = [self.attend(torch.stack([self.emb(torch.tensor(t)) for t in sent])) for sent in doc]
        hs, gs = zip(*[self.cell(s) for s in sents])
        acc = torch.zeros(4)
        for h, g in zip(hs, gs):
            acc = acc + h * g
        return self.out(self.attend(torch.stack(sents)) + acc)


@ab.program
def attention(doc, model):
    return model(doc)


class Unary(nn.Module):
    """Expression trees with a unary operator: ``torch.cat(kids)`` of one or two children's states."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.leaf = nn.Linear(1, dim)
        self.ops = nn.ModuleDict({"add": nn.Linear(2 * dim, dim), "neg": nn.Linear(dim, dim)})
        self.head = nn.Linear(dim, 1)

    def encode(self, e):
        if e[0] == "num":
            return torch.relu(self.leaf(torch.tensor([float(e[1])])))
        kids = [self.encode(a) for a in e[1:]]
        return torch.relu(self.ops[e[0]](torch.cat(kids)))

    @ab.function
    def forward(self, e):
        return self.head(self.encode(e)).squeeze(-1)


@ab.program
def unary(e, model):
    return model(e)
