"""Segment operators: a reduction, normalization or ranking over each instance's list, one launch per group.

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

from typing import TYPE_CHECKING, Callable

import numpy as np
import torch
import torch.nn.functional as F

from acrobat.diagnosis import mark_limit
from acrobat.errors import ShapeError
from acrobat.runtime.dfg import Group
from acrobat.runtime.gather import gather
from acrobat.runtime.plan import BlockCode, SegmentOp
from acrobat.runtime.stats import timed

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime


class SegmentKernel:
    """The batched launch of a segment block: ``(N, ...)`` rows in; ``(B, ...)`` (or ``(N, ...)``) out.

    Raises (when called):
        ShapeError: the rows of one instance's list differ in shape, or a normalization's negative dim is out of
            range for them (names the instance and source line).
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
        if self.op.flat and self.op.op in _INDEX_OPS and x.dim() > 1:
            raise mark_limit(ShapeError(f"instance {g.insts[0]}: {self.op.op} without dim= of a stacked list of "
                                        f"{x.dim() - 1}-D rows flattens it: write dim=0 (per column) or flatten the "
                                        f"rows first\n{self.block.where()}", instance=g.insts[0]))
        if self.op.flat and self.op.op in ("amax", "amin") and x.numel() == 0:
            raise ShapeError(f"instance {g.insts[0]}: {self.op.op} without dim= of a stacked list of empty rows: "
                             f"PyTorch raises (no identity for the reduction)\n{self.block.where()}",
                             instance=g.insts[0])
        if self.op.op == "mean" and not (x.is_floating_point() or x.is_complex()):
            raise ShapeError(f"instance {g.insts[0]}: mean of a stacked list of {x.dtype} rows: PyTorch's mean needs "
                             f"floating point or complex values (it raises RuntimeError); write `.float()` first\n"
                             f"{self.block.where()}", instance=g.insts[0])
        if self.op.dim < -x.dim():
            raise ShapeError(f"instance {g.insts[0]}: {self.op.op}(dim={self.op.dim}) of a stacked list of "
                             f"{x.dim() - 1}-D rows: dimension out of range (PyTorch raises IndexError)\n"
                             f"{self.block.where()}", instance=g.insts[0])
        if self.op.op == "topk" and self.op.dim != -x.dim() and self.op.dim != 0:
            raise mark_limit(ShapeError(f"instance {g.insts[0]}: topk(dim={self.op.dim}) of a stacked list of "
                                        f"{x.dim() - 1}-D rows picks within each row: acrobat batches topk over the "
                                        f"list axis only (dim=0, or dim={-x.dim()}); loop over the list to pick "
                                        f"within its items\n{self.block.where()}", instance=g.insts[0]))
        return timed(rt.stats, "kernel_ms", rt.sync, lambda: self.launch(x, lengths))

    def launch(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The operator over ``x``, the ``(N, ...)`` rows of the group's lists (``lengths``: ``(B,)``, summing to
        N): a segment launch over the list axis, its reductions ``(B, ...)`` (``(B, 1, ...)`` with keepdim); or,
        for a normalization or a sort whose negative dim is an axis of every row (the rows are not 0-D), that
        operator along it over all rows at once, ``(N, ...)``, as each instance's stacked list gives it."""
        op = self.op
        if op.flat and op.op not in _INDEX_OPS:  # every element of an instance's list is a row of its segment
            return segment_op(op, x.reshape(-1), lengths * (x[0].numel() if x.shape[0] else 1))
        if op.dim < 0 and op.dim != -x.dim():
            assert op.ragged_out, "reductions over a negative dim are made dim=0 at compile time"
            if op.op in RANKINGS:  # sort / argsort within each row (topk was refused in __call__)
                ranked = torch.sort(x, dim=op.dim, descending=op.descending, stable=True)
                return (ranked.indices,) if op.op == "argsort" else tuple(ranked)
            return (getattr(torch, op.op)(x, op.dim),)
        out = segment_op(op, x, lengths)
        return tuple(o.unsqueeze(1) for o in out) if op.keepdim else out

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


#: ``kernel(op, x, seg, lengths)``: the batched ``op`` (see ``segment_op``), ``seg`` the ``(N,)`` segment ids.
Kernel = Callable[[SegmentOp, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]]

#: The segment operators (dim 0 of a stacked list), by name: what the compiler knows of each. With
#: ``SEGMENT_FUNCTIONS``, ``FLAT_OK`` and the batched kernels, one table, filled by ``defsegment``;
#: ``acrobat.analysis.ragged`` imports it.
SEGMENT_OPS: dict[str, SegmentOp] = {}
#: The torch functions of the segment operators (``torch.sum`` -> ``"sum"``).
SEGMENT_FUNCTIONS: dict[Callable, str] = {}
#: Segment operators that may also be written without ``dim``: the full reductions (over every element of the
#: list; ``max``/``min`` without dim give the values alone, ``amax``/``amin``'s), and ``argmax``/``argmin``
#: (of a 1-D stacked list, the same as ``dim=0``; a flat index of wider rows is refused at run time).
FLAT_OK: set[str] = set()
#: The flat segment operators that give an index: the same as ``dim=0`` only for a 1-D stacked list.
_INDEX_OPS = frozenset({"argmax", "argmin"})
_KERNELS: dict[str, Kernel] = {}


