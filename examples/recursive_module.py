"""A recursive neural network written as an ``nn.Module`` whose methods are the model.

``forward(node)`` recurses through ``self.forward(child)``; both children are
encoded in one expression, ``self.compose(self.forward(node.left),
self.forward(node.right))``, with no ``acrobat.concurrent`` (the two calls are
independent, §4.1). Every node's class scores go to ``self.outputs``, a list
the module holds for the run, as a researcher collecting per-node losses
writes it. The program calls the module, ``model(tree)``.

Run it: ``python -m examples.recursive_module``.
"""

from __future__ import annotations

import torch
from torch import nn

import acrobat as ab
from acrobat.data.tree import Tree
from examples._common import HIDDEN, VOCAB, binary_trees, seeded

NAME = "recursive_module"
SUMMARY = "recursive NN as an nn.Module: self.forward(child) recursion, self.compose(...), self.outputs.append"


class RecursiveNN(nn.Module):
    """Embedding (VOCAB, H), composition 2H -> H, per-node classifier H -> 5."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 5):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.W = nn.Linear(2 * hidden, hidden)
            self.classify = nn.Linear(hidden, classes)
        self.outputs: list[torch.Tensor] = []

    @ab.function
    def compose(self, left, right):
        """Parent state (H,) from the children's states."""
        return torch.tanh(self.W(torch.cat([left, right])))

    @ab.function
    def forward(self, node):
        """State (H,) of the subtree at ``node``; appends every node's logits (5,) to ``self.outputs``."""
        if node.is_leaf:
            h = torch.tanh(self.emb(torch.tensor(node.word_id)))
        else:
            h = self.compose(self.forward(node.left), self.forward(node.right))
        self.outputs.append(self.classify(h))
        return h



@ab.program
def recursive_module(tree, model):
    """(root state (H,), per-node logits (N, 5) in post-order) of one binary ``Tree``; ``model`` a ``RecursiveNN``."""
    model.outputs = []
    root = model(tree)
    return root, torch.stack(model.outputs)


program = recursive_module


make_params = RecursiveNN  # make_params(seed): seeded weights, hidden HIDDEN


instances = binary_trees  # instances(n, seed): SST-like binary trees, tiny vocab


def reference(tree: Tree, p: RecursiveNN) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch over an explicit post-order stack (no module methods, no recursion)."""
    states: dict[int, torch.Tensor] = {}
    logits: list[torch.Tensor] = []
    stack = [(tree, False)]
    while stack:
        node, expanded = stack.pop()
        if node.is_leaf:
            h = torch.tanh(p.emb.weight[node.word_id])
        elif not expanded:
            stack += [(node, True), (node.right, False), (node.left, False)]
            continue
        else:
            both = torch.cat([states.pop(id(node.left)), states.pop(id(node.right))])
            h = torch.tanh(both @ p.W.weight.T + p.W.bias)
        states[id(node)] = h
        logits.append(h @ p.classify.weight.T + p.classify.bias)
    return states[id(tree)], torch.stack(logits)


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
