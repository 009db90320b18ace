"""Models that make a tensor of a host list whose length differs per instance (``acrobat.analysis.token_lists``).

They live in a real .py file because acrobat reads their source with ``inspect``.
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

V, D = 12, 4


class Params(nn.Module):
    """An embedding table (V, D) and a linear map (D, D)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(V, D)
        self.lin = nn.Linear(D, D)


@ab.program
def emb_sum(toks, p):
    """The commonest idiom: the embeddings of the instance's token list, summed."""
    return p.emb(torch.tensor(toks)).sum(0)


@ab.program
def legacy_and_dtype(toks, p):
    """torch.LongTensor and torch.tensor(dtype=) of the list; max and mean over it."""
    top = p.emb(torch.LongTensor(toks)).max(0).values
    mean = torch.tanh(p.lin(p.emb(torch.tensor(toks, dtype=torch.long)))).mean(0)
    return top, mean


@ab.program
def masked_mean(toks, p):
    """F.embedding, a comparison mask, casts and a masked mean (token 0 is padding)."""
    x = F.embedding(torch.tensor(toks), p.emb.weight)
    keep = (torch.tensor(toks) != 0).float()
    return (x * keep.unsqueeze(-1)).sum(0) / keep.sum().clamp(min=1)


@ab.program
def arithmetic_and_indexing(toks, p):
    """Arithmetic on the ids, host-int indexing, the length three ways, and the stacked result returned."""
    ids = torch.tensor(toks)
    n = ids.shape[0] + ids.size(0) + len(ids)
    return (ids * 2 + 1).sum(0) + n, (ids > 3).sum(0), p.emb(ids[0]) + p.emb(ids[-1]), ids % 5


@ab.program
def built_lists(toks, p):
    """Lists the program builds: a comprehension's and one filled by append."""
    shifted = []
    for t in toks:
        shifted.append((t + 1) % V)
    a = p.emb(torch.tensor([t % 3 for t in toks])).sum(0)
    return a + p.emb(torch.tensor(shifted)).amax(0)


@ab.program
def long_sum(toks, p):
    """Plain PyTorch runs it on an empty list too (an empty int64 tensor; the sum of no embeddings is zeros)."""
    return p.emb(torch.tensor(toks, dtype=torch.long)).sum(0)


@ab.program
def of_a_number(x, p):
    """The instance is used as a list nowhere but here: taken for a list, which a number is not."""
    return torch.tensor(x) * 2


@ab.program
def item_of_the_instance(example, p):
    """``label, toks = example``: the instance's list item, a list in every instance of the batch (a batch fact)."""
    label, toks = example
    return p.emb(torch.tensor(toks)).sum(0) * label, p.emb(torch.tensor(example[1])).amax(0)
