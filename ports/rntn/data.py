"""Instances and seeded weights for the RNTN port: SST trees (``../shared/data/sst/train.txt``, read with the
notebook's own ``Tree`` parser) where present, else random binary trees written in the same bracket format."""

from __future__ import annotations

import random

import torch

from acrobat.data import find_sst_dir

WORDS = [f"w{i}" for i in range(40)]


def random_tree_text(rng: random.Random, leaves: int) -> str:
    """A binary tree over ``leaves`` random words in SST's format: ``(label word)`` leaves, ``(label left right)``."""
    if leaves == 1:
        return f"({rng.randrange(5)} {rng.choice(WORDS)})"
    left = rng.randint(1, leaves - 1)
    return f"({rng.randrange(5)} {random_tree_text(rng, left)} {random_tree_text(rng, leaves - left)})"


def tree_texts(n: int, seed: int, sst: bool) -> list[str]:
    """``n`` trees as text: the first ``n`` of SST's train split when ``sst`` and it is found, else random."""
    folder = find_sst_dir() if sst else None
    if folder is not None:
        with open(folder / "train.txt", encoding="utf-8") as f:
            return [line for line, _ in zip(f, range(n))]
    rng = random.Random(seed)
    return [random_tree_text(rng, rng.randint(2, 20)) for _ in range(n)]


def setup(model, n: int, seed: int, sst: bool = False):
    """(instances, shared arguments) for ``model`` (the port's module, decorated or not): ``n`` parsed trees and
    an RNTN (hidden 30, as the notebook) with weights drawn from ``seed`` and the notebook's ``init_weight``;
    the vocabulary is the trees' words (as the notebook builds it), so words outside it (none) would be UNK."""
    trees = [model.Tree(text) for text in tree_texts(n, seed, sst)]
    word2index = {'<UNK>': 0}
    for word in sorted(set(model.flatten([t.get_words() for t in trees]))):
        word2index[word] = len(word2index)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        rntn = model.RNTN(word2index, 30, 5)
        rntn.init_weight()
    return trees, (rntn,)
