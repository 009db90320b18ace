"""Small programs for tests/test_hunt9.py: padded functions (a helper given a stacked list whose body moves or
contracts the list axis) as researchers write them, with the operators where padding could leak (reductions of
bools and ints, several dims, keepdim, max/min indices, where/masked_fill, views, indexing, chunk/split,
dtype promotion, results mixing stacked lists and dense values, two lists, calls in loops and recursion,
masked scores and their gradients), and operators within rows, outlined statements, ``f(*pair)``/``map``/
``.new().fill_()``/``.data`` and ``f(x, *hs)``.

They live in a real .py file because acrobat reads their source with ``inspect``. ``HP`` holds the shared
parameters (``emb``: an ``nn.Embedding(VOCAB, H)``, ``q``/``k``/``v``: ``nn.Linear(H, H)``, ``pos``: 16 x H,
``a``/``b``: H, ``W``: H x H, ``bias2``: 1 x H, ``temp``: a 0-d parameter, ``out``: ``nn.Linear(H, 3)``,
``emb_n``/``emb_f``: embeddings with ``max_norm=1.0`` and ``scale_grad_by_freq=True``, ``heads``/``dh``: 2 and
H // 2). An instance is a token list (ids below VOCAB) or a ``Node`` tree.
"""

# ruff: noqa
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

H = 8
VOCAB = 12


class HP(nn.Module):
    """Shared parameters (see the module docstring)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(VOCAB, H)
        self.q = nn.Linear(H, H)
        self.k = nn.Linear(H, H)
        self.v = nn.Linear(H, H)
        self.out = nn.Linear(H, 3)
        self.pos = nn.Parameter(0.3 * torch.randn(16, H))
        self.a = nn.Parameter(torch.randn(H))
        self.b = nn.Parameter(torch.randn(H))
        self.W = nn.Parameter(0.5 * torch.randn(H, H))
        self.bias2 = nn.Parameter(torch.randn(1, H))
        self.temp = nn.Parameter(torch.tensor(1.5))
        self.emb_n = nn.Embedding(VOCAB, H, max_norm=1.0)
        self.emb_f = nn.Embedding(VOCAB, H, scale_grad_by_freq=True)
        self.heads = 2
        self.dh = H // 2


class Node:
    """A tree node: a word id ``w`` and children ``kids``."""

    def __init__(self, w: int, kids: list):
        self.w, self.kids = w, kids


def _embed(tokens, p):
    return p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]


# -- padded functions: reductions ------------------------------------------------------------------------------

def any_hot(x, p):
    """Whether any token's score is high: a max of bools over the list axis."""
    hot = (x @ x.T).softmax(-1) @ p.v(x) @ p.a > 0.3
    return hot.amax(0), hot.max(0).indices, hot.float().sum()


@ab.program
def bool_any(tokens, p):
    flag, where, n = any_hot(_embed(tokens, p), p)
    return torch.where(flag, p.out.bias, -p.out.bias), where, n


def all_low(x):
    """Whether every token's score is low: a min of bools, a sum of bools, an int max."""
    low = (x @ x.T).softmax(-1).amax(-1) < 0.9
    ids = (x.sum(-1) * 10).long()
    return low.amin(0), low.sum(0), low.min(0).values, ids.amax(0)


@ab.program
def bool_all(tokens, p):
    return all_low(_embed(tokens, p))


def several_dims(x, p):
    att = (p.q(x) @ p.k(x).T).softmax(-1)
    h = att @ x
    return (h.sum((0, 1), keepdim=True), h.mean((0, -1)), h.amax((0, 1)), h.amin(dim=(-2, -1), keepdim=True),
            torch.logsumexp(h, dim=0), h.mean(-1))


@ab.program
def reductions_several_dims(tokens, p):
    a, b, c, d, e, f = several_dims(_embed(tokens, p), p)
    return a, b, c, d, e, f.sum(0)


def ties(x):
    att = (x @ x.T).softmax(-1)
    r = torch.round(att @ x)  # many ties in each column
    mx, imx = r.max(0)
    mn, imn = torch.min(r, dim=0, keepdim=True)
    return mx, imx, mn, imn


@ab.program
def max_min_ties(tokens, p):
    return ties(_embed(tokens, p) * 3)


