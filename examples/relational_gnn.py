"""A relational graph network (R-GCN, Schlichtkrull et al. 2018) over small labelled graphs.

Each instance is a graph with its own number of nodes and typed edges,
held as an adjacency list of tuples that hold lists: ``adj[v] = [(u,
etype), ...]``. Every round, each node sums the messages of its in-edges,
``p.edge_lin[etype](h[u])`` with the edge's type choosing the
``nn.ModuleList`` entry, adds its self-loop and is L2-normalized with
``F.normalize``. The readout concatenates the final states of the graph's
marked nodes, ``torch.cat`` of a list whose length differs per graph, and
max-pools it.

Run it: ``python -m examples.relational_gnn``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded

NAME = "relational_gnn"
SUMMARY = "R-GCN: p.edge_lin[etype](h[u]) over an nn.ModuleList, adjacency as lists of tuples, F.normalize, torch.cat"

N_TYPES = 3
"""Edge types."""

ROUNDS = 2
"""Message-passing rounds."""


@dataclass(eq=False)
class Graph:
    """One instance: node labels, ``adj[v]`` the (source, edge type) pairs of v's in-edges, marked nodes."""

    labels: list[int]
    adj: list[list[tuple[int, int]]]
    marked: list[int]


class Params(nn.Module):
    """Label embedding (VOCAB, H), one H -> H map per edge type (``nn.ModuleList``), self loop, classifier."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 4):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.edge_lin = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(N_TYPES))
            self.self_loop = nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, classes)
        self.hidden = hidden


@ab.function
def message_round(h, adj, p):
    """New node states (a list of (H,)) after one round of typed message passing."""
    new = []
    for v, edges in enumerate(adj):
        m = p.self_loop(h[v])
        for u, etype in edges:
            m = m + p.edge_lin[etype](h[u])
        new.append(F.normalize(torch.relu(m), dim=-1))
    return new


@ab.program
def relational_gnn(graph, p):
    """(logits (4,), final node states (N, H)) of one ``Graph``."""
    h = [p.emb(torch.tensor(label)) for label in graph.labels]
    for _ in range(ROUNDS):
        h = message_round(h, graph.adj, p)
    readout = torch.cat([h[v].unsqueeze(0) for v in graph.marked])  # (M, H), M marked nodes
    return p.out(readout.max(dim=0).values), torch.stack(h)


program = relational_gnn


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[Graph]:
    """``n`` random graphs of 2-9 nodes, each node with 0-3 typed in-edges and 1-3 marked nodes, seeded."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        size = rng.randint(2, 9)
        adj = [[(rng.randrange(size), rng.randrange(N_TYPES)) for _ in range(rng.randint(0, 3))]
               for _ in range(size)]
        marked = sorted(rng.sample(range(size), rng.randint(1, min(3, size))))
        out.append(Graph([rng.randrange(VOCAB) for _ in range(size)], adj, marked))
    return out


def reference(graph: Graph, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch, one round at a time over an (N, H) matrix: messages by edge type with ``index_add``."""
    h = p.emb.weight[graph.labels]  # (N, H)
    src = torch.tensor([u for edges in graph.adj for u, _ in edges], dtype=torch.long)
    dst = torch.tensor([v for v, edges in enumerate(graph.adj) for _ in edges], dtype=torch.long)
    types = [t for edges in graph.adj for _, t in edges]
    for _ in range(ROUNDS):
        m = h @ p.self_loop.weight.T + p.self_loop.bias
        for i, (s, d, t) in enumerate(zip(src.tolist(), dst.tolist(), types)):
            m = m.index_add(0, torch.tensor([d]), (h[s] @ p.edge_lin[t].weight.T).unsqueeze(0))
        m = torch.relu(m)
        h = m / m.norm(dim=1, keepdim=True).clamp(min=1e-12)
    pooled = h[graph.marked].max(dim=0).values
    return pooled @ p.out.weight.T + p.out.bias, h


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
