"""Padded functions in the static tier: which calls become one, and the kind of their results (issue 18 §2).

A program function that the static analysis rejects becomes a dynamic region (``acrobat.analysis.regions``:
the same checks that its own code changes no host state that outlives it, and returns a value on every path).
Where such a function is called with a stacked list (``RaggedK``, depth 1) and otherwise only per-instance
tensors, shared values and host data (``roles``), the call is instead a *padded function*
(``acrobat.runtime.padded``): one segment node per instance, its batched form the user's function run once
per launch on padded tensors. It needs no fiber and records no operator: it is static-tier code. A function
that reads a value's Python type (``isinstance``, ``type``, ``torch.is_tensor``: ``type_read``) is none: its
``Padded`` values are no ``torch.Tensor``.

The static program needs the kind of its result before any run: per returned item, a stacked list or a
per-instance tensor (``result_kind``). It is read from the source (``_form``): an item computed from a
stacked-list parameter (assigned, appended to a list, or an item of a loop over one) stays a stacked list
unless a reduction over the list axis (``sum``/``mean``/``amax``/``amin``/``max``/``min``/``logsumexp`` over
``dim=0`` or every dim, without ``keepdim=True``) takes it; the launch checks the assumption on the values it
computes (another form: ``LimitError``, the batch reruns in the dynamic tier). Beyond the paper's §3 language
(tensors of per-instance shape), like ``acrobat.analysis.ragged``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Sequence

from acrobat.analysis.kinds import DYNAMIC, RAGGED, HostK, Kind, RaggedK, SharedK, Spec, TensorK, TupleK
from acrobat.analysis.regions import Region
from acrobat.runtime.plan import BlockCode, PaddedOp, Site

#: The reductions that take the list axis away when given ``dim=0`` or no dim.
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "logsumexp", "norm", "prod"})
#: List methods whose arguments become (or hold) items of the list.
_LIST_WRITES = frozenset({"append", "extend", "insert"})
#: Attributes of a tensor that are no tensor of its form.
_META = frozenset({"shape", "dtype", "device", "ndim", "is_cuda"})

LIST, DENSE, NEUTRAL = "list", "dense", "neutral"


def roles(kinds: Sequence[Kind]) -> tuple[str, ...] | None:
    """Per argument of a call, what a padded function's node holds of it (``PaddedOp.roles``), or None where
    the call is no padded function's: no stacked list among ``kinds``, or an argument of another kind (a list,
    a tuple, a stack of stacks)."""
    if not any(isinstance(k, RaggedK) and k.depth == 1 for k in kinds):
        return None
    out = []
    for k in kinds:
        match k:
            case RaggedK(depth=1):
                out.append("rows")
            case TensorK():
                out.append("tensor")
            case SharedK():
                out.append("shared")
            case HostK():
                out.append("host")
            case _:
                return None
    return tuple(out)


def result_kind(fdef: ast.FunctionDef, arity: int | None, kinds: Sequence[Kind]) -> tuple[Kind, tuple[bool, ...]]:
    """The kind of a padded function's result, and per item whether it is a stacked list (see the module
    docstring); ``kinds`` are its arguments' kinds, ``arity`` the length of the tuple it returns (None: one
    value)."""
    params = [a.arg for a in [*fdef.args.posonlyargs, *fdef.args.args]]
    forms = {p: LIST if isinstance(k, RaggedK) else DENSE if isinstance(k, TensorK) else NEUTRAL
             for p, k in zip(params, kinds)}
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fdef):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name):
                        assigned.setdefault(name.id, []).append(node.value)
        elif isinstance(node, (ast.For, ast.comprehension)):  # `for q in qs`: an item of `qs`
            for name in ast.walk(node.target):
                if isinstance(name, ast.Name):
                    assigned.setdefault(name.id, []).append(node.iter)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _LIST_WRITES and isinstance(node.func.value, ast.Name):
            assigned.setdefault(node.func.value.id, []).extend(node.args)  # `outs.append(h)`: an item of `outs`
    returns = [r.value for r in ast.walk(fdef) if isinstance(r, ast.Return) and r.value is not None]
    n = 1 if arity is None else arity
    ragged = [False] * n
    for r in returns:
        items = [r] if arity is None else r.elts  # type: ignore[attr-defined]
        for i, item in enumerate(items):
            ragged[i] = ragged[i] or _form(item, forms, assigned, frozenset()) == LIST
    kind_of = [RAGGED if x else DYNAMIC for x in ragged]
    return (kind_of[0] if arity is None else TupleK(tuple(kind_of))), tuple(ragged)


def region_result(region: Region, kinds: Sequence[Kind]) -> tuple[Kind, tuple[bool, ...]]:
    """``result_kind`` of padded function ``region`` given ``kinds``; a padded run's (``Region.ragged``: its
    results' kinds in the compile it was outlined from) as it was known there."""
    if region.ragged is None:
        assert region.tree is not None
        return result_kind(region.tree, region.arity, kinds)
    kind_of = [RAGGED if x else DYNAMIC for x in region.ragged]
    return (kind_of[0] if region.arity is None else TupleK(tuple(kind_of))), region.ragged


