"""Model functions covering the control flow a user writes: while, elif, enumerate/zip,
tensors as instance data, lists passed between functions, early returns.

They live in a real .py file because acrobat reads their source with ``inspect``.
"""

from __future__ import annotations

import torch

import acrobat as ab


@ab.program
def countdown(inst, p):
    """``while`` on host data: ``inst`` = (token, steps)."""
    tok, steps = inst
    h = p.emb[tok]
    while steps > 0:
        h = torch.tanh(h @ p.U + p.b)
        steps = steps - 1
    return h


@ab.function
def score(h, kind, p):
    """if / elif / else on host data, each branch a different block."""
    if kind == 0:
        return h @ p.V
    elif kind == 1:
        return torch.relu(h) @ p.V
    else:
        return torch.sigmoid(h @ p.W) @ p.V


@ab.program
def branches(tokens, p):
    """enumerate over host data, a helper returning early from each branch."""
    out = []
    for i, tok in enumerate(tokens):
        out.append(score(p.emb[tok], i % 3, p))
    return out


@ab.function
def total(states, p):
    """A list of per-instance tensors passed into a function and summed in a loop."""
    acc = p.b
    for s in states:
        acc = acc + s
    return acc


@ab.program
def from_tensors(x, p):
    """Instances are tensors (e.g. features of shape (H,)): zip them with host data."""
    states = []
    for row, scale in zip([x, x * 2.0], [1.0, 0.5]):
        states.append(torch.tanh(row @ p.W) * scale)
    return total(states, p)
