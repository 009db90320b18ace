"""Statement regions by outlining: a rejected statement or loop becomes a function of its own (issue 18 §1).

When the static analysis rejects a construct inside a program function that cannot be a dynamic region as a
whole (the entry, or a helper ``acrobat.analysis.regions.region_of`` refuses), the smallest statement of that
function that holds the construct and can be outlined exactly is *outlined*: a new function, named freshly
(``<function>_region<k>``), whose parameters are the statement's live-in variables and which returns its
live-out variables, becomes a dynamic region (``acrobat.analysis.regions``), and the statement is replaced by
``a, b = <function>_region<k>(x, y)`` in the IR the parser makes of the function (``Outline.apply``). The
candidates are the statement on the rejected line, then each enclosing ``for``/``while``/``if``/``with``/``try``,
walking outwards; the first one that passes every check below is taken.

The outlined function is the user's own statement: compiled from the function's source with its file name and
line numbers (an error inside it names the user's line), in the function's globals, with the function's
closure cells for the names it reads from an enclosing function. A statement is outlined only where that is
exact (otherwise the next enclosing statement is tried, and with none left the program keeps today's fallback):

- no ``return``, ``yield``, ``await``, and no ``break``/``continue`` that leaves it; no ``def``/``class`` in it;
  the function declares no ``global``/``nonlocal`` and deletes no variable;
- every variable it reads that the function binds is definitely bound before it (a parameter of the new
  function), or bound by the statement itself before it is read (a local of the new function);
- every variable it binds that is read after it (or in the next iteration of an enclosing loop) is definitely
  bound when it ends, and none of these is plainly not a tensor (bound to a literal, a container display, a
  comprehension or a lambda, or changed by a container method): the region's results are tensors
  (``Runtime.region`` checks this for each instance; anything else reruns the batch in the dynamic tier);
- the new function passes ``regions.pure`` (it writes only containers it made) and does not contain an
  earlier outlined statement.
"""

from __future__ import annotations

import __future__
import ast
import copy
import functools
import operator
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from acrobat.analysis.regions import Region, pure
from acrobat.errors import CompileError
from acrobat.frontend.parser import dedented

#: The ``__future__`` flags a code object carries in ``co_flags`` (the outlined statement is compiled with its
#: function's).
_FUTURE_FLAGS = functools.reduce(operator.or_, (getattr(__future__, f).compiler_flag
                                                for f in __future__.all_feature_names))
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: Builtins that make host data (a result bound to a call of one is no tensor).
_HOST_CALLS = frozenset({"list", "dict", "set", "tuple", "sorted", "reversed", "map", "filter", "zip", "enumerate",
                         "range", "len", "str", "int", "float", "bool", "repr", "format"})
#: Methods whose receiver is a container, not a tensor (a result changed by one is host data).
_CONTAINER_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                                "add", "discard", "sort", "reverse", "popitem", "keys", "values", "items"})


@dataclass(frozen=True, eq=False)
class Outline:
    """A statement of ``parent`` (an ``acrobat.Function``) outlined into the region function ``function``.

    ``line``/``col``/``end_line`` locate the statement in its file (1-based lines, as ``ast`` gives them);
    ``name`` is the new function's name, ``params`` its parameters (the statement's live-ins) and ``results``
    the variables it returns (the live-outs, a tuple display of them unless there is one). A run of consecutive
    statements (``acrobat.analysis.padded_runs``) is outlined the same way, ``end_line`` its last line;
    ``hoisted`` names the parameters the caller binds, just before the call, to an expression taken out of the
    run (``t = torch.tensor(tokens)``).
    """

    parent: Any
    line: int
    col: int
    end_line: int
    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    function: Any
    hoisted: tuple[tuple[str, str], ...] = ()  # (parameter, source of the expression the caller binds it to)

    def apply(self, fdef: ast.FunctionDef, first: int) -> None:
        """Replace, in ``fdef`` (``parent``'s definition parsed from its dedented lines, ``first`` the file line
        of its first), the statement (or the run of consecutive statements from ``line``/``col`` to
        ``end_line``) by the call of the new function, after the assignments of its ``hoisted`` arguments, in
        place.

        Raises:
            CompileError: the statement is not found (the function's source is not the one outlined).
        """
        for body, i, st in _statements(fdef.body):
            if st.lineno + first - 1 != self.line or st.col_offset != self.col:
                continue
            k = next((k for k in range(i, len(body)) if (body[k].end_lineno or 0) + first - 1 == self.end_line), None)
            if k is None:
                continue
            made = [*(ast.Assign([ast.Name(n, ast.Store())], ast.parse(e, mode="eval").body)
                      for n, e in self.hoisted), self.call()]
            for new in made:
                for node in ast.walk(new):
                    ast.copy_location(node, st)
            body[i:k + 1] = made
            return
        raise CompileError(f"the statement outlined as `{self.name}` is no longer in `{self.parent.__name__}`",
                           self.function.snapshot.filename, self.line, self.col, fallback=False)

    def call(self) -> ast.stmt:
        """``a, b = name(x, y)`` (``a = name(x, y)`` for one result, ``name(x, y)`` for none)."""
        call = ast.Call(ast.Name(self.name, ast.Load()), [ast.Name(p, ast.Load()) for p in self.params], [])
        if not self.results:
            return ast.Expr(call)
        target: ast.expr = (ast.Name(self.results[0], ast.Store()) if len(self.results) == 1 else
                            ast.Tuple([ast.Name(r, ast.Store()) for r in self.results], ast.Store()))
        return ast.Assign([target], call)


