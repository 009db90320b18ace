"""A fourth set of models acrobat was not written against, for tests/test_unseen4.py: model families no earlier
hunt tried, written as their GitHub implementations write them -- message passing over an adjacency dict until
the node states converge (a ``while`` on a computed test), a tree decoder growing children until a predicted stop
(namedtuple nodes), an end-to-end memory network (``for hop in range(self.hops)``, ``torch.einsum``/``torch.bmm``,
``nn.Embedding(padding_idx=0)``, a per-run counter ``self.calls += 1``), a CKY span parser (a chart dict keyed by
span tuples, ``max`` over split points by ``.item()``), a pointer-generator decoder (``F.softmax``,
``scatter_add``, ``torch.gather``, ``x.new_zeros``, ``masked_fill``), a VAE sampling with ``torch.randn_like``,
running statistics in ``register_buffer`` buffers updated under ``torch.no_grad()``, a char CNN over an int32
tensor (``//``, ``%``, masks, bool indexing, ``torch.arange(len(x))``, ``F.pad``, ``torch.flip``, dropout in eval),
an expression-tree encoder dispatching on node classes with ``isinstance`` and looking words up with
``vocab.get(w.lower(), UNK)`` in a ``try``/``except`` helper, n-grams from a generator helper (``yield``), a float64
molecule model with int32 atom types, and a dataclass result.

Each entry of ``MODELS`` is a ``Model`` of tests/unseen_progs.py (program, params(seed), instance(rng, size)).
"""

# ruff: noqa
from __future__ import annotations

import random
from collections import namedtuple
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from tests.unseen_progs import Model, _module

HIDDEN = 8
EMB = 6
VOCAB = 20
UNK = 1


def _seeded(seed: int) -> None:
    torch.manual_seed(seed)


def _tokens(rng: random.Random, size: int) -> list[int]:
    return [rng.randrange(2, VOCAB) for _ in range(size)]


# --- 1. gated graph network: messages over an adjacency dict until the states stop changing -------------------

