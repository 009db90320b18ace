"""Gathers whose backward accumulates gradient rows into one buffer per source value (issue 19, §5.2).

The eager backend's explicit gather (``acrobat.runtime.gather.gather``) is
made of PyTorch views and ``index_select``: under autograd every gather's
backward zero-fills a gradient the size of each source output and
scatter-adds its rows into it, and autograd then adds those full-size
gradients up, one ``add_`` per gather. A TreeLSTM's leaf output (1,417
rows at batch 64) is gathered by every internal level, four columns each:
80 zero-filled (1417, 256) copies and 79 full-size additions a step.

Here (the ``eager-accum`` backend) a source output that requires grad
(and is not small: ``SINK_MIN_NUMEL``) is read through an alias (``_Alias``) that
holds a ``GradSink``; a gather from it is one ``_Gather`` node whose
backward adds its gradient rows straight into the sink's buffer
(``index_add_``, or ``add_`` on a slice for contiguous rows): one
zero-filled buffer per source output and backward pass, not one per
gather. The gather returns no gradient to the alias (``None``), but the
edge orders the autograd engine: the alias's backward runs after every
gather that reads it, and hands the source its buffer plus the gradient of
its direct uses (results, value reads). A source whose gathers all got no
gradient gets ``None`` as before, so a weight reached only through such a
value keeps ``grad is None``.

A sink's buffer belongs to one backward pass (the autograd engine's graph
task): ``torch.autograd.grad`` for some inputs only may run a gather's
backward but not its source's alias (not on a path to those inputs), and
rows left in the buffer then must not reach a later pass. Under
``create_graph=True`` the additions are recorded by autograd like any other
operator, so higher-order gradients flow through the buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from acrobat.runtime.dfg import ROW_BITS, ROW_MASK
from acrobat.runtime.gather import gather

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime


class GradSink:
    """The gradient of one source output (``shape``, ``dtype``, ``device``), accumulated rows by rows
    in backward."""

    __slots__ = ("shape", "dtype", "device", "grad", "task")

    def __init__(self, like: torch.Tensor) -> None:
        self.shape, self.dtype, self.device = like.shape, like.dtype, like.device
        self.grad: torch.Tensor | None = None
        self.task = -1  # the backward pass (autograd graph task id) ``grad`` was accumulated in

    def add(self, rows: slice | torch.Tensor, g: torch.Tensor) -> None:
        """Add ``g`` (n, ...) into rows ``rows`` (a slice, or an int64 (n,) index that may repeat rows),
        in the running backward pass (rows left from another pass are dropped first)."""
        task = torch._C._current_graph_task_id()
        if self.grad is None or self.task != task:
            self.grad = torch.zeros(self.shape, dtype=self.dtype, device=self.device)
            self.task = task
        if isinstance(rows, slice):
            if torch.is_grad_enabled():  # create_graph: out of place, recorded (the slice view is not a leaf)
                self.grad = self.grad.index_add(0, torch.arange(rows.start, rows.stop, device=self.device), g)
            else:
                self.grad[rows].add_(g)
        elif torch.is_grad_enabled():
            self.grad = self.grad.index_add(0, rows, g)
        else:
            self.grad.index_add_(0, rows, g)

    def take(self) -> torch.Tensor | None:
        """The gradient accumulated in the running backward pass (None if no row got one); the sink is
        empty again (another backward)."""
        g, self.grad = self.grad, None
        return g if self.task == torch._C._current_graph_task_id() else None


class _Alias(torch.autograd.Function):
    """``x`` itself (a view); backward: the gradient of its direct uses plus its sink's rows."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, sink: GradSink) -> torch.Tensor:
        ctx.sink = sink
        ctx.set_materialize_grads(False)
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor | None) -> tuple[torch.Tensor | None, None]:
        acc = ctx.sink.take()
        if acc is None:
            return g, None
        if g is not None:
            acc = acc + g if torch.is_grad_enabled() else acc.add_(g)
        return acc, None


Part = tuple[GradSink | None, slice | torch.Tensor, slice | torch.Tensor]
"""One source of a gather: its sink (None: it needs no gradient), the rows read from it (a slice or an
int64 index) and where they go in the result (a slice or an int64 index)."""