def outline_region(err: CompileError, function: Any, regions: Mapping[Any, Region],
                   wrap: Callable[[Callable], Any]) -> Region | str:
    """The region made by outlining the smallest statement of ``function`` (an ``acrobat.Function``) that holds
    the construct ``err`` rejects, or why none can be (a sentence).

    ``regions`` holds the regions found so far (their outlines in ``function`` are applied first); ``wrap`` makes
    the program function (``acrobat.Function``) of the new Python function.
    """
    parsed = parsed_function(function, regions)
    if isinstance(parsed, str):
        return parsed
    fdef, first = parsed
    snapshot = function.snapshot
    done = [r.outline for r in regions.values() if r.outline is not None and r.outline.parent is function]
    if err.filename != snapshot.filename or not first <= err.line < first + len(snapshot.function_lines()[0]):
        return "the rejected construct is not inside the function"
    if any(o.line <= err.line <= o.end_line for o in done):
        return "the rejected construct is the call of a statement outlined before (what it is given or returns)"
    path = _path(fdef.body, err.line - first + 1)
    if not path:
        return "the rejected construct is in no statement of the function's body"
    why = "no statement holds it"
    taken = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)} | set(function.fn.__globals__)
    for depth in range(len(path) - 1, -1, -1):
        made = outlined(function, fdef, first, path, depth, taken, str(err), wrap)
        if isinstance(made, Region):
            return made
        why = made
    return f"no statement holding it can be outlined: {why}"


def parsed_function(function: Any, regions: Mapping[Any, Region]) -> tuple[ast.FunctionDef, int] | str:
    """The definition of ``function`` (an ``acrobat.Function``) parsed from its source, the statements outlined
    before (``regions``) replaced by their calls, and the file line of its first line; or why it cannot be
    outlined from (a sentence)."""
    fn, snapshot = getattr(function, "fn", None), getattr(function, "snapshot", None)
    if fn is None or snapshot is None or not isinstance(fn, types.FunctionType):
        return "the rejected construct is in no function of the program whose source can be outlined"
    try:
        lines, first = snapshot.function_lines()
        fdef = ast.parse("".join(dedented(lines))).body[0]
    except (CompileError, SyntaxError) as exc:
        return f"its source cannot be read ({exc})"
    if not isinstance(fdef, ast.FunctionDef):
        return "it is no plain function definition"
    for r in regions.values():
        if r.outline is not None and r.outline.parent is function:
            r.outline.apply(fdef, first)
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fdef)):
        return "the function declares `global` or `nonlocal`"
    if any(isinstance(n, ast.Delete) and any(isinstance(t, ast.Name) for t in n.targets) for n in ast.walk(fdef)):
        return "the function deletes a variable"
    return fdef, first


