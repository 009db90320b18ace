"""Models that provoke the compile errors whose messages name a fix, each beside that fix applied
(used by test_messages.py). Every program takes ``(toks, p)``: ``toks`` a list of token ids, ``p`` a
``Params``. The offending lines carry ``# M:<key>``."""

# ruff: noqa
import math

import torch

import acrobat as ab
from tests.dynamic_progs import Params  # emb (10, 4), W (4, 4), b (4,)


class Pair:
    """A plain class (a namedtuple is a tuple the static tier builds; this constructor is host Python)."""

    def __init__(self, first, last):
        self.first, self.last = first, last


@ab.function
def double_fixed(x):
    return x * 2


@ab.program
def ragged_transpose(toks, p):
    S = torch.stack([p.emb[t] for t in toks])
    return torch.softmax(S.T, dim=-1)  # M:ragged_T


@ab.program
def ragged_transpose_fixed(toks, p):  # the fix: loop over the list
    return [torch.softmax(p.emb[t], dim=-1) for t in toks]


@ab.program
def ragged_shape(toks, p):
    S = torch.stack([p.emb[t] for t in toks])
    return S.sum(0) / S.shape[1]  # M:ragged_shape


@ab.program
def ragged_shape_fixed(toks, p):  # the fix: read an item's shape (the list's length is `len`, or `S.shape[0]`)
    xs = [p.emb[t] for t in toks]
    return torch.stack(xs).sum(0) / xs[0].shape[0]


@ab.program
def sqrt_of_tensor(toks, p):
    h = p.emb[toks[0]] @ p.W
    return h / math.sqrt(h.abs() + 1.0)  # M:sqrt


@ab.program
def sqrt_of_tensor_fixed(toks, p):
    h = p.emb[toks[0]] @ p.W
    return h / torch.sqrt(h.abs() + 1.0)


@ab.program
def sqrt_of_value(toks, p):
    h = p.emb[toks[0]] @ p.W
    return h / math.sqrt(h.norm() + 1.0)  # M:sqrt_value


@ab.program
def sqrt_of_value_fixed(toks, p):  # the other fix: read the value first
    h = p.emb[toks[0]] @ p.W
    return h / math.sqrt(h.norm().item() + 1.0)


@ab.program
def class_result(toks, p):
    return Pair(p.emb[toks[0]], p.emb[toks[-1]])  # M:class


@ab.program
def class_result_fixed(toks, p):
    return (p.emb[toks[0]], p.emb[toks[-1]])


@ab.program
def fill(toks, p):
    h = p.emb[toks[0]] @ p.W
    h.fill_(0.5)  # M:fill
    return h


@ab.program
def fill_fixed(toks, p):
    h = p.emb[toks[0]] @ p.W
    h = torch.full_like(h, 0.5)
    return h


@ab.program
def requires_grad(toks, p):
    h = p.emb[toks[0]] @ p.W
    h.requires_grad_()  # M:requires_grad
    return torch.tanh(h)


@ab.program
def requires_grad_fixed(toks, p):  # the fix: drop it
    h = p.emb[toks[0]] @ p.W
    return torch.tanh(h)


@ab.program
def data_attr(toks, p):
    h = p.emb[toks[0]] @ p.W
    d = h.data  # M:data
    g = p.emb[toks[-1]] * 2.0
    g += 1.0
    return d, g


@ab.program
def data_attr_fixed(toks, p):
    h = p.emb[toks[0]] @ p.W
    d = h.detach().clone()
    g = p.emb[toks[-1]] * 2.0
    g += 1.0
    return d, g


@ab.program
def lambda_call(toks, p):
    f = lambda x: x * 2  # M:lambda
    return f(p.emb[toks[0]])


@ab.program
def lambda_call_fixed(toks, p):
    return double_fixed(p.emb[toks[0]])


@ab.program
def nested_arity(toks, p):
    def mix(x, y):
        return x * y + p.b
    return mix(p.emb[toks[0]])  # M:nested_arity


@ab.program
def nested_arity_fixed(toks, p):
    def mix(x, y):
        return x * y + p.b
    return mix(p.emb[toks[0]], p.emb[toks[-1]])


@ab.program
def comprehension_list_changed(toks, p):
    pairs = [(t, []) for t in toks]
    done = [lst.append(p.emb[t]) for t, lst in pairs]  # M:comp_changed
    return p.b


@ab.program
def shared_conflict(toks, p):
    h = p.W
    if len(toks) > 1:  # M:shared_conflict
        h = 3
    return h


@ab.program
def shared_item_write(toks, p):  # `y` holds z too: the write would change it (a write z alone sees is taken)
    z = torch.zeros(4, dtype=p.W.dtype)
    y = z
    z[0] = 1.0  # M:shared_item
    return p.emb[toks[0]] + y


@ab.program
def shared_item_write_fixed(toks, p):  # the fix: a new tensor, `torch.where(mask, v, x)`
    z = torch.zeros(4, dtype=p.W.dtype)
    y = z
    z = torch.where(torch.arange(4) == 0, torch.ones_like(z), z)
    return p.emb[toks[0]] + y


@ab.program
def slice_write(toks, p):  # `head` is a view of x: the write would change it (a write x alone sees is taken)
    x = p.emb[toks[0]] @ p.W
    head = x[:2]
    x[1:3] = p.b[1:3]  # M:slice_write
    return x, head


@ab.program
def slice_write_fixed(toks, p):  # the fix: a new tensor by torch.cat
    x = p.emb[toks[0]] @ p.W
    head = x[:2]
    x = torch.cat([x[:1], p.b[1:3], x[3:]])
    return x, head


@ab.program
def index_param_by_tensor(toks, p):
    return p.emb[torch.tensor(toks)].sum(0)  # M:param_by_tensor


@ab.program
def index_param_by_tensor_fixed(toks, p):  # the fix: index with host numbers, one row each
    return torch.stack([p.emb[t] for t in toks]).sum(0)
