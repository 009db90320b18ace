"""Generate each static block's per-instance Python function and its batched form (§5).

A block's per-instance function is its tensor statements, printed back as
Python over the block parameters. Its batched form is
``torch.func.vmap`` over the batched parameters with the shared ones
unbatched (``in_dims=None``, parameter reuse §5.1): PyTorch's batching
rules, not acrobat's, define what a batched operator is. ``block_code``
hands the block to the runtime as an ``acrobat.runtime.plan.BlockCode``.
"""

from __future__ import annotations

import linecache

from acrobat.analysis.host_tensors import number_operand
from acrobat.analysis.lowered import Block
from acrobat.analysis.ragged import segment_reference
from acrobat.codegen.printer import BINOPS, CMPOPS, Globals, expr_source, target_source
from acrobat.frontend import ir
from acrobat.runtime.plan import BatchedParam, BlockCode, RecurrentOp, Site
from acrobat.runtime.recurrent import recurrent_reference


BINARY = {op: f for op, f in {**BINOPS, **CMPOPS}.items() if op in ("+", "-", "*", "/", "//", "%", "**", "<", "<=",
                                                                    ">", ">=", "==", "!=")}
"""The operators whose result dtype a Python number operand promotes (``number_operand``)."""


def block_source(block: Block, g: Globals) -> tuple[str, dict[int, ir.Loc]]:
    """The per-instance function of ``block`` and its generated-line -> model-line map. An arithmetic
    operator or comparison with a per-instance host number as an operand goes through
    ``number_operand``, which promotes the number as Python does."""
    args = ", ".join(p.name for p in block.batched_params + block.shared_params)
    lines = [f"def block_{block.id}({args}):"]
    line_map: dict[int, ir.Loc] = {}
    hosts = {p.name for p in block.batched_params if p.role == "host"}

    def host_side(e: ir.Expr) -> bool:
        return (block.subst.get(e.nid) or (e.id if isinstance(e, ir.Name) else None)) in hosts

    def subst(e: ir.Expr) -> str | None:
        name = block.subst.get(e.nid)
        if name is not None:
            return name
        pair = ((e.op, e.left, e.right) if isinstance(e, ir.BinOp) and not e.inplace and e.op in BINARY else
                (e.ops[0], *e.operands) if isinstance(e, ir.Compare) and len(e.ops) == 1 and e.ops[0] in BINARY
                else None)
        if pair is None or host_side(pair[1]) == host_side(pair[2]):
            return None
        op, a, b = pair
        return (f"{g.alias(number_operand, 'number_operand')}({g.alias(BINARY[op], BINARY[op].__name__)}, "
                f"{expr_source(a, g, subst)}, {expr_source(b, g, subst)}, {0 if host_side(a) else 1})")

    for s in block.stmts:
        lines.append(f"    {target_source(s.target)} = {expr_source(s.value, g, subst)}")
        line_map[len(lines)] = s.loc
    outs = "".join(f"{n}, " for n in block.outputs)
    lines.append(f"    return ({outs})")
    return "\n".join(lines) + "\n", line_map


def block_code(block: Block, g: Globals) -> BlockCode:
    """``block`` as the runtime runs it: its per-instance function compiled (for a segment operator, the
    reference function), its parameters, and the model lines its errors point at."""
    source_lines = block.spec.fn.source_lines

    def site(loc: ir.Loc) -> Site:
        return Site(str(loc), source_lines.get(loc.line, "").strip())

    params = tuple(BatchedParam(p.name, p.role, p.name, site(block.loc)) if p.expr is None else
                   BatchedParam(p.name, p.role, expr_source(p.expr, Globals(), lambda _: None), site(p.expr.loc))
                   for p in block.batched_params)
    filename = f"<acrobat block {block.id} {block.name}>"
    source, line_map = "", {}
    if isinstance(block.segment, RecurrentOp):
        fn = recurrent_reference(block.segment)
    elif block.segment is not None:
        fn = segment_reference(block.segment)
    else:
        source, locs = block_source(block, g)
        line_map = {line: site(loc) for line, loc in locs.items()}
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = dict(g.values)
        exec(compile(source, filename, "exec"), namespace)
        fn = namespace[f"block_{block.id}"]
    return BlockCode(block.id, block.name, site(block.loc), params, tuple(p.slot for p in block.shared_params),
                     tuple(block.outputs), fn, block.sdepth is not None, block.segment, source, filename, line_map)
