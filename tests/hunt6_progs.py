"""Small programs for tests/test_hunt6.py: the constructs merged last (host-number accumulators, the ``torch.cat``
fold of a list variable, variable versions inside bodies and over top-level loops, undecorated methods returning
tuples, the static tier's run-time limits handing the batch to the dynamic tier, views in the dynamic tier),
written as users write them.

They live in a real .py file because acrobat reads their source with ``inspect``. ``HP`` holds the shared
parameters (``emb``: VOCAB x H, ``W``: H x H, ``V``: H x 3, ``h0``: H).
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

H = 4
VOCAB = 16


class HP(nn.Module):
    """Shared parameters: ``emb`` (VOCAB x H), ``W`` (H x H), ``V`` (H x 3), ``h0`` (H)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(VOCAB, H, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(H, H, generator=g) * 0.5)
        self.V = nn.Parameter(torch.randn(H, 3, generator=g) * 0.5)
        self.h0 = nn.Parameter(torch.randn(H, generator=g) * 0.5)

    def step(self, x, h):
        """An undecorated method returning a tuple: (new state, its norm)."""
        h = torch.tanh(x + h @ self.W)
        return h, h.sum()

    def attend(self, hs):
        """An undecorated method given a stacked list: attention over its rows."""
        a = torch.softmax(hs @ self.h0, 0)
        return (a.unsqueeze(1) * hs).sum(0)


# --- host-number accumulators ---------------------------------------------------------------------------------

@ab.program
def two_accumulators(toks, p):
    """Two accumulators in one function, an int and a float start, one with `-=`."""
    loss = 0
    reg = 0.0
    for t in toks:
        loss += F.cross_entropy((p.emb[t] @ p.V).unsqueeze(0), torch.tensor([t % 3]))
        reg -= (p.emb[t] * p.h0).sum()
    return loss, reg


@ab.program
def two_accumulators_mixed(toks, p):
    """Two accumulators, the rest of the function reading both after the loop."""
    a = 0
    b = 1
    for t in toks:
        a = a + torch.tanh(p.emb[t] @ p.W)
        if t % 2:
            b = b * torch.sigmoid(p.emb[t]).sum()
    c = a * 2
    d = b + 1
    return c, d


@ab.program
def read_in_branch_after(toks, p):
    """The accumulator read inside a branch after the loop."""
    total = 0
    for t in toks:
        total = total + (p.emb[t] @ p.h0)
    if len(toks) > 2:
        out = total * 2
    else:
        out = total
    return out


@ab.program
def compared_after(toks, p):
    """The accumulator compared after the loop (`if total > 1:`)."""
    total = 0.0
    for t in toks:
        total += torch.sigmoid(p.emb[t] @ p.h0)
    if total > 1:
        return total - 1
    return total + 1


@ab.program
def in_containers(toks, p):
    """The accumulator returned inside a dict, a list and a tuple."""
    loss = 0
    for t in toks:
        loss += (p.emb[t] @ p.V).sum()
    return {"loss": loss, "n": len(toks), "both": [loss, (loss, len(toks))]}


@ab.program
def mean_over_len(toks, p):
    """`loss / len(toks)` after the loop (the batch has no empty lists: ZeroDivisionError)."""
    loss = 0
    for t in toks:
        loss = loss + torch.tanh(p.emb[t] @ p.W)
    return loss / len(toks)


@ab.program
def int_start_float_and_int_tensors(toks, p):
    """An int start plus int64 0-D counts then float tensors: in place an int tensor cannot take a float (a
    RuntimeError in the plain call where both come)."""
    acc = 0
    for t in toks:
        if t % 2:
            acc += torch.tensor(t)
        else:
            acc += (p.emb[t] @ p.h0)
    return acc


@ab.program
def float_start_int_tensors(toks, p):
    """A float start plus int32 vectors: float32 (the default dtype), as the plain call gives."""
    acc = 0.5
    for t in toks:
        acc = acc + torch.full((2,), t, dtype=torch.int32)
    return acc


@ab.program
def int8_counts(toks, p):
    """An int start plus int8 0-D tensors: int8 (wraps past 127), as plain PyTorch gives."""
    acc = 0
    for t in toks:
        acc += torch.tensor(t * 20, dtype=torch.int8)
    return acc


