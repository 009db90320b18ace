"""Gathers: collecting a batched argument from the rows where its values lie (§5.2).

The explicit gather copies a column's rows into one contiguous ``(B, ...)``
tensor, skipped (a view) when the rows are already contiguous, as DyNet
does. With arena memory (``acrobat.runtime.arena``) a column is one
storage tensor plus an index vector; the compiled backend can then fuse
the gather into the kernel instead.
"""

from __future__ import annotations

import array
from typing import Any, Sequence

import torch

from acrobat.errors import AcrobatError
from acrobat.runtime.dfg import Group, Value


def int_tensor(values: Sequence[int], device: torch.device) -> torch.Tensor:
    """Python ints as an int64 tensor on ``device``, about 4x faster than ``torch.tensor(list)``."""
    t = torch.frombuffer(array.array("q", values), dtype=torch.int64)
    return t if device.type == "cpu" else t.to(device)


def host_column(col: Sequence[Any], device: torch.device) -> torch.Tensor:
    """Per-instance host values (numbers, or tensors given as instance data) as one (B, ...) tensor on ``device``."""
    if isinstance(col[0], torch.Tensor):
        return torch.stack(col).to(device)
    if all(type(v) is int for v in col):
        return int_tensor(col, device)
    return torch.tensor(col, device=device)


def arena_rows(col: Sequence[Value]) -> tuple[torch.Tensor, list[int]] | None:
    """Where a column's values lie in the arena: (storage (N, ...), row per instance), or None.

    None when a value is not in the arena (a lifted shared tensor) or the
    values lie in different storages (a pool grew during the run).
    """
    try:
        spans = [v.g.spans[v.k] for v in col]  # type: ignore[index]
    except TypeError:  # a value outside the arena (spans is None)
        return None
    storage = spans[0][0]
    for s, _ in spans:
        if s is not storage:
            return None
    return storage, [start + v.row for (_, start), v in zip(spans, col)]


def index_or_slice(rows: list[int], device: torch.device) -> slice | torch.Tensor:
    """``rows`` as a slice when contiguous (a view, no copy), else an int64 index tensor on ``device``."""
    r0 = rows[0]
    if rows[-1] - r0 == len(rows) - 1 and rows == list(range(r0, r0 + len(rows))):
        return slice(r0, r0 + len(rows))
    return int_tensor(rows, device)


class GatherPlan:
    """How to collect one batched argument from where its rows lie (explicit gather, §5.2).

    ``parts`` lists (source group, output index or None, rows) where rows is
    a slice when contiguous (no copy, the common case in iterative models),
    else an index tensor; ``inverse`` restores the batch order after
    concatenating several sources. A plan built without output indices
    (``ks=None``) serves every column with the same (group, row) pairs and
    one output index: a node's ``h`` and ``c`` come from the same children.
    """

    __slots__ = ("parts", "inverse")

    def __init__(self, gs: list[Group], rows: list[int], ks: list[int] | None, device: torch.device):
        by_src: dict[tuple[int, int | None], tuple[Group, int | None, list[int], list[int]]] = {}
        for pos, (g, r) in enumerate(zip(gs, rows)):
            k = None if ks is None else ks[pos]
            entry = by_src.get((id(g), k))
            if entry is None:
                entry = by_src[(id(g), k)] = (g, k, [], [])
            entry[2].append(r)
            entry[3].append(pos)
        self.parts: list[tuple[Group, int | None, slice | torch.Tensor]] = []
        order: list[int] = []
        for g, k, rs, positions in by_src.values():
            self.parts.append((g, k, index_or_slice(rs, device)))
            order += positions
        self.inverse: torch.Tensor | None = None
        if len(self.parts) > 1 and order != sorted(order):
            inverse = [0] * len(order)
            for i, pos in enumerate(order):
                inverse[pos] = i
            self.inverse = int_tensor(inverse, device)

    def apply(self, k: int | None = None) -> torch.Tensor:
        """The (B, ...) batched argument (output ``k`` of each source for a plan built without ks).

        Raises:
            AcrobatError: a value whose group has not run yet (a dependency
                the depth schedule violated; never silently wrong).
        """
        tensors = []
        for g, part_k, sel in self.parts:
            t = _outs(g)[k if part_k is None else part_k]  # type: ignore[index]
            if isinstance(sel, slice):
                tensors.append(t if sel.start == 0 and sel.stop == t.shape[0] else t[sel])
            else:
                tensors.append(t.index_select(0, sel))
        out = tensors[0] if len(tensors) == 1 else torch.cat(tensors)
        return out if self.inverse is None else out.index_select(0, self.inverse)


def gather_columns(columns: list[Sequence[Value]], device: torch.device) -> list[torch.Tensor]:
    """Batched (B, ...) tensors for columns of per-instance ``Value``s.

    Columns that read the same (group, row) pairs share one plan.
    """
    plans: list[tuple[list[Group], list[int], GatherPlan]] = []
    out = []
    for col in columns:
        gs = [v.g for v in col]
        rows = [v.row for v in col]
        ks = [v.k for v in col]
        if ks.count(ks[0]) != len(ks):  # mixed output indices: a plan of its own
            out.append(GatherPlan(gs, rows, ks, device).apply())
            continue
        plan = next((p for pg, pr, p in plans if pr == rows and pg == gs), None)
        if plan is None:
            plan = GatherPlan(gs, rows, None, device)
            plans.append((gs, rows, plan))
        out.append(plan.apply(ks[0]))
    return out


def _outs(g: Group) -> tuple[torch.Tensor, ...]:
    if g.outs is None:
        name = g.block.name if g.block is not None else "?"
        raise AcrobatError(f"internal scheduling error: a value of block {name} (phase {g.phase}, depth {g.depth}) "
                           "was needed before it was computed")
    return g.outs
