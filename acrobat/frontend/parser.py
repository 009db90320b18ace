"""Parse decorated model functions from source into the IR (§3).

``parse_function`` takes a function's source as it was when the function
was decorated (``acrobat.frontend.source``), parses it with ``ast`` and
translates the supported subset into ``acrobat.frontend.ir``.
Anything outside the subset raises ``CompileError`` naming file:line and
what to write instead; nothing is silently run unbatched.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import types
from typing import Any, Callable, Sequence

import torch

from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.frontend.globals import GlobalRead, is_global_data
from acrobat.frontend.keyed import CONSUMERS, RANKERS, keyed_call, mapped
from acrobat.frontend.source import SourceSnapshot

#: Builtins allowed on host values (instance data, lists of handles).
COMPREHENSION = "comp"
"""Hint of the fresh names of hoisted comprehensions' lists (``_comp0``): fresh lists, appended to only by
their own loop before the statement reads them (``is_comprehension_list``)."""


STARRED = "star"
"""Hint of the fresh names of starred values put in a variable before their statement (``_star0``,
``_Translator.hoist_starred``)."""


def is_comprehension_list(name: str) -> bool:
    """Whether ``name`` is the list a hoisted comprehension builds (``hoist_comprehensions``)."""
    return name.startswith("_" + COMPREHENSION) and name[len(COMPREHENSION) + 1:].isdigit()


def shown_name(name: str) -> str:
    """A variable as a message names it: the name the model wrote for a comprehension's variable (the
    parser renames ``x`` to ``_c_x_3``, ``comprehension``), the words "a comprehension's list" for the list
    one builds, "a starred value" for the variable ``hoist_starred`` made, the name of a variable's version
    (``_v_x_1``, ``acrobat.analysis.versions``), of an accumulator's part (``_a_x_0``,
    ``acrobat.analysis.accumulators``) or of an unrolled loop's variable (``_u_x_7``, ``acrobat.analysis.unrolling``);
    else the name, in backticks."""
    if is_comprehension_list(name):
        return "a comprehension's list"
    if re.fullmatch(f"_{STARRED}\\d+", name):
        return "a starred value"
    # a comprehension's variable, a version (analysis.versions), an accumulator's part (analysis.accumulators), an
    # unrolled loop's variable (analysis.unrolling)
    while written := re.fullmatch(r"_[cvaru]_(\w+)_\d+", name):
        name = written[1]
    return f"`{name}`"


_TUPLE_SPLITS = frozenset({"chunk", "split", "unbind", "tensor_split"})
"""Torch functions and methods whose result is already a tuple: ``tuple(...)`` of one is the call itself."""

HOST_BUILTINS = frozenset(
    {"len", "range", "reversed", "enumerate", "zip", "list", "min", "max", "abs", "int", "float", "bool", "isinstance",
     "sum"}
)

_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.LShift: "<<", ast.RShift: ">>",
}
_CMPOPS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}
_UNOPS = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not", ast.Invert: "~"}

#: What to write instead, for statements outside the subset.
_UNSUPPORTED_STMT = {
    ast.With: "only `with torch.no_grad()` / `torch.inference_mode()` / `torch.enable_grad()` are accepted "
              "inside a model; move other `with` blocks out of the model function",
    ast.Try: "validate inputs before calling the model; exceptions cannot be batched",
    ast.Raise: "validate inputs before calling the model",
    ast.Import: "import at module level",
    ast.ImportFrom: "import at module level",
    ast.Global: "pass the value in as an argument",
    ast.Nonlocal: "pass the value in as an argument",
    ast.ClassDef: "define classes at module level",
    ast.FunctionDef: "nested defs are hoisted only without decorators: define the helper at module level with "
                     "@acrobat.function and pass what it uses as arguments",
    ast.AsyncFunctionDef: "acrobat models are synchronous; use a plain def",
    ast.Delete: "drop the `del`; values are freed automatically",
    ast.Match: "use if/elif/else",
    ast.AsyncFor: "use a plain for loop",
    ast.AsyncWith: "move the block out of the model function",
    ast.AnnAssign: "annotate plain names only: write `x = value`",
}
_FUNCTION_VALUE = ("a function passed as a value runs only in the dynamic tier, except a one-parameter `key=lambda` "
                   "of sorted/max/min, and `map(lambda x: ..., xs)` consumed where it stands (`zip(*map(...))`, "
                   "`list(map(...))`), which are static")
_UNSUPPORTED_EXPR = {
    ast.Lambda: f"define a module-level @acrobat.function and call it instead of a lambda ({_FUNCTION_VALUE})",
    ast.ListComp: "comprehensions are accepted where they always run; assign the comprehension to a variable "
                  "first (`xs = [f(x) for x in items]`), or write a for loop that appends to a list",
    ast.SetComp: "write a for loop",
    ast.DictComp: "write a for loop",
    ast.GeneratorExp: "comprehensions are accepted where they always run; assign it as a list first "
                      "(`xs = [f(x) for x in items]`), or write a for loop that appends to a list",
    ast.Dict: "use constant string keys (`{\"h\": h}`), a tuple, or an object with attributes",
    ast.Set: "use a tuple or a list",
    ast.JoinedStr: "build strings outside the model",
    ast.Await: "acrobat models are synchronous",
    ast.Yield: "return a list instead of yielding",
    ast.YieldFrom: "return a list instead of yielding",
    ast.NamedExpr: "assign in a separate statement",
    ast.Starred: "unpack into a call's arguments (`f(*pair)`) or an assignment target (`a, *rest = xs`); build "
                 "lists with `+` (`xs + [x]`)",
}


#: The field of each kind of statement that the parser hoists sub-expressions out of (comprehensions,
#: starred values), into statements that run just before it.
_HOISTED_FIELDS = {ast.Assign: "value", ast.AnnAssign: "value", ast.Return: "value", ast.Expr: "value", ast.If: "test",
                   ast.For: "iter"}

#: Context managers whose ``with`` body runs inline (grad-mode switches; see ``_Translator.with_stmt``).
_GRAD_MODES = ("no_grad", "inference_mode", "enable_grad", "set_grad_enabled")


def _assert_failed(message: Any = None) -> None:
    """What a failing ``assert`` in a model's host code runs (host code, per instance)."""
    raise AssertionError(message) if message is not None else AssertionError


