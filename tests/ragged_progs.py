"""Models that use lists of per-instance tensors as operands (ragged tensors, ``acrobat.analysis.ragged``).

They live in a real .py file because acrobat reads their source with ``inspect``;
lines the tests look up carry a ``# M:<key>`` marker comment.
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F

import acrobat as ab


@ab.program
def summed(toks, p):
    """sum() of a list of tensors."""
    hs = []
    for t in toks:
        hs.append(torch.tanh(p.emb[t] @ p.W))
    return sum(hs)


@ab.program
def pooled(toks, p):
    """Reductions of torch.stack(list) over dim 0."""
    hs = []
    for t in toks:
        hs.append(torch.tanh(p.emb[t] @ p.W))
    S = torch.stack(hs)
    top, arg = S.max(0)
    return S.sum(0), S.mean(dim=0), top, arg, torch.amin(S, 0), torch.logsumexp(S, dim=0), S.max(0).values


@ab.program
def attention(toks, p):
    """Attention over a variable number of states: scores, softmax over the list, weighted sum."""
    states = []
    h = p.h0
    for t in toks:
        h = torch.tanh(p.emb[t] @ p.W + h @ p.U)
        states.append(h)
    S = torch.stack(states)
    scores = S @ h
    alpha = torch.softmax(scores, dim=0)
    ctx = alpha @ S
    return torch.tanh(ctx @ p.U + h), F.log_softmax(scores, dim=0)


@ab.program
def rowwise(toks, p):
    """Row-wise operators on a stacked list, then a reduction."""
    S = torch.stack(_embed(toks, p))
    T = torch.tanh(S @ p.W + p.b) * 2.0
    return F.linear(T, p.U, p.b).sum(0), (T - S).relu().amax(0)


@ab.function
def _embed(toks, p):
    out = []
    for t in toks:
        out.append(p.emb[t])
    return out


@ab.program
def broadcast_into_list_axis(toks, p):
    """An operand as wide as the stacked list would broadcast against its list axis: an error, not a guess."""
    S = torch.stack(_embed(toks, p))
    M = p.emb[0:2]  # (2, H): as many dimensions as S
    return (S + M).sum(0)  # M:broadcast


@ab.program
def reduce_along_rows(toks, p):
    """A reduction that is not over the list axis: rejected with the fix."""
    S = torch.stack(_embed(toks, p))
    return S.sum(1)  # M:along_rows


@ab.program
def empty_list(toks, p):
    """sum() of an empty list of tensors: an InstanceError naming the instance."""
    hs = []
    for t in toks:
        hs.append(p.emb[t])
    return sum(hs)  # M:empty


@ab.program
def reduce_along_rows_fixed(toks, p):
    """The fix the error names: a loop over the list."""
    out = []
    for x in _embed(toks, p):
        out.append(x.sum(0))
    return torch.stack(out)


@ab.program
def pointer(toks, p):
    """A pointer: the position of the best-scoring item, read by host code (runs on fibers)."""
    S = torch.stack(_embed(toks, p))
    k = int(torch.argmax(S @ p.h0))
    return toks[k], S[k]


@ab.program
def flat_argmax(toks, p):
    """argmax without dim of 2-D rows flattens: an error at run time, not a per-column guess."""
    S = torch.stack(_embed(toks, p))
    return torch.argmax(S)  # M:flat


@ab.program
def concatenated(toks, p):
    """torch.cat of a per-instance list: a fold of two-operand cats (acrobat.analysis.folds)."""
    return torch.cat(_embed(toks, p))


@ab.program
def mismatched_ranks(toks, p):
    """(k, H) * (k,): PyTorch broadcasts the list axis of one against the rows of the other; never row scaling."""
    S = torch.stack(_embed(toks, p))
    w = S @ p.h0
    return (S * w).sum(0)  # M:ranks


@ab.program
def module_rows(toks, p):
    """Modules applied to a stacked list act row by row (nn.Linear, activations, LayerNorm, Sequential of them)."""
    S = torch.stack(_embed(toks, p))
    return p.head(S).sum(0), p.norm(S).amax(0)


@ab.program
def module_not_rowwise(toks, p):
    """A module that mixes rows (softmax over dim 0): rejected when the run starts, never applied row by row."""
    S = torch.stack(_embed(toks, p))
    return p.mix(S).sum(0)  # M:mix


# -- issue 18 §2: negative dims of a stacked list, torch.cat of unit-axis items (tests/test_ragged_dims.py) --------


@ab.program
def scalar_rows(toks, p):
    """Reductions and normalizations over dim=-1 of a stack of 0-D items (dot products): the list axis."""
    S = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    top = S.max(-1)
    low = S.min(dim=-1, keepdim=True)
    return (torch.softmax(S, dim=-1), F.log_softmax(S * 2.0, -1), S.sum(-1), S.mean(dim=-1, keepdim=True),
            torch.amax(S, -1), S.amin(-1, True), torch.logsumexp(S, -1), top.values, top.indices, low.values,
            low.indices, S.argmax(-1))


@ab.program
def vector_rows(toks, p):
    """softmax over dim=-1 of a stack of 1-D items normalizes each item; over dim=-2 the list; keepdim over dim 0."""
    V = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    return V.softmax(-1), torch.log_softmax(V, dim=-2), V.sum(0, keepdim=True), torch.max(V, 0, True).values


@ab.program
def cat_unsqueezed(toks, p):
    """torch.cat of unit-axis items, written four ways, is torch.stack of the items."""
    A = torch.cat([p.emb[t].unsqueeze(0) for t in toks])
    B = torch.cat([p.emb[t][None] for t in toks], dim=0)
    C = torch.cat([torch.unsqueeze(p.emb[t] @ p.W, 0) for t in toks], 0)
    D = torch.cat([(p.emb[t] @ p.W).view(1, -1) for t in toks])
    E = torch.cat([p.emb[t].reshape(1, 2, 2) for t in toks])
    return A.max(dim=0).values, B.sum(0), torch.softmax(C @ p.h0, dim=-1), D, E.mean(0)


@ab.program
def full_reductions(toks, p):
    """Reductions without dim of stacked lists of 0-D, 1-D and 2-D items: over every element of the list."""
    L = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    V = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    M = torch.stack([torch.outer(p.emb[t], p.h0) for t in toks])
    return (L.mean(), L.sum(), torch.max(L), V.sum(), V.mean(), torch.mean(V), V.max(), V.amax(), torch.sum(M),
            M.mean(), torch.min(M), M.amin(), torch.amax(M), (V * 2.0).min())


@ab.program
def kept_reductions(toks, p):
    """Reductions kept as a (1, H) row, broadcast back against the list: ``S - S.mean(0, keepdim=True)``; of 0-D
    rows, a (1,) one."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    z = (S - S.mean(0, keepdim=True)) / S.amax(dim=0, keepdim=True)
    s = torch.stack([x.sum() for x in S])
    return z.sum(0), (S * S.sum(0, keepdim=True)).max(0).values, (S.amin(0, keepdim=True) + S)[-1], \
        (s - s.logsumexp(0, keepdim=True)).sum()


