"""Invariants of the IR that every pass of the compile pipeline keeps (``acrobat.pipeline`` checks them).

Each function takes the results of one pass and returns what it found wrong, as sentences (empty: all
holds); the pipeline raises ``InternalError`` naming the pass that broke one. Each walks the result once,
so the checks run on every compile (a few ms next to the compile itself).

- node ids (``nid``) are unique: two different IR nodes of one function never share an id, since the
  analyses key their tables (kinds, reads, calls) by it;
- every specialization of the kind table (§4.2, §5.1) is lowered, and the entry is one of them;
- every static block invocation (App. A.2) names one block (one id, one ``Block``), whose parameters are
  defined: a shared one (§5.1) holds a slot of the table, the others an expression the skeleton computes,
  and each name its statements read is a parameter or assigned before; its outputs are assigned;
- map loops (§4.1) are ``for`` loops of their function;
- phase and stage marks (§4.1) are only in the entry;
- every block has its code, under its own id (§5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Set

from acrobat.analysis.kinds import Spec, SpecKey
from acrobat.analysis.lowered import Block, BlockCall, LoweredFunction
from acrobat.frontend import ir
from acrobat.runtime.plan import BlockCode


def _nodes(body: list[ir.Stmt]) -> Iterator[ir.Stmt | ir.Expr]:
    """Every statement and expression of ``body``, nested bodies and the statements of its blocks included."""
    for s in ir.walk_stmts(body):
        yield s
        stmts = s.block.stmts if isinstance(s, BlockCall) else [s]
        for t in stmts:
            if t is not s:
                yield t
            for root in ir.stmt_exprs(t):
                yield from ir.walk(root)


def duplicate_ids(name: str, body: list[ir.Stmt]) -> list[str]:
    """Node ids that two different nodes of ``body`` (function ``name``) share."""
    seen: dict[int, ir.Stmt | ir.Expr] = {}
    out: list[str] = []
    for node in _nodes(body):
        other = seen.setdefault(node.nid, node)
        if other is not node:
            out.append(f"`{name}`: node id {node.nid} is both `{type(other).__name__}` at {other.loc} and "
                       f"`{type(node).__name__}` at {node.loc}")
    return out


def unlowered(specs: Mapping[SpecKey, Spec], entry: SpecKey, lowered: Iterable[SpecKey]) -> list[str]:
    """Specializations of ``specs`` with no lowered body among the keys ``lowered``, and an entry not in ``specs``."""
    done = set(lowered)
    out = [f"specialization `{spec.name}` was not lowered" for key, spec in specs.items() if key not in done]
    return out + ([] if entry in specs else ["the entry is not in the specialization table"])


def block_problems(bodies: Mapping[SpecKey, list[ir.Stmt]], n_slots: int) -> list[str]:
    """What is wrong with the static blocks that ``bodies`` invoke, with ``n_slots`` shared slots (see the
    module docstring)."""
    out: list[str] = []
    by_id: dict[int, Block] = {}
    for s in (s for body in bodies.values() for s in ir.walk_stmts(body)):
        if not isinstance(s, BlockCall):
            continue
        b = s.block
        if by_id.setdefault(b.id, b) is not b:
            out.append(f"two different blocks have id {b.id} (`{by_id[b.id].name}`, `{b.name}`)")
            continue
        out += [f"block {b.id} `{b.name}`: {problem}" for problem in _param_problems(b, n_slots)]
    return out


def _param_problems(b: Block, n_slots: int) -> list[str]:
    """What is wrong with block ``b``'s parameters, statements and outputs."""
    out: list[str] = []
    for p in b.params:
        if p.role == "shared" and not (isinstance(p.slot, int) and 0 <= p.slot < n_slots):
            out.append(f"shared parameter `{p.name}` holds slot {p.slot}, not one of the {n_slots} slots")
        elif p.role != "shared" and p.expr is None:
            out.append(f"{p.role} parameter `{p.name}` has no expression to compute it")
    if b.segment is not None:  # a segment operator: its one statement is the reference over the list
        return out
    defined = {p.name for p in b.params}
    for t in b.stmts:
        for name in sorted(_reads(t.value, b.subst) - defined):
            out.append(f"`{name}` is read at {t.loc} but is neither a parameter nor assigned before")
        defined.update(t.target.names())
    return out + [f"output `{o}` is never assigned" for o in b.outputs if o not in defined]


def _reads(e: ir.Expr, subst: Mapping[int, str]) -> set[str]:
    """Names ``e`` reads in a block, where an expression whose id ``subst`` maps is replaced by that code
    (a parameter, or an item of one: ``_hf0[1]``, a horizontally fused result) and reads its names."""
    out: set[str] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if x.nid in subst:
            out.update(re.findall(r"[A-Za-z_]\w*", subst[x.nid]))
        elif isinstance(x, ir.Name):
            out.add(x.id)
        else:
            stack.extend(ir.children(x))
    return out


def stray_maps(bodies: Mapping[SpecKey, list[ir.Stmt]], maps: Mapping[SpecKey, Set[int]]) -> list[str]:
    """Map-loop ids of ``maps`` that are not a ``for`` loop of their function's body."""
    out: list[str] = []
    for key, nids in maps.items():
        loops = {s.nid for s in ir.walk_stmts(bodies[key]) if isinstance(s, ir.For)}
        out += [f"map loop {nid} is not a `for` loop of its function" for nid in sorted(set(nids) - loops)]
    return out


def stray_marks(lowered: Iterable[LoweredFunction], entry: SpecKey) -> list[str]:
    """Phase or stage marks outside the entry."""
    return [f"`{f.spec.name}` is not the entry but holds a {type(s).__name__} ({s.loc})"
            for f in lowered if f.spec.key != entry
            for s in ir.walk_stmts(f.body) if isinstance(s, (ir.PhaseMark, ir.StageMark))]


def missing_code(blocks: Mapping[int, Block], codes: Mapping[int, BlockCode]) -> list[str]:
    """Blocks of ``blocks`` with no code in ``codes``, or code under another block's id."""
    out = [f"block {bid} `{b.name}` has no code" for bid, b in blocks.items() if bid not in codes]
    return out + [f"the code under id {bid} is block {c.id}'s" for bid, c in codes.items() if c.id != bid]
