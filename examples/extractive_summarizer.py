"""An extractive summarizer over a document of sentences (SummaRuNNer-style, Nallapati et al. 2017).

A document is a list of sentences, each a list of word ids: both levels
vary in length. A sentence is the mean of its word embeddings
(``p.emb(torch.tensor(words)).mean(0)``); the document vector attends over
the sentence stack; each sentence's score mixes salience and novelty and is
passed through ``torch.where`` (a leaky floor). ``torch.topk`` picks up to
three sentences, which are put back into document order with
``sorted(..., key=lambda ...)``; the summary is ``torch.cat`` of the picked
sentences' vectors (a length per document), and the best sentence by
``max(..., key=...)`` is reported. Sentences are scored by ``score(*pair)``
over a list of ``(index, vector)`` tuples.

Run it: ``python -m examples.extractive_summarizer``.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded

NAME = "extractive_summarizer"
SUMMARY = "extractive summarizer: emb(torch.tensor(words)), S @ q / sqrt(d), topk, sorted(key=lambda), torch.cat, *args"

PICK = 3
"""Sentences picked at most."""


class Params(nn.Module):
    """Embedding (VOCAB, H), sentence map H -> H, salience H -> 1, novelty bilinear (H, H), positions."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, max_sents: int = 12):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.sent = nn.Linear(hidden, hidden)
            self.salience = nn.Linear(hidden, 1)
            self.novelty = nn.Parameter(0.3 * torch.randn(hidden, hidden))
            self.position = nn.Parameter(0.1 * torch.randn(max_sents))
        self.d = hidden


@ab.function
def score(i, s, doc, p):
    """The score () of sentence ``i`` with vector ``s`` (H,) in a document with vector ``doc`` (H,)."""
    novelty = s @ p.novelty @ torch.tanh(doc)
    raw = p.salience(s)[0] - novelty + p.position[i]
    return torch.where(raw > 0, raw, 0.1 * raw)


@ab.program
def extractive_summarizer(doc, p):
    """(scores (S,), picked sentence indices in document order, summary (k*H,), best sentence index)."""
    vecs = [torch.tanh(p.sent(p.emb(torch.tensor(words)).mean(0))) for words in doc]
    S = torch.stack(vecs)  # (S, H)
    alpha = torch.softmax(S @ S.mean(0) / math.sqrt(p.d), dim=-1)
    doc_vec = alpha @ S
    pairs = list(enumerate(vecs))
    scores = torch.stack([score(*pair, doc_vec, p) for pair in pairs])
    top = torch.topk(scores, min(PICK, len(doc))).indices.tolist()
    picked = sorted(top, key=lambda i: i)
    summary = torch.cat([vecs[i] for i in picked])
    values = scores.tolist()
    best = max(range(len(doc)), key=lambda i: values[i])
    return scores, picked, summary, best


program = extractive_summarizer


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[list[list[int]]]:
    """``n`` documents of 1-12 sentences of 1-8 word ids, the same for the same ``seed``."""
    rng = random.Random(seed)
    return [[[rng.randrange(VOCAB) for _ in range(rng.randint(1, 8))] for _ in range(rng.randint(1, 12))]
            for _ in range(n)]


def reference(doc: list[list[int]], p: Params) -> tuple[torch.Tensor, list[int], torch.Tensor, int]:
    """Plain PyTorch: sentence vectors by a padded (S, W) lookup and mask, scores all at once."""
    S, W = len(doc), max(len(s) for s in doc)
    ids = torch.tensor([s + [0] * (W - len(s)) for s in doc])
    mask = torch.tensor([[1.0] * len(s) + [0.0] * (W - len(s)) for s in doc])
    means = (p.emb.weight[ids] * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True)
    vecs = torch.tanh(means @ p.sent.weight.T + p.sent.bias)
    alpha = F.softmax(vecs @ vecs.mean(0) * p.d ** -0.5, dim=0)
    doc_vec = alpha @ vecs
    raw = (vecs @ p.salience.weight.T)[:, 0] + p.salience.bias - vecs @ p.novelty @ torch.tanh(doc_vec) \
        + p.position[:S]
    scores = F.leaky_relu(raw, 0.1)
    picked = sorted(scores.topk(min(PICK, S)).indices.tolist())
    return scores, picked, vecs[picked].reshape(-1), int(scores.argmax())


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
