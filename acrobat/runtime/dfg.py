"""The lazily built DFG: nodes grouped by (phase, depth, block) as they are added (§2.2, §4.1).

A DFG node is one static-block invocation by one instance. Nodes are not
stored one by one: adding a node (one native call from the generated
skeleton, ``Runtime.dfg.node``; ``acrobat._native``) appends the node's
arguments to its group, the set of nodes sharing ``(phase, depth,
block)``, which is exactly one batched launch later, so scheduling needs
no separate graph pass.

A node's outputs are handles: plain ints that encode (group, output
index, row). A group stores its nodes' tensor arguments as handles in one
int64 array as they are added (while the objects are still in cache), so
a launch reads its batched arguments as a ``(params, B)`` array without
touching a Python object per value, and finds where every value lies
(which group output, which arena row) with a few vectorized numpy
operations: in Python, per-value work is most of a runtime's cost.
"""

from __future__ import annotations

import struct
from typing import Mapping, Sequence

import numpy as np
import torch

from acrobat.errors import AcrobatError
from acrobat.runtime.plan import BlockCode, RowSpec

try:
    from acrobat import _native
except ImportError as exc:  # a source checkout run through PYTHONPATH without building the extension
    raise ImportError("acrobat's native module acrobat._native is not built: run `pip install -e .` "
                      "(or `python setup.py build_ext --inplace`) in the checkout") from exc

ROW_BITS = 24
"""Bits of a handle that hold the row: a group (one launch) has at most 2**24 - 1 nodes."""
ROW_MASK = (1 << ROW_BITS) - 1
OUTPUT_STEP = 1 << ROW_BITS
"""Handle of output k+1 of a node minus handle of output k."""


Handle = int
"""A lazy per-instance tensor: row ``row`` of output ``k`` of group ``gid``, as the plain int
``((gid << kbits | k) << ROW_BITS) | row`` (``kbits`` from the run's ``ValueTable``). Plain ints
cost the skeleton least; the kind analysis says where they stand for tensors (``TensorK``)."""


PHASE_SHIFT = 40
"""A pending group's key packs (phase, depth, block id) as ``phase << PHASE_SHIFT | depth << DEPTH_SHIFT | block``:
depths below 2**24, block ids below 2**16, phases below 2**23."""
DEPTH_SHIFT = 16
STAGE_BITS = 15
"""A phase is ``program phase << STAGE_BITS | stage``: stage 0 is the program phase itself, stages 1.. the
iterations of its staged loop (``acrobat.analysis.phases``), in order. A hoisted block's nodes ignore the stage
(``Dfg``'s ``hoisted``): a staged loop's hoisted nodes join one group, as outside staged loops (App. A.1)."""
STAGE_MASK = (1 << STAGE_BITS) - 1
MAX_PHASES = 1 << (63 - PHASE_SHIFT - STAGE_BITS)
"""Program phases a key can hold."""


def group_key(phase: int, depth: int, block_id: int) -> int:
    """The key of the pending group of ``block_id`` at (``phase``, ``depth``) in ``Runtime.groups``: sorting
    keys sorts groups by (phase, depth, block), the flush order (§4.1)."""
    return phase << PHASE_SHIFT | depth << DEPTH_SHIFT | block_id


Dfg = _native.Dfg
"""``Dfg(groups, make, hoisted)``: a run's pending groups (``groups``, keyed by ``group_key``), the running
instance and phase (``inst``, ``phase``), and node insertion: ``node(depth, block_id, *handles)`` and
``node_hosts(depth, block_id, hosts, *handles)`` return the new node's output-0 handle; ``group(depth,
block_id)`` the pending group itself; ``make(phase, depth, block_id)`` creates and registers a group on a
miss; ``hoisted`` (bytes, one per block id) marks the blocks whose nodes ignore the phase's stage bits
(``acrobat/_native.c``). Made by ``new_dfg``."""

