"""The runtime: build the DFG by running the skeleton, then run it group by group (§4).

Without tensor-dependent control flow every instance's skeleton runs to the
end first (lazy DFG construction), then groups run in (phase, depth) order,
each as one batched call of its block; results are read from the groups'
output tensors through the ``Value`` handles. Everything is out of place
(``index_select``, ``cat``, slicing), so autograd can run ``backward``
through a batched run.
"""

from __future__ import annotations

import time
import traceback
from typing import Any, Callable, Sequence

import torch

from acrobat.analysis.lowered import Block
from acrobat.codegen.blocks import block_filename
from acrobat.errors import AcrobatError, BatchError, ShapeError
from acrobat.runtime.dfg import Group, Value, lifted_group, materialize
from acrobat.runtime.stats import BlockStats, RunStats


class Runtime:
    """One batched run: the DFG under construction and its execution.

    ``blocks[i]`` is block ``i``, ``batched_fns[i]`` its batched form,
    ``shared[i]`` the values of its shared parameters.
    """

    def __init__(self, blocks: dict[int, Block], fns: dict[int, Callable], batched_fns: dict[int, Callable],
                 shared: dict[int, list]):
        self.blocks = blocks
        self.fns = fns
        self.batched_fns = batched_fns
        self.shared = shared
        self.groups: dict[tuple[int, int, int], Group] = {}
        self.lifted: dict[int, Group] = {}
        self.phase = 0
        self.inst = 0
        self.stats = RunStats()

    # -- called by the generated skeleton ----------------------------------
    def invoke(self, block: Block, depth: int, args: tuple) -> tuple[Value, ...]:
        """Add a DFG node of ``block`` at ``depth`` in the current phase; its lazy outputs."""
        key = (self.phase, depth, block.id)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = Group(block, self.phase, depth)
        row = len(g.args)
        g.args.append(args)
        g.insts.append(self.inst)
        return tuple([Value(g, k, row) for k in range(len(block.outputs))])

    def lift(self, t: Any) -> Value:
        """A shared tensor used where a per-instance tensor is expected."""
        g = self.lifted.get(id(t))
        if g is None:
            g = self.lifted[id(t)] = lifted_group(torch.as_tensor(t))
        return Value(g, 0, 0)

    # -- execution ------------------------------------------------------------
    def run(self, entry: Callable, base: int, instances: Sequence, shared_args: tuple) -> list:
        """Build the DFG of all instances, execute it, return per-instance results."""
        if len(instances) == 0:
            raise BatchError("empty batch: run() needs at least one instance")
        t0 = time.perf_counter()
        results = []
        for i, inst in enumerate(instances):
            self.inst = i
            self.phase = 0
            out, _ = entry(self, base, inst, *shared_args)
            results.append(out)
        t1 = time.perf_counter()
        self.execute()
        out = [materialize(r) for r in results]
        t2 = time.perf_counter()
        s = self.stats
        s.instances = len(instances)
        s.construct_ms = (t1 - t0) * 1e3
        s.total_ms = (t2 - t0) * 1e3
        s.schedule_ms = s.total_ms - s.construct_ms - s.kernel_ms
        s.phases = 1 + max((k[0] for k in self.groups), default=0)
        return out

    def execute(self) -> None:
        """Run every group in (phase, depth, block) order."""
        for key in sorted(self.groups):
            self.run_group(self.groups[key])

    def run_group(self, g: Group) -> None:
        block = g.block
        assert block is not None
        try:
            cols = list(zip(*g.args)) if block.batched_params else []
            batched = [gather(col) if p.role == "tensor" else torch.tensor(col)
                       for p, col in zip(block.batched_params, cols)]
            t0 = time.perf_counter()
            outs = self.batched_fns[block.id](*batched, *self.shared[block.id])
            self.stats.kernel_ms += (time.perf_counter() - t0) * 1e3
        except AcrobatError:
            raise
        except Exception as exc:  # a failing operator: find the instance and the source line
            raise self.diagnose(g, exc) from exc
        g.outs = outs
        s = self.stats
        s.kernel_launches += 1
        s.dfg_nodes += len(g.args)
        b = s.blocks.get(block.id)
        if b is None:
            b = s.blocks[block.id] = BlockStats(block.name, hoisted=block.sdepth is not None)
        b.launches += 1
        b.nodes += len(g.args)

    def diagnose(self, g: Group, exc: Exception) -> Exception:
        """Re-run a failed group instance by instance to name the instance and source line."""
        block = g.block
        assert block is not None
        per_instance = []
        for row, args in enumerate(g.args):
            inst = g.insts[row]
            values = [materialize(a) if p.role == "tensor" else torch.tensor(a)
                      for p, a in zip(block.batched_params, args)]
            per_instance.append(values)
            try:
                self.fns[block.id](*values, *self.shared[block.id])
            except Exception as e:  # noqa: BLE001 - reported with its location
                loc, text = _failing_line(block, e)
                return ShapeError(f"instance {inst}: {type(e).__name__}: {e}\n  at {loc}: {text.strip()}\n"
                                  f"  (static block {block.name})", instance=inst)
        for j, p in enumerate(block.batched_params):
            shapes = [tuple(v[j].shape) for v in per_instance]
            if len(set(shapes)) > 1:
                first = shapes[0]
                odd = next(r for r, s in enumerate(shapes) if s != first)
                return ShapeError(
                    f"instances {g.insts[0]} and {g.insts[odd]} give `{p.name}` different shapes {first} vs "
                    f"{shapes[odd]} in static block {block.name} ({block.loc}): instances batched together must "
                    f"agree on tensor shapes", instance=g.insts[odd])
        return exc