@ab.program
def bool_start(toks, p):
    """A bool start multiplied by float tensors (`x = x * t` from `True`)."""
    acc = True
    for t in toks:
        acc = acc * torch.sigmoid(p.emb[t] @ p.h0)
    return acc


@ab.program
def rank_grows_in_place(toks, p):
    """`acc += 0-D` then `acc += vector`: in place a 0-D tensor cannot take a vector (the plain call raises
    where both come, in that order)."""
    acc = 0
    for i, t in enumerate(toks):
        if i == 0:
            acc += (p.emb[t] @ p.h0)
        else:
            acc += p.emb[t]
    return acc


@ab.program
def vector_then_scalar(toks, p):
    """`acc += vector` then `acc += 0-D`: broadcast into the vector, fine in place."""
    acc = 0
    for i, t in enumerate(toks):
        if i == 0:
            acc += p.emb[t]
        else:
            acc += (p.emb[t] @ p.h0)
    return acc


@ab.function
def sent_loss(toks, p):
    loss = 0
    for t in toks:
        loss = loss + F.cross_entropy((p.emb[t] @ p.V).unsqueeze(0), torch.tensor([t % 3]))
    return loss


@ab.function
def sent_norm(toks, p):
    norm = 0.0
    for t in toks:
        norm -= (p.emb[t] @ p.W).sum()
    return norm


@ab.program
def helpers_each_with_one(toks, p):
    """Two helpers, each with its own accumulator, returned together."""
    return sent_loss(toks, p), sent_norm(toks[1:], p)


@ab.function
def tree_sum(node, p):
    total = 0
    for c in node["kids"]:
        total = total + torch.tanh(p.emb[c["w"]] @ p.W)
    if node["kids"]:
        return total + tree_sum(node["kids"][0], p)
    return total


@ab.program
def recursive_accumulator(tree, p):
    """A recursive helper whose accumulator is returned, summed with its own recursive call."""
    return tree_sum(tree, p)


@ab.program
def reinit_in_outer_loop(sents, p):
    """The accumulator started anew per sentence; the last one's sum returned, doubled."""
    s = 0
    for sent in sents:
        s = 0
        for t in sent:
            s += torch.tanh(p.emb[t] @ p.W)
    return s * 2


# --- torch.cat of a list variable -------------------------------------------------------------------------------

@ab.program
def cat_rows_dim0(toks, p):
    """Rows of different lengths along dim 0 appended in branches, concatenated (a list of one item too)."""
    parts = []
    for t in toks:
        if t % 2:
            parts.append(p.emb[t:t + 1] @ p.W)
        else:
            parts.append(torch.tanh(p.emb[t % 8:t % 8 + 2]))
    return torch.cat(parts, 0)


@ab.program
def cat_dim1_and_neg(toks, p):
    """A comprehension's items concatenated along dim 1 and along dim -1."""
    xs = [torch.tanh(p.emb[t]).unsqueeze(0) for t in toks]
    a = torch.cat(xs, 1)
    b = torch.cat(xs, dim=-1)
    return a, b


@ab.program
def cat_then_write(toks, p):
    """A cat result written in place: the items must not change (the plain cat copies, a list of one item too)."""
    xs = []
    for t in toks:
        xs.append(torch.tanh(p.emb[t] @ p.W))
    out = torch.cat(xs)
    out.mul_(2)
    return out, xs[0]


@ab.program
def cat_of_scalars(toks, p):
    """`torch.cat` of 0-D tensors: a RuntimeError in the plain call (zero-dimensional tensors)."""
    xs = [p.emb[t] @ p.h0 for t in toks]
    return torch.cat(xs)


@ab.program
def cat_of_mixed_dtypes(toks, p):
    """Items of different dtypes (float32 and float64): promoted."""
    xs = []
    for t in toks:
        if t % 2:
            xs.append(torch.tanh(p.emb[t]).double())
        else:
            xs.append(torch.tanh(p.emb[t]))
    return torch.cat(xs, 0)


# --- variable versions ------------------------------------------------------------------------------------------

@ab.program
def rebound_in_loop_with_continue(toks, p):
    """A name rebound twice in a loop body with `continue` between: the value after the loop is the first binding
    on an iteration that continued."""
    h = p.h0
    for t in toks:
        h = [p.emb[t], h]
        if t % 3 == 0:
            h = torch.stack(h).sum(0)
            continue
        h = torch.stack(h).mean(0)
    return h


