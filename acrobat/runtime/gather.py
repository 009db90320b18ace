"""Gathers: collecting a batched argument from the rows where its values lie (§5.2).

The explicit gather copies a column's rows into one contiguous ``(B, ...)``
tensor, skipped (a view) when the rows are already contiguous, as DyNet
does. With arena memory (``acrobat.runtime.arena``) a column is one
storage tensor plus an index vector; the compiled backend can then fuse
the gather into the kernel instead.
"""

from __future__ import annotations

import array
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch

from acrobat.runtime.dfg import POOL_SHIFT, ROW_BITS, ROW_MASK, Group, ValueTable, handle_matrix


def int_tensor(values: Sequence[int], device: torch.device) -> torch.Tensor:
    """Python ints as an int64 tensor on ``device``, about 4x faster than ``torch.tensor(list)``."""
    t = torch.frombuffer(array.array("q", values), dtype=torch.int64)
    return t if device.type == "cpu" else t.to(device)


def host_column(col: Sequence[Any], device: torch.device) -> torch.Tensor:
    """Per-instance host values (numbers, or tensors given as instance data) as one (B, ...) tensor on ``device``."""
    if isinstance(col[0], torch.Tensor):
        return torch.stack(col).to(device)
    if type(col[0]) is int:
        try:  # converted in C; fails on a float, a string or an int beyond 64 bits
            return int_tensor(col, device)
        except (TypeError, OverflowError):
            pass
    return torch.tensor(col, device=device, dtype=_python_dtype(*col))


def host_tensor(x: Any, device: torch.device) -> torch.Tensor:
    """One host value (a number, or a tensor given as data) as a tensor on ``device``.

    A Python float becomes float64, as PyTorch keeps a Python scalar at full
    precision until an operator meets it: a float64 model computes with the
    exact value, a float32 one rounds it where plain PyTorch does (a
    0-dimensional operand does not change the result's dtype).
    """
    return torch.as_tensor(x, device=device, dtype=_python_dtype(x))


def _python_dtype(*values: Any) -> torch.dtype | None:
    """float64 when a value is a Python float (not float32, the default dtype); else None (inferred)."""
    return torch.float64 if any(type(v) is float for v in values) else None


def columns(g: Group, device: torch.device) -> tuple[np.ndarray | None, list[torch.Tensor | None]]:
    """A group's batched arguments: the handles of its tensor parameters as an int64 array
    ``(tensor params, B)`` (None if it has none), and per batched parameter its host column as a
    ``(B,)`` tensor (``None`` for tensor parameters)."""
    block = g.block
    assert block is not None
    m = block.n_tensor_params
    return (handle_matrix(g.tensors, m) if m else None), host_columns(g, device)


def host_columns(g: Group, device: torch.device) -> list[torch.Tensor | None]:
    """Per batched parameter of ``g``'s block its host column as a ``(B,)`` tensor (``None`` for tensor parameters)."""
    block = g.block
    assert block is not None
    if not g.hosts:
        return [None] * block.n_tensor_params
    host_cols = iter(zip(*g.hosts))
    return [None if role == "tensor" else host_column(next(host_cols), device) for role in block.batched_roles]


def select_rows(t: torch.Tensor, rows: np.ndarray, device: torch.device) -> torch.Tensor:
    """Rows ``rows`` of ``t``: a view when they are contiguous (no copy), else one ``index_select``."""
    n = len(rows)
    r0 = int(rows[0])
    if rows[-1] - r0 == n - 1 and (n == 1 or bool((np.diff(rows) == 1).all())):
        return t if r0 == 0 and n == t.shape[0] else t[r0:r0 + n]
    return t.index_select(0, torch.from_numpy(rows).to(device))


class LaunchIndex(NamedTuple):
    """One batch size's arena rows of a launch's tensor columns, as ``IndexBuffer`` hands them out."""

    located: np.ndarray  # (columns, n): where ``ValueTable.arena_rows`` writes the rows
    padded: np.ndarray  # (columns, rows): the rows the kernel reads (``located`` itself unless n == 1)
    matrix: torch.Tensor  # ``padded`` as a tensor (the same memory)
    vectors: tuple[torch.Tensor, ...]  # the rows of ``matrix``: per column its (rows,) index vector


