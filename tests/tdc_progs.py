"""Models with tensor-dependent control flow (§4.2): decisions read computed tensor values.

They live in a real .py file because acrobat reads their source with ``inspect``.
"""

from __future__ import annotations

import torch

import acrobat as ab


@ab.program
def scaled(tok, p):
    """A tensor value read as a host number (`.item()`), then used in an operator."""
    v = (p.emb[tok] @ p.W).sum().item()
    return p.emb[tok] * v


@ab.program
def early_exit(tok, p):
    """Up to 6 layers; stop once the state's first unit is positive (an early exit)."""
    h = p.emb[tok]
    layers = 0
    done = False
    while layers < 6 and not done:
        h = torch.tanh(h @ p.W + p.b)
        layers = layers + 1
        if h[0] > 0:
            done = True
    return h, layers


@ab.program
def countdown(tok, p):
    """A while loop whose condition is a tensor."""
    h = p.emb[tok]
    while h.sum() > 0:
        h = h - 0.5
    return h


@ab.function
def uniform(seed, path):
    """A deterministic pseudo-random number in [0, 1) for one tree position: schedule-independent."""
    x = (seed * 1_000_003 + path * 7919) % 65_521
    return x / 65_521


@ab.function
def grow(h, depth, seed, path, p):
    """DRNN-like top-down generation: a node gets two children when a computed gate says so."""
    out = [h @ p.V]
    if depth < 4:
        gate = torch.sigmoid(h @ p.w_gate)
        if gate.item() > uniform(seed, path):
            left = torch.tanh(h @ p.W + p.b)
            right = torch.tanh(h @ p.U + p.b)
            a, b = ab.concurrent(grow(left, depth + 1, seed, 2 * path, p), grow(right, depth + 1, seed, 2 * path + 1, p))
            out = out + a + b
    return out


@ab.program
def drnn(inst, p):
    """Instance = (token, seed)."""
    tok, seed = inst
    return grow(p.emb[tok], 0, seed, 1, p)



@ab.program
def gated_steps(tokens, p):
    """An RNN whose every step reads a value (`.item()`), with per-token features read only after
    the loop: ``torch.tanh(p.emb[tok] @ p.U)`` depends on no step, so it is hoisted (static depth)
    and, on fibers, should run as one launch for the whole batch (§4.2, App. A.1)."""
    h = p.h0
    feats = []
    for tok in tokens:
        feats.append(torch.tanh(p.emb[tok] @ p.U))
        h = torch.tanh(h @ p.W + p.b)
        if h.sum().item() > 0:
            h = h * 0.5
    return h, feats
