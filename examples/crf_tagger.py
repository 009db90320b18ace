"""A BiGRU-CRF sequence tagger with Viterbi decoding (Lample et al. 2016; Huang et al. 2015).

A GRU runs over the sentence forward; the backward pass reverses a copy of
the word list (``list.reverse()``), and its states are reversed back into
place. Emission scores come from both directions. Viterbi decoding keeps,
per step, the best previous tag of each tag (``max(dim=0)``) with
back-pointers read as host lists (``.tolist()``); the best final tag is
``max(range(T), key=lambda k: final[k])`` over a host list, and the path is
traced back and reversed. The path's score is then recomputed from the
transition matrix, ``p.trans[prev][k]``: a weight row chosen by the
instance's own tags.

Run it: ``python -m examples.crf_tagger``.
"""

from __future__ import annotations

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded, token_lists

NAME = "crf_tagger"
SUMMARY = "BiGRU-CRF tagger: reversed list, Viterbi with max(dim=0) and .tolist() backpointers, max(key=lambda), W[k]"

TAGS = 5
"""Tag set size."""


class Params(nn.Module):
    """Embedding (VOCAB, H), forward and backward GRU cells, emissions 2H -> TAGS, transitions (TAGS, TAGS)."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.fwd = nn.GRUCell(hidden, hidden)
            self.bwd = nn.GRUCell(hidden, hidden)
            self.emit = nn.Linear(2 * hidden, TAGS)
            self.trans = nn.Parameter(0.5 * torch.randn(TAGS, TAGS))  # trans[i][j]: from tag i to tag j
            self.start = nn.Parameter(0.5 * torch.randn(TAGS))
        self.hidden = hidden


@ab.function
def run_gru(cell, xs, h0):
    """The states (a list of (H,)) of ``cell`` over the list ``xs``."""
    states = []
    h = h0
    for x in xs:
        h = cell(x, h)
        states.append(h)
    return states


@ab.program
def crf_tagger(words, p):
    """(best tag path as a list of ints, its score (), emissions (T, TAGS)) of one sentence."""
    xs = [p.emb(torch.tensor(w)) for w in words]
    h0 = torch.zeros(p.hidden)
    forward = run_gru(p.fwd, xs, h0)
    rev = list(xs)
    rev.reverse()
    backward = run_gru(p.bwd, rev, h0)
    backward.reverse()
    emissions = torch.stack([p.emit(torch.cat([f, b])) for f, b in zip(forward, backward)])
    score = p.start + emissions[0]
    backpointers = []
    for t in range(1, len(words)):
        best, prev = (score.unsqueeze(1) + p.trans).max(dim=0)
        backpointers.append(prev.tolist())
        score = best + emissions[t]
    final = score.tolist()
    tag = max(range(TAGS), key=lambda k: final[k])
    path = [tag]
    for bp in reversed(backpointers):
        tag = bp[tag]
        path.append(tag)
    path.reverse()
    total = p.start[path[0]] + emissions[0][path[0]]
    for t in range(1, len(path)):
        total = total + p.trans[path[t - 1]][path[t]] + emissions[t][path[t]]
    return path, total, emissions


program = crf_tagger


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[list[int]]:
    """``n`` sentences of 1-10 word ids, the same for the same ``seed``."""
    return token_lists(n, seed, 1, 10)


def reference(words: list[int], p: Params) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """Plain PyTorch: both GRUs over an index range, Viterbi over an explicit (T, TAGS) table of back-pointers."""
    T = len(words)
    x = p.emb.weight[words]
    hf, hb = torch.zeros(1, p.hidden), torch.zeros(1, p.hidden)
    fwd, bwd = [None] * T, [None] * T
    for t in range(T):
        hf = p.fwd(x[t:t + 1], hf)
        fwd[t] = hf[0]
    for t in range(T - 1, -1, -1):
        hb = p.bwd(x[t:t + 1], hb)
        bwd[t] = hb[0]
    em = torch.stack([torch.cat([f, b]) for f, b in zip(fwd, bwd)]) @ p.emit.weight.T + p.emit.bias
    delta = p.start + em[0]
    back = torch.zeros(T, TAGS, dtype=torch.long)
    for t in range(1, T):
        cand = delta[:, None] + p.trans
        back[t] = cand.argmax(0)
        delta = cand.max(0).values + em[t]
    tag = int(delta.argmax())
    path = [tag]
    for t in range(T - 1, 0, -1):
        tag = int(back[t, tag])
        path.insert(0, tag)
    idx = torch.tensor(path)
    score = p.start[path[0]] + em[torch.arange(T), idx].sum() + p.trans[idx[:-1], idx[1:]].sum()
    return path, score, em


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