def defsegment(op: str, *fns: Callable, n_outputs: int = 1, ragged_out: bool = False,
               flat_ok: bool = False) -> Callable[[Kernel], Kernel]:
    """Install the decorated batched kernel as segment operator ``op``, the method of that name and the torch
    functions ``fns`` (``SegmentOp``: ``n_outputs``, ``ragged_out``; ``flat_ok``: see ``FLAT_OK``)."""
    def install(kernel: Kernel) -> Kernel:
        SEGMENT_OPS[op] = SegmentOp(op, n_outputs, ragged_out=ragged_out)
        SEGMENT_FUNCTIONS.update(dict.fromkeys(fns, op))
        if flat_ok:
            FLAT_OK.add(op)
        _KERNELS[op] = kernel
        return kernel
    return install


def segment_op(op: SegmentOp, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``op`` over dim 0 of each segment of ``x``: ``x`` is ``(N, ...)``, ``lengths`` ``(B,)`` sums to N.

    Returns ``(B, ...)`` outputs (values and int64 indices for ``max``/``min``),
    or ``(N, ...)`` for ``softmax``/``log_softmax`` and the rankings (``sort``,
    ``argsort``, ``topk``: each segment's rows sorted); out of place (autograd works).
    """
    seg = torch.repeat_interleave(torch.arange(lengths.shape[0], device=x.device), lengths)
    return _KERNELS[op.op](op, x, seg, lengths)


@defsegment("sum", torch.sum, flat_ok=True)
@defsegment("mean", torch.mean, flat_ok=True)
def _sums(op: SegmentOp, x: torch.Tensor, seg: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Sums (int64 for bool and integer rows, as ``torch.sum``) or means of each segment's rows."""
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(torch.int64)
    total = _segment_sum(x, seg, lengths.shape[0])
    return (total if op.op == "sum" else total / _per_row(lengths.to(x.dtype), x),)


@defsegment("amax", torch.amax, flat_ok=True)
@defsegment("amin", torch.amin, flat_ok=True)
@defsegment("max", torch.max, n_outputs=2, flat_ok=True)
@defsegment("min", torch.min, n_outputs=2, flat_ok=True)
@defsegment("argmax", torch.argmax, flat_ok=True)
@defsegment("argmin", torch.argmin, flat_ok=True)
def _extremes(op: SegmentOp, x: torch.Tensor, seg: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    values = _extreme(x, seg, lengths.shape[0], "amax" if op.op in ("amax", "max", "argmax") else "amin")
    if op.op in ("amax", "amin"):
        return (values,)
    index = _first_index(x, seg, values, lengths)
    return (index,) if op.op in ("argmax", "argmin") else (values, index)


@defsegment("logsumexp", torch.logsumexp)
@defsegment("softmax", torch.softmax, F.softmax, ragged_out=True)
@defsegment("log_softmax", torch.log_softmax, F.log_softmax, ragged_out=True)
def _normalized(op: SegmentOp, x: torch.Tensor, seg: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    top = _extreme(x, seg, lengths.shape[0], "amax").detach()  # the log-sum-exp shift, as PyTorch's softmax takes it
    shifted = x - top[seg]
    exp = shifted.exp()
    total = _segment_sum(exp, seg, lengths.shape[0])
    if op.op == "logsumexp":
        return (total.log() + top,)
    if op.op == "softmax":
        return (exp / total[seg],)
    return (shifted - total.log()[seg],)


#: The segment operators that rank a list (sort it): their nodes' outputs are the rows sorted, per instance.
RANKINGS = frozenset({"sort", "argsort", "topk"})


@defsegment("sort", torch.sort, n_outputs=2, ragged_out=True)
@defsegment("argsort", torch.argsort, ragged_out=True)
@defsegment("topk", torch.topk, n_outputs=2, ragged_out=True)
def _ranked(op: SegmentOp, x: torch.Tensor, seg: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each segment's rows sorted over dim 0 (per column), ``(N, ...)`` values and their int64 positions within
    the segment; stable: tied rows keep their list order (as ``torch.sort(stable=True)``; PyTorch's ``topk`` and
    unstable ``sort`` leave the order of ties unspecified). NaN ranks as PyTorch's sort ranks it (largest)."""
    _, by_value = torch.sort(x.detach(), dim=0, descending=op.descending, stable=True)
    _, by_segment = torch.sort(seg[by_value], dim=0, stable=True)  # segments in order, each one's rows by value
    perm = by_value.gather(0, by_segment)
    starts = torch.cumsum(lengths, 0) - lengths
    index = perm - _per_row(starts[seg], x)
    values = x.gather(0, perm)  # differentiable in x
    return (index,) if op.op == "argsort" else (values, index)


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