def outlined(function: Any, fdef: ast.FunctionDef, first: int, path: list[tuple[list[ast.stmt], int, ast.stmt]],
             depth: int, taken: set[str], reason: str, wrap: Callable[[Callable], Any],
             hoisted: tuple[tuple[str, str], ...] = (), padded: bool = False,
             helpers: Mapping[str, Any] | None = None) -> Region | str:
    """The region of statement ``path[depth]`` (a ``Run`` for several) of ``fdef`` (``function``'s definition
    from ``parsed_function``) outlined under a fresh name (added to ``taken``), or why it cannot be (a
    sentence); ``reason`` is the region's, ``hoisted`` the outline's (see ``Outline``). ``padded``: the region
    keeps its definition (``Region.tree``), so a call given stacked lists makes it a padded function;
    ``helpers`` are names the statement reads that acrobat bound (``_function``)."""
    found = _liveness(fdef, path, depth, first)
    if isinstance(found, str):
        return found
    params, results = found
    stmt = path[depth][2]
    name = _fresh(f"{fdef.name}_region", taken)
    made = _function(function.fn, function.snapshot.filename, first, fdef, stmt, name, params, results, helpers)
    if isinstance(made, str):
        return made
    pyfn, new_def = made
    impure = pure(new_def)
    if impure is not None:
        return f"the statement at line {stmt.lineno + first - 1} {impure.removeprefix('it ')}"
    where = f"{function.snapshot.filename}:{stmt.lineno + first - 1}"
    outline = Outline(function, stmt.lineno + first - 1, stmt.col_offset, (stmt.end_lineno or stmt.lineno) + first - 1,
                      name, params, results, wrap(pyfn), hoisted)
    return Region(pyfn, name, where, reason, None if len(results) == 1 else len(results), outline=outline,
                  tree=new_def if padded else None)


class Run(ast.Try):
    """Consecutive statements analysed as one statement (a ``try`` without handlers: its body binds what each
    of them binds, in order); never compiled itself (``_function`` outlines its body)."""


def _fresh(stem: str, taken: set[str]) -> str:
    """``stem`` followed by the first number that makes it a name not in ``taken``; added to ``taken``."""
    k = 0
    while f"{stem}{k}" in taken:
        k += 1
    taken.add(f"{stem}{k}")
    return f"{stem}{k}"


def _statements(body: list[ast.stmt]) -> Iterator[tuple[list[ast.stmt], int, ast.stmt]]:
    """Every statement under ``body`` (nested ones too, not inside nested definitions): (its list, index, it)."""
    for i, st in enumerate(body):
        yield body, i, st
        if not isinstance(st, _SCOPES):
            for sub in _bodies(st):
                yield from _statements(sub)


