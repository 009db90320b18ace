"""NestedRNN: an RNN loop nested inside a GRU loop (paper Table 4).

Each instance has an outer sequence of inputs (token ids) and, per outer
step, an inner iteration count; both lengths are drawn per instance from
[20, 40] (``nested_instances``). Per outer step ``t`` with input ``x_t =
emb[tok_t]`` the inner RNN starts from the GRU state ``g`` and runs
``m_t`` steps ``h = tanh(x_t @ W_x + b_x + h @ U_h)``; then a GRU cell
combines: ``z = sigmoid(h @ W_z + g @ U_z + b_z)``, ``r = sigmoid(h @ W_r
+ g @ U_r + b_r)``, ``n = tanh(h @ W_n + (r * g) @ U_n + b_n)``,
``g = (1 - z) * n + z * g``. The result is ``g @ W_out + b_out``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from acrobat.models.params import EMB_STD, seeded_bias, seeded_matrix, seeded_parameter

LENGTHS = (20, 40)
"""Outer and inner loops run a per-instance number of iterations in this range (paper §6.1)."""


@dataclass(frozen=True)
class NestedInstance:
    """Outer-step inputs (token ids) and the inner RNN's iteration count per outer step."""

    tokens: tuple[int, ...]
    inner: tuple[int, ...]


def nested_instances(n: int, vocab_size: int, seed: int = 0, lengths: tuple[int, int] = LENGTHS) -> list[NestedInstance]:
    """``n`` instances with outer and inner lengths drawn from ``lengths`` (inclusive)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        steps = rng.randint(*lengths)
        out.append(NestedInstance(tuple(rng.randrange(vocab_size) for _ in range(steps)),
                                  tuple(rng.randint(*lengths) for _ in range(steps))))
    return out


class NestedRNNParams(nn.Module):
    """Drawn from ``Generator().manual_seed(seed)`` in this order: ``emb`` (V, H) std 0.1, ``g0`` (H,) std 0.1,
    ``W_x``, ``U_h`` (H, H), ``b_x`` (H,), then for z, r, n: ``W_*``, ``U_*`` (H, H), ``b_*`` (H,);
    ``W_out`` (H, C), ``b_out`` (C,).
    """

    def __init__(self, vocab_size: int, hidden: int, num_classes: int = 5, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.hidden = hidden
        self.emb = seeded_parameter(gen, vocab_size, hidden, scale=EMB_STD)
        self.g0 = seeded_parameter(gen, hidden, scale=0.1)
        self.W_x, self.U_h, self.b_x = seeded_matrix(gen, hidden, hidden), seeded_matrix(gen, hidden, hidden), seeded_bias(gen, hidden)
        self.W_z, self.U_z, self.b_z = seeded_matrix(gen, hidden, hidden), seeded_matrix(gen, hidden, hidden), seeded_bias(gen, hidden)
        self.W_r, self.U_r, self.b_r = seeded_matrix(gen, hidden, hidden), seeded_matrix(gen, hidden, hidden), seeded_bias(gen, hidden)
        self.W_n, self.U_n, self.b_n = seeded_matrix(gen, hidden, hidden), seeded_matrix(gen, hidden, hidden), seeded_bias(gen, hidden)
        self.W_out = seeded_matrix(gen, hidden, num_classes)
        self.b_out = seeded_bias(gen, num_classes)


def nestedrnn_reference(inst: NestedInstance, p: NestedRNNParams) -> Tensor:
    """Plain per-instance NestedRNN: logits (num_classes,)."""
    g = p.g0
    for tok, m in zip(inst.tokens, inst.inner):
        x = p.emb[tok] @ p.W_x + p.b_x
        h = g
        for _ in range(m):
            h = torch.tanh(x + h @ p.U_h)
        z = torch.sigmoid(h @ p.W_z + g @ p.U_z + p.b_z)
        r = torch.sigmoid(h @ p.W_r + g @ p.U_r + p.b_r)
        n = torch.tanh(h @ p.W_n + (r * g) @ p.U_n + p.b_n)
        g = (1 - z) * n + z * g
    return g @ p.W_out + p.b_out


def nestedrnn_hand_batched(batch: list[NestedInstance], p: NestedRNNParams) -> list[Tensor]:
    """NestedRNN on a mini-batch, padded over time by hand (the expert floor).

    Every outer step runs the instances that still have steps: their input
    projections in one matmul, then the inner RNN step by step over the
    instances whose inner loop is still running, then one GRU cell.
    Returns per instance the logits (num_classes,), as :func:`nestedrnn_reference`.
    """
    if not batch:
        return []
    g = p.g0.expand(len(batch), -1)
    dev = p.g0.device
    for t in range(max(len(inst.tokens) for inst in batch)):
        active = [i for i, inst in enumerate(batch) if len(inst.tokens) > t]
        rows = torch.tensor(active, device=dev)
        ga = g.index_select(0, rows)
        x = torch.addmm(p.b_x, p.emb.index_select(0, torch.tensor([batch[i].tokens[t] for i in active], device=dev)), p.W_x)
        steps = torch.tensor([batch[i].inner[t] for i in active], device=dev)
        h = ga
        for j in range(int(steps.max())):
            run = (steps > j).nonzero().squeeze(1)
            h = h.index_copy(0, run, torch.tanh(x.index_select(0, run) + h.index_select(0, run) @ p.U_h))
        z = torch.sigmoid(h @ p.W_z + ga @ p.U_z + p.b_z)
        r = torch.sigmoid(h @ p.W_r + ga @ p.U_r + p.b_r)
        n = torch.tanh(h @ p.W_n + (r * ga) @ p.U_n + p.b_n)
        g = g.index_copy(0, rows, (1 - z) * n + z * ga)
    return list(torch.addmm(p.b_out, g, p.W_out).unbind(0))
