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


@ab.program
def pondering(tokens, p):
    """A per-token input projection the loop's own step reads at once, and a value read per step: the
    projection is hoisted, and on fibers its nodes for every token are added before the loop, so it runs
    as one launch a run, not one per flush (§4.2, App. A.1)."""
    h = p.h0
    for tok in tokens:
        x = torch.tanh(p.emb[tok] @ p.U)
        h = torch.tanh(x + h @ p.W + p.b)
        if h.sum().item() > 0:
            h = h * 0.5
    return h


@ab.program
def pondering_grows(tokens, p):
    """``pondering`` over a list the loop changes as it runs: it appends items and replaces the last one,
    so some iterations' items are not the ones their nodes were added for ahead."""
    toks = list(tokens)
    h = p.h0
    for tok in toks:
        x = torch.tanh(p.emb[tok] @ p.U)
        h = torch.tanh(x + h @ p.W + p.b)
        if h.sum().item() > 0 and len(toks) < 2 * len(tokens):
            toks.append((tok + 3) % 10)
        toks[-1] = (toks[-1] + 1) % 10
    return h


@ab.program
def pondering_stops(tokens, p):
    """``pondering`` that leaves the loop early: nodes of later tokens must not be added ahead."""
    h = p.h0
    for tok in tokens:
        x = torch.tanh(p.emb[tok] @ p.U)
        h = torch.tanh(x + h @ p.W + p.b)
        if h.sum().item() > 1.0:
            break
    return h


@ab.program
def numbers(tok, p):
    """Computed values read as Python numbers every way host code does: ``.item()``, ``int``, ``float``,
    ``bool``, of one computed output read by several instances (``Runtime.item``)."""
    h = torch.tanh(p.emb[tok] @ p.W)
    s = h.sum()
    steps = int(h.argmax()) + int(bool(h[0] > 0))
    scale = float(s) + s.item()
    out = h * scale
    for _ in range(steps):
        out = torch.tanh(out @ p.U)
    return out, steps


@ab.program
def vector_item(tok, p):
    """``.item()`` of a vector: torch's error, named with the instance and line."""
    return (p.emb[tok] @ p.W).item()
