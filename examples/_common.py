"""What the examples share: seeded parameter construction and random sequence lengths."""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Iterator

import torch

from acrobat.data.synthetic import synthetic_trees
from acrobat.data.tree import Tree

VOCAB = 20
"""Tiny vocabulary of every example (token ids 0 .. VOCAB-1; tree examples use 1 .. VOCAB-1)."""

HIDDEN = 12
"""Hidden size of every example (small: tests and ``main()`` stay fast)."""


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's CPU generator seeded by ``seed``, restoring the caller's state after.

    Parameter classes build their ``nn`` modules inside it, so the same seed gives the same weights
    whatever else the program drew before.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def random_tokens(rng: random.Random, low: int, high: int, vocab: int = VOCAB) -> list[int]:
    """A list of ``low..high`` (inclusive, drawn uniformly) token ids in ``0 .. vocab-1``."""
    return [rng.randrange(vocab) for _ in range(rng.randint(low, high))]


def token_lists(n: int, seed: int, low: int, high: int) -> list[list[int]]:
    """``n`` random token lists of ``low..high`` ids in ``0 .. VOCAB-1``, the same for the same ``seed``."""
    rng = random.Random(seed)
    return [random_tokens(rng, low, high) for _ in range(n)]


def binary_trees(n: int, seed: int = 0) -> list[Tree]:
    """``n`` SST-like binary trees (1-52 leaves) over word ids ``1 .. VOCAB-1`` (``synthetic_trees``), seeded."""
    return synthetic_trees(n, seed, vocab_size=VOCAB)
