"""Interpreted control flow: run a program's lowered IR through a plain tree-walking interpreter.

The paper's Table 3 compares ACRoBat's AOT-compiled control flow with the
same program run by the Relay VM. acrobat's analogue: the generated
skeleton (``acrobat.codegen.aot``: plain Python with inline depth
computation) against this module, which walks the *same* lowered IR
(``BlockCall``/``ProgramCall``/host statements) at run time, dispatching on
every statement and expression node. Both add the same DFG nodes at the same
(phase, depth) through ``Runtime.invoke`` and share the batched blocks, the
shared-value prologue and the runtime, so the difference in time is the cost
of interpreting the control flow.

Semantics mirror ``acrobat.codegen.aot.SkeletonWriter`` statement for
statement: a block whose depth is computed inline runs at the counter ``d``
and bumps it, a hoisted one at its static depth; concurrent calls and map
loops fork ``d`` and join with ``max``; a phase mark sets the runtime's
phase and resets ``d`` to the base depth, a stage mark of a staged loop
does what ``Runtime.enter_stage`` says; shared values are read from the
run's slots and lifted (``Runtime.lift``) where a per-instance tensor is
expected.

:func:`lower_program` takes the lowered functions from ``Compiled``, so the
interpreter runs exactly the IR the skeleton was generated from.
"""

from __future__ import annotations

import builtins
import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from acrobat.analysis.kinds import HOST, Kind, ListK, SharedK, Spec, SpecKey, TensorK, TupleK
from acrobat.analysis.lowered import BlockCall, LoweredFunction, ProgramCall
from acrobat.analysis.shared import SharedSlots
from acrobat.codegen import aot
from acrobat.codegen.aot import target_kind
from acrobat.codegen.printer import BINOPS as _BINOPS
from acrobat.codegen.printer import CMPOPS as _CMPOPS
from acrobat.codegen.printer import INPLACE as _INPLACE
from acrobat.frontend import ir
from acrobat.program import Compiled, Options, Program, block_kernels
from acrobat.runtime.backend import get_backend
from acrobat.runtime.executor import Runtime
from acrobat.runtime.stats import RunStats

@dataclass
class LoweredProgram:
    """Everything the interpreter needs: lowered functions, blocks, shared slots, base depth, options."""

    functions: dict[SpecKey, LoweredFunction]
    entry: SpecKey
    slots: SharedSlots
    base: int
    options: Any  # the options the skeleton was generated with (fibers only where needed)
    compiled: Compiled  # blocks, block functions, prologue: shared with the generated skeleton


def lower_program(prog: Program, n_shared: int, options: Options) -> LoweredProgram:
    """Compile ``prog`` and keep the lowered IR its skeleton was generated from."""
    c = prog.compile(n_shared, options)
    functions = {f.spec.key: f for f in c.lowered}
    return LoweredProgram(functions, c.entry_key, c.slots, c.plan.base, c.skeleton_options, c)


_UNOPS: dict[str, Callable[[Any], Any]] = {"-": operator.neg, "+": operator.pos, "not": operator.not_,
                                           "~": operator.invert}


class _Return(Exception):
    """Unwinds the interpreter's statement loops on ``return`` (value, depth)."""

    def __init__(self, value: Any, d: int) -> None:
        self.value = value
        self.d = d


class _Frame:
    """One call's state: its specialization, variables and depth counter ``d``."""

    __slots__ = ("fn", "spec", "env", "d")

    def __init__(self, fn: LoweredFunction, env: dict[str, Any], d: int) -> None:
        self.fn = fn
        self.spec: Spec = fn.spec
        self.env = env
        self.d = d


