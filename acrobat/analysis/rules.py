"""Call rules of the kind analysis (§4): what a call makes of its operands' kinds, one table for all callees.

In the style of JAX's ``primitive_batchers``, ``CALL_RULES[(CallKind, target)]``
holds the rules of one callee (``(METHOD, "item")``: host code reads a
tensor's value, a sync point, §4.2) and ``CALL_RULES[(CallKind, ANY)]`` the
rules of every callee of a kind (a host function takes host data only).
Rules are installed by the ``def*`` helpers below, so the name sets that
key them (value reads, shape reads, list mutators, tensor exits) are the
ones the rest of the compiler imports instead of spelling them again.

``_Analyzer.call`` (``acrobat.analysis.kinds``) tries a call's rules in the
order ``rules_for`` gives: a list's or dict's own methods (``RECEIVER_RULES``:
the receiver's type decides, as in Python), then the callee's rules in the
order they were installed, then its kind's. A rule returns the call's kind,
raises ``CompileError`` for what acrobat cannot batch, or returns None where
it does not apply (or only checks or records). A call that no rule decides
is an operator: ``_Analyzer.operator`` and its ``op_kind`` (the fallback).
Calls of program functions (``CallKind.PROGRAM``) are the analysis' own
(``_Analyzer.program_call``: specialization), not rules.
"""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch

from acrobat.analysis import ranks, unpacking
from acrobat.analysis.sized import SHAPE_ATTRS, SHAPE_METHODS  # noqa: F401 - the rules' shape queries
from acrobat.analysis.kinds import (BOTTOM, HOST, MUTABLE, NONE, UNRESOLVED, ChoiceK, DictK, HostK, Kind,
                                    KindConflict, ListK, MapK, RaggedK, SharedK, TensorK, TupleK, contains,
                                    describe_ref, has_shared, has_tensor, is_host, join)
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind, known
from acrobat.frontend.source import SourceSnapshot

if TYPE_CHECKING:
    from acrobat.analysis.kinds import _Analyzer

#: Methods by which host code reads a tensor's value: a sync point (§4.2).
VALUE_METHODS = frozenset({"item", "tolist"})
#: Builtins that turn a tensor into a Python number (a value read, like ``.item()``).
VALUE_BUILTINS = frozenset({"bool", "int", "float"})
#: The list methods a model may call (on a list of host data or of tensors); each changes the list in place.
LIST_METHODS = frozenset({"append", "pop", "insert", "__setitem__", "reverse"})
#: The list methods that put one element in, given as their last argument (``xs.insert(i, v)``, ``xs[i] = v``).
LIST_PUTS = frozenset({"append", "insert", "__setitem__"})
#: The list methods that read it: they compare its elements with a value (host data only).
LIST_READS = frozenset({"index", "count"})
#: The methods of a dict keyed by host data (``kinds.MapK``) a model may call.
MAP_METHODS = frozenset({"__setitem__", "get", "setdefault", "pop", "keys", "values", "items", "clear"})
#: Builtins that take a dict's keys (host data) from a dict keyed by host data: those the parser makes builtin
#: calls (by name), and those it leaves host calls (by the function).
MAP_KEY_BUILTINS = frozenset({"list", "reversed", "min", "max"})
MAP_KEY_FUNCTIONS = (sorted, set, tuple, any, all)
#: Methods of Python's containers that change them in place.
MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update",
                              "add", "discard", "setdefault", "popitem", "__setitem__", "__delitem__"})
#: Tensor methods that leave the model, with why.
TENSOR_EXITS = {
    "numpy": "`.numpy()` leaves PyTorch",
    "backward": "call backward on the results, outside the model",
    "__bool__": "truth-testing a tensor makes control flow depend on its value",
}
#: Operators whose result's shape depends on the values (vmap cannot batch them into one block).
DATA_SHAPED = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount", "histc",
                         "repeat_interleave", "nonzero_static"})
#: Builtins over host containers that may hold tensors (their items pass through untouched).
_CONTAINER_BUILTINS = ("reversed", "list", "enumerate", "zip")

#: The target of the rules that apply to every callee of a kind (no method or builtin has this name).
ANY = "<any>"


@dataclass(frozen=True)
class Site:
    """A call under analysis: the node and the kinds of its receiver (None without one), positional arguments
    and keyword arguments."""

    e: ir.Call
    recv: Kind | None
    args: list[Kind]
    kws: list[Kind]

    @property
    def operands(self) -> list[ir.Expr]:
        """The argument expressions, positional then keyword (the order of ``kinds``)."""
        return list(self.e.args) + list(self.e.kwargs.values())

    @property
    def kinds(self) -> list[Kind]:
        """The argument kinds, positional then keyword."""
        return self.args + self.kws


#: ``rule(analyzer, site)``: the call's kind; None where the rule does not decide it.
Rule = Callable[["_Analyzer", Site], "Kind | None"]

