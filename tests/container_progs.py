"""Models for tests/test_host_containers.py: host Python over containers of tensors (issue 18, section 2),
each the way a researcher writes it. Each runs as plain Python per instance.
"""

# ruff: noqa
from __future__ import annotations

import torch
from torch import nn

import acrobat as ab


class Params(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)
        self.W3 = nn.Parameter(torch.randn(4, 12, generator=g) * 0.5)
        self.W2 = nn.Parameter(torch.randn(8, 4, generator=g) * 0.5)
        self.b = nn.Parameter(torch.randn(4, generator=g) * 0.1)
        self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.hidden = 4


@ab.program
def chained_assignment(tokens, p):
    h = c = torch.zeros(p.hidden)
    for t in tokens:
        h = torch.tanh(p.emb[t] @ p.W + c)
        c = h + c
    return h, c


@ab.program
def reversed_in_place(tokens, p):
    xs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    xs.reverse()
    h = p.b
    for x in xs:
        h = torch.tanh(x + h @ p.W)
    return h


@ab.program
def list_truth(tokens, p):
    buf = [p.emb[t] for t in tokens]
    stack = []
    h = p.b
    while buf:
        x = buf.pop()
        top = stack[-1] if stack else p.b
        h = torch.tanh(x @ p.W + top)
        stack.append(h)
    return h, len(stack)


@ab.program
def tuple_of_chunks(tokens, p):
    h = p.b
    for t in tokens:
        i, f, o = tuple(torch.chunk(p.emb[t] @ p.W3, 3))
        h = torch.sigmoid(o) * torch.tanh(torch.sigmoid(i) + torch.sigmoid(f) * h)
    return h


@ab.program
def values_and_indices(tokens, p):
    S = torch.stack([torch.tanh(p.emb[t] @ p.W) for t in tokens])  # (T, 4), T per instance
    best = S.max(dim=0)
    M = torch.outer(best.values, p.b)  # (4, 4)
    v, i = torch.max(M, 1)
    top = torch.topk(v, 2)
    return best.values, best.indices, v + i, top.values, top.indices.tolist()


@ab.function
def step(h, p):
    return [torch.tanh(x @ p.W + p.b) for x in h]


@ab.program
def comprehension_rebound(tokens, p):
    h = [p.emb[t] for t in tokens]
    h = step(h, p)
    h = step(h, p)
    return torch.stack(h).sum(0)


@ab.program
def expert_by_token(tokens, p):
    h = p.b
    for t in tokens:
        h = torch.tanh(p.experts[t % 3](h) + p.emb[t])
    return h


@ab.program
def expert_held(tokens, p):
    h = p.b
    for t in tokens:
        m = p.experts[t % 3]
        h = torch.tanh(m(h) + p.emb[t])
    return h


class Routed(Params):
    """``Params`` with a gate over ``n_experts`` experts (``nn.ModuleList``) and modules by name (``nn.ModuleDict``)."""

    def __init__(self, seed: int = 0, n_experts: int = 3):
        super().__init__(seed)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(n_experts))
            self.gate = nn.Linear(4, n_experts)
            self.mods = nn.ModuleDict({"lin": nn.Linear(4, 4), "act": nn.Sequential(nn.Linear(4, 4), nn.Tanh()),
                                       "skip": nn.Identity()})
        self.names = ["lin", "act", "skip"]


@ab.program
def expert_by_len(tokens, p):
    h = p.b
    for t in tokens:
        h = torch.tanh(p.experts[t % len(p.experts)](h) + p.emb[t])
    return h


@ab.program
def expert_by_argmax(tokens, p):
    h = p.b
    for t in tokens:
        k = int(torch.argmax(p.gate(h)))
        h = torch.tanh(p.experts[k](h) + p.emb[t])
    return h


@ab.function
def pick_expert(h, p):
    return int(torch.argmax(p.gate(h)))


@ab.program
def expert_by_callee(tokens, p):
    h = p.b
    for t in tokens:
        h = torch.tanh(p.experts[pick_expert(h, p)](h) + p.emb[t])
    return h


@ab.program
def experts_by_topk(tokens, p):
    h = p.b
    for t in tokens:
        x = torch.tanh(p.emb[t] + h)
        y = x
        scores, idx = torch.topk(p.gate(x), 2)
        w = torch.softmax(scores, dim=-1)
        for i, e in enumerate(idx.tolist()):
            y = y + w[i] * torch.relu(p.experts[e](x))
        h = y
    return h


@ab.program
def module_by_name(tokens, p):
    h = p.b
    for t in tokens:
        h = p.mods[p.names[t % 3]](h + p.emb[t])
    return h


