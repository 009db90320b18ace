"""AOT code generation: the control-flow skeleton as generated Python (§4.1, App. C.2).

Each lowered specialization becomes one Python function
``name(_rt, _d, *params) -> (result, _d)`` that runs the model's host
control flow for one instance, adds a DFG node per block invocation
(one native call, ``Runtime.dfg.node``) and computes depths inline with the counter ``_d``
(Listing 2 of the paper): no interpreter walks the IR at run time. ``SkeletonWriter`` is the printing
reading of the lowered IR (``acrobat.codegen.visitor``); the interpreter of ``acrobat.bench`` (Table 3)
is the evaluating one, with the same decisions.
``result_layout`` tells the runtime where the entry's result holds handles.
"""

from __future__ import annotations

import builtins
from typing import Any, Mapping

from acrobat.analysis.kinds import (BOTTOM, DictK, HostOrK, Kind, LeadK, ListK, MapK, OptionalK, RaggedK, Spec,
                                   TensorK, TupleK)
from acrobat.analysis.lowered import Block, LoweredFunction, ProgramCall
from acrobat.analysis.shared import SharedSlots
from acrobat.codegen.printer import INPLACE, Globals, expr_source, target_source
from acrobat.codegen.visitor import (CallMode, CallPlan, Coercion, Concat, Each, Fields, LiftedList, Lift,
                                     LoweredVisitor, OrNone, Positions, Prefetch, ScalarRead, SharedRead, Tag,
                                     ValueRead, ends_in_return, node_args, output_offsets, snapshot_hosts)
from acrobat.frontend import ir
from acrobat.runtime.plan import (DictLayout, HostLayout, HostOrLayout, Layout, ListLayout, MapLayout,
                                  OptionalLayout, RaggedLayout, TensorLayout, TupleLayout)


def coerce_source(code: str, c: Coercion | None) -> str:
    """Code applying coercion ``c`` (``acrobat.codegen.visitor.coercion``) to the value of ``code``."""
    match c:
        case None:
            return code
        case Lift():
            return f"_rt.lift({code})"
        case Tag():
            return f"_rt.host_result({code})"
        case OrNone(inner=inner):
            return f"(lambda _v: None if _v is None else {coerce_source('_v', inner)})({code})"
        case Fields(keys=keys, parts=parts, is_dict=True):
            items = ", ".join(f"{k!r}: {coerce_source(f'_v[{k!r}]', p)}" for k, p in zip(keys, parts))
            return f"(lambda _v: {{{items}}})({code})"
        case Fields(keys=keys, parts=parts):
            items = "".join(coerce_source(f"_v[{k}]", p) + ", " for k, p in zip(keys, parts))
            return f"(lambda _v: _rt.retuple(_v, ({items})))({code})"  # a namedtuple keeps its class
        case Each(inner=inner):
            return f"[{coerce_source('_x', inner)} for _x in {code}]"
        case Positions(parts=parts):
            return "[" + ", ".join(coerce_source(f"{code}[{j}]", p) for j, p in enumerate(parts)) + "]"
    raise TypeError(f"unknown coercion {c!r}")


def join_depths(n: int, g: Globals) -> str:
    """The statement setting ``_d`` to the deepest of ``_d0 .. _d{n-1}`` (two: a conditional, cheaper than ``max``)."""
    if n == 2:
        return "_d = _d0 if _d0 > _d1 else _d1"
    return f"_d = {builtin(g, 'max')}({', '.join(f'_d{i}' for i in range(n))})"


def builtin(g: Globals, name: str) -> str:
    """The global alias of Python builtin ``name`` in generated code (a model variable may shadow the builtin)."""
    return g.alias(getattr(builtins, name), name)


