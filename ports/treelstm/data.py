"""Instances and seeded weights for the TreeLSTM port: sentence pairs of random dependency trees (SICK, the
original's data, is not here), each word's parent an earlier word, built with treelstm.pytorch's ``Tree``."""

from __future__ import annotations

import random

import torch

from ports.treelstm.tree import Tree

VOCAB = 100


def random_tree(rng: random.Random, n: int) -> Tree:
    """A dependency tree over ``n`` words (``idx`` 0 .. n-1): word 0 is the root, every other word hangs from a
    random earlier one."""
    nodes = [Tree() for _ in range(n)]
    for i, node in enumerate(nodes):
        node.idx = i
        if i:
            nodes[rng.randrange(i)].add_child(node)
    return nodes[0]


def setup(model, n: int, seed: int):
    """(instances, shared arguments): ``n`` pairs ``(ltree, linputs, rtree, rinputs)`` of 2-14 words each, and a
    ``SimilarityTreeLSTM`` with main.py's default sizes (300, 150, 50, 5 classes) and weights drawn from
    ``seed``."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        a, b = rng.randint(2, 14), rng.randint(2, 14)
        pairs.append((random_tree(rng, a), torch.tensor([rng.randrange(1, VOCAB) for _ in range(a)]),
                      random_tree(rng, b), torch.tensor([rng.randrange(1, VOCAB) for _ in range(b)])))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return pairs, (model.SimilarityTreeLSTM(VOCAB, 300, 150, 50, 5, False, False),)
