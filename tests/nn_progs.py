"""Models that call ``torch.nn`` modules held in their parameters (used by test_nn_modules.py).

They live in a real .py file because acrobat reads their source with
``inspect``. Lines the tests look up carry a ``# N:<key>`` marker comment.
Tokens are instance data as 0-d int64 tensors (``nn.Embedding`` takes a
tensor index, run plainly or batched).
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

VOCAB, EMBED, HIDDEN, CLASSES = 20, 6, 8, 3


def _seeded(module: nn.Module, seed: int) -> nn.Module:
    """``module`` with its parameters redrawn from ``seed`` (so runs are reproducible), in eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return module.eval()


# ---------------------------------------------------------------- recursive: a tree GRU over nn.GRUCell


class TreeGRUParams(nn.Module):
    """``emb`` nn.Embedding(V, E), ``proj`` nn.Linear(E, H), ``cell`` nn.GRUCell(H, H), ``out`` nn.Linear(H, C)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBED)
        self.proj = nn.Linear(EMBED, HIDDEN)
        self.cell = nn.GRUCell(HIDDEN, HIDDEN)
        self.out = nn.Linear(HIDDEN, CLASSES)
        _seeded(self, seed)


@ab.function
def tree_gru_node(node, p):
    if node.is_leaf:
        x = p.proj(p.emb(node.word))
        return p.cell(x)  # N:gru_leaf
    l, r = ab.concurrent(tree_gru_node(node.left, p), tree_gru_node(node.right, p))
    return p.cell(l, r)


@ab.program
def tree_gru(tree, p):
    h = tree_gru_node(tree, p)
    return p.out(h), h


# ---------------------------------------------------------------- sequences: an LSTM over nn.LSTMCell


class SeqLSTMParams(nn.Module):
    """``emb`` nn.Embedding(V, E), ``cell`` nn.LSTMCell(E, H), ``head`` nn.Sequential(Linear, Tanh, LayerNorm, Dropout, Linear)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBED)
        self.cell = nn.LSTMCell(EMBED, HIDDEN)
        self.head = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.LayerNorm(HIDDEN), nn.Dropout(0.3),
                                  nn.Linear(HIDDEN, CLASSES))
        self.h0 = nn.Parameter(torch.zeros(HIDDEN))
        _seeded(self, seed)


@ab.program
def seq_lstm(tokens, p):
    h = p.h0
    c = p.h0
    for tok in tokens:
        h, c = p.cell(p.emb(tok), (h, c))  # N:lstm_step
    return p.head(h)


@ab.program
def seq_lstm_fresh(tokens, p):
    """The first step starts from no state (``hx`` left out)."""
    h, c = p.cell(p.emb(tokens[0]))
    for tok in tokens[1:]:
        h, c = p.cell(p.emb(tok), (h, c))
    return h, c


# ---------------------------------------------------------------- a user module, activations, other call forms


class Encoder(nn.Module):
    """A user module: straight-line torch code over submodules (Linear, GELU, LayerNorm, RNNCell)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(EMBED, HIDDEN)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(HIDDEN)
        self.cell = nn.RNNCell(HIDDEN, HIDDEN, nonlinearity="relu")

    def forward(self, x, h):
        y = self.norm(self.act(self.lin(x)))
        return self.cell(y, h) + 0.5 * torch.sigmoid(y)

    def encode(self, x):
        """A method other than forward, called as ``p.encoder.encode(x)``."""
        return torch.tanh(self.lin(x))


class MixedParams(nn.Module):
    """An ``Encoder``, activation modules, an nn.ModuleList, cells without bias, a plain weight."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBED)
        self.encoder = Encoder()
        self.acts = nn.ModuleList([nn.Tanh(), nn.ReLU(), nn.Sigmoid(), nn.GELU(approximate="tanh"), nn.SiLU()])
        self.gru = nn.GRUCell(HIDDEN, HIDDEN, bias=False)
        self.lstm = nn.LSTMCell(HIDDEN, HIDDEN, bias=False)
        self.W = nn.Parameter(torch.zeros(HIDDEN))
        self.h0 = nn.Parameter(torch.zeros(HIDDEN))
        _seeded(self, seed)


@ab.program
def mixed(tokens, p):
    h = p.h0
    c = p.h0
    cell = p.gru
    for tok in tokens:
        x = p.emb(tok)
        h = p.encoder(x, h)
        h = cell(p.acts[0](h), h)
        h = p.acts[1](h) + p.acts[2](h) - p.acts[3](h) * p.acts[4](h)
        h, c = p.lstm(p.W.mul(h), (h, c))
    return h, p.encoder.encode(p.emb(tokens[0]))


# ---------------------------------------------------------------- modules with no batchable form


class BadParams(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBED)
        self.rnn = nn.LSTM(EMBED, HIDDEN)
        self.bn = nn.BatchNorm1d(EMBED)
        self.drop = nn.Dropout(0.5)  # training mode unless .eval()
        self.seq = nn.Sequential(nn.Linear(EMBED, EMBED), nn.Dropout(0.2))


@ab.program
def bad_lstm(tokens, p):
    x = p.emb(tokens[0])
    y, _ = p.rnn(x)  # N:bad_lstm
    return y


@ab.program
def bad_batchnorm(tokens, p):
    x = p.emb(tokens[0])
    return p.bn(x)  # N:bad_batchnorm


@ab.program
def bad_dropout(tokens, p):
    x = p.emb(tokens[0])
    return p.seq(p.drop(x))  # N:bad_dropout


# ---------------------------------------------------------------- regression: a loop-carried value only its block reads


@ab.program
def carried_in_block(tokens, p):
    """``c`` is read and written by one block only; the next iteration's block must see the new ``c``."""
    h = p.emb.weight[0]
    c = p.emb.weight[1]
    for tok in tokens:
        c = torch.tanh(c + p.emb.weight[tok])
        h = c * 2.0
    return h
