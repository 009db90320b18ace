"""Program phases: split the entry function into stages (§4.1, App. A.3).

All DFG nodes of phase k run before any of phase k+1, so operators that
come after a repetitive stage (BiRNN's per-token output layer, the TreeLSTM
classifier at the root) batch across all instances at once instead of
being spread over depths by differing sentence lengths. The heuristic: a
top-level statement of the entry that does tensor work and reads a value
the current phase produced starts a new phase. Explicit
``acrobat.phase()`` statements in the entry override the heuristic.
"""

from __future__ import annotations

from acrobat.analysis.depth import contains_work, stmt_reads, stmt_writes
from acrobat.frontend import ir


def insert_phases(body: list[ir.Stmt], enabled: bool = True) -> list[ir.Stmt]:
    """Return the entry body with ``PhaseMark``s at phase boundaries.

    With explicit marks present, or ``enabled=False`` (the ablation), the
    body is returned unchanged (explicit marks stay, none are added).
    """
    if not enabled or any(isinstance(s, ir.PhaseMark) for s in body):
        return body
    out: list[ir.Stmt] = []
    produced: set[str] = set()
    for s in body:
        work = contains_work(s)
        reads = stmt_reads(s)
        if work and reads & produced:
            out.append(ir.PhaseMark(s.loc))
            produced = set()
        if work or reads & produced:
            produced |= stmt_writes(s)
        out.append(s)
    return out
