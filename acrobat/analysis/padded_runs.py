"""Padded runs: the statements around a padded function's call join it in one padded launch (issue 18 §2).

A padded function (``acrobat.analysis.padded``) runs once per launch on ``(B, Lmax, ...)`` values, but the code
around its call (layer norms, a feed-forward, a masked pool) stays row-wise: one DFG node per row per operator,
each gathered. Once a program compiles, each call of a padded function in a program function (the entry
included) is grown into the maximal run of consecutive statements of the same statement list around it that a
padded launch can take as well (``paddable``), and that run is outlined into ONE function
(``acrobat.analysis.outline``: live-ins as parameters, live-outs returned) whose call, given stacked lists, is a
padded function itself. A statement can join the run when, by the kinds of the compile before:

- it is a plain assignment (``a = e``, ``a, b = e``) of names that hold stacked lists (``RaggedK`` of depth 1) or
  per-instance tensors, no ``+=`` (which would write the caller's tensor), no host control flow (``if``/loops,
  ``x if c else y``, ``and``/``or``, comprehensions, lambdas, ``:=``);
- every name it reads is a stacked list, a per-instance tensor, a shared value, or a module-level name (a module,
  a function, a number); a host list enters only as ``torch.tensor(tokens)`` (a token list,
  ``acrobat.analysis.token_lists``): that call is *hoisted* before the outlined call (``t = torch.tensor(tokens)``,
  a stacked list of ints padded with its lengths), which is exactly the value the statement made;
- each call is a torch function or ``torch.Tensor`` method with a padding rule (``acrobat.runtime.padding.RULES``),
  a call on a shared value (a module: its ``forward`` runs through the same rules), or a padded function of the
  program; no value reads (``.item()``, ``float(x)``), no ``len``/``.shape``/``.size()`` of a local (each
  instance's own length is no number in a padded launch).

Exactness does not rest on this guess: the outlined run is kept only where the compile makes its call a padded
function with no host arguments and each hoisted token list a stacked list (``taken``; ``Program._static`` keeps
the compile before otherwise), and at run time any operator without a padding rule raises ``LimitError`` (the batch reruns in the
dynamic tier, exact). Beyond the paper (§4.1 batches static blocks; a padded function is this repository's own).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import types
from typing import Any, Callable, Mapping

import torch

from acrobat.analysis.kinds import RaggedK, SharedK, Spec, TensorK
from acrobat.analysis.outline import Run, _bodies, _fresh, _statements, outlined, parsed_function
from acrobat.analysis.regions import Region
from acrobat.analysis.token_lists import is_constructor
from acrobat.runtime.padding import PREFIX, RULES, prefix
from acrobat.runtime.plan import PaddedOp, Plan

#: Nodes of host control flow or host values that end a run.
_HOST_FLOW = (ast.IfExp, ast.BoolOp, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda,
              ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.JoinedStr, ast.Starred, ast.Dict, ast.Set)
#: What a local's length or rank is: no number in a padded launch.
_SIZES = frozenset({"shape", "size", "dim", "ndim", "numel", "item", "tolist"})


def grow(lowered: list, regions: Mapping[Any, Region], padded: set[str],
         wrap: Callable[[Callable], Any]) -> Region | None:
    """The first padded run worth outlining in the compiled program (``lowered``: its ``LoweredFunction``s),
    as a region marked to become a padded function; None where there is none. ``padded`` holds the names of
    the padded functions of the compile (``PaddedOp.op``), ``regions`` the regions so far, ``wrap`` makes the
    program function of the new Python function (``acrobat.Function``)."""
    specs: dict[Any, list[Spec]] = {}
    for lf in lowered:
        specs.setdefault(lf.spec.key[0], []).append(lf.spec)
    # the padded functions as the program's globals hold them: decorated, or plain helpers
    targets = {g for f in regions if getattr(f, "__name__", None) in padded and regions[f].outline is None
               for g in (f, getattr(f, "fn", f))}
    for function, found in specs.items():
        if function in regions or getattr(function, "fn", None) is None:
            continue
        parsed = parsed_function(function, regions)
        if isinstance(parsed, str):
            continue
        anchors = [(st.lineno, st.col_offset) for _, _, st in _statements(parsed[0].body)
                   if _calls_padded(st, function.fn.__globals__, targets)]
        for at in anchors:  # each tried on a fresh parse (a try rewrites the definition)
            fdef, first = parsed_function(function, regions)  # type: ignore[misc]
            body, i = next((b, i) for b, i, st in _statements(fdef.body) if (st.lineno, st.col_offset) == at)
            made = _run_region(function, fdef, first, body, i, found, targets, wrap)
            if made is not None:
                return made
    return None


def taken(region: Region, plan: Plan) -> bool:
    """Whether ``plan``, compiled with the padded run ``region`` (from ``grow``), runs it as a padded function
    on every call, given no host values, each hoisted token list as a stacked list."""
    ops = [b.segment for b in plan.blocks.values() if isinstance(b.segment, PaddedOp) and b.segment.op == region.name]
    params = region.outline.params
    lists = [params.index(name) for name, _ in region.outline.hoisted]
    return region not in plan.regions and bool(ops) and all(
        "host" not in op.roles and all(op.roles[i] == "rows" for i in lists) for op in ops)


def _run_region(function: Any, fdef: ast.FunctionDef, first: int, body: list[ast.stmt], i: int, specs: list[Spec],
                targets: set[Any], wrap: Callable[[Callable], Any]) -> Region | None:
    """The region of the run around ``body[i]`` (a call of a padded function), outlined with its hoisted token
    lists; None where the run is the bare call alone or cannot be outlined."""
    env = function.fn.__globals__
    ok = [paddable(st, env, specs, targets) for st in body]
    if not ok[i]:
        return None
    lo, hi = i, i
    while lo > 0 and ok[lo - 1]:
        lo -= 1
    while hi + 1 < len(body) and ok[hi + 1]:
        hi += 1
    run = body[lo:hi + 1]
    if len(run) == 1 and _bare_call(run[0]):
        return None
    names = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)} | set(env)
    hoisted: dict[str, str] = {}
    for st in run:
        _hoist(st, env, specs, hoisted, names)
    block = Run(body=run, handlers=[], orelse=[], finalbody=[])
    ast.copy_location(block, run[0])
    block.end_lineno, block.end_col_offset = run[-1].end_lineno, run[-1].end_col_offset
    lets = [ast.Assign([ast.Name(n, ast.Store())], ast.parse(e, mode="eval").body) for e, n in hoisted.items()]
    for let in lets:
        for node in ast.walk(let):
            ast.copy_location(node, run[0])
    body[lo:hi + 1] = [*lets, block]
    path = _path_to(fdef.body, block)
    made = outlined(function, fdef, first, path, len(path) - 1, names, "a run of statements around a padded "
                    "function's call (acrobat.analysis.padded_runs)", wrap, tuple((n, e) for e, n in hoisted.items()),
                    padded=True, helpers={PREFIX: prefix})
    if not isinstance(made, Region):
        return None
    forms = {tuple(isinstance(s.var.get(r), RaggedK) for r in made.outline.results) for s in specs}
    return dataclasses.replace(made, ragged=forms.pop()) if len(forms) == 1 else made


def _path_to(body: list[ast.stmt], target: ast.stmt) -> list[tuple[list[ast.stmt], int, ast.stmt]]:
    """The statements holding ``target`` (itself last), outermost first: (their list, index, statement)."""
    for i, st in enumerate(body):
        if st is target:
            return [(body, i, st)]
        for sub in _bodies(st):
            inner = _path_to(sub, target)
            if inner:
                return [(body, i, st), *inner]
    return []


def _bare_call(st: ast.stmt) -> bool:
    return isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name)


def _calls_padded(st: ast.stmt, env: Mapping[str, Any], targets: set[Any]) -> bool:
    """Whether simple statement ``st`` calls a padded function by its module-level name."""
    return isinstance(st, ast.Assign) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and env.get(n.func.id) in targets
        for n in ast.walk(st))


def paddable(st: ast.stmt, env: Mapping[str, Any], specs: list[Spec], targets: set[Any]) -> bool:
    """Whether statement ``st`` can run inside a padded launch under the kinds of every specialization of its
    function in ``specs`` (the module docstring's rules); ``env`` its module's globals, ``targets`` the padded
    functions."""
    if not isinstance(st, ast.Assign) or not all(_names_only(t) for t in st.targets):
        return False
    if any(isinstance(n, _HOST_FLOW) or isinstance(n, ast.Compare) and
           any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in n.ops) for n in ast.walk(st.value)):
        return False
    stored = {n.id for t in st.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for spec in specs:
        if not all(_tensor(spec.var.get(v)) for v in stored):
            return False
        if not _expr_ok(st.value, env, spec, targets):
            return False
    return True


def _names_only(t: ast.expr) -> bool:
    return isinstance(t, ast.Name) or isinstance(t, (ast.Tuple, ast.List)) and all(_names_only(e) for e in t.elts)


def _tensor(k: Any) -> bool:
    return isinstance(k, TensorK) or isinstance(k, RaggedK) and k.depth == 1


def _expr_ok(e: ast.expr, env: Mapping[str, Any], spec: Spec, targets: set[Any]) -> bool:
    """Whether every name ``e`` reads and every call it makes is one a padded launch takes (module docstring)."""
    if _token_list(e, env, spec):
        return True
    if _positions(e, spec):
        return _expr_ok(e.value, env, spec, targets)  # type: ignore[attr-defined]
    match e:
        case ast.Name(id=name):
            if name in spec.var:
                k = spec.var[name]
                return _tensor(k) or isinstance(k, SharedK)
            return _global_ok(name, env)
        case ast.Attribute(value=v, attr=attr):
            root = _root(v)
            if attr in _SIZES and not (root is not None and isinstance(spec.var.get(root), SharedK)):
                return False
            return _expr_ok(v, env, spec, targets)
        case ast.Call(func=f, args=args, keywords=kws):
            if not _callee_ok(f, env, spec, targets):
                return False
            parts = [*args, *(k.value for k in kws)]
            if isinstance(f, ast.Attribute):
                parts.append(f.value)
            return all(_expr_ok(p, env, spec, targets) for p in parts)
    return all(_expr_ok(c, env, spec, targets) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr))


def _global_ok(name: str, env: Mapping[str, Any]) -> bool:
    """A module-level (or builtin) name a padded launch may read: a module, a function, a number."""
    value = env.get(name, getattr(builtins, name, None))
    return isinstance(value, (types.ModuleType, int, float)) or callable(value) and name not in vars(builtins)


def _callee_ok(f: ast.expr, env: Mapping[str, Any], spec: Spec, targets: set[Any]) -> bool:
    """Whether the callee ``f`` has a padding rule, is a module or method of a shared value, or is a padded
    function."""
    if isinstance(f, ast.Name):
        if f.id in spec.var:
            return isinstance(spec.var[f.id], SharedK)
        value = env.get(f.id)
        return value in targets or _has_rule(value)
    if not isinstance(f, ast.Attribute):
        return False
    if isinstance(_resolve(f.value, env), types.ModuleType):
        return _has_rule(_resolve(f, env))
    root = _root(f)
    if root is not None and isinstance(spec.var.get(root), SharedK):
        return True  # a module of the shared values (its forward through the rules), a method of a shared tensor
    return _has_rule(getattr(torch.Tensor, f.attr, None))


def _has_rule(value: Any) -> bool:
    try:
        return value is not None and value in RULES
    except TypeError:  # an unhashable value
        return False


def _root(e: ast.expr) -> str | None:
    """The variable an attribute chain or call receiver starts from (``p`` of ``p.ln1.weight``)."""
    while isinstance(e, (ast.Attribute, ast.Subscript, ast.Call)):
        e = e.func if isinstance(e, ast.Call) else e.value
    return e.id if isinstance(e, ast.Name) else None


def _resolve(e: ast.expr, env: Mapping[str, Any]) -> Any:
    """The module-level object an attribute chain names (``torch.nn.functional.relu``), or None."""
    if isinstance(e, ast.Name):
        return env.get(e.id)
    if isinstance(e, ast.Attribute):
        base = _resolve(e.value, env)
        return getattr(base, e.attr, None) if isinstance(base, types.ModuleType) else None
    return None


def _token_list(e: ast.expr, env: Mapping[str, Any], spec: Spec) -> bool:
    """Whether ``e`` is ``torch.tensor(v)`` of a host variable ``v`` (a token list: hoisted before the run)."""
    return isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords and isinstance(e.args[0], ast.Name) \
        and _host(spec, e.args[0].id) and is_constructor(_resolve(e.func, env))


def _host(spec: Spec, name: str) -> bool:
    """Whether local ``name`` is host data (not a tensor, a stacked list or a shared value)."""
    return name in spec.var and not _tensor(spec.var[name]) and not isinstance(spec.var[name], SharedK)


def _positions(e: ast.expr, spec: Spec) -> str | None:
    """The host list ``v`` where ``e`` is ``V[:len(v)]`` of a shared value ``V`` (learned positions), else None."""
    match e:
        case ast.Subscript(value=v, slice=ast.Slice(lower=None, upper=ast.Call(
                func=ast.Name(id="len"), args=[ast.Name(id=name)], keywords=[]), step=None)):
            root = _root(v)
            if root is not None and isinstance(spec.var.get(root), SharedK) and _host(spec, name):
                return name
    return None


def _hoist(st: ast.stmt, env: Mapping[str, Any], specs: list[Spec], hoisted: dict[str, str], taken: set[str]) -> None:
    """Replace, in ``st``, each ``torch.tensor(v)`` of a host list by a fresh name, which ``hoisted`` maps its
    source to (the same source, the same name), and each ``V[:len(v)]`` by ``prefix(V, <that name>)``
    (``acrobat.runtime.padding.prefix``)."""
    torch_name = next((k for k, v in env.items() if v is torch), None)
    for node in list(ast.walk(st)):
        for field, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for j, child in enumerate(items):
                new = _hoisted(child, env, specs, hoisted, taken, torch_name) if isinstance(child, ast.expr) else None
                if new is None:
                    continue
                if isinstance(value, list):
                    value[j] = new
                else:
                    setattr(node, field, new)


def _hoisted(e: ast.expr, env: Mapping[str, Any], specs: list[Spec], hoisted: dict[str, str], taken: set[str],
             torch_name: str | None) -> ast.expr | None:
    """What ``_hoist`` puts in place of ``e``, or None where ``e`` stays."""
    if all(_token_list(e, env, s) for s in specs):
        host, src = e.args[0].id, ast.unparse(e)  # type: ignore[attr-defined]
    else:
        found = {_positions(e, s) for s in specs}
        host = found.pop() if len(found) == 1 else None
        if host is None or torch_name is None:
            return None
        src = f"{torch_name}.tensor({host})"
    name = hoisted.get(src) or _fresh(f"{host}_tensor", taken)
    hoisted[src] = name
    new: ast.expr = ast.Name(name, ast.Load())
    if isinstance(e, ast.Subscript):
        new = ast.Call(ast.Name(PREFIX, ast.Load()), [e.value, new], [])
    for node in ast.walk(new):
        ast.copy_location(node, e)
    return new
