"""AOT code generation: the control-flow skeleton as generated Python (§4.1, App. C.2).

Each lowered specialization becomes one Python function
``name(_rt, _d, *params) -> (result, _d)`` that runs the model's host
control flow for one instance, adds a DFG node per block invocation
(``Runtime.invoke``, inlined) and computes depths inline with the counter ``_d``
(Listing 2 of the paper): no interpreter walks the IR at run time.
``result_layout`` tells the runtime where the entry's result holds handles.
"""

from __future__ import annotations

import builtins

from acrobat.analysis.kinds import (BOTTOM, HOST, DictK, Kind, ListK, NoneK, OptionalK, RaggedK, SharedK, Spec, TensorK,
                                    TupleK, has_tensor)
from acrobat.analysis.lowered import Block, BlockCall, LoweredFunction, ProgramCall
from acrobat.analysis.rules import LIST_PUTS, VALUE_BUILTINS
from acrobat.analysis.shared import SharedSlots
from acrobat.codegen.printer import INPLACE, Globals, expr_source, target_source
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.runtime.dfg import MAX_PHASES, OUTPUT_STEP
from acrobat.runtime.plan import (DictLayout, HostLayout, Layout, ListLayout, OptionalLayout, RaggedLayout,
                                  TensorLayout, TupleLayout)


def coerce(code: str, src: Kind, dst: Kind) -> str:
    """Code turning a value of kind ``src`` into kind ``dst`` (shared -> per-instance: ``_rt.lift``)."""
    if src == dst:
        return code
    if isinstance(dst, OptionalK):  # None stays None; a value is coerced to the optional's kind
        if isinstance(src, NoneK):
            return code
        if isinstance(src, OptionalK):
            inner = coerce("_v", src.inner, dst.inner)
            return code if inner == "_v" else f"(lambda _v: None if _v is None else {inner})({code})"
        return coerce(code, src, dst.inner)
    if isinstance(src, DictK) and isinstance(dst, DictK):
        items = [coerce(f"_v[{k!r}]", s, d) for k, s, d in zip(src.keys, src.items, dst.items)]
        if all(it == f"_v[{k!r}]" for k, it in zip(src.keys, items)):
            return code
        return f"(lambda _v: {{{', '.join(f'{k!r}: {i}' for k, i in zip(src.keys, items))}}})({code})"
    if isinstance(src, SharedK) and isinstance(dst, TensorK):
        return f"_rt.lift({code})"
    if isinstance(src, SharedK) and isinstance(dst, TupleK):  # a shared tuple (`torch.chunk(p.W, 2)`)
        return f"(lambda _v: ({''.join(coerce(f'_v[{i}]', src, d) + ', ' for i, d in enumerate(dst.items))}))({code})"
    if isinstance(src, TupleK) and isinstance(dst, TupleK):
        items = [coerce(f"_v[{i}]", s, d) for i, (s, d) in enumerate(zip(src.items, dst.items))]
        if all(it == f"_v[{i}]" for i, it in enumerate(items)):
            return code
        return f"(lambda _v: ({''.join(i + ', ' for i in items)}))({code})"
    if isinstance(src, ListK) and isinstance(dst, ListK):
        inner = coerce("_x", src.elem, dst.elem)
        return code if inner == "_x" else f"[{inner} for _x in {code}]"
    return code


def join_depths(n: int, g: Globals) -> str:
    """The statement setting ``_d`` to the deepest of ``_d0 .. _d{n-1}`` (two: a conditional, cheaper than ``max``)."""
    if n == 2:
        return "_d = _d0 if _d0 > _d1 else _d1"
    return f"_d = {builtin(g, 'max')}({', '.join(f'_d{i}' for i in range(n))})"


def builtin(g: Globals, name: str) -> str:
    """The global alias of Python builtin ``name`` in generated code (a model variable may shadow the builtin)."""
    return g.alias(getattr(builtins, name), name)


def target_kind(spec: Spec, t: ir.Target) -> Kind:
    """The kind stored in an assignment target (a variable's kind, or a tuple of them)."""
    if t.name is not None:
        return spec.var.get(t.name, HOST)
    return TupleK(tuple(target_kind(spec, i) for i in t.items or []))