CALL_RULES: dict[tuple[CallKind, object], tuple[Rule, ...]] = {}
RECEIVER_RULES: dict[type[Kind], Rule] = {}


def defcall(kind: CallKind, *targets: object) -> Callable[[Rule], Rule]:
    """Install the decorated rule for calls of ``kind`` to each of ``targets`` (``ANY``: every callee of the
    kind), after the rules already installed there."""
    def install(rule: Rule) -> Rule:
        for target in targets:
            CALL_RULES[(kind, target)] = CALL_RULES.get((kind, target), ()) + (rule,)
        return rule
    return install


def defreceiver(receiver: type[Kind]) -> Callable[[Rule], Rule]:
    """Install the decorated rule for every method of a ``receiver`` (a container kind with methods of its own)."""
    def install(rule: Rule) -> Rule:
        RECEIVER_RULES[receiver] = rule
        return rule
    return install


def rules_for(site: Site) -> tuple[Rule, ...]:
    """The rules ``site`` goes through, in order: its receiver's, its callee's, its kind's."""
    e = site.e
    own = tuple(rule for receiver, rule in RECEIVER_RULES.items()
                if e.kind is CallKind.METHOD and isinstance(site.recv, receiver))
    return own + (known(CALL_RULES, (e.kind, e.target)) or ()) + CALL_RULES.get((e.kind, ANY), ())


@defcall(CallKind.TORCH, torch.nn.functional.embedding)
def _counted_lookup(a: _Analyzer, s: Site) -> Kind | None:
    """``F.embedding(..., scale_grad_by_freq=True)`` divides each row's gradient by how often its index occurs in
    the call: batched, the call's indices are every instance's, so the counts would be the batch's. Rejected
    (the dynamic tier runs such a lookup per instance); None (no decision) otherwise."""
    given = s.e.kwargs.get("scale_grad_by_freq", s.e.args[5] if len(s.e.args) > 5 else None)
    if given is not None and not (isinstance(given, ir.Const) and not given.value):
        raise a.error(s.e, "`F.embedding(..., scale_grad_by_freq=True)` scales each row's gradient by how often its "
                           "index occurs in the call; batched, that would count over the whole batch: drop "
                           "scale_grad_by_freq (or the dynamic tier runs the lookup per instance)")
    return None


def _read_arg(a: _Analyzer, s: Site) -> Kind | None:
    """The one argument is a per-instance tensor whose value or shape host code reads: a sync point (§4.2)."""
    if len(s.e.args) == 1 and isinstance(s.args[0], TensorK):
        a.spec.reads.add(s.e.args[0].nid)
        return HOST
    return None


# -- value and shape reads -------------------------------------------------------------------------------------


@defcall(CallKind.BUILTIN, *VALUE_BUILTINS)
def _value_builtin(a: _Analyzer, s: Site) -> Kind | None:
    # `int(p.h0[0])`: a shared tensor's value, the same Python number for every instance; `int(x)`: a read
    if len(s.e.args) == 1 and isinstance(s.args[0], SharedK):
        return HOST
    return _read_arg(a, s)


@defcall(CallKind.BUILTIN, "len")
def _len(a: _Analyzer, s: Site) -> Kind:
    # `len(x)` of a tensor reads its shape; of a list (of tensors too), host data
    _read_arg(a, s)
    return HOST


@defcall(CallKind.METHOD, *VALUE_METHODS)
def _value_method(a: _Analyzer, s: Site) -> Kind | None:
    # `p.h0.argmax().item()`: the same number for every instance; `x.item()`: host code waits for the tensor
    if isinstance(s.recv, SharedK):
        return HOST
    if isinstance(s.recv, TensorK):
        a.spec.reads.add(s.e.receiver.nid)  # type: ignore[union-attr]
        return HOST
    return None


@defcall(CallKind.METHOD, *SHAPE_METHODS)
def _shape_method(a: _Analyzer, s: Site) -> Kind | None:
    # `x.size(0)`: a shape read, like `.item()` (§4.2); its arguments are host numbers
    if isinstance(s.recv, SharedK) and not s.recv.host and all(is_host(k) for k in s.kinds):
        assert s.e.receiver is not None
        return a.shared_metadata(s.e, [s.e.receiver, *s.operands], [s.recv, *s.kinds])
    if not isinstance(s.recv, TensorK):
        return None
    if any(has_tensor(k) for k in s.kinds):
        a.no_tensor(s.e, TensorK(None), f"`.{s.e.target}()`")
    a.spec.reads.add(s.e.receiver.nid)  # type: ignore[union-attr]
    return HOST


# -- host calls ------------------------------------------------------------------------------------------------

