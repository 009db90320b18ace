"""Models for tests/test_padded.py: attention over a per-instance list as researchers write it (issue 18 §2).

Each program embeds a token list (``p.emb(torch.tensor(tokens))``: a stacked list of its length) and hands it
to a helper the row-wise analysis rejects (it moves or contracts the list axis), which acrobat runs as a padded
function: undecorated helpers, as users write them, and ``multi_head`` decorated as examples/transformer_encoder.py
writes it. Each runs as plain Python per instance; an instance is a list of token ids (0 is padding).
"""

# ruff: noqa
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import acrobat as ab

H = 8
HEADS = 2


class Params(nn.Module):
    def __init__(self, vocab: int = 20, hidden: int = H, heads: int = HEADS):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(0.1 * torch.randn(16, hidden))
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.o = nn.Linear(hidden, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, 3)
        self.d = hidden
        self.heads = heads
        self.d_head = hidden // heads
        self.layer1 = Layer(hidden, heads)
        self.layer2 = Layer(hidden, heads)


class Layer(nn.Module):
    """One encoder layer's weights: attention (qkv, o), post-norms ln1/ln2, FFN ff1/ff2 (H -> 2H -> H)."""

    def __init__(self, hidden: int = H, heads: int = HEADS):
        super().__init__()
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.o = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.ff1 = nn.Linear(hidden, 2 * hidden)
        self.ff2 = nn.Linear(2 * hidden, hidden)
        self.d = hidden
        self.heads = heads
        self.d_head = hidden // heads


# -- padded functions ----------------------------------------------------------------------------------------

def single_head(x):
    return torch.softmax(x @ x.T / math.sqrt(x.shape[-1]), dim=-1) @ x


def qkv_linear(x, p):
    q = F.linear(x, p.q.weight, p.q.bias)
    k = p.k(x)
    v = p.v(x)
    att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(p.d), dim=-1)
    return att @ v


@ab.function
def multi_head(x, p):
    L = x.shape[0]
    q, k, v = p.qkv(x).chunk(3, dim=-1)
    q = q.view(L, p.heads, p.d_head).transpose(0, 1)
    k = k.view(L, p.heads, p.d_head).transpose(0, 1)
    v = v.view(L, p.heads, p.d_head).transpose(0, 1)
    att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(p.d_head), dim=-1)
    return p.o((att @ v).transpose(0, 1).reshape(L, p.d))


def masked(x, keep, p):
    scores = (p.q(x) @ p.k(x).mT) / math.sqrt(p.d)
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ p.v(x)


def masked_where(x, keep, p):
    scores = p.q(x) @ p.k(x).transpose(0, 1)
    scores = torch.where(keep.unsqueeze(0), scores, torch.full_like(scores, -1e9))
    return F.layer_norm(x + scores.softmax(-1) @ x, (p.d,), p.ln.weight, p.ln.bias)


def mean_pooled(x, p):
    att = torch.softmax(x @ x.T, dim=-1)
    return (att @ p.v(x)).mean(0)


def max_pooled(x, p):
    att = torch.softmax(p.q(x) @ p.k(x).T, dim=1)
    h = att @ x
    return h.max(dim=0).values, h


def length_arithmetic(x):
    return (x @ x.T).softmax(-1).sum(0) / x.shape[0]


def unsupported(x):
    return torch.cumsum(x @ x.T, dim=1)


def value_read(x):
    """``if v:`` of a one-element value: each instance's own truth (a padded value has no one ``bool``)."""
    s = (x @ x.T).softmax(-1)
    if s.amax(1).sum(0, keepdim=True) > 3.0:
        return (s @ x).sum(0)
    return x.sum(0)


# -- programs ------------------------------------------------------------------------------------------------

@ab.program
def single_head_prog(tokens, p):
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    return p.out(single_head(x).mean(0))


@ab.program
def qkv_prog(tokens, p):
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    return qkv_linear(x, p)


@ab.program
def multi_head_prog(tokens, p):
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    h = x + multi_head(x, p)
    return p.out(h.mean(0)), h


@ab.program
def masked_prog(tokens, p):
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    keep = torch.tensor(tokens) != 0
    return masked(x, keep, p).sum(0)


@ab.program
def masked_where_prog(tokens, p):
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    keep = torch.tensor(tokens) != 0
    return masked_where(x, keep, p)


@ab.program
def mean_pooled_prog(tokens, p):
    return p.out(mean_pooled(p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)], p))


@ab.program
def max_pooled_prog(tokens, p):
    pooled, h = max_pooled(p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)], p)
    return pooled, h.amax(0)


@ab.program
def length_arithmetic_prog(tokens, p):
    return length_arithmetic(p.emb(torch.tensor(tokens)))


@ab.program
def value_read_prog(tokens, p):
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    return value_read(x)


@ab.program
def unsupported_prog(tokens, p):
    return unsupported(p.emb(torch.tensor(tokens))).sum(0)


