"""The compile pipeline (paper Fig. 3): an ordered list of named passes, a check between passes, debug dumps.

``PASSES`` is the compile of one program for one set of options, in order. Each pass is a small function
from the ``State`` so far (the ``Request`` and the results of the passes before it) to its own result:

============  ==========================================================================  ==================
pass          result                                                                      paper
============  ==========================================================================  ==================
parse         the entry and every program function it reaches, as IR (``frontend``)       §3
kinds         kinds and specializations: host, per-instance tensor, shared; value reads   §4.2, §5.1
lists         none: rejects a list changed where the batched code cannot follow it        §3 (host code)
effects       the specializations whose calls change host state that outlives them        §4.2
blocks        each specialization lowered: static blocks, hoisting, fusion, shared slots  §4, App. A, B.1
concurrency   the map loops (``for`` loops with independent iterations) of each function  §4.1
phases        the lowered program, with program phases and staged loops in the entry      §4.1
kernels       each static block's per-instance function and batched form                  §5
skeleton      the control-flow skeleton with inline depth computation                     §4.1, App. C.2
prologue      the shared-value prologue: weights and ops over them, once per run          §5.1
============  ==========================================================================  ==================

(§ numbers are the paper's, as ``shared/DESIGN.md`` maps them to the packages.) ``acrobat.program``'s
``_compile`` runs the list, then loads the generated code into a ``Plan`` for the runtime.

**Frozen results.** A pass sees the earlier results through a read-only ``State`` and returns a new
result: frozen dataclasses, tuples, frozensets, read-only mappings. The IR inside them (``ir`` and
``analysis.lowered`` nodes, ``Spec``) is made of plain dataclasses, which no later pass changes:
``blocks`` lowers a deep copy of each parsed body (``copy.deepcopy``, the IR is rewritten in place) into
a copy of each specialization (lowering adds the kinds of its temporaries); ``phases`` rewrites a copy of
the entry body's statement lists (``ir.copy_lists``: statements shared, lists copied); and the two tables
the code-writing passes add to, the shared slots (``SharedSlots``) and the generated code's globals
(``Globals``), are extended on copies (``extended()``), so every pass's result keeps what it held.

**Checks.** After each pass, ``acrobat.analysis.invariants`` checks the result just made (node ids
unique, every specialization lowered, every block invocation's block defined, map loops and phase
marks where they belong, every block with its code). Each check walks its result once, a few ms at
most, so it runs on every compile. A broken invariant is acrobat's own bug: ``InternalError`` naming the
pass, which ``Program.compile`` treats as the compiler's failure (the dynamic tier runs the program,
or with ``Options(strict=True)`` the error is raised).

**Debugging.** ``ACROBAT_DEBUG=1`` (or ``all``) prints to stderr, after each pass, its name, its time in
ms and a readable dump of its result (the IR as Python-like text, lowered bodies with each static block
marked and its statements under it, generated code as written); ``ACROBAT_DEBUG=kinds,blocks`` (a comma
list of pass names) only those passes. The variable is read at each compile (compiles are cached per
program and options: a program compiled before is not compiled, nor printed, again).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from acrobat.analysis import invariants
from acrobat.analysis.aliases import check_lists, escaping_effects
from acrobat.analysis.blocks import lower_function
from acrobat.analysis.depth import base_depth, parallel_loops
from acrobat.analysis.kinds import KindTable, Resolver, Spec, SpecKey, analyze_kinds
from acrobat.analysis.lowered import Block, BlockCall, LoweredFunction
from acrobat.analysis.padded import padded_code, padded_op
from acrobat.analysis.phases import insert_phases
from acrobat.analysis.regions import Region
from acrobat.analysis.shared import SharedSlots
from acrobat.codegen.aot import write_skeleton
from acrobat.codegen.blocks import block_code
from acrobat.codegen.printer import Globals, body_lines, block_header
from acrobat.codegen.prologue import check_call_forms, write_prologue
from acrobat.errors import InternalError
from acrobat.frontend import ir
from acrobat.runtime.plan import BlockCode

if TYPE_CHECKING:
    from acrobat.program import Options, Program

DEBUG_ENV = "ACROBAT_DEBUG"


@dataclass(frozen=True)
class Request:
    """What to compile: ``program`` for ``n_shared`` shared arguments under ``options``; ``resolve`` reads the
    run's shared arguments (None: compiled without them, every path a shared value); the functions of
    ``regions`` run as dynamic regions (``acrobat.analysis.regions``), not analysed."""

    program: Program
    n_shared: int
    options: Options
    resolve: Resolver | None = None
    regions: Mapping[Any, Region] = dataclasses.field(default_factory=lambda: MappingProxyType({}))  # fn -> region


@dataclass(frozen=True)
class Lowering:
    """Result of ``blocks``: each specialization (a copy of the kind table's, with its temporaries' kinds), its
    lowered body (host statements, ``BlockCall``s, ``ProgramCall``s), and the shared slots found."""

    specs: Mapping[SpecKey, Spec]
    bodies: Mapping[SpecKey, list[ir.Stmt]]
    slots: SharedSlots


@dataclass(frozen=True)
class Kernels:
    """Result of ``kernels``: every static block by id, its code, and the globals its code uses."""

    blocks: Mapping[int, Block]
    codes: Mapping[int, BlockCode]
    globals: Globals
    padded: Mapping[SpecKey, int] = dataclasses.field(default_factory=lambda: MappingProxyType({}))  # the padded functions' block ids (acrobat.analysis.padded)


@dataclass(frozen=True)
class Skeleton:
    """Result of ``skeleton``: its source, generated line -> (model location, source text), the entry's
    function name, the options it was written with (fibers off where no tensor value is read), whether
    host code reads tensor values (fibers, §4.2), the base depth of the inline counter (App. A.1), and
    the globals and shared slots with what it added."""

    source: str
    line_map: Mapping[int, tuple[ir.Loc, str]]
    entry_name: str
    options: Options
    needs_fibers: bool
    base: int
    globals: Globals
    slots: SharedSlots


@dataclass(frozen=True)
class Prologue:
    """Result of ``prologue``: its source, generated line -> the slot it computes, and the final globals and
    shared slots of the program (the prologue may add operands of shared expressions)."""

    source: str
    line_slots: Mapping[int, int]
    globals: Globals
    slots: SharedSlots


@dataclass(frozen=True)
class State:
    """The compile so far: the request and each finished pass's result by pass name (read-only).

    The properties read one pass's result, typed. Raises ``InternalError`` when that pass has not run (a
    pass listed before one it reads).
    """

    request: Request
    results: Mapping[str, object]

    def result(self, name: str) -> Any:
        """The result of pass ``name``.

        Raises:
            InternalError: pass ``name`` has not run yet.
        """
        if name not in self.results:
            raise InternalError(f"acrobat's compile pipeline reads the result of pass `{name}` before it ran "
                                f"(passes run so far: {', '.join(self.results) or 'none'})")
        return self.results[name]

    @property
    def functions(self) -> Mapping[Any, ir.Function]:
        return self.result("parse")

    @property
    def table(self) -> KindTable:
        return self.result("kinds")

    @property
    def effects(self) -> frozenset[SpecKey]:
        return self.result("effects")

    @property
    def lowering(self) -> Lowering:
        return self.result("blocks")

    @property
    def maps(self) -> Mapping[SpecKey, frozenset[int]]:
        return self.result("concurrency")

    @property
    def lowered(self) -> tuple[LoweredFunction, ...]:
        return self.result("phases")

    @property
    def kernels(self) -> Kernels:
        return self.result("kernels")

    @property
    def skeleton(self) -> Skeleton:
        return self.result("skeleton")

    @property
    def prologue(self) -> Prologue:
        return self.result("prologue")


# ------------------------------------------------------------------ the passes


def parse(s: State) -> Mapping[Any, ir.Function]:
    """The entry and every program function reachable from it, as IR (§3), by function object."""
    return MappingProxyType(s.request.program.functions(regions=s.request.regions))


def kinds(s: State) -> KindTable:
    """The kind analysis from the entry (§4.2, §5.1): every specialization and its kinds."""
    r = s.request
    return analyze_kinds(dict(s.functions), r.program, r.n_shared, instance=r.program.instance_pos,
                         resolve=r.resolve, parse=functools.partial(r.program.functions, regions=r.regions),
                         implicit=r.program.implicit)


def lists(s: State) -> None:
    """Reject a list changed in place where the analysis does not follow it (``CompileError``)."""
    check_lists(s.table.specs)


def effects(s: State) -> frozenset[SpecKey]:
    """The specializations whose calls change host state that outlives them (their concurrent calls run
    one after the other, §4.2)."""
    return frozenset(escaping_effects(s.table.specs))


def blocks(s: State) -> Lowering:
    """Lower every specialization: static blocks (App. A.2), hoisting (App. A.1), horizontal fusion (App. B.1),
    shared slots (§5.1); block ids count up across the program in the kind table's order."""
    specs = {key: _lowering_copy(spec) for key, spec in s.table.specs.items()}
    slots = SharedSlots(owners={spec.name: spec for spec in specs.values()})
    block_ids = itertools.count()
    bodies = {key: lower_function(spec, copy.deepcopy(spec.fn.body), slots, block_ids, s.request.options,
                                  set(s.effects))
              for key, spec in specs.items()}
    return Lowering(MappingProxyType(specs), MappingProxyType(bodies), slots)