#: What to write instead of an in-place method that has no out-of-place twin (``x.fill_(v)`` but no ``x.fill``).
_IN_PLACE_FIXES = {
    "fill_": "build a new tensor: `torch.full_like(x, value)`",
    "zero_": "build a new tensor: `torch.zeros_like(x)`",
    "copy_": "use the source tensor itself (`x = y`, or `y.clone()`)",
    "normal_": "draw a new tensor: `torch.randn_like(x)`",
    "uniform_": "draw a new tensor: `torch.rand_like(x)`",
    "requires_grad_": "drop it: gradients flow through a model's operators to the parameters and inputs that "
                      "require them (set `requires_grad` on those, outside the model)",
}
#: Where the standard library and installed packages live: their functions are not the model's to decorate.
_LIBRARY_DIRS = tuple({os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib", "purelib",
                                                                            "platlib")})


def _out_of_place(method: str) -> str:
    """What to write instead of the in-place tensor method ``method`` (``add_``: ``.add()``)."""
    if callable(getattr(torch.Tensor, method[:-1], None)):
        return f"write the out-of-place `.{method[:-1]}()`"
    return _IN_PLACE_FIXES.get(method, "build a new tensor with out-of-place torch operators instead")


def _is_library(obj: Any) -> bool:
    """Whether ``obj`` (a function or class) comes from the standard library, an installed package or C code."""
    file = getattr(sys.modules.get(getattr(obj, "__module__", None) or ""), "__file__", None)
    return file is None or os.path.abspath(file).startswith(_LIBRARY_DIRS)


def model_code(fn: Any) -> bool:
    """Whether ``fn`` is a plain function of the model's own code that the analysis may take as a program
    function undecorated: a ``def`` (no lambda, closure, generator or coroutine) outside the standard library,
    installed packages and acrobat itself."""
    return isinstance(fn, types.FunctionType) and fn.__name__ != "<lambda>" and not fn.__code__.co_freevars \
        and not inspect.isgeneratorfunction(fn) and not inspect.iscoroutinefunction(fn) and not _is_library(fn) \
        and (fn.__module__ or "").split(".")[0] != "acrobat"


def _host_call_message(fn: Any, k: Kind) -> str:
    """Why ``fn``, plain Python that is not an ``@acrobat.function``, cannot take a value of kind ``k``, and what
    to write instead: decorate the model's own function; use a torch operator for library code."""
    name = getattr(fn, "__name__", type(fn).__name__)
    runs = f"runs as plain host Python and cannot take the {k} passed here"
    library = _is_library(fn)
    shown = f"{fn.__module__}.{name}" if library and getattr(fn, "__module__", None) not in (None, "builtins") else name
    if isinstance(fn, type):
        return (f"`{shown}` is a class, whose constructor {runs}: build a tuple, a namedtuple or a dict with "
                "constant keys instead")
    if library:
        torch_op = f"the torch operator `torch.{name}`" if callable(getattr(torch, name, None)) else "torch operators"
        return (f"`{shown}` is library code, which {runs}: use {torch_op} on tensors, or read the value first "
                "(`x.item()`, `x.tolist()`)")
    if name == "<lambda>":
        return f"a lambda {runs}: define it with `def` and decorate it with @acrobat.function"
    return f"`{name}` is not an @acrobat.function, so it {runs}: decorate it with @acrobat.function"


@defcall(CallKind.HOST, ANY)
def _model_helper(a: _Analyzer, s: Site) -> Kind | None:
    # the model's own undecorated helper given tensors or shared values: analysed as a program function; given an
    # argument whose kind is not known yet (a stacked list the rows pass builds), the fixpoint comes back to it
    if BOTTOM in s.kinds and a.implicit_of(s.e.target) is not None:
        return BOTTOM
    if any(has_tensor(k) or has_shared(k) for k in s.kinds) and a.helper_call(s.e):
        return a.program_call(s.e)
    return None


@defcall(CallKind.HOST, ANY)
def _host_reads_a_field(a: _Analyzer, s: Site) -> None:
    # `ready(node)`, a plain helper given the instance's objects, reading `.state` that the model stores tensors in:
    # during a batched run it would find the run's handles, not tensors
    read = sorted(n for n in _code_names(getattr(s.e.target, "__code__", None)) if has_tensor(a.fields.get(n, HOST)))
    if read and any(type(k) is HostK for k in s.kinds):
        name = getattr(s.e.target, "__name__", "this helper")
        raise a.error(s.e, f"`{name}` runs as plain host Python and reads `.{read[0]}`, which the model stores "
                           f"tensors in (not computed yet while the batch runs): decorate `{name}` with "
                           "@acrobat.function")


def _code_names(code: Any) -> set[str]:
    """The global and attribute names a function's code (``code``, None for none) and its nested code use."""
    if code is None:
        return set()
    return set(code.co_names).union(*(_code_names(c) for c in code.co_consts if hasattr(c, "co_names")))


