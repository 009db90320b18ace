"""acrobat in one file: a tree RNN written for ONE tree, run on a batch of trees, checked, timed.

Run it from anywhere: ``python examples/quickstart.py`` (or ``python -m examples.quickstart`` in the clone).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

import acrobat


@dataclass
class Node:
    """A binary tree node: a leaf holds a word id, an inner node two children. Any Python object can be an
    instance; acrobat reads only what the model reads (``node.word``, ``node.left``, ...)."""

    word: int = 0
    left: Node | None = None
    right: Node | None = None


class Params(nn.Module):
    """The model's weights: embeddings (100 words, 32 wide), a combining layer, a 5-class output layer."""

    def __init__(self, vocab: int = 100, hidden: int = 32, classes: int = 5):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.combine = nn.Linear(2 * hidden, hidden)
        self.out = nn.Linear(hidden, classes)


@acrobat.function
def encode(node: Node, p: Params) -> torch.Tensor:
    """The (32,) state of the subtree at ``node``: recursion, with an ``if`` on the instance's data."""
    if node.left is None or node.right is None:  # a leaf
        return torch.tanh(p.emb(torch.tensor(node.word)))
    left, right = acrobat.concurrent(encode(node.left, p), encode(node.right, p))  # independent: batched together
    return torch.tanh(p.combine(torch.cat([left, right])))


@acrobat.program
def classify(tree: Node, p: Params) -> torch.Tensor:
    """The (5,) class scores of one tree. The first parameter is the instance; the rest are shared."""
    scores: torch.Tensor = p.out(encode(tree, p))
    return scores


def random_tree(rng: random.Random, leaves: int) -> Node:
    """A random binary tree with ``leaves`` leaves and random word ids."""
    if leaves == 1:
        return Node(word=rng.randrange(100))
    k = rng.randint(1, leaves - 1)
    return Node(left=random_tree(rng, k), right=random_tree(rng, leaves - k))


def main() -> None:
    torch.manual_seed(0)
    rng = random.Random(0)
    params = Params().eval()
    trees = [random_tree(rng, rng.randint(2, 20)) for _ in range(32)]

    with torch.inference_mode():
        batched = classify.run(trees, params)  # one call for the batch: one result per tree
        for tree, scores in zip(trees, batched):
            torch.testing.assert_close(scores, classify(tree, params))  # a plain call: the same result
    print(f"{len(trees)} trees, batched results equal the per-tree calls")
    print(acrobat.benchmark(classify, trees, params))  # warm up, then time batched vs one tree at a time


if __name__ == "__main__":
    main()