@ab.program
def rebound_in_while(toks, p):
    """A name rebound twice in a while body (a list, then its stacked sum)."""
    h = p.h0
    i = 0
    while i < len(toks):
        h = [torch.tanh(p.emb[toks[i]]), h]
        h = torch.stack(h).sum(0)
        i += 1
    return h


@ab.program
def top_loop_rebinds_zero_times(toks, p):
    """A top-level `for x in xs` rebinding a name read after the loop: where the loop ran zero times, the value
    from before it."""
    x = toks
    for x in [p.emb[t] for t in toks]:
        pass
    return x


@ab.program
def top_loop_rebinds_not_read(toks, p):
    """A top-level `for x in` rebinding a host list's name whose value is not read after the loop."""
    x = toks
    h = p.h0
    for x in [p.emb[t] for t in x]:
        h = torch.tanh(x + h @ p.W)
    x = h * 2
    return x


@ab.program
def nested_def_rebinds(toks, p):
    """A name rebound in a nested def and in the body around it."""
    h = [p.emb[t] for t in toks]
    h = torch.stack(h).sum(0)

    def f(v):
        h = v * 2
        h = h + 1
        return h

    return f(h)


# --- undecorated methods ----------------------------------------------------------------------------------------

@ab.program
def method_tuple(toks, p):
    """An undecorated method returning a tuple, unpacked in a loop; its second item summed in an accumulator."""
    h = p.h0
    total = 0
    for t in toks:
        h, s = p.step(p.emb[t], h)
        total = total + s
    return h, total


@ab.program
def method_stacked(toks, p):
    """An undecorated method given a stacked list."""
    hs = [torch.tanh(p.emb[t] @ p.W) for t in toks]
    return p.attend(torch.stack(hs))


# --- the dynamic tier's views -------------------------------------------------------------------------------------

@ab.program
def views_written(toks, p):
    """Writes through views of computed values (`view`, `t()`, `unbind`, `narrow`, `diagonal`)."""
    m = torch.tanh(p.emb[toks[0]].unsqueeze(1) * p.W)
    flat = m.view(-1)
    col = m.t()[0]
    rows = m.unbind(0)
    mid = m.narrow(1, 1, 2)
    diag = m.diagonal()
    flat[0] = 5.0
    rows[1].mul_(3)
    mid.add_(1)
    diag.zero_()
    return m, flat, col, rows[2], mid


@ab.program
def self_returning_ops_on_params(toks, p):
    """`contiguous()`, `float()` of a float parameter return the parameter itself: a write into them changes it."""
    w = p.W.contiguous()
    v = p.h0.float()
    out = w[toks[0] % H] + v
    return out


@ab.program
def write_into_param_alias(toks, p):
    """`p.h0.float()` is the parameter itself: the write changes the parameter in the plain call."""
    v = p.h0.float()
    v.add_(float(len(toks)))
    return v * 1


@ab.program
def stored_on_instance(inst, p):
    """The accumulator stored on the instance (a dict) and returned: state left on the instance object."""
    loss = 0
    for t in inst["toks"]:
        loss = loss + (p.emb[t] @ p.h0)
    inst["loss"] = loss
    return loss


@ab.program
def noisy_ragged(toks, p):
    """Draws random numbers and makes a tensor of the token list (per-instance length: the static tier's shape
    limit at run time on mixed lengths, the batch rerun in the dynamic tier)."""
    ids = torch.tensor(toks)
    h = p.emb[ids] + 0.1 * torch.randn(len(toks), H)
    return torch.tanh(h @ p.W).sum(0)


@ab.program
def int8_from_host(toks, p):
    """`torch.tensor(n, dtype=torch.int8)` of a host number past 127: the plain call raises (overflow)."""
    return torch.tensor(toks[0] * 20, dtype=torch.int8) + p.h0.to(torch.int8)


@ab.program
def extended_then_limit(toks, p):
    """`toks += [7]` extends the instance's own list in place, then a tensor of its per-instance length meets the
    static tier's shape limit at run time on a batch of mixed lengths."""
    toks += [7]
    x = torch.tensor(toks, dtype=torch.float32)
    return x.mean() * p.h0
