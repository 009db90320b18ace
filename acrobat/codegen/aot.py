"""AOT code generation: the control-flow skeleton as generated Python (§4.1, App. C.2).

Each lowered specialization becomes one Python function
``name(_rt, _d, *params) -> (result, _d)`` that runs the model's host
control flow for one instance, adds a DFG node per block invocation
(``_rt.invoke``) and computes depths inline with the counter ``_d``
(Listing 2 of the paper): no interpreter walks the IR at run time.
"""

from __future__ import annotations

from acrobat.analysis.kinds import HOST, Kind, ListK, SharedK, Spec, TensorK, TupleK
from acrobat.analysis.lowered import BlockCall, LoweredFunction, ProgramCall
from acrobat.analysis.shared import SharedSlots
from acrobat.codegen.printer import Globals, expr_source, target_source
from acrobat.frontend import ir


def coerce(code: str, src: Kind, dst: Kind) -> str:
    """Code turning a value of kind ``src`` into kind ``dst`` (shared -> per-instance: ``_rt.lift``)."""
    if src == dst:
        return code
    if isinstance(src, SharedK) and isinstance(dst, TensorK):
        return f"_rt.lift({code})"
    if isinstance(src, TupleK) and isinstance(dst, TupleK):
        items = [coerce(f"_v[{i}]", s, d) for i, (s, d) in enumerate(zip(src.items, dst.items))]
        if all(it == f"_v[{i}]" for i, it in enumerate(items)):
            return code
        return f"(lambda _v: ({''.join(i + ', ' for i in items)}))({code})"
    if isinstance(src, ListK) and isinstance(dst, ListK):
        inner = coerce("_x", src.elem, dst.elem)
        return code if inner == "_x" else f"[{inner} for _x in {code}]"
    return code


def target_kind(spec: Spec, t: ir.Target) -> Kind:
    if t.name is not None:
        return spec.var.get(t.name, HOST)
    return TupleK(tuple(target_kind(spec, i) for i in t.items or []))


