"""Lists under many names, and host side effects: what makes batched runs differ from plain Python.

Two checks over the specializations the kind analysis found (``ListFlow``
records of each), run once it has reached its fixpoint:

- **Lists changed in place must be followed.** A list is one object, so a
  tensor appended through one name is in the list every other name sees.
  The kind analysis keeps the names it can follow in agreement (assignments,
  loop variables, elements, call arguments and parameters). A list changed
  in place that may also be held somewhere the analysis does not follow
  (a tuple, a call's result) would leave stale kinds behind, and the
  runtime would return raw handles for tensors: ``check_lists`` rejects it
  at compile time instead.
- **Host side effects keep Python's order (§4.2).** On fibers, concurrent
  calls run as child fibers that interleave whenever one waits for a tensor
  value. That is invisible when the calls change no host state that
  outlives them. ``escaping_effects`` finds the specializations that do
  (a list reached from a parameter changed in place, a host object's
  mutating method, a call of a host value), so their concurrent calls run
  one after the other, as plain Python runs them.
"""

from __future__ import annotations

from typing import Iterable

from acrobat.analysis.kinds import Spec, SpecKey
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.frontend.parser import shown_name

_Node = tuple[str, str]  # (specialization name, variable name); ("?", loc) for a list from nowhere followed


class _Classes:
    """Union-find over list variables: those that may hold one list end in one class."""

    def __init__(self) -> None:
        self.parent: dict[_Node, _Node] = {}

    def find(self, x: _Node) -> _Node:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: _Node, b: _Node) -> None:
        self.parent[self.find(a)] = self.find(b)


def _classes(specs: dict[SpecKey, Spec]) -> _Classes:
    """The alias classes of every list variable of ``specs`` (edges, and call arguments to parameters)."""
    c = _Classes()
    for spec in specs.values():
        for (a, _), (b, _) in spec.lists.edges:
            c.union((spec.name, a), (spec.name, b))
        for (nid, i), path in spec.lists.links.items():
            callee = specs.get(spec.calls.get(nid))  # type: ignore[arg-type]
            if callee is None or path is None:  # a fresh list: what the callee does to it, nobody else sees
                continue
            param = (callee.name, callee.fn.params[i])
            c.union(param, (spec.name, path[0]) if path[0] != "?" else ("?", f"{spec.name}:{nid}"))
    return c


def check_lists(specs: dict[SpecKey, Spec]) -> None:
    """Reject a list changed in place that may be held somewhere the analysis does not follow.

    Raises:
        CompileError: at the change, naming where the list came from and what to write instead; its
            ``variable`` is (function, name) of the list changed (``kinds.analyze_kinds`` splits a variable
            that names two lists, one changed and one not followed, into its versions and analyses again).
    """
    c = _classes(specs)
    origins: dict[_Node, tuple[str, ir.Loc]] = {}
    for spec in specs.values():
        for name, node in spec.lists.untracked.items():
            origins.setdefault(c.find((spec.name, name)), (shown_name(name), node.loc))
        for name, calls in spec.lists.returned.items():
            for nid, node in calls.items():
                if not _returns_fresh(specs.get(spec.calls.get(nid)), c):  # type: ignore[arg-type]
                    origins.setdefault(c.find((spec.name, name)), (shown_name(name), node.loc))
        for (nid, i), path in spec.lists.links.items():
            if path is not None and path[0] == "?":
                origins.setdefault(c.find(("?", f"{spec.name}:{nid}")), (f"argument {i + 1} of a call",
                                                                          _call_loc(spec, nid)))
    for spec in specs.values():
        for name, node in spec.lists.mutated.items():
            origin = origins.get(c.find((spec.name, name)))
            if origin is not None:
                what, loc = origin
                err = CompileError(
                    f"the list {shown_name(name)} is changed in place here, but it may also be held where acrobat "
                    f"cannot follow it ({what} at line {loc.line}: from a tuple, a call's result or an expression): "
                    "keep a list that is changed in one variable and pass that variable itself, or build a new "
                    "list (`xs = xs + [x]`)", node.loc.file, node.loc.line, node.loc.col)
                err.variable = (spec.key[0], name)  # type: ignore[attr-defined]
                raise err


def _returns_fresh(callee: Spec | None, c: _Classes) -> bool:
    """Whether every list ``callee`` returns is one it made and holds nowhere else: each ``return`` gives a
    variable whose alias class has no parameter (a caller's list) and no list the analysis does not follow, so
    the caller that gets it is its only holder (``states = run_gru(cell, xs, h0); states.reverse()``)."""
    if callee is None:
        return False
    params = {c.find((callee.name, p)) for p in callee.fn.params}
    untracked = {c.find((callee.name, n)) for n in (*callee.lists.untracked, *callee.lists.returned)}
    for s in ir.walk_stmts(callee.fn.body):
        if isinstance(s, ir.Return) and s.value is not None:
            if not isinstance(s.value, ir.Name):
                return False
            cls = c.find((callee.name, s.value.id))
            if cls in params or cls in untracked or s.value.id in callee.fn.params:
                return False
    return True


def escaping_effects(specs: dict[SpecKey, Spec]) -> set[SpecKey]:
    """The specializations whose run changes host state that outlives it (their own or their callees').

    A list changed in place counts when a parameter of the specialization
    may hold it; host effects (``ListFlow.host_effects``) always count.
    """
    c = _classes(specs)
    direct = {key: {c.find((s.name, n)) for n in s.lists.mutated} for key, s in specs.items()}
    mutated = {key: set(v) for key, v in direct.items()}  # classes changed by the spec or its callees
    host = {key: bool(s.lists.host_effects) for key, s in specs.items()}
    changed = True
    while changed:  # to a fixpoint over (mutually) recursive calls
        changed = False
        for key, s in specs.items():
            for callee in _callees(s, specs):
                if not mutated[callee] <= mutated[key] or host[callee] and not host[key]:
                    mutated[key] |= mutated[callee]
                    host[key] = host[key] or host[callee]
                    changed = True
    return {key for key, s in specs.items()
            if host[key] or any(c.find((s.name, p)) in mutated[key] for p in s.fn.params)}


def _callees(spec: Spec, specs: dict[SpecKey, Spec]) -> Iterable[SpecKey]:
    return (k for k in spec.calls.values() if k in specs)


def _call_loc(spec: Spec, nid: int) -> ir.Loc:
    try:
        return spec.find_expr(nid).loc
    except KeyError:
        return spec.fn.loc