def masked_scores(x, keep, p):
    scores = (p.q(x) @ p.k(x).mT) / math.sqrt(H)
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ p.v(x)


@ab.program
def masked_inf(tokens, p):
    """A key mask of -inf (token 0 is padding in the user's data); every instance keeps at least one token."""
    x = _embed(tokens, p)
    keep = torch.tensor(tokens) != 0
    return masked_scores(x, keep, p).sum(0)


def lse_pool(x, p):
    s = p.q(x) @ p.k(x).T
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return torch.logsumexp(s, dim=-1) @ p.v(x) + (e @ x).sum(0) * 0.1


@ab.program
def logsumexp_grad(tokens, p):
    return lse_pool(_embed(tokens, p), p)


# -- padded functions: pointwise, dtypes -----------------------------------------------------------------------

def gated(x, p):
    att = (x @ x.T).softmax(-1) @ x
    g = torch.where(att > 0, p.a, p.b)  # a padded cond, dense branches
    band = (att > -0.5) & (att < 0.5)
    return (g * att).masked_fill(~band, 0.0) + p.bias2


@ab.program
def where_dense_branches(tokens, p):
    return gated(_embed(tokens, p), p)


def promoted(x, p):
    s = x.mean()  # a per-instance 0-d value (float64 in the float64 model)
    att = (x.float() @ x.float().T).softmax(-1)  # float32 scores
    return att @ x.float() * s, (x > 0).sum() + torch.tensor(1, dtype=torch.int32)


@ab.program
def zero_dim_promotion(tokens, p):
    h, n = promoted(_embed(tokens, p), p)
    return h, n


def int_tokens(ids, x):
    """Token ids (int64) as a stacked list next to their embeddings."""
    att = (x @ x.T).softmax(-1)
    heavy = (ids * 2 + 1) % 5
    return att @ (x * heavy.unsqueeze(-1)), ids.sum(), (ids > 3).sum(0)


@ab.program
def int_list(tokens, p):
    ids = torch.tensor(tokens)
    return int_tokens(ids, p.emb(ids))


def isinstance_branch(x, extra):
    att = (x @ x.T).softmax(-1) @ x
    if isinstance(extra, torch.Tensor):
        att = att + extra
    return att.sum(0)


def is_dense(x):
    return torch.is_tensor(x)


def calls_a_type_check(x):
    """A type read in a function it calls."""
    return (x @ x.T).softmax(-1) @ x if is_dense(x) else x


@ab.program
def tensor_check(tokens, p):
    x = _embed(tokens, p)
    return isinstance_branch(x, p.out.weight[0] * len(tokens))


# -- padded functions: shapes and indexing ---------------------------------------------------------------------

def gram(x, p):
    g = x.T @ x  # contracts the list axis
    h = x.mT @ (x @ p.W)
    y = x.permute(1, 0) @ x.softmax(0)
    return g + h + y


@ab.program
def transposed_contraction(tokens, p):
    return gram(_embed(tokens, p), p)


def split_heads(x, p):
    L = x.shape[0]
    q = p.q(x).view(L, p.heads, p.dh).transpose(0, 1)
    k = p.k(x).reshape(L, p.heads, -1).permute(1, 2, 0)
    att = (q @ k).softmax(-1)
    v = p.v(x).view(L, p.heads, p.dh).transpose(0, 1)
    return (att @ v).transpose(0, 1).reshape(L, H), att.sum(0)


@ab.program
def heads_views(tokens, p):
    h, att = split_heads(_embed(tokens, p), p)
    return h, att.sum(-1)


def indexed(x):
    att = (x @ x.T).softmax(-1) @ x
    return att[:, -1], att[..., ::3], att[:, None, 1:4], att[..., -2:], att[:, 2]


@ab.program
def getitem_forms(tokens, p):
    a, b, c, d, e = indexed(_embed(tokens, p))
    return a, b, c.sum(0), d, e.mean(0)


def pieces(x):
    att = (x @ x.T).softmax(-1) @ x
    a, b, c = att.chunk(3, -1)  # 3, 3, 2
    d, e = att.split([5, 3], dim=1)
    f, g = torch.split(att, 4, -1)
    return a * 2 + b, c.sum(-1), d.sum(0), e, f - g


@ab.program
def chunk_split(tokens, p):
    return pieces(_embed(tokens, p))


