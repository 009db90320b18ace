"""Greedy seq2seq decoding that stops at EOS.

A GRU encoder reads the source tokens; a GRU decoder starts from the
encoder's final state and the BOS token and, at every step, feeds back its
own argmax. Decoding stops when the argmax is EOS (``break``) or after
``max_len`` steps, so every instance decodes a different number of tokens,
known only once the logits are computed (``.item()``).

Run it: ``python -m examples.greedy_decoder``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, random_tokens, seeded

NAME = "greedy_decoder"
SUMMARY = "greedy seq2seq decoding: GRU encoder, GRU decoder fed its own argmax, break on EOS"

BOS, EOS = 0, 1


@dataclass(eq=False)
class Source:
    """One source sentence: ``tokens`` (1-8 ids in ``2 .. VOCAB-1``) and a decoding budget ``max_len``."""

    tokens: list[int]
    max_len: int


class Params(nn.Module):
    """Source and target embeddings (VOCAB, H), encoder and decoder ``nn.GRUCell(H, H)``, output H -> VOCAB."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN):
        super().__init__()
        with seeded(seed):
            self.src_emb = nn.Embedding(vocab, hidden)
            self.tgt_emb = nn.Embedding(vocab, hidden)
            self.encoder = nn.GRUCell(hidden, hidden)
            self.decoder = nn.GRUCell(hidden, hidden)
            self.out = nn.Linear(hidden, vocab)
            with torch.no_grad():
                self.out.bias[EOS] += 0.5  # some instances stop early, some run to max_len
        self.hidden = hidden


@ab.program
def greedy_decoder(src, p):
    """(step logits (T, VOCAB), final decoder state (H,)) for one ``Source``; T <= src.max_len."""
    h = torch.zeros(p.hidden)
    for tok in src.tokens:
        h = p.encoder(p.src_emb.weight[tok], h)
    prev = BOS
    step_logits = []
    for _ in range(src.max_len):
        h = p.decoder(p.tgt_emb.weight[prev], h)
        logits = p.out(h)
        step_logits.append(logits)
        prev = logits.argmax().item()
        if prev == EOS:
            break
    return torch.stack(step_logits), h


program = greedy_decoder


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[Source]:
    """``n`` random sources (1-8 tokens, budget 1-8 steps), the same for the same ``seed``."""
    rng = random.Random(seed)
    return [Source([2 + t for t in random_tokens(rng, 1, 8, VOCAB - 2)], rng.randint(1, 8)) for _ in range(n)]


def reference(src: Source, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch with batch-of-one module calls, as in a typical seq2seq tutorial."""
    h = torch.zeros(1, p.hidden)
    enc_in = p.src_emb(torch.tensor(src.tokens))  # (S, H)
    for t in range(enc_in.shape[0]):
        h = p.encoder(enc_in[t:t + 1], h)
    outputs = []
    y = torch.tensor([BOS])
    while len(outputs) < src.max_len:
        h = p.decoder(p.tgt_emb(y), h)
        logits = p.out(h)  # (1, VOCAB)
        outputs.append(logits[0])
        y = logits.argmax(dim=-1)
        if int(y) == EOS:
            break
    return torch.stack(outputs), h[0]


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