class SkeletonWriter:
    """Writes the skeleton functions of all specializations into one module."""

    def __init__(self, g: Globals, slots: SharedSlots, specs: dict, names: dict[object, str], base: int,
                 fields: dict[str, Kind]):
        self.g = g
        self.specs = specs
        self.fields = fields  # attribute name -> kind of the field (``acrobat.analysis.kinds``, "fields")
        self.slots = slots
        self.names = names  # spec key -> generated function name
        self.base = base
        self.lines: list[str] = []
        self.line_map: dict[int, tuple[ir.Loc, str]] = {}  # generated line -> (model location, source text)
        self.loc: tuple[ir.Loc, str] | None = None
        self.spec: Spec
        self.prefetched: dict[int, tuple[int, str]] = {}  # block id -> (its loop's nid, loop variable): see prefetch

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)
        if self.loc is not None:
            self.line_map[len(self.lines)] = self.loc

    def subst(self, e: ir.Expr) -> str | None:
        k = self.spec.kinds.get(e.nid)
        if isinstance(k, SharedK):
            return f"_S[{self.slots.slot(k.ref, self.spec)}]"
        if isinstance(e, ir.BinOp) and e.op == "+" and isinstance(k, ListK) and (
                self.kind(e.left) != k or self.kind(e.right) != k):  # list concatenation: lift shared elements
            right = coerce(self.expr(e.right), self.kind(e.right), k)
            if e.inplace:  # `xs += ys` extends xs itself, as in Python
                return f"{self.g.alias(INPLACE['+'], 'iadd')}({self.expr(e.left)}, {right})"
            return f"({coerce(self.expr(e.left), self.kind(e.left), k)} + {right})"
        if isinstance(e, ir.ListExpr) and isinstance(k, ListK) and any(self.kind(x) != k.elem for x in e.items):
            # `[p.h0, p.h0 + 1.0]`: different shared values make a list of per-instance tensors: lift them
            return "[" + ", ".join(coerce(self.expr(x), self.kind(x), k.elem) for x in e.items) + "]"
        if e.nid in self.spec.reads:  # host code reads this tensor's value: wait for it (§4.2)
            return f"_rt.value({self.unread(e)})"
        scalar = _scalar_read(e)
        if scalar is not None and scalar.nid in self.spec.reads:  # `x.item()`, `int(x)`: a number, not a tensor
            return f"_rt.item({self.unread(scalar)})" if e.target == "item" else \
                f"{e.target}(_rt.item({self.unread(scalar)}))"
        return None

    def unread(self, e: ir.Expr) -> str:
        """Code of ``e`` itself (its handle), where ``subst`` would wrap it in a value read."""
        return expr_source(e, self.g, lambda x: None if x is e else self.subst(x))

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
        for param, kind in zip(fn.spec.fn.params, fn.spec.key[1]):
            code = coerce(param, kind, fn.spec.var.get(param, kind))
            if code != param:  # a parameter passed shared and assigned per-instance values in the body
                self.emit(1, f"{param} = {code}  # the variable's kind in the body")
        if entry:
            self.emit(1, "_rt.enter_phase(0)")
        self.phase = 0
        self.body(fn.body, 1)
        if not (fn.body and isinstance(fn.body[-1], ir.Return)):
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

    def node(self, b: Block, depth: int) -> None:
        """A DFG node of block ``b``: one native call (``Runtime.dfg.node``, §4.1), then its output handles."""
        if b.segment is not None:  # a segment operator over a per-instance list: one node, all its rows
            rows = self.expr(b.params[0].expr)  # type: ignore[arg-type]
            self.emit(depth, f"{b.stmts[0].target.name} = _rt.segment(_B[{b.id}], _d, {rows})"
                             f"  # DFG node of {b.segment.op} over a list (inline depth)")
            self.emit(depth, "_d += 1")
            return
        where = f"static depth {b.sdepth}" if b.sdepth is not None else "inline depth"
        call = self.node_call(b)
        if b.id in self.prefetched:  # added ahead of its loop: take it if the item is the one it was added for
            loop, var = self.prefetched.pop(b.id)
            i, items = f"_i{loop}", f"_items{loop}"
            self.emit(depth, f"_h = _pf{loop}b{b.id}[{i}] if {i} < {builtin(self.g, 'len')}({items}) "
                             f"and {var} is {items}[{i}] "
                             f"else {call}  # DFG node of block {b.name} ({where}), added before the loop")
        else:
            self.emit(depth, f"{'_h = ' if b.outputs else ''}{call}  # DFG node of block {b.name} ({where})")
        if b.outputs:
            handles = ", ".join(f"_h + {k * OUTPUT_STEP}" if k else "_h" for k in range(len(b.outputs)))
            self.emit(depth, f"{''.join(o + ', ' for o in b.outputs)} = {handles},  # its outputs' handles")
        if b.sdepth is None:
            self.emit(depth, "_d += 1")

    def node_call(self, b: Block) -> str:
        """The native call that adds a DFG node of block ``b`` for the running instance (its output-0 handle)."""
        tensors = "".join(self.expr(p.expr) + ", " for p in b.batched_params if p.role == "tensor")  # type: ignore[arg-type]
        hosts = "".join(self.expr(p.expr) + ", " for p in b.batched_params if p.role != "tensor")  # type: ignore[arg-type]
        at = str(b.sdepth) if b.sdepth is not None else "_d"
        return f"_rt.dfg.node_hosts({at}, {b.id}, ({hosts}), {tensors})" if hosts else f"_rt.dfg.node({at}, {b.id}, {tensors})"

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        self.loc = (s.loc, self.spec.fn.source_lines.get(s.loc.line, "").strip())
        match s:
            case BlockCall(block=b):
                self.node(b, depth)
            case ProgramCall(target=t, calls=calls, concurrent=conc):
                self.program_call(s, t, calls, conc, depth)
            case ir.Assign(target=t, value=v) if t.items and any(i.starred for i in t.items):
                self.emit(depth, f"{target_source(t)} = {self.expr(v)}")
                for line in self.starred_coercions(t, self.kind(v)):
                    self.emit(depth, line)
            case ir.Assign(target=t, value=ir.Attr(obj=o, attr=a) as v) if v.nid in self.spec.loads:
                self.emit(depth, f"{target_source(t)}, _d = _rt.load({self.expr(o)}, {a!r}, _d)  # a field's "
                                 "handles, and the depth they were stored at")
            case ir.Assign(target=t, value=v):
                self.emit(depth, f"{target_source(t)} = {coerce(self.expr(v), self.kind(v), target_kind(self.spec, t))}")
            case ir.ExprStmt(value=ir.Call(kind=ir.CallKind.BUILTIN, target="setattr", args=[o, ir.Const(value=a), x])) \
                    if has_tensor(self.fields.get(a, HOST)):
                value = coerce(self.expr(x), self.kind(x), self.fields[a])
                self.emit(depth, f"_rt.store({self.expr(o)}, {a!r}, {value}, _d)  # a field of the instance's object, "
                                 "ready at depth _d")
            case ir.ExprStmt(value=v):
                if isinstance(v, ir.Call) and v.kind is ir.CallKind.METHOD \
                        and v.target in LIST_PUTS \
                        and isinstance(v.receiver, ir.Name) and v.args:
                    lst = self.spec.var.get(v.receiver.id)
                    elem = lst.elem if isinstance(lst, ListK) else HOST
                    value = coerce(self.expr(v.args[-1]), self.kind(v.args[-1]), elem)
                    lead = "".join(self.expr(a) + ", " for a in v.args[:-1])
                    if v.target == "__setitem__":
                        self.emit(depth, f"{v.receiver.id}[{self.expr(v.args[0])}] = {value}")
                    else:
                        self.emit(depth, f"{v.receiver.id}.{v.target}({lead}{value})")
                else:
                    self.emit(depth, self.expr(v))
            case ir.Return(value=v):
                code = "None" if v is None else coerce(self.expr(v), self.kind(v), self.spec.ret)
                self.emit(depth, f"return {code}, _d")
            case ir.If(test=t, body=b, orelse=o):
                pad_b, pad_o = self.ghost_padding(b, o)
                self.emit(depth, f"if {self.expr(t)}:")
                self.body(b, depth + 1, f"_d += {pad_b}  # {pad_b} ghost operator(s): line up with the else branch"
                          if pad_b else None)
                if o or pad_o:
                    self.emit(depth, "else:")
                    self.body(o, depth + 1, f"_d += {pad_o}  # {pad_o} ghost operator(s): line up with the if branch"
                              if pad_o else None)
            case ir.While(test=t, body=b):
                self.emit(depth, f"while {self.expr(t)}:")
                self.body(b, depth + 1)
            case ir.For(target=t, iter=it, body=b):
                self.for_loop(s, t, it, b, depth)
            case ir.Break():
                self.emit(depth, "break")
            case ir.Continue():
                self.emit(depth, "continue")
            case ir.PhaseMark():
                self.phase += 1
                if self.phase >= MAX_PHASES:
                    raise CompileError(f"more than {MAX_PHASES} program phases in the entry: remove acrobat.phase() "
                                       "marks, or compile with Options(phases=False)", s.loc.file, s.loc.line)
                self.emit(depth, f"_rt.enter_phase({self.phase})  # program phase boundary")
                self.emit(depth, f"_d = {self.base}")
            case ir.StageMark(index=k, stages=n):
                self.emit(depth, f"_d = _rt.enter_stage({k}, {n}, _d)  # staged loop: stage {k} of {n} of the "
                                 f"iteration, a phase of its own")
            case ir.Pass():
                self.emit(depth, "pass")

    def starred_coercions(self, t: ir.Target, vk: Kind) -> list[str]:
        """After ``a, *rest = value``: statements giving each name its variable's kind (shared values lifted)."""
        items = t.items or []
        n, star = len(items), next(i for i, x in enumerate(items) if x.starred)
        out = []
        for i, it in enumerate(items):
            if it.name is None:
                continue
            dst = self.spec.var.get(it.name, HOST)
            if it.starred and isinstance(vk, TupleK):
                elem = dst.elem if isinstance(dst, ListK) else dst
                parts = [coerce(f"{it.name}[{j}]", vk.items[star + j], elem) for j in range(len(vk.items) - (n - 1))]
                code = "[" + ", ".join(parts) + "]"
                if any(p != f"{it.name}[{j}]" for j, p in enumerate(parts)):
                    out.append(f"{it.name} = {code}")
                continue
            if it.starred:
                src = vk
            elif isinstance(vk, TupleK):
                src = vk.items[i] if i < star else vk.items[len(vk.items) - (n - i)]
            else:
                src = vk.elem if isinstance(vk, ListK) else vk
            code = coerce(it.name, src, dst)
            if code != it.name:
                out.append(f"{it.name} = {code}")
        return out

    def ghost_padding(self, b: list[ir.Stmt], o: list[ir.Stmt]) -> tuple[int, int]:
        """Ghost operators (§4.1, App. A.3): depth padding that makes both branches advance ``_d`` equally.

        Only when both branches fall through to the code after the ``if``
        and advance the depth statically (no loops or calls).
        """
        if not self.ghosts or _returns(b) or _returns(o):
            return 0, 0
        nb, no = _static_advance(b), _static_advance(o)
        if nb is None or no is None:
            return 0, 0
        top = max(nb, no)
        return top - nb, top - no

    def for_loop(self, s: ir.For, t: ir.Target, it: ir.Expr, b: list[ir.Stmt], depth: int) -> None:
        header = f"for {target_source(t)} in {self.expr(it)}:"
        blocks = self.prefetchable(t, b)
        if blocks:
            header = self.prefetch(s, t, it, blocks, depth)
        if s.nid not in self.parallel:
            self.emit(depth, header)
            self.body(b, depth + 1)
            return
        fork, joined = f"_fork{s.nid}", f"_join{s.nid}"
        self.emit(depth, f"{fork} = {joined} = _d  # map loop: every iteration starts at the same depth")
        self.emit(depth, header)
        self.emit(depth + 1, f"_d = {fork}")
        self.body(b, depth + 1)
        self.emit(depth + 1, f"{joined} = {builtin(self.g, 'max')}({joined}, _d)")
        self.emit(depth, f"_d = {joined}")

    def prefetchable(self, t: ir.Target, b: list[ir.Stmt]) -> list[Block]:
        """The hoisted blocks a ``for`` loop's body calls in every iteration with the loop variable as their
        only argument (``x = p.emb[tok]``), when the program runs on fibers: their nodes can be added for
        all iterations before the loop. (On fibers a hoisted group runs when a fiber needs its value, so
        nodes added iteration by iteration run in one launch per flush instead of one per run.)

        Only where no iteration can leave the loop or skip the call (no ``break``/``continue`` of this
        loop, no ``return``), so every node added ahead would have been added anyway.
        """
        if not self.fibers or t.name is None or _may_leave(b, nested=False):
            return []
        return [s.block for s in b if isinstance(s, BlockCall) and s.block.sdepth is not None
                and s.block.segment is None and s.block.batched_params
                and all(p.role != "tensor" and isinstance(p.expr, ir.Name) and p.expr.id == t.name
                        for p in s.block.batched_params)]

    def prefetch(self, s: ir.For, t: ir.Target, it: ir.Expr, blocks: list[Block], depth: int) -> str:
        """Add the nodes of ``blocks`` (see ``prefetchable``) for every item of a list or tuple iterable before
        the loop (§4.2, App. A.1); the loop header that numbers the iterations. In the loop each call takes
        its node from there when the item is the one it was added for (a list changed by the loop body
        falls back to adding the node in place)."""
        src, items, i = f"_src{s.nid}", f"_items{s.nid}", f"_i{s.nid}"
        self.emit(depth, f"{src} = {self.expr(it)}")
        tup, typ, lst = (builtin(self.g, n) for n in ("tuple", "type", "list"))
        self.emit(depth, f"{items} = {tup}({src}) if {typ}({src}) in ({lst}, {tup}) else ()  "
                         f"# hoisted nodes of every iteration, added ahead (one launch for all fibers)")
        for blk in blocks:
            self.emit(depth, f"_pf{s.nid}b{blk.id} = [{self.node_call(blk)} for {t.name} in {items}]")
        self.prefetched.update({blk.id: (s.nid, t.name) for blk in blocks})
        return f"for {i}, {t.name} in {builtin(self.g, 'enumerate')}({src}):"

    def call_args(self, key, args: list[ir.Expr]) -> str:
        """Argument code of a program call, each coerced to the kind the callee is specialized on."""
        return "".join(coerce(self.expr(a), self.kind(a), k) + ", " for a, k in zip(args, key[1]))

    def program_call(self, s: ir.Stmt, t: ir.Target, calls, conc: bool, depth: int) -> None:
        results = []
        tupled = conc
        forkable = not any(key in self.effects for key, _ in calls)  # else fibers could reorder host effects
        if conc and self.concurrency and self.fibers and forkable:  # fork-join over child fibers (§4.2)
            self.emit(depth, "_dfork = _d  # concurrent calls start at the same depth, each on its own fiber")
            thunks = [f"lambda: {self.names[key]}(_rt, _dfork, {self.call_args(key, args)})" for key, args in calls]
            self.emit(depth, f"_res = _rt.fork(({''.join(t + ', ' for t in thunks)}))")
            for i in range(len(calls)):
                self.emit(depth, f"_r{i}, _d{i} = _res[{i}]")
                results.append(f"_r{i}")
            self.emit(depth, join_depths(len(calls), self.g))
            conc = False
        for i, (key, args) in enumerate(calls if not results else []):
            fn = self.names[key]
            arg_src = self.call_args(key, args)
            conc = conc and self.concurrency
            d_in = "_d" if not conc else "_dfork"
            if conc and i == 0:
                self.emit(depth, "_dfork = _d  # concurrent calls start at the same depth")
            self.emit(depth, f"_r{i}, _d{i} = {fn}(_rt, {d_in}, {arg_src})")
            results.append(f"_r{i}")
            if not conc:
                self.emit(depth, f"_d = _d{i}")
        if conc and self.concurrency:
            self.emit(depth, join_depths(len(calls), self.g))
        value = results[0] if not tupled else "(" + "".join(r + ", " for r in results) + ")"
        rets = [self.specs[key].ret for key, _ in calls]
        src = TupleK(tuple(rets)) if tupled else rets[0]
        code = coerce(value, src, target_kind(self.spec, t))
        self.emit(depth, f"{target_source(t)} = {code}")


