"""Models that apply operators within the rows of a stacked list (``acrobat.analysis.rowops``, issue 18 §2).

They live in a real .py file because acrobat reads their source with ``inspect``;
lines the tests look up carry a ``# M:<key>`` marker comment. Parameters:
``tests.test_tdc.P(hidden=4)`` (``emb`` (V, 4), ``W`` (4, 4), ``b``/``h0`` (4,)) with ``heads = 2``.
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F

import acrobat as ab


@ab.program
def pointwise(toks, p):
    """Pointwise operators on a stack of 1-D rows: torch.where (stacked or dense branches, scalars), *_like,
    masked_fill with a stacked mask, clamp/clip, pow, rounding, maximum/minimum, logical ops, unary operators."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    pos = S > 0
    a = torch.where(pos, S, S * 2.0) + torch.where(pos, p.h0, S) + torch.where(S < 0.1, 1.0, 0.0)
    b = torch.where(pos, S, 0.0) * torch.ones_like(S) + torch.full_like(S, 0.5) - torch.zeros_like(S)
    c = S.masked_fill(~pos, -1.0) + torch.clamp(S, -0.5, 0.5) + S.clamp(min=0.1) + S.clip(-0.3, 0.3)
    d = S.pow(2) + torch.pow(S, 3) + S ** 2 + torch.floor(S * 4.0) + (S * 3.0).round() + S.sign()
    e = torch.maximum(S, p.h0) + torch.minimum(S, S * 0.5) + (-S) + S.abs().add(1.0).rsqrt() + S.mul(2.0)
    f = (pos & (S < 0.5)).float() + torch.logical_or(pos, S < -0.5).float() + (pos | ~pos).float()
    return a, b, c, d, e, f


@ab.program
def kept_dtypes(toks, p):
    """Operators that name the result's dtype, or copy a stacked list: not PyTorch's promotion of operands."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    return (torch.zeros_like(S, dtype=torch.float64), S.to(torch.float64), S.type_as(torch.tensor([1])),
            S.clone(), S.contiguous(), S.detach(), F.dropout(S, 0.5, training=False))


@ab.program
def scalar_rows(toks, p):
    """Pointwise operators on a stack of 0-D rows (dot products) with dense 0-D operands."""
    s = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return torch.where(s > 0, s, p.b[0]), torch.maximum(s, p.b[1]), s.clamp(max=p.b[2]), torch.sign(s)


@ab.program
def matrix_rows(toks, p):
    """Operators along the axes of 2-D rows, written as on the stacked (L, 2, 2) tensor: normalize, layer_norm,
    narrow, transpose, permute, flatten, expand, repeat, softmax over the last axis."""
    M = torch.stack([(p.emb[t] @ p.W).view(2, 2) for t in toks])
    return (F.normalize(M, dim=-1), F.normalize(M, dim=1), F.normalize(M, 1.5, 2), F.layer_norm(M, (2,)),
            F.layer_norm(M, (2, 2)),
            M.narrow(2, 1, 1), M.transpose(1, 2), M.transpose(-2, -1), M.permute(0, 2, 1), M.flatten(1),
            torch.flatten(M, start_dim=1), M.unsqueeze(1).expand(-1, 3, -1, -1), M.repeat(1, 2, 3),
            F.softmax(M, dim=-1) * M.transpose(1, 2))


@ab.program
def contractions(toks, p):
    """torch.einsum with the list axis' letter first in the stacked operands and the output: a product per row."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    M = torch.stack([p.emb[t].view(2, 2) for t in toks])
    return (torch.einsum("ld,de->le", S, p.W), torch.einsum("ld,ld->l", S, S * 2.0),
            torch.einsum("lij,j->li", M, p.h0[:2]), torch.einsum("d, kd -> k", p.h0, p.W) * 1.0)


