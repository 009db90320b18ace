"""Small acrobat model functions used by test_analyses.py and test_runtime_errors.py.

They live in a real .py file because acrobat reads their source with
``inspect``. Lines the tests look up carry a ``# M:<key>`` marker comment.
"""

# ruff: noqa
from __future__ import annotations

import torch
from torch import nn

import acrobat as ab


class Small(nn.Module):
    """Tiny parameters, H = 4: ``emb`` (V, H), ``W``/``U`` (H, H), ``b``/``h0`` (H,), ``V`` (H, 3)."""

    def __init__(self, vocab: int = 10, hidden: int = 4, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(vocab, hidden, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(hidden, hidden, generator=g) * 0.5)
        self.U = nn.Parameter(torch.randn(hidden, hidden, generator=g) * 0.5)
        self.b = nn.Parameter(torch.randn(hidden, generator=g) * 0.1)
        self.h0 = nn.Parameter(torch.randn(hidden, generator=g) * 0.1)
        self.V = nn.Parameter(torch.randn(hidden, 3, generator=g) * 0.5)


# ---------------------------------------------------------------- map loops


@ab.function
def walk(tok, n, p):
    """``n`` recurrent steps from the token's embedding (a recursion-dependent chain)."""
    h = p.emb[tok]
    for i in range(n):
        h = torch.tanh(h @ p.U + p.b)  # M:walk_step
    return h


@ab.program
def map_prog(items, p):
    """A map: no tensor flows from one iteration to the next."""
    out = []
    for x in items:
        out.append(walk(x, 2, p))
    return out


@ab.function
def cell(h, x, p):
    return torch.tanh(h @ p.U + p.emb[x] @ p.W)  # M:cell


@ab.program
def carried_prog(items, p):
    """Not a map: ``h`` is carried from one iteration to the next."""
    h = p.h0
    for x in items:
        h = cell(h, x, p)
    return h


# ---------------------------------------------------------------- shared expressions


@ab.program
def zeros_prog(tokens, p):
    """Initial state ``torch.zeros(4)``: an expression over constants only (shared, computed once)."""
    h = torch.zeros(4)
    for tok in tokens:
        h = torch.tanh(p.emb[tok] @ p.W + h @ p.U)  # M:zeros_step
    return h


@ab.program
def shared_expr_prog(tokens, p):
    """Ops over weights only (``p.W @ p.U``, ``torch.zeros(4) + p.b``) are shared values."""
    WU = p.W @ p.U
    h = torch.zeros(4) + p.b
    for tok in tokens:
        h = torch.tanh(p.emb[tok] @ WU + h)
    return h


# ---------------------------------------------------------------- phases


@ab.program
def explicit_phases(tokens, p):
    """Explicit phase marks: three stages, even where the heuristic would put none."""
    a = torch.tanh(p.emb[tokens[0]] @ p.W)  # M:ph0
    ab.phase()
    b = torch.tanh(p.emb[tokens[-1]] @ p.U)  # M:ph1
    ab.phase()
    c = a * b  # M:ph2
    return c


@ab.program
def no_explicit_phases(tokens, p):
    """Same as ``explicit_phases`` without marks: the first two statements share phase 0."""
    a = torch.tanh(p.emb[tokens[0]] @ p.W)  # M:noph0
    b = torch.tanh(p.emb[tokens[-1]] @ p.U)  # M:noph1
    c = a * b
    return c


# ---------------------------------------------------------------- runtime errors


class Mismatch(nn.Module):
    """``vecs`` (K, 4) but ``W`` (3, 2): ``vecs[i] @ W`` fails for every instance.

    ``wide`` (K, 5): only instances that select it fail against ``W2`` (4, 2).
    """

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.vecs = nn.Parameter(torch.randn(5, 4, generator=g))
        self.wide = nn.Parameter(torch.randn(5, 5, generator=g))
        self.W = nn.Parameter(torch.randn(3, 2, generator=g))
        self.W2 = nn.Parameter(torch.randn(4, 2, generator=g))


@ab.program
def mismatch_all(i, p):
    x = p.vecs[i]
    y = x @ p.W  # M:mismatch_all
    return y


@ab.program
def mismatch_some(inst, p):
    """``inst`` is ``(wide, i)``: wide instances pick a 5-vector, which ``W2`` (4, 2) rejects."""
    wide, i = inst
    if wide:
        x = p.wide[i]
    else:
        x = p.vecs[i]
    return torch.tanh(x @ p.W2)  # M:mismatch_some


@ab.program
def index_prog(tokens, p):
    """An out-of-range token id in one instance: its embedding lookup fails."""
    out = []
    for tok in tokens:
        out.append(torch.tanh(p.emb[tok] @ p.W))  # M:bad_index
    return out


# ---------------------------------------------------------------- regression programs (bugs these tests found)


@ab.function
def kind_cell(h, x, p):
    return torch.tanh(h @ p.U + p.emb[x])


@ab.program
def two_specializations(tok, p):
    """``kind_cell`` specialized twice: ``h`` shared (``h @ p.U`` is a shared op) and ``h`` a tensor."""
    a = kind_cell(p.h0, tok, p)
    b = kind_cell(torch.tanh(p.emb[tok]), tok, p)
    return a, b


@ab.function
def lookup(tok, p):
    return p.emb[tok]


@ab.program
def call_result_arith(tok, p):
    """Arithmetic on a program call's result with a constant."""
    a = lookup(tok, p)
    return a * 2.0


@ab.program
def call_results_sum(tok, p):
    """Arithmetic between two program calls' results."""
    a = lookup(tok, p)
    b = lookup(tok + 1, p)
    return a + b
