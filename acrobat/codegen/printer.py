"""Print IR back to Python source: expressions for generated code (``expr_source``), and statement lists,
the lowered ones included, as readable text for the ``ACROBAT_DEBUG`` dumps of ``acrobat.pipeline``
(``body_lines``)."""

from __future__ import annotations

import operator
import re
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

from acrobat.analysis.lowered import Block, BlockCall, ProgramCall
from acrobat.frontend import ir

#: ``a op b`` and ``a op b`` comparisons as the calls Python makes (the interpreter evaluates with them; blocks
#: call them where an operand is a host number, ``acrobat.codegen.blocks``).
BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
CMPOPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne, "is": operator.is_, "is not": operator.is_not,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}

#: ``a op= b`` as the call Python makes: it updates ``a`` in place where ``a``'s type can (a list), else
#: returns ``a op b``. The kind analysis rejects it on tensors, where it would write into a tensor.
INPLACE = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv, "//": operator.ifloordiv,
    "%": operator.imod, "**": operator.ipow, "@": operator.imatmul, "&": operator.iand, "|": operator.ior,
    "^": operator.ixor, "<<": operator.ilshift, ">>": operator.irshift,
}


class Globals:
    """The globals of generated code: Python objects (torch ops, builtins) under unique aliases, and the
    names of the generated functions.

    Every global name is ``_{hint}_{n}`` with ``n`` unique, so no two collide; the parser renames the
    model's own variables that start with ``_`` (``acrobat.frontend.parser.MANGLE``), so no variable of the
    model can shadow a global or a local name of generated code.
    """

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._by_id: dict[int, str] = {}
        self._count = 0

    def fresh(self, hint: str) -> str:
        """A new global name of generated code, ``_{hint}_{n}`` (``hint`` made an identifier)."""
        name = f"_{re.sub(r'[^0-9A-Za-z_]', '_', hint)}_{self._count}"
        self._count += 1
        return name

    def alias(self, obj: Any, hint: str) -> str:
        """The global name generated code uses for ``obj`` (created on first use)."""
        if id(obj) not in self._by_id:
            name = self.fresh(hint)
            self._by_id[id(obj)] = name
            self.values[name] = obj
        return self._by_id[id(obj)]

    def extended(self) -> "Globals":
        """A copy to add names to, leaving this one as it is (each code-writing pass of ``acrobat.pipeline``
        extends the globals of the pass before it)."""
        g = Globals()
        g.values, g._by_id, g._count = dict(self.values), dict(self._by_id), self._count
        return g


def target_source(t: ir.Target) -> str:
    """``a`` or ``(a, (b, c))``."""
    if t.name is not None:
        return "*" + t.name if t.starred else t.name
    return "(" + "".join(target_source(i) + ", " for i in t.items or []) + ")"


def arguments_source(args: list[ir.Expr], kwargs: dict[str, ir.Expr], p: Callable[[ir.Expr], str]) -> str:
    """A call's arguments as Python source, each printed by ``p`` (a ``**value`` without its key)."""
    return ", ".join([p(a) for a in args] + [p(v) if isinstance(v, ir.Starred) else f"{k}={p(v)}"
                                             for k, v in kwargs.items()])