def cross(x, y, p):
    return torch.softmax(p.q(x) @ p.k(y).T, dim=-1) @ y


@ab.program
def cross_prog(tokens, p):
    x = p.emb(torch.tensor(tokens))
    y = p.emb(torch.tensor(tokens[:(len(tokens) + 1) // 2]))
    return cross(x, y, p)


def scaled(x, temperature):
    return torch.softmax(x @ x.T / temperature, dim=-1) @ x


@ab.program
def host_number_prog(tokens, p):
    return scaled(p.emb(torch.tensor(tokens)), 1 + len(tokens) % 3)  # three temperatures: one call each


def exp_weights(x, p):
    h = p.q(x)  # its padding rows hold q's bias
    s = torch.exp(h - h.amin(0))  # at padding positions exp(bias - min) may overflow to inf
    return (s.transpose(0, 1) @ h).sum(0)  # contracts the list axis: its padding masked to 0


@ab.program
def exp_weights_prog(tokens, p):
    return exp_weights(p.emb(torch.tensor(tokens)), p)


# -- runs: the statements around a padded call join it (acrobat.analysis.padded_runs) ------------------------

def attention(x, m):
    L = x.shape[0]
    q, k, v = m.qkv(x).chunk(3, dim=-1)
    q = q.view(L, m.heads, m.d_head).transpose(0, 1)
    k = k.view(L, m.heads, m.d_head).transpose(0, 1)
    v = v.view(L, m.heads, m.d_head).transpose(0, 1)
    att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(m.d_head), dim=-1)
    return m.o((att @ v).transpose(0, 1).reshape(L, m.d))


@ab.program
def encoder_prog(tokens, p):
    """examples/transformer_encoder.py's shape: functional layer norms, a masked pool by torch.where."""
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    x = F.layer_norm(x + attention(x, p.layer1), (p.d,), p.layer1.ln1.weight, p.layer1.ln1.bias)
    x = F.layer_norm(x + p.layer1.ff2(torch.relu(p.layer1.ff1(x))), (p.d,), p.layer1.ln2.weight, p.layer1.ln2.bias)
    keep = (torch.tensor(tokens) != 0).unsqueeze(-1)
    pooled = torch.where(keep, x, torch.zeros_like(x)).sum(0) / keep.sum().clamp(min=1)
    return p.out(pooled), x


@ab.program
def encoder_modules_prog(tokens, p):
    """The same with the norms as modules, the FFN over two statements, a float mask and a masked mean."""
    ids = torch.tensor(tokens)
    x = p.emb(ids) + p.pos[:len(tokens)]
    a = attention(x, p.layer1)
    x = p.layer1.ln1(x + a)
    h = F.gelu(p.layer1.ff1(x))
    x = p.layer1.ln2(x + p.layer1.ff2(h))
    keep = (ids > 0).float().unsqueeze(-1)
    pooled = (x * keep).sum(0) / keep.sum(0).clamp(min=1.0)
    return p.out(pooled)


def encoder_layer(x, m):
    x = F.layer_norm(x + attention(x, m), (m.d,), m.ln1.weight, m.ln1.bias)
    x = F.layer_norm(x + m.ff2(torch.relu(m.ff1(x))), (m.d,), m.ln2.weight, m.ln2.bias)
    return x


@ab.program
def two_layer_prog(tokens, p):
    """Two encoder layers, each a helper holding the attention: each layer's run is grown in the helper."""
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    x = encoder_layer(x, p.layer1)
    x = encoder_layer(x, p.layer2)
    return p.out(x.mean(0)), x


@ab.program
def value_read_prog(tokens, p):
    """A value read (``.item()``) and host control flow over it in the middle: the run stops before it."""
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    x = F.layer_norm(x + attention(x, p.layer1), (p.d,), p.layer1.ln1.weight, p.layer1.ln1.bias)
    scale = x.abs().amax().item()  # not x.sum(): 0 up to rounding after a layer norm
    sign = 1.0 if scale > 1.0 else -1.0
    x = p.layer1.ln2(x * sign / scale + p.layer1.ff2(torch.relu(p.layer1.ff1(x))))
    return p.out(x.mean(0))


@ab.program
def row_loop_prog(tokens, p):
    """A host loop over the rows in the middle (each row scaled by its position): the run stops before it."""
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    x = F.layer_norm(x + attention(x, p.layer1), (p.d,), p.layer1.ln1.weight, p.layer1.ln1.bias)
    y = torch.stack([x[i] * (i + 1) for i in range(len(tokens))])
    return p.out(p.layer1.ln2(y + p.layer1.ff2(torch.relu(p.layer1.ff1(y)))).mean(0))


@ab.program
def no_rule_prog(tokens, p):
    """An operator without a padding rule (``narrow``, row-wise in the static tier) after the attention: the run
    stops before it."""
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    x = x + attention(x, p.layer1)
    y = x.narrow(-1, 0, 4)
    h = torch.relu(y)
    return h.mean(0)
