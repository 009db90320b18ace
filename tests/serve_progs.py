"""A program for the serving tests that raises on some instances: sentences of exactly 3 words.

Importable by Ray's worker processes (``acrobat.serve.cluster`` puts the checkout on their path), so a
replica can build it from :func:`picky_servable`.
"""

from __future__ import annotations

import torch
from torch import nn

import acrobat as ab
from acrobat.data.vocab import Vocab
from acrobat.serve.servable import Servable

WORDS = [f"w{i}" for i in range(1, 20)]
REFUSED = 3
"""Sentences of this many words make the program raise."""


class PickyParams(nn.Module):
    def __init__(self, vocab: int, hidden: int = 8) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.emb = nn.Parameter(torch.randn(vocab, hidden, generator=gen))
        self.W = nn.Parameter(torch.randn(hidden, hidden, generator=gen) / hidden ** 0.5)


@ab.program
def picky(tokens, p):
    """A tanh RNN over the word ids; refuses (an assert in host code) sentences of ``REFUSED`` words."""
    assert len(tokens) != REFUSED, "picky refuses sentences of 3 words"
    h = p.emb[tokens[0]]
    for t in tokens[1:]:
        h = torch.tanh(h @ p.W + p.emb[t])
    return h


def _warmup(n: int, seed: int) -> list[list[int]]:
    lengths = [1, 2, 4, 5, 7]
    return [[1 + (seed + i + k) % len(WORDS) for k in range(lengths[i % len(lengths)])] for i in range(n)]


def picky_servable() -> Servable:
    """The Servable of :func:`picky` (its requests: ``{"tokens": ["w1", ...]}``)."""
    vocab = Vocab(WORDS)
    return Servable("picky", picky, (PickyParams(len(vocab)).eval(),), "tokens", vocab, "refuses 3-word sentences",
                    warmup=_warmup)