class Interpreter:
    """Walks a ``LoweredProgram`` for one instance at a time, adding DFG nodes to a ``Runtime``."""

    def __init__(self, lp: LoweredProgram) -> None:
        self.lp = lp
        self.concurrency = bool(lp.options.concurrency)
        self.ghosts = bool(getattr(lp.options, "ghosts", False))
        self.fibers = bool(getattr(lp.options, "fibers", False))
        self.padding: dict[int, tuple[int, int]] = {}  # if-statement nid -> ghost depth padding
        self.rt: Runtime
        # phase number of each phase mark of the entry, in statement order
        self.phase_of = {s.nid: i + 1 for i, s in enumerate(
            s for s in ir.walk_stmts(lp.functions[lp.entry].body) if isinstance(s, ir.PhaseMark))}

    def entry(self, rt: Runtime, d: int, *args: Any) -> tuple[Any, int]:
        """Same signature as the generated entry function: ``(result, depth)``."""
        self.rt = rt
        rt.enter_phase(0)
        return self.call(self.lp.entry, d, args)

    def call(self, key: SpecKey, d: int, args: Sequence[Any]) -> tuple[Any, int]:
        fn = self.lp.functions[key]
        frame = _Frame(fn, {p: coerce(self, a, k, fn.spec.var.get(p, k))  # the variable's kind in the body
                            for p, a, k in zip(fn.spec.fn.params, args, key[1])}, d)
        try:
            self.body(frame, fn.body)
        except _Return as r:
            return r.value, r.d
        return None, frame.d

    # -- statements -----------------------------------------------------------
    def body(self, f: _Frame, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            self.stmt(f, s)

    def stmt(self, f: _Frame, s: ir.Stmt) -> None:
        match s:
            case BlockCall(block=b) if b.segment is not None:
                rows = self.expr(f, b.params[0].expr)  # type: ignore[arg-type]
                f.env[b.stmts[0].target.name] = self.rt.segment(self.rt.plan.blocks[b.id], f.d, rows)
                f.d += 1
            case BlockCall(block=b):
                tensors = tuple([self.expr(f, p.expr) for p in b.batched_params if p.role == "tensor"])  # type: ignore[arg-type]
                hosts = tuple([self.expr(f, p.expr) for p in b.batched_params if p.role != "tensor"])  # type: ignore[arg-type]
                at = b.sdepth if b.sdepth is not None else f.d
                outs = self.rt.invoke(self.rt.plan.blocks[b.id], at, tensors, hosts)
                for name, v in zip(b.outputs, outs):
                    f.env[name] = v
                if b.sdepth is None:
                    f.d += 1
            case ProgramCall(target=t, calls=calls, concurrent=conc):
                self.program_call(f, t, calls, conc)
            case ir.Assign(target=t, value=v):
                self.assign(f, t, coerce(self, self.expr(f, v), self.kind(f, v), target_kind(f.spec, t)))
            case ir.ExprStmt(value=v):
                if isinstance(v, ir.Call) and v.kind is ir.CallKind.METHOD and v.target == "append" \
                        and isinstance(v.receiver, ir.Name):
                    lst = f.spec.var.get(v.receiver.id)
                    elem = lst.elem if isinstance(lst, ListK) else HOST
                    a = v.args[0]
                    f.env[v.receiver.id].append(coerce(self, self.expr(f, a), self.kind(f, a), elem))
                else:
                    self.expr(f, v)
            case ir.Return(value=v):
                value = None if v is None else coerce(self, self.expr(f, v), self.kind(f, v), f.spec.ret)
                raise _Return(value, f.d)
            case ir.If(test=t, body=b, orelse=o):
                pad = self.padding.get(s.nid)
                if pad is None:
                    pad = self.padding[s.nid] = self.ghost_padding(b, o)
                if self.expr(f, t):
                    self.body(f, b)
                    f.d += pad[0]
                else:
                    self.body(f, o)
                    f.d += pad[1]
            case ir.While(test=t, body=b):
                while self.expr(f, t):
                    self.body(f, b)
            case ir.For(target=t, iter=it, body=b):
                if s.nid in f.fn.parallel_loops:  # map loop: every iteration starts at the same depth
                    fork = joined = f.d
                    for item in self.expr(f, it):
                        f.d = fork
                        self.assign(f, t, item)
                        self.body(f, b)
                        joined = max(joined, f.d)
                    f.d = joined
                else:
                    for item in self.expr(f, it):
                        self.assign(f, t, item)
                        self.body(f, b)
            case ir.PhaseMark():
                self.rt.enter_phase(self.phase_of[s.nid])
                f.d = self.lp.base
            case ir.StageMark(index=k, stages=n):
                f.d = self.rt.enter_stage(k, n, f.d)
            case ir.Pass():
                pass
            case _:
                raise NotImplementedError(f"interpreter: statement {type(s).__name__} at {s.loc}")

    def ghost_padding(self, b: list[ir.Stmt], o: list[ir.Stmt]) -> tuple[int, int]:
        """Ghost operators (§4.1, App. A.3): the depth padding the skeleton writer adds to each branch."""
        if not self.ghosts or aot._returns(b) or aot._returns(o):
            return 0, 0
        nb, no = aot._static_advance(b), aot._static_advance(o)
        if nb is None or no is None:
            return 0, 0
        top = max(nb, no)
        return top - nb, top - no

    def call_args(self, f: _Frame, key: SpecKey, args: list[ir.Expr]) -> list[Any]:
        """A program call's arguments, each coerced to the kind the callee is specialized on."""
        return [coerce(self, self.expr(f, a), self.kind(f, a), k) for a, k in zip(args, key[1])]

    def program_call(self, f: _Frame, t: ir.Target, calls: list, conc: bool) -> None:
        parallel = conc and self.concurrency
        fork = f.d
        results: list[Any] = []
        depths: list[int] = []
        forkable = not any(key in self.lp.compiled.effects for key, _ in calls)  # host effects keep their order
        if parallel and self.fibers and forkable:  # fork-join over child fibers (§4.2)
            thunks = [lambda key=key, args=args: self.call(key, fork, self.call_args(f, key, args))
                      for key, args in calls]
            for r, d in self.rt.fork(thunks):
                results.append(r)
                depths.append(d)
        else:
            for key, args in calls:
                r, d = self.call(key, fork if parallel else f.d, self.call_args(f, key, args))
                results.append(r)
                depths.append(d)
                if not parallel:
                    f.d = d
        if parallel:
            f.d = max(depths)
        rets = [self.lp.functions[key].spec.ret for key, _ in calls]
        value = tuple(results) if conc else results[0]
        src = TupleK(tuple(rets)) if conc else rets[0]
        self.assign(f, t, coerce(self, value, src, target_kind(f.spec, t)))

    def assign(self, f: _Frame, t: ir.Target, value: Any) -> None:
        if t.name is not None:
            f.env[t.name] = value
            return
        items = t.items or []
        values = tuple(value)
        if len(values) != len(items):
            raise ValueError(f"cannot unpack {len(values)} values into {len(items)} targets")
        for sub, v in zip(items, values):
            self.assign(f, sub, v)

    # -- expressions ----------------------------------------------------------
    def kind(self, f: _Frame, e: ir.Expr) -> Kind:
        return f.spec.kinds.get(e.nid, HOST)

    def expr(self, f: _Frame, e: ir.Expr) -> Any:
        k = f.spec.kinds.get(e.nid)
        if isinstance(k, SharedK):
            return self.rt.slots[self.lp.slots.slot(k.ref, f.spec)]
        if e.nid in f.spec.reads:  # host code reads this tensor's value: wait for it (§4.2)
            return self.rt.value(self.eval(f, e))
        return self.eval(f, e)

    def eval(self, f: _Frame, e: ir.Expr) -> Any:
        match e:
            case ir.Name(id=name):
                return f.env[name]
            case ir.Const(value=v):
                return v
            case ir.Attr(obj=o, attr=a):
                return getattr(self.expr(f, o), a)
            case ir.Subscript(obj=o, index=i):
                return self.expr(f, o)[self.expr(f, i)]
            case ir.Slice(lower=a, upper=b, step=c):
                return slice(*(None if x is None else self.expr(f, x) for x in (a, b, c)))
            case ir.TupleExpr(items=items):
                return tuple([self.expr(f, x) for x in items])
            case ir.ListExpr(items=items):
                return [self.expr(f, x) for x in items]
            case ir.BinOp(op=op, left=a, right=b, inplace=inplace):
                return (_INPLACE if inplace else _BINOPS)[op](self.expr(f, a), self.expr(f, b))
            case ir.UnaryOp(op=op, operand=a):
                return _UNOPS[op](self.expr(f, a))
            case ir.Compare(ops=ops, operands=xs):
                left = self.expr(f, xs[0])
                for op, x in zip(ops, xs[1:]):
                    right = self.expr(f, x)
                    if not _CMPOPS[op](left, right):
                        return False
                    left = right
                return True
            case ir.BoolOp(op=op, values=vs):
                v: Any = None
                for x in vs:
                    v = self.expr(f, x)
                    if (op == "and") != bool(v):
                        return v
                return v
            case ir.IfExp(test=t, body=b, orelse=o):
                return self.expr(f, b) if self.expr(f, t) else self.expr(f, o)
            case ir.Call(kind=kind, target=what, args=args, kwargs=kw, receiver=r):
                a = [self.expr(f, x) for x in args]
                kwa = {n: self.expr(f, x) for n, x in kw.items()}
                match kind:
                    case ir.CallKind.TORCH:
                        return what(*a, **kwa)
                    case ir.CallKind.BUILTIN:
                        return getattr(builtins, what)(*a, **kwa)
                    case ir.CallKind.METHOD:
                        return getattr(self.expr(f, r), what)(*a, **kwa)  # type: ignore[arg-type]
                    case ir.CallKind.VALUE:
                        return self.expr(f, r)(*a, **kwa)  # type: ignore[arg-type]
        raise NotImplementedError(f"interpreter: expression {type(e).__name__} at {e.loc}")


def coerce(interp: Interpreter, value: Any, src: Kind, dst: Kind) -> Any:
    """``value`` of kind ``src`` as kind ``dst``: a shared tensor becomes per-instance (``Runtime.lift``)."""
    if src == dst:
        return value
    if isinstance(src, SharedK) and isinstance(dst, TensorK):
        return interp.rt.lift(value)
    if isinstance(src, TupleK) and isinstance(dst, TupleK):
        return tuple(coerce(interp, v, s, d) for v, s, d in zip(value, src.items, dst.items))
    if isinstance(src, ListK) and isinstance(dst, ListK):
        return [coerce(interp, v, src.elem, dst.elem) for v in value]
    return value


class InterpretedProgram:
    """A program whose control flow is interpreted; blocks, prologue and runtime as compiled.

    ``run`` has the meaning of ``Program.run``: per-instance results, batched.
    """

    def __init__(self, prog: Program, n_shared: int, options: Options | None = None, backend: str = "eager") -> None:
        self.lp = lower_program(prog, n_shared, options or prog.options)
        c = self.lp.compiled
        self.backend = get_backend(backend)
        self.kernels = block_kernels(self.backend, c.plan)

    def run(self, instances: Sequence, *shared: Any, stats: RunStats | None = None) -> list:
        plan = self.lp.compiled.plan
        rt = Runtime(dataclasses.replace(plan, entry=Interpreter(self.lp).entry), self.kernels,
                     plan.prologue((None, *shared)), arena=self.backend.arena, threads=self.backend.threads)
        out = rt.run(instances, shared)
        if stats is not None:
            stats.add(rt.stats)
        return out