def _failing_line(block: Block, e: Exception) -> tuple[str, str]:
    """The model source location of the block statement that raised ``e``."""
    name = block_filename(block)
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename == name and frame.lineno in block.line_map:
            loc = block.line_map[frame.lineno]
            return str(loc), block.spec.fn.source_lines.get(loc.line, "")
    return str(block.loc), block.spec.fn.source_lines.get(block.loc.line, "")


def gather(col: Sequence[Value]) -> torch.Tensor:
    """Stack per-instance values into one (B, ...) tensor, without a copy when they are contiguous.

    Explicit gather (§5.2, as DyNet does): one slice when the rows are
    already contiguous in one source, else ``index_select``.

    Raises:
        AcrobatError: a value whose group has not run yet (a dependency the
            depth schedule violated; never silently wrong).
    """
    v0 = col[0]
    src, k = v0.g, v0.k
    if all(v.g is src and v.k == k for v in col):
        t = _outs(src)[k]
        rows = [v.row for v in col]
        r0 = rows[0]
        if rows == list(range(r0, r0 + len(rows))):
            return t if r0 == 0 and len(rows) == t.shape[0] else t[r0:r0 + len(rows)]
        return t.index_select(0, torch.tensor(rows))
    # several sources: select each source's rows, concatenate, then restore the batch order
    by_src: dict[tuple[int, int], tuple[Value, list[int], list[int]]] = {}
    for pos, v in enumerate(col):
        entry = by_src.get((id(v.g), v.k))
        if entry is None:
            entry = by_src[(id(v.g), v.k)] = (v, [], [])
        entry[1].append(v.row)
        entry[2].append(pos)
    parts = []
    order: list[int] = []
    for v, rows, positions in by_src.values():
        parts.append(_outs(v.g)[v.k].index_select(0, torch.tensor(rows)))
        order += positions
    inverse = [0] * len(order)
    for i, pos in enumerate(order):
        inverse[pos] = i
    return torch.cat(parts).index_select(0, torch.tensor(inverse))


def _outs(g: Group) -> tuple[torch.Tensor, ...]:
    if g.outs is None:
        name = g.block.name if g.block is not None else "?"
        raise AcrobatError(f"internal scheduling error: a value of block {name} (phase {g.phase}, depth {g.depth}) "
                           "was needed before it was computed")
    return g.outs