def fresh_buffer(x, p):
    z = x.new_zeros(x.shape)
    z = z + (x @ x.T).softmax(-1) @ x
    o = x.new_ones(x.shape[0], 2)
    return z * 2, o.sum(0)


@ab.program
def new_zeros_shape(tokens, p):
    z, o = fresh_buffer(_embed(tokens, p), p)
    return z, o


def accumulate(x, h):
    h += (x @ x.T).softmax(-1).sum(0) @ x  # in place on the caller's tensor
    return h * 2


@ab.program
def inplace_on_argument(tokens, p):
    h = p.emb.weight[tokens[0]] * 1.0  # the instance's own tensor
    y = accumulate(_embed(tokens, p), h)
    return y, h


# -- padded functions: results, several lists, calls in loops and recursion ------------------------------------

def mixed_result(x, p):
    h = (x @ x.T).softmax(-1) @ x
    return h, h.sum(-2), x, h.amax(dim=0, keepdim=True), torch.sum(h, 0)


@ab.program
def tuple_of_forms(tokens, p):
    return mixed_result(_embed(tokens, p), p)


def pair_attention(x, y, p):
    return (p.q(x) @ p.k(y).T).softmax(-1) @ y + (x + y) * 0.5


@ab.program
def two_lists_equal(tokens, p):
    x = _embed(tokens, p)
    y = p.emb(torch.tensor(tokens[::-1]))
    return pair_attention(x, y, p)


def cross(x, y, p):
    return (p.q(y) @ p.k(x).T).softmax(-1) @ x


