"""What the examples share: seeded parameter construction and random sequence lengths."""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Iterator

import torch

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
