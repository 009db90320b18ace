"""Dynamic regions: a program function the static analysis rejects runs as the user's own Python (issue 18 §1).

When the static tier rejects a construct inside a program function that is not the entry (a decorated
``@acrobat.function`` or an undecorated helper analysed as one), and the rest of the program is static, that
function becomes a *dynamic region* instead of sending the whole program to the dynamic tier: the skeleton
calls it for the instance, on the instance's fiber (§4.2), with its tensor arguments as the dynamic tier's lazy
values (``acrobat.runtime.dynamic``), so its torch operators are DFG nodes of the same run and batched across
instances at run time, and its tensor results come back to the static code as handles (``Runtime.region``).

A rejected construct in the entry, or in a function that cannot be a region, makes the smallest statement or loop
holding it a region instead, by outlining it into a function of its own (``acrobat.analysis.outline``).

Only a function that can be shown to be exact becomes a region; anything else keeps the whole-program fallback:

- the region's own code changes no host state that outlives it: no ``global``/``nonlocal``, no ``yield`` (a
  generator's result cannot cross), no store into an attribute, and a store into an item (``d[k] = v``) or a
  changing method (``xs.append(v)``, ``t.add_(1)``) only on a local name bound nowhere but to a fresh
  container (``d = {}``, ``xs = []``, a comprehension): the caller's objects, lists and tensors are never
  written (``pure``); the shared arguments' host state is also compared around every call at run time, and so
  are its own arguments (an augmented assignment, ``h += 1`` of a tensor or ``xs += [h]`` of a list, changes
  the caller's value: the batch then reruns in the dynamic tier, ``Runtime.region``);
- it returns a value on every path: one tensor, or a tuple display of tensors of one length on every
  ``return`` (``result_kind``; checked at run time, where anything else reruns the batch in the dynamic tier);
- it is given tensors, host data, shared values and tuples, lists, dicts or optionals of them
  (``crosses``): not a stacked list (a ragged kind), not a module chosen per instance. A call that gives it
  stacked lists (and otherwise tensors, shared values and host data) makes it a padded function instead
  (``acrobat.analysis.padded``).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from acrobat.analysis import padded
from acrobat.analysis.kinds import (DYNAMIC, DictK, HostK, Kind, ListK, OptionalK, SharedK, TensorK, TupleK)
from acrobat.errors import CompileError
from acrobat.frontend.parser import dedented

MAX_REGIONS = 8
"""Functions of one program made regions at most (each is one more compile)."""

#: Method names that change their receiver in place (Python's containers; every torch ``name_`` method too).
_CHANGING = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add",
                       "discard", "sort", "reverse", "popitem", "__setitem__", "__delitem__", "__iadd__",
                       "__isub__", "__imul__", "__itruediv__", "copy_", "set_", "resize_"})
#: Builtins through which a function can change what it does not own.
_ESCAPES = frozenset({"setattr", "delattr", "globals", "locals", "vars", "exec", "eval", "__import__"})


@dataclass(frozen=True, eq=False)
class Region:
    """A program function run as the user's own Python in the dynamic tier, inside a static program.

    ``fn`` is the user's function (called by ``call`` with the instance's arguments, tensors as ``Lazy``
    values); ``name`` its name, ``where`` its ``file:line``; ``reason`` the ``CompileError`` the static tier gave
    for it (with its fix); ``arity`` the length of the tuple it returns (None: one tensor); ``keywords`` the
    names of its keyword-only parameters, ``star`` whether it takes ``*rest``; ``outline`` the statement it was
    outlined from (``acrobat.analysis.outline.Outline``; None: a function of the program, ``where`` its ``def``).
    """

    fn: Callable
    name: str
    where: str
    reason: str
    arity: int | None
    keywords: tuple[str, ...] = ()
    star: bool = False
    outline: Any = None
    tree: ast.FunctionDef | None = None  # its parsed source (a padded function reads its result's form there)
    padded_only: bool = False  # under Options(strict=True): it may run as a padded function only
    ragged: tuple[bool, ...] | None = None  # a padded run's results: stacked list or not (acrobat.analysis.padded_runs)

    def call(self, args: Sequence[Any]) -> Any:
        """``fn`` called with ``args``, its arguments in the IR's parameter order (``parser.bind_arguments``:
        every parameter of the signature in order, ``*rest`` one tuple): the positional ones as positional
        arguments, the ``*rest`` tuple spread, keyword-only ones by name, as the plain call passed them."""
        n = len(args) - len(self.keywords)
        kw = dict(zip(self.keywords, args[n:]))
        if self.star:
            return self.fn(*args[:n - 1], *args[n - 1], **kw)
        return self.fn(*args[:n], **kw)

    @property
    def kind(self) -> Kind:
        """The kind of its result in the static program: one per-instance tensor, or a tuple of them."""
        return DYNAMIC if self.arity is None else TupleK((DYNAMIC,) * self.arity)

    def describe(self) -> str:
        """``name (file:line): reason``, as ``explain`` and the run report list it (an outlined statement: its
        line and the function it is in)."""
        what = (f"`{self.name}` (the statement at {self.where} of `{self.outline.parent.__name__}`)"
                if self.outline is not None else f"`{self.name}` ({self.where})")
        return f"{what}: {self.reason.strip().splitlines()[0]}"


def region_of(err: CompileError, function: Any, entry: Any) -> Region | str:
    """The region made of ``function`` (an ``acrobat.Function``, the one whose analysis raised ``err``), or why
    it cannot be one (a sentence).

    ``entry`` is the program itself: the entry never becomes a region (the whole program is then dynamic).
    """
    fn = getattr(function, "fn", None)
    snapshot = getattr(function, "snapshot", None)
    if function is entry or fn is None or snapshot is None:
        return "the rejected construct is in the entry, or in no function of the program"
    try:
        lines, first = snapshot.function_lines()
        tree = ast.parse("".join(dedented(lines)))
    except (CompileError, SyntaxError) as exc:
        return f"its source cannot be read ({exc})"
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        return "it is no plain function definition"
    if err.filename != snapshot.filename or not first <= err.line < first + len(lines):
        return "the rejected construct is not inside it"
    why = pure(fdef)
    if why is not None:
        return why
    arity = returned_arity(fdef)
    if isinstance(arity, str):
        return arity
    params = inspect.signature(fn).parameters.values()
    if any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params):
        return "it takes `**kwargs`, which a program call does not bind"
    keywords = tuple(q.name for q in params if q.kind is inspect.Parameter.KEYWORD_ONLY)
    star = any(q.kind is inspect.Parameter.VAR_POSITIONAL for q in params)
    if star and keywords:
        return "it takes keyword-only parameters after `*rest`, which a program call does not bind"
    padded_tree = fdef if padded.type_read(fdef, fn.__globals__) is None else None  # None: no padded function
    return Region(fn, function.__name__, f"{snapshot.filename}:{first}", str(err), arity, keywords, star,
                  tree=padded_tree)


def crosses(k: Kind) -> bool:
    """Whether a value of kind ``k`` may be handed to a region: tensors (as lazy values), host data, shared
    values, and tuples, lists, dicts and optionals of them."""
    match k:
        case TensorK() | HostK() | SharedK():
            return True
        case TupleK(items=items) | DictK(items=items):
            return all(crosses(i) for i in items)
        case ListK(elem=elem) | OptionalK(inner=elem):
            return crosses(elem)
    return False


def pure(fdef: ast.FunctionDef) -> str | None:
    """Why the function ``fdef`` may change host state that outlives its call (a sentence), or None when its
    own code changes only what it made itself (see the module docstring)."""
    params = {a.arg for a in [*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs]}
    params |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
    fresh = _fresh_names(fdef) - params
    for node in ast.walk(fdef):
        line = f"line {getattr(node, 'lineno', fdef.lineno)}"
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return f"it declares `{'global' if isinstance(node, ast.Global) else 'nonlocal'}` ({line})"
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)) and _own(fdef, node):
            return f"it is a generator or coroutine ({line}): its result cannot cross into the static program"
        for t in _stored(node):
            if isinstance(t, ast.Attribute):
                return f"it stores into an attribute ({line}): an object it does not own may change"
            if isinstance(t, ast.Subscript) and _root(t) not in fresh:
                return f"it stores into an item of a value it did not make ({line})"
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in _ESCAPES:
                return f"it calls `{f.id}` ({line})"
            if isinstance(f, ast.Attribute) and (f.attr in _CHANGING or f.attr.endswith("_") and not
                                                 f.attr.endswith("__")) and _root(f.value) not in fresh:
                return f"it calls `.{f.attr}()` on a value it did not make ({line}): the caller's value may change"
    return None


def returned_arity(fdef: ast.FunctionDef) -> int | None | str:
    """The length of the tuple display every ``return`` of ``fdef``'s own body gives, None where every one
    returns a single value, or why its result cannot cross (a sentence: no value returned, mixed forms)."""
    returns = [n for n in ast.walk(fdef) if isinstance(n, ast.Return) and _own(fdef, n)]
    if not returns or any(r.value is None for r in returns) or not _ends_in_return(fdef.body):
        return "it does not return a value on every path"
    forms = {len(r.value.elts) if isinstance(r.value, ast.Tuple) else None for r in returns}  # type: ignore[union-attr]
    if len(forms) > 1:
        return "its returns give tuples of different lengths, or a tuple and a single value"
    return forms.pop()


def _ends_in_return(body: list[ast.stmt]) -> bool:
    """Whether control can never fall through the end of ``body`` (a ``return`` or ``raise`` last, or an
    ``if`` whose branches both end so)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _ends_in_return(last.body) and _ends_in_return(last.orelse)
    if isinstance(last, ast.Try):
        return (_ends_in_return(last.body) or _ends_in_return(last.orelse)) and all(
            _ends_in_return(h.body) for h in last.handlers) or _ends_in_return(last.finalbody)
    if isinstance(last, ast.With):
        return _ends_in_return(last.body)
    return False