@ab.program
def columns(toks, p):
    """Indexing within every row: ``S[:, j]`` by a constant and a host int, ``S[:, 1:]``, ``S[..., :k]``, a new axis."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    j = len(toks) % 4
    return S[:, 0].sum(), (S[:, j] * 2).max(0).values, S[:, 1:].sum(0), S[..., :2].amin(0), S[:, None, 2:].mean(0)


@ab.program
def ellipsis_into_the_list_axis(toks, p):
    """``S[..., 0]`` of 0-D rows indexes the list itself: the static tier's limit, never a guess."""
    s = torch.stack([(p.emb[t] @ p.W).sum() for t in toks])
    return s[..., 0]  # M:ellipsis_list_axis


@ab.program
def column_by_tensor(toks, p):
    """A per-instance tensor index within the rows: rejected."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    return S[:, S[0].argmax()]  # M:column_by_tensor


@ab.program
def cat_of_a_list_variable(toks, p):
    """torch.cat of unit-axis items held in a variable that only the cat (and len) reads: a comprehension's list,
    or a list filled by appends."""
    hs = [(p.emb[t] @ p.W).view(1, -1) for t in toks]
    gs = []
    for t in toks:
        gs.append(torch.tanh(p.emb[t]).reshape(1, 4))
        gs.append(p.emb[t][None])
    H = torch.cat(hs, 0)
    return H.mean(0).squeeze(), torch.cat(gs, dim=0).amax(0) * len(gs), torch.softmax(H @ p.h0, dim=0)


@ab.program
def cat_of_a_list_read_twice(toks, p):
    """The list is read elsewhere too (its first item, with the unit axis): no stack rewrite; a fold of cats."""
    hs = [p.emb[t][None] for t in toks]
    return torch.cat(hs).sum(0), hs[0]  # M:cat_read_twice


@ab.program
def neg_dim_unknown_rank(toks, p):
    """dim=-1 of a reduction whose items' rank the text does not fix: rejected (it may be an axis of each item)."""
    V = torch.stack([torch.tanh(p.emb[t]) for t in toks])
    return V.sum(-1)  # M:unknown_rank


@ab.program
def neg_dim_of_each_item(toks, p):
    """dim=-1 of a stack of 1-D items (the text fixes their rank): reduces each item, not the list: rejected."""
    S = torch.stack([torch.stack([p.emb[t].sum(), p.emb[t].amax()]) for t in toks])
    return S.sum(-1)  # M:each_item


@ab.program
def neg_dim_out_of_range(toks, p):
    """dim=-2 of a stack of 0-D items: out of range (PyTorch raises IndexError): rejected."""
    S = torch.stack([p.emb[t].sum() for t in toks])
    return S.logsumexp(dim=-2)  # M:out_of_range


@ab.program
def cat_along_rows(toks, p):
    """torch.cat of unit-axis items along dim 1 is no stack: a fold of cats (a per-instance result length)."""
    return torch.cat([p.emb[t][None] for t in toks], dim=1).sum(0)  # M:cat_rows


@ab.program
def cat_returned(toks, p):
    """torch.cat of unsqueezed items, returned as it is."""
    return torch.cat([torch.tanh(p.emb[t]).unsqueeze(0) for t in toks])


@ab.program
def cut_by_length(toks, p):
    """A shared weight cut by the instance's length (``p.emb[:len(toks)]``, learned positions): a stacked list."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks]) + p.emb[:len(toks)]  # M:cut
    return torch.softmax(S, dim=0).sum(0), S.mean(0)


@ab.program
def cut_with_bounds_and_step(toks, p):
    """Cuts by instance data with any bounds: a lower bound and a step, a negative lower bound."""
    a = p.emb[toks[0] % 3:len(toks) + 3:2]
    b = torch.tanh(p.emb[-len(toks):] @ p.W)
    return a.sum(0), torch.amax(b, 0)


@ab.program
def cut_of_an_instance_tensor(toks, p):
    """A per-instance tensor (4, 4) cut by instance data: its first rows, as many as the instance says."""
    table = torch.outer(torch.tanh(p.emb[toks[0]]), p.W[0]) + p.W
    return table[:len(toks) % 4 + 1].sum(0)


@ab.program
def empty_cut(toks, p):
    """A cut that keeps no rows for an instance of one token."""
    return p.emb[1:len(toks)].sum(0)  # M:empty_cut
