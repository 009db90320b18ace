"""Generate each static block's per-instance Python function and its batched form (§5).

A block's per-instance function is its tensor statements, printed back as
Python over the block parameters. Its batched form is
``torch.func.vmap`` over the batched parameters with the shared ones
unbatched (``in_dims=None``, parameter reuse §5.1): PyTorch's batching
rules, not acrobat's, define what a batched operator is.
"""

from __future__ import annotations

import linecache
from typing import Callable

from acrobat.analysis.lowered import Block
from acrobat.codegen.printer import Globals, expr_source, target_source
from acrobat.frontend import ir


def block_source(block: Block, g: Globals) -> tuple[str, dict[int, ir.Loc]]:
    """The per-instance function of ``block`` and its generated-line -> model-line map."""
    args = ", ".join(p.name for p in block.batched_params + block.shared_params)
    lines = [f"def block_{block.id}({args}):"]
    line_map: dict[int, ir.Loc] = {}
    for s in block.stmts:
        lines.append(f"    {target_source(s.target)} = {expr_source(s.value, g, lambda e: block.subst.get(e.nid))}")
        line_map[len(lines)] = s.loc
    outs = "".join(f"{n}, " for n in block.outputs)
    lines.append(f"    return ({outs})")
    return "\n".join(lines) + "\n", line_map


def compile_block(block: Block, g: Globals) -> Callable:
    """Compile ``block``'s per-instance function; fills ``block.source`` and ``block.line_map``."""
    block.source, block.line_map = block_source(block, g)
    filename = f"<acrobat block {block.id} {block.name}>"
    linecache.cache[filename] = (len(block.source), None, block.source.splitlines(True), filename)
    namespace = dict(g.values)
    exec(compile(block.source, filename, "exec"), namespace)
    return namespace[f"block_{block.id}"]


def block_filename(block: Block) -> str:
    """The pseudo file name of a block's generated code (in tracebacks and ``linecache``)."""
    return f"<acrobat block {block.id} {block.name}>"
