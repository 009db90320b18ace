"""Print IR expressions back to Python source, for generated code."""

from __future__ import annotations

import operator
import re
from typing import Any, Callable

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


def target_source(t: ir.Target) -> str:
    """``a`` or ``(a, (b, c))``."""
    if t.name is not None:
        return "*" + t.name if t.starred else t.name
    return "(" + "".join(target_source(i) + ", " for i in t.items or []) + ")"


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
        case ir.Subscript(obj=o, index=i):
            return f"{p(o)}[{p(i)}]"
        case ir.Slice(lower=a, upper=b, step=c):
            return ":".join("" if x is None else p(x) for x in (a, b, c))
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
        case ir.Call(kind=kind, target=what, args=args, kwargs=kw, receiver=r):
            arg_src = ", ".join([p(a) for a in args] + [f"{k}={p(v)}" for k, v in kw.items()])
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
