"""Model functions that acrobat must reject at compile time (used by test_compile_errors.py).

Each offending line carries a marker comment ``# E:<key>``; the tests find
the expected line number by searching for the marker, so lines can move.
Every program takes ``(tok, p)``: ``tok`` an int token id, ``p`` a module
with ``emb`` (V, H), ``W`` (H, H), ``b`` (H,).
"""

# ruff: noqa
import contextlib
import math

import torch

import acrobat as ab

GLOBAL_T = torch.ones(4)
COUNTER = 0


@ab.function
def good_helper(tok, p):
    return torch.tanh(p.emb[tok] @ p.W)


@ab.program
def bad_listcomp(tok, p):
    return torch.tanh([p.emb[t] for t in range(tok)][0]) if tok > 0 else p.b  # E:listcomp


@ab.program
def bad_lambda(tok, p):
    f = lambda x: x  # E:lambda
    return p.emb[tok]


@ab.program
def bad_try(tok, p):
    try:  # E:try
        h = p.emb[tok]
    except IndexError:
        h = p.b
    return h


@ab.program
def bad_with(tok, p):
    with contextlib.nullcontext():  # E:with
        h = p.emb[tok]
    return h


@ab.program
def bad_while_else(tok, p):
    i = 0
    while i < tok:  # E:while_else
        i = i + 1
    else:
        i = 0
    return p.emb[i]


@ab.program
def bad_import(tok, p):
    import math  # E:import
    return p.emb[tok]


@ab.program
def bad_global(tok, p):
    global COUNTER  # E:global
    return p.emb[tok]


@ab.program
def bad_global_tensor(tok, p):
    return p.emb[tok] + GLOBAL_T  # E:global_tensor


@ab.program
def bad_inplace(tok, p):
    h = torch.tanh(p.emb[tok] @ p.W)
    h.add_(p.b)  # E:inplace
    return h


@ab.program
def bad_attr_assign(tok, p):
    tok.x, y = 1, 2  # E:attr_assign
    return p.emb[0]


@ab.program
def bad_varargs(tok, *rest):  # E:varargs
    return tok


@ab.program
def bad_default(tok, p=GLOBAL_T):  # E:default
    return p.emb[tok]


@ab.function
def phase_helper(tok, p):
    ab.phase()  # E:phase_helper
    return p.emb[tok]


@ab.program
def bad_phase_in_helper(tok, p):
    return phase_helper(tok, p)


@ab.program
def bad_concurrent(tok, p):
    a, b = ab.concurrent(good_helper(tok, p), torch.tanh(p.b))  # E:concurrent
    return a + b


@ab.program
def bad_nargs(tok, p):
    return good_helper(tok)  # E:nargs


@ab.program
def bad_host_tensor_paths(tok, p):
    if tok > 2:
        v = tok
    else:
        v = p.emb[tok]  # E:host_tensor_paths
    return v


@ab.program
def bad_three_params(tok, p, q):  # E:entry_arity
    return p.emb[tok]


@ab.program
def bad_inplace_shared(tok, p):
    w = p.W.add_(1.0)  # E:inplace_shared
    return p.emb[tok] @ w


@ab.program
def bad_out_kwarg(tok, p):
    h = torch.tanh(p.emb[tok] @ p.W)
    torch.add(h, 1.0, out=h)  # E:out_kwarg
    return h


@ab.program
def bad_recursive_entry(toks, p):
    h = p.emb[toks[0]]
    if len(toks) > 1:
        h = h + bad_recursive_entry(toks[1:], p)  # E:recursive_entry
    return torch.tanh(h @ p.W)


@ab.function
def suffix_state(toks, p):
    """The fix of ``bad_recursive_entry``: the recursion in an @acrobat.function, the entry calls it."""
    h = p.emb[toks[0]]
    if len(toks) > 1:
        h = h + suffix_state(toks[1:], p)
    return torch.tanh(h @ p.W)


@ab.program
def fixed_recursive_entry(toks, p):
    return suffix_state(toks, p)
