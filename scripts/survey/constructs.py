"""Issue 18's section 2, construct by construct: one small program each, written as users write it.

    PYTHONPATH=. python scripts/survey/constructs.py [--batch 6] [--seed 0]

Each program below uses one construct the issue names (methods as program functions, per-node results stored
on objects, modules and weights chosen by data, dense tensor code over variable-length data, host Python over
containers of tensors, inferred concurrency) on token lists or binary trees, decorators only. The table says
whether the static tier takes it (``Options(strict=True)``; else the first reason), which tier the default run
used, and whether the default run equals plain per-instance calls (``scripts/survey/survey.py``'s ``try_one``).
The issue's closing note quotes the table. No timings.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

D = 6
V = 20


class Node:
    """A binary tree node: a word id at a leaf, two children inside."""

    def __init__(self, word: int, kids: list["Node"]):
        self.word, self.kids, self.state = word, kids, None


def tree(rng: random.Random, leaves: int) -> Node:
    """A random binary tree of ``leaves`` leaves."""
    if leaves == 1:
        return Node(rng.randrange(1, V), [])
    k = rng.randint(1, leaves - 1)
    return Node(0, [tree(rng, k), tree(rng, leaves - k)])


def postorder(n: Node) -> list[Node]:
    """The nodes of ``n``'s subtree, children first."""
    return [m for k in n.kids for m in postorder(k)] + [n]