class SkeletonWriter(LoweredVisitor[int]):
    """Writes the skeleton functions of all specializations into one module: the printing reading of the
    lowered IR (``LoweredVisitor``, whose decisions it prints); its context is the indentation depth."""

    def __init__(self, g: Globals, specs: dict, entry: LoweredFunction, slots: SharedSlots, names: dict[object, str],
                 base: int, options: object, effects: set, fields: Mapping[str, Kind]) -> None:
        super().__init__(specs, entry, slots, base, options, effects, fields)
        self.g = g
        self.names = names  # spec key -> generated function name
        self.padded: dict[object, int] = {}  # spec key -> block id, of the padded functions (acrobat.analysis.padded)
        self.lines: list[str] = []
        self.line_map: dict[int, tuple[ir.Loc, str]] = {}  # generated line -> (model location, source text)
        self.loc: tuple[ir.Loc, str] | None = None
        self.fn: LoweredFunction
        self.spec: Spec
        self.prefetched: dict[int, tuple[int, str]] = {}  # block id -> (its loop's nid, loop variable): see prefetch

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)
        if self.loc is not None:
            self.line_map[len(self.lines)] = self.loc

    def subst(self, e: ir.Expr) -> str | None:
        """The code of ``e`` where it is not printed as written (``LoweredVisitor.special``), else None."""
        match self.special(self.spec, e):
            case None:
                return None
            case SharedRead(slot=slot):
                return f"_S[{slot}]"
            case Concat(left=a, right=b, left_c=ca, right_c=cb, inplace=inplace):
                right = coerce_source(self.expr(b), cb)
                if inplace:  # `xs += ys` extends xs itself, as in Python
                    return f"{self.g.alias(INPLACE['+'], 'iadd')}({self.expr(a)}, {right})"
                return f"({coerce_source(self.expr(a), ca)} + {right})"
            case LiftedList(items=items, parts=parts):
                return "[" + ", ".join(coerce_source(self.expr(x), c) for x, c in zip(items, parts)) + "]"
            case ValueRead():  # host code reads this tensor's value: wait for it (§4.2)
                return f"_rt.value({self.unread(e)})"
            case ScalarRead(operand=x, convert=None):  # `x.item()`: a number, not a tensor
                return f"_rt.item({self.unread(x)})"
            case ScalarRead(operand=x, convert=convert):  # `int(x)`
                return f"{convert}(_rt.item({self.unread(x)}))"
        raise TypeError(f"unknown special expression at {e.loc}")

    def unread(self, e: ir.Expr) -> str:
        """Code of ``e`` itself (its handle), where ``subst`` would wrap it in a value read."""
        return expr_source(e, self.g, lambda x: None if x is e else self.subst(x))

    def expr(self, e: ir.Expr) -> str:
        return expr_source(e, self.g, self.subst)

    def function_of(self, at: int) -> LoweredFunction:
        return self.fn

    def function(self, fn: LoweredFunction, entry: bool) -> None:
        self.fn, self.spec = fn, fn.spec
        name = self.names[fn.spec.key]
        self.emit(0, f"def {name}(_rt, _d, {''.join(p + ', ' for p in fn.spec.fn.params)}):")
        region = fn.spec.fn.region
        if fn.spec.key in self.padded:  # one node per instance, the launch the user's function on padded values
            self.emit(1, f"# {fn.spec.fn.name} runs as a padded function (acrobat.analysis.padded): "
                         f"{region.describe()}")
            self.emit(1, f"return _rt.padded(_B[{self.padded[fn.spec.key]}], _d, "
                         f"({''.join(p + ', ' for p in fn.spec.fn.params)}))")
            self.emit(0, "")
            return
        if region is not None:  # the user's own Python on the instance's fiber (acrobat.analysis.regions)
            layouts = region_layouts(fn.spec)
            self.emit(1, f"# {fn.spec.fn.name} runs as a dynamic region: {region.describe()}")
            self.emit(1, f"return _rt.region({self.g.alias(region, 'region')}, {self.g.alias(layouts, 'layouts')}, "
                         f"_d, ({''.join(p + ', ' for p in fn.spec.fn.params)}))")
            self.emit(0, "")
            return
        self.emit(1, f"# {fn.spec.fn.name} specialized for ({', '.join(str(k) for k in fn.spec.key[1])})")
        self.emit(1, "_S = _rt.slots  # shared values of this run")
        for param, c in self.entry_coercions(fn):
            self.emit(1, f"{param} = {coerce_source(param, c)}  # the variable's kind in the body")
        if entry:
            self.emit(1, "_rt.enter_phase(0)")
        self.body(fn.body, 1)
        if not ends_in_return(fn.body):
            self.emit(1, "return None, _d")
        self.emit(0, "")

    def body(self, stmts: list[ir.Stmt], depth: int, trailer: str | None = None) -> None:
        """Emit a statement list (``pass`` if it is empty), then ``trailer`` if given."""
        start = len(self.lines)
        for s in stmts:
            self.stmt(s, depth)
        if trailer is not None:
            self.emit(depth, trailer)
        if len(self.lines) == start:
            self.emit(depth, "pass")

    def stmt(self, s: ir.Stmt, at: int) -> None:
        self.loc = (s.loc, self.spec.fn.source_lines.get(s.loc.line, "").strip())
        super().stmt(s, at)

    def segment_call(self, b: Block, at: int) -> None:
        rows = "".join(f", {self.expr(p.expr)}" for p in b.batched_params)  # type: ignore[arg-type]
        self.emit(at, f"{b.stmts[0].target.name} = _rt.segment(_B[{b.id}], _d{rows})"
                      f"  # DFG node of {b.segment.op} over a list (inline depth)")  # type: ignore[union-attr]
        self.emit(at, "_d += 1")

    def block_call(self, b: Block, at: int) -> None:
        """A DFG node of block ``b``: one native call (``Runtime.dfg.node``, §4.1), then its output handles."""
        where = f"static depth {b.sdepth}" if b.sdepth is not None else "inline depth"
        call = self.node_call(b)
        if b.id in self.prefetched:  # added ahead of its loop: take it if the item is the one it was added for
            loop, var = self.prefetched.pop(b.id)
            i, items = f"_i{loop}", f"_items{loop}"
            self.emit(at, f"_h = _pf{loop}b{b.id}[{i}] if {i} < {builtin(self.g, 'len')}({items}) "
                          f"and {var} is {items}[{i}] "
                          f"else {call}  # DFG node of block {b.name} ({where}), added before the loop")
        else:
            self.emit(at, f"{'_h = ' if b.outputs else ''}{call}  # DFG node of block {b.name} ({where})")
        if b.outputs:
            handles = ", ".join(f"_h + {k}" if k else "_h" for k in output_offsets(b))
            self.emit(at, f"{''.join(o + ', ' for o in b.outputs)} = {handles},  # its outputs' handles")
        if b.sdepth is None:
            self.emit(at, "_d += 1")

    def node_call(self, b: Block) -> str:
        """The native call that adds a DFG node of block ``b`` for the running instance (its output-0 handle)."""
        tensor_args, host_args = node_args(b)
        tensors = "".join(self.expr(x) + ", " for x in tensor_args)
        hosts = "".join((f"_rt.snapshot({self.expr(x)})" if snap else self.expr(x)) + ", "
                        for x, snap in zip(host_args, snapshot_hosts(host_args)))
        at = str(b.sdepth) if b.sdepth is not None else "_d"
        return f"_rt.dfg.node_hosts({at}, {b.id}, ({hosts}), {tensors})" if hosts else f"_rt.dfg.node({at}, {b.id}, {tensors})"

    def assign(self, t: ir.Target, v: ir.Expr, c: Coercion | None, at: int) -> None:
        self.emit(at, f"{target_source(t)} = {coerce_source(self.expr(v), c)}")

    def starred_assign(self, t: ir.Target, v: ir.Expr, after: list[tuple[str, Coercion]], at: int) -> None:
        self.emit(at, f"{target_source(t)} = {self.expr(v)}")
        for name, c in after:
            self.emit(at, f"{name} = {coerce_source(name, c)}")

    def field_load(self, t: ir.Target, obj: ir.Expr, attr: str, at: int) -> None:
        self.emit(at, f"{target_source(t)}, _d = _rt.load({self.expr(obj)}, {attr!r}, _d)  # a field's handles, and "
                      "the depth they were stored at")

    def field_store(self, obj: ir.Expr, attr: str, x: ir.Expr, c: Coercion | None, at: int) -> None:
        self.emit(at, f"_rt.store({self.expr(obj)}, {attr!r}, {coerce_source(self.expr(x), c)}, _d)  # a field of the "
                      "instance's object, ready at depth _d")

    def list_put(self, v: ir.Call, lst: str, c: Coercion | None, at: int) -> None:
        value = coerce_source(self.expr(v.args[-1]), c)
        lead = "".join(self.expr(a) + ", " for a in v.args[:-1])
        if v.target == "__setitem__":
            self.emit(at, f"{lst}[{self.expr(v.args[0])}] = {value}")
        else:
            self.emit(at, f"{lst}.{v.target}({lead}{value})")

    def expr_stmt(self, v: ir.Expr, at: int) -> None:
        self.emit(at, self.expr(v))

    def return_(self, v: ir.Expr | None, c: Coercion | None, at: int) -> None:
        self.emit(at, f"return {'None' if v is None else coerce_source(self.expr(v), c)}, _d")

    def if_(self, s: ir.If, padding: tuple[int, int], at: int) -> None:
        pad_b, pad_o = padding
        self.emit(at, f"if {self.expr(s.test)}:")
        self.body(s.body, at + 1, f"_d += {pad_b}  # {pad_b} ghost operator(s): line up with the else branch"
                  if pad_b else None)
        if s.orelse or pad_o:
            self.emit(at, "else:")
            self.body(s.orelse, at + 1, f"_d += {pad_o}  # {pad_o} ghost operator(s): line up with the if branch"
                      if pad_o else None)

    def while_(self, s: ir.While, at: int) -> None:
        self.emit(at, f"while {self.expr(s.test)}:")
        self.body(s.body, at + 1)

    def break_(self, at: int) -> None:
        self.emit(at, "break")

    def continue_(self, at: int) -> None:
        self.emit(at, "continue")

    def pass_(self, at: int) -> None:
        self.emit(at, "pass")

    def phase(self, number: int, at: int) -> None:
        self.emit(at, f"_rt.enter_phase({number})  # program phase boundary")
        self.emit(at, f"_d = {self.base}")

    def stage(self, index: int, stages: int, at: int) -> None:
        self.emit(at, f"_d = _rt.enter_stage({index}, {stages}, _d)  # staged loop: stage {index} of {stages} of the "
                      f"iteration, a phase of its own")

    def for_(self, s: ir.For, is_map: bool, prefetch: Prefetch | None, c: Coercion | None, at: int) -> None:
        source = coerce_source(self.expr(s.iter), c)
        header = f"for {target_source(s.target)} in {source}:"
        if prefetch is not None:
            header = self.prefetch_nodes(s, source, prefetch, at)
        if not is_map:
            self.emit(at, header)
            self.body(s.body, at + 1)
            return
        fork, joined = f"_fork{s.nid}", f"_join{s.nid}"
        self.emit(at, f"{fork} = {joined} = _d  # map loop: every iteration starts at the same depth")
        self.emit(at, header)
        self.emit(at + 1, f"_d = {fork}")
        self.body(s.body, at + 1)
        self.emit(at + 1, f"{joined} = {builtin(self.g, 'max')}({joined}, _d)")
        self.emit(at, f"_d = {joined}")

    def prefetch_nodes(self, s: ir.For, source: str, pf: Prefetch, at: int) -> str:
        """Add the nodes of ``pf.blocks`` for every item of a list or tuple iterable (code ``source``) before the
        loop (§4.2, App. A.1); the loop header that numbers the iterations. In the loop each call takes its
        node from there when the item is the one it was added for (a list changed by the loop body falls back
        to adding the node in place)."""
        src, items, i = f"_src{s.nid}", f"_items{s.nid}", f"_i{s.nid}"
        self.emit(at, f"{src} = {source}")
        tup, typ, lst = (builtin(self.g, n) for n in ("tuple", "type", "list"))
        self.emit(at, f"{items} = {tup}({src}) if {typ}({src}) in ({lst}, {tup}) else ()  "
                      f"# hoisted nodes of every iteration, added ahead (one launch for all fibers)")
        for blk in pf.blocks:
            self.emit(at, f"_pf{s.nid}b{blk.id} = [{self.node_call(blk)} for {pf.var} in {items}]")
        self.prefetched.update({blk.id: (s.nid, pf.var) for blk in pf.blocks})
        return f"for {i}, {pf.var} in {builtin(self.g, 'enumerate')}({src}):"

    def program_call(self, s: ProgramCall, plan: CallPlan, at: int) -> None:
        n = len(plan.calls)
        results = [f"_r{i}" for i in range(n)]
        if plan.mode is CallMode.FIBERS:  # fork-join over child fibers (§4.2)
            self.emit(at, "_dfork = _d  # concurrent calls start at the same depth, each on its own fiber")
            thunks = [f"lambda: {self.names[key]}(_rt, _dfork, {self.call_args(args)})" for key, args in plan.calls]
            self.emit(at, f"_res = _rt.fork(({''.join(t + ', ' for t in thunks)}))")
            for i in range(n):
                self.emit(at, f"_r{i}, _d{i} = _res[{i}]")
        else:
            forked = plan.mode is CallMode.FORKED
            for i, (key, args) in enumerate(plan.calls):
                arg_src = self.call_args(args)
                if forked and i == 0:
                    self.emit(at, "_dfork = _d  # concurrent calls start at the same depth")
                self.emit(at, f"_r{i}, _d{i} = {self.names[key]}(_rt, {'_dfork' if forked else '_d'}, {arg_src})")
                if not forked:
                    self.emit(at, f"_d = _d{i}")
        if plan.mode is not CallMode.SEQUENTIAL:
            self.emit(at, join_depths(n, self.g))
        value = "(" + "".join(r + ", " for r in results) + ")" if plan.tupled else results[0]
        self.emit(at, f"{target_source(s.target)} = {coerce_source(value, plan.result)}")

    def call_args(self, args: tuple[tuple[ir.Expr, Coercion | None], ...]) -> str:
        """Argument code of a program call, each coerced to the kind the callee is specialized on."""
        return "".join(coerce_source(self.expr(a), c) + ", " for a, c in args)