def _lowering_copy(spec: Spec) -> Spec:
    """A copy of ``spec`` with its own tables (every dict and set field) for lowering to add to: the facts of
    the temporaries it introduces and of the statements it copies (``kinds``, ``var``, ``calls``, ``ragged``,
    ``ops``, ``reads``, ...), leaving the kind table's specialization as the analysis left it."""
    tables = {f.name: copy.copy(v) for f in dataclasses.fields(spec)
              if isinstance(v := getattr(spec, f.name), (dict, set))}
    return dataclasses.replace(spec, **tables)


def concurrency(s: State) -> Mapping[SpecKey, frozenset[int]]:
    """Each specialization's map loops (§4.1); none with ``Options(concurrency=False)``."""
    low = s.lowering
    on = s.request.options.concurrency
    return MappingProxyType({key: frozenset(parallel_loops(spec, low.bodies[key]) if on else ())
                             for key, spec in low.specs.items()})


def phases(s: State) -> tuple[LoweredFunction, ...]:
    """The lowered program, the entry with phase boundaries and staged loops (§4.1) in a copy of its body."""
    low, entry = s.lowering, s.table.entry
    maps = frozenset().union(*s.maps.values())
    o = s.request.options
    bodies = dict(low.bodies)
    bodies[entry] = insert_phases(ir.copy_lists(low.bodies[entry]), low.specs[entry], low.bodies, maps,
                                  o.phases, o.stages)
    return tuple(LoweredFunction(spec, bodies[key], set(s.maps[key])) for key, spec in low.specs.items())


