"""One reading of the lowered IR for its two consumers: the skeleton writer and the interpreter (§4.1, Table 3).

The skeleton writer (``acrobat.codegen.aot.SkeletonWriter``) prints each lowered
specialization as Python: ACRoBat's AOT-compiled control flow (§4.1). The
interpreter (``acrobat.bench.interpreter``) walks the same IR at run time: the
baseline of the paper's Table 3. Both subclass ``LoweredVisitor``, which
dispatches every statement to one method per kind and makes each semantic
decision once, so that the two cannot drift apart:

- coercions (``coercion``): a shared value stored where a per-instance value is
  expected is lifted (``Runtime.lift``): on assignment, list puts, arguments of
  program calls, their results, the return value (to the function's return kind),
  the items of a tuple a loop runs over (to the loop variable's kind), and a
  parameter passed shared and assigned per-instance values in the body, on entry;
- expression nodes that are not evaluated as written (``special``): shared values
  read from the run's slots, lists made of shared and per-instance values, values
  host code reads (§4.2);
- ghost padding of ``if`` branches (§4.1, App. A.3), the depth fork/join of map
  loops and concurrent calls (§4.2), the hoisted nodes added ahead of a loop,
  the numbers of the entry's phase marks.

A subclass implements the statement methods (``block_call`` ... ``stage``) over
a context of its own (the writer: the indentation; the interpreter: a call frame)
and realizes the decisions: the writer as code, the interpreter as values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, Mapping, TypeVar

from acrobat.analysis.kinds import (HOST, DictK, HostK, HostOrK, Kind, ListK, MapK, NoneK, OptionalK, SharedK, Spec,
                                    SpecKey, TensorK, TupleK, has_tensor)
from acrobat.analysis.lowered import Block, BlockCall, LoweredFunction, ProgramCall
from acrobat.analysis.rules import LIST_PUTS, VALUE_BUILTINS
from acrobat.analysis.shared import SharedSlots
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.runtime.dfg import MAX_PHASES, OUTPUT_STEP

# ------------------------------------------------------------------ coercions


@dataclass(frozen=True)
class Lift:
    """A shared tensor made a per-instance one (``Runtime.lift``)."""


@dataclass(frozen=True)
class OrNone:
    """An optional value: None stays None, a value is coerced by ``inner``."""

    inner: "Coercion"


@dataclass(frozen=True)
class Fields:
    """A tuple (``keys`` its indices) or a dict (``keys`` its keys, ``is_dict``) rebuilt, each field
    coerced by its part (None: taken as it is)."""

    keys: tuple
    parts: "tuple[Coercion | None, ...]"
    is_dict: bool


@dataclass(frozen=True)
class Each:
    """Every element of a list coerced by ``inner`` (a new list)."""

    inner: "Coercion"


@dataclass(frozen=True)
class Positions:
    """A list rebuilt from its positions, each coerced by its part (the starred name of ``a, *rest = t``
    where ``t`` is a tuple of different kinds)."""

    parts: "tuple[Coercion | None, ...]"


@dataclass(frozen=True)
class Tag:
    """Host data returned where the result may also be a tensor (``kinds.HostOrK``): tagged as a
    ``plan.HostResult`` (``Runtime.host_result``), so the runtime tells a number from a handle."""


Coercion = Lift | OrNone | Fields | Each | Positions | Tag


def coercion(src: Kind, dst: Kind) -> Coercion | None:
    """How a value of kind ``src`` becomes one of kind ``dst``; None: it is used as it is."""
    if src == dst:
        return None
    if isinstance(dst, HostOrK):  # host data tagged (None needs none); a value coerced to the other kind
        if isinstance(src, NoneK) or isinstance(src, OptionalK) and src.inner == dst.inner:
            return None
        if isinstance(src, HostK) or isinstance(src, SharedK) and src.host:
            return Tag()
        return coercion(src.inner if isinstance(src, OptionalK) else src, dst.inner)
    if isinstance(dst, OptionalK):  # None stays None; a value is coerced to the optional's kind
        if isinstance(src, NoneK):
            return None
        if isinstance(src, OptionalK):
            inner = coercion(src.inner, dst.inner)
            return None if inner is None else OrNone(inner)
        return coercion(src, dst.inner)
    if isinstance(src, DictK) and isinstance(dst, DictK):
        return _fields([(k, coercion(s, d)) for k, s, d in zip(src.keys, src.items, dst.items)], True)
    if isinstance(src, SharedK) and isinstance(dst, TensorK):
        return Lift()
    if isinstance(src, SharedK) and isinstance(dst, TupleK):  # a shared tuple (`torch.chunk(p.W, 2)`): always rebuilt
        return Fields(tuple(range(len(dst.items))), tuple(coercion(src, d) for d in dst.items), False)
    if isinstance(src, TupleK) and isinstance(dst, TupleK):
        return _fields([(i, coercion(s, d)) for i, (s, d) in enumerate(zip(src.items, dst.items))], False)
    if isinstance(src, ListK) and isinstance(dst, ListK):
        inner = coercion(src.elem, dst.elem)
        return None if inner is None else Each(inner)
    return None


def _fields(parts: list[tuple[object, Coercion | None]], is_dict: bool) -> Fields | None:
    """The rebuild of a tuple or dict, or None when no field changes."""
    if all(p is None for _, p in parts):
        return None
    return Fields(tuple(k for k, _ in parts), tuple(p for _, p in parts), is_dict)


def target_kind(spec: Spec, t: ir.Target) -> Kind:
    """The kind stored in an assignment target (a variable's kind, or a tuple of them)."""
    if t.name is not None:
        return spec.var.get(t.name, HOST)
    return TupleK(tuple(target_kind(spec, i) for i in t.items or []))


def starred_coercions(spec: Spec, t: ir.Target, vk: Kind) -> list[tuple[str, Coercion]]:
    """After ``a, *rest = value`` (of kind ``vk``): the coercion giving each name its variable's kind."""
    items = t.items or []
    n, star = len(items), next(i for i, x in enumerate(items) if x.starred)
    out: list[tuple[str, Coercion]] = []
    for i, it in enumerate(items):
        if it.name is None:
            continue
        dst = spec.var.get(it.name, HOST)
        if it.starred and isinstance(vk, TupleK):
            elem = dst.elem if isinstance(dst, ListK) else dst
            parts = tuple(coercion(vk.items[star + j], elem) for j in range(len(vk.items) - (n - 1)))
            if any(p is not None for p in parts):
                out.append((it.name, Positions(parts)))
            continue
        if it.starred:
            src = vk
        elif isinstance(vk, TupleK):
            src = vk.items[i] if i < star else vk.items[len(vk.items) - (n - i)]
        else:
            src = vk.elem if isinstance(vk, ListK) else vk
        c = coercion(src, dst)
        if c is not None:
            out.append((it.name, c))
    return out


# ------------------------------------------------------------------ expressions not evaluated as written


@dataclass(frozen=True)
class SharedRead:
    """A shared value: read from the run's slot ``slot`` (computed once by the prologue, §5.1)."""

    slot: int


@dataclass(frozen=True)
class Concat:
    """``left + right`` of lists whose kinds differ from the result's: shared elements lifted (``inplace``:
    ``left += right`` extends ``left`` itself, so only ``right`` is coerced)."""

    left: ir.Expr
    right: ir.Expr
    left_c: Coercion | None
    right_c: Coercion | None
    inplace: bool


@dataclass(frozen=True)
class LiftedList:
    """``[p.h0, p.h0 + 1.0]``: a list display of different shared values is a list of per-instance tensors."""

    items: tuple[ir.Expr, ...]
    parts: tuple[Coercion | None, ...]


@dataclass(frozen=True)
class ValueRead:
    """Host code reads this tensor's value: wait for it (§4.2)."""


@dataclass(frozen=True)
class ScalarRead:
    """``x.item()`` or ``int(x)``/``float(x)``/``bool(x)``: ``operand`` read as a Python number (§4.2),
    then passed to the builtin ``convert`` (None for ``.item()``)."""

    operand: ir.Expr
    convert: str | None


Special = SharedRead | Concat | LiftedList | ValueRead | ScalarRead


def scalar_read(e: ir.Expr) -> ir.Expr | None:
    """The operand of ``x.item()`` or ``int(x)``/``float(x)``/``bool(x)``: host code wants ``x`` as a Python number."""
    if isinstance(e, ir.Call) and not e.args and not e.kwargs and e.kind is ir.CallKind.METHOD and e.target == "item":
        return e.receiver
    if isinstance(e, ir.Call) and len(e.args) == 1 and not e.kwargs and e.kind is ir.CallKind.BUILTIN \
            and e.target in VALUE_BUILTINS:
        return e.args[0]
    return None


# ------------------------------------------------------------------ control-flow decisions


class CallMode(Enum):
    """How the calls of a ``ProgramCall`` run (§4.2)."""

    SEQUENTIAL = "sequential"  # one after the other, each from the depth the last one reached
    FORKED = "forked"  # concurrent: each from the same depth, then the deepest (join)
    FIBERS = "fibers"  # concurrent, each on a child fiber (``Runtime.fork``), then the join


@dataclass(frozen=True)
class CallPlan:
    """A ``ProgramCall`` as run: its mode, each callee with its arguments and their coercions, and the
    coercion of the result (a tuple of the results when the calls are concurrent) to the target's kind."""

    mode: CallMode
    calls: tuple[tuple[SpecKey, tuple[tuple[ir.Expr, Coercion | None], ...]], ...]
    tupled: bool
    result: Coercion | None


@dataclass(frozen=True)
class Prefetch:
    """Hoisted nodes added for every item of a ``for`` loop's list before the loop (see ``prefetchable``)."""

    loop: int  # the loop's node id
    var: str  # the loop variable, the blocks' only argument
    blocks: tuple[Block, ...]


def static_advance(body: list[ir.Stmt]) -> int | None:
    """How far a branch advances the depth counter, when that is static (no loops, no calls, and no
    ``break``/``continue``/``return`` part-way: a branch that leaves early has no single advance)."""
    total = 0
    for s in body:
        if isinstance(s, (ir.For, ir.While, ProgramCall, ir.Break, ir.Continue, ir.Return)):
            return None
        if isinstance(s, BlockCall) and s.block.sdepth is None:
            total += 1
        if isinstance(s, ir.If):
            a, b = static_advance(s.body), static_advance(s.orelse)
            if a is None or b is None:
                return None
            total += max(a, b)
    return total


def may_leave(body: list[ir.Stmt], nested: bool) -> bool:
    """Whether running ``body`` (a loop's, or with ``nested`` a loop inside it) can return, end or skip an
    iteration of the outer loop (``break``/``continue`` outside any inner loop), or cross a phase boundary."""
    for s in body:
        match s:
            case ir.Return() | ir.PhaseMark():  # a phase boundary: nodes added ahead would be in the wrong phase
                return True
            case ir.Break() | ir.Continue() if not nested:
                return True
            case ir.If(body=a, orelse=o) if may_leave(a, nested) or may_leave(o, nested):
                return True
            case ir.For(body=a) | ir.While(body=a) if may_leave(a, True):
                return True
    return False


def ends_in_return(body: list[ir.Stmt]) -> bool:
    """Whether the last statement of ``body`` is a ``return`` (control never falls through its end)."""
    return bool(body) and isinstance(body[-1], ir.Return)


def phase_numbers(fn: LoweredFunction) -> dict[int, int]:
    """The program phase each phase mark of ``fn`` (the entry) starts, by node id, in source order (§4.1).

    Raises:
        CompileError: more phases than the DFG's phase field holds.
    """
    marks = [s for s in ir.walk_stmts(fn.body) if isinstance(s, ir.PhaseMark)]
    for n, s in enumerate(marks, start=1):
        if n >= MAX_PHASES:
            raise CompileError(f"more than {MAX_PHASES} program phases in the entry: remove acrobat.phase() "
                               "marks, or compile with Options(phases=False)", s.loc.file, s.loc.line)
    return {s.nid: n for n, s in enumerate(marks, start=1)}


def output_offsets(b: Block) -> list[int]:
    """Each output handle of a node of ``b`` is its output-0 handle plus these (``runtime.dfg``'s layout)."""
    return [k * OUTPUT_STEP for k in range(len(b.outputs))]


def node_args(b: Block) -> tuple[list[ir.Expr], list[ir.Expr]]:
    """The argument expressions of a node of ``b``: its tensor parameters', then its host parameters'."""
    tensors = [p.expr for p in b.batched_params if p.role == "tensor"]
    hosts = [p.expr for p in b.batched_params if p.role != "tensor"]
    return tensors, hosts  # type: ignore[return-value]


def snapshot_hosts(hosts: list[ir.Expr]) -> list[bool]:
    """Per host argument of a node (evaluated left to right): whether to take it as it is now
    (``acrobat.runtime.dfg.snapshot``): each one before a later argument that calls code, which may change it
    (``(tokens, tokens.pop())``, the block of ``torch.tensor(tokens)`` and of ``p.emb[tokens.pop()]``: plain
    Python reads ``tokens`` before the pop). Constants never change."""
    calls = [any(isinstance(e, ir.Call) for e in ir.walk(x)) for x in hosts]
    return [any(calls[i + 1:]) and not isinstance(x, ir.Const) for i, x in enumerate(hosts)]


C = TypeVar("C")


class LoweredVisitor(Generic[C]):
    """A reading of the lowered IR: ``stmt`` dispatches each statement to one method of its kind, with
    the decisions taken here; a subclass implements the methods over its context ``C`` (§4.1).

    The call hierarchy::

        stmt
        +-- block_call / segment_call          BlockCall (a DFG node; ``prefetched`` ahead of a loop)
        +-- program_call                       ProgramCall, with its ``call_plan``
        +-- assign / starred_assign            with the value's ``coercion``, ``starred_coercions``
        +-- field_load / field_store           a field holding tensors (``node.state``), with its stored depth
        +-- list_put / expr_stmt               a list's append/insert/[i] = v coerce the element
        +-- return_                            coerced to the function's return kind
        +-- if_                                with its ``ghost_padding``
        +-- while_ / for_                      ``for_`` asks ``map_loop`` and ``prefetch``
        +-- break_ / continue_ / pass_
        +-- phase / stage                      the entry's ``phase_numbers``

    ``specs``: every specialization by key; ``entry``: the entry function (its phase marks are numbered);
    ``options`` are the skeleton's: ``concurrency``, ``ghosts``, ``fibers``; ``effects`` the spec keys
    whose calls change host state that outlives them (their concurrent calls never fork, §4.2); ``fields``
    the kind of each attribute the program stores on the instance's objects (``acrobat.analysis.kinds``).
    """

    def __init__(self, specs: dict, entry: LoweredFunction, slots: SharedSlots, base: int, options: object,
                 effects: set | frozenset, fields: Mapping[str, Kind]) -> None:
        self.specs = specs
        self.phases = phase_numbers(entry)  # phase mark's node id -> the program phase it starts
        self.slots = slots
        self.base = base
        self.concurrency = bool(options.concurrency)  # type: ignore[attr-defined]
        self.ghosts = bool(options.ghosts)  # type: ignore[attr-defined]
        self.fibers = bool(options.fibers)  # type: ignore[attr-defined]
        self.effects = effects
        self.fields = fields
        self._padding: dict[int, tuple[int, int]] = {}  # id of an if statement -> its ghost padding

    # -- dispatch -------------------------------------------------------------
    def function_of(self, at: C) -> LoweredFunction:
        """The lowered function whose statement is visited in context ``at``."""
        raise NotImplementedError

    def stmt(self, s: ir.Stmt, at: C) -> None:
        """Visit ``s``: the method of its kind."""
        fn = self.function_of(at)
        spec = fn.spec
        match s:
            case BlockCall(block=b) if b.segment is not None:
                self.segment_call(b, at)
            case BlockCall(block=b):
                self.block_call(b, at)
            case ProgramCall():
                self.program_call(s, self.call_plan(spec, s), at)
            case ir.Assign(target=t, value=v) if t.items and any(i.starred for i in t.items):
                self.starred_assign(t, v, starred_coercions(spec, t, self.kind(spec, v)), at)
            case ir.Assign(target=t, value=ir.Attr(obj=o, attr=a) as v) if v.nid in spec.loads:
                self.field_load(t, o, a, at)
            case ir.Assign(target=t, value=v):
                self.assign(t, v, coercion(self.kind(spec, v), target_kind(spec, t)), at)
            case ir.ExprStmt(value=ir.Call(kind=ir.CallKind.BUILTIN, target="setattr", args=[o, ir.Const(value=a), x])) \
                    if has_tensor(self.fields.get(a, HOST)):
                self.field_store(o, a, x, coercion(self.kind(spec, x), self.fields[a]), at)
            case ir.ExprStmt(value=ir.Call(kind=ir.CallKind.METHOD, target=m, receiver=ir.Name(id=lst), args=args) as v) \
                    if m in LIST_PUTS and args:
                k = spec.var.get(lst)
                elem = k.elem if isinstance(k, ListK) else k.value if isinstance(k, MapK) else HOST
                self.list_put(v, lst, coercion(self.kind(spec, args[-1]), elem), at)
            case ir.ExprStmt(value=v):
                self.expr_stmt(v, at)
            case ir.Return(value=v):
                self.return_(v, None if v is None else coercion(self.kind(spec, v), spec.ret), at)
            case ir.If():
                self.if_(s, self.ghost_padding(s), at)
            case ir.While():
                self.while_(s, at)
            case ir.For(target=t, iter=it):
                k = self.kind(spec, it)  # `for r in rest` of a tuple: each item as the loop variable holds it
                items = coercion(k, TupleK((target_kind(spec, t),) * len(k.items))) if isinstance(k, TupleK) else None
                self.for_(s, s.nid in fn.parallel_loops, self.prefetch(s), items, at)
            case ir.Break():
                self.break_(at)
            case ir.Continue():
                self.continue_(at)
            case ir.PhaseMark():
                self.phase(self.phases[s.nid], at)
            case ir.StageMark(index=k, stages=n):
                self.stage(k, n, at)
            case ir.Pass():
                self.pass_(at)
            case _:
                raise NotImplementedError(f"{type(self).__name__}: statement {type(s).__name__} at {s.loc}")

    # -- one method per statement kind (a subclass implements them) -----------
    def block_call(self, b: Block, at: C) -> None:
        """A DFG node of block ``b`` at its static depth, or at the depth counter, which it advances."""
        raise NotImplementedError

    def segment_call(self, b: Block, at: C) -> None:
        """A segment operator's node over its list (one node, all the rows) at the depth counter, advanced."""
        raise NotImplementedError

    def program_call(self, s: ProgramCall, plan: CallPlan, at: C) -> None:
        """Calls of program functions as ``plan`` says; the result stored in ``s.target``."""
        raise NotImplementedError

    def assign(self, t: ir.Target, v: ir.Expr, c: Coercion | None, at: C) -> None:
        """``t = v``, the value coerced by ``c``."""
        raise NotImplementedError

    def starred_assign(self, t: ir.Target, v: ir.Expr, after: list[tuple[str, Coercion]], at: C) -> None:
        """``a, *rest = v``, then each name of ``after`` coerced to its variable's kind."""
        raise NotImplementedError

    def field_load(self, t: ir.Target, obj: ir.Expr, attr: str, at: C) -> None:
        """``t = obj.attr`` of a field holding tensors (``Runtime.load``): the depth counter raised to the depth
        the value was stored at (§4.1)."""
        raise NotImplementedError

    def field_store(self, obj: ir.Expr, attr: str, x: ir.Expr, c: Coercion | None, at: C) -> None:
        """``obj.attr = x`` of a field holding tensors (``Runtime.store``), ``x`` coerced by ``c`` to the field's
        kind, ready at the depth counter."""
        raise NotImplementedError

    def list_put(self, v: ir.Call, lst: str, c: Coercion | None, at: C) -> None:
        """``lst.append(x)``, ``lst.insert(i, x)`` or ``lst[i] = x`` (``__setitem__``): ``x`` coerced by ``c``."""
        raise NotImplementedError

    def expr_stmt(self, v: ir.Expr, at: C) -> None:
        """An expression statement (a host call)."""
        raise NotImplementedError

    def return_(self, v: ir.Expr | None, c: Coercion | None, at: C) -> None:
        """``return v``, coerced by ``c`` to the function's return kind, with the depth counter."""
        raise NotImplementedError

    def if_(self, s: ir.If, padding: tuple[int, int], at: C) -> None:
        """``if``/``else``; each branch then advances the depth counter by its ghost ``padding``."""
        raise NotImplementedError

    def while_(self, s: ir.While, at: C) -> None:
        raise NotImplementedError

    def for_(self, s: ir.For, is_map: bool, prefetch: Prefetch | None, c: Coercion | None, at: C) -> None:
        """A ``for`` loop over its iterable coerced by ``c`` (a tuple's items to the loop variable's kind); a map
        loop (``is_map``) starts every iteration at the same depth and ends at the deepest; with ``prefetch``,
        hoisted nodes of every item are added before it."""
        raise NotImplementedError

    def break_(self, at: C) -> None:
        raise NotImplementedError

    def continue_(self, at: C) -> None:
        raise NotImplementedError

    def pass_(self, at: C) -> None:
        raise NotImplementedError

    def phase(self, number: int, at: C) -> None:
        """Program phase ``number`` starts: the depth counter restarts at the base depth (§4.1)."""
        raise NotImplementedError

    def stage(self, index: int, stages: int, at: C) -> None:
        """Stage ``index`` of ``stages`` of a staged loop's iteration (``Runtime.enter_stage``)."""
        raise NotImplementedError

    # -- decisions ------------------------------------------------------------
    def kind(self, spec: Spec, e: ir.Expr) -> Kind:
        return spec.kinds.get(e.nid, HOST)

    def entry_coercions(self, fn: LoweredFunction) -> list[tuple[str, Coercion]]:
        """Parameters passed shared and assigned per-instance values in the body: lifted on entry."""
        out = []
        for param, kind in zip(fn.spec.fn.params, fn.spec.key[1]):
            c = coercion(kind, fn.spec.var.get(param, kind))
            if c is not None:
                out.append((param, c))
        return out

    def special(self, spec: Spec, e: ir.Expr) -> Special | None:
        """How expression ``e`` is evaluated when not as written (see ``Special``), else None."""
        k = spec.kinds.get(e.nid)
        if isinstance(k, SharedK):
            return SharedRead(self.slots.slot(k.ref, spec))
        if isinstance(e, ir.BinOp) and e.op == "+" and isinstance(k, ListK) and (
                self.kind(spec, e.left) != k or self.kind(spec, e.right) != k):  # list concatenation
            return Concat(e.left, e.right, coercion(self.kind(spec, e.left), k),
                          coercion(self.kind(spec, e.right), k), e.inplace)
        if isinstance(e, ir.ListExpr) and isinstance(k, ListK) and any(self.kind(spec, x) != k.elem for x in e.items):
            return LiftedList(tuple(e.items), tuple(coercion(self.kind(spec, x), k.elem) for x in e.items))
        if e.nid in spec.reads:
            return ValueRead()
        operand = scalar_read(e)
        if operand is not None and operand.nid in spec.reads:
            return ScalarRead(operand, None if e.target == "item" else e.target)  # type: ignore[attr-defined]
        return None

    def call_plan(self, spec: Spec, s: ProgramCall) -> CallPlan:
        """How the calls of ``s`` run: concurrent ones fork the depth (with ``concurrency``), on child fibers
        where the program runs on fibers and no callee changes host state that outlives it (§4.2)."""
        conc = s.concurrent and self.concurrency
        forkable = not any(key in self.effects for key, _ in s.calls)  # else fibers could reorder host effects
        mode = (CallMode.FIBERS if conc and self.fibers and forkable else CallMode.FORKED if conc
                else CallMode.SEQUENTIAL)
        calls = tuple((key, tuple((a, coercion(self.kind(spec, a), k)) for a, k in zip(args, key[1])))
                      for key, args in s.calls)
        rets = [self.specs[key].ret for key, _ in s.calls]
        src = TupleK(tuple(rets)) if s.concurrent else rets[0]
        return CallPlan(mode, calls, s.concurrent, coercion(src, target_kind(spec, s.target)))

    def ghost_padding(self, s: ir.If) -> tuple[int, int]:
        """Ghost operators (§4.1, App. A.3): depth padding that makes both branches advance the counter
        equally. Only when both branches fall through to the code after the ``if`` and advance the depth
        statically (no loops or calls)."""
        pad = self._padding.get(id(s))
        if pad is None:
            pad = self._padding[id(s)] = self._ghost_padding(s.body, s.orelse)
        return pad

    def _ghost_padding(self, b: list[ir.Stmt], o: list[ir.Stmt]) -> tuple[int, int]:
        if not self.ghosts or ends_in_return(b) or ends_in_return(o):
            return 0, 0
        nb, no = static_advance(b), static_advance(o)
        if nb is None or no is None:
            return 0, 0
        top = max(nb, no)
        return top - nb, top - no

    def prefetch(self, s: ir.For) -> Prefetch | None:
        """The hoisted blocks a ``for`` loop's body calls in every iteration with the loop variable as their
        only argument (``x = p.emb[tok]``), when the program runs on fibers: their nodes can be added for
        all items before the loop (§4.2, App. A.1). (On fibers a hoisted group runs when a fiber needs its
        value, so nodes added iteration by iteration run in one launch per flush instead of one per run.)

        Only where no iteration can leave the loop or skip the call (no ``break``/``continue`` of this
        loop, no ``return``), so every node added ahead would have been added anyway.
        """
        t = s.target
        if not self.fibers or t.name is None or may_leave(s.body, nested=False):
            return None
        blocks = tuple(c.block for c in s.body if isinstance(c, BlockCall) and c.block.sdepth is not None
                       and c.block.segment is None and c.block.batched_params
                       and all(p.role != "tensor" and isinstance(p.expr, ir.Name) and p.expr.id == t.name
                               for p in c.block.batched_params))
        return Prefetch(s.nid, t.name, blocks) if blocks else None