class M(nn.Module):
    """Every weight the programs use: an embedding, linear maps, experts, a module dict, a GRU cell."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.lin = nn.Linear(D, D)
        self.comp = nn.Linear(2 * D, D)
        self.cell = nn.GRUCell(D, D)
        self.experts = nn.ModuleList(nn.Linear(D, D) for _ in range(3))
        self.mods = nn.ModuleDict({"a": nn.Linear(D, D), "b": nn.Linear(D, D)})
        self.W = nn.Parameter(torch.randn(4, D, D) * 0.3)
        self.q = nn.Parameter(torch.randn(D))
        self.d = D
        self.outputs: list = []

    def embed(self, t):
        return torch.tanh(self.emb(torch.tensor(t)))

    def forward(self, n):
        if not n.kids:
            return self.embed(n.word)
        return torch.tanh(self.comp(torch.cat([self.forward(n.kids[0]), self.forward(n.kids[1])])))


# -- methods as program functions ---------------------------------------------------------------------------------

@ab.program
def method_call(toks, m):
    return sum(m.embed(t) for t in toks)


@ab.program
def forward_recursion(n, m):
    return m(n)


# -- per-node results stored on objects ---------------------------------------------------------------------------

@ab.program
def node_state(n, m):
    for x in postorder(n):
        if x.kids:
            x.state = torch.tanh(m.comp(torch.cat([x.kids[0].state, x.kids[1].state])))
        else:
            x.state = m.embed(x.word)
    return n.state


@ab.program
def module_outputs(toks, m):
    m.outputs = []
    h = torch.zeros(D)
    for t in toks:
        h = m.cell(m.emb(torch.tensor(t)).unsqueeze(0), h.unsqueeze(0)).squeeze(0)
        m.outputs.append(h)
    return torch.stack(m.outputs).sum(0)


# -- modules and weights chosen by data ---------------------------------------------------------------------------

@ab.program
def module_list_by_host_int(toks, m):
    h = torch.zeros(D)
    for t in toks:
        h = torch.tanh(m.experts[t % 3](h + m.emb(torch.tensor(t))))
    return h


@ab.program
def module_list_by_computed_int(toks, m):
    h = m.embed(toks[0])
    for t in toks:
        k = int(torch.argmax(h[:3]))
        h = torch.tanh(m.experts[k](h) + m.emb(torch.tensor(t)))
    return h


@ab.program
def module_dict_by_string(toks, m):
    h = torch.zeros(D)
    for t in toks:
        h = torch.relu(m.mods["a" if t % 2 else "b"](h) + m.emb(torch.tensor(t)))
    return h


@ab.program
def weight_by_instance_int(toks, m):
    h = m.embed(toks[0])
    for t in toks:
        h = torch.tanh(m.W[t % 4] @ h)
    return h


# -- dense tensor code over variable-length data ------------------------------------------------------------------

@ab.program
def emb_of_token_tensor(toks, m):
    return m.emb(torch.tensor(toks)).sum(0)


@ab.program
def self_similarity(toks, m):
    S = torch.stack([m.embed(t) for t in toks])
    return torch.softmax(S @ S.T, dim=-1).sum(0)


@ab.program
def attention_transpose(toks, m):
    X = torch.stack([m.embed(t) for t in toks])
    Q, K = m.lin(X), X
    att = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(m.d), dim=-1)
    return (att @ X).mean(0)


@ab.program
def softmax_last_axis(toks, m):
    S = torch.stack([m.embed(t) for t in toks])
    alpha = torch.softmax(S @ m.q, dim=-1)
    return alpha @ S


@ab.program
def keepdim_mean(toks, m):
    S = torch.stack([m.embed(t) for t in toks])
    return (S - S.mean(0, keepdim=True)).sum(0)


@ab.program
def topk_rows(toks, m):
    S = torch.stack([m.embed(t) for t in toks])
    k = min(2, len(toks))
    idx = torch.topk(S @ m.q, k).indices.tolist()
    return sum(S[i] for i in idx)


@ab.program
def layer_norm_normalize(toks, m):
    h = sum(m.embed(t) for t in toks)
    return F.normalize(F.layer_norm(h, (m.d,)), dim=0)


@ab.program
def where_minimum(toks, m):
    h = sum(m.embed(t) for t in toks)
    return torch.minimum(torch.where(h > 0, h, -h), torch.ones(D) * 0.5)


@ab.program
def column_of_stack(toks, m):
    S = torch.stack([m.embed(t) for t in toks])
    return S[:, 0].sum()


@ab.program
def tolist_of_scores(toks, m):
    S = torch.stack([m.embed(t) for t in toks])
    scores = (S @ m.q).tolist()
    best = max(range(len(scores)), key=lambda i: scores[i])
    return S[best]


@ab.program
def cat_of_variable_list(toks, m):
    vs = [m.embed(t) for t in toks]
    return torch.cat(vs).sum()


# -- host Python over containers of tensors -----------------------------------------------------------------------

@ab.program
def list_truthiness(toks, m):
    buf = [m.embed(t) for t in toks]
    h = torch.zeros(D)
    while buf:
        h = torch.tanh(h + buf.pop())
    return h


@ab.program
def sorted_with_key(toks, m):
    pairs = [(t, m.embed(t)) for t in toks]
    best = max(pairs, key=lambda p: p[0])
    ordered = sorted(pairs, key=lambda p: -p[0])
    return best[1] + ordered[-1][1]


@ab.program
def list_reverse(toks, m):
    hs = [m.embed(t) for t in toks]
    hs.reverse()
    h = torch.zeros(D)
    for x in hs:
        h = torch.tanh(m.lin(h) + x)
    return h


@ab.program
def chained_assignment_chunk(toks, m):
    h = c = torch.zeros(D)
    for t in toks:
        a, b = tuple(torch.chunk(m.comp(torch.cat([h, m.emb(torch.tensor(t))])), 2))
        c = c + torch.cat([a, b])
        h = torch.tanh(c)
    return h


@ab.program
def sqrt_of_attribute(toks, m):
    return sum(m.embed(t) for t in toks) / math.sqrt(m.d)


def _combine(*hs):
    return sum(hs)


@ab.program
def star_args(toks, m):
    return _combine(*[m.embed(t) for t in toks[:3]])


@ab.program
def tuples_holding_lists(toks, m):
    stack = [(m.embed(t), [t]) for t in toks]
    h, words = stack[0]
    for x, ws in stack[1:]:
        h = torch.tanh(h + x)
        words = words + ws
    return h, words


@ab.program
def self_outputs_append(n, m):
    m.outputs = []
    for x in postorder(n):
        m.outputs.append(m.embed(x.word))
    return torch.stack(m.outputs).mean(0)


# -- concurrency inferred -----------------------------------------------------------------------------------------

@ab.function
def rec(n, m):
    if not n.kids:
        return m.embed(n.word)
    return torch.tanh(m.comp(torch.cat([rec(n.kids[0], m), rec(n.kids[1], m)])))


@ab.program
def two_calls_in_one_expression(n, m):
    return rec(n, m)


@ab.function
def rec_loop(n, m):
    h = m.embed(n.word)
    for k in n.kids:
        h = h + rec_loop(k, m)
    return torch.tanh(h)


@ab.program
def calls_in_a_loop_accumulated(n, m):
    return rec_loop(n, m)


SECTIONS: dict[str, list[Callable]] = {
    "methods as program functions": [method_call, forward_recursion],
    "per-node results stored on objects": [node_state, module_outputs, self_outputs_append],
    "modules and weights chosen by data": [module_list_by_host_int, module_list_by_computed_int,
                                           module_dict_by_string, weight_by_instance_int],
    "dense tensor code over variable-length data": [emb_of_token_tensor, self_similarity, attention_transpose,
                                                    softmax_last_axis, keepdim_mean, topk_rows, layer_norm_normalize,
                                                    where_minimum, column_of_stack, tolist_of_scores,
                                                    cat_of_variable_list],
    "host Python over containers of tensors": [list_truthiness, sorted_with_key, list_reverse,
                                               chained_assignment_chunk, sqrt_of_attribute, star_args,
                                               tuples_holding_lists],
    "concurrency inferred": [two_calls_in_one_expression, calls_in_a_loop_accumulated],
}
TREES = {forward_recursion, node_state, self_outputs_append, two_calls_in_one_expression, calls_in_a_loop_accumulated}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=6, help="instances per batch (default 6)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and instances (default 0)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from survey import try_one

    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    m = M()
    toks = [[rng.randrange(1, V) for _ in range(rng.randint(1, 7))] for _ in range(args.batch)]
    print("| section | construct | static tier (strict) | default run | equals plain calls |\n|---|---|---|---|---|")
    rows = []
    for section, progs in SECTIONS.items():
        for prog in progs:
            batch = [tree(random.Random(args.seed + i), rng.randint(1, 6)) for i in range(args.batch)] \
                if prog in TREES else toks
            rows.append((section, prog.__name__, *try_one(prog, m, batch)))
            print("| " + " | ".join(rows[-1]) + " |", flush=True)
    print(f"\n{sum(r[2] == 'takes it' for r in rows)} of {len(rows)} in the static tier; "
          f"{sum(r[4] == 'yes' for r in rows)} of {len(rows)} equal plain calls by default")


if __name__ == "__main__":
    main()
