"""Adaptive Computation Time RNN (Graves 2016): each token "ponders" until it is sure enough.

For every input token the GRU cell runs again and again on it; after each
step a halting unit gives a probability. The token stops once the summed
probabilities would pass ``1 - EPS`` (``while True`` ... ``break``), or after
``MAX_PONDER`` steps; its state is the halting-weighted mean of the step
states, the last step taking the remainder. So every token of every
instance takes a different number of steps, decided by computed values.

Run it: ``python -m examples.act_rnn``.
"""

from __future__ import annotations

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded, token_lists

NAME = "act_rnn"
SUMMARY = "ACT halting RNN: ponder each token until cumulative halting prob > 1 - eps (while True + break)"

EPS = 0.01
MAX_PONDER = 5


class Params(nn.Module):
    """``nn.Embedding(VOCAB, H)``, ``nn.GRUCell(H, H)``, halting unit ``nn.Linear(H, 1)``, classifier H -> 3."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 3):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.cell = nn.GRUCell(hidden, hidden)
            self.halt = nn.Linear(hidden, 1)
            self.out = nn.Linear(hidden, classes)
            with torch.no_grad():
                self.halt.bias.fill_(-0.5)  # about 2-3 ponder steps per token
        self.hidden = hidden


@ab.program
def act_rnn(tokens, p):
    """(logits (3,), final state (H,), total ponder steps) of one token list."""
    h = torch.zeros(p.hidden)
    steps = 0
    for tok in tokens:
        x = p.emb.weight[tok]
        total = 0.0
        n = 0
        mean_h = torch.zeros(p.hidden)
        while True:
            h = p.cell(x, h)
            n += 1
            halt = torch.sigmoid(p.halt(h)).item()
            if total + halt > 1 - EPS or n == MAX_PONDER:
                mean_h = mean_h + (1 - total) * h
                break
            total += halt
            mean_h = mean_h + halt * h
        h = mean_h
        steps += n
    return p.out(h), h, steps


program = act_rnn


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[list[int]]:
    """``n`` random token lists (1-10 ids in ``0 .. VOCAB-1``), the same for the same ``seed``."""
    return token_lists(n, seed, 1, 10)


def reference(tokens: list[int], p: Params) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Plain PyTorch: per token, collect the step states and halting weights, then take the weighted sum."""
    h = torch.zeros(1, p.hidden)
    steps = 0
    for x in p.emb(torch.tensor(tokens)).split(1):  # (1, H) each
        states, weights = [], []
        budget = 1.0
        while True:
            h = p.cell(x, h)
            states.append(h)
            prob = float(torch.sigmoid(p.halt(h)))
            if len(states) == MAX_PONDER or (1.0 - budget) + prob > 1 - EPS:
                weights.append(budget)
                break
            weights.append(prob)
            budget -= prob
        h = sum(w * s for w, s in zip(weights, states))
        steps += len(states)
    return p.out(h)[0], h[0], steps


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