_native.set_tensor_type(torch.Tensor)
snapshot = _native.snapshot
"""``snapshot(x)``: ``x`` with its lists (also inside lists and tuples) copied and its tensors cloned, a host value
as it is now; a DFG
node's host values are taken so (``Dfg.node_hosts``), and the skeleton takes a host argument so before a later
argument of the same node that calls code (``tokens`` in ``(tokens, tokens.pop())``: ``codegen.aot``)."""
Recording = _native.Recording
"""The dynamic tier's common recorded call in C (``acrobat.runtime.dynamic.Recorder.record``): signs a positional
call, adds its DFG node and makes its ``Lazy`` result(s), or returns ``NotImplemented`` for the Python path."""
LazyBase = _native.LazyBase
"""The C fields of ``acrobat.runtime.lazy.Lazy`` (``h``, ``meta``, ``depth``, ``requires_grad``, ``rec``)."""


class Group(_native.Group):
    """The DFG nodes of one block at one (phase, depth): one batched launch.

    The node data is native (``acrobat._native.Group``: ``tensor_buf``,
    ``inst_buf``, ``hosts``; the skeleton appends to it through
    ``Runtime.dfg.node``). ``base`` is the handle of output 0, row 0;
    ``outs`` the ``(B, ...)`` output tensors once the group ran.
    """

    __slots__ = ()

    @property
    def tensors(self) -> memoryview:
        """Per node, the handles of its tensor arguments, node after node (an int64 view)."""
        return memoryview(self.tensor_buf).cast("q")

    @property
    def insts(self) -> memoryview:
        """Per node, its instance index (an int64 view)."""
        return memoryview(self.inst_buf).cast("q")

    def heads(self, m: int) -> tuple[int, ...]:
        """The first node's ``m`` tensor-argument handles (a launch's argument specs come from them)."""
        return struct.unpack_from(f"{m}q", self.tensor_buf)

    def node_args(self, row: int) -> list:
        """Node ``row``'s batched arguments in parameter order: handles (tensor parameters) and host values."""
        assert self.block is not None
        roles = self.block.batched_roles
        m = self.block.n_tensor_params
        tensors = iter(self.tensors[row * m:(row + 1) * m])
        hosts = iter(self.hosts[row] if self.hosts else ())
        return [next(tensors) if role == "tensor" else next(hosts) for role in roles]

    def outputs(self) -> tuple[torch.Tensor, ...]:
        """The computed ``(B, ...)`` outputs.

        Raises:
            AcrobatError: the group has not run yet (a dependency the depth
                schedule violated; never silently wrong).
        """
        if self.outs is None:
            name = self.block.name if self.block is not None else "?"
            raise AcrobatError(f"internal scheduling error: a value of block {name} (phase {self.phase >> STAGE_BITS}, "
                               f"stage {self.phase & STAGE_MASK}, depth {self.depth}) was needed before it was "
                               "computed")
        return self.outs


POOL_SHIFT = 40
"""An arena row is recorded as ``pool id << POOL_SHIFT | row``, so a value read from the wrong pool is caught."""
NOT_PLACED = -(1 << 62)