class _Rename(ast.NodeTransformer):
    """Rename variables (a comprehension's targets become fresh locals of the desugared loop)."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.mapping:
            return ast.copy_location(ast.Name(self.mapping[node.id], node.ctx), node)
        return node


MANGLE = "_U"
"""Prefix the parser gives the model's own variables whose names start with ``_``: generated code names
everything it adds ``_...`` but never ``_U...`` (``acrobat.codegen.printer.Globals``), so a model variable
(``_d``, ``_rt``, ``_h``) can never shadow a name of generated code. Messages show the names as written
(``acrobat.errors``)."""


def _mangle_locals(fdef: ast.FunctionDef) -> None:
    """Rename, in place, every variable of ``fdef`` (parameters, assigned names, nested defs, their own
    variables) whose name starts with ``_`` to ``MANGLE + name``: a bijection, so no two names merge."""
    local = {a.arg for a in ast.walk(fdef) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local |= {f.name for f in ast.walk(fdef) if isinstance(f, ast.FunctionDef) and f is not fdef}
    mapping = {n: MANGLE + n for n in local if n.startswith("_")}
    if not mapping:
        return
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
        elif isinstance(node, ast.arg) and node.arg in mapping:
            node.arg = mapping[node.arg]
        elif isinstance(node, ast.FunctionDef) and node is not fdef and node.name in mapping:
            node.name = mapping[node.name]


def _is_torch_object(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    if isinstance(obj, types.ModuleType):
        return obj.__name__.split(".")[0] == "torch"
    return callable(obj) and (mod.split(".")[0] == "torch" or mod.startswith("torch"))


class NestedFunction:
    """A ``def`` nested in a model function, hoisted to a program function of its own.

    Its captured variables (read from the enclosing function) become leading parameters, passed at
    every call: the same objects the closure would see, since they are never rebound. ``fn`` is a stub
    with the hoisted signature (for keyword arguments); ``ir`` the parsed body.
    """

    def __init__(self, name: str, captured: list[str], fn: Callable, ir_function: ir.Function):
        self.__name__ = name
        self.captured = captured
        self.fn = fn
        self.ir = ir_function

    def __deepcopy__(self, memo: dict) -> "NestedFunction":
        """Itself: IR copied by the compiler keeps naming the same function."""
        return self


def fresh_factory(e: ast.Call) -> ast.Call | None:
    """A chain that makes a new tensor and then changes it in place, as the out-of-place factory call it equals
    (treelstm.pytorch's leaf state ``x.new(1, d).fill_(0.).requires_grad_()``), or None for any other call:

    - ``x.new(n, m).fill_(v)`` is ``x.new_full((n, m), v)`` and ``x.new(n, m).zero_()`` is ``x.new_zeros(n, m)``
      (two sizes at least, or one integer constant: ``x.new(data)`` of one argument copies data);
    - ``.requires_grad_()`` of such a factory call (or of ``x.new_zeros``/``new_ones``/``new_full``) is the call:
      the new tensor is a leaf no one else holds, so its own gradient can never be read; the values, and every
      gradient of the parameters and inputs through it, are the same.

    A receiver that is no tensor fails in the call as it would have in the chain."""
    func = e.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Call) or \
            not isinstance(func.value.func, ast.Attribute):
        return None
    inner, method = func.value, func.value.func.attr
    if func.attr == "requires_grad_" and not e.args and not e.keywords and (
            method in ("new_zeros", "new_ones", "new_full") or fresh_factory(inner) is not None):
        return inner
    if method != "new" or inner.keywords or any(isinstance(a, ast.Starred) for a in inner.args) or not (
            len(inner.args) >= 2 or len(inner.args) == 1 and isinstance(inner.args[0], ast.Constant)
            and type(inner.args[0].value) is int):
        return None
    recv = inner.func.value
    if func.attr == "fill_" and len(e.args) == 1 and not e.keywords:
        made = ast.Call(ast.Attribute(recv, "new_full", ast.Load()), [ast.Tuple(list(inner.args), ast.Load()),
                                                                       e.args[0]], [])
    elif func.attr == "zero_" and not e.args and not e.keywords:
        made = ast.Call(ast.Attribute(recv, "new_zeros", ast.Load()), list(inner.args), [])
    else:
        return None
    for sub in ast.walk(made):
        if not hasattr(sub, "lineno"):
            ast.copy_location(sub, e)
    return made


class _Translator:
    """Translate one function's ``ast`` into IR, resolving names in its globals."""

    def __init__(self, fn: Callable, filename: str, line_offset: int, lines: dict[int, str],
                 is_program_fn: Callable[[Any], str | None], markers: dict[str, Any]):
        self.fn = fn
        self.filename = filename
        self.line_offset = line_offset
        self.lines = lines
        self.is_program_fn = is_program_fn
        self.markers = markers
        self.nested: dict[str, NestedFunction] = {}  # nested defs seen so far (hoisted, see `nested_def`)
        self.grad_off: list[ir.Loc] = []  # the `with` statements that turn autograd off (see `with_stmt`)
        self.outer: ast.FunctionDef | None = None
        closure = inspect.getclosurevars(fn)
        self.nonlocals: set[str] = set(closure.nonlocals)
        self.scope: dict[str, Any] = {**fn.__globals__, **closure.nonlocals}
        self.locals: set[str] = set()
        self.fresh = 0

    # -- helpers ---------------------------------------------------------
    def loc(self, node: ast.AST) -> ir.Loc:
        return ir.Loc(self.filename, getattr(node, "lineno", 1) + self.line_offset, getattr(node, "col_offset", 0))

    def error(self, node: ast.AST, message: str) -> CompileError:
        loc = self.loc(node)
        return CompileError(message, loc.file, loc.line, loc.col)

    def resolve_global(self, node: ast.AST) -> tuple[bool, Any]:
        """Resolve a Name/Attribute chain rooted at a non-local name: (found, object)."""
        chain: list[str] = []
        cur = node
        while isinstance(cur, ast.Attribute):
            chain.append(cur.attr)
            cur = cur.value
        if not isinstance(cur, ast.Name) or cur.id in self.locals:
            return False, None
        if cur.id in self.scope:
            obj = self.scope[cur.id]
        elif hasattr(builtins, cur.id):
            obj = getattr(builtins, cur.id)
        else:
            raise self.error(cur, f"name `{cur.id}` is not defined")
        for attr in reversed(chain):
            if not hasattr(obj, attr):
                raise self.error(node, f"`{ast.unparse(node)}`: `{attr}` not found")
            obj = getattr(obj, attr)
        return True, obj

    # -- statements ------------------------------------------------------
    def function(self, node: ast.FunctionDef) -> ir.Function:
        a = node.args
        if a.kwarg or a.posonlyargs or a.kwonlyargs and a.vararg:
            raise self.error(node, "model functions take plain and keyword-only parameters only (no **kwargs, "
                                   "no `/`, no keyword-only parameters after `*rest`; defaults and *args are fine)")
        for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            if not _literal_default(d):
                raise self.error(d, "model functions take parameters with literal defaults only (numbers, strings, "
                                    "True/False/None): pass other values as arguments")
        # in the IR's order: the positional ones, the keyword-only ones, then `*rest` (a tuple parameter)
        params = [x.arg for x in [*a.args, *a.kwonlyargs]] + ([a.vararg.arg] if a.vararg else [])
        self.outer = node
        self.locals = set(params)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                self.locals.add(sub.id)
        body = self.body(node.body)
        return ir.Function(node.name, params, body, self.loc(node), self.lines, self.grad_off)

    def body(self, stmts: list[ast.stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            t = self.stmt(s)
            if isinstance(t, list):
                out.extend(t)
            elif t is not None:
                out.append(t)
        return out

    def target(self, node: ast.expr) -> ir.Target:
        if isinstance(node, ast.Name):
            return ir.Target(name=node.id)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.target(e.value) if isinstance(e, ast.Starred) else self.target(e) for e in node.elts]
            for e, t in zip(node.elts, items):
                if isinstance(e, ast.Starred):
                    if t.name is None:
                        raise self.error(e, "a starred target must be a plain name: `a, *rest = xs`")
                    t.starred = True
            if sum(t.starred for t in items) > 1:
                raise self.error(node, "at most one starred name in an assignment")
            return ir.Target(items=items)
        raise self.error(node, f"cannot assign to `{ast.unparse(node)}`: only names, tuples of names and attributes "
                               "(`node.state = h`, one per statement) can be assigned (tensors and model data are "
                               "immutable; build a new value instead)")

    def assignment(self, loc: ir.Loc, tgt: ast.expr, value: ir.Expr) -> ir.Stmt:
        """``tgt = value``: a binding of names, or, for ``obj.attr = value``, the store ``setattr(obj, "attr",
        value)`` (a field of the instance's own object: ``acrobat.analysis.kinds``, "fields")."""
        if isinstance(tgt, ast.Attribute):
            return ir.ExprStmt(loc, ir.Call(loc, ir.CallKind.BUILTIN, "setattr",
                                            [self.expr(tgt.value), ir.Const(loc, tgt.attr), value], {}))
        return ir.Assign(loc, self.target(tgt), value)

    def fresh_name(self, hint: str) -> str:
        name = f"_{hint}{self.fresh}"
        self.fresh += 1
        self.locals.add(name)
        return name

    def comprehension(self, comp: ast.ListComp | ast.GeneratorExp, result: str) -> list[ast.stmt]:
        """``result = [elt for t in it if c ...]`` as the loop that appends (a generator expression: the same,
        it is consumed into a list). The targets are renamed to fresh locals, so, as in Python, they do not
        overwrite the function's own variables."""
        mapping: dict[str, str] = {}
        for gen in comp.generators:
            if gen.is_async:
                raise self.error(comp, "async comprehensions are not supported")
            for n in ast.walk(gen.target):
                if isinstance(n, ast.Name):
                    mapping[n.id] = self.fresh_name(f"c_{n.id}_")  # shown as written (`shown_name`)
        ren = _Rename(mapping)
        inner: list[ast.stmt] = [ast.Expr(ast.Call(ast.Attribute(ast.Name(result, ast.Load()), "append", ast.Load()),
                                                   [ren.visit(comp.elt)], []))]
        for i, gen in reversed(list(enumerate(comp.generators))):
            for cond in reversed(gen.ifs):
                inner = [ast.If(ren.visit(cond), inner, [])]
            it = gen.iter if i == 0 else ren.visit(gen.iter)
            inner = [ast.For(ren.visit(gen.target), it, inner, [])]
        out = [ast.Assign([ast.Name(result, ast.Store())], ast.List([], ast.Load())), *inner]
        for node in out:
            ast.copy_location(node, comp)
            for sub in ast.walk(node):
                if not hasattr(sub, "lineno") and isinstance(sub, (ast.stmt, ast.expr)):
                    ast.copy_location(sub, comp)
        return out

    def nested_def(self, node: ast.FunctionDef) -> None:
        """Hoist a nested ``def`` when every variable it captures is bound once in the enclosing function
        (a parameter never reassigned, or one top-level assignment): closure conversion by extra parameters."""
        outer = self.outer
        assert outer is not None
        inner_params = {a.arg for a in node.args.args}
        inner_stores = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        loads = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        # what it reads of the enclosing function, and what the nested functions it calls capture
        via_calls = [c for n in loads if n in self.nested for c in self.nested[n].captured]
        captured = list(dict.fromkeys(n for n in loads + via_calls if n in self.locals
                                      and n not in inner_params | inner_stores and n not in self.nested))
        outer_params = {a.arg for a in outer.args.args}
        inner_nodes = {id(n) for n in ast.walk(node)}
        for sub in ast.walk(node):  # a hoisted helper gets its captures as arguments: it may not mutate them
            target = sub.func.value if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr in ("append", "insert", "pop", "extend", "remove", "clear", "reverse") else \
                sub.value if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store) else None
            if isinstance(target, ast.Name) and target.id in captured:
                raise self.error(sub, f"nested function `{node.name}` changes the captured `{target.id}`: define the "
                                      "helper at module level with @acrobat.function, pass the list in and return "
                                      "the new items")
        for name in captured:
            stores = [n for n in ast.walk(outer) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                      and n.id == name and id(n) not in inner_nodes]
            top = [st for st in outer.body if isinstance(st, ast.Assign) and len(st.targets) == 1
                   and isinstance(st.targets[0], ast.Name) and st.targets[0].id == name]
            once = (name in outer_params and not stores) or (name not in outer_params and len(stores) == 1 and top)
            if not once:
                raise self.error(node, f"nested function `{node.name}` captures `{name}`, which `{outer.name}` "
                                       "rebinds: define the helper at module level with @acrobat.function and pass "
                                       f"`{name}` as an argument")
        hoisted = ast.FunctionDef(node.name, ast.arguments([], [ast.arg(c) for c in captured] + node.args.args,
                                                           node.args.vararg, node.args.kwonlyargs, node.args.kw_defaults,
                                                           node.args.kwarg, node.args.defaults),
                                  node.body, [], None, None, type_params=[])
        ast.copy_location(hoisted, node)
        stub = ast.Module([ast.FunctionDef(node.name, hoisted.args, [ast.Pass()], [], None, None, type_params=[])], [])
        namespace: dict[str, Any] = {}
        exec(compile(ast.fix_missing_locations(stub), self.filename, "exec"), namespace)
        sub = _Translator(self.fn, self.filename, self.line_offset, self.lines, self.is_program_fn, self.markers)
        sub.nested = self.nested
        key = NestedFunction(node.name, captured, namespace[node.name], None)  # type: ignore[arg-type]
        self.nested[node.name] = key  # before the body: the helper may call itself
        key.ir = sub.function(hoisted)
        key.ir.name = f"{outer.name}__{node.name}"  # unique among the program's functions (names generated code)

    def with_stmt(self, s: ast.With) -> list[ir.Stmt]:
        """``with torch.no_grad():`` (or ``inference_mode``/``enable_grad``/``set_grad_enabled``): the body runs
        inline in the static tier, every operator in the run's grad mode. One that may turn autograd off is
        recorded in ``grad_off``: a run that records autograd runs such a program in the dynamic tier, which
        computes the body without autograd as the plain call does (``Program.run``)."""
        for item in s.items:
            ctx = item.context_expr
            func = ctx.func if isinstance(ctx, ast.Call) else ctx
            found, obj = self.resolve_global(func) if isinstance(func, (ast.Name, ast.Attribute)) else (False, None)
            if not (found and any(obj is getattr(torch, m, None) for m in _GRAD_MODES)) or item.optional_vars:
                raise self.error(s, "`With` statement is not supported in an acrobat model: "
                                    + _UNSUPPORTED_STMT[ast.With])
            if obj is not torch.enable_grad and not (isinstance(ctx, ast.Call) and ctx.args and isinstance(
                    ctx.args[0], ast.Constant) and ctx.args[0].value is True):
                self.grad_off.append(self.loc(s))
        return self.body(s.body)

    def hoist_comprehensions(self, s: ast.stmt) -> list[ast.stmt]:
        """Move the comprehensions a statement always evaluates (not those under ``a if c else b``, the later
        operands of ``and``/``or``, or a ``while`` test) into loops that run just before it; the statement
        reads the built lists instead. Returns the loops; rewrites ``s`` in place. (They run before the
        statement's other sub-expressions: model code is expected not to depend on that order.)"""
        field = _HOISTED_FIELDS.get(type(s))
        if field is None or getattr(s, field) is None:
            return []
        pre: list[ast.stmt] = []
        translator = self

        class Hoist(ast.NodeTransformer):
            def hoist(self, node: ast.ListComp | ast.GeneratorExp) -> ast.Name:
                res = translator.fresh_name(COMPREHENSION)
                pre.extend(translator.comprehension(node, res))
                return ast.copy_location(ast.Name(res, ast.Load()), node)

            visit_ListComp = visit_GeneratorExp = hoist

            def visit_Call(self, node: ast.Call) -> ast.AST:
                consumes = isinstance(node.func, ast.Name) and node.func.id in CONSUMERS and \
                    translator.resolve_global(node.func) == (True, getattr(builtins, node.func.id))
                for i, a in enumerate(node.args):  # `zip(*map(lambda x: x.state, kids))`: a comprehension
                    inner = a.value if isinstance(a, ast.Starred) else a if consumes and i == 0 else None
                    comp = mapped(inner, translator.resolve_global(inner.func)[1]) if isinstance(
                        inner, ast.Call) else None
                    if comp is not None and isinstance(a, ast.Starred):
                        a.value = comp
                    elif comp is not None:
                        node.args[i] = comp
                ranks = isinstance(node.func, ast.Name) and node.func.id in RANKERS and \
                    any(k.arg == "key" for k in node.keywords)
                found, func = translator.resolve_global(node.func) if ranks else (False, None)
                keyed = keyed_call(node, func, translator.fresh_name) if found else None
                if keyed is None:
                    return self.generic_visit(node)
                stmts, value = keyed  # `max(xs, key=lambda x: ...)`: statements and comprehensions (frontend.keyed)
                for st in stmts:
                    st.value = self.visit(st.value)  # type: ignore[attr-defined]
                    pre.append(st)
                return self.visit(value)

            def keep(self, node: ast.AST) -> ast.AST:
                return node  # evaluated conditionally, or a scope of its own: left as it is (rejected)

            visit_IfExp = visit_Lambda = visit_SetComp = visit_DictComp = keep

            def visit_BoolOp(self, node: ast.BoolOp) -> ast.BoolOp:
                node.values[0] = self.visit(node.values[0])  # only the first operand always runs
                return node

        setattr(s, field, Hoist().visit(getattr(s, field)))
        return pre

    def hoist_starred(self, s: ast.stmt) -> list[ast.stmt]:
        """``f(x, *g(y))``: a starred value that is neither a variable nor a tuple display is evaluated into a
        fresh variable just before the statement (``_star0 = g(y)``), and the call unpacks the variable
        (``ir.Starred``; the kind analysis knows its size). Only where Python's order stays as it was: the
        statement always evaluates the value (not under ``a if c else b`` or a later ``and``/``or`` operand),
        and nothing the statement evaluates before it calls anything. Elsewhere ``call`` rejects the value,
        naming the fix. Returns the assignments; rewrites ``s`` in place."""
        field = _HOISTED_FIELDS.get(type(s))
        if field is None or getattr(s, field) is None:
            return []
        pre: list[ast.stmt] = []
        called = False  # whether a call has run before the node visited now (Python's evaluation order)

        def hoist(value: ast.expr) -> ast.expr:
            if called or isinstance(value, ast.Tuple) or isinstance(value, ast.Name) and value.id in self.locals:
                return value
            name = self.fresh_name(STARRED)
            pre.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), value))
            return ast.copy_location(ast.Name(name, ast.Load()), value)

        def visit(node: ast.AST) -> None:
            nonlocal called
            if isinstance(node, (ast.IfExp, ast.BoolOp, ast.Lambda)):
                first = node.test if isinstance(node, ast.IfExp) else node.values[0] if isinstance(
                    node, ast.BoolOp) else None
                if first is not None:
                    visit(first)  # always evaluated; the rest maybe not: nothing is hoisted from it
                called = called or any(isinstance(x, ast.Call) for x in ast.walk(node))
                return
            if isinstance(node, ast.Call):
                visit(node.func)
                for a in node.args:
                    if isinstance(a, ast.Starred):
                        a.value = hoist(a.value)
                    visit(a)
                for k in node.keywords:
                    if k.arg is None and not _keyword_display(k.value):
                        k.value = hoist(k.value)
                    visit(k.value)
                called = True
                return
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(getattr(s, field))
        return pre

    def stmt(self, s: ast.stmt) -> ir.Stmt | list[ir.Stmt] | None:
        loc = self.loc(s)
        pre = self.hoist_comprehensions(s) or self.hoist_starred(s)
        if pre:  # `hs = [cell(x, p) for x in xs]`: desugared into a loop that appends; `_star0 = g(y)`
            rest = self.stmt(s)
            return self.body(pre) + (rest if isinstance(rest, list) else [rest] if rest is not None else [])
        match s:
            case ast.Assign(targets=[ast.Subscript(value=ast.Name(id=lst), slice=idx)], value=value) if lst in self.locals:
                # a list's `xs[i] = v`, a tensor's `x[0, 1:3] = v` (acrobat.analysis.inplace): the kinds tell which
                return ir.ExprStmt(loc, ir.Call(loc, ir.CallKind.METHOD, "__setitem__",
                                                [self.expr(idx), self.expr(value)], {},
                                                receiver=ir.Name(loc, lst)))
            case ast.Assign(targets=[tgt], value=value):
                return self.assignment(loc, tgt, self.expr(value))
            case ast.Assign(targets=[ast.Name(id=first) as head, *rest], value=value):
                # `h = c = zeros`: the value once, bound to each target left to right (Python's order)
                bound: list[ir.Stmt] = [ir.Assign(loc, self.target(head), self.expr(value))]
                return bound + [self.assignment(loc, t, ir.Name(loc, first)) for t in rest]
            case ast.Assign():
                raise self.error(s, "chained assignment `a = b = ...` whose first target is not a name: "
                                    "write one assignment per target")
            case ast.AnnAssign(target=ast.Name() as tgt, value=value):  # `h: Tensor = ...`: the annotation is ignored
                return ir.Assign(loc, self.target(tgt), self.expr(value)) if value is not None else None
            case ast.AugAssign(target=ast.Name(id=name), op=op, value=value):
                rhs = ir.BinOp(loc, _BINOPS[type(op)], ir.Name(loc, name), self.expr(value), inplace=True)
                return ir.Assign(loc, ir.Target(name=name), rhs)
            case ast.AugAssign():
                raise self.error(s, "augmented assignment works on plain names only")
            case ast.Return(value=value):
                return ir.Return(loc, self.expr(value) if value is not None else None)
            case ast.If(test=test, body=body, orelse=orelse):
                return ir.If(loc, self.expr(test), self.body(body), self.body(orelse))
            case ast.For(target=tgt, iter=it, body=body, orelse=orelse):
                if orelse:
                    raise self.error(s, "`for ... else` is not supported: use a flag variable")
                return ir.For(loc, self.target(tgt), self.expr(it), self.body(body))
            case ast.While(test=test, body=body, orelse=orelse):
                if orelse:
                    raise self.error(s, "`while ... else` is not supported: use a flag variable")
                return ir.While(loc, self.expr(test), self.body(body))
            case ast.Pass():
                return ir.Pass(loc)
            case ast.Expr(value=ast.Constant(value=str())):
                return None  # docstring
            case ast.Expr(value=ast.Call(func=func, args=[], keywords=[])) if self._is_marker(func, "phase"):
                return ir.PhaseMark(loc)
            case ast.Expr(value=value):
                return ir.ExprStmt(loc, self.expr(value))
            case ast.Break():
                return ir.Break(loc)
            case ast.Continue():
                return ir.Continue(loc)
            case ast.With():
                return self.with_stmt(s)
            case ast.FunctionDef() if not s.decorator_list and self.outer is not None:
                self.nested_def(s)
                return None
            case ast.Assert(test=test, msg=msg):
                fail = ir.Call(loc, ir.CallKind.HOST, _assert_failed, [self.expr(msg)] if msg is not None else [], {})
                return ir.If(loc, ir.UnaryOp(loc, "not", self.expr(test)), [ir.ExprStmt(loc, fail)], [])
        hint = _UNSUPPORTED_STMT.get(type(s), "rewrite it with assignments, if/else, for, while and return")
        raise self.error(s, f"`{type(s).__name__}` statement is not supported in an acrobat model: {hint}")

    def _is_marker(self, func: ast.expr, which: str) -> bool:
        if isinstance(func, (ast.Name, ast.Attribute)):
            found, obj = self.resolve_global(func)
            return found and obj is self.markers[which]
        return False

    # -- expressions -----------------------------------------------------
    def expr(self, e: ast.expr) -> ir.Expr:
        loc = self.loc(e)
        match e:
            case ast.Constant(value=v):
                return ir.Const(loc, v)
            case ast.Name(id=name) if name in self.locals:
                return ir.Name(loc, name)
            case ast.Name(id=name) if name in self.nested:
                raise self.error(e, f"nested function `{name}` used as a value: only calls of it are supported "
                                    f"({_FUNCTION_VALUE})")
            case ast.Name() | ast.Attribute() if self.resolve_global(e)[0]:
                return self.global_value(e)
            case ast.Attribute(value=obj, attr=attr):
                return ir.Attr(loc, self.expr(obj), attr)
            case ast.Subscript(value=obj, slice=idx):
                return ir.Subscript(loc, self.expr(obj), self.expr(idx))
            case ast.Slice(lower=a, upper=b, step=c):
                return ir.Slice(loc, *(self.expr(x) if x is not None else None for x in (a, b, c)))
            case ast.Tuple(elts=elts):
                return ir.TupleExpr(loc, [self.expr(x) for x in elts])
            case ast.List(elts=elts):
                return ir.ListExpr(loc, [self.expr(x) for x in elts])
            case ast.Dict(keys=keys, values=values) if all(
                    isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                if len({k.value for k in keys}) < len(keys):  # type: ignore[union-attr]
                    raise self.error(e, "a dict literal repeats a key: write each key once")
                return ir.DictExpr(loc, [k.value for k in keys], [self.expr(v) for v in values])  # type: ignore[union-attr]
            case ast.BinOp(left=a, op=op, right=b):
                return ir.BinOp(loc, _BINOPS[type(op)], self.expr(a), self.expr(b))
            case ast.UnaryOp(op=ast.USub() | ast.UAdd() as op, operand=ast.Constant(value=int() | float() as v)):
                return ir.Const(loc, -v if isinstance(op, ast.USub) else v)  # a literal such as -1
            case ast.UnaryOp(op=op, operand=a):
                return ir.UnaryOp(loc, _UNOPS[type(op)], self.expr(a))
            case ast.Compare(left=a, ops=ops, comparators=rest):
                return ir.Compare(loc, [_CMPOPS[type(o)] for o in ops], [self.expr(x) for x in [a, *rest]])
            case ast.BoolOp(op=op, values=vs):
                return ir.BoolOp(loc, "and" if isinstance(op, ast.And) else "or", [self.expr(x) for x in vs])
            case ast.IfExp(test=t, body=b, orelse=o):
                return ir.IfExp(loc, self.expr(t), self.expr(b), self.expr(o))
            case ast.Call():
                return self.call(e)
        hint = _UNSUPPORTED_EXPR.get(type(e), "rewrite it with supported expressions")
        raise self.error(e, f"`{type(e).__name__}` expression is not supported in an acrobat model: {hint}")

    def global_value(self, e: ast.expr) -> ir.Expr:
        """A non-local name used as a value: a constant (number, string, dtype, class), or a module-level dict,
        list or tuple of host data read when the skeleton runs (``acrobat.frontend.globals``)."""
        _, obj = self.resolve_global(e)
        if isinstance(obj, (int, float, bool, str)) or obj is None:
            return ir.Const(self.loc(e), obj)
        if isinstance(obj, (torch.dtype, torch.device, torch.layout, torch.memory_format, type)) and not (
                isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
            return ir.Const(self.loc(e), obj)  # `dtype=torch.float32`, a class for isinstance: a constant of generated code
        if isinstance(e, ast.Name) and e.id not in self.nonlocals and is_global_data(self.fn.__globals__, e.id):
            return ir.Call(self.loc(e), ir.CallKind.HOST, GlobalRead(self.fn.__globals__, e.id), [], {})
        if callable(obj) and not isinstance(obj, torch.nn.Module):
            raise self.error(e, f"global `{ast.unparse(e)}` used as a value: only calls of it are supported "
                                f"({_FUNCTION_VALUE})")
        raise self.error(e, f"global `{ast.unparse(e)}` of type {type(obj).__name__} used as a value: "
                            "pass tensors and modules in as model parameters (arguments of the program)")

    def call(self, e: ast.Call) -> ir.Expr:
        fresh = fresh_factory(e)
        if fresh is not None:  # `x.new(1, d).fill_(0.).requires_grad_()`: `x.new_full((1, d), 0.)`
            return self.call(fresh)
        loc = self.loc(e)
        args = self.positional(e.args)
        kwargs = self.keywords(e.keywords)
        func = e.func
        if isinstance(func, ast.Name) and func.id in self.nested:
            key = self.nested[func.id]
            captured: list[ir.Expr] = [ir.Name(loc, c) for c in key.captured]
            return ir.Call(loc, ir.CallKind.PROGRAM, key, *self.bound(e, key, captured + args, kwargs))
        found, obj = (self.resolve_global(func) if isinstance(func, (ast.Name, ast.Attribute)) else (False, None))
        if found:
            if obj is self.markers["concurrent"]:
                if kwargs or not args or not all(
                        isinstance(a, ir.Call) and a.kind is ir.CallKind.PROGRAM for a in args):
                    raise self.error(e, "acrobat.concurrent(...) takes calls of @acrobat.function functions, "
                                        "e.g. acrobat.concurrent(f(node.left), f(node.right))")
                return ir.Concurrent(loc, args)  # type: ignore[arg-type]
            if obj is self.markers["phase"]:
                raise self.error(e, "acrobat.phase() is a statement of its own: write it on its own line")
            name = self.is_program_fn(obj)
            if name is not None:
                return ir.Call(loc, ir.CallKind.PROGRAM, obj, *self.bound(e, obj, args, kwargs))
            if isinstance(func, ast.Name) and getattr(builtins, func.id, None) is obj and func.id in HOST_BUILTINS:
                return ir.Call(loc, ir.CallKind.BUILTIN, func.id, args, kwargs)
            if obj is tuple and len(e.args) == 1 and not kwargs and isinstance(e.args[0], ast.Call) and isinstance(
                    e.args[0].func, ast.Attribute) and e.args[0].func.attr in _TUPLE_SPLITS:
                return args[0]  # `tuple(torch.chunk(x, 3))`: chunk/split/unbind already return a tuple
            if _is_torch_object(obj) and not isinstance(obj, types.ModuleType):
                return ir.Call(loc, ir.CallKind.TORCH, obj, args, kwargs)
            if callable(obj) and not isinstance(obj, types.ModuleType):
                # plain Python (an undecorated helper, math.*, print, a class): host code, run as written; the
                # kind analysis rejects it when it is given a tensor (it could not be batched)
                return ir.Call(loc, ir.CallKind.HOST, obj, args, kwargs)
            raise self.error(e, f"`{ast.unparse(func)}` is a {type(obj).__name__}, which cannot be called")
        if isinstance(func, ast.Attribute):
            return ir.Call(loc, ir.CallKind.METHOD, func.attr, args, kwargs, receiver=self.expr(func.value))
        return ir.Call(loc, ir.CallKind.VALUE, None, args, kwargs, receiver=self.expr(func))

    def positional(self, args: list[ast.expr]) -> list[ir.Expr]:
        """A call's positional arguments: ``*(a, b)`` as its items, ``*name`` as an ``ir.Starred`` (its items,
        once the kind analysis knows how many)."""
        out: list[ir.Expr] = []
        for a in args:
            match a:
                case ast.Starred(value=ast.Tuple(elts=items)):
                    out += self.positional(items)
                case ast.Starred(value=ast.Name(id=name) as v) if name in self.locals:
                    out.append(ir.Starred(self.loc(a), ir.Name(self.loc(v), name)))
                case ast.Starred(value=v):
                    raise self.error(a, _starred_fix("*", v))
                case _:
                    out.append(self.expr(a))
        return out

    def keywords(self, keywords: list[ast.keyword]) -> dict[str, ir.Expr]:
        """A call's keyword arguments: ``**{"a": x}`` as ``a=x``, ``**name`` as an ``ir.Starred`` under the
        key ``ir.STARRED_KEY + str(i)`` (its entries, once the kind analysis knows the dict's keys).

        Raises:
            CompileError: a keyword given twice (Python raises ``TypeError``), or a ``**`` value the kind
                analysis cannot see the keys of.
        """
        out: dict[str, ir.Expr] = {}
        for k in keywords:
            match k:
                case ast.keyword(arg=None, value=ast.Dict(keys=keys, values=values) as d) if _keyword_display(d):
                    pairs = [(key.value, v) for key, v in zip(keys, values)]  # type: ignore[union-attr]
                case ast.keyword(arg=None, value=ast.Name(id=name) as v) if name in self.locals:
                    out[f"{ir.STARRED_KEY}{len(out)}"] = ir.Starred(self.loc(k), ir.Name(self.loc(v), name), True)
                    continue
                case ast.keyword(arg=None, value=v):
                    raise self.error(k, _starred_fix("**", v))
                case _:
                    pairs = [(k.arg, k.value)]
            for key, v in pairs:
                if key in out:
                    raise self.error(k, f"keyword argument `{key}` is given twice (Python raises TypeError): "
                                        "give it once")
                out[key] = self.expr(v)
        return out

    def bound(self, e: ast.Call, callee: Any, args: list[ir.Expr],
              kwargs: dict[str, ir.Expr]) -> tuple[list[ir.Expr], dict[str, ir.Expr]]:
        """A program call's ``args`` and ``kwargs``: bound to the callee's parameters (``bind_arguments``), or,
        with a starred argument, as they are (the kind analysis binds them once it has expanded it)."""
        if any(isinstance(a, ir.Starred) for a in [*args, *kwargs.values()]):
            return args, kwargs
        return bind_arguments(callee, args, kwargs, self.loc(e)), {}


def bind_arguments(callee: Any, args: list[ir.Expr], kwargs: dict[str, ir.Expr], loc: ir.Loc) -> list[ir.Expr]:
    """The arguments of a call of the program function ``callee`` in the IR's parameter order (its positional
    parameters, its keyword-only ones, then ``*rest``): keywords placed by the callee's signature, omitted ones
    filled with its (literal) defaults, and those past its positional parameters as one tuple where it takes
    ``*rest`` (its last parameter, in the IR).

    Raises:
        CompileError: a keyword the callee has no parameter of, one given a second value, or more positional
            arguments than a callee with keyword-only parameters takes.
    """
    fn = getattr(callee, "fn", callee)
    params = list(inspect.signature(fn).parameters.values())
    positional = [q for q in params if q.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    keyword = [q for q in params if q.kind is inspect.Parameter.KEYWORD_ONLY]
    if any(q.kind is inspect.Parameter.VAR_POSITIONAL for q in params):
        bound = _bind(fn.__name__, positional, args[:len(positional)], kwargs, loc)
        return bound + [ir.TupleExpr(loc, args[len(positional):])] if len(bound) == len(positional) else bound
    if keyword and len(args) > len(positional):
        raise CompileError(f"`{fn.__name__}` takes {len(positional)} positional argument(s) but {len(args)} were "
                           f"given: pass {', '.join(f'`{q.name}`' for q in keyword)} by keyword", loc.file, loc.line,
                           loc.col)
    return _bind(fn.__name__, positional + keyword, args, kwargs, loc)


def _bind(name: str, params: list[inspect.Parameter], args: list[ir.Expr], kwargs: dict[str, ir.Expr],
          loc: ir.Loc) -> list[ir.Expr]:
    """``bind_arguments`` for the named parameters ``params`` of function ``name``."""
    if len(args) > len(params):
        return args  # the kind analysis reports the arity
    bound: list[ir.Expr | None] = [*args, *[None] * (len(params) - len(args))]
    names = [q.name for q in params]
    for key, value in kwargs.items():
        if key not in names:
            raise CompileError(f"`{name}` has no parameter `{key}`", loc.file, loc.line, loc.col)
        i = names.index(key)
        if bound[i] is not None:
            raise CompileError(f"`{name}` got two values for `{key}`", loc.file, loc.line, loc.col)
        bound[i] = value
    out: list[ir.Expr] = []
    for q, b in zip(params, bound):
        if b is None:
            if q.default is inspect.Parameter.empty:
                break  # too few arguments: the kind analysis reports the arity
            b = ir.Const(loc, q.default)
        out.append(b)
    return out


def _keyword_display(value: ast.expr) -> bool:
    """Whether ``value`` is a dict display of constant string keys (``**{"dim": 0}``: keywords as written)."""
    return isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                               for k in value.keys)


def _starred_fix(stars: str, value: ast.expr) -> str:
    """What to write instead of ``*value`` (``**value``) that the parser cannot hoist into a variable."""
    text = ast.unparse(value)
    return (f"`{stars}{text}` is unpacked where its value cannot be evaluated ahead of the call in Python's order "
            f"(after another call, or under `a if c else b`/`and`/`or`): evaluate it into a variable in a statement "
            f"of its own first (`args = {text}`, then `f({stars}args)`)")


def _literal_default(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand, ast.Constant))


def dedented(lines: list[str]) -> list[str]:
    """A method's lines moved to column 0 by its first line's indentation (``textwrap.dedent`` would keep them
    where a comment at column 0 sits among them, as notebook code often has)."""
    indent = lines[0][:len(lines[0]) - len(lines[0].lstrip())] if lines else ""
    return [line[len(indent):] if line.startswith(indent) else
            line.lstrip() if not line.strip() or line.lstrip().startswith("#") else line for line in lines]


def parse_function(fn: Callable, source: SourceSnapshot, is_program_fn: Callable[[Any], str | None],
                   markers: dict[str, Any], outlines: Sequence[Any] = ()) -> ir.Function:
    """Parse a Python function into an ``ir.Function``.

    ``source`` is the function's text as it was when it was decorated
    (``SourceSnapshot.take``): the code Python runs, whatever its file
    says now. ``is_program_fn(obj)`` returns the function name when ``obj``
    is an ``@acrobat.function`` (a call to it is a program call), else None;
    ``markers`` maps ``"concurrent"``/``"phase"`` to the acrobat marker
    functions.

    Raises:
        CompileError: the source is unavailable or not the code Python runs
            (see ``SourceSnapshot.function_lines``), or it uses an unsupported
            construct (message: ``file:line:col: what; what to write instead``).
    """
    src_lines, first = source.function_lines()
    filename = source.filename
    tree = ast.parse("".join(dedented(src_lines)))
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise CompileError("expected a function definition", filename, first, 0)
    lines = {first + i: text.rstrip("\n") for i, text in enumerate(src_lines)}
    for o in outlines:
        o.apply(fdef, first)
    _mangle_locals(fdef)
    translator = _Translator(fn, filename, first - 1, lines, is_program_fn, markers)
    translator.scope.update({o.name: o.function for o in outlines})
    return translator.function(fdef)