def _scalar_read(e: ir.Expr) -> ir.Expr | None:
    """The operand of ``x.item()`` or ``int(x)``/``float(x)``/``bool(x)``: host code wants ``x`` as a Python number."""
    if isinstance(e, ir.Call) and not e.args and not e.kwargs and e.kind is ir.CallKind.METHOD and e.target == "item":
        return e.receiver
    if isinstance(e, ir.Call) and len(e.args) == 1 and not e.kwargs and e.kind is ir.CallKind.BUILTIN \
            and e.target in VALUE_BUILTINS:
        return e.args[0]
    return None


def _static_advance(body: list[ir.Stmt]) -> int | None:
    """How far a branch advances the depth counter, when that is static (no loops, no calls, and no
    ``break``/``continue``/``return`` part-way: a branch that leaves early has no single advance)."""
    total = 0
    for s in body:
        if isinstance(s, (ir.For, ir.While, ProgramCall, ir.Break, ir.Continue, ir.Return)):
            return None
        if isinstance(s, BlockCall) and s.block.sdepth is None:
            total += 1
        if isinstance(s, ir.If):
            a, b = _static_advance(s.body), _static_advance(s.orelse)
            if a is None or b is None:
                return None
            total += max(a, b)
    return total


def _may_leave(body: list[ir.Stmt], nested: bool) -> bool:
    """Whether running ``body`` (a loop's, or with ``nested`` a loop inside it) can return, end or skip an
    iteration of the outer loop (``break``/``continue`` outside any inner loop), or cross a phase boundary."""
    for s in body:
        match s:
            case ir.Return() | ir.PhaseMark():  # a phase boundary: nodes added ahead would be in the wrong phase
                return True
            case ir.Break() | ir.Continue() if not nested:
                return True
            case ir.If(body=a, orelse=o) if _may_leave(a, nested) or _may_leave(o, nested):
                return True
            case ir.For(body=a) | ir.While(body=a) if _may_leave(a, True):
                return True
    return False


