"""Horizontal fusion: matmuls of one input with several weights become one (App. B.1).

In a static block, ``x @ W1``, ``x @ W2``, ... with shared weights (LSTM
and GRU gates, attention's Q/K/V) read the same input; they become one
matmul against the concatenated weights (built once per run, in the
prologue), whose result is split back. That reads ``x`` once and launches
one larger kernel instead of several small ones.
"""

from __future__ import annotations

from typing import Callable

import torch

from acrobat.frontend import ir

Group = list[tuple[int, ir.BinOp, int]]  # (statement index, the `x @ W` node, W's shared slot)


def matmul_groups(stmts: list[ir.Assign], weight_slot: Callable[[ir.Expr], int | None]) -> list[Group]:
    """The groups of ``x @ W`` nodes in ``stmts`` that read the same value ``x`` with >= 2 distinct weights.

    ``weight_slot(e)`` is the shared slot of ``e`` when it is a shared value, else None.
    """
    version: dict[str, int] = {}
    groups: dict[tuple[str, int], Group] = {}
    for idx, s in enumerate(stmts):
        for e in ir.walk(s.value):
            if isinstance(e, ir.BinOp) and e.op == "@" and isinstance(e.left, ir.Name):
                slot = weight_slot(e.right)
                if slot is not None:
                    groups.setdefault((e.left.id, version.get(e.left.id, 0)), []).append((idx, e, slot))
        for name in s.target.names():
            version[name] = version.get(name, 0) + 1
    return [g for g in groups.values() if len({slot for _, _, slot in g}) >= 2]


def fuse_weights(weights: list[torch.Tensor]) -> tuple[torch.Tensor, list[int], list[bool]] | None:
    """The concatenated weight (K, N1 + N2 + ...), the split sizes and which weights were vectors.

    Vectors (K,) take one column. None when the weights cannot be
    concatenated (other ranks, or different K): the block then runs the
    matmuls one by one.
    """
    if any(w.dim() not in (1, 2) for w in weights) or len({w.shape[0] for w in weights}) != 1:
        return None
    mats = [w if w.dim() == 2 else w.unsqueeze(-1) for w in weights]
    return torch.cat(mats, -1), [m.shape[-1] for m in mats], [w.dim() == 1 for w in weights]


def fused_matmul(x: torch.Tensor, fused: tuple | None, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``x @ w`` for every ``w`` in ``weights``: one matmul against ``fused`` when it exists."""
    if fused is None:
        return tuple(x @ w for w in weights)
    cat, sizes, vector = fused
    parts = torch.split(x @ cat, sizes, -1)
    return tuple(p.squeeze(-1) if v else p for p, v in zip(parts, vector))
