"""Models written with training code's idioms: augmented assignment of tensors (``loss += ...``) and accumulators
(``acrobat.analysis.inplace``, issue 18 §2).

They live in a real .py file because acrobat reads their source with ``inspect``;
lines the tests look up carry a ``# M:<key>`` marker comment.
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F

import acrobat as ab


@ab.program
def loss_aug(toks, p):
    """A loss summed with `+=` from a 0-D zeros tensor (a factory's value, made anew by every plain call)."""
    loss = torch.zeros(())
    for t in toks:
        loss += F.cross_entropy((p.emb[t] @ p.V).unsqueeze(0), torch.tensor([t % 3]))
    return loss


@ab.program
def all_four(toks, p):
    """`+=`, `-=`, `*=`, `/=` of operator results, in a loop and after it; the result is read by `.item()`."""
    h = p.emb[toks[0]] @ p.W
    for t in toks:
        h += torch.tanh(p.emb[t])
        h *= 0.5
        h -= p.b
    h /= len(toks)
    g = h.sum()
    g *= 2.0
    return h, g, h.sum().item()


@ab.program
def local_after_op(tok, p):
    """`h += x` on a fresh per-instance tensor."""
    h = p.emb[tok] @ p.W
    h += p.b
    return h


@ab.program
def cast_like_in_place(toks, p):
    """In place keeps the left operand's dtype: a float64 operand added into float32 is cast back to float32,
    a float32 operand into float64 keeps float64."""
    acc = torch.zeros(4)
    wide = torch.zeros(4, dtype=torch.float64)
    for t in toks:
        acc += torch.tanh(p.emb[t]).double()
        wide += p.emb[t]
    return acc, wide


@ab.program
def int_divided(toks, p):
    """`n /= 2` of an int64 tensor: PyTorch raises (a float result cannot be cast to Long)."""
    n = torch.zeros((), dtype=torch.long)
    n += len(toks)
    n /= 2  # M:int_divided
    return n


@ab.program
def broadcast_into_scalar(toks, p):
    """`x += v` of a 0-D x and a vector v: PyTorch raises (the broadcast shape is not x's)."""
    x = torch.zeros(())
    x += p.emb[toks[0]]  # M:broadcast
    return x


@ab.program
def aug_stored(toks, p):
    """The list holds h itself: `h += x` would change the list's item too, so it stays rejected."""
    h = p.emb[toks[0]] @ p.W
    hs = [h]
    h += p.b  # M:stored
    return hs[0], h


@ab.program
def aug_view(toks, p):
    """v is a view of h: `h += x` would change v too, so it stays rejected."""
    h = p.emb[toks[0]] @ p.W
    v = h[0]
    h += p.b  # M:view
    return v, h


@ab.program
def crf_start(toks, p):
    """The BiLSTM-CRF tutorial's Viterbi start: a constant vector whose first item is set right after it is made."""
    forward_var = torch.full((4,), -10000.)
    forward_var[0] = 0.
    forward_var[2:] = -5.0
    for t in toks:
        forward_var = forward_var + p.emb[t]
    return forward_var


@ab.program
def item_writes(toks, p):
    """Item assignments of per-instance values: an int, a negative int, int and slice, a slice with a step, a
    number; v requires grad where p does. The result is read only as an operand and returned."""
    x = torch.zeros(3, 4)
    x[0] = torch.tanh(p.emb[toks[0]])
    x[-1, 1:3] = p.emb[toks[-1]][:2] * 2.0
    x[1, ::2] = x.sum() * p.b[:2]
    x[2, -1] = 5
    return x, (x * p.emb[toks[0]]).sum()


@ab.program
def rows_by_host_index(toks, p):
    """`acc[i] = v` in a loop, `i` a per-instance host int (sole holder: acc is only written and returned)."""
    acc = torch.zeros(8, 4)
    for i, t in enumerate(toks):
        acc[i] = p.emb[t] @ p.W
    return acc


@ab.program
def item_cast(toks, p):
    """The write casts v to x's dtype as PyTorch's does: a float into int64 truncates, a number into float64 keeps
    its precision."""
    n = torch.zeros(3, dtype=torch.long)
    n[1] = p.emb[toks[0]].sum() * 10.0
    w = torch.zeros(2, dtype=torch.float64)
    w[0] = 0.1
    return n, w


@ab.program
def item_out_of_range(toks, p):
    """`x[len(toks)] = 1.` past x's end for a long instance: PyTorch raises IndexError."""
    x = torch.zeros(3)
    x[len(toks)] = 1.0  # M:out_of_range
    return x + p.emb[toks[0]][:3]


@ab.program
def item_view(toks, p):
    """v is a view of h: `h[1] = ...` would change v too, so it stays rejected."""
    h = p.emb[toks[0]] @ p.W
    v = h[0]
    h[1] = 0.0  # M:item_view
    return v, h


@ab.program
def item_tensor_index(toks, p):
    """A tensor index (`x[torch.argmax(h)]`): rejected with the index forms taken."""
    h = p.emb[toks[0]]
    x = torch.zeros(4)
    x[torch.argmax(h)] = 1.0  # M:tensor_index
    return x


@ab.program
def list_slice_write(toks, p):
    """A list's slice assignment: rejected (a tensor's is taken)."""
    hs = [p.emb[t] for t in toks]
    hs[1:] = [p.b]  # M:list_slice
    return hs[0]
