"""DAG (lattice) RNN: a node's input state is the sum of its predecessors' states.

An instance is a word lattice: nodes in topological order, each with a word
and the indices of its predecessors (earlier nodes; the first node has
none). Every node runs a tanh cell on its word and the SUM of its
predecessors' states; the last node's state classifies the lattice.

Run it: ``python -m examples.dag_rnn``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded

NAME = "dag_rnn"
SUMMARY = "lattice/DAG RNN: nodes in topological order, each sums its predecessors' states"


@dataclass(eq=False)
class LatticeNode:
    """One lattice node: a word id in ``0 .. VOCAB-1`` and predecessor indices (all smaller than its own)."""

    word_id: int
    preds: list[int]


@dataclass(eq=False)
class Lattice:
    """A DAG in topological order: ``nodes[i].preds`` index ``nodes[:i]``; the last node is the sink."""

    nodes: list[LatticeNode]


class Params(nn.Module):
    """Embedding (VOCAB, H), input map ``nn.Linear(H, H)``, state map ``nn.Linear(H, H)``, classifier H -> 4."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 4):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.W_x = nn.Linear(hidden, hidden)
            self.W_h = nn.Linear(hidden, hidden, bias=False)
            self.out = nn.Linear(hidden, classes)
        self.hidden = hidden


@ab.program
def dag_rnn(lattice, p):
    """(logits (4,), node states (N, H)) of one ``Lattice`` with N nodes."""
    states = []
    for node in lattice.nodes:
        x = p.emb.weight[node.word_id]
        if node.preds:
            h_in = sum(states[j] for j in node.preds)
        else:
            h_in = torch.zeros(p.hidden)
        states.append(torch.tanh(p.W_x(x) + p.W_h(h_in)))
    return p.out(states[-1]), torch.stack(states)


program = dag_rnn


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def _lattice(rng: random.Random) -> Lattice:
    nodes = [LatticeNode(rng.randrange(VOCAB), [])]
    for i in range(1, rng.randint(1, 12)):
        preds = sorted(rng.sample(range(max(0, i - 3), i), min(i, rng.randint(1, 2))))
        nodes.append(LatticeNode(rng.randrange(VOCAB), preds))
    return Lattice(nodes)


def instances(n: int, seed: int = 0) -> list[Lattice]:
    """``n`` random lattices (1-12 nodes, 1-2 predecessors among the 3 previous nodes), seeded."""
    rng = random.Random(seed)
    return [_lattice(rng) for _ in range(n)]


def reference(lattice: Lattice, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch: inputs embedded and projected all at once, states filled into a preallocated (N, H) tensor."""
    xs = p.W_x(p.emb(torch.tensor([node.word_id for node in lattice.nodes])))  # (N, H)
    rows: list[torch.Tensor] = []
    for i, node in enumerate(lattice.nodes):
        h_in = torch.zeros(p.hidden)
        for j in node.preds:
            h_in = h_in + rows[j]
        rows.append(torch.tanh(xs[i] + h_in @ p.W_h.weight.T))
    states = torch.stack(rows)
    return p.out(states[-1]), states


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
