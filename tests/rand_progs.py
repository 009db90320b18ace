"""Models that draw random numbers (used by test_randomness.py).

They live in a real .py file because acrobat reads their source with
``inspect``. Every program takes ``(tok, p)``: ``tok`` an int token id (or a
step count), ``p`` a ``RandParams``.
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

H = 256


class RandParams(nn.Module):
    """``emb`` (10, H) of ones, ``W`` (H, H) identity, ``probs`` (H,) = 0.3, ``drop`` an ``nn.Dropout(0.5)``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Parameter(torch.ones(10, H))
        self.W = nn.Parameter(torch.eye(H))
        self.probs = nn.Parameter(torch.full((H,), 0.3), requires_grad=False)
        self.drop = nn.Dropout(0.5)


@ab.program
def dropout_prog(tok, p):
    h = p.emb[tok] @ p.W
    return F.dropout(h, 0.25, training=True)


@ab.program
def eval_dropout_prog(tok, p):
    """Dropout off (``training=False``): deterministic, equal to plain Python."""
    h = torch.tanh(p.emb[tok] @ p.W * 0.1 * tok)
    return F.dropout(h, 0.25, training=False)


@ab.program
def module_dropout_prog(tok, p):
    return p.drop(p.emb[tok])


@ab.program
def randn_like_prog(tok, p):
    h = p.emb[tok]
    return h + torch.randn_like(h)


@ab.program
def rand_like_prog(tok, p):
    return torch.rand_like(p.emb[tok])


@ab.program
def const_randn_prog(tok, p):
    """``torch.randn(H)`` has constant operands only: still drawn per instance, not once per run."""
    return torch.randn(H) + p.emb[tok]


@ab.program
def shared_dropout_prog(tok, p):
    """Dropout of a weight (DropConnect): each instance draws its own mask of the shared ``W``."""
    W = F.dropout(p.W, 0.5, training=True)
    return p.emb[tok] @ W


@ab.program
def bernoulli_prog(tok, p):
    return torch.bernoulli(p.probs) + p.emb[tok] * 0


@ab.program
def noise_walk(n, p):
    """``n`` steps of a random walk: every step draws new numbers."""
    h = p.emb[0] * 0
    out = []
    for i in range(n):
        h = h + torch.randn_like(h)
        out.append(h)
    return out


@ab.program
def sample_branch(tok, p):
    """A sampled index read by host code (a value read: instances run on fibers, §4.2)."""
    probs = torch.softmax(p.emb[tok][:2], 0)
    i = int(torch.multinomial(probs, 1))
    if i == 0:
        return p.emb[tok] * 0
    return p.emb[tok]