class IndexBuffer:
    """The memory a compiled kernel's launches write their arena rows into (the fused gathers' index
    vectors, §5.2), reused launch after launch.

    Making a launch's index vectors afresh (an array, ``torch.from_numpy``, ``unbind``) cost about 2.5 µs
    of the launch; here each batch size's arrays and index tensors are made once, as views of one
    buffer, and ``ValueTable.arena_rows`` writes each launch's rows into them in place. That is sound
    because one kernel's launches run one at a time and a launch has read its indices when its call
    returns (a CPU kernel is synchronous; a copy to another device is made from them before the call).
    A launch of one row is padded to two (its row twice), as compiled kernels take at least two rows.
    """

    MAX_SIZES = 1024
    """Batch sizes kept at once: past that the views are dropped and made again as they are needed."""

    def __init__(self, columns: int):
        self.columns = columns
        self.buffer = torch.empty(0, dtype=torch.int64, device="cpu")
        self.sizes: dict[int, LaunchIndex] = {}

    def get(self, n: int) -> LaunchIndex:
        """The arrays and index vectors of a launch of ``n`` rows (valid until the next launch)."""
        index = self.sizes.get(n)
        return index if index is not None else self._make(n)

    def _make(self, n: int) -> LaunchIndex:
        rows = n + (n == 1)
        need = self.columns * rows
        if need > self.buffer.numel():
            self.buffer = torch.empty(max(need, 2 * self.buffer.numel()), dtype=torch.int64, device="cpu")
            self.sizes.clear()  # views of the old buffer
        elif len(self.sizes) >= self.MAX_SIZES:
            self.sizes.clear()
        matrix = self.buffer[:need].view(self.columns, rows)
        padded = matrix.numpy()
        located = padded if rows == n else np.empty((self.columns, n), dtype=np.int64)
        index = self.sizes[n] = LaunchIndex(located, padded, matrix, matrix.unbind(0))
        return index


def gather(table: ValueTable, handles: np.ndarray, device: torch.device) -> torch.Tensor:
    """The explicit gather of one column (§5.2): the ``(B, ...)`` batch of the values ``handles`` (B,).

    Values from one group output are selected at once (a view when their
    rows are contiguous); values from several are selected per source and
    concatenated when the sources come in runs, else copied straight to
    their batch positions (``index_copy_``: one copy of each row, not a
    concatenation and a reordering copy).

    Raises:
        AcrobatError: a value whose group has not run yet.
        RuntimeError: the values have different dtypes (instances whose values a static block takes differ in
            dtype: ``Executor.diagnose`` names them).
    """
    src = handles >> ROW_BITS
    rows = handles & ROW_MASK
    if (src == src[0]).all():
        g, k = table.source(int(src[0]))
        return select_rows(g.outputs()[k], rows, device)
    order = np.argsort(src, kind="stable")
    ordered = src[order]
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), len(order)]
    segments = [order[a:b] for a, b in zip(bounds, bounds[1:])]  # per source, its batch positions
    parts = []
    for seg in segments:
        g, k = table.source(int(src[seg[0]]))
        parts.append(select_rows(g.outputs()[k], rows[seg], device))
    if any(part.dtype != parts[0].dtype for part in parts):  # torch.cat would promote them, silently
        raise RuntimeError(f"gathered values of different dtypes ({parts[0].dtype}, ...)")
    if (order[1:] > order[:-1]).all():  # the sources came in runs: already in batch order
        return torch.cat(parts)
    out = parts[0].new_empty((len(handles), *parts[0].shape[1:]))
    for seg, part in zip(segments, parts):
        out.index_copy_(0, torch.from_numpy(seg).to(device), part)
    return out


def gather_values(table: ValueTable, handles: np.ndarray, device: torch.device,
                  storages: Sequence[torch.Tensor] = ()) -> list[torch.Tensor]:
    """One tensor per handle (a run's results), copied: one ``index_select`` per arena pool
    (``storages``, by pool id) when every value lies in the arena, else per group output,
    instead of one indexing per value.

    Raises:
        AcrobatError: a value whose group has not run yet.
    """
    src = handles >> ROW_BITS
    rows = handles & ROW_MASK
    located = table.arena_offset[src] + handles  # pool id << POOL_SHIFT | arena row; negative if not placed
    in_arena = bool(storages) and np.minimum.reduce(located) >= 0
    if in_arena:
        src, rows = located >> POOL_SHIFT, located & ((1 << POOL_SHIFT) - 1)  # pool id, row in its storage
        if (src == src[0]).all():  # the common case: one pool
            return list(storages[int(src[0])].index_select(0, torch.from_numpy(rows).to(device)).unbind(0))
    out: list[torch.Tensor] = [None] * len(handles)  # type: ignore[list-item]
    for s in np.unique(src).tolist():
        pos = np.flatnonzero(src == s)
        t = storages[s] if in_arena else table.source(s)[0].outputs()[table.source(s)[1]]
        for p, v in zip(pos.tolist(), t.index_select(0, torch.from_numpy(rows[pos]).to(device)).unbind(0)):
            out[p] = v
    return out
