"""Programs for tests/test_host_maps.py: dicts keyed by per-instance host data (memo tables over DAGs whose shared
children are reached twice, a vocabulary built per instance, counts per key, a dict filled by a recursive callee,
keys that are ints, strings and tuples, ``.items()`` after the recursion, values that are ``(c, h)`` tuples),
keyword-only parameters and calls by keywords, and namedtuples with list fields.

They live in a real .py file because acrobat reads their source with ``inspect``. ``MP`` holds the shared
parameters (``emb``: VOCAB x H, ``W``: H x H, ``U``: H x H, ``v``: H, ``h0``: H).
"""

# ruff: noqa
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

import acrobat as ab

H = 5
VOCAB = 12


class MP(nn.Module):
    """Shared parameters (see the module docstring)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(VOCAB, H, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(H, H, generator=g) * 0.5)
        self.U = nn.Parameter(torch.randn(H, H, generator=g) * 0.5)
        self.v = nn.Parameter(torch.randn(H, generator=g))
        self.h0 = nn.Parameter(torch.randn(H, generator=g) * 0.5)


class Node:
    """A DAG node: a word id ``w`` and children ``kids`` (a child may be shared by two parents)."""

    def __init__(self, w: int, kids: list):
        self.w, self.kids = w, kids


class Encoded(NamedTuple):
    """What ``namedtuple_lists`` returns: the states of a sequence and its last state."""

    states: list
    last: torch.Tensor
    n: int = 0


# --- memo tables over DAGs ------------------------------------------------------------------------------------

@ab.function
def memo_enc(node, p, memo):
    key = id(node)
    if key in memo:
        return memo[key]
    h = p.emb[node.w]
    for c in node.kids:
        h = h + memo_enc(c, p, memo)
    h = torch.tanh(h @ p.W)
    memo[key] = h
    return h


@ab.program
def dag_memo_count(root, p):
    memo = {}
    h = memo_enc(root, p, memo)
    return h, len(memo)


@ab.function
def memo_get(node, p, memo):
    found = memo.get(node.w * 100 + len(node.kids))
    if found is not None:
        return found
    h = p.emb[node.w]
    for c in node.kids:
        h = h + memo_get(c, p, memo)
    out = torch.tanh(h @ p.U)
    return memo.setdefault(node.w * 100 + len(node.kids), out)


@ab.program
def dag_memo_get(root, p):
    memo = dict()
    h = memo_get(root, p, memo)
    return h, sorted(memo)


@ab.function
def lstm_memo(node, p, memo):
    if id(node) not in memo:
        c = p.emb[node.w]
        h = torch.zeros(H)
        for k in node.kids:
            ck, hk = lstm_memo(k, p, memo)
            c = c + ck
            h = h + hk
        memo[id(node)] = (torch.tanh(c @ p.W), torch.sigmoid(h @ p.U + c))
    return memo[id(node)]


@ab.program
def dag_tuple_values(root, p):
    memo = {}
    c, h = lstm_memo(root, p, memo)
    total = p.h0 * 0.0
    for key, (ck, hk) in memo.items():
        total = total + ck * hk
    return c + h, total, len(memo)


# --- dicts filled by a recursive callee, keys of several host types ---------------------------------------------

@ab.function
def collect(node, p, out, depth):
    h = p.emb[node.w]
    for i, c in enumerate(node.kids):
        h = h + collect(c, p, out, depth + 1)
    h = torch.tanh(h @ p.W)
    out[(depth, node.w)] = h
    out["w" + str(node.w)] = h * 2.0
    return h


@ab.program
def filled_by_callee(root, p):
    out = {}
    h = collect(root, p, out, 0)
    depths = []
    acc = h
    for k, v in out.items():
        if not isinstance(k, str):  # a (depth, word) key
            depths.append(k[0])
        acc = acc + v * 0.1
    first = out.pop((0, root.w))
    return acc + first, depths, out


# --- vocabularies and counts built per instance -------------------------------------------------------------------

@ab.program
def vocab_per_instance(toks, p):
    vocab = {}
    for t in toks:
        if t not in vocab:
            vocab[t] = len(vocab)
    embs = {}
    for t, i in vocab.items():
        embs[t] = p.emb[t] * (i + 1)
    h = p.h0
    for t in toks:
        h = torch.tanh(h @ p.W + embs[t])
    return h, vocab, embs


@ab.program
def counts_per_key(toks, p):
    counts = {}
    for t in toks:
        counts[t] = counts.get(t, 0) + 1
    h = p.h0 * 1.0
    for t in sorted(counts):
        h = h + counts[t] * p.emb[t]
    best = {}
    for t in counts:
        best.setdefault(counts[t], t)
    return torch.tanh(h @ p.U), counts, best


# --- keyword-only parameters, calls by keywords ---------------------------------------------------------------

@ab.function
def cell(h, x, p, *, gain=1.0, use_u=False):
    y = torch.tanh(x + h @ p.W) * gain
    if use_u:
        y = y @ p.U
    return y


@ab.program
def keyword_only_calls(toks, p):
    h = p.h0
    for i, t in enumerate(toks):
        if i % 3 == 0:
            h = cell(h, p.emb[t], p)
        elif i % 3 == 1:
            h = cell(h, p.emb[t], p, use_u=True)
        else:
            h = cell(x=p.emb[t], p=p, h=h, gain=0.5, use_u=i > 3)
    return cell(p=p, x=h, h=p.h0, gain=2.0)


# --- namedtuples with list fields -----------------------------------------------------------------------------

@ab.program
def namedtuple_lists(toks, p):
    h = p.h0
    states = []
    for t in toks:
        h = torch.tanh(h @ p.W + p.emb[t])
        states.append(h)
    return Encoded(states=states, last=h, n=len(toks)), Encoded([h * 2.0], h)


# --- memo hits across the iterations of a loop over children (a map loop, were the memo not followed) ----------

@ab.function
def memo_sum(node, p, memo):
    if id(node) in memo:
        return memo[id(node)]
    hs = [memo_sum(c, p, memo) for c in node.kids]
    h = p.emb[node.w]
    for x in hs:
        h = h + x
    memo[id(node)] = torch.tanh(h @ p.W)
    return memo[id(node)]


@ab.program
def dag_memo_children(root, p):
    memo = {}
    return memo_sum(root, p, memo) * 1.0, len(memo)


@ab.function
def shifted(e, p):
    return Encoded(states=[s @ p.U for s in e.states], last=e.last * 2.0, n=e.n + 1)


@ab.program
def namedtuple_fields_read(toks, p):
    e = Encoded([p.emb[t] for t in toks], p.h0, len(toks))
    f = shifted(e, p)
    g = Encoded(p.h0, [p.v])
    return f.last + torch.stack(f.states).sum(0) + g.states, f.n, g
