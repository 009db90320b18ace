"""Models for tests/test_starred_args.py: calls with starred arguments (`f(*pair, q)`, `f(**kw)`) and functions
taking `*args` (issue 18, section 2), each the way a researcher writes it. Each runs as plain Python per instance.
"""

# ruff: noqa
from __future__ import annotations

import math

import torch
from torch import nn

import acrobat as ab
from tests import container_progs


class Pair(nn.Module):
    """A module of two inputs (`forward(self, a, b)`), called as `p.mix(*pair)`."""

    def __init__(self, g: torch.Generator):
        super().__init__()
        self.W = nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)

    def forward(self, a, b):
        return torch.tanh(a @ self.W + b)


class Params(container_progs.Params):
    """The parameters of container_progs, with a position table, an `nn.Linear` and a module of two inputs."""

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        g = torch.Generator().manual_seed(seed + 1)
        self.pos = nn.Parameter(torch.randn(8, generator=g) * 0.1)
        self.lin = nn.Linear(4, 4)
        self.mix = Pair(g)


@ab.function
def score(i, s, doc, p):
    return (s @ p.W) @ torch.tanh(doc) + p.pos[i]


@ab.function
def encode(t, p):
    h = torch.tanh(p.emb[t] @ p.W)
    return h, torch.sigmoid(h)


@ab.function
def total(first, *rest):
    acc = first
    for r in rest:
        acc = acc + r
    return acc * len(rest)


ORDER: list = []
"""What ``note`` saw, in the order it ran: (instance key, value)."""


def note(key, x):
    ORDER.append((key, x))
    return x


@ab.program
def tuple_display(tokens, p):
    a, b = p.emb[tokens[0]], p.emb[tokens[-1]]
    pair = (len(tokens) % 8, a)
    out = score(*pair, b, p)
    return out, torch.maximum(*(a, b)), p.mix(*(a, b))


@ab.program
def returned_tuple(tokens, p):
    h = score(*encode(tokens[0], p)[:0], 1, *encode(tokens[-1], p), p)
    hs = [p.mix(*encode(t, p)) for t in tokens]
    return h, hs


@ab.program
def chunks_unpacked(tokens, p):
    x = torch.cat([p.emb[tokens[0]], p.emb[tokens[-1]]])
    m = torch.maximum(*torch.chunk(x, 2))
    parts = torch.chunk(torch.tanh(x), 2)
    return m, p.mix(*parts), torch.add(*parts, alpha=0.5)


@ab.program
def loop_over_pairs(tokens, p):
    vecs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    doc = torch.stack(vecs).mean(0)
    pairs = list(enumerate(vecs))
    scores = [score(*pair, doc, p) for pair in pairs]
    acc = doc
    for pair in pairs:
        acc = acc + p.mix(*pair[1:], doc)
    return torch.stack(scores), acc


@ab.program
def module_unpacked(tokens, p):
    xs = (torch.tanh(p.emb[tokens[0]]),)
    a = p.lin(*xs)
    b = p.lin(*xs[:1], **{})
    return a, b


@ab.program
def host_calls(tokens, p):
    bounds = (0, len(tokens))
    sizes = (len(tokens), 3)
    h = p.emb[tokens[0]]
    for i in range(*bounds):
        h = torch.tanh(h @ p.W) + max(*sizes) * math.hypot(*sizes)
    return h, min(*sizes)


@ab.program
def keywords_unpacked(tokens, p):
    a, b = p.emb[tokens[0]], p.emb[tokens[-1]]
    kw = {"doc": b, "p": p}
    out = score(1, a, **kw)
    both = score(**{"i": 2, "s": b, "doc": a, "p": p})
    return out + both, torch.softmax(a, **{"dim": -1}), torch.add(a, **{"other": b}, alpha=2.0)


@ab.program
def function_taking_args(tokens, p):
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    pair = (hs[0], hs[-1])
    return total(hs[0]), total(*pair), total(hs[0], *pair, hs[-1])


