"""A second set of models acrobat was not written against, for tests/test_unseen2.py: twelve small dynamic
models aimed where tests/unseen_progs.py did not look (embedding tables with ``padding_idx``/``max_norm``,
int and bool tensors mixed with floats, 0-d tensors, view/reshape/permute/transpose/flatten, einsum and bmm,
gather/index_select/argsort/cumsum with per-instance indices, ``F.pad``, n-ary trees with empty children,
results stored on nodes, kwargs-only functions, ``enumerate(start=1)``, ``zip`` of unequal lengths,
``sorted`` over ``.item()`` numbers, tensor-driven ``while`` loops, ``nn.ModuleList``/``nn.ParameterList``
indexed by host ints, float64 models, dropout in train mode).

Each entry of ``MODELS`` is a ``Model`` (as in tests/unseen_progs.py): ``program``, ``params(seed)``,
``instance(rng, size)``, ``grad`` and ``random`` (the model draws random numbers: results are compared through
the seed-independent ``check`` instead of equality).
"""

# ruff: noqa
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from tests.unseen_progs import Model, _module

HIDDEN = 8
VOCAB = 20
PAD = 0


def _seeded(seed: int) -> None:
    torch.manual_seed(seed)


def _tokens(rng: random.Random, size: int) -> list[int]:
    return [rng.randrange(VOCAB) for _ in range(size)]


# --- 1. bag of embeddings: padding_idx, int/bool masks mixed with floats, a count in an int tensor --------------

class BagParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN, padding_idx=PAD)
        self.out = nn.Linear(HIDDEN, 3)


@ab.program
def masked_bag(ids, p):
    mask = ids != PAD  # bool (L,)
    x = p.emb(ids)  # (L, H), pad rows are zero
    count = mask.sum()  # 0-d int64
    pooled = (x * mask.unsqueeze(-1)).sum(0) / count.clamp(min=1)  # int -> float promotion
    bonus = mask.long().cumsum(0)[-1] * 0.1  # int tensor times host float
    return p.out(pooled) + bonus


def _padded_ids(rng: random.Random, size: int) -> torch.Tensor:
    return torch.tensor([rng.choice([PAD, rng.randrange(1, VOCAB)]) for _ in range(size)], dtype=torch.long)


# --- 2. multi-head self-attention over a per-instance (n, H) matrix: view/transpose/bmm/einsum/masked_fill ----

class AttnParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)
        self.heads = 2


@ab.program
def causal_attention(x, p):
    n = x.shape[0]
    d = HIDDEN // p.heads
    q, k, v = p.qkv(x).chunk(3, dim=-1)  # (n, H) each
    q = q.view(n, p.heads, d).transpose(0, 1)  # (h, n, d)
    k = k.reshape(n, p.heads, d).permute(1, 2, 0)  # (h, d, n)
    v = v.view(n, p.heads, d).transpose(0, 1)
    s = torch.bmm(q, k) / math.sqrt(d)  # (h, n, n)
    causal = torch.ones(n, n, dtype=torch.bool).triu(1)
    s = s.masked_fill(causal, float("-inf"))
    a = torch.softmax(s, dim=-1)
    y = torch.bmm(a, v).transpose(0, 1).reshape(n, HIDDEN)  # (n, H)
    g = torch.einsum("nd,md->nm", y, x).flatten()  # (n*n,)
    return p.o(y).mean(0), g.sum()


def _matrix(rng: random.Random, size: int) -> torch.Tensor:
    return torch.randn(size, HIDDEN)


# --- 3. top-k pooling: argsort, gather/index_select with per-instance indices, F.pad, clamp, where, cumsum -----

class TopkParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.score = nn.Linear(HIDDEN, 1)
        self.k = 3
        self.out = nn.Linear(3 * HIDDEN, 2)


@ab.program
def topk_pool(x, p):
    s = p.score(x).squeeze(-1)  # (n,)
    order = torch.argsort(s, descending=True)
    top = order[: p.k]  # fewer than k rows where n < k
    rows = torch.index_select(x, 0, top)  # (m, H)
    rows = F.pad(rows, (0, 0, 0, p.k - rows.shape[0]))  # (k, H)
    w = torch.gather(s, 0, top).clamp(-1.0, 1.0)
    w = F.pad(w, (0, p.k - w.shape[0]), value=-1.0)
    c = torch.cumsum(torch.where(w > 0, w, torch.zeros_like(w)), dim=0)
    return p.out((rows * c.unsqueeze(-1)).flatten())


# --- 4. n-ary tree, results stored on nodes and read back by the parent, empty child lists -------------------

class NaryNode:
    def __init__(self, tok: int, kids: list | None = None):
        self.tok, self.kids = tok, kids if kids is not None else []
        self.h = None


class NaryParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.U = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.W = nn.Linear(HIDDEN, HIDDEN)


