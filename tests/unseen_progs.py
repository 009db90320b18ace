"""Models acrobat was not written against, for tests/test_unseen.py: twelve small dynamic models written the way
PyTorch researchers write them (trees, DAGs, early exits, tensor-valued ``if``s, nested containers, ``nn`` modules,
methods, closures, in-place writes into fresh tensors, float64 and int tensors), each with its parameters and a
generator of instances of mixed sizes.

Each entry of ``MODELS`` is a ``Model``: ``program`` (the ``@ab.program``), ``params(seed)`` (the shared arguments,
a tuple), ``instance(rng, size)`` (one instance; ``size`` 1-12 picks its size) and ``grad`` (whether the summed
loss of its outputs has a gradient to compare).
"""

# ruff: noqa
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

HIDDEN = 8
HALT_AT = 0.6  # a global constant read by the models
VOCAB = 20


def _seeded(seed: int) -> None:
    torch.manual_seed(seed)


# --- 1. n-ary tree of dicts with string keys: gated child sum, a filtered comprehension, torch.where ----------

class GatedSumParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.gate = nn.Linear(HIDDEN, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.out = nn.Linear(HIDDEN, 3)


@ab.function
def gated_node(node, p):
    x = p.emb(torch.tensor(node["tok"]))
    kids = [gated_node(k, p) for k in node["kids"] if k is not None]
    if len(kids) == 0:
        return p.norm(x)
    s = torch.stack(kids).sum(0)
    g = torch.sigmoid(p.gate(s))
    h = torch.where(g > 0.5, s, x)
    return p.norm(h + x)


@ab.program
def gated_tree(tree, p):
    h = gated_node(tree, p)
    return F.log_softmax(p.out(h), dim=-1)


def _dict_tree(rng: random.Random, size: int) -> dict:
    if size <= 1:
        return {"tok": rng.randrange(VOCAB), "kids": [None] if rng.random() < 0.3 else []}
    n = rng.randint(1, min(3, size - 1))
    sizes = [1] * n
    for _ in range(size - 1 - n):
        sizes[rng.randrange(n)] += 1
    kids: list = [_dict_tree(rng, s) for s in sizes]
    if rng.random() < 0.3:
        kids.insert(rng.randrange(len(kids) + 1), None)
    return {"tok": rng.randrange(VOCAB), "kids": kids}


# --- 2. GRU reader with early exit on a halting score (.item() against a global), tuple result ---------------

class HaltParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.cell = nn.GRUCell(HIDDEN, HIDDEN)
        self.halt = nn.Linear(HIDDEN, 1)
        self.min_steps = 2  # an int attribute


@ab.program
def halting_reader(tokens, p):
    h = torch.zeros(HIDDEN)
    steps = 0
    for i, tok in enumerate(tokens):
        h = p.cell(p.emb(torch.tensor(tok)), h)
        steps = i + 1
        if steps >= p.min_steps and torch.sigmoid(p.halt(h)).item() > HALT_AT:
            break
    return h, steps


def _tokens(rng: random.Random, size: int) -> list[int]:
    return [rng.randrange(VOCAB) for _ in range(size)]


# --- 3. DAG encoder: nodes shared between parents, each parent recomputes them (no memo), topological ids -----

@dataclass(eq=False)
class DagNode:
    feat: torch.Tensor
    preds: list = field(default_factory=list)


class DagParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.inp = nn.Linear(4, HIDDEN)
        self.agg = nn.Linear(2 * HIDDEN, HIDDEN)


@ab.function
def dag_state(node, p):
    x = torch.relu(p.inp(node.feat))
    if not node.preds:
        return x
    m = torch.stack([dag_state(q, p) for q in node.preds]).max(0).values
    return torch.tanh(p.agg(torch.cat([x, m])))


@ab.program
def dag_encoder(dag, p):
    sinks = [n for n in dag if n.preds]
    if len(sinks) == 0:
        return dag_state(dag[-1], p)
    return sum(dag_state(n, p) for n in sinks[-2:]) / min(2, len(sinks))


def _dag(rng: random.Random, size: int) -> list:
    nodes: list[DagNode] = []
    for i in range(min(size, 7)):
        preds = rng.sample(nodes, rng.randint(0, min(2, len(nodes)))) if nodes else []
        nodes.append(DagNode(torch.randn(4), preds))
    return nodes


# --- 4. Conv1d over a token sequence, padded to the kernel width with max() over Python ints, int tensor input --

class ConvParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.conv = nn.Conv1d(HIDDEN, HIDDEN, kernel_size=3)
        self.width = 3
        self.out = nn.Linear(HIDDEN, 2)


@ab.program
def conv_classifier(ids, p):
    n = max(ids.shape[0], p.width)
    x = p.emb(ids)  # (L, H)
    pad = torch.zeros(n - ids.shape[0], HIDDEN)
    x = torch.cat([x, pad]).t().unsqueeze(0)  # (1, H, n)
    y = torch.relu(p.conv(x))[0]  # (H, n - 2)
    return p.out(y.max(dim=1).values)


def _id_tensor(rng: random.Random, size: int) -> torch.Tensor:
    return torch.tensor([rng.randrange(VOCAB) for _ in range(size)], dtype=torch.long)


# --- 5. bidirectional LSTM tagger with reversed/zip, list of per-token outputs -----------------------------------

class BiParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.fw = nn.LSTMCell(HIDDEN, HIDDEN)
        self.bw = nn.LSTMCell(HIDDEN, HIDDEN)
        self.tag = nn.Linear(2 * HIDDEN, 4)
        self.drop = nn.Dropout(0.3)


@ab.function
def run_dir(xs, cell):
    h, c = torch.zeros(HIDDEN), torch.zeros(HIDDEN)
    hs = []
    for x in xs:
        h, c = cell(x, (h, c))
        hs.append(h)
    return hs


@ab.program
def bi_tagger(tokens, p):
    xs = [p.drop(p.emb(torch.tensor(t))) for t in tokens]
    fw = run_dir(xs, p.fw)
    bw = run_dir(list(reversed(xs)), p.bw)
    bw = list(reversed(bw))
    return [p.tag(torch.cat([f, b])) for f, b in zip(fw, bw)]


# --- 6. a recursive nn.Module: methods calling each other, recursion through self.forward, default args --------

class Node:
    def __init__(self, word: int = 0, left: "Node | None" = None, right: "Node | None" = None):
        self.word, self.left, self.right = word, left, right


class RecursiveNet(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.compose = nn.Linear(2 * HIDDEN, HIDDEN)
        self.scales = [1.0, 0.5]  # a list attribute
        self.temp = 2.0  # a float attribute

    @ab.function
    def leaf(self, word, scale=1.0):
        return self.emb(torch.tensor(word)) * scale

    @ab.function
    def forward(self, node, depth=0):
        if node.left is None:
            return self.leaf(node.word, self.scales[depth % 2])
        l = self.forward(node.left, depth + 1)
        r = self.forward(node.right, depth + 1)
        return self.combine(l, r)

    @ab.function
    def combine(self, l, r):
        return torch.tanh(self.compose(torch.cat([l, r])) / self.temp)

    @ab.program
    def encode(self, tree):
        return self.forward(tree)


def _binary(rng: random.Random, leaves: int) -> Node:
    if leaves <= 1:
        return Node(rng.randrange(VOCAB))
    k = rng.randint(1, leaves - 1)
    return Node(0, _binary(rng, k), _binary(rng, leaves - k))


# --- 7. closures and lambdas: an activation chosen by a lambda, a nested def capturing params -----------------

class ClosureParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.W = nn.Parameter(torch.randn(HIDDEN, HIDDEN) * 0.3)
        self.b = nn.Parameter(torch.zeros(HIDDEN))
        self.emb = nn.Parameter(torch.randn(VOCAB, HIDDEN))


@ab.program
def closure_rnn(tokens, p):
    act = lambda z: torch.tanh(z) * 0.9

    def step(h, t):
        return act(h @ p.W + p.emb[t] + p.b)

    h = torch.zeros(HIDDEN)
    outs = []
    for t in tokens:
        h = step(h, t)
        outs.append(h)
    best = [o for o in outs if o.sum() > 0]
    return h if len(best) == 0 else torch.stack(best).mean(0)


# --- 8. in-place writes into fresh tensors: x[0] = ..., slices, .clone() -------------------------------------------

class InplaceParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.lin = nn.Linear(HIDDEN, HIDDEN)
        self.emb = nn.Embedding(VOCAB, HIDDEN)


@ab.program
def inplace_features(tokens, p):
    h = torch.zeros(HIDDEN)
    for t in tokens:
        x = p.emb(torch.tensor(t))
        y = x.clone()
        y[0] = h.sum()
        y[1:3] = torch.tanh(x[1:3])
        h = torch.relu(p.lin(y)) + h * 0.5
    feats = torch.zeros(3)
    feats[0] = h.max()
    feats[1] = h.min()
    feats[2] = float(len(tokens))
    return h, feats


# --- 9. truncated BPTT: .detach() every k steps, a target computed under no_grad, grads must match ---------------

class TbpttParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.cell = nn.RNNCell(HIDDEN, HIDDEN)
        self.pred = nn.Linear(HIDDEN, HIDDEN)
        self.k = 3


@ab.program
def tbptt(tokens, p):
    h = torch.zeros(HIDDEN)
    loss = torch.zeros(())
    for i, t in enumerate(tokens):
        if i > 0 and i % p.k == 0:
            h = h.detach()
        x = p.emb(torch.tensor(t))
        with torch.no_grad():
            target = torch.tanh(x)
        loss = loss + ((p.pred(h) - target) ** 2).mean()
        h = p.cell(x, h)
    return loss, h


# --- 10. float64 features: normalise when the norm is large (bool(x > c)), a float64 linear map ---------------

class F64Params(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.lin = nn.Linear(5, 5).double()
        self.v = nn.Parameter(torch.randn(5, dtype=torch.float64))


@ab.program
def f64_normalizer(points, p):
    acc = torch.zeros(5, dtype=torch.float64)
    for x in points:
        if bool(x.norm() > 1.5):
            x = x / x.norm()
        y = p.lin(x)
        acc = acc + y * math.exp(-0.1 * float(len(points)))
    score = torch.dot(acc, p.v)
    return acc, score


def _points(rng: random.Random, size: int) -> list[torch.Tensor]:
    return [torch.randn(5, dtype=torch.float64) * rng.choice([0.3, 1.0, 2.0]) for _ in range(size)]


# --- 11. hierarchical document encoder: nested lists of tensors in a dict, dict result ---------------------------

class DocParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.word = nn.GRUCell(4, HIDDEN)
        self.sent = nn.GRUCell(HIDDEN, HIDDEN)
        self.att = nn.Linear(HIDDEN, 1)


@ab.function
def encode_sentence(words, p):
    h = torch.zeros(HIDDEN)
    for w in words:
        h = p.word(w, h)
    return h


@ab.program
def doc_encoder(doc, p):
    sents = [encode_sentence(s, p) for s in doc["sents"] if len(s) > 0]
    h = torch.zeros(HIDDEN)
    for s in sents:
        h = p.sent(s, h)
    if len(sents) == 0:
        return {"doc": h, "weights": torch.zeros(1)}
    S = torch.stack(sents)
    w = torch.softmax(p.att(S).squeeze(-1), dim=0)
    return {"doc": h + w @ S, "weights": w}


def _doc(rng: random.Random, size: int) -> dict:
    return {"sents": [[torch.randn(4) for _ in range(rng.randint(0, 4))] for _ in range(max(1, size // 2))]}


# --- 12. int tensors: argmax-driven pointer walk, an int attribute for hops, a list attribute of scales ---------

class HopParams(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.q = nn.Linear(HIDDEN, HIDDEN)
        self.hops = 3
        self.scales = [1.0, 0.5, 0.25]


@ab.program
def pointer_hops(mem, p):
    keys = mem["keys"]  # (n, H) float
    ids = mem["ids"]  # (n,) int64
    q = keys[0]
    visited = torch.zeros(keys.shape[0], dtype=torch.long)
    total = 0
    for hop in range(p.hops):
        scores = keys @ p.q(q)
        j = int(torch.argmax(scores))
        visited[j] += 1
        total = total + int(ids[j])
        q = q + keys[j] * p.scales[hop]
    return q, visited, total


def _memory(rng: random.Random, size: int) -> dict:
    n = max(2, size)
    return {"keys": torch.randn(n, HIDDEN), "ids": torch.tensor([rng.randrange(100) for _ in range(n)])}


# --- the registry ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Model:
    """One unseen model: its program, a factory of its shared arguments and one of its instances; ``check``
    (models drawing random numbers) replaces equality with the per-instance call by seed-independent facts."""

    program: Any
    params: Callable[[int], tuple]
    instance: Callable[[random.Random, int], Any]
    grad: bool = True
    method: bool = False  # an ``@ab.program`` method: the module (first shared argument) is ``self``
    check: Callable[[Any, Any], None] | None = None

    def __call__(self, instance: Any, *shared: Any) -> Any:
        """The plain per-instance call: the reference."""
        if self.method:
            return self.program(shared[0], instance, *shared[1:])
        return self.program(instance, *shared)

    def run(self, instances: list, *shared: Any, **kwargs: Any) -> list:
        """The batched run."""
        return self.program.run(instances, *shared, **kwargs)


def _module(cls: type) -> Callable[[int], tuple]:
    return lambda seed: (cls(seed).eval(),)


MODELS: dict[str, Model] = {
    "gated_tree": Model(gated_tree, _module(GatedSumParams), _dict_tree),
    "halting_reader": Model(halting_reader, _module(HaltParams), _tokens),
    "dag_encoder": Model(dag_encoder, _module(DagParams), _dag),
    "conv_classifier": Model(conv_classifier, _module(ConvParams), _id_tensor),
    "bi_tagger": Model(bi_tagger, _module(BiParams), _tokens),
    "recursive_net": Model(RecursiveNet.encode, _module(RecursiveNet), _binary, method=True),
    "closure_rnn": Model(closure_rnn, _module(ClosureParams), _tokens),
    "inplace_features": Model(inplace_features, _module(InplaceParams), _tokens),
    "tbptt": Model(tbptt, _module(TbpttParams), _tokens),
    "f64_normalizer": Model(f64_normalizer, _module(F64Params), _points),
    "doc_encoder": Model(doc_encoder, _module(DocParams), _doc),
    "pointer_hops": Model(pointer_hops, _module(HopParams), _memory),
}


# --- shrunk from int-tensor probes: a tensor made from a host list whose length differs per instance ------------

@ab.program
def tensor_of_host_list(tokens, p):
    ids = torch.tensor(tokens)
    return ids * 2 + p.W.shape[0]
