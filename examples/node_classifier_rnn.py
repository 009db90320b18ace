"""Recursive neural network with a sentiment classifier at every node (Socher et al. 2013 style).

Composes a binary tree bottom-up, ``h = tanh(W [h_left; h_right] + b)``, and
appends the classifier's logits of every node (post-order: left subtree,
right subtree, node) to one list shared by the whole recursion.

Run it: ``python -m examples.node_classifier_rnn``.
"""

from __future__ import annotations

import torch
from torch import nn

import acrobat as ab
from acrobat.data.tree import Tree
from examples._common import HIDDEN, VOCAB, binary_trees, seeded

NAME = "node_classifier_rnn"
SUMMARY = "recursive NN over binary trees, a classifier at every node (per-node logits list)"


class Params(nn.Module):
    """Embedding (VOCAB, H), composition ``nn.Linear(2H, H)``, node classifier ``nn.Linear(H, 5)``."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 5):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.compose = nn.Linear(2 * hidden, hidden)
            self.classify = nn.Linear(hidden, classes)


@ab.function
def encode(node, p, node_logits):
    """h (H,) of the subtree at ``node``; appends one (5,) logits per node to ``node_logits``."""
    if node.is_leaf:
        h = torch.tanh(p.emb.weight[node.word_id])
    else:
        left = encode(node.left, p, node_logits)
        right = encode(node.right, p, node_logits)
        h = torch.tanh(p.compose(torch.cat([left, right], dim=-1)))
    node_logits.append(p.classify(h))
    return h


@ab.program
def node_classifier_rnn(tree, p):
    """(per-node logits (N, 5) in post-order, root h (H,)) of one binary ``Tree`` with N nodes."""
    node_logits = []
    root = encode(tree, p, node_logits)
    return torch.stack(node_logits), root


program = node_classifier_rnn


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


instances = binary_trees  # instances(n, seed): SST-like binary trees, tiny vocab


def reference(tree: Tree, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch: an explicit post-order stack instead of recursion, logits computed per node."""
    values: list[torch.Tensor] = []  # the stack of finished subtrees' h
    logits: list[torch.Tensor] = []
    todo: list[tuple[Tree, bool]] = [(tree, False)]
    while todo:
        node, ready = todo.pop()
        if node.is_leaf:
            h = torch.tanh(p.emb(torch.tensor(node.word_id)))
        elif not ready:
            todo += [(node, True), (node.right, False), (node.left, False)]
            continue
        else:
            right, left = values.pop(), values.pop()
            h = torch.tanh(p.compose(torch.cat([left, right])))
        values.append(h)
        logits.append(p.classify(h))
    return torch.stack(logits), values[0]


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