def _returns(body: list[ir.Stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ir.Return)


def write_skeleton(functions: list[LoweredFunction], entry_key: object, g: Globals, slots: SharedSlots,
                   specs: dict, base: int, options, effects: set,
                   fields: dict[str, Kind]) -> tuple[str, dict[int, tuple[ir.Loc, str]], str]:
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
    w = SkeletonWriter(g, slots, specs, names, base, fields)
    w.effects = effects
    w.concurrency = options.concurrency
    w.ghosts = options.ghosts
    w.fibers = options.fibers
    w.emit(0, f"# generated by acrobat: control-flow skeleton with inline depth computation (base depth {base})")
    for fn in functions:
        w.function(fn, entry=fn.spec.key == entry_key)
    return "\n".join(w.lines) + "\n", w.line_map, names[entry_key]


def result_layout(kind: Kind) -> Layout:
    """The runtime's layout of a value of ``kind`` (``acrobat.runtime.plan``): where its handles lie, which
    the runtime replaces by tensors in the entry's result."""
    match kind:
        case TensorK():
            return TensorLayout()
        case RaggedK():
            return RaggedLayout(result_layout(kind.rows))
        case OptionalK(inner=inner):
            return OptionalLayout(result_layout(inner))
        case DictK(keys=keys, items=items):
            return DictLayout(keys, tuple(result_layout(k) for k in items))
        case TupleK(items=items):
            return TupleLayout(tuple(result_layout(k) for k in items))
        case ListK(elem=elem):
            return ListLayout(result_layout(elem), followed=elem is not BOTTOM)
    return HostLayout()