def _bodies(st: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists directly inside compound statement ``st``."""
    out = [getattr(st, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(st, f, None), list)]
    out += [h.body for h in getattr(st, "handlers", ())]
    out += [c.body for c in getattr(st, "cases", ())]
    return out


def _path(body: list[ast.stmt], line: int) -> list[tuple[list[ast.stmt], int, ast.stmt]]:
    """The statements holding ``line``, outermost first: (their list, index, statement)."""
    for i, st in enumerate(body):
        if st.lineno <= line <= (st.end_lineno or st.lineno):
            if isinstance(st, _SCOPES):
                return [(body, i, st)]
            for sub in _bodies(st):
                inner = _path(sub, line)
                if inner:
                    return [(body, i, st), *inner]
            return [(body, i, st)]
    return []


def _names(node: ast.AST) -> tuple[set[str], set[str]]:
    """The variables ``node`` reads and binds in its own scope (a comprehension's and a lambda's own variables
    left out; a walrus binds in the enclosing scope)."""
    loads: set[str] = set()
    stores: set[str] = set()
    if isinstance(node, ast.Name):
        (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
    elif isinstance(node, ast.NamedExpr):
        stores.add(node.target.id)
        loads |= _names(node.value)[0]
    elif isinstance(node, _COMPREHENSIONS):
        gens = node.generators
        loads |= _names(gens[0].iter)[0]
        inner_loads: set[str] = set()
        inner_stores: set[str] = set()
        parts: list[ast.AST] = [*(g.target for g in gens), *(g.iter for g in gens[1:]), *(c for g in gens for c in g.ifs),
                                *([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])]
        for part in parts:
            ld, sd = _names(part)
            inner_loads |= ld
            inner_stores |= sd
        own = {n.id for g in gens for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        loads |= inner_loads - own
        stores |= inner_stores - own
    elif isinstance(node, ast.Lambda):
        args = node.args
        for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            loads |= _names(d)[0]
        own = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
        ld, sd = _names(node.body)
        loads |= ld - own
        stores |= sd - own
    else:
        stores |= _bound_by(node)
        for child in ast.iter_child_nodes(node):
            ld, sd = _names(child)
            loads |= ld
            stores |= sd
    return loads, stores


def _bound_by(node: ast.AST) -> set[str]:
    """The variables ``node`` binds other than through an assignment target: a ``def``/``class`` name, an
    ``import``'s names, an ``except ... as`` name."""
    if isinstance(node, _SCOPES):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    return set()


def _targets(t: ast.expr) -> set[str]:
    """The variables an assignment target binds (tuple targets unpacked; items and attributes bind none)."""
    if isinstance(t, ast.Name):
        return {t.id}
    if isinstance(t, (ast.Tuple, ast.List)):
        return set().union(*(_targets(e) for e in t.elts)) if t.elts else set()
    if isinstance(t, ast.Starred):
        return _targets(t.value)
    return set()


def _definite(body: list[ast.stmt]) -> set[str]:
    """The variables ``body`` binds on every path that ends normally (a conservative must-analysis)."""
    out: set[str] = set()
    for st in body:
        match st:
            case ast.Assign(targets=ts):
                for t in ts:
                    out |= _targets(t)
            case ast.AnnAssign(target=t, value=v) if v is not None:
                out |= _targets(t)
            case ast.AugAssign(target=t):
                out |= _targets(t)
            case ast.If(body=b, orelse=e):
                out |= _definite(b) & _definite(e)
            case ast.With(items=items, body=b):
                for item in items:
                    if item.optional_vars is not None:
                        out |= _targets(item.optional_vars)
                out |= _definite(b)
            case ast.Try(body=b, orelse=e, handlers=hs, finalbody=f):
                normal = _definite(b) | _definite(e)
                for h in hs:
                    normal &= _definite(h.body)
                out |= normal | _definite(f)
            case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef() | ast.Import() | ast.ImportFrom():
                out |= _bound_by(st)
    return out


def _liveness(fdef: ast.FunctionDef, path: list[tuple[list[ast.stmt], int, ast.stmt]], depth: int,
              first: int) -> tuple[tuple[str, ...], tuple[str, ...]] | str:
    """The parameters (live-ins) and results (live-outs) of the statement ``path[depth]`` outlined from
    ``fdef`` (whose first line is line ``first`` of its file), or why it cannot be outlined exactly (a
    sentence)."""
    stmt = path[depth][2]
    where = f"the `{type(stmt).__name__.lower()}` statement at line {stmt.lineno + first - 1}"
    leaving = _leaves(stmt)
    if leaving:
        return f"{where} holds {leaving}, which leaves it"
    args = fdef.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    local = params | _names(fdef)[1]
    maybe, definite = set(params), set(params)
    in_loop = False
    for k, (body, i, st) in enumerate(path[:depth]):
        for before in body[:i]:
            maybe |= _names(before)[1]
        definite |= _definite(body[:i])
        if isinstance(st, _LOOPS):
            maybe |= _names(st)[1]
            in_loop = True
        nxt = path[k + 1]
        if isinstance(st, (ast.For, ast.AsyncFor)) and nxt[0] is st.body:
            definite |= _targets(st.target)
        if isinstance(st, ast.With) and nxt[0] is st.body:
            for item in st.items:
                if item.optional_vars is not None:
                    definite |= _targets(item.optional_vars)
        if isinstance(st, ast.Try) and nxt[0] is st.orelse:
            definite |= _definite(st.body)
    body, i, _ = path[depth]
    maybe |= _names_list(body[:i])
    definite |= _definite(body[:i])
    loads, stores = _names(stmt)
    loads &= local
    rest = _names_outside(fdef, stmt)
    results = stores & (rest | (loads if in_loop else set()))
    ins = (loads & maybe) | (results & definite)
    unbound = sorted((ins - definite) | (loads - ins - stores))
    if unbound:
        return f"{where} reads `{unbound[0]}`, which may be unbound before it"
    after = definite | _definite([stmt])
    if not results <= after:
        return f"{where} may leave `{sorted(results - after)[0]}` unbound, which is read after it"
    host = next((r for r in sorted(results) if _plainly_host(stmt, r)), None)
    if host is not None:
        return f"{where} binds `{host}` to host data read after it (a region returns tensors)"
    order = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a]
    return tuple(sorted(ins, key=lambda n: (n not in order, order.index(n) if n in order else 0, n))), \
        tuple(sorted(results))


def _names_list(body: list[ast.stmt]) -> set[str]:
    return set().union(*(_names(st)[1] for st in body)) if body else set()


def _names_outside(fdef: ast.FunctionDef, stmt: ast.stmt) -> set[str]:
    """The variables ``fdef`` reads outside ``stmt``."""
    out: set[str] = set()
    for node in ast.iter_child_nodes(fdef):
        if node is stmt:
            continue
        if isinstance(node, ast.stmt) and any(n is stmt for n in ast.walk(node)):
            out |= _reads_except(node, stmt)
        else:
            out |= _names(node)[0]
    return out


