"""Tree encoder with attention over its variable number of leaves.

A recursive tanh-RNN encodes a binary tree and collects every leaf's state
on the way. The root state then attends over the leaves: scores are dot
products with a query made from the root, ``softmax(scores, dim=0)`` gives
the weights, and the context is ``alpha @ torch.stack(leaf_states)``.

Run it: ``python -m examples.leaf_attention``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from acrobat.data.tree import Tree
from examples._common import HIDDEN, VOCAB, binary_trees, seeded

NAME = "leaf_attention"
SUMMARY = "binary tree RNN whose root attends over its leaves (stack, softmax(dim=0), alpha @ states)"


class Params(nn.Module):
    """Embedding (VOCAB, H), leaf map H -> H, composition 2H -> H, query H -> H, classifier 2H -> 5."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 5):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.leaf = nn.Linear(hidden, hidden)
            self.compose = nn.Linear(2 * hidden, hidden)
            self.query = nn.Linear(hidden, hidden)
            self.out = nn.Linear(2 * hidden, classes)
        self.scale = 1.0 / math.sqrt(hidden)


@ab.function
def encode(node, p, leaf_states):
    """h (H,) of the subtree at ``node``; appends each leaf's h (H,) to ``leaf_states``, left to right."""
    if node.is_leaf:
        h = torch.tanh(p.leaf(p.emb.weight[node.word_id]))
        leaf_states.append(h)
        return h
    left = encode(node.left, p, leaf_states)
    right = encode(node.right, p, leaf_states)
    return torch.tanh(p.compose(torch.cat([left, right], dim=-1)))


@ab.program
def leaf_attention(tree, p):
    """(logits (5,), attention weights (L,)) of one binary ``Tree`` with L leaves."""
    leaf_states = []
    root = encode(tree, p, leaf_states)
    states = torch.stack(leaf_states)  # (L, H)
    scores = states @ p.query(root) * p.scale  # (L,)
    alpha = torch.softmax(scores, dim=0)
    context = alpha @ states  # (H,)
    return p.out(torch.cat([root, context], dim=-1)), alpha


program = leaf_attention


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


instances = binary_trees  # instances(n, seed): SST-like binary trees, tiny vocab


def reference(tree: Tree, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch: leaves embedded all at once from ``tree.leaves()``, the tree composed by memoized recursion,
    attention with ``F.softmax`` over a (1, L) row."""
    leaves = tree.leaves()
    leaf_h = torch.tanh(p.leaf(p.emb(torch.tensor([leaf.word_id for leaf in leaves]))))  # (L, H)
    index = {id(leaf): i for i, leaf in enumerate(leaves)}

    def compose(node: Tree) -> torch.Tensor:
        if node.is_leaf:
            return leaf_h[index[id(node)]]
        return torch.tanh(p.compose(torch.cat([compose(node.left), compose(node.right)])))

    root = compose(tree)
    q = p.query(root.unsqueeze(0))  # (1, H)
    alpha = F.softmax(q @ leaf_h.T * p.scale, dim=-1)  # (1, L)
    context = (alpha @ leaf_h)[0]
    return p.out(torch.cat([root, context])), alpha[0]


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
