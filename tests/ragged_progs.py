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
    """torch.cat of a per-instance list: rejected with a pointer to torch.stack."""
    return torch.cat(_embed(toks, p))  # M:cat


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