@defcall(CallKind.HOST, ANY)
def _namedtuple(a: _Analyzer, s: Site) -> Kind | None:
    # `Pair(a=h, b=[h1, h2])`: a namedtuple is a tuple whose items (tensors, lists of them) pass through, its fields
    # bound as its constructor binds them; the skeleton builds it with the items' handles, the result keeps its class
    cls = s.e.target
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        return None
    fields: tuple[str, ...] = cls._fields
    bound: dict[str, Kind] = dict(zip(fields, s.args))
    if len(s.args) > len(fields) or any(f not in fields or f in bound for f in s.e.kwargs):
        raise a.error(s.e, f"`{cls.__name__}` takes the fields {list(fields)}, each once")
    bound.update(zip(s.e.kwargs, s.kws))
    missing = [f for f in fields if f not in bound and f not in cls._field_defaults]
    if missing:
        raise a.error(s.e, f"`{cls.__name__}` is missing the field(s) {missing}")
    made = TupleK(tuple(bound.get(f, HOST) for f in fields), fields)  # a default: host data (the class's constant)
    if _nesting(made) > MAX_NESTING:
        raise a.error(s.e, f"`{cls.__name__}` is given values that hold `{cls.__name__}`s themselves, to a depth "
                           "that grows with the recursion (a tree of namedtuples): the static tier takes "
                           f"containers nested at most {MAX_NESTING} deep; return the tensors in a flat list, or "
                           "run without Options(strict=True) (the dynamic tier runs it)")
    return made


#: The deepest nesting of containers a namedtuple built by the model may have (``_namedtuple``).
MAX_NESTING = 8


def _nesting(k: Kind) -> int:
    """How deep containers nest in ``k`` (0: no container)."""
    if isinstance(k, (ListK, TupleK, DictK, MapK)):
        items = (k.elem,) if isinstance(k, ListK) else (k.value,) if isinstance(k, MapK) else k.items
        return 1 + max((_nesting(i) for i in items), default=0)
    return 0


@defcall(CallKind.HOST, ANY)
def _host_function(a: _Analyzer, s: Site) -> Kind:
    # an undecorated function (or `math.floor`) runs as plain Python on host data
    for x, k in zip(s.operands, s.kinds):
        if has_tensor(k) or has_shared(k):
            raise a.error(x, _host_call_message(s.e.target, k))
    return HOST


@defcall(CallKind.BUILTIN, *_CONTAINER_BUILTINS)
def _container_builtin(a: _Analyzer, s: Site) -> Kind:
    # `reversed(xs)`, `list(xs)`, `enumerate(xs)`, `zip(xs, ys)`: host lists whose items (tensors too) pass through
    kinds = [ListK(k.rows) if isinstance(k, RaggedK) else k for k in s.args]  # a stacked list's rows

    def elem(k: Kind) -> Kind:
        return k.elem if isinstance(k, ListK) else HOST if isinstance(k, MapK) else k  # a dict's items: its keys
    name = s.e.target
    iterated = s.e.args if name == "zip" else s.e.args[:1]  # `enumerate(x, start)`: the first is iterated
    tensors = [x for x, k in zip(iterated, kinds) if a.has_rows(k)]
    for x in tensors:  # its rows, as a list, next pass (acrobat.analysis.rows)
        a.rows_of(x)
    if tensors:
        return BOTTOM
    if not any(isinstance(k, ListK) for k in kinds) and BOTTOM in (kinds if name == "zip" else kinds[:1]):
        return BOTTOM  # an operand not analysed yet (a callee's result): its kind comes in a later pass
    if name in ("reversed", "list"):
        return ListK(elem(kinds[0])) if kinds and isinstance(kinds[0], ListK) else HOST
    if name == "enumerate":
        return ListK(TupleK((HOST, elem(kinds[0])))) if isinstance(kinds[0], ListK) else HOST
    if any(isinstance(k, ListK) for k in kinds):  # zip
        return ListK(TupleK(tuple(elem(k) for k in kinds)))
    return HOST


@defcall(CallKind.HOST, dict)
def _new_map(a: _Analyzer, s: Site) -> Kind | None:
    # `dict()`: an empty dict, filled with host keys (``kinds.MapK``)
    return MapK(BOTTOM) if not s.e.args and not s.e.kwargs else None


@defcall(CallKind.BUILTIN, *MAP_KEY_BUILTINS)
@defcall(CallKind.HOST, *MAP_KEY_FUNCTIONS)
def _map_keys(a: _Analyzer, s: Site) -> Kind | None:
    # `sorted(cache)`, `list(vocab)`: the keys of a dict keyed by host data, host data themselves
    return HOST if len(s.args) == 1 and not s.e.kwargs and isinstance(s.args[0], MapK) else None


@defcall(CallKind.BUILTIN, ANY)
def _builtin(a: _Analyzer, s: Site) -> Kind:
    # any other builtin (`abs`, `max`, `range`) computes on host values
    for x, k in zip(s.operands, s.kinds):
        if has_tensor(k):
            a.no_tensor(x, k, f"`{s.e.target}()`")
    return HOST