@ab.program
def expert_negative(tokens, p):
    h = p.b
    for t in tokens:
        h = torch.tanh(p.experts[t % 3 - 3](h) + p.experts[-1 - t % 2](p.emb[t]))
    return h


@ab.function
def expert_tree_encode(node, p):
    if node.is_leaf:
        return torch.tanh(p.experts[node.word_id % 3](p.emb[node.word_id % 10]))
    h = torch.tanh(torch.cat([expert_tree_encode(node.left, p), expert_tree_encode(node.right, p)]) @ p.W2)
    return p.experts[int(torch.argmax(p.gate(h)))](h)


@ab.program
def expert_tree(tree, p):
    return expert_tree_encode(tree, p)


@ab.program
def expert_out_of_range(tokens, p):
    h = p.b
    for t in tokens:
        h = torch.tanh(p.experts[t](h))
    return h


@ab.program
def module_missing(tokens, p):
    h = p.b
    for t in tokens:
        h = p.mods[p.names[t % 3] if t < 9 else "gone"](h)
    return h


@ab.function
def encode(node, p):
    if node.is_leaf:
        return torch.tanh(p.emb[node.word_id % 10])
    return torch.tanh(torch.cat([encode(node.left, p), encode(node.right, p)]) @ p.W2)


@ab.function
def encode_annotated(node, p):
    if node.is_leaf:
        return torch.tanh(p.emb[node.word_id % 10])
    left, right = ab.concurrent(encode_annotated(node.left, p), encode_annotated(node.right, p))
    return torch.tanh(torch.cat([left, right]) @ p.W2)


@ab.program
def two_calls_in_one_expression(tree, p):
    return encode(tree, p)


@ab.program
def two_calls_annotated(tree, p):
    return encode_annotated(tree, p)


@ab.function
def compose(left, right, p):
    return torch.tanh(torch.cat([left, right]) @ p.W2)


@ab.function
def encode_composed(node, p):
    if node.is_leaf:
        return torch.tanh(p.emb[node.word_id % 10])
    return compose(encode_composed(node.left, p), encode_composed(node.right, p), p)


@ab.program
def two_calls_as_arguments_of_a_call(tree, p):
    """The two calls are the arguments of a program call themselves (not inside an operator)."""
    return encode_composed(tree, p)


@ab.function
def run_rnn(xs, h, p):
    states = []
    for x in xs:
        h = torch.tanh(x @ p.W + h)
        states.append(h)
    return states


@ab.program
def returned_list_changed(tokens, p):
    """Viterbi-style bidirectional states: a list a callee made and returned, reversed and grown by the caller,
    and a comprehension over `zip` of two callee results."""
    xs = [p.emb[t] for t in tokens]
    forward = run_rnn(xs, p.b, p)
    rev = list(xs)
    rev.reverse()
    backward = run_rnn(rev, p.b, p)
    backward.reverse()
    backward.append(p.b * 2.0)
    return torch.stack([torch.cat([f, b]) for f, b in zip(forward, backward)]), len(backward)


@ab.function
def keep(xs, h):
    xs.append(h)
    return xs


@ab.program
def returned_argument_changed(tokens, p):
    """A callee returns the caller's own list: the caller's change through the result is also a change of its
    argument, which the analysis does not follow: rejected, not wrong."""
    xs = [p.emb[t] for t in tokens]
    ys = keep(xs, p.b)
    ys.append(torch.tanh(p.b))
    return torch.stack(xs), torch.stack(ys)


@ab.program
def ranked_by_key(tokens, p):
    """Beam-search and Viterbi host code: `sorted`/`max`/`min` with `key=lambda` over host numbers (with ties)
    and over tuples that hold tensors and lists."""
    hyps = [(float(t % 3), [t], torch.tanh(p.emb[t] @ p.W)) for t in tokens]
    best = max(hyps, key=lambda c: c[0] - 0.1 * len(c[1]))
    first = min(range(len(tokens)), key=lambda k: tokens[k])
    beam = sorted(hyps, key=lambda c: c[0], reverse=True)[:2]
    order = sorted(tokens, key=lambda t: t % 2)
    return best[2] + p.emb[tokens[first]], torch.stack([c[2] for c in beam]), order, tokens.index(tokens[-1])


@ab.program
def sorted_by_value(tokens, p):
    """A value-dependent sort: the key reads each tensor's value (a value read per element, §4.2)."""
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    hs = sorted(hs, key=lambda h: float(h.sum()))
    return hs[0] - hs[-1]
