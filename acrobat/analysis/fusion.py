"""Horizontal fusion: matmuls of one input with several weights become one (App. B.1).

In a static block, ``x @ W1``, ``x @ W2``, ... with shared weights (LSTM
and GRU gates, attention's Q/K/V) read the same input; they become one
matmul against the concatenated weights (built once per run, in the
prologue), whose result is split back. That reads ``x`` once and launches
one larger kernel instead of several small ones.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager

import torch

from acrobat.errors import AcrobatError
from acrobat.frontend import ir
from acrobat.runtime.flags import ThreadFlag

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

    Vectors (K,) take one column; the concatenation records no autograd
    history (``FusedMatmul`` gives the weights their gradients). None when
    the weights cannot be concatenated (other ranks, or different K): the
    block then runs the matmuls one by one.
    """
    if any(w.dim() not in (1, 2) for w in weights) or len({w.shape[0] for w in weights}) != 1:
        return None
    mats = [w if w.dim() == 2 else w.unsqueeze(-1) for w in weights]
    with torch.no_grad():  # ``FusedMatmul`` gives the weights their gradients: the concatenation needs none
        cat = torch.cat(mats, -1)
    return cat, [m.shape[-1] for m in mats], [w.dim() == 1 for w in weights]


_UNFUSED = ThreadFlag()


def unfused() -> ContextManager[None]:
    """Within the block, ``fused_matmul`` computes ``x @ w`` weight by weight: for tracing a block into an
    aten graph that autograd then records through (``acrobat.codegen.kernels.trace_block(store=False)``),
    where ``FusedMatmul``'s own backward would be traced away (and the weights get no gradient)."""
    return _UNFUSED.set(True)


def fused_matmul(x: torch.Tensor, fused: tuple | None, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``x @ w`` for every ``w`` in ``weights``: one matmul against ``fused`` when it exists (and not
    within ``unfused()``).

    While autograd records into a weight, the matmul runs as ``FusedMatmul``, whose backward gives each
    weight the gradient its own ``x @ w`` would get: none at all (``grad`` stays ``None``) for a weight
    whose product reaches no loss (say, only a ``.item()`` read), where the backward of a split of the
    concatenation would give it zeros.
    """
    if fused is None or _UNFUSED.on():
        return tuple(x @ w for w in weights)
    cat, sizes, vector = fused
    if torch.is_grad_enabled() and any(w.requires_grad for w in weights):
        return FusedMatmul.apply(x, cat, sizes, vector, *weights)
    return _split(x @ cat, sizes, vector)


def _split(y: torch.Tensor, sizes: list[int], vector: list[bool]) -> tuple[torch.Tensor, ...]:
    """The products of a fused matmul ``y`` (..., N1 + N2 + ...), each back in its weight's shape."""
    return tuple(p.squeeze(-1) if v else p for p, v in zip(torch.split(y, sizes, -1), vector))


class FusedMatmul(torch.autograd.Function):
    """``x @ cat`` split into ``x @ w`` per weight (App. B.1), with one weight gradient per product used.

    ``apply(x, cat, sizes, vector, *weights)``: ``x`` (..., K); ``cat`` (K, N1 + N2 + ...) the weights
    concatenated (read in the forward, given no gradient: built in the prologue, it needs none);
    ``weights`` (K, Ni) or (K,) each get ``x^T @ grad_i`` (a sum over all rows of the batch, one GEMM),
    or ``None`` when product ``i`` got no gradient. Under ``torch.func.vmap`` (the eager backend) the
    rule runs the function once on the batched ``x``, so the backward's GEMMs are batched too.
    """

    @staticmethod
    def forward(x: torch.Tensor, cat: torch.Tensor, sizes: list[int], vector: list[bool],
                *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _split(x @ cat, sizes, vector)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        x, cat, _, vector, *_weights = inputs
        ctx.save_for_backward(x, cat)
        ctx.sizes, ctx.vector = inputs[2], vector
        ctx.set_materialize_grads(False)  # a product that reaches no loss: None, not zeros

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple:
        x, cat = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[4:]
        cols = [None if g is None else (g.unsqueeze(-1) if v else g) for g, v in zip(grads, ctx.vector)]
        rows = x.reshape(-1, x.shape[-1])
        if all(c is not None for c in cols):  # every product used: one GEMM each way over the concatenation
            g = torch.cat(cols, -1)
            gx = g @ cat.mT if need_x else None
            gws = torch.split(rows.mT @ g.reshape(-1, g.shape[-1]), ctx.sizes, -1) if any(need_w) else [None] * len(cols)
            return (gx, None, None, None, *[_shaped(gw, v, n) for gw, v, n in zip(gws, ctx.vector, need_w)])
        gx, out = None, []
        for c, w, v, n in zip(cols, torch.split(cat, ctx.sizes, -1), ctx.vector, need_w):
            if c is None:
                out.append(None)
                continue
            if need_x:
                gx = c @ w.mT if gx is None else gx + c @ w.mT
            out.append(_shaped(rows.mT @ c.reshape(-1, c.shape[-1]), v, n))
        return (gx, None, None, None, *out)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: torch.Tensor, cat: torch.Tensor, sizes: list[int], vector: list[bool],
             *weights: torch.Tensor) -> tuple:
        if in_dims[1] is not None or any(d is not None for d in in_dims[4:]):
            raise AcrobatError("internal: a horizontally fused weight is batched")
        if in_dims[0] is None:
            return FusedMatmul.apply(x, cat, sizes, vector, *weights), (None,) * len(sizes)
        return FusedMatmul.apply(x.movedim(in_dims[0], 0), cat, sizes, vector, *weights), (0,) * len(sizes)


def _shaped(gw: torch.Tensor | None, vector: bool, needed: bool) -> torch.Tensor | None:
    """A weight's gradient (K, Ni) in the weight's shape ((K,) for a vector), or None when it needs none."""
    if not needed or gw is None:
        return None
    return gw.squeeze(-1) if vector else gw