class ValueTable:
    """A run's groups by id, and where their outputs lie in arena memory.

    A handle's *source* ``src = handle >> ROW_BITS`` (``gid << kbits | k``)
    names one group output; ``arena_offset[src] + handle`` is ``pool id <<
    POOL_SHIFT`` plus the value's arena row (``arena_offset`` holds that row
    start less ``src << ROW_BITS``, so one addition locates a handle; it is
    ``NOT_PLACED`` when the output is not in the arena, e.g. the eager
    backend's outputs, or a group that has not run: the sum is negative).
    """

    def __init__(self, max_outputs: int):
        self.kbits = max(1, (max_outputs - 1).bit_length())
        self.groups: list[Group] = []
        self.arena_offset = np.full(64, NOT_PLACED, dtype=np.int64)
        self.specs: dict[int, RowSpec] = {}  # src -> row spec of the outputs placed in the arena

    def group(self, block: BlockCode | None, phase: int, depth: int) -> Group:
        """A new, empty group."""
        gid = len(self.groups)
        g = Group(block, phase, depth, gid, (gid << self.kbits) << ROW_BITS)
        self.groups.append(g)
        need = (gid + 1) << self.kbits
        if need > len(self.arena_offset):  # room for this group's outputs (doubling)
            grow = max(need, 2 * len(self.arena_offset)) - len(self.arena_offset)
            self.arena_offset = np.concatenate([self.arena_offset, np.full(grow, NOT_PLACED, dtype=np.int64)])
        return g

    def lifted(self, t: torch.Tensor) -> tuple[Group, Handle]:
        """A shared tensor turned per-instance: a one-row group that is computed before any op."""
        g = self.group(None, -1, -1)
        g.outs = (t.unsqueeze(0),)
        return g, g.base

    def locate(self, h: int) -> tuple[Group, int, int]:
        """(group, output index, row) of handle ``h``."""
        src = h >> ROW_BITS
        return self.groups[src >> self.kbits], src & ((1 << self.kbits) - 1), h & ROW_MASK

    def source(self, src: int) -> tuple[Group, int]:
        """(group, output index) of a source id."""
        return self.groups[src >> self.kbits], src & ((1 << self.kbits) - 1)

    def tensor_of(self, h: int) -> torch.Tensor:
        """The ``(B, ...)`` output tensor that holds handle ``h``'s value."""
        g, k, _ = self.locate(h)
        return g.outputs()[k]

    def tensor(self, h: Handle) -> torch.Tensor:
        """The computed tensor of handle ``h`` (a view of its group's output).

        Raises:
            AcrobatError: its group has not run yet.
        """
        return self.tensor_of(h)[h & ROW_MASK]

    def place(self, g: Group, k: int, pool: int, start: int, spec: RowSpec) -> None:
        """Record that output ``k`` of ``g`` (rows of spec ``spec``) lies in arena pool ``pool`` from row ``start``."""
        src = (g.gid << self.kbits) | k
        self.arena_offset[src] = ((pool << POOL_SHIFT) | start) - (src << ROW_BITS)
        self.specs[src] = spec

    def spec_of(self, h: Handle) -> RowSpec | None:
        """The row spec of handle ``h``'s value, if its group output was placed in the arena, else None."""
        return self.specs.get(h >> ROW_BITS)

    def read_groups(self, g: Group) -> set[int]:
        """The ids of the groups whose outputs ``g``'s nodes read (one pass in C, ``acrobat._native.sources``)."""
        return _native.sources(g.tensor_buf, ROW_BITS + self.kbits)

    def arena_rows(self, values: bytearray | memoryview, pool_base: np.ndarray,
                   out: np.ndarray | None = None) -> np.ndarray | None:
        """The arena rows of a group's handles ``values`` (its ``tensor_buf``: int64, ``columns = len(pool_base)`` per node, node
        after node) as a ``(columns, nodes)`` array, each column one contiguous index vector, when
        column ``j`` lies wholly in the pool whose ``id << POOL_SHIFT`` is ``pool_base[j]``, else None
        (a value outside the arena, or in another pool: another row spec). Written into ``out`` (a
        C-contiguous int64 ``(columns, nodes)`` array) when given.

        One pass in C (``acrobat._native.arena_rows``): five numpy calls and a transposing copy
        took 8-20 µs of a launch, right after a kernel has evicted the caches.
        """
        if out is None:
            out = np.empty((len(pool_base), memoryview(values).nbytes // (8 * len(pool_base))), dtype=np.int64)
        return out if _native.arena_rows(values, self.arena_offset, pool_base, out) else None


def new_dfg(table: ValueTable, blocks: Mapping[int, BlockCode]) -> Dfg:
    """A run's ``Dfg``, its groups numbered by ``table``. Its ``make`` holds the table, the blocks and the
    pending-group dict, not the runtime: a run's DFG holds no reference cycle, so refcounting frees it
    when the run ends (the runtime pauses the cycle collector during runs)."""
    groups: dict[int, Group] = {}

    def make(phase: int, depth: int, block_id: int) -> Group:
        g = groups[group_key(phase, depth, block_id)] = table.group(blocks[block_id], phase, depth)
        return g

    hoisted = bytearray(max(blocks, default=-1) + 1)
    for bid, b in blocks.items():
        hoisted[bid] = b.hoisted
    return Dfg(groups, make, bytes(hoisted))


def handle_matrix(values: Sequence[Handle] | memoryview, columns: int) -> np.ndarray:
    """Handles stored node after node (``columns`` per node) as a C-contiguous int64 array (columns, nodes)."""
    nodes = np.asarray(values, dtype=np.int64).reshape(-1, columns)
    return nodes.T.copy() if columns > 1 else nodes.reshape(1, -1)
