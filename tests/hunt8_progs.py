"""Small programs for tests/test_hunt8.py: families earlier hunts did not cover, written as researchers write them
(trees with parent pointers, DAGs with shared children memoized per instance, recursion returning tuples, early
returns inside loops, ``while`` loops with tensor conditions, ``zip``/``enumerate``/``reversed`` over children,
``max``/``sorted`` with keys, in-place writes into fresh tensors, ``no_grad``/``detach``, mixed dtypes, module
containers and cells, instances that are dicts/dataclasses/namedtuples, results that are dicts, None, host numbers
and nested lists, default and keyword arguments, module and class constants).

They live in a real .py file because acrobat reads their source with ``inspect``. ``HP`` holds the shared
parameters (``emb``: VOCAB x H, ``W``: H x H, ``W2``: 2H x H, ``v``: H, ``h0``: H, ``mlp``: an ``nn.Sequential``,
``layers``: an ``nn.ModuleList`` of three ``nn.Linear(H, H)``, ``pemb``: an ``nn.Embedding`` with
``padding_idx=0``, ``drop``: an ``nn.Dropout`` (the model is in eval mode), ``gru``/``lstm``: ``nn.GRUCell`` and
``nn.LSTMCell`` of H -> H).
"""

# ruff: noqa
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch
from torch import nn

import acrobat as ab

H = 6
VOCAB = 16
PAD = 0
CLIP = 2.0


