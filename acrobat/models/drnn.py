"""DRNN: doubly recurrent neural network for top-down tree generation
(Alvarez-Melis & Jaakkola 2017), one of the paper's models (Table 4).

From a root input vector the model grows a tree top-down. Every node gets
its state from its parent (ancestral) and from its previous sibling
(fraternal), ``h = tanh(ha @ U_a + hf @ U_f + b_h)``, emits a label
``h @ W_out + b_out``, and decides from computed probabilities whether it
gets a first child and a next sibling: ``sigmoid(h @ w_c + b_c) > u`` and
``sigmoid(h @ w_s + b_s) > u'``, with ``u, u'`` drawn for that tree
position from the instance's own seeded stream, so decisions never depend
on the schedule. Depth and width are bounded (``MAX_DEPTH``,
``MAX_WIDTH``), so generation always ends. The two subtrees (first child's
and next sibling's) are independent: instance parallelism under
tensor-dependent control flow, which acrobat runs on child fibers (§4.2).

The result for one instance is the list of node labels (num_classes,) in
depth-first order (node, its children's subtrees, its later siblings').
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from acrobat.models.params import EMB_STD, seeded_bias, seeded_matrix, seeded_parameter

MAX_DEPTH = 4
MAX_WIDTH = 3
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment


@dataclass(frozen=True)
class DRNNInstance:
    """One generation request: the root input's token id and the instance's random seed."""

    token: int
    seed: int

    def uniform(self, position: int, what: int) -> float:
        """A number in [0, 1) for decision ``what`` (0 child, 1 sibling) at tree position ``position``.

        A counter-based draw (SplitMix64's finalizer of the key ``(seed, position, what)``, the top 53
        bits): a pure function of the key, about 0.5 µs, where seeding a ``random.Random`` per draw
        took 7 µs and was most of a batch's host time, in every system alike.
        """
        x = (self.seed * 1_000_003 + position * 2 + what + _GOLDEN) & _MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
        return ((x ^ (x >> 31)) >> 11) * 2.0 ** -53


def drnn_instances(n: int, vocab_size: int, seed: int = 0) -> list[DRNNInstance]:
    """``n`` generation requests with tokens and seeds drawn from ``seed``."""
    rng = random.Random(seed)
    return [DRNNInstance(rng.randrange(vocab_size), rng.randrange(2**31)) for _ in range(n)]


class DRNNParams(nn.Module):
    """Drawn from ``Generator().manual_seed(seed)`` in this order: ``emb`` (V, H) std 0.1, ``h0`` (H,) std 0.1,
    ``U_a``, ``U_f`` (H, H), ``b_h`` (H,), ``w_c`` (H,) std 1, ``b_c`` (1,), ``w_s`` (H,) std 1, ``b_s`` (1,),
    ``W_out`` (H, C), ``b_out`` (C,).
    """

    def __init__(self, vocab_size: int, hidden: int, num_classes: int = 5, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.hidden = hidden
        self.emb = seeded_parameter(gen, vocab_size, hidden, scale=EMB_STD * 10)
        self.h0 = seeded_parameter(gen, hidden, scale=0.1)
        self.U_a = seeded_matrix(gen, hidden, hidden)
        self.U_f = seeded_matrix(gen, hidden, hidden)
        self.b_h = seeded_bias(gen, hidden)
        self.w_c = seeded_parameter(gen, hidden, scale=1.0)
        self.b_c = seeded_bias(gen, 1)
        self.w_s = seeded_parameter(gen, hidden, scale=1.0)
        self.b_s = seeded_bias(gen, 1)
        self.W_out = seeded_matrix(gen, hidden, num_classes)
        self.b_out = seeded_bias(gen, num_classes)


def _grow(ha: Tensor, hf: Tensor, depth: int, width: int, position: int, inst: DRNNInstance,
          p: DRNNParams) -> list[Tensor]:
    h = torch.tanh(ha @ p.U_a + hf @ p.U_f + p.b_h)
    labels = [h @ p.W_out + p.b_out]
    if depth < MAX_DEPTH and torch.sigmoid(h @ p.w_c + p.b_c).item() > inst.uniform(position, 0):
        labels += _grow(h, p.h0, depth + 1, 0, 2 * position, inst, p)
    if width < MAX_WIDTH and torch.sigmoid(h @ p.w_s + p.b_s).item() > inst.uniform(position, 1):
        labels += _grow(ha, h, depth, width + 1, 2 * position + 1, inst, p)
    return labels


def drnn_reference(inst: DRNNInstance, p: DRNNParams) -> list[Tensor]:
    """Plain per-instance generation: the node labels, each (num_classes,)."""
    return _grow(p.emb[inst.token], p.h0, 0, 0, 1, inst, p)