@defcall(CallKind.METHOD, *MUTATING_METHODS)
@defcall(CallKind.VALUE, ANY)
def _host_effect(a: _Analyzer, s: Site) -> None:
    # `seen.add(x)`, `log(x)` of host data: may change host state, so the call keeps Python's order on fibers
    if s.recv is HOST:
        a.spec.lists.host_effects[s.e.nid] = s.e


# -- list mutators ---------------------------------------------------------------------------------------------


@defreceiver(ListK)
def _list_method(a: _Analyzer, s: Site) -> Kind:
    # `xs.append(h)`: the list changes in place; what is put in joins the kind of its elements
    name, e, recv = s.e.target, s.e, s.recv
    assert isinstance(recv, ListK) and e.receiver is not None
    if name in LIST_READS:
        for x, k in ((e.receiver, recv.elem), *zip(e.args, s.args)):
            a.no_tensor(x, k, f"`.{name}()` of a list")
        return HOST
    if name not in LIST_METHODS:
        raise a.error(e, f"list method `.{name}()` is not supported: use append, pop, insert, reverse, "
                         f"index, count, indexing and len()")
    if name == "pop":
        a.mutate(e, e.receiver, None)
        return recv.elem
    if name == "reverse":  # reorders the list in place: a change, nothing put in
        a.mutate(e, e.receiver, None)
        return HOST
    if name == "__setitem__" and isinstance(e.args[0], ir.Slice):
        raise a.error(e, "slice assignment of a list is not supported: build a new list (`xs = xs[:i] + [v]`)")
    value = s.args[0] if name == "append" else s.args[1]  # insert(i, v) / xs[i] = v: like append (an element)
    if name != "append" and has_tensor(s.args[0]):
        a.no_tensor(e.args[0], s.args[0], "a list index")
    path = a.mutate(e, e.receiver, value)
    if contains(value, MUTABLE):
        a.flow(e, (path[0], path[1] + 1), e.args[0 if name == "append" else 1])
    return HOST


@defreceiver(MapK)
def _map_method(a: _Analyzer, s: Site) -> Kind:
    # `cache[k] = h`, `cache.get(k)`: a dict of handles keyed by host data, changed in place like a list
    name, e, recv = s.e.target, s.e, s.recv
    assert isinstance(recv, MapK) and e.receiver is not None
    if name not in MAP_METHODS or e.kwargs:
        raise a.error(e, f"dict method `.{name}()` is not supported on a dict keyed by host data: use `d[k] = v`, "
                         "`d[k]`, `k in d`, `len(d)`, iteration, and the methods get, setdefault, pop, keys, values, "
                         "items and clear (positional arguments)")
    if name == "keys":
        return ListK(HOST)
    if name == "values":
        return ListK(recv.value)
    if name == "items":
        return ListK(TupleK((HOST, recv.value)))
    if name == "clear":
        a.mutate(e, e.receiver, None)
        return HOST
    if not e.args:
        raise a.error(e, f"`.{name}()` takes the key first")
    a.no_tensor(e.args[0], s.args[0], "a dict key")
    given = s.args[1] if len(s.args) > 1 else None  # the stored value (`d[k] = v`, setdefault) or the default
    if given is not None and has_shared(given) and name != "__setitem__":
        raise a.error(e.args[1], f"`.{name}()` of a dict holding per-instance values given a shared value (a "
                                 f"parameter, or an op over parameters alone): store it with `d[k] = v` first, or "
                                 f"test `k in d`")
    if name in ("__setitem__", "setdefault"):
        path = a.mutate(e, e.receiver, given if given is not None else NONE)
        if given is not None and contains(given, MUTABLE):
            a.flow(e, (path[0], path[1] + 1), e.args[1])
        return HOST if name == "__setitem__" else a.join_at(e, recv.value, given if given is not None else NONE)
    if name == "pop":
        a.mutate(e, e.receiver, None)
    if given is None:  # `d.get(k)`: None where the key is missing; `d.pop(k)` raises there
        return recv.value if name == "pop" else a.join_at(e, recv.value, NONE)
    return a.join_at(e, recv.value, given)


# -- fields: attributes stored on the instance's own objects -----------------------------------------------------


@defcall(CallKind.BUILTIN, "setattr")
def _field_store(a: _Analyzer, s: Site) -> Kind:
    # `node.state = cell(...)` (parsed as `setattr(node, "state", ...)`): a field of the instance's object
    e = s.e
    obj, attr = s.args[0], e.args[1].value  # type: ignore[attr-defined]
    written = f"{e.args[0].id}.{attr}" if isinstance(e.args[0], ir.Name) else f".{attr}"
    if isinstance(obj, SharedK):
        raise a.error(e, f"`{written} = ...` changes a model parameter, which every instance shares: keep "
                         "per-instance state in variables of the model function or on the instance's own objects")
    if obj is BOTTOM:
        return BOTTOM  # the object's kind comes in a later pass
    if type(obj) is not HostK:
        raise a.error(e, f"cannot set `{written}` of a {obj}: attributes are stored on the instance's "
                         "own objects (its tree nodes)")
    a.store_field(e, attr, s.args[2])
    return HOST


