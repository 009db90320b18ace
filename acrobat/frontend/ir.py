"""The typed IR that model functions are parsed into (§3, DESIGN.md "frontend").

A small tree IR: statements and expressions of the supported Python subset,
each carrying its source location ``loc`` and a program-unique node id
``nid``. Kinds (host value, batched tensor, shared value) are not stored in
the nodes: the kind analysis (``acrobat.analysis.kinds``) returns them in a
table keyed by ``nid``, per function specialization.
"""

from __future__ import annotations

import copy
import enum
import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

T = TypeVar("T")
E = TypeVar("E", bound="Expr")

_ids = itertools.count()


def fresh_id() -> int:
    """A new program-unique node id."""
    return next(_ids)


@dataclass(frozen=True, slots=True)
class Loc:
    """A source location: file, 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# ----------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr:
    """An expression node: ``loc`` is its source location, ``nid`` its program-unique id."""

    loc: Loc
    nid: int = field(default_factory=fresh_id, init=False)


@dataclass(eq=False)
class Name(Expr):
    """A variable read: ``id``."""

    id: str


@dataclass(eq=False)
class Const(Expr):
    """A literal constant (number, string, bool, None)."""

    value: Any


@dataclass(eq=False)
class Attr(Expr):
    """``obj.attr``."""

    obj: Expr
    attr: str


@dataclass(eq=False)
class Subscript(Expr):
    """``obj[index]``."""

    obj: Expr
    index: Expr


@dataclass(eq=False)
class Slice(Expr):
    """``lower:upper:step`` inside a subscript."""

    lower: Expr | None
    upper: Expr | None
    step: Expr | None


@dataclass(eq=False)
class TupleExpr(Expr):
    """``(a, b, ...)``."""

    items: list[Expr]


@dataclass(eq=False)
class ListExpr(Expr):
    """``[a, b, ...]``."""

    items: list[Expr]


@dataclass(eq=False)
class BinOp(Expr):
    """``left op right``."""

    op: str  # the Python operator symbol, e.g. "+", "@"
    left: Expr
    right: Expr
    inplace: bool = False  # from ``left op= right``: Python updates ``left`` in place where its type can


@dataclass(eq=False)
class UnaryOp(Expr):
    """``op operand``."""

    op: str  # "-", "+", "not", "~"
    operand: Expr


@dataclass(eq=False)
class Compare(Expr):
    """``a < b <= c``: ``ops`` between consecutive ``operands``."""

    ops: list[str]
    operands: list[Expr]


@dataclass(eq=False)
class BoolOp(Expr):
    """``a and b and ...`` / ``a or b or ...``."""

    op: str  # "and" / "or"
    values: list[Expr]


@dataclass(eq=False)
class IfExp(Expr):
    """``body if test else orelse``."""

    test: Expr
    body: Expr
    orelse: Expr


class CallKind(enum.Enum):
    """What a :class:`Call` calls; each kind fixes what ``Call.target`` holds.

    - ``PROGRAM``: a function of the program; ``target`` is the ``Function`` object of an
      ``@acrobat.function``/``@acrobat.program`` (``acrobat.program.Function``), or the parser's
      ``NestedFunction`` of a nested ``def`` (its captured variables lead ``args``).
    - ``TORCH``: a torch operator; ``target`` is the Python callable (``torch.tanh``, ``F.linear``, or
      a row/segment form the block pass substitutes).
    - ``BUILTIN``: a Python builtin on host values (len/range/reversed/zip/...); ``target`` is its name.
    - ``METHOD``: method ``target`` (a name) of ``receiver``.
    - ``VALUE``: calling the value ``receiver`` itself (e.g. an ``nn.Module`` parameter);
      ``target`` is ``None``.
    - ``HOST``: a plain Python callable (an undecorated helper, ``math.*``, ``print``, a class) run
      as written on host values; ``target`` is the callable.
    """

    PROGRAM = "program"
    TORCH = "torch"
    BUILTIN = "builtin"
    METHOD = "method"
    VALUE = "value"
    HOST = "host"

    def __str__(self) -> str:
        return self.value


STARRED_KEY = "**"
"""The ``kwargs`` key prefix of a call's ``**value`` (no keyword can start with it)."""


def known(table: Mapping[Any, T], target: Any) -> T | None:
    """``table[target]`` for a call's ``target`` (a torch callable), or None; a target that cannot be
    hashed (a callable object defining ``__eq__`` only) is in no table."""
    try:
        return table.get(target)
    except TypeError:
        return None