@ab.program
def joins(toks, p):
    """torch.cat / torch.stack of a list display of stacked lists of one length along a row axis."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    s = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return (torch.cat([S, S * 2.0], dim=1), torch.cat((S, torch.relu(S)), -1), torch.stack([S, S - 1.0], dim=1),
            torch.stack((S, S), -1), torch.stack([s, s * s], 1), torch.stack([S, -S], -2))


@ab.program
def parts(toks, p):
    """chunk and split along a row axis: a tuple of stacked lists (unpacked, indexed, reduced over the list)."""
    S = torch.stack([p.emb[t] @ p.W for t in toks])
    q, k = S.chunk(2, dim=-1)
    u, v = torch.chunk(S, 2, 1)
    a, b = S.split([1, 3], dim=1)
    return (q * k).sum(0), u - v, a * 2.0, b.amax(0), S.chunk(2, dim=1)[1]


@ab.program
def token_states(tokens, p):
    """The tail of a Transformer encoder over a sentence (examples/transformer_encoder.py lines 67-71):
    embeddings of the tokens, layer norm with weights, a feed-forward, and a mean pool that skips padding
    tokens (id 0) with torch.where and zeros_like."""
    x = F.embedding(torch.tensor(tokens), p.emb)
    x = F.layer_norm(x + torch.relu(x @ p.W), (4,), p.h0, p.b)
    q, k = (x @ p.W).chunk(2, dim=-1)
    L = x.shape[0]
    h = (q * k).view(L, p.heads, 1)
    keep = (torch.tensor(tokens) != 0).unsqueeze(-1)
    pooled = torch.where(keep, x, torch.zeros_like(x)).sum(0) / keep.sum().clamp(min=1)
    return pooled, h, x


@ab.program
def random_rows(toks, p):
    """Random operators within the rows: each row draws its own numbers (``torch.func.vmap(randomness=
    "different")``), as the plain stacked tensor's elements are each drawn."""
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in toks])
    return torch.rand_like(S), F.dropout(S, 0.5, training=True), S


# -- rejected: anything that acts on the list axis -------------------------------------------------------------


@ab.program
def chunk_list_axis(toks, p):
    S = torch.stack([p.emb[t] for t in toks])
    a, b = S.chunk(2)  # M:chunk0
    return a


@ab.program
def transpose_list_axis(toks, p):
    M = torch.stack([p.emb[t].view(2, 2) for t in toks])
    return M.transpose(0, 1)  # M:transpose0


@ab.program
def flatten_list_axis(toks, p):
    M = torch.stack([p.emb[t].view(2, 2) for t in toks])
    return M.flatten()  # M:flatten0


@ab.program
def permute_list_axis(toks, p):
    M = torch.stack([p.emb[t].view(2, 2) for t in toks])
    return M.permute(1, 0, 2)  # M:permute0


@ab.program
def expand_list_axis(toks, p):
    S = torch.stack([p.emb[t] for t in toks])
    return S.expand(3, -1)  # M:expand0


@ab.program
def split_by_size(toks, p):
    S = torch.stack([p.emb[t] for t in toks])
    return S.split(2, dim=1)  # M:split_size


@ab.program
def normalize_into_the_list_axis(toks, p):
    """F.normalize(dim=-1) of 0-D rows normalizes across the list in PyTorch: the static tier's limit."""
    s = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return F.normalize(s, dim=-1)  # M:normalize_list


@ab.program
def expand_before_the_list_axis(toks, p):
    """expand(-1, 4) of 0-D rows puts a new axis in front of the list axis in PyTorch: the static tier's limit."""
    s = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return s.expand(-1, 4)  # M:expand_front


@ab.program
def einsum_across_rows(toks, p):
    S = torch.stack([p.emb[t] for t in toks])
    return torch.einsum("ld,md->lm", S, S)  # M:einsum_rows


@ab.program
def cat_with_a_dense_item(toks, p):
    S = torch.stack([p.emb[t] for t in toks])
    return torch.cat([S, p.emb[0:1]], dim=1)  # M:cat_dense


@ab.program
def stack_before_the_list_axis(toks, p):
    """torch.stack(dim=-2) of 0-D rows puts the new axis in front of the list axis: the static tier's limit."""
    s = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return torch.stack([s, s * 2.0], dim=-2)  # M:stack_front


@ab.program
def normalize_default_dim_of_scalars(toks, p):
    """F.normalize's default dim=1 of a stack of 0-D rows is out of range in PyTorch (an IndexError), not dim 0 of
    each 0-D row (which PyTorch would take)."""
    s = torch.stack([torch.dot(p.emb[t], p.h0) for t in toks])
    return F.normalize(s)  # M:normalize_default