class GraphNet(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.msg = nn.Linear(HIDDEN, HIDDEN)
        self.upd = nn.GRUCell(HIDDEN, HIDDEN)
        self.readout = nn.Linear(HIDDEN, 2)
        self.tol = 0.05
        self.max_rounds = 5


@ab.program
def graph_mp(graph, net):
    adj = graph["adj"]
    h = [net.emb(torch.tensor(label)) for label in graph["labels"]]
    rounds = 0
    delta = float("inf")
    while delta > net.tol and rounds < net.max_rounds:
        new = []
        for v in range(len(h)):
            nbrs = adj.get(v, [])
            if nbrs:
                m = torch.stack([net.msg(h[u]) for u in nbrs]).sum(0) / len(nbrs)
            else:
                m = torch.zeros_like(h[v])
            new.append(net.upd(m.unsqueeze(0), h[v].unsqueeze(0)).squeeze(0))
        delta = max((a - b).abs().max().item() for a, b in zip(new, h))
        h = new
        rounds += 1
    nodes = torch.stack(h)
    return {"logits": net.readout(nodes.mean(0)), "rounds": rounds, "nodes": nodes}


def _graph(rng: random.Random, size: int) -> dict:
    n = min(size, 7)
    adj: dict[int, list[int]] = {}
    for v in range(n):
        nbrs = sorted({rng.randrange(n) for _ in range(rng.randint(0, 2))} - {v})
        if nbrs:
            adj[v] = nbrs
    return {"adj": adj, "labels": _tokens(rng, n)}


# --- 2. tree decoder: children grown from a latent vector until a predicted stop, namedtuple nodes --------------

DecodedNode = namedtuple("DecodedNode", ["logits", "children"])


class TreeDecoder(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.init = nn.Linear(4, HIDDEN)
        self.cell = nn.GRUCell(HIDDEN, HIDDEN)
        self.stop = nn.Linear(HIDDEN, 1)
        self.label = nn.Linear(HIDDEN, 5)
        self.child_in = nn.Parameter(torch.randn(HIDDEN))
        self.max_children = 3

    @ab.function
    def grow(self, h, depth, max_depth):
        children = []
        state = h
        while len(children) < self.max_children and depth < max_depth:
            if torch.sigmoid(self.stop(state)).item() > 0.5:
                break
            state = self.cell(self.child_in.unsqueeze(0), state.unsqueeze(0)).squeeze(0)
            children.append(self.grow(state, depth + 1, max_depth))
        return DecodedNode(self.label(h), children)


@ab.program
def decode_tree(example, model):
    z, max_depth = example
    return model.grow(torch.tanh(model.init(z)), 0, max_depth)


def _latent(rng: random.Random, size: int) -> tuple:
    return torch.randn(4) * 2, 1 + size % 3


# --- 3. end-to-end memory network: hops over a padded story, einsum/bmm, a per-run counter on the module -------

class MemN2N(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.A = nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.B = nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.C = nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.H = nn.Linear(EMB, EMB, bias=False)
        self.W = nn.Linear(EMB, VOCAB)
        self.hops = 3
        self.calls = 0


@ab.program
def memn2n(example, model):
    story, query = example
    model.calls += 1
    u = model.B(query).sum(0)
    m = model.A(story).sum(1)
    c = model.C(story).sum(1)
    for hop in range(model.hops):
        p = F.softmax(torch.einsum("ne,e->n", m, u), dim=0)
        o = torch.bmm(p.view(1, 1, -1), c.unsqueeze(0)).view(-1)
        u = model.H(u) + o
    return F.log_softmax(model.W(u), dim=-1)


def _story(rng: random.Random, size: int) -> tuple:
    story = torch.zeros(min(size, 6), 4, dtype=torch.long)
    for i in range(story.shape[0]):
        k = rng.randint(1, 4)
        story[i, :k] = torch.tensor(_tokens(rng, k))
    return story, torch.tensor(_tokens(rng, 3) + [0])


# --- 4. CKY span parser: a chart dict keyed by (i, j), the best split point chosen by .item() ------------------

class SpanParser(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.span = nn.Linear(2 * HIDDEN, 1)


@ab.program
def cky_parse(tokens, model):
    n = len(tokens)
    x = model.emb(torch.tensor(tokens))
    chart = {}
    back = {}
    for i in range(n):
        chart[(i, i + 1)] = model.span(torch.cat([x[i], x[i]])).squeeze(0)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            best, best_k = None, -1
            for k in range(i + 1, j):
                cand = chart[(i, k)] + chart[(k, j)]
                if best is None or cand.item() > best.item():
                    best, best_k = cand, k
            chart[(i, j)] = model.span(torch.cat([x[i], x[j - 1]])).squeeze(0) + best
            back[(i, j)] = best_k
    spans = []
    todo = [(0, n)]
    while todo:
        i, j = todo.pop()
        spans.append((i, j))
        if j - i > 1:
            k = back[(i, j)]
            todo.append((k, j))
            todo.append((i, k))
    return chart[(0, n)], spans


def _short_tokens(rng: random.Random, size: int) -> list[int]:
    return _tokens(rng, 1 + size % 6)


# --- 5. pointer-generator decoder: copy distribution by scatter_add over extended-vocabulary source ids ---------

EXTRA = 4  # source words outside the vocabulary get ids VOCAB..VOCAB+EXTRA-1


class PointerGenerator(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.enc = nn.GRU(HIDDEN, HIDDEN)
        self.dec = nn.GRUCell(HIDDEN, HIDDEN)
        self.attn = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.gen = nn.Linear(HIDDEN, VOCAB)
        self.pgen = nn.Linear(2 * HIDDEN, 1)
        self.steps = 4


@ab.program
def pointer_generator(src, model):
    src_in = src.masked_fill(src >= VOCAB, UNK)
    enc, h = model.enc(model.emb(src_in))
    s = h[0]
    y = torch.tensor(0)
    probs = []
    for t in range(model.steps):
        s = model.dec(model.emb(y), s)
        a = F.softmax(enc @ model.attn(s), dim=0)
        ctx = a @ enc
        p_gen = torch.sigmoid(model.pgen(torch.cat([s, ctx])))
        vocab = F.softmax(model.gen(s), dim=0) * p_gen
        dist = torch.cat([vocab, vocab.new_zeros(EXTRA)])
        dist = dist.scatter_add(0, src, (1 - p_gen) * a)
        y = dist.argmax()
        probs.append(torch.gather(dist, 0, y.view(1)))
        y = y.masked_fill(y >= VOCAB, UNK)
    return torch.cat(probs).log()


def _source(rng: random.Random, size: int) -> torch.Tensor:
    return torch.tensor([rng.randrange(2, VOCAB + EXTRA) for _ in range(size)])


# --- 6. VAE: the reparameterization trick with torch.randn_like (random: checked by check_vae) ------------------

class VAE(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.enc = nn.Linear(HIDDEN, 2 * 4)
        self.dec = nn.Linear(4, VOCAB)


@ab.program
def vae(tokens, model):
    h = model.emb(torch.tensor(tokens)).mean(0)
    mu, logvar = model.enc(h).chunk(2)
    std = torch.exp(0.5 * logvar)
    eps = torch.randn_like(std)
    z = mu + eps * std
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return mu, logvar, eps, z, model.dec(z), kl


def check_vae(instance, out) -> None:
    """The seed-independent facts of ``vae``'s result: ``z = mu + eps * exp(logvar / 2)`` and the KL term."""
    mu, logvar, eps, z, recon, kl = out
    torch.testing.assert_close(z, mu + eps * torch.exp(0.5 * logvar))
    torch.testing.assert_close(kl, -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()))
    assert eps.shape == (4,) and recon.shape == (VOCAB,)


# --- 7. running statistics in buffers, updated under torch.no_grad() in forward (BatchNorm-like, by hand) -------

class RunningCentered(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.lin = nn.Linear(HIDDEN, 3)
        self.register_buffer("running", torch.zeros(HIDDEN))
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))
        self.momentum = 0.1


@ab.program
def running_centered(tokens, model):
    x = model.emb(torch.tensor(tokens)).mean(0)
    with torch.no_grad():
        model.running.mul_(1 - model.momentum).add_(model.momentum * x.detach())
        model.seen += 1
    return model.lin(x - model.running)


# --- 8. char CNN over an int32 tensor: int arithmetic, masks, bool indexing, F.pad, torch.flip, eval dropout ----

class CharCNN(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.bucket = nn.Embedding(4, EMB)
        self.conv = nn.Conv1d(EMB, HIDDEN, 3)
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(2 * HIDDEN, 3)


@ab.program
def char_cnn(ids, model):
    ids = ids.long()
    n = len(ids)
    pos = torch.arange(len(ids))
    x = model.emb(ids) + model.bucket((pos * 4) // n)
    x = model.drop(x)
    mask = ids != 0
    x = x.masked_fill(~mask.unsqueeze(1), 0.0)
    if n < 3:
        x = F.pad(x, (0, 0, 0, 3 - n))
    fwd = torch.relu(model.conv(x.t().unsqueeze(0))).squeeze(0).max(1).values
    rev = torch.relu(model.conv(torch.flip(x, dims=[0]).t().unsqueeze(0))).squeeze(0).mean(1)
    odd = pos % 2 == 1
    kept = x[:n][mask & ~odd].clone()
    return model.out(torch.cat([fwd, rev])), kept.sum(0), mask.sum()


def _char_ids(rng: random.Random, size: int) -> torch.Tensor:
    ids = _tokens(rng, size)
    for i in range(size // 3):
        ids[-1 - i] = 0  # padding at the end
    return torch.tensor(ids, dtype=torch.int32)


# --- 9. expression trees: isinstance dispatch on node classes, vocab.get(w.lower(), UNK), a try/except helper --

class Num:
    def __init__(self, value: float):
        self.value = value


class Var:
    def __init__(self, name: str):
        self.name = name


class BinExpr:
    def __init__(self, op: str, left, right):
        self.op, self.left, self.right = op, left, right


NAMES = {"x": 2, "y": 3, "z": 4, "alpha": 5}
OPS = ["+", "-", "*"]


def op_index(op):
    try:
        return OPS.index(op)
    except ValueError:
        return 0


class ExprNet(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.num = nn.Linear(1, HIDDEN)
        self.combine = nn.ModuleList([nn.Linear(2 * HIDDEN, HIDDEN) for _ in OPS])
        self.out = nn.Linear(HIDDEN, 1)


@ab.function
def encode_expr(node, model):
    if isinstance(node, Num):
        return torch.tanh(model.num(torch.tensor([node.value])))
    if isinstance(node, Var):
        return model.emb(torch.tensor(NAMES.get(node.name.lower(), UNK)))
    left = encode_expr(node.left, model)
    right = encode_expr(node.right, model)
    return torch.tanh(model.combine[op_index(node.op)](torch.cat([left, right])))


@ab.program
def expr_value(tree, model):
    return model.out(encode_expr(tree, model)).squeeze(0)


def _expr(rng: random.Random, size: int):
    if size <= 1:
        if rng.random() < 0.5:
            return Num(round(rng.uniform(-2, 2), 2))
        return Var(rng.choice(["x", "Y", "z", "Alpha", "w"]))
    k = rng.randint(1, size - 1)
    return BinExpr(rng.choice(OPS + ["/"]), _expr(rng, k), _expr(rng, size - k))


# --- 10. n-gram bag from a generator helper (yield), a dataclass result --------------------------------------------

def ngrams(tokens, n):
    for i in range(len(tokens) - n + 1):
        yield tokens[i:i + n]


@dataclass
class Prediction:
    logits: torch.Tensor
    label: int
    confidence: float


class NgramBag(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.out = nn.Linear(HIDDEN, 4)


@ab.program
def ngram_bag(tokens, model):
    grams = [model.emb(torch.tensor(g)).prod(0) for g in ngrams(tokens, 2)]
    if not grams:
        grams = [model.emb(torch.tensor(tokens)).mean(0)]
    logits = model.out(torch.stack(grams).mean(0))
    probs = F.softmax(logits, dim=-1)
    return Prediction(logits, int(probs.argmax()), float(probs.max()))


# --- 11. float64 molecule: pairwise distances, int32 atom types, bincount, int32 arithmetic kept int32 -----------

class PairEnergy(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.type_emb = nn.Embedding(4, 5)
        self.rbf = nn.Linear(3, 5)
        self.register_buffer("widths", torch.tensor([0.5, 1.0, 2.0]))
        self.double()


@ab.program
def pair_energy(mol, model):
    pos, types = mol["pos"], mol["types"]
    n = pos.shape[0]
    d = torch.cdist(pos, pos)
    idx = torch.arange(n)
    upper = idx.unsqueeze(0) > idx.unsqueeze(1)
    t = model.type_emb(types.long())
    pair = t.unsqueeze(0) * t.unsqueeze(1)
    e = (model.rbf(torch.exp(-d.unsqueeze(-1) * model.widths)) * pair).sum(-1)
    e = e.masked_fill(~upper, 0.0)
    return e.sum(), torch.bincount(types, minlength=4), (types * 2 + 1) // 3


def _molecule(rng: random.Random, size: int) -> dict:
    n = 1 + size % 6
    return {"pos": torch.randn(n, 3, dtype=torch.float64),
            "types": torch.tensor([rng.randrange(4) for _ in range(n)], dtype=torch.int32)}


# --- the registry ------------------------------------------------------------------------------------------------

MODELS: dict[str, Model] = {
    "graph_mp": Model(graph_mp, _module(GraphNet), _graph),
    "decode_tree": Model(decode_tree, _module(TreeDecoder), _latent),
    "memn2n": Model(memn2n, _module(MemN2N), _story),
    "cky_parse": Model(cky_parse, _module(SpanParser), _short_tokens),
    "pointer_generator": Model(pointer_generator, _module(PointerGenerator), _source),
    "vae": Model(vae, _module(VAE), _tokens, check=check_vae),
    "running_centered": Model(running_centered, _module(RunningCentered), _tokens),
    "char_cnn": Model(char_cnn, _module(CharCNN), _char_ids),
    "expr_value": Model(expr_value, _module(ExprNet), _expr),
    "ngram_bag": Model(ngram_bag, _module(NgramBag), _tokens),
    "pair_energy": Model(pair_energy, _module(PairEnergy), _molecule),
}