@dataclass(eq=False)
class Starred(Expr):
    """``*value`` among a call's arguments, or ``**value`` among its keywords (``double``): the items of a
    tuple (the entries of a dict) that the kind analysis knows the size (keys) of, and expands into plain
    arguments (``acrobat.analysis.unpacking``). ``value`` is a variable: the parser puts any other value in
    a fresh one first, or the items of a tuple display in place."""

    value: Name
    double: bool = False


@dataclass(eq=False)
class Call(Expr):
    """A call: ``kind`` says what is called and ``target`` names it (see :class:`CallKind` for what
    ``target`` holds per kind); ``receiver`` is the object of a ``METHOD`` call or the called value of a
    ``VALUE`` call, else ``None``. Parsed calls may hold ``Starred`` arguments (a ``**value`` under the key
    ``STARRED_KEY + str(i)`` of ``kwargs``), until the kind analysis expands them; a ``PROGRAM`` call's
    ``args`` are then in parameter order and its ``kwargs`` empty."""

    kind: CallKind
    target: Any
    args: list[Expr]
    kwargs: dict[str, Expr]
    receiver: Expr | None = None

    def __str__(self) -> str:
        """What is called, e.g. ``torch:tanh``, ``method:append``, ``program:cell``, ``value``."""
        if self.kind is CallKind.VALUE:
            return str(self.kind)
        what = self.target if isinstance(self.target, str) else (
            getattr(self.target, "__name__", None) or getattr(self.target, "name", None) or repr(self.target))
        return f"{self.kind}:{what}"


@dataclass(eq=False)
class DictExpr(Expr):
    """``{"h": h, "c": c}``: a dict with constant string keys (a record of values)."""

    keys: list[str]
    values: list[Expr]


@dataclass(eq=False)
class Concurrent(Expr):
    """``acrobat.concurrent(f(a), g(b), ...)``: independent program calls (§4.1)."""

    calls: list[Call]


# ------------------------------------------------------------------ statements


@dataclass(eq=False)
class Stmt:
    """A statement node: ``loc`` is its source location, ``nid`` its program-unique id."""

    loc: Loc
    nid: int = field(default_factory=fresh_id, init=False)


@dataclass(eq=False)
class Target:
    """An assignment target: a name, or a (nested) tuple of targets."""

    name: str | None = None
    items: list["Target"] | None = None
    starred: bool = False  # ``*rest`` inside a tuple target: takes the remaining items as a list

    def names(self) -> list[str]:
        if self.name is not None:
            return [self.name]
        return [n for t in self.items or [] for n in t.names()]

    def rename(self, names: Mapping[str, str]) -> None:
        """Bind the names ``names`` maps (old -> new) to their new names instead, in place, nested targets too."""
        if self.name is not None:
            self.name = names.get(self.name, self.name)
        for item in self.items or []:
            item.rename(names)


@dataclass(eq=False)
class Assign(Stmt):
    """``target = value``."""

    target: Target
    value: Expr


@dataclass(eq=False)
class ExprStmt(Stmt):
    """An expression evaluated for its effect (e.g. ``xs.append(x)``)."""

    value: Expr


@dataclass(eq=False)
class Return(Stmt):
    """``return value``."""

    value: Expr | None


@dataclass(eq=False)
class If(Stmt):
    """``if test: body else: orelse``."""

    test: Expr
    body: list[Stmt]
    orelse: list[Stmt]


@dataclass(eq=False)
class For(Stmt):
    """``for target in iter: body``."""

    target: Target
    iter: Expr
    body: list[Stmt]


@dataclass(eq=False)
class While(Stmt):
    """``while test: body``."""

    test: Expr
    body: list[Stmt]


@dataclass(eq=False)
class Break(Stmt):
    """``break``: leave the innermost loop."""


@dataclass(eq=False)
class Continue(Stmt):
    """``continue``: go on with the innermost loop's next iteration."""


@dataclass(eq=False)
class PhaseMark(Stmt):
    """``acrobat.phase()``: an explicit program-phase boundary (§4.1)."""


@dataclass(eq=False)
class StageMark(Stmt):
    """Inserted by the compiler (``acrobat.analysis.phases``), never parsed: the start of stage ``index`` of
    each iteration of a staged loop, which has ``stages`` stages per iteration (§4.1, program phases)."""

    index: int = 0
    stages: int = 1


