"""Models for tests/test_methods.py: ``@acrobat.function`` methods of modules, written as a PyTorch user
writes a recursive model (issue 18, section 2, "Methods as program functions")."""

# ruff: noqa
from __future__ import annotations

import torch
from torch import nn

import acrobat as ab


class Node:
    def __init__(self, word: int = 0, left: "Node | None" = None, right: "Node | None" = None):
        self.word, self.left, self.right = word, left, right


class Recursive(nn.Module):
    """A recursive NN whose `forward` recurses through `self.forward(child)`, two calls in one expression."""

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(10, 4)
        self.W = nn.Linear(8, 4)

    @ab.function
    def forward(self, node, scale=1.0):
        if node.left is None:
            return self.emb(torch.tensor([node.word]))[0] * scale
        return self.compose(self.forward(node.left), self.forward(node.right))

    @ab.function
    def compose(self, l, r):
        return torch.tanh(self.W(torch.cat([l, r])))


class Other(Recursive):
    """The same parameters, another composition: its methods are other program functions."""

    @ab.function
    def compose(self, l, r):
        return torch.sigmoid(self.W(torch.cat([r, l])))


@ab.program
def called(tree, m):
    return m(tree)


@ab.program
def method(tree, m):
    return m.forward(tree, 2.0)


class WithGRU(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gru = nn.GRU(4, 4, batch_first=True)

    def forward(self, x):
        out, h = self.gru(x)
        return h


@ab.program
def gru_module(x, m):
    return m(x)


class Storing(nn.Module):
    """A recursive `forward` that leaves each node's state on the node (`node.h`) and reads its children's."""

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, 4))
        self.W = nn.Linear(8, 4)

    @ab.function
    def forward(self, node):
        if node.left is None:
            node.h = self.emb[node.word]
        else:
            self.forward(node.left)
            self.forward(node.right)
            node.h = torch.tanh(self.W(torch.cat([node.left.h, node.right.h])))
        return node.h
