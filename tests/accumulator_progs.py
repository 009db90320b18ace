"""Models that sum into a variable started at a Python number (``loss = 0``, ``total = 0.0``), as training code
does (issue 18 §2, ``acrobat.analysis.accumulators``).

They live in a real .py file because acrobat reads their source with ``inspect``. ``P`` is ``tests.test_tdc.P``
(``emb``: vocab x hidden, ``W``: hidden x hidden, ``V``: hidden x 3, ``h0``, ``b``: hidden).
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F

import acrobat as ab


@ab.program
def loss_from_zero(toks, p):
    """`loss = 0` (an int) plus a cross-entropy per token: the int 0 where `toks` is empty."""
    loss = 0
    for t in toks:
        loss = loss + F.cross_entropy((p.emb[t] @ p.V).unsqueeze(0), torch.tensor([t % 3]))
    return loss


@ab.program
def running_mean(toks, p):
    """`total = 0.0; total += x`, divided by the length after the loop (ZeroDivisionError where `toks` is empty)."""
    total = 0.0
    for t in toks:
        total += torch.tanh(p.emb[t] @ p.W)
    return total / len(toks)


@ab.program
def nested_in_branches(sents, p):
    """`sum += ...` in a loop nested in a loop, under an `if`; `-=` in the other branch; an int start; the value
    used after the loops in a tensor expression and returned beside the count of updates."""
    acc = 0
    n = 0
    for sent in sents:
        for t in sent:
            if t % 2 == 0:
                acc += (p.emb[t] * p.h0).sum()
            else:
                acc -= (p.emb[t] @ p.W).sum() * 0.5
            n += 1
    scaled = acc * 2 + 1
    return scaled, n


@ab.program
def product(toks, p):
    """`prod = 1.0; prod *= x` (out of place: `prod = prod * x` first, then in place on the fresh tensor)."""
    prod = 1.0
    for t in toks:
        prod = prod * torch.sigmoid(p.emb[t] @ p.W)
    return prod


@ab.program
def returned_early(toks, p):
    """The accumulator returned from inside a loop (an early `return`) and at the end."""
    total = 0
    for t in toks:
        total = total + torch.tanh(p.emb[t] @ p.W)
        if t == 0:
            return total
    return total


@ab.function
def sequence_loss(toks, p):
    h = p.h0
    loss = 0
    for t in toks:
        h = torch.tanh(p.emb[t] + h @ p.W)
        loss = loss + F.cross_entropy((h @ p.V).unsqueeze(0), torch.tensor([t % 3]))
    return loss / max(len(toks), 1)


@ab.program
def through_a_helper(toks, p):
    """A helper's accumulator returned by the entry as it is (`return f(...)`)."""
    return sequence_loss(toks, p)


@ab.program
def used_in_a_helper(toks, p):
    """A helper's accumulator that the caller computes with: stays rejected (the result is host data or a tensor)."""
    return sequence_loss(toks, p) * 2


@ab.program
def read_in_the_loop(toks, p):
    """The accumulator read inside its loop by other code: stays rejected (the loop's rest is not split)."""
    total = 0
    outs = []
    for t in toks:
        total = total + p.emb[t]
        outs.append(torch.tanh(total))
    return outs


@ab.program
def int32_counts(toks, p):
    """An int start plus int32 0-D tensors: int32, as plain PyTorch gives (a 0-D int64 start would give int64)."""
    count = 0
    for t in toks:
        count += torch.tensor(t, dtype=torch.int32)
    return count


@ab.program
def half_sum(toks, p):
    """A float start plus float16 0-D tensors: float16, as plain PyTorch gives (a 0-D float32 start: float32)."""
    total = 0.0
    for t in toks:
        total = total + (p.emb[t] @ p.h0).half()
    return total


@ab.program
def cat_after_the_read(tokens, p):
    """The accumulator read after its loop (the rest of the function runs once per path: number or tensor), then
    `torch.cat` of unit-axis items of a comprehension, which the rules make a stack."""
    h = p.emb[tokens[0]]
    outs = [h, torch.tanh(h)]
    total = -0.5
    for t in tokens:
        total -= torch.tanh(p.emb[t]).mean()
    shifted = h + total
    return torch.cat([v.view(1, -1) for v in outs]).max(dim=0).values, shifted