class _Gather(torch.autograd.Function):
    """The rows of one batched argument from aliased sources; backward adds the rows into their sinks.

    ``apply(parts, n, *sources)``: the ``(n, ...)`` gather of ``parts`` (``Part`` per source) from
    ``sources`` (the aliases, in ``parts`` order). Returns no gradient to the sources (their sinks get it).
    """

    @staticmethod
    def forward(ctx: Any, parts: list[Part], n: int, *sources: torch.Tensor) -> torch.Tensor:
        ctx.parts = parts
        ctx.set_materialize_grads(False)
        if len(parts) == 1:
            rows = parts[0][1]
            return sources[0][rows] if isinstance(rows, slice) else sources[0].index_select(0, rows)
        out = sources[0].new_empty((n, *sources[0].shape[1:]))
        for (_, rows, pos), s in zip(parts, sources):
            part = s[rows] if isinstance(rows, slice) else s.index_select(0, rows)
            if isinstance(pos, slice):
                out[pos] = part
            else:
                out.index_copy_(0, pos, part)
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor | None) -> tuple[None, ...]:
        if g is not None:
            for sink, rows, pos in ctx.parts:
                if sink is not None:
                    sink.add(rows, g[pos] if isinstance(pos, slice) else g.index_select(0, pos))
        return (None,) * (2 + len(ctx.parts))


def _run(rows: np.ndarray) -> slice | None:
    """``rows`` as a slice when they are consecutive ascending, else None."""
    r0 = int(rows[0])
    if rows[-1] - r0 == len(rows) - 1 and (len(rows) == 1 or bool((np.diff(rows) == 1).all())):
        return slice(r0, r0 + len(rows))
    return None


def _index(rows: np.ndarray, device: torch.device) -> slice | torch.Tensor:
    run = _run(rows)
    return run if run is not None else torch.from_numpy(np.ascontiguousarray(rows)).to(device)


SINK_MIN_NUMEL = 1 << 16
"""Sources with fewer elements, gathered alone, are gathered as ``gather`` does (a zero-filled copy per
gather); gathered with a larger source, they get sinks too (the gather is one ``_Gather`` node). Zero-filling
and adding 64K floats (256 KB) costs about what a ``_Gather`` node costs itself (tens of µs, measured on
the shared 2-core machine), and the plain gather of contiguous rows is a view (no copy in forward)."""


def source_alias(rt: Runtime, src: int, small: bool = False) -> tuple[torch.Tensor, GradSink | None]:
    """The output tensor of source id ``src`` and its sink (None: it gets its gradient as ``gather`` gives
    it). On its first gather a source that requires grad and has at least ``SINK_MIN_NUMEL`` elements (any
    number with ``small``) is replaced in its group by an alias with a new sink (later reads use the alias)."""
    sink = rt.sinks.get(src)
    g, k = rt.table.source(src)
    outs = g.outputs()
    t = outs[k]
    if sink is not None or not t.requires_grad or (t.numel() < SINK_MIN_NUMEL and not small):
        return t, sink
    sink = rt.sinks[src] = GradSink(t)
    alias = _Alias.apply(t, sink)
    g.outs = (*outs[:k], alias, *outs[k + 1:])
    return alias, sink


def accumulating_gather(rt: Runtime, handles: np.ndarray) -> torch.Tensor:
    """The ``(B, ...)`` batch of the values ``handles`` (B,), as ``gather`` gives it, whose backward adds
    its gradient rows into one buffer per source output (see the module docstring). Without grad mode,
    or when a source that requires grad has no sink (``source_alias``), it is ``gather`` itself.

    Raises:
        AcrobatError: a value whose group has not run yet.
    """
    device = rt.device
    if not torch.is_grad_enabled():
        return gather(rt.table, handles, device)
    src = handles >> ROW_BITS
    rows = handles & ROW_MASK
    n = len(handles)
    if (src == src[0]).all():
        t, sink = source_alias(rt, int(src[0]))
        if sink is None:
            return gather(rt.table, handles, device)
        index = _index(rows, device)
        if isinstance(index, slice) and index.start == 0 and index.stop == t.shape[0]:
            return t  # the whole output in order: autograd flows to the alias directly
        return _Gather.apply([(sink, index, slice(0, n))], n, t)
    order = np.argsort(src, kind="stable")
    ordered = src[order]
    segments = np.split(order, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1)
    located = [source_alias(rt, int(src[seg[0]])) for seg in segments]
    if all(sink is None for _, sink in located):
        return gather(rt.table, handles, device)  # no large source: autograd's gather
    # a large source among them: every source that requires grad gets a sink (the gather is one node)
    located = [source_alias(rt, int(src[seg[0]]), small=True) for seg in segments]
    parts = [(sink, _index(rows[seg], device), _index(seg, device)) for seg, (_, sink) in zip(segments, located)]
    return _Gather.apply(parts, n, *(t for t, _ in located))