@ab.function
def nary_visit(node, p):
    for kid in node.kids:
        nary_visit(kid, p)
    x = p.emb(torch.tensor(node.tok))
    if len(node.kids) == 0:
        node.h = torch.tanh(p.W(x))
    else:
        s = torch.stack([k.h for k in node.kids]).mean(0)
        node.h = torch.tanh(p.W(x) + p.U(s))


@ab.program
def nary_stored(tree, p):
    nary_visit(tree, p)
    return tree.h


def _nary(rng: random.Random, size: int) -> NaryNode:
    if size <= 1:
        return NaryNode(rng.randrange(VOCAB))
    n = rng.randint(1, min(4, size - 1))
    sizes = [1] * n
    for _ in range(size - 1 - n):
        sizes[rng.randrange(n)] += 1
    return NaryNode(rng.randrange(VOCAB), [_nary(rng, s) for s in sizes])


# --- 5. calls 3 deep with early returns, kwargs-only parameters, enumerate(start=1), zip of unequal lengths -----

class DeepParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.lin = nn.Linear(HIDDEN, HIDDEN)
        self.weights = [1.0, 0.5, 0.25, 0.125]


@ab.function
def leaf_step(x, p, *, scale):
    if scale == 0.0:
        return x
    return torch.tanh(p.lin(x)) * scale


@ab.function
def mid_step(x, i, p):
    if i % 3 == 0:
        return leaf_step(x, p, scale=0.0)
    y = leaf_step(x, p, scale=1.0 / i)
    if i > 4:
        return y * 2.0
    return leaf_step(y, p, scale=0.5)


@ab.function
def top_step(tokens, p):
    h = torch.zeros(HIDDEN)
    for i, (t, w) in enumerate(zip(tokens, p.weights), start=1):
        h = h + mid_step(p.emb(torch.tensor(t)), i, p) * w
    if len(tokens) > len(p.weights):
        return h, len(tokens) - len(p.weights)
    return h, 0


@ab.program
def deep_calls(tokens, p):
    h, extra = top_step(tokens, p)
    return h + extra


# --- 6. sorted over .item() numbers, a while loop whose trip count comes from tensor values --------------------

class SortParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.score = nn.Linear(HIDDEN, 1)
        self.shrink = nn.Linear(HIDDEN, HIDDEN)


@ab.program
def sorted_shrink(tokens, p):
    xs = [p.emb(torch.tensor(t)) for t in tokens]
    scored = sorted([(p.score(x).item(), i) for i, x in enumerate(xs)], reverse=True)
    h = xs[scored[0][1]]
    steps = 0
    while h.norm() > 0.5 and steps < 6:
        h = torch.tanh(p.shrink(h)) * 0.7
        steps += 1
    return h, steps, [i for _, i in scored]


def _distinct_tokens(rng: random.Random, size: int) -> list[int]:
    """Distinct tokens: two equal tokens tie in ``sorted``, and a batched launch may compute one of the two scores
    an ulp apart from the other (rows of one matmul), breaking the tie otherwise than plain PyTorch."""
    return rng.sample(range(VOCAB), size)


# --- 7. nn.ModuleList and nn.ParameterList indexed by host ints from the instance ------------------------------

class ExpertParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.experts = nn.ModuleList([nn.Linear(HIDDEN, HIDDEN) for _ in range(3)])
        self.biases = nn.ParameterList([nn.Parameter(torch.randn(HIDDEN) * 0.1) for _ in range(3)])


@ab.program
def routed_experts(tokens, p):
    h = torch.zeros(HIDDEN)
    for t in tokens:
        k = t % 3
        h = torch.relu(p.experts[k](p.emb(torch.tensor(t)) + h) + p.biases[k])
    return h


# --- 8. float64 model: int tensors and bools promoted, 0-d shared scale, broadcasting shared (H,) over (n, H) ----

