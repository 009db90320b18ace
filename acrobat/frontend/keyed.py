"""``sorted``/``max``/``min`` with a ``key=lambda``: desugared into comprehensions the analysis already takes.

Model code ranks host data with a key function: ``max(range(T), key=lambda k: final[k])`` (Viterbi's last
tag), ``sorted(beams, key=lambda c: c[0], reverse=True)`` (beam search). A lambda is a function value, which
the static analysis (§4) does not follow; these calls need none. Each is rewritten, before translation, into
plain statements and comprehensions with Python's exact semantics:

- the items are taken once, in order: ``items = list(E)`` (``[a, b]`` for ``max(a, b, key=...)``);
- the key runs once per item, in order, as the lambda would: ``keys = [BODY for PARAM in items]``;
- ``max``/``min``: the first item whose key is largest/smallest, as Python returns it:
  ``items[keys.index(max(keys))]``;
- ``sorted``: a stable sort of the keys with the position breaking ties, so items themselves are never
  compared: ``[items[i] for _, i in sorted(zip(keys, range(len(items))))]``, and with ``reverse=True``
  positions negated (``(key, -i)`` sorted descending keeps equal keys in their first order, as Python does).

A key that gives tensors compares them by value (a value read); keys that mix host data and tensors are
rejected as anywhere else. ``map(lambda x: BODY, xs)`` consumed where it stands (``zip(*map(...))``,
``list(map(...))``) is the comprehension ``[BODY for x in xs]`` (``mapped``). Other uses of ``lambda`` stay
rejected at compile time.
"""

from __future__ import annotations

import ast
import builtins
from typing import Callable, TypeVar

RANKERS = ("sorted", "max", "min")  # the builtins whose `key=lambda` is rewritten
_N = TypeVar("_N", bound=ast.AST)


def keyed_call(call: ast.Call, func: object, fresh: Callable[[str], str]) -> tuple[list[ast.stmt], ast.expr] | None:
    """``call`` (to ``func``, the object its name resolves to) rewritten without its ``key=lambda``.

    Returns ``(statements to run first, the expression that replaces the call)``, or None when the call is not
    ``sorted``/``max``/``min`` with a one-parameter lambda key (and, for ``sorted``, a constant ``reverse``):
    the caller leaves such a call as it is. ``fresh(hint)`` gives a new local name. The statements and the
    expression hold list comprehensions, which the caller hoists as it hoists the user's own.
    """
    if not any(func is getattr(builtins, f) for f in RANKERS) or not call.args:
        return None
    kwargs = {k.arg: k.value for k in call.keywords}
    key = kwargs.pop("key", None)
    reverse = kwargs.pop("reverse", ast.Constant(False)) if func is builtins.sorted else ast.Constant(False)
    if kwargs or not isinstance(key, ast.Lambda) or not isinstance(reverse, ast.Constant) or \
            any(isinstance(a, ast.Starred) for a in call.args) or not _one_param(key.args):
        return None
    if func is not builtins.sorted and len(call.args) > 1:
        source: ast.expr = ast.List(list(call.args), ast.Load())  # max(a, b, key=...): ranks its arguments
    elif len(call.args) == 1:
        source = ast.Call(ast.Name("list", ast.Load()), [call.args[0]], [])
    else:
        return None
    items, keys = fresh("keyed_items"), fresh("keyed_keys")
    param = key.args.args[0].arg
    pre: list[ast.stmt] = [
        ast.Assign([ast.Name(items, ast.Store())], source),
        ast.Assign([ast.Name(keys, ast.Store())],
                   ast.ListComp(key.body, [ast.comprehension(ast.Name(param, ast.Store()), _load(items), [], 0)])),
    ]
    if func is not builtins.sorted:
        best = ast.Call(ast.Name(func.__name__, ast.Load()), [_load(keys)], [])  # type: ignore[attr-defined]
        index = ast.Call(ast.Attribute(_load(keys), "index", ast.Load()), [best], [])
        return _located(pre, call), _located_expr(ast.Subscript(_load(items), index, ast.Load()), call)
    desc = bool(reverse.value)
    pos, tie = fresh("keyed_pos"), fresh("keyed_tie")
    positions: ast.expr = ast.Call(ast.Name("range", ast.Load()),
                                   [ast.Call(ast.Name("len", ast.Load()), [_load(items)], [])], [])
    if desc:  # (key, -i) descending: equal keys keep their first order
        i = fresh("keyed_i")
        positions = ast.ListComp(ast.UnaryOp(ast.USub(), _load(i)),
                                 [ast.comprehension(ast.Name(i, ast.Store()), positions, [], 0)])
    ranked = ast.Call(ast.Name("sorted", ast.Load()),
                      [ast.Call(ast.Name("zip", ast.Load()), [_load(keys), positions], [])],
                      [ast.keyword("reverse", ast.Constant(True))] if desc else [])
    at: ast.expr = ast.UnaryOp(ast.USub(), _load(pos)) if desc else _load(pos)
    result = ast.ListComp(ast.Subscript(_load(items), at, ast.Load()),
                          [ast.comprehension(ast.Tuple([ast.Name(tie, ast.Store()), ast.Name(pos, ast.Store())],
                                                       ast.Store()), ranked, [], 0)])
    return _located(pre, call), _located_expr(result, call)


CONSUMERS = ("list", "tuple", "sum", "sorted", "max", "min")
"""The builtins that consume the iterable they are given at once, in order, to its end (``list(map(f, xs))``)."""


def mapped(call: ast.expr, func: object) -> ast.ListComp | None:
    """``map(lambda x: BODY, xs)`` (``call``, ``func`` the object its name resolves to) as the comprehension
    ``[BODY for x in xs]``, or None for any other expression. Python's ``map`` is lazy and the comprehension is
    not: the caller rewrites only a ``map`` consumed at once and to its end where it stands, as the value of a
    ``*`` in a call (``zip(*map(lambda x: x.state, children))``) or the argument of a ``CONSUMERS`` builtin;
    there the lambda runs once per item, in order, as the comprehension's body does."""
    if not (isinstance(call, ast.Call) and func is builtins.map and len(call.args) == 2 and not call.keywords
            and isinstance(call.args[0], ast.Lambda) and _one_param(call.args[0].args)
            and not isinstance(call.args[1], ast.Starred)):
        return None
    fn = call.args[0]
    target = ast.Name(fn.args.args[0].arg, ast.Store())
    return _located_expr(ast.ListComp(fn.body, [ast.comprehension(target, call.args[1], [], 0)]), call)


def _one_param(a: ast.arguments) -> bool:
    return len(a.args) == 1 and not (a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults)


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _located(stmts: list[ast.stmt], at: ast.AST) -> list[ast.stmt]:
    for s in stmts:
        _located_expr(s, at)
    return stmts


def _located_expr(node: _N, at: ast.AST) -> _N:
    """``node`` and every new node in it placed at ``at``'s source position (errors point at the call)."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.stmt, ast.expr)) and not hasattr(sub, "lineno"):
            ast.copy_location(sub, at)
    return node