class SkeletonWriter:
    """Writes the skeleton functions of all specializations into one module."""

    def __init__(self, g: Globals, slots: SharedSlots, specs: dict, names: dict[object, str], base: int):
        self.g = g
        self.specs = specs
        self.slots = slots
        self.names = names  # spec key -> generated function name
        self.base = base
        self.lines: list[str] = []
        self.spec: Spec

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def subst(self, e: ir.Expr) -> str | None:
        k = self.spec.kinds.get(e.nid)
        if isinstance(k, SharedK):
            return f"_S[{self.slots.slot(k.ref, self.spec)}]"
        return None

    def expr(self, e: ir.Expr) -> str:
        return expr_source(e, self.g, self.subst)

    def kind(self, e: ir.Expr) -> Kind:
        return self.spec.kinds.get(e.nid, HOST)

    def function(self, fn: LoweredFunction, entry: bool) -> None:
        self.spec = fn.spec
        self.parallel = fn.parallel_loops
        name = self.names[fn.spec.key]
        self.emit(0, f"def {name}(_rt, _d, {''.join(p + ', ' for p in fn.spec.fn.params)}):")
        self.emit(1, f"# {fn.spec.fn.name} specialized for ({', '.join(str(k) for k in fn.spec.key[1])})")
        self.emit(1, "_S = _rt.slots  # shared values of this run")
        if entry:
            self.emit(1, "_rt.phase = 0")
        self.phase = 0
        self.body(fn.body, 1)
        if not (fn.body and isinstance(fn.body[-1], ir.Return)):
            self.emit(1, "return None, _d")
        self.emit(0, "")

    def body(self, stmts: list[ir.Stmt], depth: int) -> None:
        start = len(self.lines)
        for s in stmts:
            self.stmt(s, depth)
        if len(self.lines) == start:
            self.emit(depth, "pass")

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        match s:
            case BlockCall(block=b):
                args = "".join(self.expr(p.expr) + ", " for p in b.batched_params)  # type: ignore[arg-type]
                at = str(b.sdepth) if b.sdepth is not None else "_d"
                call = f"_rt.invoke(_B[{b.id}], {at}, ({args}))"
                outs = "".join(o + ", " for o in b.outputs)
                self.emit(depth, f"{outs} = {call}" if b.outputs else call)
                self.emit(depth, f"# block {b.name}: {'hoisted, static depth ' + str(b.sdepth) if b.sdepth is not None else 'inline depth'}")
                if b.sdepth is None:
                    self.emit(depth, "_d += 1")
            case ProgramCall(target=t, calls=calls, concurrent=conc):
                self.program_call(s, t, calls, conc, depth)
            case ir.Assign(target=t, value=v):
                self.emit(depth, f"{target_source(t)} = {coerce(self.expr(v), self.kind(v), target_kind(self.spec, t))}")
            case ir.ExprStmt(value=v):
                if isinstance(v, ir.Call) and v.callee == ("method", "append") and isinstance(v.receiver, ir.Name):
                    lst = self.spec.var.get(v.receiver.id)
                    elem = lst.elem if isinstance(lst, ListK) else HOST
                    self.emit(depth, f"{v.receiver.id}.append({coerce(self.expr(v.args[0]), self.kind(v.args[0]), elem)})")
                else:
                    self.emit(depth, self.expr(v))
            case ir.Return(value=v):
                code = "None" if v is None else coerce(self.expr(v), self.kind(v), self.spec.ret)
                self.emit(depth, f"return {code}, _d")
            case ir.If(test=t, body=b, orelse=o):
                self.emit(depth, f"if {self.expr(t)}:")
                self.body(b, depth + 1)
                if o:
                    self.emit(depth, "else:")
                    self.body(o, depth + 1)
            case ir.While(test=t, body=b):
                self.emit(depth, f"while {self.expr(t)}:")
                self.body(b, depth + 1)
            case ir.For(target=t, iter=it, body=b):
                self.for_loop(s, t, it, b, depth)
            case ir.PhaseMark():
                self.phase += 1
                self.emit(depth, f"_rt.phase = {self.phase}  # program phase boundary")
                self.emit(depth, f"_d = {self.base}")
            case ir.Pass():
                self.emit(depth, "pass")

    def for_loop(self, s: ir.For, t: ir.Target, it: ir.Expr, b: list[ir.Stmt], depth: int) -> None:
        if s.nid not in self.parallel:
            self.emit(depth, f"for {target_source(t)} in {self.expr(it)}:")
            self.body(b, depth + 1)
            return
        fork, joined = f"_fork{s.nid}", f"_join{s.nid}"
        self.emit(depth, f"{fork} = {joined} = _d  # map loop: every iteration starts at the same depth")
        self.emit(depth, f"for {target_source(t)} in {self.expr(it)}:")
        self.emit(depth + 1, f"_d = {fork}")
        self.body(b, depth + 1)
        self.emit(depth + 1, f"{joined} = max({joined}, _d)")
        self.emit(depth, f"_d = {joined}")

    def program_call(self, s: ir.Stmt, t: ir.Target, calls, conc: bool, depth: int) -> None:
        results = []
        tupled = conc
        for i, (key, args) in enumerate(calls):
            fn = self.names[key]
            arg_src = "".join(self.expr(a) + ", " for a in args)
            conc = conc and self.concurrency
            d_in = "_d" if not conc else "_dfork"
            if conc and i == 0:
                self.emit(depth, "_dfork = _d  # concurrent calls start at the same depth")
            self.emit(depth, f"_r{i}, _d{i} = {fn}(_rt, {d_in}, {arg_src})")
            results.append(f"_r{i}")
            if not conc:
                self.emit(depth, f"_d = _d{i}")
        if conc:
            self.emit(depth, f"_d = max({', '.join(f'_d{i}' for i in range(len(calls)))})")
        value = results[0] if not tupled else "(" + "".join(r + ", " for r in results) + ")"
        rets = [self.specs[key].ret for key, _ in calls]
        src = TupleK(tuple(rets)) if tupled else rets[0]
        code = coerce(value, src, target_kind(self.spec, t))
        self.emit(depth, f"{target_source(t)} = {code}")


def write_skeleton(functions: list[LoweredFunction], entry_key: object, g: Globals, slots: SharedSlots,
                   specs: dict, base: int, concurrency: bool = True) -> str:
    """The Python source of the whole skeleton module (function names are the spec names)."""
    names = {key: spec.name for key, spec in specs.items()}
    w = SkeletonWriter(g, slots, specs, names, base)
    w.concurrency = concurrency
    w.emit(0, f"# generated by acrobat: control-flow skeleton with inline depth computation (base depth {base})")
    for fn in functions:
        w.function(fn, entry=fn.spec.key == entry_key)
    return "\n".join(w.lines) + "\n"