class F64Params(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.W = nn.Parameter(torch.randn(HIDDEN, HIDDEN, dtype=torch.float64) * 0.3)
        self.bias = nn.Parameter(torch.randn(HIDDEN, dtype=torch.float64))
        self.scale = nn.Parameter(torch.tensor(0.7, dtype=torch.float64))  # 0-d


@ab.program
def f64_promote(inst, p):
    x = inst["x"]  # (n, H) float64
    counts = inst["counts"]  # (n,) int64
    y = x @ p.W + p.bias  # broadcast (H,) over (n, H)
    y = y * counts.unsqueeze(-1)  # int64 * float64
    pos = (y > 0).sum(dim=1)  # int64 (n,)
    z = torch.tanh(y) * p.scale + pos.unsqueeze(-1) / HIDDEN  # int / int -> float
    flag = (z.mean() > 0).to(torch.float64)
    return z.sum(0) * flag + (1 - flag) * z.mean()


def _f64(rng: random.Random, size: int) -> dict:
    return {"x": torch.randn(size, HIDDEN, dtype=torch.float64),
            "counts": torch.tensor([rng.randrange(0, 4) for _ in range(size)])}


# --- 9. a global counter, a list of sentences some of them empty, batch-level host bookkeeping ----------------

CALLS = 0


class SentParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.cell = nn.GRUCell(HIDDEN, HIDDEN)


@ab.function
def read_sentence(words, p):
    global CALLS
    CALLS += 1
    h = torch.zeros(HIDDEN)
    for w in words:
        h = p.cell(p.emb(torch.tensor(w)), h)
    return h


@ab.program
def empty_sentences(doc, p):
    hs = [read_sentence(s, p) for s in doc]
    if len(hs) == 0:
        return torch.zeros(HIDDEN)
    return torch.stack(hs).max(0).values


def _sentences(rng: random.Random, size: int) -> list[list[int]]:
    return [[rng.randrange(VOCAB) for _ in range(rng.randint(0, 3))] for _ in range(size // 3)]


# --- 10. LayerNorm and BatchNorm1d in eval mode (running stats), 0-d tensors from reductions --------------------

class NormParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.ln = nn.LayerNorm(HIDDEN)
        self.bn = nn.BatchNorm1d(HIDDEN)
        self.bn.running_mean.normal_()
        self.bn.running_var.uniform_(0.5, 2.0)
        self.lin = nn.Linear(HIDDEN, HIDDEN)


@ab.program
def eval_norms(x, p):
    h = p.ln(p.lin(x))  # (n, H)
    h = p.bn(h)  # eval: running statistics
    m = h.max()  # 0-d
    return (h - m).exp().sum(0) / h.numel()


# --- 11. dropout in train mode and torch.rand: per-instance draws ---------------------------------------------

class DropParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.p = 0.5


@ab.program
def train_dropout(tokens, p):
    x = torch.stack([p.emb(torch.tensor(t)) for t in tokens])  # (n, H)
    y = F.dropout(x, p.p, training=True)
    u = torch.rand(x.shape[0])
    return x, y, u


def check_dropout(instance: Any, out: Any, rate: float = 0.5) -> None:
    """The seed-independent facts of ``train_dropout``'s result: ``y`` is 0 or ``x / (1 - rate)`` element by
    element, ``u`` lies in [0, 1) with one entry per token."""
    x, y, u = out
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / (1 - rate))
    assert u.shape == (len(instance),) and bool((u >= 0).all()) and bool((u < 1).all())


# --- 12. a tree that shares subtrees (a DAG) across parents, summing leaves through a helper 3 calls deep --------

@dataclass(eq=False)
class Cell:
    val: float
    kids: list = field(default_factory=list)


class DagSumParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.lin = nn.Linear(1, HIDDEN)
        self.mix = nn.Linear(HIDDEN, HIDDEN)


@ab.function
def dag_value(c, p):
    if not c.kids:
        return p.lin(torch.tensor([c.val]))
    acc = dag_value(c.kids[0], p)
    for k in c.kids[1:]:
        acc = acc + dag_value(k, p)
    return torch.tanh(p.mix(acc))


@ab.program
def shared_dag(root, p):
    return dag_value(root, p)


def _shared_dag(rng: random.Random, size: int) -> Cell:
    leaves = [Cell(rng.uniform(-1, 1)) for _ in range(max(1, size // 2))]
    mids = [Cell(0.0, rng.sample(leaves, rng.randint(1, len(leaves)))) for _ in range(2)]
    return Cell(0.0, mids + leaves[:1])


# --- 13. nn.Embedding with max_norm: the lookup renormalizes the rows it reads, in place, in the weight ----------

class MaxNormParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN, max_norm=1.0)
        with torch.no_grad():
            self.emb.weight.mul_(3.0)  # most rows start above the max norm
        self.out = nn.Linear(HIDDEN, 2)


@ab.program
def maxnorm_lookup(tokens, p):
    h = torch.zeros(HIDDEN)
    for t in tokens:
        h = torch.tanh(h + p.emb(torch.tensor(t)))
    return p.out(h)


# --- the registry (``Model`` and ``_module`` of tests/unseen_progs.py) ---------------------------------------------

MODELS: dict[str, Model] = {
    "masked_bag": Model(masked_bag, _module(BagParams), _padded_ids),
    "causal_attention": Model(causal_attention, _module(AttnParams), _matrix),
    "topk_pool": Model(topk_pool, _module(TopkParams), _matrix),
    "nary_stored": Model(nary_stored, _module(NaryParams), _nary),
    "deep_calls": Model(deep_calls, _module(DeepParams), _tokens),
    "sorted_shrink": Model(sorted_shrink, _module(SortParams), _distinct_tokens),
    "routed_experts": Model(routed_experts, _module(ExpertParams), _tokens),
    "f64_promote": Model(f64_promote, _module(F64Params), _f64),
    "empty_sentences": Model(empty_sentences, _module(SentParams), _sentences),
    "eval_norms": Model(eval_norms, _module(NormParams), _matrix),
    "train_dropout": Model(train_dropout, _module(DropParams), _tokens, check=check_dropout),
    "shared_dag": Model(shared_dag, _module(DagSumParams), _shared_dag),
    "maxnorm_lookup": Model(maxnorm_lookup, _module(MaxNormParams), _tokens),
}
