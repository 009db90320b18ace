"""Child-Sum TreeLSTM (Tai et al. 2015, §3.1) over n-ary trees, e.g. dependency parses.

Every node carries a word and any number of children. A node's input state
is the SUM of its children's hidden states; each child gets its own forget
gate. Leaves have no children: their summed state is zero.

Run it: ``python -m examples.childsum_treelstm``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded

NAME = "childsum_treelstm"
SUMMARY = "Child-Sum TreeLSTM over n-ary trees (children summed, one forget gate per child)"


@dataclass(eq=False)
class NaryTree:
    """A node of an n-ary tree: a word id in ``0 .. VOCAB-1`` and 0 or more children."""

    word_id: int
    children: list["NaryTree"] = field(default_factory=list)

    def size(self) -> int:
        """Number of nodes."""
        return 1 + sum(c.size() for c in self.children)


class Params(nn.Module):
    """Embedding (VOCAB, H); input maps ``W_*`` (H -> *), state maps ``U_*``; classifier H -> 5."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 5):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.W_iou = nn.Linear(hidden, 3 * hidden)
            self.U_iou = nn.Linear(hidden, 3 * hidden, bias=False)
            self.W_f = nn.Linear(hidden, hidden)
            self.U_f = nn.Linear(hidden, hidden, bias=False)
            self.out = nn.Linear(hidden, classes)
        self.hidden = hidden


@ab.function
def node_state(node, p):
    """(h, c), each of shape (H,), of the subtree rooted at ``node``."""
    x = p.emb.weight[node.word_id]
    states = [node_state(child, p) for child in node.children]
    if len(states) == 0:
        h_sum = torch.zeros(p.hidden)
        fc = torch.zeros(p.hidden)
    else:
        hs = torch.stack([h for h, _ in states])  # (K, H)
        cs = torch.stack([c for _, c in states])  # (K, H)
        h_sum = hs.sum(dim=0)
        f = torch.sigmoid(p.W_f(x) + p.U_f(hs))  # (K, H): one forget gate per child
        fc = (f * cs).sum(dim=0)
    i, o, u = torch.chunk(p.W_iou(x) + p.U_iou(h_sum), 3, dim=-1)
    c = torch.sigmoid(i) * torch.tanh(u) + fc
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


@ab.program
def childsum_treelstm(tree, p):
    """(logits (5,), root h (H,)) of one ``NaryTree``; ``p`` is a ``Params``."""
    h, _ = node_state(tree, p)
    return p.out(h), h


program = childsum_treelstm


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def _random_tree(rng: random.Random, depth: int) -> NaryTree:
    fanout = 0 if depth == 0 else rng.choice([0, 1, 2, 2, 3, 4])
    return NaryTree(rng.randrange(VOCAB), [_random_tree(rng, depth - 1) for _ in range(fanout)])


def instances(n: int, seed: int = 0) -> list[NaryTree]:
    """``n`` random n-ary trees (0-4 children a node, depth up to 4), the same for the same ``seed``."""
    rng = random.Random(seed)
    return [_random_tree(rng, rng.randint(0, 4)) for _ in range(n)]


def reference(tree: NaryTree, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch: post-order over an explicit stack, children's forget gates one at a time."""
    H = p.hidden
    done: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    stack = [(tree, False)]
    while stack:
        node, expanded = stack.pop()
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in node.children)
            continue
        x = p.emb.weight[node.word_id]
        h_sum, fc = x.new_zeros(H), x.new_zeros(H)
        wf = x @ p.W_f.weight.T + p.W_f.bias
        for child in node.children:
            ch, cc = done.pop(id(child))
            h_sum = h_sum + ch
            fc = fc + torch.sigmoid(wf + ch @ p.U_f.weight.T) * cc
        gates = x @ p.W_iou.weight.T + p.W_iou.bias + h_sum @ p.U_iou.weight.T
        i, o, u = gates[:H], gates[H:2 * H], gates[2 * H:]
        c = torch.sigmoid(i) * torch.tanh(u) + fc
        done[id(node)] = (torch.sigmoid(o) * torch.tanh(c), c)
    h, _ = done[id(tree)]
    return h @ p.out.weight.T + p.out.bias, h


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
