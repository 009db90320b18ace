"""Models for tests/test_tensor_rows.py: loops over a tensor's rows (`for h in x`, `enumerate(x, start=2)`,
`zip(w, idx.tolist())`, `reversed(x)`, `list(x)`; issue 18, section 2), each the way a researcher writes it.
Each runs as plain Python per instance. An instance is a list of token ids; every instance of a batch has as
many as the others (the rows of one per-instance tensor agree on their number across a batch).
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F

import acrobat as ab
from tests.container_progs import Params  # noqa: F401  (emb (10, 4), W (4, 4), b (4,), experts: 3 x Linear(4, 4))


@ab.function
def table(tokens, p):
    """(T, 4): one row per token, from the token ids as a tensor."""
    return torch.outer(torch.tanh(torch.tensor(tokens, dtype=torch.float32)), p.b) + p.b


@ab.program
def for_rows(tokens, p):
    acc = p.b
    for h in table(tokens, p):
        acc = torch.tanh(h @ p.W + acc)
    return acc


@ab.program
def enumerate_start(tokens, p):
    acc = p.b
    for i, h in enumerate(table(tokens, p), start=2):
        acc = torch.tanh(h * i + acc @ p.W)
    return acc


@ab.program
def enumerate_positional_start(tokens, p):
    acc, seen = p.b, []
    for pair in enumerate(table(tokens, p), -1):
        seen.append(pair[0])
        acc = acc + pair[1] * pair[0]
    return acc, seen


@ab.program
def zip_unequal(tokens, p):
    """`zip` of the rows with a host list of a per-instance length, and with a tensor of 3 rows: it stops at
    its shortest argument."""
    x = table(tokens, p)
    acc = p.b
    for h, k in zip(x, range(sum(tokens) % 4)):
        acc = torch.tanh(h * k + acc)
    for h, g in zip(x, torch.tanh(p.W[:3])):
        acc = acc + h * g
    return acc


@ab.program
def zip_tensor_first_and_last(tokens, p):
    x = table(tokens, p)
    acc = p.b
    for t, h, r in zip(tokens, x, reversed(x @ p.W)):
        acc = torch.tanh(h * t + r + acc)
    return acc


@ab.program
def reversed_rows(tokens, p):
    acc = p.b
    for h in reversed(table(tokens, p)):
        acc = torch.tanh(h @ p.W + acc)
    return acc


@ab.program
def list_of_rows(tokens, p):
    rows = list(table(tokens, p))
    rows.append(p.b)
    return torch.stack(rows).sum(0), len(rows)


@ab.program
def rows_in_a_comprehension(tokens, p):
    hs = [torch.tanh(h @ p.W) for h in table(tokens, p)]
    return sum(hs) + p.b


@ab.program
def scalars_and_nested(tokens, p):
    """A 1-D tensor's rows are 0-d tensors; the rows of each row, inside a loop over rows."""
    w = F.softmax(torch.tanh(p.W[0] * len(tokens)), dim=-1)
    acc = p.b
    for v in w:
        acc = acc * v + p.b
    for h in table(tokens, p):
        for v in h:
            acc = acc + v * h
    return acc


@ab.program
def break_on_value(tokens, p):
    acc = p.b
    for h in table(tokens, p):
        if h.sum().item() > 1.0:
            break
        acc = torch.tanh(h + acc)
    return acc


@ab.function
def total(xs, p):
    """The sum of ``xs`` and ``p.b``: ``xs`` a tensor (its rows) in one call, a list of tensors in another."""
    acc = p.b
    for x in xs:
        acc = acc + x
    return acc


@ab.program
def list_in_one_call_tensor_in_another(tokens, p):
    return total(table(tokens, p), p) * total([p.emb[t] for t in tokens], p)


@ab.function
def route(x, p):
    scores, idx = torch.topk(x @ p.W, 2)
    y = p.b
    for w, e in zip(F.softmax(scores, dim=-1), idx.tolist()):
        y = y + w * torch.relu(p.experts[e % 3](x))
    return y


@ab.program
def top2_router(tokens, p):
    """examples/moe_router's loop: the softmaxed top-2 scores zipped with the experts chosen."""
    h = p.b
    for t in tokens:
        h = torch.tanh(route(p.emb[t], p) + h)
    return h


@ab.program
def zero_d_rows(tokens, p):
    """Iterates a 0-d tensor in instances whose first token is 0: PyTorch raises TypeError there."""
    x = torch.tanh(p.W[tokens[0] % 4])
    x = x.sum() if tokens[0] == 0 else x
    acc = p.b
    for v in x:
        acc = acc * v
    return acc


@ab.program
def rows_under_a_condition(tokens, p):
    rows = list(table(tokens, p)) if tokens[0] > 3 else [p.b]
    return torch.stack(rows).sum(0)


@ab.program
def shared_weight_rows(tokens, p):
    """A weight's rows (the same for every instance), zipped with a list of tensors and looped over."""
    acc = p.b
    for x, w in zip([p.emb[t] for t in tokens], p.W):
        acc = torch.tanh(acc + x * w)
    for w in p.W:
        acc = acc * w
    return acc


@ab.program
def effects_before_the_rows(tokens, p):
    """What the statement runs before the rows (a pop) runs first, as in Python: the rows see the shorter list."""
    y = torch.outer(torch.tanh(p.emb[tokens[0]]), p.b)
    return total([p.emb[tokens.pop()]], p) + torch.stack(list(y * len(tokens))).sum(0)


@ab.program
def rows_in_concurrent_calls(tokens, p):
    x = table(tokens, p)
    a, b = ab.concurrent(total(list(x), p), total(reversed(x * 2), p))
    return a * b


@ab.program
def rows_into_a_chosen_module(tokens, p):
    """The rows built as an argument of a module chosen per instance: the choice stays where it is."""
    return p.experts[len(tokens) % 3](sum(list(table(tokens, p))) + p.b)