@defreceiver(DictK)
def _dict_method(a: _Analyzer, s: Site) -> Kind:
    # dicts are records with constant keys: read, never changed
    raise a.error(s.e, f"dict method `.{s.e.target}()` is not supported: dicts in models are records with "
                       "constant keys; read them with `d[\"key\"]`")


# -- tensor exits and in-place rejection -----------------------------------------------------------------------


@defcall(CallKind.METHOD, *MUTATING_METHODS)
def _shared_mutation(a: _Analyzer, s: Site) -> None:
    # `p.items.append(x)`: a model parameter is the same for every instance, so no instance may change it
    if isinstance(s.recv, SharedK):
        if s.recv.ref[0] != "arg" and s.e.target == "__setitem__":  # `z = torch.zeros(4); z[0] = v`
            raise a.error(s.e, "item assignment writes into a tensor every instance shares (one made from constants "
                               "and parameters alone, as `torch.zeros(4)` is): build a new tensor instead (e.g. "
                               "`torch.where(mask, v, x)` or `torch.cat`)")
        what = "a model parameter" if s.recv.ref[0] == "arg" else "a value every instance shares"
        raise a.error(s.e, f"`.{s.e.target}()` changes {what}, which every instance shares: keep "
                           "per-instance state in variables of the model function")


@defcall(CallKind.METHOD, "__setitem__")
def _item_assignment(a: _Analyzer, s: Site) -> None:
    # `x[0] = v` of a tensor (a list's is a list method, a host value's plain Python); a receiver not analysed yet
    # (a recursive callee's result, BOTTOM) is judged in a later pass, when ``_Analyzer.item_assignment`` knows it
    if s.recv is not None and s.recv is not BOTTOM and not isinstance(s.recv, HostK):
        raise a.error(s.e, f"item assignment on a {s.recv} writes into it in place: build a new tensor "
                           "instead (e.g. `torch.where(mask, v, x)` or `torch.cat`)")


@defcall(CallKind.METHOD, *TENSOR_EXITS)
def _tensor_exit(a: _Analyzer, s: Site) -> None:
    # `x.numpy()`, `x.backward()`: the tensor leaves the model
    if s.recv is not None and (has_tensor(s.recv) or has_shared(s.recv)):
        raise a.error(s.e, f"{TENSOR_EXITS[s.e.target]}: read tensor values with `.item()`, `.tolist()`, "
                           "`bool()`, `int()` or `float()`")


@defcall(CallKind.METHOD, ANY)
@defcall(CallKind.TORCH, ANY)
def _data_shaped(a: _Analyzer, s: Site) -> None:
    # `torch.nonzero(x)`: a result shaped by the values, which one static block cannot batch
    what = s.e.target
    name = what if isinstance(what, str) else getattr(what, "__name__", "")
    if name in DATA_SHAPED and any(has_tensor(k) for k in [s.recv, *s.kinds] if k is not None):
        raise a.error(s.e, f"`{name}` gives a result whose shape depends on the tensor's values, which a "
                           "static block cannot batch: compute a fixed-shape result (e.g. a mask with "
                           "torch.where), or run without Options(strict=True) (the dynamic tier runs it)")


@defcall(CallKind.METHOD, ANY)
@defcall(CallKind.TORCH, ANY)
@defcall(CallKind.VALUE, ANY)
def _out_keyword(a: _Analyzer, s: Site) -> None:
    # `torch.add(h, 1, out=h)` writes into an existing tensor
    if "out" in s.e.kwargs:
        raise a.error(s.e, "`out=` writes into an existing tensor: assign the result to a new variable instead")


@defcall(CallKind.METHOD, ANY)
def _inplace_method(a: _Analyzer, s: Site) -> None:
    # `x.add_(1)`: an in-place operator of a tensor (tensors in acrobat models are immutable)
    what = s.e.target
    if what.endswith("_") and not what.startswith("__") and s.recv is not None and (
            has_tensor(s.recv) or has_shared(s.recv)):
        raise a.error(s.e, f"in-place operator `.{what}()`: {_out_of_place(what)} "
                           "(tensors in acrobat models are immutable)")
    if what.endswith("_") and not what.startswith("__") and type(s.recv) is HostK:
        # `x.mul_(2)` on the instance's own tensor: the launches recorded before it would read it after it
        raise a.error(s.e, f"in-place operator `.{what}()` on the instance's data: the static tier reads the "
                           f"instance's tensors when its launches run, after this line; {_out_of_place(what)} "
                           "(or the dynamic tier runs it as written)")


