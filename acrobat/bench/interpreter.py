"""Interpreted control flow: a program's lowered IR walked at run time (the paper's Table 3).

The paper's Table 3 compares ACRoBat's AOT-compiled control flow (§4.1) with
the same program run by the Relay VM. acrobat's analogue: the generated
skeleton (``acrobat.codegen.aot``: plain Python with inline depth computation)
against ``Interpreter``, which walks the *same* lowered IR at run time,
dispatching on every statement and expression node. Both are readings of the
lowered IR through ``acrobat.codegen.visitor.LoweredVisitor``: the writer prints
each decision (coercions, ghost padding, depth fork/join, hoisted nodes added
ahead of a loop, phase numbers), the interpreter carries it out, so both add
the same DFG nodes at the same (phase, stage, depth). They share the compiled
program (blocks, shared-value prologue, runtime, backend), so the difference in
time is the cost of interpreting the control flow.

``InterpretedProgram`` runs a batch as ``Program.run`` does, with the
interpreter in place of the generated skeleton.
"""

from __future__ import annotations

import builtins
import dataclasses
import operator
from typing import Any, Callable, Sequence

from acrobat.analysis.kinds import SpecKey
from acrobat.analysis.lowered import Block, LoweredFunction, ProgramCall
from acrobat.analysis.padded import padded_op
from acrobat.codegen.aot import region_layouts
from acrobat.codegen.printer import BINOPS, CMPOPS, INPLACE
from acrobat.codegen.visitor import (CallMode, CallPlan, Coercion, Concat, Each, Fields, LiftedList, Lift,
                                     LoweredVisitor, OrNone, Positions, Prefetch, ScalarRead, SharedRead, Tag,
                                     ValueRead, ends_in_return, node_args, output_offsets, snapshot_hosts)
from acrobat.errors import AcrobatError
from acrobat.frontend import ir
from acrobat.program import Compiled, Options, Program, located
from acrobat.runtime.executor import Runtime, tuple_like
from acrobat.runtime.stats import RunStats

_UNOPS: dict[str, Callable[[Any], Any]] = {"-": operator.neg, "+": operator.pos, "not": operator.not_,
                                           "~": operator.invert}


class _Return(Exception):
    """Unwinds the statement loops of a call on ``return`` (value, depth)."""

    def __init__(self, value: Any, d: int) -> None:
        self.value = value
        self.d = d


class _Break(Exception):
    """Unwinds to the innermost loop on ``break``."""


class _Continue(Exception):
    """Unwinds to the innermost loop on ``continue``."""


class _Frame:
    """One call's state: its lowered function, variables, depth counter ``d``, and the nodes added ahead of
    its running loops (block id -> (their handles, the items, the loop variable, the loop's node id)) with
    each such loop's iteration number."""

    __slots__ = ("fn", "spec", "env", "d", "ahead", "index")

    def __init__(self, fn: LoweredFunction, env: dict[str, Any], d: int) -> None:
        self.fn = fn
        self.spec = fn.spec
        self.env = env
        self.d = d
        self.ahead: dict[int, tuple[list[int], tuple, str, int]] = {}
        self.index: dict[int, int] = {}


