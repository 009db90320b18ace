"""Segment operators: a reduction or normalization over each instance's list, one launch per group.

A segment node holds all the rows of one instance's list (``Runtime.segment``);
its group holds the rows of every node, node after node, and each node's
length. The kernel gathers all rows at once, ``(N, ...)`` for N rows in
all, and reduces them per node with segment ids (``index_add``,
``scatter_reduce``): one launch whatever the lists' lengths, the batched
form of ``acrobat.analysis.ragged.segment_reference``. It runs in PyTorch
on both backends (its outputs are not in the compiled backend's arena, so
consumers gather them explicitly).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from acrobat.diagnosis import mark_limit
from acrobat.errors import ShapeError
from acrobat.runtime.dfg import Group
from acrobat.runtime.gather import gather
from acrobat.runtime.plan import BlockCode
from acrobat.runtime.stats import timed

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime


class SegmentKernel:
    """The batched launch of a segment block: ``(N, ...)`` rows in; ``(B, ...)`` (or ``(N, ...)``) out.

    Raises (when called):
        ShapeError: the rows of one instance's list differ in shape (names the instance and source line).
    """

    def __init__(self, block: BlockCode):
        assert block.segment is not None
        self.block = block
        self.op = block.segment

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        handles = np.frombuffer(g.tensors, dtype=np.int64)
        try:
            x = timed(rt.stats, "gather_ms", rt.sync, lambda: gather(rt.table, handles, rt.device))
        except RuntimeError as exc:
            raise self._shape_error(g, rt) from exc
        lengths = torch.tensor([n for (n,) in g.hosts], device=rt.device)
        if self.op.flat and x.dim() > 1:
            raise mark_limit(ShapeError(f"instance {g.insts[0]}: {self.op.op} without dim= of a stacked list of "
                                        f"{x.dim() - 1}-D rows flattens it: write dim=0 (per column) or flatten the "
                                        f"rows first\n{self.block.where()}", instance=g.insts[0]))
        return timed(rt.stats, "kernel_ms", rt.sync, lambda: segment_op(self.op.op, x, lengths))

    def _shape_error(self, g: Group, rt: "Runtime") -> ShapeError:
        start = 0
        for (n,), inst in zip(g.hosts, g.insts):
            shapes = {tuple(rt.table.tensor(int(h)).shape) for h in g.tensors[start:start + n]}
            start += n
            if len(shapes) > 1:
                break
        return ShapeError(f"instance {inst}: the tensors of a list stacked for {self.op.op} have different shapes "
                          f"{sorted(shapes)}, or differ from other instances' (rows batched together must agree)\n"
                          f"{self.block.where()}", instance=inst)


def segment_op(op: str, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``op`` over dim 0 of each segment of ``x``: ``x`` is ``(N, ...)``, ``lengths`` ``(B,)`` sums to N.

    Returns ``(B, ...)`` outputs (values and int64 indices for ``max``/``min``),
    or ``(N, ...)`` for ``softmax``/``log_softmax``; out of place (autograd works).
    """
    b = lengths.shape[0]
    seg = torch.repeat_interleave(torch.arange(b, device=x.device), lengths)
    if op in ("sum", "mean"):
        total = _segment_sum(x, seg, b)
        return (total if op == "sum" else total / _per_row(lengths.to(x.dtype), x),)
    if op in ("amax", "amin", "max", "min", "argmax", "argmin"):
        values = _extreme(x, seg, b, "amax" if op in ("amax", "max", "argmax") else "amin")
        if op in ("amax", "amin"):
            return (values,)
        index = _first_index(x, seg, values, lengths)
        return (index,) if op in ("argmax", "argmin") else (values, index)
    top = _extreme(x, seg, b, "amax").detach()  # the log-sum-exp shift, as PyTorch's softmax takes it
    shifted = x - top[seg]
    exp = shifted.exp()
    total = _segment_sum(exp, seg, b)
    if op == "logsumexp":
        return (total.log() + top,)
    if op == "softmax":
        return (exp / total[seg],)
    if op == "log_softmax":
        return (shifted - total.log()[seg],)
    raise ValueError(f"unknown segment operator {op!r}")


def _segment_sum(v: torch.Tensor, seg: torch.Tensor, b: int) -> torch.Tensor:
    """``(B, ...)`` sums of the rows of ``v`` ``(N, ...)`` by segment id ``seg`` ``(N,)``."""
    return v.new_zeros((b, *v.shape[1:])).index_add(0, seg, v)


def _per_row(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``v`` (B,) shaped to broadcast against ``(B, ...)`` rows like ``x``'s."""
    return v.reshape(-1, *([1] * (x.dim() - 1)))


def _extreme(x: torch.Tensor, seg: torch.Tensor, b: int, reduce: str) -> torch.Tensor:
    index = _per_row(seg, x).expand_as(x)
    return x.new_zeros((b, *x.shape[1:])).scatter_reduce(0, index, x, reduce, include_self=False)


def _first_index(x: torch.Tensor, seg: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Per segment and element, the position within the segment of the first row equal to ``values``."""
    starts = torch.cumsum(lengths, 0) - lengths
    pos = _per_row(torch.arange(x.shape[0], device=x.device) - starts[seg], x).expand_as(x)
    hit = torch.where(x == values[seg], pos, torch.full_like(pos, x.shape[0]))
    return _extreme(hit, seg, lengths.shape[0], "amin")
