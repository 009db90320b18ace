"""The lazily built DFG: nodes grouped by (phase, depth, block) as they are added (§2.2, §4.1).

A DFG node is one static-block invocation by one instance. Nodes are not
stored one by one: ``invoke`` appends the node's arguments to its group,
the set of nodes sharing ``(phase, depth, block)``, which is exactly one
batched launch later, so scheduling needs no separate graph pass. The
node's outputs are ``Value`` handles (group, output index, row) that are
filled in when the group runs.
"""

from __future__ import annotations

from typing import Any

import torch

from acrobat.analysis.lowered import Block


class Group:
    """The DFG nodes of one block at one (phase, depth): one batched launch."""

    __slots__ = ("block", "phase", "depth", "args", "insts", "outs", "spans")

    def __init__(self, block: Block | None, phase: int, depth: int):
        self.block = block
        self.phase = phase
        self.depth = depth
        self.args: list[tuple] = []  # per node: its batched arguments (Values and host numbers)
        self.insts: list[int] = []  # per node: the instance index
        self.outs: tuple[torch.Tensor, ...] | None = None  # after execution: (B, ...) per output
        self.spans: tuple[tuple[torch.Tensor, int], ...] | None = None  # per output: (arena storage, first row)


class Value:
    """A lazy per-instance tensor: row ``row`` of output ``k`` of group ``g``."""

    __slots__ = ("g", "k", "row")

    def __init__(self, g: Group, k: int, row: int):
        self.g = g
        self.k = k
        self.row = row

    def __repr__(self) -> str:
        name = self.g.block.name if self.g.block is not None else "lifted"
        return f"<acrobat value: output {self.k} of {name}, row {self.row}>"


def lifted_group(t: torch.Tensor) -> Group:
    """A pseudo-group holding one shared tensor turned per-instance (ready before any op)."""
    g = Group(None, -1, -1)
    g.outs = (t.unsqueeze(0),)
    return g


def materialize(x: Any) -> Any:
    """Replace every computed ``Value`` in a (nested) result by its tensor."""
    if isinstance(x, Value):
        return x.g.outs[x.k][x.row]  # type: ignore[index]
    if isinstance(x, list):
        return [materialize(i) for i in x]
    if isinstance(x, tuple):
        return tuple(materialize(i) for i in x)
    return x
