"""The shared-value prologue as generated Python (§5.1, parameter reuse).

``write_prologue`` writes ``_prologue(_A) -> list``, which fills every shared slot
(``acrobat.analysis.shared``) once per run from the entry's shared arguments ``_A``: paths into them,
operators over shared values, horizontally fused weights (App. B.1) and the batchable forms of called
modules. Blocks then receive the slots unbatched and the skeleton reads them as ``_S[k]``.
"""

from __future__ import annotations

from acrobat.analysis.fusion import fuse_weights
from acrobat.analysis.kinds import UNRESOLVED, Resolver, SharedK, describe_ref
from acrobat.analysis.shared import SharedSlots, SlotDef
from acrobat.codegen.modules import call_form
from acrobat.codegen.printer import Globals, expr_source
from acrobat.frontend import ir


def write_prologue(slots: SharedSlots, g: Globals) -> tuple[str, dict[int, int]]:
    """Source of ``_prologue(_A) -> list``: computes every shared slot once per run;
    and its map from generated line numbers to the slot each line computes.

    A module called in a block becomes its batchable form here, where the
    parameters' values are known (``acrobat.codegen.modules.call_form``);
    it raises ``CompileError`` for a module with no batchable form.
    """
    lines: list[str] = []
    line_slots: dict[int, int] = {}
    HEAD_LINES = 3  # def, comment, _S = [...]
    done: set[int] = set()

    def emit(i: int) -> None:
        if i in done:
            return
        d = slots.defs[i]
        deps: list[int] = []
        if d.parts:
            for j in d.parts:
                emit(j)
            code = f"{g.alias(fuse_weights, 'fuse_weights')}([{', '.join(f'_S[{j}]' for j in d.parts)}])"
        elif d.ref[0] == "call":
            emit(d.parent)
            path, loc = _call_site(d, g)
            code = (f"{g.alias(call_form, 'call_form')}(_S[{d.parent}], {d.method!r}, {path!r}, {loc.file!r}, "
                    f"{loc.line}, {loc.col}{', rowwise=True' if d.rowwise else ''})")
        elif d.parent is not None:
            emit(d.parent)
            step = f".{d.step[1]}" if d.step[0] == "." else f"[{d.step[1]!r}]"  # type: ignore[index]
            code = f"_S[{d.parent}]{step}"
        elif d.ref[0] == "arg":
            code = f"_A[{d.ref[1]}]"
        else:
            spec = d.spec

            def sub(e: ir.Expr) -> str | None:
                k = spec.kinds.get(e.nid)  # type: ignore[union-attr]
                if e is not d.expr and isinstance(k, SharedK):
                    j = slots.slot(k.ref, spec)
                    deps.append(j)
                    return f"_S[{j}]"
                return None

            code = expr_source(d.expr, g, sub)  # type: ignore[arg-type]
            for j in deps:
                emit(j)
        done.add(i)
        lines.append(f"    _S[{i}] = {code}  # {describe_ref(d.ref)}")
        line_slots[HEAD_LINES + len(lines)] = i

    i = 0
    while i < len(slots.defs):  # emitting a slot may add slots (operands of shared expressions)
        emit(i)
        i += 1
    head = ["def _prologue(_A):", "    # shared values (weights, ops over weights): computed once per run, passed unbatched",
            f"    _S = [None] * {len(slots.defs)}"]
    return "\n".join(head + lines + ["    return _S", ""]), line_slots


def check_call_forms(slots: SharedSlots, resolve: Resolver, g: Globals) -> None:
    """Make the batchable form of every module the blocks call from the run's shared arguments (``resolve``), as
    the prologue will: a module with none (``nn.GRU``) is then found while the program compiles, and the
    program runs in the dynamic tier (README, "the dynamic tier") instead of failing in its first run.

    Raises:
        CompileError: a called module with no batchable form (``acrobat.codegen.modules.call_form``).
    """
    for d in slots.defs:
        if d.ref[0] != "call":
            continue
        receiver = resolve(d.ref[1])
        if receiver is UNRESOLVED:
            continue
        path, loc = _call_site(d, g)
        call_form(receiver, d.method, path, loc.file, loc.line, loc.col, rowwise=d.rowwise)


def _call_site(d: SlotDef, g: Globals) -> tuple[str, ir.Loc]:
    """How the model writes the callee of a ``("call", ...)`` slot (``p.cell``), and where it calls it."""
    path = expr_source(d.expr, g, lambda e: None) if d.expr is not None else describe_ref(d.ref[1])
    return path, d.loc or ir.Loc("<unknown>", 0)
