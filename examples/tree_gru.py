"""Tree GRU built from ``torch.nn`` modules (``nn.Embedding``, ``nn.GRUCell``, ``nn.Linear``).

A leaf runs the GRU cell on its word embedding from a zero state; an
internal node runs it on a projection of both children's states, starting
from their mean. The two subtrees are independent (``acrobat.concurrent``).

Run it: ``python -m examples.tree_gru``.
"""

from __future__ import annotations

import torch
from torch import nn

import acrobat as ab
from acrobat.data.tree import Tree
from examples._common import HIDDEN, VOCAB, binary_trees, seeded

NAME = "tree_gru"
SUMMARY = "tree GRU from nn.Embedding, nn.GRUCell and nn.Linear modules over binary trees"


class Params(nn.Module):
    """``nn.Embedding(VOCAB, H)``, ``nn.GRUCell(H, H)``, child projection ``nn.Linear(2H, H)``, classifier H -> 5."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 5):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.cell = nn.GRUCell(hidden, hidden)
            self.merge = nn.Linear(2 * hidden, hidden)
            self.out = nn.Linear(hidden, classes)
        self.hidden = hidden


@ab.function
def tree_gru_cell(node, p):
    """h (H,) of the subtree rooted at ``node``."""
    if node.is_leaf:
        x = p.emb(torch.tensor(node.word_id))
        return p.cell(x, torch.zeros(p.hidden))
    left, right = ab.concurrent(tree_gru_cell(node.left, p), tree_gru_cell(node.right, p))
    x = torch.relu(p.merge(torch.cat([left, right], dim=-1)))
    return p.cell(x, (left + right) / 2)


@ab.program
def tree_gru(tree, p):
    """(logits (5,), root h (H,)) of one binary ``Tree``; ``p`` is a ``Params``."""
    h = tree_gru_cell(tree, p)
    return p.out(h), h


program = tree_gru


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


instances = binary_trees  # instances(n, seed): SST-like binary trees, tiny vocab


def _gru(p: Params, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The GRU cell written out (PyTorch's gate order r, z, n): x, h (H,) -> (H,)."""
    gi = x @ p.cell.weight_ih.T + p.cell.bias_ih
    gh = h @ p.cell.weight_hh.T + p.cell.bias_hh
    r, z, n = gi.chunk(3)
    hr, hz, hn = gh.chunk(3)
    r, z = torch.sigmoid(r + hr), torch.sigmoid(z + hz)
    n = torch.tanh(n + r * hn)
    return (1 - z) * n + z * h


def reference(tree: Tree, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch, the GRU equations spelled out, nodes visited in reverse pre-order (children first)."""
    order: list[Tree] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        order.append(node)
        if not node.is_leaf:
            todo += [node.left, node.right]
    h: dict[int, torch.Tensor] = {}
    for node in reversed(order):
        if node.is_leaf:
            x = p.emb.weight[node.word_id]
            h[id(node)] = _gru(p, x, torch.zeros_like(x))
        else:
            left, right = h[id(node.left)], h[id(node.right)]
            x = torch.relu(torch.cat([left, right]) @ p.merge.weight.T + p.merge.bias)
            h[id(node)] = _gru(p, x, (left + right) / 2)
    root = h[id(tree)]
    return root @ p.out.weight.T + p.out.bias, root


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
