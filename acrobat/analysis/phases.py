"""Program phases and staged loops: split the entry into stages that run one after another (§4.1, App. A.3).

All DFG nodes of phase k run before any of phase k+1, so operators that
come after a repetitive stage (BiRNN's per-token output layer, the TreeLSTM
classifier at the root) batch across all instances at once instead of
being spread over depths by differing sentence lengths. The heuristic: a
top-level statement of the entry that does tensor work and reads a value
the current phase produced starts a new phase. Explicit
``acrobat.phase()`` statements in the entry override the heuristic.

A *staged loop* applies the same idea to the iterations of a sequential
loop of the entry. Where a loop's body holds work whose depth advance
may differ per instance (an inner loop, a call of a function that loops
or recurses) and also fixed work (a GRU
cell after NestedRNN's inner RNN), depth scheduling offsets the fixed
work of each instance by its inner trip counts so far, and it runs at a
mean batch near 1. A staged loop gives each iteration's stages phases of
their own (``ir.StageMark``, run time: ``Runtime.enter_stage``): stage s
of iteration t of every instance runs together, each from the base
depth. Its cost: the varying work of iteration t takes as many launches as
its longest instance, so a loop whose varying work is the whole body is
not staged.
"""

from __future__ import annotations

from typing import AbstractSet as Set
from typing import Mapping

from acrobat.analysis.depth import contains_work, list_aliases, loop_carried, maps_of, stmt_reads, stmt_writes
from acrobat.analysis.kinds import Spec, SpecKey, has_tensor
from acrobat.analysis.lowered import BlockCall, ProgramCall
from acrobat.frontend import ir


def insert_phases(body: list[ir.Stmt], spec: Spec, bodies: Mapping[SpecKey, list[ir.Stmt]], maps: Set[int],
                  enabled: bool = True, stages: bool = True) -> list[ir.Stmt]:
    """Return the entry body with ``PhaseMark``s at phase boundaries, and ``StageMark``s in its staged loops.

    ``spec`` is the entry's, ``bodies`` the lowered body of every specialization (a call's depth advance is
    its callee's), ``maps`` the nids of the map loops (``acrobat.analysis.depth.parallel_loops``). With
    explicit marks present, or ``enabled=False`` (the ablation), the body is returned unchanged
    (explicit marks stay, none are added). With ``stages=False`` no loop is staged. A staged loop ends
    its phase: the next statement with tensor work starts a new one.
    """
    if not enabled or any(isinstance(s, ir.PhaseMark) for s in body):
        return body
    out: list[ir.Stmt] = []
    produced: set[str] = set()
    after_staged = False
    advance = Advance(bodies, maps)
    for s in body:
        work = contains_work(s)
        reads = stmt_reads(s)
        if work and (reads & produced or after_staged):
            out.append(ir.PhaseMark(s.loc))
            produced = set()
            after_staged = False
        if work or reads & produced:
            produced |= stmt_writes(s, maps_of(spec))
        if stages and stage_loop(s, spec, advance):
            after_staged = True
        out.append(s)
    return out


def stage_loop(s: ir.Stmt, spec: Spec, advance: "Advance") -> bool:
    """Make ``s`` a staged loop when it should be one (see the module docstring): put a ``StageMark`` at the
    top of its body and before each statement with inline tensor work that follows varying work in the
    same stage. Whether it did.

    A loop qualifies when it carries a tensor from one iteration to the next (a map loop's iterations
    share depths already) and its body holds both varying work (not ``Advance.fixed``) and a statement with
    inline work that does not vary.
    """
    if not isinstance(s, (ir.For, ir.While)) or not contains_work(s):
        return False
    carried = loop_carried(s.body, list_aliases(spec), maps_of(spec))
    if not any(has_tensor(spec.var.get(n)) for n in carried if n in spec.var):
        return False
    body = s.body
    varies = [not advance.fixed([t]) for t in body]
    if not any(varies) or not any(_inline_work(t) and not v for t, v in zip(body, varies)):
        return False
    starts = [0]
    pending = False  # varying work ran in the current stage
    for i, t in enumerate(body):
        if pending and _inline_work(t):
            starts.append(i)
            pending = False
        pending = pending or varies[i]
    n = len(starts)
    out: list[ir.Stmt] = []
    for i, t in enumerate(body):
        if i in starts:
            out.append(ir.StageMark(t.loc, starts.index(i), n))
        out.append(t)
    s.body[:] = out
    return True


class Advance:
    """Which statements advance every instance's depth by the same amount, over the lowered ``bodies`` of
    every specialization, with ``maps`` the nids of map loops (§4.1)."""

    def __init__(self, bodies: Mapping[SpecKey, list[ir.Stmt]], maps: Set[int]):
        self.bodies = bodies
        self.maps = maps

    def fixed(self, stmts: list[ir.Stmt], calling: frozenset[SpecKey] = frozenset()) -> bool:
        """Whether ``stmts`` advance every instance's depth by the same amount: no loop with tensor work
        but map loops of such statements (their iterations share depths), no ``return`` under an ``if``
        with work, and calls only of functions that do the same (a recursive call, one of ``calling``, may
        not). Branches are taken as equal: ghost operators pad them (App. A.3)."""
        for t in stmts:
            match t:
                case ir.For() if contains_work(t) and (t.nid not in self.maps or not self.fixed(t.body, calling)):
                    return False
                case ir.While() if contains_work(t):
                    return False
                case ir.If() if contains_work(t) and (_returns(t) or not self.fixed(t.body + t.orelse, calling)):
                    return False
                case ProgramCall(calls=calls):
                    if any(k in calling or not self.fixed(self.bodies[k], calling | {k}) for k, _ in calls):
                        return False
        return True


def _returns(s: ir.Stmt) -> bool:
    return any(isinstance(r, ir.Return) for r in ir.walk_stmts([s]))


def _inline_work(s: ir.Stmt) -> bool:
    """Whether ``s`` adds DFG nodes at inline depths (a block that is not hoisted, or a program call)."""
    return any(isinstance(t, BlockCall) and t.block.sdepth is None or isinstance(t, ProgramCall)
               for t in ir.walk_stmts([s]))