@dataclass(eq=False)
class Pass(Stmt):
    """``pass``."""

    pass


@dataclass(eq=False)
class Function:
    """One parsed ``@acrobat.function`` / ``@acrobat.program``."""

    name: str
    params: list[str]
    body: list[Stmt]
    loc: Loc
    source_lines: dict[int, str]  # line number -> source text, for error messages
    # where the body turns autograd off (`with torch.no_grad():`), which the static tier runs inline
    grad_off: list[Loc] = field(default_factory=list)
    # a dynamic region (``acrobat.analysis.regions.Region``): the function runs as the user's own Python, its
    # body is not analysed (empty here) and its result has the region's kind
    region: Any = None


# ------------------------------------------------------------------- traversal


def children(node: Expr) -> list[Expr]:
    """The direct sub-expressions of an expression, in evaluation order."""
    match node:
        case Attr(obj=o):
            return [o]
        case Subscript(obj=o, index=i):
            return [o, i]
        case Slice(lower=a, upper=b, step=c):
            return [e for e in (a, b, c) if e is not None]
        case TupleExpr(items=items) | ListExpr(items=items):
            return list(items)
        case DictExpr(values=vs):
            return list(vs)
        case BinOp(left=a, right=b):
            return [a, b]
        case UnaryOp(operand=a):
            return [a]
        case Compare(operands=ops):
            return list(ops)
        case BoolOp(values=vs):
            return list(vs)
        case IfExp(test=t, body=b, orelse=o):
            return [t, b, o]
        case Call(receiver=r, args=args, kwargs=kw):
            return ([r] if r is not None else []) + list(args) + list(kw.values())
        case Concurrent(calls=calls):
            return list(calls)
        case Starred(value=v):
            return [v]
    return []


def walk(node: Expr):
    """All expressions of a tree, parents before children."""
    stack = [node]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(reversed(children(e)))


def renumbered(node: E) -> E:
    """A deep copy of the expression ``node`` whose nodes all have new ids."""
    out = copy.deepcopy(node)
    for e in walk(out):
        e.nid = fresh_id()
    return out


def names_read(node: Expr) -> set[str]:
    """Variable names an expression reads."""
    return {e.id for e in walk(node) if isinstance(e, Name)}


def stmt_exprs(s: Stmt) -> list[Expr]:
    """The expressions directly held by a statement (not those of nested bodies)."""
    match s:
        case Assign(value=v) | ExprStmt(value=v):
            return [v]
        case Return(value=v):
            return [v] if v is not None else []
        case If(test=t) | While(test=t):
            return [t]
        case For(iter=i):
            return [i]
    return []


def sub_bodies(s: Stmt) -> list[list[Stmt]]:
    """The nested statement lists of a statement."""
    match s:
        case If(body=b, orelse=o):
            return [b, o]
        case For(body=b) | While(body=b):
            return [b]
    return []


def walk_stmts(body: list[Stmt]):
    """All statements of a body, nested ones included, in source order."""
    for s in body:
        yield s
        for sub in sub_bodies(s):
            yield from walk_stmts(sub)


def copy_lists(body: list[Stmt]) -> list[Stmt]:
    """A copy of ``body`` and of the statements holding nested bodies (``if``, ``for``, ``while``), their
    nested lists copied the same way; the other statements and all expressions are shared, and every copy
    keeps its node id. A pass that inserts or removes statements in a copy leaves ``body`` as it was."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, (If, For, While)):
            s = copy.copy(s)
            s.body = copy_lists(s.body)
            if isinstance(s, If):
                s.orelse = copy_lists(s.orelse)
        out.append(s)
    return out


def find_expr(body: list[Stmt], nid: int) -> Expr:
    """The expression with node id ``nid`` in ``body`` (nested statements included).

    Raises:
        KeyError: no expression there has that id.
    """
    for s in walk_stmts(body):
        for root in stmt_exprs(s):
            for e in walk(root):
                if e.nid == nid:
                    return e
    raise KeyError(nid)


def assigned_names(s: Stmt) -> set[str]:
    """Names a statement (with its nested bodies) assigns."""
    out: set[str] = set()
    for t in walk_stmts([s]):
        if isinstance(t, Assign):
            out.update(t.target.names())
        elif isinstance(t, For):
            out.update(t.target.names())
    return out
