"""Token-level mixture of experts with top-k routing over a sentence.

Each token's embedding is scored by a gate; ``torch.topk`` picks its two
best experts, their indices come to the host with ``.tolist()``, and the
token runs through the chosen experts of an ``nn.ModuleList``,
``p.experts[idx](x)``, weighted by the softmax of the two gate scores. A
shared expert chosen by the token id itself (``p.experts[t % n]``, a host
int) is added. A GRU cell reads the mixed tokens; its last state classifies.

Run it: ``python -m examples.moe_router``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded, token_lists

NAME = "moe_router"
SUMMARY = "top-2 mixture of experts: topk(...).tolist(), p.experts[idx](x) on an nn.ModuleList, a GRU over tokens"


class Params(nn.Module):
    """Embedding (VOCAB, H), gate H -> E, E experts H -> H (``nn.ModuleList``), GRU cell, classifier H -> 3."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, n_experts: int = 4,
                 classes: int = 3):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.gate = nn.Linear(hidden, n_experts)
            self.experts = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(n_experts))
            self.rnn = nn.GRUCell(hidden, hidden)
            self.out = nn.Linear(hidden, classes)
        self.hidden = hidden
        self.k = 2


@ab.function
def route(x, token, p):
    """The token's mixture (H,): its top-k experts weighted by their gate softmax, plus its token's expert."""
    scores, idx = torch.topk(p.gate(x), p.k)
    weights = F.softmax(scores, dim=-1)
    y = p.experts[token % len(p.experts)](x)
    for w, e in zip(weights, idx.tolist()):
        y = y + w * torch.relu(p.experts[e](x))
    return y


@ab.program
def moe_router(tokens, p):
    """(logits (3,), experts chosen (T, k) as a list of lists of ints) of one token list."""
    h = torch.zeros(p.hidden)
    chosen = []
    for t in tokens:
        x = p.emb(torch.tensor(t))
        chosen.append(torch.topk(p.gate(x), p.k).indices.tolist())
        h = p.rnn(route(x, t, p), h)
    return p.out(h), chosen


program = moe_router


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[list[int]]:
    """``n`` token lists of 1-10 tokens, the same for the same ``seed``."""
    return token_lists(n, seed, 1, 10)


def reference(tokens: list[int], p: Params) -> tuple[torch.Tensor, list[list[int]]]:
    """Plain PyTorch: gates of the whole sentence at once, experts applied token by token, GRU spelled out."""
    x_all = p.emb.weight[tokens]  # (T, H)
    gates = x_all @ p.gate.weight.T + p.gate.bias  # (T, E)
    top = gates.topk(p.k, dim=1)
    h = torch.zeros(p.hidden)
    for j, t in enumerate(tokens):
        x = x_all[j]
        w = torch.softmax(top.values[j], dim=0)
        own = p.experts[t % len(p.experts)]
        y = x @ own.weight.T + own.bias
        for i in range(p.k):
            e = p.experts[int(top.indices[j, i])]
            y = y + w[i] * torch.relu(x @ e.weight.T + e.bias)
        h = p.rnn(y.unsqueeze(0), h.unsqueeze(0))[0]
    return h @ p.out.weight.T + p.out.bias, top.indices.tolist()


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