def kernels(s: State) -> Kernels:
    """Each static block's code (§5), by block id, in the order the program invokes them."""
    found = {st.block.id: st.block for f in s.lowered for st in ir.walk_stmts(f.body) if isinstance(st, BlockCall)}
    g = Globals()
    codes = {bid: block_code(b, g) for bid, b in found.items()}
    ids: dict[SpecKey, int] = {}
    for key, spec in s.lowering.specs.items():  # a padded function's block: after the static ones
        op = padded_op(spec)
        if op is not None:
            ids[key] = bid = max(codes, default=-1) + 1
            codes[bid] = padded_code(op, bid)
    return Kernels(MappingProxyType(found), MappingProxyType(codes), g, MappingProxyType(ids))


def skeleton(s: State) -> Skeleton:
    """The control-flow skeleton (§4.1, App. C.2); fibers (§4.2) only where host code reads tensor values."""
    lowered, table = s.lowered, s.table
    specs = s.lowering.specs
    g, slots = s.kernels.globals.extended(), s.lowering.slots.extended()
    base = base_depth([f.body for f in lowered])
    # a dynamic region waits for its tensor arguments' values (``Runtime.region``), as a value read does; a
    # padded function does not (``Runtime.padded``)
    needs_fibers = any(spec.reads or spec.fn.region is not None and key not in s.kernels.padded
                       for key, spec in specs.items())
    options = dataclasses.replace(s.request.options, fibers=s.request.options.fibers and needs_fibers)
    source, line_map, entry_name = write_skeleton(list(lowered), table.entry, g, slots, dict(specs), base,
                                                  options, set(s.effects), dict(table.fields), s.kernels.padded)
    return Skeleton(source, MappingProxyType(line_map), entry_name, options, needs_fibers, base, g, slots)


