"""Child-sum TreeLSTM that stores each node's state on the node: ``node.state = cell(...)``.

The tree is walked bottom-up over its post-order node list (no recursion);
each node reads its children's stored states as ``child.state``, and a leaf
starts from ``h = c = torch.zeros(p.hidden)``. The gates come out of
``tuple(torch.chunk(...))``. Written the way a researcher working from a
parser's node objects writes it (Tai et al. 2015, §3.1).

Run it: ``python -m examples.stateful_treelstm``.
"""

from __future__ import annotations

import random

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded

NAME = "stateful_treelstm"
SUMMARY = "child-sum TreeLSTM bottom-up over a node list, state stored as node.state and read as child.state"


class Node:
    """A parse node: a word id, its children, and ``state`` the model leaves on it (None before a run)."""

    def __init__(self, word_id: int, children: list["Node"] | None = None):
        self.word_id = word_id
        self.children = children or []
        self.state = None

    def postorder(self) -> list["Node"]:
        """The nodes, children before parents."""
        out: list[Node] = []
        for child in self.children:
            out += child.postorder()
        out.append(self)
        return out

    def __getstate__(self) -> dict:  # pickled without the state a run left on it
        return {"word_id": self.word_id, "children": self.children}

    def __setstate__(self, d: dict) -> None:
        self.__init__(d["word_id"], d["children"])


class Params(nn.Module):
    """Embedding (VOCAB, H); ``iou`` 2H -> 3H, forget gate 2H -> H, classifier H -> 5."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 5):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.iou = nn.Linear(2 * hidden, 3 * hidden)
            self.forget = nn.Linear(2 * hidden, hidden)
            self.out = nn.Linear(hidden, classes)
        self.hidden = hidden


@ab.function
def cell(x, children, p):
    """(h, c) of a node with input ``x`` (H,) from its children's stored states."""
    h = c = torch.zeros(p.hidden)
    fc = torch.zeros(p.hidden)
    for child in children:
        ch, cc = child.state
        h = h + ch
        fc = fc + torch.sigmoid(p.forget(torch.cat([x, ch]))) * cc
    i, o, u = tuple(torch.chunk(p.iou(torch.cat([x, h])), 3))
    c = torch.sigmoid(i) * torch.tanh(u) + fc
    return torch.sigmoid(o) * torch.tanh(c), c


@ab.program
def stateful_treelstm(tree, p):
    """(logits (5,), root h (H,)) of one ``Node`` tree; leaves every node's (h, c) in ``node.state``."""
    for node in tree.postorder():
        node.state = cell(p.emb(torch.tensor(node.word_id)), node.children, p)
    h, _ = tree.state
    return p.out(h), h


program = stateful_treelstm


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def _random_tree(rng: random.Random, depth: int) -> Node:
    fanout = 0 if depth == 0 else rng.choice([0, 1, 2, 2, 3])
    return Node(rng.randrange(VOCAB), [_random_tree(rng, depth - 1) for _ in range(fanout)])


def instances(n: int, seed: int = 0) -> list[Node]:
    """``n`` random trees (0-3 children a node, depth up to 4), the same for the same ``seed``."""
    rng = random.Random(seed)
    return [_random_tree(rng, rng.randint(0, 4)) for _ in range(n)]


def reference(tree: Node, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch by memoized recursion, states in a dict (the nodes are left untouched)."""
    H = p.hidden

    def state(node: Node) -> tuple[torch.Tensor, torch.Tensor]:
        x = p.emb.weight[node.word_id]
        kids = [state(c) for c in node.children]
        h_sum = sum((h for h, _ in kids), torch.zeros(H))
        fc = sum((torch.sigmoid(torch.cat([x, h]) @ p.forget.weight.T + p.forget.bias) * c for h, c in kids),
                 torch.zeros(H))
        g = torch.cat([x, h_sum]) @ p.iou.weight.T + p.iou.bias
        c = torch.sigmoid(g[:H]) * torch.tanh(g[2 * H:]) + fc
        return torch.sigmoid(g[H:2 * H]) * torch.tanh(c), c

    h, _ = state(tree)
    return h @ p.out.weight.T + p.out.bias, h


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