def _form(e: ast.expr, params: dict[str, str], assigned: dict[str, list[ast.expr]], seen: frozenset[str]) -> str:
    """``LIST``, ``DENSE`` or ``NEUTRAL`` (a number, a module, a constant): the form of ``e``'s value."""
    match e:
        case ast.Name(id=name):
            if name in seen:
                return NEUTRAL
            found = [_form(v, params, assigned, seen | {name}) for v in assigned.get(name, [])]
            return _join([params.get(name, NEUTRAL), *found])
        case ast.Attribute(value=v, attr=attr):
            return NEUTRAL if attr in _META else _form(v, params, assigned, seen)
        case ast.Subscript(value=v):
            return _form(v, params, assigned, seen)
        case ast.Call(func=f, args=args, keywords=kws):
            if _reduces_list_axis(e):
                return DENSE
            if isinstance(f, ast.Name) and f.id == "len":
                return NEUTRAL
            parts = [*args, *(k.value for k in kws)]
            if isinstance(f, ast.Attribute):
                parts.append(f.value)
            return _join([_form(p, params, assigned, seen) for p in parts])
        case ast.Constant():
            return NEUTRAL
    return _join([_form(c, params, assigned, seen) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)])


def _join(forms: Sequence[str]) -> str:
    return LIST if LIST in forms else DENSE if DENSE in forms else NEUTRAL


def _reduces_list_axis(c: ast.Call) -> bool:
    """Whether ``c`` is a reduction over dim 0 or every dim (``x.sum(0)``, ``torch.mean(x, dim=0)``, ``x.max()``),
    without ``keepdim=True``."""
    f = c.func
    if not isinstance(f, ast.Attribute) or f.attr not in _REDUCTIONS:
        return False
    if any(k.arg == "keepdim" and not (isinstance(k.value, ast.Constant) and not k.value.value) for k in c.keywords):
        return False
    method = not (isinstance(f.value, ast.Name) and f.value.id in ("torch", "F"))
    dims = [k.value for k in c.keywords if k.arg == "dim"] or c.args[0 if method else 1:][:1]
    return not dims or isinstance(dims[0], ast.Constant) and dims[0].value == 0


#: Calls that read a value's Python type: a padded function's values are ``Padded``, no ``torch.Tensor``.
_TYPE_READS = frozenset({"isinstance", "issubclass", "type"})


def type_read(fdef: ast.FunctionDef, scope: dict[str, Any], seen: frozenset[Any] = frozenset()) -> str | None:
    """Where ``fdef`` (or a function of ``scope`` it calls by name, transitively) reads a value's Python type
    (``isinstance``, ``issubclass``, ``type``, ``torch.is_tensor``), as a phrase naming the function; None where
    it does not. Such a function is no padded function: run once on ``Padded`` values, ``isinstance(x,
    torch.Tensor)`` would be False where the instance's own call finds True, and take another branch."""
    for node in ast.walk(fdef):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in _TYPE_READS or isinstance(f, ast.Attribute) and f.attr == "is_tensor":
            return f"`{ast.unparse(f)}` in `{fdef.name}`"
        if not isinstance(f, ast.Name):
            continue
        callee = getattr(scope.get(f.id), "fn", scope.get(f.id))
        if not inspect.isfunction(callee) or callee in seen:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(callee))).body[0]
        except (OSError, TypeError, SyntaxError):
            return f"`{f.id}` (its source cannot be read) in `{fdef.name}`"
        found = type_read(tree, callee.__globals__, seen | {callee}) if isinstance(tree, ast.FunctionDef) else None
        if found is not None:
            return found
    return None


def padded_op(spec: Spec) -> PaddedOp | None:
    """The ``PaddedOp`` of ``spec``, a specialization of a region function given stacked lists (its key's
    argument kinds: ``roles``), else None."""
    region = spec.fn.region
    kinds = spec.key[1]
    found = roles(kinds) if region is not None and region.tree is not None else None
    if found is None:
        return None
    _, ragged = region_result(region, kinds)
    return PaddedOp(region.name, len(ragged), call=region.call, where=region.where, roles=found, ragged=ragged,
                    arity=region.arity)


def padded_code(op: PaddedOp, bid: int) -> BlockCode:
    """The block of padded function ``op`` under id ``bid``, named ``padded NAME (file:line)`` in run
    reports: its per-instance function is the user's own (``Region.call``), its launches
    ``acrobat.runtime.padded.PaddedKernel``'s."""
    short = op.where.rsplit("/", 1)[-1]
    return BlockCode(bid, f"padded {op.op} ({short})", Site(op.where, f"def {op.op}"), (), (), (), op.call, False, op)