def prologue(s: State) -> Prologue:
    """The shared-value prologue (§5.1), over the slots the blocks and the skeleton use."""
    g, slots = s.skeleton.globals.extended(), s.skeleton.slots.extended()
    source, line_slots = write_prologue(slots, g)
    if s.request.resolve is not None:
        check_call_forms(slots, s.request.resolve, g)
    return Prologue(source, MappingProxyType(line_slots), g, slots)


# ------------------------------------------------------------------ checks between passes


def _check_parse(s: State) -> list[str]:
    return [p for f in s.functions.values() for p in invariants.duplicate_ids(f.name, f.body)]


def _check_blocks(s: State) -> list[str]:
    low = s.lowering
    return (invariants.unlowered(s.table.specs, s.table.entry, low.bodies)
            + [p for key, body in low.bodies.items() for p in invariants.duplicate_ids(low.specs[key].name, body)]
            + invariants.block_problems(low.bodies, len(low.slots.defs)))


def _check_concurrency(s: State) -> list[str]:
    return invariants.stray_maps(s.lowering.bodies, s.maps)


def _check_phases(s: State) -> list[str]:
    lowered = s.lowered
    return (invariants.unlowered(s.table.specs, s.table.entry, (f.spec.key for f in lowered))
            + invariants.stray_marks(lowered, s.table.entry))


def _check_kernels(s: State) -> list[str]:
    return invariants.missing_code(s.kernels.blocks, s.kernels.codes)


def _none(s: State) -> list[str]:
    return []


@dataclass(frozen=True)
class Pass:
    """One pass: its ``name`` (as ``ACROBAT_DEBUG`` takes it), what it computes from the state so far, the
    check of its result (problems as sentences), and the readable dump of its result."""

    name: str
    run: Callable[[State], object]
    check: Callable[[State], list[str]]
    show: Callable[[State], str]


# ------------------------------------------------------------------ readable dumps (ACROBAT_DEBUG)


def _show_parse(s: State) -> str:
    return "\n".join(f"def {f.name}({', '.join(f.params)}):  # {f.loc}\n" + "\n".join(body_lines(f.body, 1))
                     for f in s.functions.values())


def _show_kinds(s: State) -> str:
    out = []
    for spec in s.table.specs.values():
        args = ", ".join(f"{p}: {k}" for p, k in zip(spec.fn.params, spec.key[1]))
        out.append(f"{spec.name}({args}) -> {spec.ret}  # {len(spec.ops)} tensor operators, "
                   f"{len(spec.reads)} tensor values read by host code")
        out += [f"    {name}: {k}" for name, k in spec.var.items()]
    return "\n".join(out)


def _show_lists(s: State) -> str:
    return "ok: no list is changed in place where the analysis does not follow it"


def _show_effects(s: State) -> str:
    names = ", ".join(s.table.specs[key].name for key in s.table.specs if key in s.effects)
    return f"calls that change host state outliving them: {names or 'none'}"


def _show_blocks(s: State) -> str:
    low = s.lowering
    out = [_function_text(low.specs[key], body) for key, body in low.bodies.items()]
    return "\n".join(out + [f"# {len(low.slots.defs)} shared slots"])


