"""Models that rank a stacked list whose length differs per instance: topk, sort, argsort (issue 18 §2).

An instance is ``(toks, k)``: token ids and the host int ``k`` of its topk.
They live in a real .py file because acrobat reads their source with
``inspect``; lines the tests look up carry a ``# M:<key>`` marker comment.
"""

# ruff: noqa
from __future__ import annotations

import torch

import acrobat as ab


@ab.program
def ranked_scalars(inst, p):
    """Rankings of a stack of 0-D items (dot products; the rank is not known from the text: dim=-1 is read at run
    time), their results read by host code and used to pick items."""
    toks, k = inst
    xs = [torch.dot(p.emb[t], p.h0) for t in toks]
    S = torch.stack(xs)
    top = torch.topk(S, k)
    low_values, low_indices = S.topk(k, largest=False, sorted=True)
    down = torch.sort(S, descending=True)
    picked = top.indices.tolist()
    chosen = S.sum(0) * 0.0
    for i in picked:
        chosen = chosen + xs[i]
    return (top.values, top.indices, low_values, low_indices, down.values, down.indices, S.argsort(dim=0),
            torch.topk(S * 2.0, k, 0).values, chosen, S.tolist(), picked)


@ab.program
def ranked_vectors(inst, p):
    """Rankings of a stack of 1-D items: over the list axis per column (dim=0, dim=-2 where the rank is known),
    and sort within each row (dim=-1, an axis of every item)."""
    toks, k = inst
    V = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    top = V.topk(k, dim=0)
    by_list = torch.sort(V, 0, True)
    return (top.values, top.indices, by_list.values, by_list.indices, torch.argsort(V, dim=-2),
            V.sort(-1).values, V.sort(dim=-1).indices, V.argsort(-1, descending=True))


@ab.program
def stable_ties(inst, p):
    """sort(stable=True) of a list with ties (items that are the same weight): PyTorch's order, exactly."""
    toks, k = inst
    S = torch.stack([p.h0[t % 2] * 1.0 for t in toks])
    up = torch.sort(S, stable=True)
    down = torch.sort(S, dim=0, descending=True, stable=True)
    return up.values, up.indices, down.values, down.indices, torch.argsort(S, stable=True)


@ab.program
def topk_ties(inst, p):
    """topk of a list with ties (PyTorch leaves the order of tied indices unspecified)."""
    toks, k = inst
    S = torch.stack([p.h0[t % 2] * 1.0 for t in toks])
    top, low = torch.topk(S, k), S.topk(k, largest=False)
    return top.values, top.indices, low.values, low.indices


@ab.program
def topk_too_many(inst, p):
    """topk with k larger than the list: PyTorch raises, and so does the batched run, naming the instance."""
    toks, k = inst
    S = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return torch.topk(S, k + 1).values  # M:too_many


@ab.program
def topk_within_rows(inst, p):
    """topk over dim=-1 of a stack of 1-D items whose rank the text does not fix: picks within each item."""
    toks, k = inst
    V = torch.stack([torch.tanh(p.emb[t]) for t in toks])
    return torch.topk(V, 1).values  # M:within_rows


@ab.program
def topk_within_known_rows(inst, p):
    """topk over dim=-1 of a stack of items the text makes 1-D: rejected when compiled."""
    toks, k = inst
    V = torch.stack([torch.stack([p.emb[t].sum(), p.emb[t].amax()]) for t in toks])
    return V.topk(1, -1).values  # M:within_known


@ab.program
def topk_unsorted(inst, p):
    """topk(sorted=False): PyTorch's order is unspecified, so acrobat refuses it."""
    toks, k = inst
    S = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return torch.topk(S, k, sorted=False).values  # M:unsorted


@ab.program
def topk_tensor_k(inst, p):
    """topk with a tensor k: acrobat wants a host int."""
    toks, k = inst
    S = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return torch.topk(S, torch.tensor(k)).values  # M:tensor_k


@ab.program
def sort_positive_dim(inst, p):
    """sort over dim=1 of a stacked list: not the list axis, and not a negative dim acrobat can read."""
    toks, k = inst
    V = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    return torch.sort(V, 1).values  # M:positive_dim
