"""Beam-search decoding of a GRU decoder conditioned on an encoded source sentence.

The source is encoded by a GRU; decoding keeps ``p.beam`` hypotheses, each a
tuple ``(score, tokens, h)`` holding a list of token ids (a list of tuples
holding lists). Each step expands every live hypothesis by its top-k next
tokens (``torch.topk`` of the log-softmax, read with ``.tolist()``), sorts
the candidates with ``sorted(..., key=lambda c: c[0], reverse=True)`` and
keeps the best; finished ones (EOS) move to ``done``. The loop runs
``while beams:`` (a list's truth value). The result is the hypothesis of
best length-normalized score, ``max(done, key=lambda c: c[0] / len(c[1]))``,
and its token log-probabilities rescored as one tensor.

Run it: ``python -m examples.beam_decoder``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded, token_lists

NAME = "beam_decoder"
SUMMARY = "beam search: hypotheses as (score, tokens, h) tuples, sorted(key=lambda, reverse=True), while beams:, max(key=)"

EOS = 0
"""End-of-sequence token id."""


class Params(nn.Module):
    """Embedding (VOCAB, H), encoder and decoder GRU cells, output layer H -> VOCAB; beam width and budget."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.enc = nn.GRUCell(hidden, hidden)
            self.dec = nn.GRUCell(hidden, hidden)
            self.out = nn.Linear(hidden, vocab)
        self.hidden = hidden
        self.beam = 3
        self.max_len = 6


@ab.function
def encode(tokens, p):
    """The source's final GRU state (H,)."""
    h = torch.zeros(p.hidden)
    for t in tokens:
        h = p.enc(p.emb(torch.tensor(t)), h)
    return h


@ab.program
def beam_decoder(tokens, p):
    """(best hypothesis's tokens, their log-probabilities (L,)) of one source token list."""
    h0 = encode(tokens, p)
    beams = [(0.0, [tokens[0]], h0)]
    done = []
    while beams:
        candidates = []
        for score, seq, h in beams:
            h_new = p.dec(p.emb(torch.tensor(seq[-1])), h)
            logp = F.log_softmax(p.out(h_new), dim=-1)
            top = torch.topk(logp, p.beam)
            for lp, tok in zip(top.values.tolist(), top.indices.tolist()):
                candidates.append((score + lp, seq + [tok], h_new))
        beams = []
        for cand in sorted(candidates, key=lambda c: c[0], reverse=True)[:p.beam]:
            if cand[1][-1] == EOS or len(cand[1]) > p.max_len:
                done.append(cand)
            else:
                beams.append(cand)
        if len(done) >= p.beam:
            break
    best = max(done, key=lambda c: c[0] / len(c[1]))
    seq = best[1]
    h = h0
    logps = []
    for prev, tok in zip(seq[:-1], seq[1:]):
        h = p.dec(p.emb(torch.tensor(prev)), h)
        logps.append(F.log_softmax(p.out(h), dim=-1)[tok])
    return seq, torch.stack(logps)


program = beam_decoder


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[list[int]]:
    """``n`` source token lists of 1-8 tokens, the same for the same ``seed``."""
    return token_lists(n, seed, 1, 8)


def reference(tokens: list[int], p: Params) -> tuple[list[int], torch.Tensor]:
    """Plain PyTorch: the live beam as one (K, H) batch per step, candidates ranked with ``torch.sort``."""
    h = torch.zeros(1, p.hidden)
    for t in tokens:
        h = p.enc(p.emb.weight[t:t + 1], h)
    h0 = h
    live_scores, live_seqs, live_h = [0.0], [[tokens[0]]], h0
    done: list[tuple[float, list[int]]] = []
    while live_seqs:
        h_new = p.dec(p.emb.weight[[s[-1] for s in live_seqs]], live_h)  # (K, H)
        logp = F.log_softmax(h_new @ p.out.weight.T + p.out.bias, dim=1)
        top = logp.topk(p.beam, dim=1)
        cands = [(live_scores[k] + float(top.values[k, j]), live_seqs[k] + [int(top.indices[k, j])], k)
                 for k in range(len(live_seqs)) for j in range(p.beam)]
        order = sorted(range(len(cands)), key=lambda i: -cands[i][0])[:p.beam]  # stable, as sorted(reverse=True)
        live_scores, live_seqs, rows = [], [], []
        for i in order:
            score, seq, k = cands[i]
            if seq[-1] == EOS or len(seq) > p.max_len:
                done.append((score, seq))
            else:
                live_scores.append(score)
                live_seqs.append(seq)
                rows.append(k)
        live_h = h_new[rows]
        if len(done) >= p.beam:
            break
    seq = max(done, key=lambda c: c[0] / len(c[1]))[1]
    h = h0
    logps = []
    for prev, tok in zip(seq[:-1], seq[1:]):
        h = p.dec(p.emb.weight[prev:prev + 1], h)
        logps.append(F.log_softmax(h @ p.out.weight.T + p.out.bias, dim=1)[0, tok])
    return seq, torch.stack(logps)


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