def expr_source(e: ir.Expr, g: Globals, subst: Callable[[ir.Expr], str | None]) -> str:
    """Python source of ``e``; ``subst(node)`` may replace a sub-expression by a name."""
    s = subst(e)
    if s is not None:
        return s

    def p(x: ir.Expr) -> str:
        return expr_source(x, g, subst)

    match e:
        case ir.Name(id=name):
            return name
        case ir.Const(value=v) if v is None or isinstance(v, (int, float, bool, str)):
            return repr(v)
        case ir.Const(value=v):  # e.g. torch.float32: a global of the generated code
            return g.alias(v, "const")
        case ir.Attr(obj=o, attr=a):
            return f"{p(o)}.{a}"
        case ir.Subscript(obj=o, index=ir.Slice(lower=a, upper=b, step=c)):
            return f"{p(o)}[{':'.join('' if x is None else p(x) for x in (a, b, c))}]"
        case ir.Subscript(obj=o, index=i):
            return f"{p(o)}[{p(i)}]"
        case ir.Slice(lower=a, upper=b, step=c):  # in a tuple index or an argument (`item_set(x, (0, 1:3), v)`)
            return f"slice({', '.join('None' if x is None else p(x) for x in (a, b, c))})"
        case ir.TupleExpr(items=items):
            return "(" + "".join(p(x) + ", " for x in items) + ")"
        case ir.ListExpr(items=items):
            return "[" + ", ".join(p(x) for x in items) + "]"
        case ir.BinOp(op=op, left=a, right=b, inplace=True):  # a list's `+=` extends it in place
            return f"{g.alias(INPLACE[op], INPLACE[op].__name__)}({p(a)}, {p(b)})"
        case ir.DictExpr(keys=keys, values=vs):
            return "{" + ", ".join(f"{k!r}: {p(v)}" for k, v in zip(keys, vs)) + "}"
        case ir.BinOp(op=op, left=a, right=b):
            return f"({p(a)} {op} {p(b)})"
        case ir.UnaryOp(op=op, operand=a):
            return f"({op} {p(a)})" if op == "not" else f"({op}{p(a)})"
        case ir.Compare(ops=ops, operands=xs):
            parts = [p(xs[0])]
            for op, x in zip(ops, xs[1:]):
                parts += [op, p(x)]
            return "(" + " ".join(parts) + ")"
        case ir.BoolOp(op=op, values=vs):
            return "(" + f" {op} ".join(p(x) for x in vs) + ")"
        case ir.IfExp(test=t, body=b, orelse=o):
            return f"({p(b)} if {p(t)} else {p(o)})"
        case ir.Starred(value=v, double=double):  # a parsed call's `*pair`, `**kw` (expanded by the kind analysis)
            return ("**" if double else "*") + p(v)
        case ir.Call(kind=kind, target=what, args=args, kwargs=kw, receiver=r):
            arg_src = arguments_source(args, kw, p)
            match kind:
                case ir.CallKind.TORCH:
                    return f"{g.alias(what, getattr(what, '__name__', 'op'))}({arg_src})"
                case ir.CallKind.BUILTIN:
                    return f"{what}({arg_src})"
                case ir.CallKind.HOST:
                    return f"{g.alias(what, getattr(what, '__name__', 'fn'))}({arg_src})"
                case ir.CallKind.METHOD:
                    return f"{p(r)}.{what}({arg_src})"  # type: ignore[arg-type]
                case ir.CallKind.VALUE:
                    return f"{p(r)}({arg_src})"  # type: ignore[arg-type]
    raise TypeError(f"cannot print {type(e).__name__} here")


class ReadableNames(Globals):
    """Globals for reading, not running: an object is printed as its Python name (``torch.tanh``,
    ``F.linear`` as ``torch.nn.functional.linear``), else as its ``repr`` (``torch.float32``)."""

    def alias(self, obj: Any, hint: str) -> str:
        name = getattr(obj, "__name__", None)
        if name is None:
            return repr(obj)
        module = getattr(obj, "__module__", None) or getattr(getattr(obj, "__objclass__", None), "__module__", None)
        if module in (None, "builtins"):
            return name
        if getattr(sys.modules.get(module), name, None) is not obj:  # not reached by its module's name: a method
            name = getattr(obj, "__qualname__", name)
        return f"{module}.{name}"


