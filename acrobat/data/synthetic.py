"""Synthetic SST-like binary trees, for when the real SST data is absent.

Calibrated against SST train (8,544 trees: sentence length mean 19.1 tokens,
median 18, min 2, max 52; height mean 9.8 edges, 10.1 at 19 tokens):

- Length: a gamma(shape 4.3, scale 4.5) draw rounded to an integer and
  redrawn until it lies in 1..52. Over 10,000 trees (seeds 0, 1, 2): mean
  19.18, 19.08, 19.15; median 18; max 52; min 1.
- Shape: a node of n >= 2 words puts 1 word on its left with probability
  0.40 (English branches right), n - 1 words with probability 0.15, and
  otherwise a uniform 1..n-1. Over the same trees the mean height is 9.9
  edges (max 27-31) and 10.2-10.6 at 19 words (SST: 9.8, max 29; 10.1).
- Labels are uniform 0-4 on every node; word ids follow Zipf's law
  (probability proportional to 1/id) over 1..vocab_size-1, and a leaf's
  word is ``f"w{id}"``.
"""

from __future__ import annotations

import random
from functools import lru_cache
from itertools import accumulate

from acrobat.data.tree import Tree
from acrobat.data.vocab import Vocab

MAX_LENGTH = 52
"""The longest synthetic sentence, in tokens (as in SST)."""

_LENGTH_SHAPE = 4.3
_LENGTH_SCALE = 4.5
_P_LEFT_WORD = 0.40
_P_RIGHT_WORD = 0.15
_NUM_LABELS = 5


def synthetic_vocab(vocab_size: int = 16000) -> Vocab:
    """The vocab of synthetic trees: ``vocab.id(f"w{i}") == i`` for ``1 <= i < vocab_size``."""
    _check_vocab_size(vocab_size)
    return Vocab(f"w{i}" for i in range(1, vocab_size))


def synthetic_trees(n: int, seed: int = 0, vocab_size: int = 16000) -> list[Tree]:
    """``n`` random SST-like binary trees, the same for the same ``seed``.

    Word ids lie in ``1 .. vocab_size - 1`` and match :func:`synthetic_vocab`.
    """
    if n < 0:
        raise ValueError(f"number of trees must be >= 0, got {n}")
    _check_vocab_size(vocab_size)
    rng = random.Random(seed)
    return [_tree(rng, vocab_size) for _ in range(n)]


def _check_vocab_size(vocab_size: int) -> None:
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2 (id 0 is <unk>), got {vocab_size}")


def _tree(rng: random.Random, vocab_size: int) -> Tree:
    ids = rng.choices(range(1, vocab_size), cum_weights=_zipf_cum_weights(vocab_size), k=_length(rng))
    return _bracket(rng, ids)


def _length(rng: random.Random) -> int:
    """A sentence length in tokens, 1..MAX_LENGTH."""
    while True:
        length = round(rng.gammavariate(_LENGTH_SHAPE, _LENGTH_SCALE))
        if 1 <= length <= MAX_LENGTH:
            return length


@lru_cache(maxsize=4)
def _zipf_cum_weights(vocab_size: int) -> list[float]:
    """Cumulative weights 1/1, 1/1 + 1/2, ... for the word ids 1..vocab_size-1."""
    return list(accumulate(1.0 / rank for rank in range(1, vocab_size)))


def _bracket(rng: random.Random, ids: list[int]) -> Tree:
    """A random binary tree over the words ``ids`` (recursion depth < MAX_LENGTH)."""
    label = rng.randrange(_NUM_LABELS)
    if len(ids) == 1:
        return Tree(label, word=f"w{ids[0]}", word_id=ids[0])
    split = _split(rng, len(ids))
    return Tree(label, left=_bracket(rng, ids[:split]), right=_bracket(rng, ids[split:]))


def _split(rng: random.Random, n: int) -> int:
    """How many of a node's ``n >= 2`` words go to its left child (1..n-1)."""
    u = rng.random()
    if u < _P_LEFT_WORD:
        return 1
    if u < _P_LEFT_WORD + _P_RIGHT_WORD:
        return n - 1
    return rng.randint(1, n - 1)