def host_sum(*xs):
    return sum(xs)


@ab.program
def evaluation_order(tokens, p):
    k = id(tokens)
    pair = (note(k, tokens[0]), note(k, 2))
    n = host_sum(note(k, 1), *pair, note(k, 3))
    hs = (note(k, 5) * p.emb[tokens[0]], p.emb[tokens[-1]])
    return total(note(k, 4) * p.emb[n % 10], *hs, note(k, 6) * p.emb[tokens[-1]])


@ab.program
def sizes_per_call(tokens, p):
    a, b = p.emb[tokens[0]], p.emb[tokens[-1]]
    return forward_all((a,)), forward_all((a, b)), forward_all((a, b, a * b))


@ab.function
def forward_all(xs):
    return total(*xs)


@ab.program
def list_unpacked(tokens, p):
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    return total(p.emb[tokens[0]], *hs)


def combine(*hs):
    """The model's own undecorated helper over however many states it is given."""
    if not hs:
        return None
    return sum(hs) / len(hs) + torch.stack(hs).amax(0) + hs[0] * hs[-1]


@ab.program
def list_unpacked_into_a_helper(tokens, p):
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    return (combine(*[encode(t, p)[0] for t in tokens[:3]]), combine(*hs),
            combine(*[h for h, t in zip(hs, tokens) if t > 4]))


@ab.function
def growing(first, *rest):
    rest = rest + (first,)
    return sum(rest)


@ab.program
def list_unpacked_and_rebound(tokens, p):
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    return growing(p.emb[tokens[0]], *hs)


@ab.function
def total_of_list(first, rest):
    acc = first
    for r in rest:
        acc = acc + r
    return acc * len(rest)


@ab.program
def list_passed(tokens, p):
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    return total_of_list(p.emb[tokens[0]], hs)


@ab.program
def unpacked_after_a_call(tokens, p):
    return total(torch.tanh(p.emb[tokens[0]]), *encode(tokens[-1], p))


@ab.program
def unpacked_after_a_call_fixed(tokens, p):
    args = encode(tokens[-1], p)
    return total(torch.tanh(p.emb[tokens[0]]), *args)


@ab.function
def cell_state(t, p):
    """A (c, h) pair of one token, as a tree cell returns it."""
    h = torch.tanh(p.emb[t] @ p.W)
    return h * 0.5, h


@ab.program
def transposed_pairs(tokens, p):
    """The child-sum TreeLSTM's `child_c, child_h = zip(*states)` over a per-instance number of (c, h) pairs; the
    sequences summed by stacking and by a loop, and returned (tuples, as Python gives them)."""
    states = [cell_state(t, p) for t in tokens]
    cs, hs = zip(*states)
    h_sum = torch.stack(hs).sum(0)
    c_sum = torch.zeros(4)
    for c in cs:
        c_sum = c_sum + c
    return h_sum + c_sum, hs


@ab.program
def transposed_triples_into_two(tokens, p):
    """`a, b = zip(*xs)` of 3-tuples: Python raises ValueError (too many values to unpack)."""
    xs = [(p.emb[t], p.emb[t], t) for t in tokens]
    a, b = zip(*xs)  # M:unzip_arity
    return a[0]


@ab.program
def zip_star_in_a_loop(tokens, p):
    """`zip(*xs)` iterated: not the unpacking form, rejected with it."""
    xs = [(p.emb[t], p.b) for t in tokens]
    out = p.b
    for col in zip(*xs):  # M:unzip_loop
        out = out + col[0]
    return out


@ab.program
def transposed_empty(tokens, p):
    """`zip(*xs)` of an empty list: Python raises ValueError (not enough values to unpack)."""
    xs = [cell_state(t, p) for t in tokens if t > 100]
    cs, hs = zip(*xs)  # M:unzip_empty
    return cs[0]