def readable_source(e: ir.Expr, names: Mapping[int, str] = MappingProxyType({})) -> str:
    """``e`` as readable Python: operators by their Python names, program calls and ``acrobat.concurrent``
    (which ``expr_source`` leaves to the skeleton writer) as written, and an expression whose id ``names``
    maps as that code (a block's parameters, ``Block.subst``)."""
    g = ReadableNames()

    def subst(x: ir.Expr) -> str | None:
        if x.nid in names:
            return names[x.nid]

        if isinstance(x, ir.Concurrent):
            return "acrobat.concurrent(" + ", ".join(expr_source(c, g, subst) for c in x.calls) + ")"
        if isinstance(x, ir.Call) and x.kind is ir.CallKind.PROGRAM:
            args = arguments_source(x.args, x.kwargs, lambda a: expr_source(a, g, subst))
            return f"{getattr(x.target, '__name__', None) or x.target.name}({args})"
        return None

    return expr_source(e, g, subst)


def body_lines(body: list[ir.Stmt], depth: int = 0) -> list[str]:
    """The statements of ``body`` as readable lines indented by ``depth`` levels (4 spaces each), nested bodies
    included: parsed statements as Python; a ``BlockCall`` as the block's header (``block_header``) with its
    tensor statements under it, each prefixed ``|``; a ``ProgramCall`` as its call(s); phase and stage marks
    as comments."""
    pad = "    " * depth
    out: list[str] = []

    def nested(b: list[ir.Stmt]) -> list[str]:
        return body_lines(b, depth + 1) or [pad + "    pass"]

    for s in body:
        match s:
            case BlockCall(block=b):
                out.append(pad + block_header(b))
                out += [f"{pad}  | {target_source(t.target)} = {readable_source(t.value, b.subst)}" for t in b.stmts]
            case ProgramCall(target=t, calls=calls, concurrent=conc):
                texts = [f"{getattr(key[0], '__name__', None) or key[0].name}"
                         f"({', '.join(readable_source(a) for a in args)})" for key, args in calls]
                call = f"acrobat.concurrent({', '.join(texts)})" if conc else ", ".join(texts)
                out.append(f"{pad}{target_source(t) + ' = ' if t is not None else ''}{call}  # program call")
            case ir.Assign(target=t, value=v):
                out.append(f"{pad}{target_source(t)} = {readable_source(v)}")
            case ir.ExprStmt(value=v):
                out.append(pad + readable_source(v))
            case ir.Return(value=v):
                out.append(pad + "return" + ("" if v is None else " " + readable_source(v)))
            case ir.If(test=t, body=b, orelse=o):
                out += [f"{pad}if {readable_source(t)}:", *nested(b)]
                if o:
                    out += [pad + "else:", *nested(o)]
            case ir.For(target=t, iter=i, body=b):
                out += [f"{pad}for {target_source(t)} in {readable_source(i)}:  # loop {s.nid}", *nested(b)]
            case ir.While(test=t, body=b):
                out += [f"{pad}while {readable_source(t)}:  # loop {s.nid}", *nested(b)]
            case ir.PhaseMark():
                out.append(pad + "# ---- program phase boundary (§4.1)")
            case ir.StageMark(index=i, stages=n):
                out.append(f"{pad}# ---- loop stage {i} of {n}")
            case _:  # Break, Continue, Pass
                out.append(pad + type(s).__name__.lower())
    return out


def block_header(b: Block) -> str:
    """One line naming static block ``b``: id, name, depth (static when hoisted, App. A.1; else inline, §4.1),
    outputs and parameters with their roles (a shared one with its slot, §5.1)."""
    where = f"static depth {b.sdepth}" if b.sdepth is not None else "inline depth"
    kind = f"segment {b.segment.op}" if b.segment is not None else "block"
    params = ", ".join(f"{p.name}: shared _S[{p.slot}]" if p.role == "shared" else
                       f"{p.name}: {p.role}" + ("" if p.expr is None else f" = {readable_source(p.expr)}")
                       for p in b.params)
    outs = ", ".join(b.outputs)
    return f"[{kind} {b.id} `{b.name}`, {where}] ({outs}) <- ({params})"
