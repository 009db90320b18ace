"""Models for tests/test_dynamic.py: Python the static tier rejects (or that only runs in the dynamic tier),
written the way researchers write it. Each runs as plain Python per instance.
"""

# ruff: noqa
from __future__ import annotations

import collections

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab


class Params(nn.Module):
    def __init__(self, seed: int = 0, dtype: torch.dtype = torch.float64):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)
        self.b = nn.Parameter(torch.randn(4, generator=g) * 0.1)
        torch.manual_seed(seed)
        self.cell = nn.LSTMCell(4, 4)
        self.gru = nn.GRUCell(4, 4)
        self.to(dtype)


@ab.program
def try_except(tokens, p):
    """`try`/`except` is outside the static subset."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        try:
            x = p.emb[t]
        except IndexError:
            x = p.b
        h = torch.tanh(x @ p.W + h)
    return h


@ab.program
def lambdas_and_sorting(tokens, p):
    """A lambda kept in a variable and passed to `map`, and a value-dependent sort: host Python over tensors (a
    `key=lambda` of sorted/max/min, or `map(lambda ...)` consumed where it stands, alone is static:
    tests/test_host_containers.py, tests/test_port_constructs.py)."""
    hs = [torch.tanh(p.emb[t] @ p.W) for t in tokens]
    double = lambda h: h * 2.0  # noqa: E731
    hs = list(map(double, sorted(hs, key=lambda h: float(h.sum()))))
    return hs[0] - hs[-1]


@ab.program
def accumulate_in_place(tokens, p):
    """`acc += x` writes into the instance's own tensor, as PyTorch does; `acc[0] = ...` changes the view `head`
    of it too (the static tier takes a write that nothing else sees, not this one)."""
    acc = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        acc += torch.sigmoid(p.emb[t] @ p.W)
    head = acc[:2]
    acc[0] = acc.sum()
    return acc, head


@ab.program
def data_dependent_shape(tokens, p):
    """`torch.nonzero` has a shape only values decide: it runs eagerly for the instance."""
    h = torch.tanh(p.emb[tokens[0]] @ p.W)
    idx = torch.nonzero(h > 0).flatten()
    return h[idx].sum() if len(idx) else h.sum() * 0.0


@ab.program
def lstm_state(tokens, p):
    """An nn.LSTMCell state kept whole, started from None (`torch.lstm_cell` has no batching rule)."""
    state = None
    for t in tokens:
        state = p.cell(p.emb[t], state)
    h, c = state
    return {"h": h, "c": c, "n": len(tokens)}


Pair = collections.namedtuple("Pair", "first last")


@ab.program
def value_reads(tokens, p):
    """Tensor-dependent control flow and a namedtuple result."""
    h = p.emb[tokens[0]]
    steps = 0
    while h.norm() < 2.0 and steps < 5:
        h = h * 1.5 + torch.tanh(h @ p.W)
        steps += 1
    best = int(torch.argmax(h))
    return Pair(h, p.emb[best] * h.max().item())


@ab.program
def inplace_on_a_parameter(tokens, p):
    """Writing into a parameter: in plain Python every instance would see the others' writes."""
    p.b.add_(1.0)
    return p.b * tokens[0]


class Node:
    """A token's node of a chain: the model stores its state on it (``node.state``)."""

    def __init__(self, token: int, prev: "Node | None"):
        self.token = token
        self.prev = prev
        self.state = None


def chain(tokens: list[int]) -> Node:
    """The last node of a chain over ``tokens``."""
    node = None
    for t in tokens:
        node = Node(t, node)
    return node


@ab.program
def state_on_nodes(last, p):
    """`node.state = ...` on the instance's own objects, read back as `node.prev.state`."""
    nodes = []
    node = last
    while node is not None:
        nodes.append(node)
        node = node.prev
    for node in reversed(nodes):
        h = node.prev.state if node.prev is not None else p.b
        node.state = torch.tanh(p.emb[node.token] @ p.W + h)
    return last.state


class Collecting(Params):
    """Params whose module collects per-step outputs in ``self.outputs`` during a run."""

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.outputs = []


@ab.program
def outputs_on_the_module(tokens, p):
    """`p.outputs = []` then `p.outputs.append(h)` each step, with a value read between: instances must not
    see each other's appends."""
    p.outputs = []
    h = p.b
    for t in tokens:
        h = torch.tanh(p.emb[t] @ p.W + h)
        if h.sum() > 0:  # a value read: the fiber waits here
            h = -h
        p.outputs.append(h)
    return torch.stack(p.outputs)


@ab.program
def appends_to_the_module_late(tokens, p):
    """Changes the module's list only after a value read: instances started meanwhile could see it."""
    h = p.b
    for t in tokens:
        h = torch.tanh(p.emb[t] @ p.W + h)
    if h.sum() > 0:
        h = -h
    p.outputs.append(h)
    return h


@ab.program
def reads_between_ops(tokens, p):
    """A value read (`.tolist()`) between operators: every instance's operators are still recorded."""
    h = p.b
    picked = []
    for t in tokens:
        h = torch.tanh(p.emb[t] @ p.W + h)
        picked.append(max(range(4), key=lambda k: h.tolist()[k]))
    return h, picked


@ab.program
def gru_cell_steps(tokens, p):
    """An `nn.GRUCell` on 1-D inputs: the recurrent-cell batching rule, not a loop over rows."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        h = p.gru(p.emb[t], h)
    return h
