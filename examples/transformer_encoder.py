"""A small Transformer encoder layer (Vaswani et al. 2017) over sentences of different lengths.

One sentence at a time, as a researcher prototypes it: token embeddings
``p.emb(torch.tensor(tokens))`` plus learned positions, two-head
self-attention ``softmax(Q @ K.transpose(-2, -1) / math.sqrt(p.d_head),
dim=-1) @ V`` over the sentence's own length, post-norm residuals with
``F.layer_norm``, a ReLU feed-forward, and a masked mean pool that skips
padding tokens (id 0) with ``torch.where``.

Run it: ``python -m examples.transformer_encoder``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded, token_lists

NAME = "transformer_encoder"
SUMMARY = "Transformer encoder layer: Q @ K.transpose(-2, -1) over per-sentence lengths, softmax(dim=-1), layer_norm"

MAX_LEN = 16
"""Longest sentence (learned positions)."""


class Params(nn.Module):
    """Embedding (VOCAB, H), positions (MAX_LEN, H), Q/K/V/O H -> H, FFN H -> 2H -> H, two layer norms."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, heads: int = 2, classes: int = 4):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.pos = nn.Parameter(0.1 * torch.randn(MAX_LEN, hidden))
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.o = nn.Linear(hidden, hidden)
            self.ff1 = nn.Linear(hidden, 2 * hidden)
            self.ff2 = nn.Linear(2 * hidden, hidden)
            self.ln1 = nn.LayerNorm(hidden)
            self.ln2 = nn.LayerNorm(hidden)
            self.out = nn.Linear(hidden, classes)
        self.d = hidden
        self.heads = heads
        self.d_head = hidden // heads


@ab.function
def self_attention(x, p):
    """Multi-head self-attention of (L, H) token states, L the sentence's length."""
    L = x.shape[0]
    q, k, v = p.qkv(x).chunk(3, dim=-1)
    q = q.view(L, p.heads, p.d_head).transpose(0, 1)  # (heads, L, d_head)
    k = k.view(L, p.heads, p.d_head).transpose(0, 1)
    v = v.view(L, p.heads, p.d_head).transpose(0, 1)
    att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(p.d_head), dim=-1)  # (heads, L, L)
    return p.o((att @ v).transpose(0, 1).reshape(L, p.d))


@ab.program
def transformer_encoder(tokens, p):
    """(logits (4,), token states (L, H)) of one token list."""
    x = p.emb(torch.tensor(tokens)) + p.pos[:len(tokens)]
    x = F.layer_norm(x + self_attention(x, p), (p.d,), p.ln1.weight, p.ln1.bias)
    x = F.layer_norm(x + p.ff2(torch.relu(p.ff1(x))), (p.d,), p.ln2.weight, p.ln2.bias)
    keep = (torch.tensor(tokens) != 0).unsqueeze(-1)
    pooled = torch.where(keep, x, torch.zeros_like(x)).sum(0) / keep.sum().clamp(min=1)
    return p.out(pooled), x


program = transformer_encoder


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def instances(n: int, seed: int = 0) -> list[list[int]]:
    """``n`` sentences of 1-16 token ids (0 is padding), the same for the same ``seed``."""
    return token_lists(n, seed, 1, MAX_LEN)


def reference(tokens: list[int], p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain PyTorch, one sentence: the heads by ``einsum``, ``nn.LayerNorm`` modules called, pooling by a mask."""
    L, H, nh, dh = len(tokens), p.d, p.heads, p.d_head
    x = p.emb.weight[tokens] + p.pos[:L]
    qkv = x @ p.qkv.weight.T + p.qkv.bias
    q, k, v = (qkv[:, i * H:(i + 1) * H].reshape(L, nh, dh) for i in range(3))
    att = torch.einsum("ihd,jhd->hij", q, k) * dh ** -0.5
    mixed = torch.einsum("hij,jhd->ihd", att.softmax(-1), v).reshape(L, H)
    x = p.ln1(x + mixed @ p.o.weight.T + p.o.bias)
    x = p.ln2(x + p.ff2(torch.relu(p.ff1(x))))
    mask = torch.tensor([float(t != 0) for t in tokens])
    pooled = (mask @ x) / max(1.0, float(mask.sum()))
    return pooled @ p.out.weight.T + p.out.bias, x


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()