def write_skeleton(functions: list[LoweredFunction], entry_key: object, g: Globals, slots: SharedSlots,
                   specs: dict, base: int, options, effects: set,
                   fields: Mapping[str, Kind], padded: Mapping[Any, int] | None = None,
                   ) -> tuple[str, dict[int, tuple[ir.Loc, str]], str]:
    """The Python source of the whole skeleton module (function names made from the spec names by ``g``),
    its map from generated lines to model source lines (for error messages), and the entry's function name.

    ``options`` (``acrobat.Options``): ``concurrency``, ``ghosts``, and
    ``fibers`` (run concurrent calls on child fibers; set only for programs
    with tensor-dependent control flow). ``effects``: the spec keys whose
    calls change host state that outlives them; concurrent calls of those
    run one after the other even on fibers, so host effects keep Python's order (§4.2). ``fields``: the kind
    of each attribute the program stores on the instance's objects; a field holding tensors is stored and
    loaded through the runtime (``Runtime.store``/``load``), with its depth.
    """
    names = {key: g.fresh(spec.name) for key, spec in specs.items()}
    entry = next(fn for fn in functions if fn.spec.key == entry_key)
    w = SkeletonWriter(g, specs, entry, slots, names, base, options, effects, fields)
    w.padded = dict(padded or {})
    w.emit(0, f"# generated by acrobat: control-flow skeleton with inline depth computation (base depth {base})")
    for fn in functions:
        w.function(fn, entry=fn is entry)
    return "\n".join(w.lines) + "\n", w.line_map, names[entry_key]