class HP(nn.Module):
    """Shared parameters (see the module docstring); ``SCALE``: a class-level constant."""

    SCALE = 0.5

    def __init__(self, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(VOCAB, H, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(H, H, generator=g) * 0.5)
        self.W2 = nn.Parameter(torch.randn(2 * H, H, generator=g) * 0.5)
        self.v = nn.Parameter(torch.randn(H, generator=g))
        self.h0 = nn.Parameter(torch.randn(H, generator=g) * 0.5)
        torch.manual_seed(seed)
        self.mlp = nn.Sequential(nn.Linear(H, H), nn.Tanh(), nn.Linear(H, H))
        self.layers = nn.ModuleList([nn.Linear(H, H) for _ in range(3)])
        self.pemb = nn.Embedding(VOCAB, H, padding_idx=PAD)
        self.drop = nn.Dropout(0.3)
        self.gru = nn.GRUCell(H, H)
        self.lstm = nn.LSTMCell(H, H)
        self.eval()


class Node:
    """A tree node: a word id ``w``, children ``kids`` and a ``parent`` pointer (None at the root)."""

    def __init__(self, w: int, kids: list, score: float = 0.0):
        self.w, self.kids, self.parent, self.score = w, kids, None, score
        for c in kids:
            c.parent = self


@dataclasses.dataclass
class Example:
    """A labelled token sequence with a per-example loss weight."""

    toks: list
    label: int
    weight: float = 1.0


class Pair(NamedTuple):
    """Two token sequences to compare."""

    a: list
    b: list


# --- trees: parent pointers, early returns, tuples, children iterated ------------------------------------------

@ab.function
def enc_store(node, p):
    h = p.emb[node.w]
    for c in node.kids:
        h = h + enc_store(c, p)
    h = torch.tanh(h @ p.W)
    node.h = h
    return h


@ab.program
def tree_parent_attention(root, p):
    enc_store(root, p)
    leaf = root
    while leaf.kids:
        leaf = leaf.kids[-1]
    path = []
    n = leaf
    while n is not None:
        path.append(n.h)
        n = n.parent
    Hs = torch.stack(path)
    a = torch.softmax(Hs @ p.v, dim=0)
    return (a.unsqueeze(1) * Hs).sum(0), len(path)


@ab.function
def dag_enc(node, p, cache):
    if id(node) in cache:
        return cache[id(node)]
    h = p.emb[node.w]
    for c in node.kids:
        h = h + dag_enc(c, p, cache)
    h = torch.tanh(h @ p.W)
    cache[id(node)] = h
    return h


@ab.program
def dag_memo(root, p):
    cache = {}
    h = dag_enc(root, p, cache)
    return h, len(cache)


@ab.function
def tuple_rec(node, p):
    if not node.kids:
        return p.emb[node.w], 1, [node.w]
    hs = []
    n = 0
    ws = []
    for c in node.kids:
        h, k, w = tuple_rec(c, p)
        hs.append(h)
        n += k
        ws = ws + w
    return torch.tanh(torch.stack(hs).sum(0) @ p.W), n + 1, ws + [node.w]


@ab.program
def rec_tuple(root, p):
    h, n, ws = tuple_rec(root, p)
    return h * n, n, ws


@ab.function
def first_hot(node, p, depth):
    h = torch.tanh(p.emb[node.w] @ p.W)
    for c in node.kids:
        if c.w % 3 == 0:
            return first_hot(c, p, depth + 1) + h
        if (h @ p.v) > 1.0:
            return h * 2.0
    return h * depth


@ab.program
def rec_early_return(root, p):
    return first_hot(root, p, 1)


@ab.function
def zipped_kids(node, p):
    h = p.emb[node.w]
    for i, (c, w) in enumerate(zip(reversed(node.kids), [1.0, 0.5, 0.25])):
        h = h + w * zipped_kids(c, p) * (i + 1)
    return torch.tanh(h @ p.W)


@ab.program
def zip_enumerate_reversed(root, p):
    return zipped_kids(root, p)


@ab.function
def best_path(node, p):
    h = torch.tanh(p.emb[node.w] @ p.W)
    if not node.kids:
        return h
    best = max(node.kids, key=lambda c: c.score)
    return h + best_path(best, p)


@ab.program
def max_child_by_score(root, p):
    return best_path(root, p)


@ab.function
def gru_tree(node, p):
    h = p.h0
    for c in node.kids:
        h = p.gru(gru_tree(c, p), h)
    return p.gru(p.emb[node.w], h)


@ab.program
def grucell_tree(root, p):
    return gru_tree(root, p)


# --- sequences: while with tensor tests, keys, in-place writes, grad modes, dtypes ------------------------------

@ab.program
def while_norm(toks, p):
    out = []
    for t in toks:
        h = p.emb[t] * 3.0
        k = 0
        while h.norm() > 1 and k < 5:
            h = torch.tanh(h @ p.W) * 1.5
            k += 1
        out.append(h)
    return out


@ab.program
def max_by_tensor_key(toks, p):
    hs = [torch.tanh(p.emb[t] @ p.W) for t in toks]
    best = max(hs, key=lambda h: float(h @ p.v))
    return best, float(best @ p.v)


@ab.program
def sorted_by_item(toks, p):
    hs = [torch.tanh(p.emb[t] @ p.W) for t in toks]
    order = sorted(range(len(hs)), key=lambda i: (hs[i] @ p.v).item())
    h = p.h0
    for i in order:
        h = torch.tanh(hs[i] + h @ p.W)
    return h, order


@ab.program
def inplace_fresh(toks, p):
    x = p.emb[toks[0]]
    h = torch.zeros(H, dtype=x.dtype)
    h[0] = x.sum()
    h += p.h0
    h[1:3] = x[:2] * 2.0
    h *= 0.5
    return torch.tanh(h @ p.W)


@ab.program
def no_grad_and_detach(toks, p):
    h = p.h0
    for t in toks:
        h = torch.tanh(p.emb[t] + h @ p.W)
    with torch.no_grad():
        s = torch.sigmoid(h @ p.v)
    g = h.detach() * h
    return g * s, s


@ab.program
def mixed_dtypes(toks, p):
    ids = torch.tensor(toks)
    mask = ids > 3
    f = mask.double().sum()
    h = p.emb[toks].sum(0) * f.float()
    return h, mask.sum(), f, ids * 2


# --- modules and cells --------------------------------------------------------------------------------------------

@ab.program
def sequential_and_modulelist(toks, p):
    h = p.mlp(p.emb[toks[0]])
    for lyr in p.layers:
        h = torch.relu(lyr(h)) + h
    for i, lyr in enumerate(p.layers):
        if i == len(toks) % 3:
            h = lyr(h)
    return h


@ab.program
def padded_embedding(toks, p):
    ids = torch.tensor(toks + [PAD] * (6 - len(toks)))
    E = p.pemb(ids)
    n = sum(1 for t in toks if t != PAD)
    return E.sum(0) / max(n, 1), E[-1]


@ab.program
def dropout_eval(toks, p):
    h = p.h0
    for t in toks:
        h = torch.tanh(p.drop(p.emb[t]) + p.drop(h) @ p.W)
    return h


@ab.program
def lstmcell_state(toks, p):
    state = (p.h0.unsqueeze(0), torch.zeros(1, H, dtype=p.h0.dtype))
    for t in toks:
        state = p.lstm(p.emb[t].unsqueeze(0), state)
    h, c = state
    return h[0], c.squeeze(0)


# --- instances and results of other shapes ------------------------------------------------------------------------

@ab.program
def dict_instance(inst, p):
    h = p.h0
    for t in inst["toks"]:
        h = torch.tanh(p.emb[t] + h @ p.W)
    logit = h @ p.v
    return {"logit": logit, "pred": int(logit > 0), "gold": inst["label"]}


@ab.program
def dataclass_instance(ex, p):
    h = p.h0
    for t in ex.toks:
        h = torch.tanh(p.emb[t] + h @ p.W)
    loss = ((h @ p.v) - ex.label) ** 2 * ex.weight
    return float(loss), loss


@ab.program
def namedtuple_instance(pair, p):
    a = torch.stack([p.emb[t] for t in pair.a]).mean(0)
    b = torch.stack([p.emb[t] for t in pair.b]).mean(0)
    return Pair(a=[a], b=[b]), torch.cosine_similarity(a, b, dim=0)


@ab.program
def none_on_some(toks, p):
    if len(toks) < 2:
        return None
    h = p.emb[toks[0]]
    for t in toks[1:]:
        h = torch.tanh(h @ p.W + p.emb[t])
    return h


@ab.program
def nested_tensor_lists(toks, p):
    hs = [p.emb[t] for t in toks]
    pairs = [[hs[i], hs[i] + hs[i + 1]] for i in range(len(hs) - 1)]
    return pairs, [[torch.tanh(h @ p.W)] for h in hs[:2]]


@ab.function
def step(h, x, p, scale=0.5, *, gate=True):
    y = torch.tanh(x + h @ p.W) * scale
    if gate:
        y = y * torch.sigmoid(h @ p.v)
    return y


@ab.program
def default_and_keyword_args(toks, p):
    h = p.h0
    for i, t in enumerate(toks):
        if i % 2 == 0:
            h = step(h, p.emb[t], p)
        else:
            h = step(h, p.emb[t], p, scale=2.0, gate=False)
    return step(x=h, h=p.h0, p=p)


def clipped(h):
    return torch.clamp(h, -CLIP, CLIP)


@ab.program
def module_and_class_constants(toks, p):
    h = p.h0 * HP.SCALE
    for t in toks:
        h = clipped(h * 3.0 + p.emb[t] * p.SCALE)
    return h, CLIP * len(toks)


@ab.program
def host_length_arithmetic(toks, p):
    n = len(toks)
    half = n // 2
    ratio = (n - half) / max(n, 1)
    hs = [p.emb[t] for t in toks[:half + 1]]
    return torch.stack(hs).mean(0) * ratio, half, ratio


# --- regressions --------------------------------------------------------------------------------------------------

@ab.program
def clamp_by_constants(toks, p):
    return torch.clamp(p.emb[toks[0]] * 3.0, -CLIP, CLIP / 2), torch.clamp(p.h0, min=-(CLIP - 1.5))


@ab.program
def rows_by_token_list(toks, p):
    return p.emb[toks], p.emb[toks, 1:3].sum(0)
