"""The lowered IR that the analyses produce and the code generator consumes.

After lowering, a function body holds host statements (``acrobat.frontend.ir``
statements whose expressions contain no tensor operator and no program
call), ``BlockCall``s (one static block invocation: a DFG node at run time)
and ``ProgramCall``s (calls of program functions, possibly concurrent).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acrobat.analysis.kinds import Spec, SpecKey
from acrobat.frontend import ir
from acrobat.runtime.plan import SegmentOp


@dataclass(eq=False)
class BlockParam:
    """A parameter of a static block.

    ``role`` is ``"tensor"`` (batched per-instance tensor), ``"host"``
    (per-instance Python number, batched into a 1-D tensor) or ``"shared"``
    (the same value for every call, passed once: parameter reuse, §5.1).
    ``expr`` computes the argument in the skeleton (tensor/host roles);
    ``slot`` is the shared-value slot (shared role).
    """

    name: str
    role: str
    expr: ir.Expr | None = None
    slot: int | None = None


@dataclass(eq=False)
class Block:
    """A static block: a maximal straight-line region of tensor operators (App. A.2).

    ``sdepth`` is the block's static depth when hoisted (App. A.1), ``None``
    when its depth is computed inline at run time (§4.1). With ``segment``
    set it is a segment operator instead: one parameter of role ``"list"``
    (a per-instance list of tensors), reduced or normalized over the list
    (``acrobat.analysis.ragged``).
    """

    id: int
    name: str
    spec: Spec
    stmts: list[ir.Assign]
    params: list[BlockParam]
    outputs: list[str]
    sdepth: int | None
    loc: ir.Loc
    subst: dict[int, str] = field(default_factory=dict)  # expression nid -> block parameter name
    segment: SegmentOp | None = None  # a segment operator over one list per node (analysis.ragged), not a block

    @property
    def batched_params(self) -> list[BlockParam]:
        """Parameters that get one value per DFG node (tensor and host roles), in order."""
        return [p for p in self.params if p.role != "shared"]

    @property
    def shared_params(self) -> list[BlockParam]:
        """Parameters passed once per launch, unbatched (parameter reuse, §5.1)."""
        return [p for p in self.params if p.role == "shared"]


@dataclass(eq=False)
class BlockCall(ir.Stmt):
    """Invoke ``block`` for the running instance: adds one DFG node."""

    block: Block = None  # type: ignore[assignment]


@dataclass(eq=False)
class ProgramCall(ir.Stmt):
    """``target = f(args)``, or with several calls, ``target = concurrent(f(a), g(b))``."""

    target: ir.Target = None  # type: ignore[assignment]
    calls: list[tuple[SpecKey, list[ir.Expr]]] = field(default_factory=list)
    concurrent: bool = False


@dataclass(eq=False)
class LoweredFunction:
    """One specialization, lowered: its body, and which ``for`` loops are maps (parallel)."""

    spec: Spec
    body: list[ir.Stmt]
    parallel_loops: set[int] = field(default_factory=set)