def _reads_except(node: ast.AST, stmt: ast.stmt) -> set[str]:
    """The variables ``node`` reads, leaving out what ``stmt`` (inside it) reads."""
    out: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if child is stmt:
            continue
        if any(n is stmt for n in ast.walk(child)):
            out |= _reads_except(child, stmt)
        else:
            out |= _names(child)[0]
    return out


def _leaves(stmt: ast.stmt) -> str | None:
    """What in ``stmt`` leaves it other than by its end (``return``, ``yield``, a ``break``/``continue`` of a
    loop outside it) or opens a scope of its own (``def``, ``class``), as a phrase; None when nothing does."""
    def walk(node: ast.AST, loop: bool) -> str | None:
        if isinstance(node, ast.Return):
            return "a `return`"
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return "a `yield` or `await`"
        if isinstance(node, (ast.Break, ast.Continue)) and not loop:
            return f"a `{type(node).__name__.lower()}`"
        if isinstance(node, _SCOPES):
            return "a nested `def` or `class`"
        if isinstance(node, ast.Lambda):
            return None
        for field, value in ast.iter_fields(node):
            inner = loop or (isinstance(node, _LOOPS) and field == "body")
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    found = walk(child, inner)
                    if found:
                        return found
        return None
    return walk(stmt, False)


def _plainly_host(stmt: ast.stmt, name: str) -> bool:
    """Whether ``stmt`` binds ``name`` to what is plainly no tensor (a literal, a display, a comprehension, a
    lambda, a string, a call of a builtin that makes host data) or calls a container method on it."""
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(name in _targets(t) for t in targets) and isinstance(node.value, (
                    ast.Constant, ast.List, ast.Dict, ast.Set, ast.Tuple, ast.JoinedStr, ast.Lambda, *_COMPREHENSIONS)) \
                    or isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                    and node.value.func.id in _HOST_CALLS:
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id == name and \
                node.func.attr in _CONTAINER_METHODS:
            return True
    return False


def _function(fn: types.FunctionType, filename: str, first: int, fdef: ast.FunctionDef, stmt: ast.stmt, name: str,
              params: tuple[str, ...], results: tuple[str, ...],
              helpers: Mapping[str, Any] | None = None) -> tuple[Callable, ast.FunctionDef] | str:
    """The Python function of ``stmt`` outlined (``def name(*params): stmt; return results``), compiled with the
    file's name and line numbers in ``fn``'s globals, the names it reads from ``fn``'s enclosing function bound to
    ``fn``'s closure cells (and ``helpers``, names acrobat's rewrite of ``stmt`` reads, to new cells); and its
    definition (for ``regions.pure``). A sentence where it cannot be made."""
    ret: ast.expr = (ast.Name(results[0], ast.Load()) if len(results) == 1 else
                     ast.Tuple([ast.Name(r, ast.Load()) for r in results], ast.Load()))
    body = [*copy.deepcopy(stmt.body if isinstance(stmt, Run) else [stmt]), ast.Return(ret)]
    for node in ast.walk(body[1]):
        ast.copy_location(node, stmt)
    new = ast.FunctionDef(name, ast.arguments([], [ast.arg(p) for p in params], None, [], [], None, []), body, [],
                          None, None, type_params=[])
    ast.copy_location(new, stmt)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells.update({k: types.CellType(v) for k, v in (helpers or {}).items()})
    free = sorted((_names(stmt)[0] - set(params) - _names(stmt)[1]) & set(cells))
    # a factory binding the enclosing function's names makes them free variables of the new function
    factory = ast.FunctionDef("_factory", ast.arguments([], [], None, [], [], None, []),
                              [ast.Assign([ast.Name(n, ast.Store())], ast.Constant(None)) for n in free]
                              + [new, ast.Return(ast.Name(name, ast.Load()))], [], None, None, type_params=[])
    module = ast.Module([factory], [])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, first - 1)
    try:
        code = compile(module, filename, "exec", dont_inherit=True, flags=fn.__code__.co_flags & _FUTURE_FLAGS)
    except SyntaxError as exc:
        return f"the statement at line {stmt.lineno + first - 1} cannot be compiled alone ({exc.msg})"
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    closure = tuple(cells[n] for n in inner.co_freevars)
    pyfn = types.FunctionType(inner, fn.__globals__, name, None, closure or None)
    return pyfn, copy.deepcopy(new)