@ab.program
def two_lists_different(tokens, p):
    x = _embed(tokens, p)
    y = p.emb(torch.tensor(tokens[: len(tokens) // 2 + 1]))
    return cross(x, y, p), cross(y, x, p).sum(0)


def layer(x, p):
    return x + (p.q(x) @ p.k(x).T / math.sqrt(H)).softmax(-1) @ p.v(x)


@ab.program
def called_in_loop(tokens, p):
    x = _embed(tokens, p)
    for _ in range(3):
        x = layer(x, p)
    return x, layer(x[:1], p)


def kid_attention(hs, p):
    att = (p.q(hs) @ p.k(hs).T).softmax(-1)
    return (att @ p.v(hs)).amax(0)


def tree_enc(node, p):
    h = p.emb.weight[node.w]
    if node.kids:
        hs = [tree_enc(c, p) for c in node.kids]
        h = torch.tanh(h + kid_attention(torch.stack(hs), p))
    return h


@ab.program
def recursion_over_children(tree, p):
    return tree_enc(tree, p)


# -- rows, outlining, ports ------------------------------------------------------------------------------------

@ab.program
def rows_broadcast(tokens, p):
    x = _embed(tokens, p)
    s = x @ p.a  # (L,)
    y = (x + p.bias2).view(-1, p.heads, p.dh).sum(-1)
    z = x.float() * p.temp
    return y, s.float() * p.temp, z, torch.full_like(s, 2, dtype=torch.int32), x.expand(-1, H) * 1


@ab.program
def rows_cat_and_split(tokens, p):
    x = _embed(tokens, p)
    y = torch.cat([x, x * 2], dim=1)
    a, b = y.chunk(2, dim=-1)
    c, d = y.split([3, 2 * H - 3], dim=1)
    e = torch.einsum("lh,h->l", x, p.a)
    return a - b, c.sum(-1), d.repeat(1, 2), e.masked_fill(e > 0, 0.0)


@ab.program
def outlined_loop(tokens, p):
    h = p.a * 0
    best = None
    for i, t in enumerate(tokens):
        if t == 0:
            continue
        h = torch.tanh(p.W @ h + p.emb.weight[t])
        if h.sum().item() > 2.0:
            best = h
            break
    if best is None:
        best = h
    return best, h


@ab.program
def ports_constructs(tokens, p):
    pair = (p.emb.weight[tokens[0]], p.a)
    y = torch.add(*pair)
    hs = list(map(lambda t: p.emb.weight[t] * 2, tokens))
    z = pair[0].new(H).fill_(len(tokens))
    d = p.a.data * 3
    return y, sum(hs), z, d


def rest_sum(x, *hs):
    out = x
    for h in hs:
        out = out + h
    return out


@ab.program
def star_rest(tokens, p):
    hs = [p.emb.weight[t] for t in tokens]
    return rest_sum(p.a, *hs)


@ab.program
def rows_0d_promotion(tokens, p):
    """Stacked lists of 0-d rows (``x @ p.a``: ``(L,)``) with a 0-d parameter and a 0-d int."""
    s = _embed(tokens, p) @ p.a
    return s.float() * p.temp, (s > 0).int() + torch.tensor(1), s * 2


def attend_ids(ids, p):
    x = p.emb_n(ids)
    return (x @ x.T).softmax(-1) @ x


@ab.program
def embedding_max_norm(tokens, p):
    """``nn.Embedding(max_norm=1.0)`` renormalizes the rows it looks up, in place: the model's state."""
    return attend_ids(torch.tensor(tokens), p).sum(0), p.emb_n(torch.tensor(tokens[:1]))


@ab.program
def embedding_grad_by_freq(tokens, p):
    """``nn.Embedding(scale_grad_by_freq=True)``: each row's gradient divided by its count in the instance."""
    x = p.emb_f(torch.tensor(tokens))
    return torch.tanh(x @ p.W).sum(0)


@ab.program
def functional_grad_by_freq(tokens, p):
    """``F.embedding(ids, W, scale_grad_by_freq=True)`` written out: the same counts within the instance."""
    x = F.embedding(torch.tensor(tokens), p.emb_f.weight, scale_grad_by_freq=True)
    return torch.tanh(x @ p.W).sum(0)


def reduced_every_way(x, p):
    """Reductions over several dims, keepdim, means over the list axis in another place, sums of bools, ties."""
    h = (p.q(x) @ p.k(x).T).softmax(-1) @ x  # (L, H)
    a = h.sum((0, 1), keepdim=True)
    d = h.amin(dim=(-2, -1), keepdim=True)
    m = h.T.mean(1)  # the list axis as dim 1
    r = h.clamp(-0.2, 0.2)  # ties
    mx, imx = r.max(0)
    mn, imn = torch.min(r, dim=0, keepdim=True)
    ninf = torch.full_like(h, float("-inf")).max(0)
    return (a.sum(0), h.mean((0, -1)).sum() + h.amax((0, 1)).amax(), d.sum(0), torch.logsumexp(h, dim=0),
            h.mean(-1).sum(0), (h > 0).sum(), m.amax(0), mx, imx.sum(0), mn.sum(0), imn.sum(0), ninf.indices.sum(0),
            ninf.values.sum(0))


@ab.program
def reductions_dense(tokens, p):
    return reduced_every_way(_embed(tokens, p), p)


@ab.program
def outlined_list_writes(tokens, p):
    """A loop reading a tensor's value that appends to a list made before it, a variable bound on some paths,
    names shadowing builtins, a nested def."""
    hs = []
    h = p.a * 0
    found = -1
    for i, t in enumerate(tokens):
        h = torch.tanh(p.W @ h + p.emb.weight[t])
        if h.sum().item() > 1.0:
            hs.append(h * 2)
            found = i
            continue
        hs.append(h)
        if h.max().item() > 0.9:
            break
    sum = torch.stack(hs).sum(0)

    def scale(v):
        return v * len(hs)

    return scale(sum), found, len(hs)


@ab.program
def outlined_accumulators(tokens, p):
    total = p.b * 0
    n = 0
    for t in tokens:
        v = p.emb.weight[t]
        if v.mean().item() < 0:
            total = total - v
            n += 1
        else:
            total = total + v * 0.5
    max = total.max()
    return total / (n + 1), max, n


def heads_loop(x, p, t):
    """A Python loop over the heads (a dim that is not the list axis) and ``sum`` of a list of values; ``t``: a
    per-instance 0-d tensor."""
    L = x.shape[0]
    qs = p.q(x).view(L, p.heads, p.dh).transpose(0, 1)
    outs = []
    for q in qs:
        outs.append((q @ q.T * t).softmax(-1) @ q)
    return sum(outs) * len(outs), (qs.amax(1) * t).sum(0)


@ab.program
def loop_over_heads(tokens, p):
    x = _embed(tokens, p)
    t = p.temp * len(tokens)
    return heads_loop(x, p, t)