def _function_text(spec: Spec, body: list[ir.Stmt]) -> str:
    """A lowered function as text: its specialization's header, then its body (``body_lines``)."""
    args = ", ".join(f"{p}: {k}" for p, k in zip(spec.fn.params, spec.key[1]))
    return f"def {spec.name}({args}):\n" + "\n".join(body_lines(body, 1) or ["    pass"])


def _show_concurrency(s: State) -> str:
    return "\n".join(f"{s.lowering.specs[key].name}: map loops {sorted(nids) or 'none'}"
                     for key, nids in s.maps.items())


def _show_phases(s: State) -> str:
    entry = next(f for f in s.lowered if f.spec.key == s.table.entry)
    n = 1 + sum(isinstance(st, ir.PhaseMark) for st in entry.body)
    return f"# the entry, {n} program phase(s)\n" + _function_text(entry.spec, entry.body)


def _show_kernels(s: State) -> str:
    k = s.kernels
    return "\n".join(f"# {block_header(b)}\n{k.codes[bid].source or '(segment operator: reference function)'}"
                     for bid, b in k.blocks.items())


def _show_skeleton(s: State) -> str:
    return s.skeleton.source


def _show_prologue(s: State) -> str:
    return s.prologue.source


PASSES: tuple[Pass, ...] = (
    Pass("parse", parse, _check_parse, _show_parse),
    Pass("kinds", kinds, _none, _show_kinds),
    Pass("lists", lists, _none, _show_lists),
    Pass("effects", effects, _none, _show_effects),
    Pass("blocks", blocks, _check_blocks, _show_blocks),
    Pass("concurrency", concurrency, _check_concurrency, _show_concurrency),
    Pass("phases", phases, _check_phases, _show_phases),
    Pass("kernels", kernels, _check_kernels, _show_kernels),
    Pass("skeleton", skeleton, _none, _show_skeleton),
    Pass("prologue", prologue, _none, _show_prologue),
)
"""The compile, in order (see the module docstring)."""


def debug_passes(value: str | None) -> frozenset[str]:
    """The passes whose results ``ACROBAT_DEBUG=value`` prints: none for unset, empty or ``0``; all for ``1`` or
    ``all``; else the comma list of pass names (a name that is no pass is reported on stderr, once per
    compile)."""
    if not value or value.strip() == "0":
        return frozenset()
    names = [n.strip() for n in value.split(",") if n.strip()]
    every = [p.name for p in PASSES]
    if names in (["1"], ["all"]):
        return frozenset(every)
    unknown = [n for n in names if n not in every]
    if unknown:
        print(f"acrobat: {DEBUG_ENV} names no pass {', '.join(unknown)} (passes: {', '.join(every)})",
              file=sys.stderr)
    return frozenset(names) - set(unknown)


def run(request: Request) -> State:
    """Run ``PASSES`` over ``request``: each pass's result, checked, and under ``ACROBAT_DEBUG`` printed.

    Raises:
        CompileError: a pass rejects the program (see each pass).
        InternalError: a pass broke an invariant of the IR (``acrobat.analysis.invariants``); names the pass.
    """
    show = debug_passes(os.environ.get(DEBUG_ENV))
    state = State(request, MappingProxyType({}))
    for i, p in enumerate(PASSES, 1):
        start = time.perf_counter()
        result = p.run(state)
        ms = (time.perf_counter() - start) * 1e3
        state = State(request, MappingProxyType({**state.results, p.name: result}))
        if p.name in show:  # before the check: the dump of an IR a pass broke is what its debugging needs
            print(f"==== acrobat pass {i}/{len(PASSES)} `{p.name}` of program `{request.program.__name__}`: "
                  f"{ms:.2f} ms\n{p.show(state)}\n", file=sys.stderr)
        problems = p.check(state)
        if problems:
            raise InternalError(f"acrobat's compiler pass `{p.name}` broke an invariant of the IR of program "
                                f"`{request.program.__name__}`:\n  " + "\n  ".join(problems)
                                + "\n  this is a bug in acrobat, please report it with the model")
    return state
