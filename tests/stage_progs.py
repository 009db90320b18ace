"""Programs with staged loops (``acrobat.analysis.phases``): a sequential loop whose body mixes work of
varying depth (an inner loop, a call) with fixed work. An instance is a tuple of (token, inner steps) pairs.

They live in a real .py file because acrobat reads their source with ``inspect``.
"""

from __future__ import annotations

import torch

import acrobat as ab


@ab.function
def inner(x, h, steps, p):
    """``steps`` RNN steps from ``h`` on input ``x``."""
    for _ in range(steps):
        h = torch.tanh(x + h @ p.U)
    return h


@ab.program
def nested(inst, p):
    """NestedRNN's shape: per outer step, an inner loop (a call) from the state, then a fixed cell."""
    g = p.h0
    for tok, m in inst:
        h = inner(p.emb[tok] @ p.W, g, m, p)
        g = torch.tanh(h @ p.W + g @ p.U + p.b)  # marker: fixed_cell
    return g @ p.V


@ab.program
def nested_exits(inst, p):
    """An inline inner loop, ``continue`` before it, ``break`` after the fixed cell, a second fixed cell after
    the loop reading the state (its own program phase)."""
    g = p.h0
    for tok, m in inst:
        if tok == 0:
            continue
        h = g
        for _ in range(m):
            h = torch.sigmoid(h @ p.U + p.b)
        g = torch.tanh(h @ p.W + g)
        if tok == 9:
            break
    g = torch.relu(g @ p.U)
    return g @ p.V


@ab.program
def nested_while(inst, p):
    """A ``while`` outer loop: a fixed cell first, then the inner loop (rotated: the cell follows the inner
    loop of the iteration before)."""
    g = p.h0
    t = 0
    while t < len(inst):
        tok, m = inst[t]
        g = torch.tanh(p.emb[tok] + g @ p.W)
        g = inner(g, g, m, p)
        t = t + 1
    return g @ p.V


@ab.program
def nested_reads(inst, p):
    """The inner loop stops early on a computed value (a value read: fibers, §4.2)."""
    g = p.h0
    for tok, m in inst:
        h = p.emb[tok] + g
        k = 0
        while k < m and h.sum() > -1.0:
            h = torch.tanh(h @ p.U)
            k = k + 1
        g = torch.tanh(h @ p.W + g @ p.U + p.b)
    return g @ p.V


@ab.program
def inner_only(inst, p):
    """The body's only work varies: not staged (aligning iterations would only add launches)."""
    g = p.h0
    for tok, m in inst:
        g = inner(p.emb[tok] @ p.W, g, m, p)
    return g @ p.V


@ab.function
def cell(x, h, p):
    """A straight-line step: every instance's depth advances by the same amount."""
    return torch.tanh(x @ p.W + h @ p.U)


@ab.program
def fixed_call(inst, p):
    """A call of a straight-line function and a map loop in the body: nothing varies, not staged."""
    g = p.h0
    for tok, m in inst:
        g = cell(p.emb[tok], g, p)
        parts = [torch.relu(g * k) for k in range(m + 1)]
        g = torch.tanh(g @ p.W + parts[0])
    return g @ p.V


@ab.function
def chain(h, n, p):
    """``n`` steps by recursion: the call's depth advance varies."""
    if n == 0:
        return h
    return chain(torch.tanh(h @ p.U), n - 1, p)


@ab.program
def recursive_call(inst, p):
    """A recursive call, then a fixed cell: staged."""
    g = p.h0
    for tok, m in inst:
        h = chain(p.emb[tok] + g, m, p)
        g = torch.tanh(h @ p.W + g @ p.U + p.b)
    return g @ p.V