def region_layouts(spec: Spec) -> tuple[Layout, ...]:
    """The layouts of the arguments of ``spec``, a dynamic region's specialization (``Runtime.region`` turns their
    handles into lazy values by them)."""
    return tuple(result_layout(k) for k in spec.key[1])


def result_layout(kind: Kind) -> Layout:
    """The runtime's layout of a value of ``kind`` (``acrobat.runtime.plan``): where its handles lie, which
    the runtime replaces by tensors in the entry's result."""
    match kind:
        case TensorK():
            return TensorLayout()
        case RaggedK():
            return RaggedLayout(result_layout(kind.rows))
        case LeadK():
            return RaggedLayout(TensorLayout(), lead=True)
        case OptionalK(inner=inner):
            return OptionalLayout(result_layout(inner))
        case HostOrK(inner=inner):
            return HostOrLayout(result_layout(inner))
        case DictK(keys=keys, items=items):
            return DictLayout(keys, tuple(result_layout(k) for k in items))
        case TupleK(items=items):
            return TupleLayout(tuple(result_layout(k) for k in items))
        case ListK(elem=elem):
            return ListLayout(result_layout(elem), followed=elem is not BOTTOM)
        case MapK(value=value):
            return MapLayout(result_layout(value), followed=value is not BOTTOM)
    return HostLayout()
