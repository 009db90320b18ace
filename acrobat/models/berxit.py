"""Berxit: early-exit BERT inference (Xin et al. 2021), one of the paper's models (Table 4).

A transformer encoder whose layers all share one set of weights (as in the
paper's Berxit). After each layer an exit classifier reads the first
token's state; the instance stops when the classifier's confidence
(softmax maximum) exceeds a threshold. Random weights stand in for a
trained model, so the thresholds are drawn per instance and layer from the
instance's own seeded stream (``BerxitInstance.threshold``): the decision
still reads a computed tensor (tensor-dependent control flow, §4.2) and
never depends on the schedule. Every instance stops after ``layers`` layers
at the latest.

Sizes (paper §6.1): small = BERT-base (hidden 768, 12 heads, FFN 3072, 12
layers), large = BERT-large with 18 layers (1024, 16, 4096); sequences of
128 tokens. Per layer, with ``x`` of shape (L, H)::

    q, k, v = x @ Wq + bq, x @ Wk + bk, x @ Wv + bv            # split into heads (nh, L, dh)
    a = softmax(q @ k^T / sqrt(dh)) @ v                          # merged back to (L, H)
    x = layer_norm(x + a @ Wo + bo); x = layer_norm(x + gelu(x @ W1 + b1) @ W2 + b2)
    logits = x[0] @ W_exit + b_exit                              # (2,)

The result for one instance is ``(logits, number of layers run)``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from acrobat.models.params import EMB_STD, seeded_bias, seeded_matrix, seeded_parameter

SIZES: dict[str, dict[str, int]] = {
    "small": {"hidden": 768, "heads": 12, "ffn": 3072, "layers": 12},
    "large": {"hidden": 1024, "heads": 16, "ffn": 4096, "layers": 18},
}
SEQ_LEN = 128
EXIT_CLASSES = 2


@dataclass(frozen=True)
class BerxitInstance:
    """One input sequence (token ids) and the instance's random seed for exit thresholds."""

    tokens: tuple[int, ...]
    seed: int

    def threshold(self, layer: int) -> float:
        """Confidence needed to exit after ``layer`` layers, in [0.85, 0.97).

        With random weights the exit confidence's median is about 0.81, so
        roughly one instance in eight exits at each layer.
        """
        return 0.85 + 0.12 * random.Random(self.seed * 1_000_003 + layer).random()


def berxit_instances(n: int, vocab_size: int, seed: int = 0, seq_len: int = SEQ_LEN) -> list[BerxitInstance]:
    """``n`` random sequences of ``seq_len`` tokens with their own seeds."""
    rng = random.Random(seed)
    return [BerxitInstance(tuple(rng.randrange(vocab_size) for _ in range(seq_len)), rng.randrange(2**31))
            for _ in range(n)]


class BerxitParams(nn.Module):
    """Shared-layer encoder parameters, drawn from ``Generator().manual_seed(seed)`` in this order:
    ``emb`` (V, H), ``pos`` (seq_len, H) (std 0.1); ``Wq, Wk, Wv, Wo`` (H, H) with ``bq, bk, bv, bo`` (H,);
    ``W1`` (H, F), ``b1`` (F,), ``W2`` (F, H), ``b2`` (H,); ``ln1_w, ln1_b, ln2_w, ln2_b`` (H,) = (1, 0);
    ``W_exit`` (H, 2), ``b_exit`` (2,). Attributes ``hidden``, ``heads``, ``head_dim``, ``layers``, ``scale``.
    """

    def __init__(self, vocab_size: int, hidden: int, heads: int, ffn: int, layers: int,
                 seq_len: int = SEQ_LEN, seed: int = 0) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
        gen = torch.Generator().manual_seed(seed)
        self.hidden, self.heads, self.head_dim, self.layers = hidden, heads, hidden // heads, layers
        self.scale = math.sqrt(hidden // heads)
        self.emb = seeded_parameter(gen, vocab_size, hidden, scale=EMB_STD)
        self.pos = seeded_parameter(gen, seq_len, hidden, scale=EMB_STD)
        for name in ("q", "k", "v", "o"):
            setattr(self, f"W{name}", seeded_matrix(gen, hidden, hidden))
            setattr(self, f"b{name}", seeded_bias(gen, hidden))
        self.W1, self.b1 = seeded_matrix(gen, hidden, ffn), seeded_bias(gen, ffn)
        self.W2, self.b2 = seeded_matrix(gen, ffn, hidden), seeded_bias(gen, hidden)
        self.ln1_w, self.ln1_b = nn.Parameter(torch.ones(hidden)), nn.Parameter(torch.zeros(hidden))
        self.ln2_w, self.ln2_b = nn.Parameter(torch.ones(hidden)), nn.Parameter(torch.zeros(hidden))
        self.W_exit, self.b_exit = seeded_matrix(gen, hidden, EXIT_CLASSES), seeded_bias(gen, EXIT_CLASSES)


def _layer(x: Tensor, p: BerxitParams) -> Tensor:
    n = x.shape[0]
    q = (x @ p.Wq + p.bq).reshape(n, p.heads, p.head_dim).transpose(0, 1)
    k = (x @ p.Wk + p.bk).reshape(n, p.heads, p.head_dim).transpose(0, 1)
    v = (x @ p.Wv + p.bv).reshape(n, p.heads, p.head_dim).transpose(0, 1)
    a = (torch.softmax(q @ k.transpose(1, 2) / p.scale, dim=-1) @ v).transpose(0, 1).reshape(n, p.hidden)
    x = F.layer_norm(x + a @ p.Wo + p.bo, (p.hidden,), p.ln1_w, p.ln1_b)
    return F.layer_norm(x + F.gelu(x @ p.W1 + p.b1) @ p.W2 + p.b2, (p.hidden,), p.ln2_w, p.ln2_b)


def berxit_reference(inst: BerxitInstance, p: BerxitParams) -> tuple[Tensor, int]:
    """Plain per-instance early-exit inference: (exit logits (2,), layers run)."""
    x = p.emb[torch.tensor(inst.tokens)] + p.pos
    for layer in range(1, p.layers + 1):
        x = _layer(x, p)
        logits = x[0] @ p.W_exit + p.b_exit
        if torch.softmax(logits, 0).max().item() > inst.threshold(layer):
            break
    return logits, layer