@defcall(CallKind.METHOD, ANY)
def _program_method(a: _Analyzer, s: Site) -> None:
    """Reject ``self.encode(tree)``: an ``@acrobat.function`` method of a shared module called with host data
    (the instance, a node of it). Such a call runs as one operator of its static block, the method as plain
    Python under vmap, where host data that is not a number cannot go (and recursion or control flow in
    the method is not analysed). Constants pass; without the run's arguments (``resolve``) nothing is known.

    Raises:
        CompileError: naming the method and the fix (a module-level function taking the module).
    """
    e = s.e
    if not isinstance(s.recv, SharedK) or a.resolve is None or not any(
            isinstance(k, HostK) and not isinstance(x, ir.Const) for x, k in zip(e.args, s.kinds)):
        return
    module = a.resolve(s.recv.ref)
    method = getattr(type(module), str(e.target), None) if module is not UNRESOLVED else None
    if not isinstance(getattr(method, "snapshot", None), SourceSnapshot):
        return
    raise a.error(e, f"`.{e.target}()` is an @acrobat.function method of the module, called with host data "
                     f"(the instance or a part of it): a method call runs as one operator of its static "
                     f"block, so recursion and control flow on instance data inside it are not analysed. "
                     f"Write `{e.target}` as a module-level @acrobat.function that takes the module as a "
                     f"parameter (`def {e.target}(node, m): ...`, called as `{e.target}(node, self)`)")


# -- modules chosen by data ------------------------------------------------------------------------------------


@defcall(CallKind.VALUE, ANY)
def _module_choice(a: _Analyzer, s: Site) -> Kind | None:
    """``p.experts[k](x)``, ``p.mods[node.op](x)``: a module of a shared container chosen per instance by host data
    (a ``ChoiceK``). The call is analysed as one call per module, ``p.experts[0](x)``, ``p.experts[1](x)``, ...,
    each with its own copy of the arguments (``Spec.choices``), and lowering makes it a host dispatch over them
    (``blocks.lower_choice``): each choice an ordinary static call of a shared module (§5.1), whose instances
    batch together, one launch per module chosen (§4.1). Its kind is the join of theirs."""
    if not isinstance(s.recv, ChoiceK):
        return None
    e = s.e
    assert isinstance(e.receiver, ir.Subscript)
    if e.nid not in a.spec.choices:
        a.spec.choices[e.nid] = (s.recv.keys, tuple(
            ir.Call(e.loc, CallKind.VALUE, None, [ir.renumbered(x) for x in e.args],
                    {k: ir.renumbered(v) for k, v in e.kwargs.items()},
                    ir.Subscript(e.receiver.loc, ir.renumbered(e.receiver.obj), ir.Const(e.receiver.loc, key)))
            for key in s.recv.keys))
    k: Kind = BOTTOM
    for call in a.spec.choices[e.nid][1]:
        try:
            k = join(k, a.expr(call))
        except KindConflict:
            raise a.error(e, f"the modules of shared {describe_ref(s.recv.ref)} return values of different kinds "
                             "(one a tensor, one a tuple): give them one kind of result") from None
    return k


# -- lists of tensors as operands: torch.cat of items with a leading unit axis -----------------------------------


@defcall(CallKind.TORCH, torch.cat, torch.concat, torch.concatenate)
def _cat_of_unit_items(a: _Analyzer, s: Site) -> Kind | None:
    """``torch.cat([h[v].unsqueeze(0) for v in vs])``: a list whose items each get a new leading axis of length 1
    (``e.unsqueeze(0)``, ``e[None]``, ``e.view(1, ...)``, ``e.reshape(1, ...)``), concatenated along dim 0, is
    ``torch.stack`` of the items without that axis. The list is a comprehension's, or a variable that this call
    alone reads (``hs = [... for t in toks]`` or ``hs = []`` and ``hs.append(...)``, then ``torch.cat(hs, 0)``;
    ``len(hs)`` aside: ``ranks.sole_reader_puts``), so its items are seen nowhere else. The call and the
    list's appends are rewritten so, for every specialization (it holds for any tensors), and the stack is a
    stacked list whose length differs per instance (``acrobat.analysis.ragged``, issue 18 §2). Other
    ``torch.cat`` calls are left to the other rules; a list of other items, or one read elsewhere too, stays an
    operand the static tier rejects (``blocks``: stack it)."""
    e = s.e
    dim = _cat_dim(s)
    if dim is None or not isinstance(e.args[0], ir.Name) or not _zero(dim):
        return None
    puts = ranks.sole_reader_puts(a.spec.fn, e.args[0].id, e)
    items = [_without_unit_axis(put.args[0]) for put in puts]
    if not puts or any(item is None for item in items):
        return None
    if s.args[0].elem is BOTTOM:
        return BOTTOM  # what the list holds is not known yet: the fixpoint comes back
    if not isinstance(s.args[0].elem, TensorK):
        return None
    for put, item in zip(puts, items):
        put.args[0] = item  # type: ignore[assignment]
    e.target, e.args, e.kwargs = torch.stack, e.args[:1], {}
    a.changed = True
    return a.call(e)