class Interpreter(LoweredVisitor[_Frame]):
    """The evaluating reading of a compiled program's lowered IR: runs one instance at a time, adding DFG
    nodes to the ``Runtime`` (Table 3); its context is the running call's frame."""

    def __init__(self, c: Compiled) -> None:
        self.functions = {f.spec.key: f for f in c.lowered}
        entry = self.functions[c.entry_key]
        super().__init__({k: f.spec for k, f in self.functions.items()}, entry, c.slots, c.plan.base,
                         c.skeleton_options, c.effects, c.fields)
        self.entry_key = c.entry_key
        self.rt: Runtime

    def entry(self, rt: Runtime, d: int, *args: Any) -> tuple[Any, int]:
        """The generated entry function's signature: the entry's arguments in parameter order; ``(result, depth)``."""
        self.rt = rt
        rt.enter_phase(0)
        return self.call(self.entry_key, d, args)

    def call(self, key: SpecKey, d: int, args: Sequence[Any]) -> tuple[Any, int]:
        fn = self.functions[key]
        region = fn.spec.fn.region
        op = padded_op(fn.spec)
        if op is not None:  # a padded function's node (acrobat.analysis.padded), as the skeleton adds it
            block = next(b for b in self.rt.plan.blocks.values() if b.segment == op)
            return self.rt.padded(block, d, tuple(args))
        if region is not None:  # the user's own Python (acrobat.analysis.regions), as the skeleton calls it
            return self.rt.region(region, region_layouts(fn.spec), d, tuple(args))
        f = _Frame(fn, dict(zip(fn.spec.fn.params, args)), d)
        for param, c in self.entry_coercions(fn):
            f.env[param] = self.coerce(f.env[param], c)
        try:
            self.body(f, fn.body)
        except _Return as r:
            return r.value, r.d
        assert not ends_in_return(fn.body)
        return None, f.d

    def function_of(self, at: _Frame) -> LoweredFunction:
        return at.fn

    def body(self, f: _Frame, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            self.stmt(s, f)

    # -- statements -----------------------------------------------------------
    def segment_call(self, b: Block, at: _Frame) -> None:
        rows = [self.expr(at, p.expr) for p in b.batched_params]  # type: ignore[arg-type]  (the list, then states)
        at.env[b.stmts[0].target.name] = self.rt.segment(self.rt.plan.blocks[b.id], at.d, *rows)  # type: ignore[union-attr]
        at.d += 1

    def block_call(self, b: Block, at: _Frame) -> None:
        ahead = at.ahead.get(b.id)
        if ahead is None:
            h = self.node(at, b)
        else:  # added before the loop: taken if the item is the one it was added for
            handles, items, var, loop = ahead
            i = at.index[loop]
            h = handles[i] if i < len(items) and at.env[var] is items[i] else self.node(at, b)
        for name, k in zip(b.outputs, output_offsets(b)):
            at.env[name] = h + k
        if b.sdepth is None:
            at.d += 1

    def node(self, f: _Frame, b: Block) -> int:
        """Add a DFG node of block ``b`` for the running instance (one native call); its output-0 handle."""
        tensor_args, host_args = node_args(b)
        hosts = tuple([self.rt.snapshot(self.expr(f, x)) if snap else self.expr(f, x)
                       for x, snap in zip(host_args, snapshot_hosts(host_args))])
        tensors = [self.expr(f, x) for x in tensor_args]
        at = b.sdepth if b.sdepth is not None else f.d
        return self.rt.dfg.node_hosts(at, b.id, hosts, *tensors) if host_args else self.rt.dfg.node(at, b.id, *tensors)

    def assign(self, t: ir.Target, v: ir.Expr, c: Coercion | None, at: _Frame) -> None:
        self.store(at, t, self.coerce(self.expr(at, v), c))

    def starred_assign(self, t: ir.Target, v: ir.Expr, after: list[tuple[str, Coercion]], at: _Frame) -> None:
        self.store(at, t, self.expr(at, v))
        for name, c in after:
            at.env[name] = self.coerce(at.env[name], c)

    def field_load(self, t: ir.Target, obj: ir.Expr, attr: str, at: _Frame) -> None:
        value, at.d = self.rt.load(self.expr(at, obj), attr, at.d)
        self.store(at, t, value)

    def field_store(self, obj: ir.Expr, attr: str, x: ir.Expr, c: Coercion | None, at: _Frame) -> None:
        target = self.expr(at, obj)
        self.rt.store(target, attr, self.coerce(self.expr(at, x), c), at.d)

    def list_put(self, v: ir.Call, lst: str, c: Coercion | None, at: _Frame) -> None:
        if v.target == "__setitem__":  # `lst[i] = x`: Python evaluates x first
            value = self.coerce(self.expr(at, v.args[-1]), c)
            at.env[lst][self.expr(at, v.args[0])] = value
            return
        method = getattr(at.env[lst], v.target)
        lead = [self.expr(at, a) for a in v.args[:-1]]
        method(*lead, self.coerce(self.expr(at, v.args[-1]), c))

    def expr_stmt(self, v: ir.Expr, at: _Frame) -> None:
        self.expr(at, v)

    def return_(self, v: ir.Expr | None, c: Coercion | None, at: _Frame) -> None:
        raise _Return(None if v is None else self.coerce(self.expr(at, v), c), at.d)

    def if_(self, s: ir.If, padding: tuple[int, int], at: _Frame) -> None:
        if self.expr(at, s.test):
            self.body(at, s.body)
            at.d += padding[0]
        else:
            self.body(at, s.orelse)
            at.d += padding[1]

    def while_(self, s: ir.While, at: _Frame) -> None:
        while self.expr(at, s.test):
            if self.iteration(at, s.body) is None:
                break

    def for_(self, s: ir.For, is_map: bool, prefetch: Prefetch | None, c: Coercion | None, at: _Frame) -> None:
        src = self.coerce(self.expr(at, s.iter), c)
        if prefetch is not None:
            self.prefetch_nodes(at, src, prefetch)
        fork = joined = at.d  # a map loop: every iteration starts at the same depth
        for i, item in enumerate(src):
            at.index[s.nid] = i
            self.store(at, s.target, item)
            if is_map:
                at.d = fork
            ran = self.iteration(at, s.body)
            if ran is None:
                break
            if ran and is_map:  # as the skeleton: an iteration left by `continue` is not joined
                joined = max(joined, at.d)
        if is_map:
            at.d = joined

    def iteration(self, f: _Frame, body: list[ir.Stmt]) -> bool | None:
        """One iteration of a loop's ``body``: True when it ran to its end, False when left by ``continue``,
        None by ``break``."""
        try:
            self.body(f, body)
        except _Continue:
            return False
        except _Break:
            return None
        return True

    def prefetch_nodes(self, f: _Frame, src: Any, pf: Prefetch) -> None:
        """Add the nodes of ``pf.blocks`` for every item of a list or tuple before the loop (§4.2)."""
        items = tuple(src) if type(src) in (list, tuple) else ()
        missing = object()
        outer = f.env.get(pf.var, missing)
        for blk in pf.blocks:
            handles = []
            for item in items:
                f.env[pf.var] = item
                handles.append(self.node(f, blk))
            f.ahead[blk.id] = (handles, items, pf.var, pf.loop)
        if outer is missing:
            f.env.pop(pf.var, None)
        else:
            f.env[pf.var] = outer

    def break_(self, at: _Frame) -> None:
        raise _Break

    def continue_(self, at: _Frame) -> None:
        raise _Continue

    def pass_(self, at: _Frame) -> None:
        pass

    def phase(self, number: int, at: _Frame) -> None:
        self.rt.enter_phase(number)
        at.d = self.base

    def stage(self, index: int, stages: int, at: _Frame) -> None:
        at.d = self.rt.enter_stage(index, stages, at.d)

    def program_call(self, s: ProgramCall, plan: CallPlan, at: _Frame) -> None:
        fork = at.d
        if plan.mode is CallMode.FIBERS:  # fork-join over child fibers (§4.2)
            done = self.rt.fork([lambda key=key, args=args: self.call(key, fork, self.call_args(at, args))
                                 for key, args in plan.calls])
        else:
            done = []
            for key, args in plan.calls:
                r, d = self.call(key, fork if plan.mode is CallMode.FORKED else at.d, self.call_args(at, args))
                done.append((r, d))
                if plan.mode is CallMode.SEQUENTIAL:
                    at.d = d
        if plan.mode is not CallMode.SEQUENTIAL:
            at.d = max(d for _, d in done)
        value = tuple(r for r, _ in done) if plan.tupled else done[0][0]
        self.store(at, s.target, self.coerce(value, plan.result))

    def call_args(self, f: _Frame, args: tuple[tuple[ir.Expr, Coercion | None], ...]) -> list[Any]:
        """A program call's arguments, each coerced to the kind the callee is specialized on."""
        return [self.coerce(self.expr(f, a), c) for a, c in args]

    def store(self, f: _Frame, t: ir.Target, value: Any) -> None:
        """Assign ``value`` to target ``t`` (a name, or a tuple of targets with at most one starred)."""
        if t.name is not None:
            f.env[t.name] = value
            return
        items = t.items or []
        values = list(value)
        star = next((i for i, x in enumerate(items) if x.starred), None)
        if star is None and len(values) != len(items):
            raise ValueError(f"cannot unpack {len(values)} values into {len(items)} targets")
        if star is not None:
            after = len(items) - star - 1
            if len(values) < star + after:
                raise ValueError(f"not enough values to unpack (expected at least {star + after}, got {len(values)})")
            values = [*values[:star], values[star:len(values) - after], *values[len(values) - after:]]
        for sub, v in zip(items, values):
            self.store(f, sub, v)

    def coerce(self, value: Any, c: Coercion | None) -> Any:
        """``value`` coerced by ``c`` (``acrobat.codegen.visitor.coercion``): shared tensors lifted."""
        match c:
            case None:
                return value
            case Lift():
                return self.rt.lift(value)
            case Tag():
                return self.rt.host_result(value)
            case OrNone(inner=inner):
                return None if value is None else self.coerce(value, inner)
            case Fields(keys=keys, parts=parts, is_dict=True):
                return {k: self.coerce(value[k], p) for k, p in zip(keys, parts)}
            case Fields(keys=keys, parts=parts):
                return tuple_like(value, [self.coerce(value[k], p) for k, p in zip(keys, parts)])
            case Each(inner=inner):
                return [self.coerce(x, inner) for x in value]
            case Positions(parts=parts):
                return [self.coerce(value[j], p) for j, p in enumerate(parts)]
        raise TypeError(f"unknown coercion {c!r}")

    # -- expressions ----------------------------------------------------------
    def expr(self, f: _Frame, e: ir.Expr) -> Any:
        """The value of ``e``, or what ``LoweredVisitor.special`` says it is."""
        match self.special(f.spec, e):
            case None:
                return self.eval(f, e)
            case SharedRead(slot=slot):
                return self.rt.slots[slot]
            case Concat(left=a, right=b, left_c=ca, right_c=cb, inplace=inplace):
                if inplace:  # `xs += ys` extends xs itself, as in Python
                    left = self.expr(f, a)
                    return operator.iadd(left, self.coerce(self.expr(f, b), cb))
                left = self.coerce(self.expr(f, a), ca)
                return left + self.coerce(self.expr(f, b), cb)
            case LiftedList(items=items, parts=parts):
                return [self.coerce(self.expr(f, x), c) for x, c in zip(items, parts)]
            case ValueRead():  # host code reads this tensor's value: wait for it (§4.2)
                return self.rt.value(self.eval(f, e))
            case ScalarRead(operand=x, convert=convert):
                number = self.rt.item(self.eval(f, x))
                return number if convert is None else getattr(builtins, convert)(number)
        raise TypeError(f"unknown special expression at {e.loc}")

    def eval(self, f: _Frame, e: ir.Expr) -> Any:
        """The value of ``e`` as written, its sub-expressions through ``expr``."""
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
            case ir.DictExpr(keys=keys, values=vs):
                return {k: self.expr(f, v) for k, v in zip(keys, vs)}
            case ir.BinOp(op=op, left=a, right=b, inplace=inplace):
                return (INPLACE if inplace else BINOPS)[op](self.expr(f, a), self.expr(f, b))
            case ir.UnaryOp(op=op, operand=a):
                return _UNOPS[op](self.expr(f, a))
            case ir.Compare(ops=ops, operands=xs):
                left = self.expr(f, xs[0])
                for op, x in zip(ops, xs[1:]):
                    right = self.expr(f, x)
                    if not CMPOPS[op](left, right):
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
                match kind:  # the callee first, then the arguments, as Python evaluates the generated call
                    case ir.CallKind.TORCH | ir.CallKind.HOST:
                        fn = what
                    case ir.CallKind.BUILTIN:
                        fn = getattr(builtins, what)
                    case ir.CallKind.METHOD:
                        fn = getattr(self.expr(f, r), what)  # type: ignore[arg-type]
                    case ir.CallKind.VALUE:
                        fn = self.expr(f, r)  # type: ignore[arg-type]
                    case _:
                        raise NotImplementedError(f"interpreter: a {kind} call at {e.loc}")
                positional = [v for x in args for v in (  # `zip(*pairs)`: the only starred argument left
                    self.expr(f, x.value) if isinstance(x, ir.Starred) else [self.expr(f, x)])]
                return fn(*positional, **{n: self.expr(f, x) for n, x in kw.items()})
        raise NotImplementedError(f"interpreter: expression {type(e).__name__} at {e.loc}")


class InterpretedProgram:
    """A program whose control flow is interpreted; compile, blocks, prologue, backend and runtime as
    ``Program.run`` has them (the same compile for the run's shared arguments).

    ``run`` has the meaning of ``Program.run``: per-instance results, batched; ``trace`` that of ``Program.trace``.
    """

    def __init__(self, prog: Program, options: Options | None = None, backend: str = "eager") -> None:
        self.prog = prog
        self.options = options or prog.options
        self.backend = backend

    def runtime(self, *shared: Any) -> Runtime:
        """A fresh ``Runtime`` for one batched run, its skeleton entry replaced by the interpreter's.

        Raises:
            AcrobatError: the program runs in the dynamic tier (it has no lowered IR to interpret).
        """
        rt = self.prog.runtime(*shared, backend=self.backend, options=self.options)
        c = self.prog.compile(len(shared), self.options, shared)  # cached: the compile ``rt`` runs
        if c.plan.dynamic is not None:
            raise AcrobatError(f"{self.prog.__name__} runs in the dynamic tier: there is no control flow to interpret")
        entry = located(Interpreter(c).entry, __file__, {}, self.prog.instance_pos)
        rt.plan = dataclasses.replace(rt.plan, entry=entry)
        return rt

    def run(self, instances: Sequence, *shared: Any, stats: RunStats | None = None) -> list:
        rt = self.runtime(*shared)
        out = rt.run(instances, shared)
        if stats is not None:
            stats.add(rt.stats)
        return out

    def trace(self, instances: Sequence, *shared: Any) -> list[tuple[int, str, int, int, int]]:
        """The DFG of a batch as it ran, as ``Program.trace`` gives it."""
        rt = self.runtime(*shared)
        rt.trace = []
        rt.run(instances, shared)
        return sorted(rt.trace)
