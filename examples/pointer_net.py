"""Pointer network (Vinyals et al. 2015) with greedy decoding.

A GRU encodes the input tokens, keeping every step's state. The decoder
then runs one step per input position; at each step it scores every input
(``v . tanh(W1 e_j + W2 d)``), points at the argmax, and feeds the pointed
input's embedding to its next step. Scores are over a list as long as the
instance, so both the attention width and the number of steps vary.

Run it: ``python -m examples.pointer_net``.
"""

from __future__ import annotations

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded, token_lists

NAME = "pointer_net"
SUMMARY = "pointer network: attention scores over the input list, argmax pointer fed back per step"


class Params(nn.Module):
    """Embedding (VOCAB, H), encoder/decoder ``nn.GRUCell(H, H)``, attention ``W1``, ``W2`` (H -> H), ``v`` (H -> 1),
    a learned first decoder input ``start`` (H,)."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.encoder = nn.GRUCell(hidden, hidden)
            self.decoder = nn.GRUCell(hidden, hidden)
            self.W1 = nn.Linear(hidden, hidden, bias=False)
            self.W2 = nn.Linear(hidden, hidden, bias=False)
            self.v = nn.Linear(hidden, 1, bias=False)
            self.start = nn.Parameter(torch.randn(hidden) * 0.1)
        self.hidden = hidden


@ab.program
def pointer_net(tokens, p):
    """(pointer scores (L, L): one row per decoder step, pointers: L ints in ``0 .. L-1``) of L tokens."""
    inputs = [p.emb.weight[tok] for tok in tokens]
    h = torch.zeros(p.hidden)
    enc_states = []
    for x in inputs:
        h = p.encoder(x, h)
        enc_states.append(h)
    keys = p.W1(torch.stack(enc_states))  # (L, H)
    d = h
    dec_in = p.start
    all_scores = []
    pointers = []
    for _ in range(len(tokens)):
        d = p.decoder(dec_in, d)
        scores = p.v(torch.tanh(keys + p.W2(d))).squeeze(-1)  # (L,)
        ptr = int(scores.argmax())
        all_scores.append(scores)
        pointers.append(ptr)
        dec_in = inputs[ptr]
    return torch.stack(all_scores), pointers


program = pointer_net


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[list[int]]:
    """``n`` random token lists (2-8 ids in ``0 .. VOCAB-1``), the same for the same ``seed``."""
    return token_lists(n, seed, 2, 8)


def reference(tokens: list[int], p: Params) -> tuple[torch.Tensor, list[int]]:
    """Plain PyTorch, batch-of-one (1, ...) tensors: the encoder over an (L, H) embedding, attention by broadcast."""
    emb = p.emb(torch.tensor(tokens))  # (L, H)
    h = torch.zeros(1, p.hidden)
    enc = torch.empty(len(tokens), p.hidden)
    for t in range(len(tokens)):
        h = p.encoder(emb[t:t + 1], h)
        enc[t] = h[0]
    keys = enc @ p.W1.weight.T  # (L, H)
    d, x = h, p.start.unsqueeze(0)
    rows, pointers = [], []
    for _ in tokens:
        d = p.decoder(x, d)
        u = (torch.tanh(keys + d @ p.W2.weight.T) @ p.v.weight.T)[:, 0]  # (L,)
        rows.append(u)
        pointers.append(int(torch.argmax(u)))
        x = emb[pointers[-1]].unsqueeze(0)
    return torch.stack(rows), pointers


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