@defcall(CallKind.TORCH, torch.cat, torch.concat, torch.concatenate)
def _cat_of_unzipped(a: _Analyzer, s: Site) -> Kind | None:
    """``torch.cat(cs, dim=0)`` of a sequence of ``cs, hs = zip(*states)`` (the child-sum TreeLSTM's children's
    ``(1, H)`` states, as many as the instance's node has children): the stack of the items' one rows, each
    ``x[0]`` once checked at run time to have shape ``(1, ...)`` (``ragged.unit_row``; any other shape is the
    static tier's limit, and the dynamic tier runs the instance), a stacked list whose length differs per
    instance (``acrobat.analysis.ragged``, issue 18 §2), built once this pass is done (``rows.rewritten``).
    A fold of concatenations (``_cat_of_list``) would batch accumulators of different lengths together where the
    lists' lengths differ; other lists (one filled over ``range(self.tags)``, the same length in every instance)
    keep the fold, whose result is an ordinary tensor."""
    e = s.e
    dim = _cat_dim(s)
    if dim is None or not isinstance(e.args[0], ir.Name) or not _zero(dim) or \
            not unpacking.bound_by_unzip(a.spec.fn, e.args[0].id):
        return None
    if s.args[0].elem is BOTTOM:
        return BOTTOM  # what the list holds is not known yet: the fixpoint comes back
    if not isinstance(s.args[0].elem, TensorK):
        return None
    a.spec.forms[e.nid] = "unit_items"
    return a.rows_of(e)


@defcall(CallKind.TORCH, torch.cat, torch.concat, torch.concatenate)
def _cat_of_list(a: _Analyzer, s: Site) -> Kind | None:
    """``torch.cat(xs, dim)`` of a list of tensors whose length is per-instance host data (a variable or a
    comprehension; not a list display, whose items are operands one by one) and an int constant ``dim``: the
    call of ``folds.cat_items``, a left fold of two-operand concatenations, which the analysis reads as a program
    function (issue 18 §2). Installed after ``_cat_of_unit_items``, whose stack of the items it leaves alone."""
    e = s.e
    dim = _cat_dim(s)
    if dim is None or isinstance(e.args[0], ir.ListExpr) or not (isinstance(dim, ir.Const) and type(dim.value) is int):
        return None
    if s.args[0].elem is BOTTOM:
        return BOTTOM  # what the list holds is not known yet: the fixpoint comes back
    if not isinstance(s.args[0].elem, TensorK):
        return None
    from acrobat.analysis.folds import cat_items  # noqa: PLC0415 - it imports acrobat.program, which imports us
    fold = cat_items(dim.value)
    a.adopt(fold)
    e.kind, e.target, e.args, e.kwargs = CallKind.PROGRAM, fold, e.args[:1], {}
    a.changed = True
    return a.program_call(e)


def _cat_dim(s: Site) -> ir.Expr | None:
    """The ``dim`` of ``s``, a call ``torch.cat(xs, dim)`` (``dim`` positional or by keyword; a constant 0 when not
    given) whose first operand is a list (``ListK``), else None: what the ``torch.cat`` rules of a list share."""
    e = s.e
    if not (s.args and isinstance(s.args[0], ListK)) or len(e.args) > 2 or any(k != "dim" for k in e.kwargs) or \
            len(e.args) == 2 and e.kwargs:
        return None
    return e.args[1] if len(e.args) == 2 else e.kwargs.get("dim", ir.Const(e.loc, 0))


def _zero(d: ir.Expr | None) -> bool:
    """Whether ``d`` is the literal int 0 (a dim)."""
    return isinstance(d, ir.Const) and type(d.value) is int and d.value == 0


def _without_unit_axis(x: ir.Expr) -> ir.Expr | None:
    """``e`` for ``x`` written as ``e`` with a new leading axis of length 1 (``e.unsqueeze(0)``,
    ``torch.unsqueeze(e, 0)``, ``e[None]``; ``e.view(-1)`` for ``e.view(1, -1)``, and so for ``reshape`` with
    more sizes after the 1), else None."""
    match x:
        case ir.Subscript(obj=obj, index=ir.Const(value=None)):
            return obj
        case ir.Call(kind=CallKind.METHOD, target="unsqueeze", receiver=r, args=args, kwargs=kw) if r is not None \
                and (args == [] and list(kw) == ["dim"] and _zero(kw["dim"]) or len(args) == 1 and not kw and
                     _zero(args[0])):
            return r
        case ir.Call(kind=CallKind.TORCH, target=torch.unsqueeze, args=[r, d], kwargs=kw) if not kw and _zero(d):
            return r
        case ir.Call(kind=CallKind.METHOD, target="view" | "reshape", receiver=r, args=[ir.Const(value=one), *rest],
                     kwargs=kw) if not kw and r is not None and rest and type(one) is int and one == 1:
            return ir.Call(x.loc, CallKind.METHOD, x.target, rest, {}, receiver=r)
    return None