def _own(fdef: ast.FunctionDef, node: ast.AST) -> bool:
    """Whether ``node`` belongs to ``fdef``'s own body, not to a function or lambda nested in it."""
    stack: list[ast.AST] = list(fdef.body)
    while stack:
        n = stack.pop()
        if n is node:
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))
    return False


def _stored(node: ast.AST) -> list[ast.expr]:
    """The targets ``node`` stores into or deletes (tuple targets unpacked)."""
    match node:
        case ast.Assign(targets=ts) | ast.Delete(targets=ts):
            targets = list(ts)
        case ast.AugAssign(target=t) | ast.AnnAssign(target=t) | ast.For(target=t) | ast.comprehension(target=t):
            targets = [t]
        case ast.withitem(optional_vars=t) if t is not None:
            targets = [t]
        case _:
            return []
    out = []
    while targets:
        t = targets.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            targets.extend(t.elts)
        elif isinstance(t, ast.Starred):
            targets.append(t.value)
        else:
            out.append(t)
    return out


def _root(e: ast.expr) -> str | None:
    """The name an item or attribute chain starts from (``d`` of ``d["a"][0]``), or None."""
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


_FRESH_CALLS = frozenset({"list", "dict", "set"})


def _fresh_names(fdef: ast.FunctionDef) -> set[str]:
    """The local names of ``fdef`` bound only (and at least once) to a container made there: a list, dict or
    set display, a comprehension, or ``list()``/``dict()``/``set()`` of nothing."""
    made: set[str] = set()
    other: set[str] = set()
    for node in ast.walk(fdef):
        for t in _stored(node):
            if isinstance(t, ast.Name):
                value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
                fresh = isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or (
                    isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _FRESH_CALLS
                    and not value.args and not value.keywords)
                (made if fresh and not isinstance(node, ast.AugAssign) else other).add(t.id)
        if isinstance(node, ast.NamedExpr):
            other.add(node.target.id)
    return made - other

