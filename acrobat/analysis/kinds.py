"""Kind analysis: host value, batched tensor or shared value; parameter reuse (§5.1, App. B.1).

Every expression of a program function gets a *kind*:

- ``HOST``: plain per-instance Python data (tree nodes, token ids, lengths);
  the generated skeleton computes it directly;
- ``TensorK(sdepth)``: a per-instance tensor, computed lazily in a static
  block and batched across instances. ``sdepth`` is its static depth when
  it does not depend on the recursion (hoisting, App. A.1), else ``None``;
- ``SharedK(ref)``: a value that is the same for every instance and every
  call (a model weight, or an op over weights and constants): passed to
  batched blocks once, unbatched (parameter reuse, §5.1);
- ``ListK``/``TupleK``/``DictK``: containers of the above (``DictK``: a dict
  literal with constant string keys);
- ``MapK``: a dict keyed by per-instance host data (a memo table ``cache = {}``
  filled by ``cache[id(node)] = h``): a Python dict of handles in the skeleton;
- ``NoneK``: ``None``; joined with a tensor (``h = None`` ... ``h = cell(h)``)
  it makes an ``OptionalK``, which host code tests with ``is None`` (the
  handle/None test runs in the skeleton) and which ``if h is None`` narrows.
- ``HostOrK``: a function's result that is host data on one path and a
  tensor on another (``return total / len(xs)`` of a host-number accumulator,
  ``acrobat.analysis.accumulators``): only returned, never computed with.

*Fields*: an attribute the model stores on the instance's own objects
(``node.state = cell(...)``, read back as ``child.state``) is a value of the
run. Like a list's elements, its kind is flow-insensitive: the join of every
value stored under that attribute name anywhere in the program, and a read
``obj.state`` of any host object has it. A read of a field holding tensors
is a *load* (``Spec.loads``): the skeleton takes the stored handles and the
depth they were stored at (inline depth computation, §4.1), so the values
carry their dependences through the object as through a variable.

This is a taint analysis (weights are the sources, per-instance data
taints) made context-sensitive by *specializing* every function on the
kinds of its arguments, shared references included. A function called
with different weights (BiRNN's forward and backward RNN) therefore gets
one copy per weight set, each with its weights still shared: the paper's
code duplication for parameter reuse (App. B.1), derived from the same
fixpoint rather than run as a separate pass.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch

from acrobat.analysis import (inplace, ragged, rankings, ranks, rowops, rows, run_lists, sized, token_lists,
                              unrolling)
from acrobat.analysis.randomness import is_random
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind
from acrobat.frontend.globals import is_host_data
from acrobat.frontend.parser import bind_arguments, is_comprehension_list, shown_name
from acrobat.frontend.source import SourceSnapshot
from acrobat.runtime.plan import RunList, SegmentOp
from acrobat.runtime.recurrent import recurrent_kind

#: Static depths above this are treated as dynamic, so specialization terminates.
MAX_STATIC_DEPTH = 8


class Kind:
    """Base of the kind lattice."""


@dataclass(frozen=True)
class BottomK(Kind):
    """Not known yet (the fixpoint has not reached it)."""

    def __str__(self) -> str:
        return "bottom"


@dataclass(frozen=True)
class HostK(Kind):
    """Per-instance Python data, computed by the skeleton."""

    def __str__(self) -> str:
        return "host"


@dataclass(frozen=True)
class TensorK(Kind):
    """A per-instance tensor computed in a static block; ``sdepth`` when hoisted."""

    sdepth: int | None  # static depth (hoisted), or None when it depends on the recursion

    def __str__(self) -> str:
        return "tensor"  # as messages name it (the static depth is the compiler's, not the user's)


@dataclass(frozen=True)
class SharedK(Kind):
    """A value shared by all instances and calls; ``ref`` names it (see ``describe_ref``).

    ``host``: it is plain Python data (``p.steps``, ``p.dropout``: ``shared_fact``), which host code uses as
    host data and blocks take unbatched, once per launch (parameter reuse, §5.1), like a shared tensor.
    """

    ref: tuple  # ("arg", i, *path) for a parameter, ("expr", spec, nid) for an op over shared values
    host: bool = False

    def __str__(self) -> str:
        return f"shared {describe_ref(self.ref)}"


@dataclass(frozen=True)
class ListK(Kind):
    """A Python list whose elements have kind ``elem``."""

    elem: Kind

    def __str__(self) -> str:
        return f"list[{self.elem}]"


@dataclass(frozen=True)
class TupleK(Kind):
    """A Python tuple with per-position kinds; ``fields``: the field names of a namedtuple the model builds
    (``Pair(a=h, b=hs)``: ``rules._namedtuple``), read back as ``pair.a`` (not part of the kind's identity)."""

    items: tuple[Kind, ...]
    fields: tuple[str, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.items)) + ")"


@dataclass(frozen=True)
class RaggedK(Kind):
    """``torch.stack(xs)`` of a per-instance list of tensors: dim 0 differs per instance (``analysis.ragged``).

    Held at run time as the list of its rows' handles; only row-wise
    operators and segment operators over dim 0 apply to it. ``depth`` 2 is a
    stack of such stacks (a list of lists): it can be indexed, iterated and
    returned, nothing more.
    """

    depth: int = 1

    def __str__(self) -> str:
        return "ragged tensor" if self.depth == 1 else f"{self.depth}-level ragged tensor"

    @property
    def rows(self) -> Kind:
        """The kind of one row: a per-instance tensor, or a stack one level down."""
        return DYNAMIC if self.depth == 1 else RaggedK(self.depth - 1)


@dataclass(frozen=True)
class LeadK(Kind):
    """A stacked list with a unit axis in front: ``torch.stack(xs).unsqueeze(0)``, of shape ``(1, T, ...)`` with
    ``T`` the list's length, the input and output sequence of a ``batch_first`` recurrent module (issue 18 §2,
    beyond the paper's §3 language; ``acrobat.analysis.recurrent``).

    Held at run time as the list of its rows' handles, like a ``RaggedK`` of depth 1. Made from a stacked list
    ``S`` by ``S.unsqueeze(0)``, ``S[None]``, ``S.view(1, len(xs), ...)``/``S.reshape(1, -1, ...)``; read back by
    ``.squeeze(0)``/``[0]`` (the stacked list), ``[0, i]`` (a row) and ``[:, i]``/``[:, i, :]`` (a row with its
    unit axis, ``(1, ...)``); given to an ``nn.LSTM``/``nn.GRU``/``nn.RNN``; returned. Nothing else applies."""

    def __str__(self) -> str:
        return "stacked list with a unit axis in front"


@dataclass(frozen=True)
class NoneK(HostK):
    """``None`` (host data; joins with a tensor kind into an ``OptionalK``)."""

    def __str__(self) -> str:
        return "None"


@dataclass(frozen=True)
class OptionalK(Kind):
    """``None`` or a value of kind ``inner`` (Optional state such as ``h = None``); tested by host code."""

    inner: Kind

    def __str__(self) -> str:
        return f"optional[{self.inner}]"


@dataclass(frozen=True)
class HostOrK(Kind):
    """A function's result that is host data (a Python number: ``loss = 0`` returned by an instance whose loop never
    ran) on some paths and a value of kind ``inner`` (a tensor) on others (``result_join``). Only a ``return``
    gives it, and only a ``return`` takes a call's result of this kind (``return f(x)``); the skeleton tags the host
    value (``acrobat.runtime.plan.HostResult``) so the result's layout tells it from a handle (an int)."""

    inner: Kind

    def __str__(self) -> str:
        return f"host or {self.inner}"


@dataclass(frozen=True)
class DictK(Kind):
    """A dict with constant string keys (``{"h": h, "c": c}``): per-key kinds, like a tuple."""

    keys: tuple[str, ...]
    items: tuple[Kind, ...]

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.keys, self.items)) + "}"


@dataclass(frozen=True)
class MapK(Kind):
    """A dict keyed by per-instance host data (ints, strings, ``id(node)``, tuples of those) whose values have kind
    ``value``: made empty (``cache = {}``, ``dict()``) and filled by ``d[k] = v``/``d.setdefault(k, v)``, a memo
    table or a vocabulary built per instance. Host code runs per instance (§4.1), so the skeleton holds it as a
    Python dict of the values' handles, changed in place like a list (``ListFlow``: followed through variables,
    call arguments and parameters); its keys are host data, never tensors."""

    value: Kind

    def __str__(self) -> str:
        return f"dict[host, {self.value}]"


@dataclass(frozen=True)
class ChoiceK(Kind):
    """One module of the shared container ``ref`` (``nn.ModuleList``, ``nn.ModuleDict``) chosen by a per-instance
    host value, ``p.experts[k]``: only called (``rules._module_choice``), as one static call per key in ``keys``."""

    ref: tuple
    keys: range | tuple

    def __str__(self) -> str:
        return f"module of {describe_ref(self.ref)} chosen per instance"


#: The containers host code changes in place, followed by ``ListFlow``.
MUTABLE = (ListK, MapK)

BOTTOM = BottomK()
NONE = NoneK()
RAGGED = RaggedK()
LEAD = LeadK()
HOST = HostK()
DYNAMIC = TensorK(None)
LIFTED_DEPTH = -1  # a shared value turned per-instance is ready before every op


def describe_ref(ref: tuple) -> str:
    """A readable name for a shared reference, e.g. ``p.fwd.W``."""
    if ref[0] == "arg":
        text = f"arg{ref[1]}"
        for step in ref[2:]:
            text += f".{step[1]}" if step[0] == "." else f"[{step[1]!r}]"
        return text
    if ref[0] == "hfuse":
        return f"horizontal fusion of slots {list(ref[1])}"
    if ref[0] == "call":
        return f"batchable form of {describe_ref(ref[1])}" + (f".{ref[2]}" if ref[2] is not None else "")
    return f"<expr {ref[2]} of {ref[1]}>"


class KindConflict(Exception):
    """Two kinds that have no join (host data meets a tensor)."""


def contains(k: Kind, cls: type | tuple[type, ...]) -> bool:
    """True when ``k`` is, or is a container holding, a kind of class ``cls``."""
    if isinstance(k, cls):
        return True
    if isinstance(k, ListK):
        return contains(k.elem, cls)
    if isinstance(k, MapK):
        return contains(k.value, cls)
    if isinstance(k, (TupleK, DictK)):
        return any(contains(i, cls) for i in k.items)
    if isinstance(k, (OptionalK, HostOrK)):
        return contains(k.inner, cls)
    return False


def has_tensor(k: Kind) -> bool:
    """True when ``k`` is or contains a per-instance tensor (ragged ones included)."""
    return contains(k, (TensorK, RaggedK, LeadK))


def has_shared(k: Kind) -> bool:
    """True when ``k`` is or contains a shared value that is not plain host data (a tensor, a module)."""
    if isinstance(k, SharedK):
        return not k.host
    return contains(k, SharedK) and any(has_shared(i) for i in _items(k))


def is_host(k: Kind) -> bool:
    """Host data: per-instance, or the same for every instance (``SharedK.host``)."""
    return isinstance(k, HostK) or isinstance(k, SharedK) and k.host


def _host_only(k: Kind) -> bool:
    """Whether ``k`` is host data or a list, tuple or dict of host data only (at any depth)."""
    if isinstance(k, (ListK, TupleK, DictK)):
        return all(_host_only(i) for i in _items(k))
    return is_host(k)


def _items(k: Kind) -> tuple[Kind, ...]:
    if isinstance(k, ListK):
        return (k.elem,)
    if isinstance(k, MapK):
        return (k.value,)
    if isinstance(k, (TupleK, DictK)):
        return k.items
    if isinstance(k, (OptionalK, HostOrK)):
        return (k.inner,)
    return ()


def sdepth_of(k: Kind) -> int | None:
    """Largest static depth inside ``k`` (None if any part is dynamic; -1 if none)."""
    if isinstance(k, TensorK):
        return k.sdepth
    if isinstance(k, (RaggedK, LeadK)):
        return None
    if isinstance(k, ListK):
        return sdepth_of(k.elem)
    if isinstance(k, MapK):
        return sdepth_of(k.value)
    if isinstance(k, (TupleK, DictK)):
        depths = [sdepth_of(i) for i in k.items]
        return None if None in depths else max(depths, default=LIFTED_DEPTH)
    if isinstance(k, (OptionalK, HostOrK)):
        return sdepth_of(k.inner)
    return LIFTED_DEPTH


def join(a: Kind, b: Kind) -> Kind:
    """Least upper bound. Two different shared values join to a per-instance tensor.

    Raises:
        KindConflict: host data meets a tensor, or containers of different shape.
    """
    if a == b or b is BOTTOM:
        return a
    if a is BOTTOM:
        return b
    if is_host(a) and is_host(b):  # host data, the same for every instance or not
        return HOST
    if type(a) is HostK and _host_only(b) or type(b) is HostK and _host_only(a):
        return HOST  # `Trees = [Trees]` under `if not isinstance(Trees, list)`: host data either way, run as written
    if isinstance(a, SharedK) and a.host or isinstance(b, SharedK) and b.host:
        other = b if isinstance(a, SharedK) and a.host else a
        if not isinstance(other, (NoneK, OptionalK)):
            raise KindConflict(f"{a} vs {b}")
    if isinstance(a, NoneK) or isinstance(b, NoneK):  # None meets something else
        other = b if isinstance(a, NoneK) else a
        if type(other) is HostK:
            return HOST
        return other if isinstance(other, OptionalK) else OptionalK(other)
    if isinstance(a, OptionalK) or isinstance(b, OptionalK):
        return OptionalK(join(a.inner if isinstance(a, OptionalK) else a, b.inner if isinstance(b, OptionalK) else b))
    tensorish = (TensorK, SharedK)
    if isinstance(a, tensorish) and isinstance(b, tensorish):
        da, db = sdepth_of(a), sdepth_of(b)
        return DYNAMIC if da is None or db is None else TensorK(max(da, db))
    if isinstance(a, ListK) and isinstance(b, ListK):
        return ListK(join(a.elem, b.elem))
    if isinstance(a, MapK) and isinstance(b, MapK):
        return MapK(join(a.value, b.value))
    if isinstance(a, SharedK) and isinstance(b, TupleK) or isinstance(b, SharedK) and isinstance(a, TupleK):
        shared, tup = (a, b) if isinstance(a, SharedK) else (b, a)  # a shared op's tuple (`torch.chunk(p.W, 2)`)
        return TupleK(tuple(join(shared, i) for i in tup.items))  # type: ignore[union-attr]
    if isinstance(a, TupleK) and isinstance(b, TupleK) and len(a.items) == len(b.items):
        return TupleK(tuple(join(x, y) for x, y in zip(a.items, b.items)), a.fields or b.fields)
    if isinstance(a, DictK) and isinstance(b, DictK) and a.keys == b.keys:
        return DictK(a.keys, tuple(join(x, y) for x, y in zip(a.items, b.items)))
    raise KindConflict(f"{a} vs {b}")


def stacked_join(a: Kind, b: Kind) -> Kind | None:
    """``RAGGED`` where one of ``a``, ``b`` is a per-instance tensor and the other a stacked list (or both the
    latter), else None: a variable holding a tensor on one path and a stacked list on another (the child-sum
    TreeLSTM's leaf ``child_c = torch.zeros(1, H)`` and its node's ``torch.cat(child_c)`` of its children's
    states). A tensor with a dim 0 is the stack of its own rows, so each tensor assigned to such a variable is
    built so (``rows.rewritten``, form ``"stacked"``; a 0-D one raises TypeError in its instance as ``len`` does),
    and the variable is a stacked list (issue 18 §2)."""
    kinds = {type(a), type(b)}
    if kinds <= {TensorK, RaggedK} and RaggedK in kinds and all(
            not isinstance(k, RaggedK) or k.depth == 1 for k in (a, b)):
        return RAGGED
    return None


def result_join(a: Kind, b: Kind) -> Kind:
    """The kind of a function's result returned as ``a`` on some paths and ``b`` on others: ``join``, except that
    host data meeting a tensor (also inside a tuple or dict, or a result already of this kind) gives a ``HostOrK``:
    each instance gets back what its own path returned (a Python number stays a number).

    Raises:
        KindConflict: containers of different shape, or host data meeting a shared value or a list.
    """
    try:
        return join(a, b)
    except KindConflict:
        pass
    if isinstance(a, TupleK) and isinstance(b, TupleK) and len(a.items) == len(b.items):
        return TupleK(tuple(result_join(x, y) for x, y in zip(a.items, b.items)))
    if isinstance(a, DictK) and isinstance(b, DictK) and a.keys == b.keys:
        return DictK(a.keys, tuple(result_join(x, y) for x, y in zip(a.items, b.items)))
    inner = [k.inner if isinstance(k, (HostOrK, OptionalK)) else k for k in (a, b) if not isinstance(k, HostK)]
    if len(inner) == 1 and isinstance(inner[0], (TensorK, RaggedK)) or \
            len(inner) == 2 and all(isinstance(k, (TensorK, RaggedK)) for k in inner):
        return HostOrK(join(*inner) if len(inner) == 2 else inner[0])
    raise KindConflict(f"{a} vs {b}")


SpecKey = tuple[Any, tuple[Kind, ...]]  # (python function object, argument kinds)

#: A list reached from a variable: ``(name, steps)``, the list ``name`` holds after ``steps`` element steps
#: (``("rows", 1)`` is any element of ``rows``).
ListPath = tuple[str, int]


@dataclass
class ListFlow:
    """Where lists go in one specialization: what the alias check (``acrobat.analysis.aliases``) needs.

    A Python list is one object however many variables hold it, so a tensor
    appended through one name is in the list every other name sees. The
    kind analysis keeps one element kind per list variable; ``edges`` make
    aliased variables agree, ``links`` do the same between a call's list
    arguments and the callee's parameters. A list reached some way the
    analysis does not follow (``untracked``) may not be changed.
    """

    edges: set[tuple[ListPath, ListPath]] = field(default_factory=set)  # may be the same list
    untracked: dict[str, ir.Expr | ir.Stmt] = field(default_factory=dict)  # variable -> where it got an untracked list
    mutated: dict[str, ir.Expr | ir.Stmt] = field(default_factory=dict)  # variable -> where a list it holds is changed
    links: dict[tuple[int, int], ListPath | None] = field(default_factory=dict)  # (call nid, arg) -> caller path
    # variable -> {program-call nid: where}: it got the list a call returned, followed only if that list is
    # fresh (made in the callee and held by nothing else there: ``aliases.check_lists``)
    returned: dict[str, dict[int, ir.Expr | ir.Stmt]] = field(default_factory=dict)
    host_effects: dict[int, ir.Expr | ir.Stmt] = field(default_factory=dict)  # calls that may change host state


@dataclass
class Spec:
    """One specialization of a program function: its kinds, per argument-kind context."""

    key: SpecKey
    fn: ir.Function
    name: str
    var: dict[str, Kind] = field(default_factory=dict)
    kinds: dict[int, Kind] = field(default_factory=dict)  # expression nid -> kind
    ops: set[int] = field(default_factory=set)  # nids of per-instance tensor operators
    shared_ops: set[int] = field(default_factory=set)  # nids of ops over shared values only
    calls: dict[int, SpecKey] = field(default_factory=dict)  # program-call nid -> callee spec
    # nid of a call of a module chosen per instance (`p.experts[k](x)`) -> (the keys, the call of each key's module)
    choices: dict[int, tuple[range | tuple, tuple[ir.Call, ...]]] = field(default_factory=dict)
    reads: set[int] = field(default_factory=set)  # nids of tensors whose value host code reads (§4.2)
    loads: set[int] = field(default_factory=set)  # nids of field reads holding tensors (``obj.state``: see fields)
    ret: Kind = BOTTOM
    lists: ListFlow = field(default_factory=lambda: ListFlow())  # which list variables may be one list
    ragged: dict[int, tuple[str, SegmentOp | None]] = field(default_factory=dict)  # nid -> how it is batched:
    # ("stack", None), ("segment", op), ("rows", None), ("contract", None), ("topk", op), ("tolist", None) or ("length", None);
    # see acrobat.analysis.ragged and acrobat.analysis.rankings
    # call nid -> the sizes (keys) of what its starred arguments unpack, by their nids, and its expansion
    # (``_Analyzer.unpack``); the specialization's ``fn`` holds the expanded calls once the analysis is done
    unpacked: dict[int, tuple[dict[int, int | tuple[str, ...]], ir.Call]] = field(default_factory=dict)
    # nid of an item assignment `x[i] = v` of a tensor -> its rewrite `x = item_set(x, i, v)` (``item_assignment``);
    # the specialization's ``fn`` holds the rewrites once the analysis is done
    written: dict[int, ir.Assign] = field(default_factory=dict)
    # nid of a tensor's `x.data` -> `x.detach()` (same nid, ``_Analyzer.data_read``); the specialization's ``fn``
    # holds the rewrites once the analysis is done
    detached: dict[int, ir.Call] = field(default_factory=dict)
    # nid -> expression of a tensor kind that the function iterates (``for v in x``, ``zip(x, ys)``), whose rows
    # the specialization's copy of ``fn`` builds as a list once this pass is done (``rows_of``, ``rows.rewritten``)
    rows: dict[int, ir.Expr] = field(default_factory=dict)
    # nid in ``rows`` -> how its rows are built where they are not its own (``rows.rewritten``): "cut" (``W[a:b]``
    # by host bounds), "embed" (an embedding of a sequence, recurrent), "tokens" (``torch.tensor`` of a host list),
    # "sized" (a factory whose first size is per-instance host data, ``acrobat.analysis.sized``), "unit_items"
    # (``torch.cat`` of unzipped ``(1, ...)`` items), "repeat" (``t.repeat(len(S), 1)``) or "stacked" (a tensor
    # assigned to a variable that holds a stacked list elsewhere)
    forms: dict[int, str] = field(default_factory=dict)

    def find_expr(self, nid: int) -> ir.Expr:
        """The expression with node id ``nid``: in the function's body, or in a per-module call of ``choices``.

        Raises:
            KeyError: neither holds it.
        """
        try:
            return ir.find_expr(self.fn.body, nid)
        except KeyError:
            found = [e for _, calls in self.choices.values() for call in calls for e in ir.walk(call) if e.nid == nid]
            if not found:
                raise
            return found[0]


@dataclass
class KindTable:
    """Result of the analysis: every reachable specialization; the entry's key; which paths into the
    shared arguments were found to hold (``facts``: ref -> ``shared_fact``), where the run's values were
    known; the kind of every field the program stores (``fields``: attribute name -> kind); and the list a
    shared module holds for the run, which the entry returns after its result (``run_list``)."""

    specs: dict[SpecKey, Spec]
    entry: SpecKey
    facts: dict[tuple, str] = field(default_factory=dict)
    fields: dict[str, Kind] = field(default_factory=dict)
    run_list: RunList | None = None  # the list a shared module holds for the run (``acrobat.analysis.run_lists``)


_VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}  # tensor attributes that are operators


#: ``resolve(ref)``: the object a shared reference names in the run being compiled, or ``UNRESOLVED``.
Resolver = Callable[[tuple], Any]
UNRESOLVED = object()


#: The most modules a call ``p.experts[k](x)`` chooses among in the static tier (one branch each); a call over a
#: larger container runs in the dynamic tier.
MAX_CHOICES = 16


def shared_fact(v: Any) -> str:
    """What the kind analysis needs to know of a value a shared path holds in a run: ``"host"`` (plain data,
    ``is_host_data``), ``"pair"`` (a module whose call returns two tensors: ``nn.LSTMCell``), ``"recurrent C"``
    (``nn.LSTM``/``nn.GRU``/``nn.RNN``, ``C`` its class name: ``acrobat.analysis.recurrent``), ``"embedding"`` (an
    ``nn.Embedding``), ``"modules K"`` (a container of modules, ``nn.ModuleList``, ``nn.ModuleDict``, a list of
    modules, with ``K`` its keys as ``module_keys`` gives them: a run with other keys compiles again), ``"items
    K"`` (any other container ``unrolling.container_keys`` takes, ``nn.Sequential``, ``nn.ParameterList``, with its
    keys likewise: a loop over it is unrolled for them), else ``"shared"``."""
    if is_host_data(v):
        return "host"
    if isinstance(v, torch.nn.LSTMCell):
        return "pair"
    rnn = recurrent_kind(v)
    if rnn is not None:
        return f"recurrent {rnn}"
    if type(v) is torch.nn.Embedding:
        return "embedding"
    if isinstance(v, torch.nn.Module) and program_methods(type(v)):  # its methods are analysed as written
        hooked = " hooked" if forward_hooks(v) else ""  # then calling it is not its `forward` alone
        return f"module {type(v).__module__}.{type(v).__qualname__} {id(type(v)):x}{hooked}"
    keys = module_keys(v)
    if keys is not None:
        return f"modules {keys!r}"
    keys = unrolling.container_keys(v)  # nn.Sequential, nn.ParameterList, ...: a loop over it is unrolled
    return f"items {keys!r}" if keys is not None else "shared"


INSTANCE_ARITY: tuple = ("instance", "arity")
"""The reference of a fact of the run's batch, not of its shared arguments: ``instance_arity`` of the instances
(``model(*pair)``, the entry unpacking its instance: ``_Analyzer.instance_arity``). A ``Resolver`` given the
batch answers it (``batch_fact``); the program compiled so is reused by later batches with the same fact, and
compiled again for others."""
INSTANCE_SHAPES: tuple = ("instance", "shapes")
"""The reference of the fact ``instance_shapes`` of the run's batch (``_Analyzer.ragged_instances``)."""
INSTANCE_LISTS: tuple = ("instance", "lists")
"""The reference of the fact ``instance_lists`` of the run's batch (``_Analyzer.instance_item_list``)."""
BATCH_FACTS = (INSTANCE_ARITY, INSTANCE_SHAPES, INSTANCE_LISTS)
"""Every fact of a batch: a program the static tier rejected after its analysis asked for some of them is compiled
again for a batch where one of those differs."""


def instance_arity(instances: Sequence[Any]) -> str:
    """``"tuple n"`` where every instance of the batch is a tuple or list of ``n`` items, else ``"mixed"``."""
    sizes = {len(x) if type(x) in (tuple, list) else None for x in instances}
    return f"tuple {sizes.pop()}" if len(sizes) == 1 and None not in sizes else "mixed"


def instance_shapes(instances: Sequence[Any]) -> str:
    """``"ragged"`` where the batch's instances are tensors, or tuples or lists of one length, and the tensors at
    one position differ in shape between instances (treelstm.pytorch's ``(ltree, linputs, rtree, rinputs)``,
    sentences of different lengths), else ``"uniform"``."""
    arity = instance_arity(instances)
    if arity == "mixed":
        columns = [list(instances)]
    else:
        columns = [[x[i] for x in instances] for i in range(int(arity.split()[1]))]
    for col in columns:
        shapes = {tuple(t.shape) for t in col if isinstance(t, torch.Tensor)}
        if len(shapes) > 1:
            return "ragged"
    return "uniform"


def instance_lists(instances: Sequence[Any]) -> str:
    """``"lists i j ..."``: the positions at which every instance of the batch, a tuple or list of one length,
    holds a list (``(tree, tokens)``: ``"lists 1"``); ``"lists"`` for none."""
    arity = instance_arity(instances)
    if arity == "mixed":
        return "lists"
    at = [i for i in range(int(arity.split()[1])) if all(type(x[i]) is list for x in instances)]
    return " ".join(["lists", *map(str, at)])


def batch_fact(ref: tuple, instances: Sequence[Any]) -> str:
    """The fact ``ref`` (``INSTANCE_ARITY``, ``INSTANCE_SHAPES``, ``INSTANCE_LISTS``) of the batch ``instances``."""
    return {INSTANCE_ARITY: instance_arity, INSTANCE_SHAPES: instance_shapes,
            INSTANCE_LISTS: instance_lists}[ref](instances)


_PROGRAM_METHODS: dict[type, frozenset[str]] = {}


def program_methods(cls: type) -> frozenset[str]:
    """The names of the ``@acrobat.function`` methods of class ``cls`` (its own and inherited ones)."""
    names = _PROGRAM_METHODS.get(cls)
    if names is None:
        names = _PROGRAM_METHODS[cls] = frozenset(
            n for c in cls.__mro__ for n, v in vars(c).items()
            if isinstance(getattr(v, "snapshot", None), SourceSnapshot) and not hasattr(v, "run"))
    return names


def module_keys(v: Any) -> range | tuple | None:
    """The keys that choose a module of the container of modules ``v`` (``range(len(v))`` of a ``nn.ModuleList``
    or list, a tuple of the keys of a ``nn.ModuleDict`` or dict, in order), or None when ``v`` is no such
    container."""
    if isinstance(v, (torch.nn.ModuleList, torch.nn.ModuleDict)) or isinstance(v, (list, tuple, dict)) and v and all(
            isinstance(m, torch.nn.Module) for m in (v.values() if isinstance(v, dict) else v)):
        return tuple(v.keys()) if isinstance(v, (dict, torch.nn.ModuleDict)) else range(len(v))
    return None


class _Analyzer:
    def __init__(self, functions: dict[Any, ir.Function], entry_params: list[str], resolve: Resolver | None = None,
                 parse: Callable[[Any], Mapping[Any, ir.Function]] | None = None,
                 implicit: Callable[[Callable], Any] | None = None, run_list: RunList | None = None,
                 threads: Mapping[Any, int | None] | None = None, stacked: frozenset[tuple[Any, str]] = frozenset(),
                 unrolls: Mapping[int, tuple[unrolling.LoopOver, tuple]] | None = None):
        self.functions = functions
        # nid of the `pass` where a loop over shared containers was unrolled -> what it iterated and their keys
        # (``unrolled_here``)
        self.unrolls = unrolls or {}
        # (function, variable) pairs holding a tensor on one path and a stacked list on another that no split
        # separates (``analyze_kinds``): each tensor assigned to one is the stack of its rows (``stacked_join``)
        self.stacked = stacked
        self.run_list = run_list  # the list a shared module holds for the run, a variable of it (``run_lists``)
        # the functions taking that variable as their last parameter -> the position of their parameter holding
        # the module (None: they only pass the list on)
        self.threads = threads or {}
        self.implicit = implicit  # the program function of an undecorated helper of the model (``helper_call``)
        # attribute name -> kind of the values stored there (see "fields"), every stored name from the start, so
        # that a read analysed before the store waits for its kind (BOTTOM) instead of taking host data
        self.fields: dict[str, Kind] = {name: BOTTOM for fn in functions.values() for name in _stored_attrs(fn)}
        self.parse = parse  # parses a program function found during the analysis (a module's method), and its callees
        # nid of a call made a program call (``method_call``) -> the method's name, and whether the module is called
        self.method_sites: dict[int, tuple[str, bool]] = {}
        self.returned: int | None = None  # nid of the value of the `return` being analysed (``program_call``)
        self.entry_params = entry_params  # what messages call a shared reference ``("arg", i)``
        self.resolve = resolve
        self.facts: dict[tuple, str] = {}  # shared reference -> ``shared_fact`` of its value (see shared_path)
        self.specs: dict[SpecKey, Spec] = {}
        self.changed = False
        self.spec: Spec
        self.env: dict[str, Kind] = {}  # flow-sensitive kinds of the variables at the current point
        # per function: which parameters some call passes a per-instance tensor (see _key_kind)
        self.tensor_params: dict[Any, list[bool]] = {}
        self.loop_exits: list[list[dict[str, Kind]]] = []  # per enclosing loop: environments at break/continue
        self.called: set[int] = set()  # nids of subscripts that are called (`p.experts[k](x)`: ``module_choice``)
        self.instance: tuple[SpecKey, str] | None = None  # the entry's specialization and its instance parameter
        self.record_ids: dict[str, tuple[ir.Function, frozenset[int]]] = {}  # ``records``, by function name

    # -- helpers -------------------------------------------------------
    def error(self, node: ir.Expr | ir.Stmt, message: str) -> CompileError:
        """The ``CompileError`` at ``node`` of the function analysed now, which its ``function`` attribute names
        (a function the static tier rejects may run as a dynamic region: ``acrobat.analysis.regions``)."""
        err = CompileError(self.as_written(message), node.loc.file, node.loc.line, node.loc.col)
        err.function = self.spec.key[0] if hasattr(self, "spec") else None  # type: ignore[attr-defined]
        return err

    def as_written(self, message: str) -> str:
        """``message`` with the shared values in the kinds it names (``describe_ref``: ``shared arg1.W``,
        ``shared <expr 5 of f_0>``) as the model writes them: ``shared `p.W```, or ``shared value`` for one
        computed from shared values."""
        def show(m: re.Match) -> str:
            return f"shared `{self.entry_params[int(m[1])]}{m[2]}`" if m[1] else "shared value"
        return re.sub(r"shared (?:arg(\d+)((?:\.\w+|\[[^\]]*\])*)|<expr \d+ of [^>]+>)", show, message)

    def request(self, key: SpecKey) -> Spec:
        if key not in self.specs:
            fn = self.functions[key[0]]
            # unique per specialization, even for two functions of one name (two classes' `forward`)
            index = sum(1 for s in self.specs.values() if s.fn.name == fn.name)
            self.specs[key] = Spec(key, fn, f"{fn.name}_{index}")
            self.changed = True
        return self.specs[key]

    def shared_path(self, ref: tuple) -> Kind:
        """The kind of a path into a shared argument (``p.steps``, ``p.layers[0]``): host data where the value
        the run passes is plain Python data (a number, a list of floats: host code reads it as written, per
        instance), else a shared value. What was found is kept in ``facts``: the program compiled so holds
        for later runs whose arguments agree (``acrobat.program``)."""
        if self.resolve is not None:
            value = self.resolve(ref)
            if value is not UNRESOLVED:
                self.facts[ref] = shared_fact(value)
                if self.facts[ref] == "host":
                    return SharedK(ref, host=True)
        return SharedK(ref)

    def set_var(self, node: ir.Stmt | ir.Expr, name: str, k: Kind) -> None:
        old = self.spec.var.get(name, BOTTOM)
        if isinstance(k, (ListK, MapK)):  # a list is the instance's own object: shared values in it are lifted
            k = _lifted(k)
        try:
            new = join(old, k)
        except KindConflict:
            if self.is_stacked(name) and stacked_join(old, k) is not None:  # its tensors: stacks of their rows
                self.spec.var[name] = RAGGED
                self.changed = True
                return
            err = self.error(node, f"{shown_name(name)} holds host data in one place and a tensor in another "
                                   f"({old} vs {k}): use separate variables")
            err.variable = (self.spec.key[0], name)  # ``analyze_kinds`` splits it into versions where it can
            err.stackable = stacked_join(old, k) is not None  # or else makes it a stacked list
            raise err from None
        if new != old:
            self.spec.var[name] = new
            self.changed = True

    def is_stacked(self, name: str) -> bool:
        """Whether variable ``name`` of the function analysed is a stacked list whose tensors are stacks of their
        rows (``stacked_join``)."""
        return (self.spec.key[0], name) in self.stacked

    def note(self, e: ir.Expr, k: Kind) -> Kind:
        """Record ``e``'s kind, joined with what earlier passes found (kinds only grow)."""
        old = self.spec.kinds.get(e.nid, BOTTOM)
        try:
            new = join(old, k)
        except KindConflict:
            if not (isinstance(e, ir.Name) and self.is_stacked(e.id) and stacked_join(old, k) is not None):
                raise self.error(e, f"this expression is host data on one path and a tensor on another ({old} vs {k})") from None
            new = RAGGED  # a read before its variable became a stacked list
        if new != old:
            self.spec.kinds[e.nid] = new
            self.changed = True
        return new

    # -- statements ----------------------------------------------------
    def body(self, stmts: list[ir.Stmt], entry: bool) -> bool:
        """Analyse statements in order (flow-sensitive ``self.env``); True if they always return."""
        for s in stmts:
            if self.stmt(s, entry):
                return True
        return False

    def bind(self, node: ir.Stmt, target: ir.Target, k: Kind) -> None:
        if target.name is not None:
            self.set_var(node, target.name, k)
            self.env[target.name] = k
            return
        items = target.items or []
        if any(t.starred for t in items):
            parts = self.starred_parts(node, k, items)
        elif isinstance(k, TupleK):
            if len(k.items) != len(items):
                raise self.error(node, f"cannot unpack {len(k.items)} values into {len(items)} names")
            parts = list(k.items)
        elif isinstance(k, DictK):
            parts = [HOST] * len(items)  # unpacking a dict gives its keys
        elif isinstance(k, ListK):
            parts = [k.elem] * len(items)
        elif isinstance(k, SharedK) and k.ref[0] == "arg":
            parts = [self.shared_path(k.ref + (("[", i),)) for i in range(len(items))]
        elif isinstance(k, SharedK):
            parts = [SharedK(k.ref + (("[", i),), k.host) for i in range(len(items))]
        elif k is BOTTOM:
            parts = [BOTTOM] * len(items)
        else:  # host data, or a tensor operator returning several tensors (torch.chunk)
            parts = [k] * len(items)
        for t, p in zip(items, parts):
            self.bind(node, t, p)

    def starred_parts(self, node: ir.Stmt, k: Kind, items: list[ir.Target]) -> list[Kind]:
        """Kinds of ``a, *rest, z = value``: the starred name gets a list."""
        star = next(i for i, t in enumerate(items) if t.starred)
        if isinstance(k, ListK):
            return [ListK(k.elem) if t.starred else k.elem for t in items]
        if isinstance(k, TupleK):
            n_rest = len(k.items) - (len(items) - 1)
            if n_rest < 0:
                raise self.error(node, f"cannot unpack {len(k.items)} values into {len(items) - 1}+ names")
            rest: Kind = BOTTOM
            for x in k.items[star:star + n_rest]:
                rest = join(rest, x)
            return [*k.items[:star], ListK(rest), *k.items[star + n_rest:]]
        if k is BOTTOM:
            return [BOTTOM] * len(items)
        if type(k) is HostK:
            return [k] * len(items)
        raise self.error(node, f"cannot unpack a {k} with a starred name: unpack lists or tuples")

    def merge(self, envs: list[dict[str, Kind]]) -> None:
        """Join the environments of the control-flow paths that reach a point."""
        merged: dict[str, Kind] = {}
        for env in envs:
            for name, k in env.items():
                old = merged.get(name, BOTTOM)
                stacked = stacked_join(old, k) if self.is_stacked(name) else None
                merged[name] = stacked if stacked is not None else join(old, k)
        self.env = merged

    def loop(self, before: dict[str, Kind], run_body) -> None:
        """Iterate a loop body until the environment at its head is stable."""
        head = dict(before)
        while True:
            self.env = dict(head)
            self.loop_exits.append([])
            try:
                run_body()
            finally:
                exits = self.loop_exits.pop()
            # the head (and the code after the loop) is reached from the end of the body and from every
            # `break`/`continue`: joining all of them is sound for both (a break's kinds reach the exit)
            self.merge([head, self.env, *exits])
            if self.env == head:
                return
            head = self.env

    def stmt(self, s: ir.Stmt, entry: bool) -> bool:
        """Analyse one statement; True if it always returns."""
        match s:
            case ir.Assign(target=t, value=v):
                k = self.unzip(s) if unpacking.is_unzip(v) and t.items is not None and not any(
                    x.starred for x in t.items) else self.expr(v)
                if t.name is not None and self.is_stacked(t.name) and isinstance(k, TensorK):  # its rows' stack
                    self.spec.forms[v.nid] = "stacked"
                    k = self.rows_of(v)
                self.bind(s, t, k)
                self.flow_target(s, t, v, k)
            case ir.ExprStmt(value=v):
                written = self.item_assignment(s) if inplace.is_item_write(v) else None
                if written is not None:
                    return self.stmt(written, entry)
                self.expr(v)
            case ir.Return(value=v):
                self.returned = v.nid if v is not None else None  # a call there may return host data or a tensor
                k = self.expr(v) if v is not None else HOST
                try:
                    new = result_join(self.spec.ret, k)
                except KindConflict:
                    raise self.error(s, f"returns host data in one place and tensors in another ({self.spec.ret} vs {k})") from None
                if new != self.spec.ret:
                    self.spec.ret = new
                    self.changed = True
                return True
            case ir.Break() | ir.Continue():
                if not self.loop_exits:
                    raise self.error(s, f"`{type(s).__name__.lower()}` outside a loop")
                self.loop_exits[-1].append(dict(self.env))
                return True  # the statements after it in this body are not reached
            case ir.If(test=t, body=b, orelse=o):
                self.host_test(t, "if")
                before = dict(self.env)
                narrow_b, narrow_o = _none_test(t)
                self.narrow(narrow_b)
                ends_b = self.body(b, False)
                env_b = self.env
                self.env = dict(before)
                self.narrow(narrow_o)
                ends_o = self.body(o, False)
                self.merge([e for e, ends in ((env_b, ends_b), (self.env, ends_o)) if not ends])
                return ends_b and ends_o
            case ir.While(test=t, body=b):
                self.host_test(t, "while")
                # the body starts where the test holds: `while h is not None:` narrows h there
                self.loop(self.env, lambda: (self.narrow(_none_test(t)[0]), self.body(b, False),
                                             self.host_test(t, "while")))
            case ir.For(target=tg, iter=it, body=b):
                self.shared_loop(s)
                elem = self.iter_elem(it)
                src = _path_of(it) if it.nid not in self.spec.rows else None
                if isinstance(self.spec.kinds.get(it.nid), MapK):  # its keys: host data
                    src = None
                if tg.name is not None and src is not None:
                    self.spec.lists.edges.add(((tg.name, 0), (src[0], src[1] + 1)))  # the loop variable is an element
                elif contains(elem, MUTABLE):
                    self.untracked(s, tg)
                self.loop(self.env, lambda: (self.bind(s, tg, elem), self.body(b, False)))
            case ir.Pass() if s.nid in self.unrolls:
                self.unrolled_here(s)
            case ir.PhaseMark():
                if not entry:
                    raise self.error(s, "acrobat.phase() marks a stage of the @acrobat.program entry function; "
                                        "move it to the entry's top level")
        return False

    # -- lists: one object under many names (see ListFlow) ---------------
    def flow_target(self, node: ir.Stmt, t: ir.Target, v: ir.Expr, k: Kind) -> None:
        """Record where the lists (and maps) in ``v`` (of kind ``k``) go when assigned to ``t``."""
        if not contains(k, MUTABLE):
            return
        if t.name is not None:
            self.flow(node, (t.name, 0), v)
        elif isinstance(v, ir.TupleExpr) and len(v.items) == len(t.items or []):
            for ti, vi in zip(t.items or [], v.items):
                self.flow_target(node, ti, vi, self.spec.kinds.get(vi.nid, BOTTOM))
        else:
            self.untracked(node, t)

    def flow(self, node: ir.Expr | ir.Stmt, dst: ListPath, v: ir.Expr) -> None:
        """The list at ``dst`` now is (or holds the elements of) the list value ``v``."""
        src = _path_of(v)
        if src is not None:
            if src != dst:
                self.spec.lists.edges.add((dst, src))
            return
        match v:
            case ir.BinOp(inplace=True, right=r):  # `dst += r`: the same list, extended by r's elements
                self.flow_elems(node, dst, r)
            case ir.ListExpr(items=items):  # a new list: its items are elements
                for x in items:
                    if contains(self.spec.kinds.get(x.nid, BOTTOM), MUTABLE):
                        self.flow(node, (dst[0], dst[1] + 1), x)
            case ir.DictExpr(keys=[]) | ir.Call(kind=ir.CallKind.HOST, target=builtins.dict, args=[]):
                pass  # a new, empty map
            case ir.BinOp(op="+", left=a, right=b):  # a new list of both sides' elements
                self.flow_elems(node, dst, a)
                self.flow_elems(node, dst, b)
            case ir.Subscript(obj=o, index=ir.Slice()) | ir.Call(
                    kind=ir.CallKind.BUILTIN, target="list" | "reversed", args=[o]):
                self.flow_elems(node, dst, o)  # a new list of o's elements
            case ir.Call(kind=ir.CallKind.PROGRAM) if dst[1] == 0:  # `states = run(xs)`: the list it returns
                self.spec.lists.returned.setdefault(dst[0], {})[v.nid] = node
            case _:
                self.spec.lists.untracked.setdefault(dst[0], node)

    def flow_elems(self, node: ir.Expr | ir.Stmt, dst: ListPath, v: ir.Expr) -> None:
        """The elements of the list value ``v`` become elements of the list at ``dst``."""
        k = self.spec.kinds.get(v.nid, BOTTOM)
        if not (isinstance(k, ListK) and contains(k.elem, ListK)):
            return  # elements that are not lists need no tracking
        src = _path_of(v)
        if src is not None:
            self.spec.lists.edges.add(((dst[0], dst[1] + 1), (src[0], src[1] + 1)))
        elif isinstance(v, ir.ListExpr):
            self.flow(node, dst, v)
        else:
            self.spec.lists.untracked.setdefault(dst[0], node)

    def untracked(self, node: ir.Stmt, t: ir.Target) -> None:
        """Every name in ``t`` got a list the analysis does not follow (from a tuple, a call, ...)."""
        if t.name is not None:
            self.spec.lists.untracked.setdefault(t.name, node)
        for i in t.items or []:
            self.untracked(node, i)

    def mutate(self, e: ir.Expr, receiver: ir.Expr, elem: Kind | None) -> ListPath:
        """``receiver``, a list, is changed in place by ``e``; ``elem``: the kind of what is put into it.

        Raises:
            CompileError: the list is not held in a variable (or an element of one).
        """
        path = _path_of(receiver)
        if path is None:
            raise self.error(e, "a list (or dict) changed in place must be held in a variable (or be an element "
                                "of a list held in one): assign it to a variable first")
        if not is_comprehension_list(path[0]):  # a comprehension's list: built before any other name holds it
            self.spec.lists.mutated.setdefault(path[0], e)
        if elem is not None:
            name, steps = path
            old = self.spec.var.get(name, BOTTOM)
            inner = _kind_at(old, steps)
            if isinstance(inner, MapK):
                grown: Kind = MapK(self.join_at(e, inner.value, elem))
            else:
                grown = ListK(self.join_at(e, inner.elem if isinstance(inner, ListK) else BOTTOM, elem))
            self.set_var(e, name, _put_at(old, steps, grown))
            self.env[name] = self.spec.var[name]
        return path

    def sync_lists(self) -> None:
        """Make variables that may hold one list agree on its kind (the analysis of ``self.spec``)."""
        for a, b in self.spec.lists.edges:
            ka, kb = _kind_at(self.spec.var.get(a[0], BOTTOM), a[1]), _kind_at(self.spec.var.get(b[0], BOTTOM), b[1])
            if not (isinstance(ka, MUTABLE) or isinstance(kb, MUTABLE)) or ka == kb:
                continue
            try:
                k = join(ka, kb)
            except KindConflict:
                raise self.error(self.spec.fn, f"{shown_name(a[0])} and {shown_name(b[0])} may hold the same list, "
                                               f"once with host data and once with tensors ({ka} vs {kb}): keep them in separate "
                                               "lists") from None
            for name, steps in (a, b):
                self.set_var(self.spec.fn, name, _put_at(self.spec.var.get(name, BOTTOM), steps, k))

    def link_list_args(self, e: ir.Call, callee: Spec, arg_kinds: tuple[Kind, ...]) -> None:
        """A list (or map) argument and the callee's parameter are one object: what the callee puts in, the
        caller sees."""
        for i, (a, k) in enumerate(zip(e.args, arg_kinds)):
            if not contains(k, MUTABLE):
                continue
            path = _path_of(a)
            self.spec.lists.links[(e.nid, i)] = path if path is not None else (None if _fresh(a) else ("?", 0))
            inner = callee.var.get(callee.fn.params[i])
            if path is None or not isinstance(inner, MUTABLE):
                continue
            name, steps = path
            cur = _kind_at(self.spec.var.get(name, BOTTOM), steps)
            try:
                k2 = join(cur, inner)
            except KindConflict:
                raise self.error(e, f"`{e.target.__name__}` puts {_items(inner)[0]} into this {_container(inner)}, "
                                    f"which holds {cur}: keep host data and tensors in separate containers") from None
            if k2 != cur:
                self.set_var(e, name, _put_at(self.spec.var.get(name, BOTTOM), steps, k2))
                self.env[name] = self.spec.var[name]

    def store_field(self, e: ir.Call, attr: str, k: Kind) -> None:
        """``setattr(obj, attr, value)`` (``obj.attr = value``) of the instance's own object ``obj``: the field's
        kind grows by the value's, taken per-instance (shared values lifted) with a depth known only at run
        time (the stored depth, §4.1). Stores change host state that outlives the call (``ListFlow.host_effects``).

        Raises:
            CompileError: the value is a list that may hold tensors (it could still change after the store,
                unseen), a stacked list, or host data where the field holds tensors elsewhere.
        """
        value = e.args[2]
        self.no_ragged(value, k, "stored on an object")
        if contains(k, MUTABLE) and not _host_lists(k):
            raise self.error(value, f"a list that holds tensors (or is still empty) stored as `.{attr}` could change "
                                    "after the store, which acrobat does not follow: store a tuple "
                                    "(`node.hs = (h1, h2)`) or keep the list in a variable")
        self.spec.lists.host_effects[e.nid] = e
        old = self.fields[attr]
        try:
            new = join(old, _key_kind(_lifted(k), True))
        except KindConflict:
            raise self.error(e, f"`.{attr}` holds host data in one place and tensors in another ({old} vs {k}): "
                                "use separate attributes") from None
        if new != old:
            self.fields[attr] = new
            self.changed = True

    def fields_read_before_stored(self) -> bool:
        """At a fixpoint: give host data's kind to every field no store gave a kind, because each value stored
        there derives from a read of the field itself (``n.seen = n.seen + 1``). Such a read gives what the
        instance's object held before the run, host data as any attribute of the instance; left BOTTOM, the
        values computed from it were taken for shared values (the loop-carried ``h`` of
        ``h = tanh(p.lin(h) + n.seen)`` lowered to its initial value: a wrong answer). Returns whether a field
        changed (the fixpoint then runs again)."""
        unknown = [attr for attr, k in self.fields.items() if k is BOTTOM]
        for attr in unknown:
            self.fields[attr] = HOST
        return bool(unknown)

    def narrow(self, names: set[str]) -> None:
        """In a branch where ``name is not None`` holds, it has the kind of its non-None values."""
        for name in names:
            if isinstance(self.env.get(name), OptionalK):
                self.env[name] = self.env[name].inner  # type: ignore[union-attr]
            elif isinstance(self.env.get(name), NoneK):
                self.env[name] = BOTTOM  # it is always None here: the branch is not taken

    def truth(self, t: ir.Expr) -> Kind:
        """Kind of a truth-tested expression; ``and``/``or``/``not`` in a test read their tensor operands'
        values (each a value read, §4.2) and are host data."""
        if isinstance(t, ir.BoolOp) or isinstance(t, ir.UnaryOp) and t.op == "not":
            before = dict(self.env)
            for x in t.values if isinstance(t, ir.BoolOp) else [t.operand]:
                if isinstance(self.truth(x), TensorK):
                    self.spec.reads.add(x.nid)
                if isinstance(t, ir.BoolOp):  # `h is not None and h.sum() > 0`: later operands see h narrowed
                    self.narrow(_none_test(x)[0 if t.op == "and" else 1])
            self.env = before
            return self.note(t, HOST)
        return self.expr(t)

    def host_test(self, t: ir.Expr, what: str) -> None:
        k = self.truth(t)
        if isinstance(k, TensorK):
            self.spec.reads.add(t.nid)  # tensor-dependent control flow: the test waits for its value (§4.2)
        elif isinstance(k, (ListK, TupleK, DictK, MapK)):
            return  # `if buf:` on a list of tensors: its length, host data (a tuple or dict is never empty here)
        elif has_tensor(k):
            raise self.error(t, f"this `{what}` condition is a container of tensors: test one tensor, "
                                "e.g. `if bool(x)` or `if x.item() > 0`")

    def container_keys(self, c: ir.Expr) -> unrolling.Keys | None:
        """The keys of the shared container the path ``c`` names in the run (``unrolling.container_keys``), or
        None where it names no such container (host data, a per-instance value, not known without the run)."""
        k = self.expr(c)
        if not isinstance(k, SharedK) or k.host or k.ref[0] != "arg" or self.resolve is None:
            return None
        value = self.resolve(k.ref)
        return None if value is UNRESOLVED else unrolling.container_keys(value)

    def shared_loop(self, s: ir.For) -> None:
        """A ``for`` over shared containers of the run (``for lyr in p.layers``, ``zip(p.lins, p.norms)``,
        ``p.experts.items()``) is unrolled into its iterations (``acrobat.analysis.unrolling``): raises the
        ``CompileError`` whose ``unroll`` (function, loop, keys) ``analyze_kinds`` unrolls it by; does nothing for
        any other loop.

        Raises:
            CompileError: always where the loop is over shared containers (with ``unroll`` where it has at most
                ``unrolling.MAX_UNROLL`` iterations, else a rejection: the dynamic tier runs it).
        """
        over = unrolling.loop_over(s.iter)
        keys = [self.container_keys(c) for c in over.containers] if over is not None else [None]
        if None in keys:
            return
        n = unrolling.count(over, tuple(keys))  # type: ignore[arg-type]
        if n is None:
            return
        if n > unrolling.MAX_UNROLL:
            raise self.error(s, f"a loop over a shared container of {n} items: the static tier unrolls loops over "
                                f"shared containers of at most {unrolling.MAX_UNROLL} items; the dynamic tier runs it")
        err = self.error(s, f"this loop over a shared container is unrolled into its {n} iteration(s)")
        err.unroll = (self.spec.key[0], s.nid, tuple(keys))  # type: ignore[attr-defined]
        raise err

    def unrolled_here(self, s: ir.Pass) -> None:
        """Where a loop over shared containers was unrolled (``shared_loop``): the containers of this
        specialization have the keys it was unrolled for.

        Raises:
            CompileError: another specialization of the function passes containers with other keys (or no
                shared container): the static tier unrolls a loop once per function; the dynamic tier runs it.
        """
        over, keys = self.unrolls[s.nid]
        got = tuple(self.container_keys(c) for c in over.containers)
        if got != keys:
            unrolled, passed = [list(k) for k in keys], [None if k is None else list(k) for k in got]
            raise self.error(s, f"this loop over a shared container was unrolled for keys {unrolled}, and another "
                                f"call of the function passes {passed}: the static tier unrolls a loop over shared "
                                "containers for one set of containers per function (pass containers of one length, "
                                "or use one function per container); the dynamic tier runs it")

    def iter_elem(self, it: ir.Expr) -> Kind:
        k = self.expr(it)
        if isinstance(k, ListK):
            return k.elem
        if isinstance(k, MapK):  # `for key in cache`: its keys, host data
            return HOST
        if isinstance(k, RaggedK):
            return k.rows
        if isinstance(k, TupleK):  # `for r in rest` of a function taking `*rest`: any of its items
            elem: Kind = BOTTOM
            for x in k.items:
                elem = self.join_at(it, elem, x)
            return elem
        if self.has_rows(k):
            return self.rows_of(it)
        if k is HOST or k is BOTTOM:
            return k
        raise self.error(it, f"cannot iterate over a {k}: loops run over host data (lists, ranges, tuples) "
                             "or over lists of tensors built with append")

    def has_rows(self, k: Kind) -> bool:
        """Whether a value of kind ``k`` is a tensor, which Python iterates by its rows: a per-instance tensor, or a
        shared one (an operator over shared values, or a path into the shared arguments holding a tensor in the
        run compiled for; without the run's arguments a path's value is not known)."""
        if isinstance(k, TensorK):
            return True
        if not isinstance(k, SharedK) or k.host:
            return False
        return k.ref[0] == "expr" or self.resolve is not None and isinstance(self.resolve(k.ref), torch.Tensor)

    def rows_of(self, x: ir.Expr) -> Kind:
        """``x``, an expression of a tensor kind, is iterated: its rows are built as a list before its statement
        once this pass over the specialization is done (``acrobat.analysis.rows``, §3), and the iteration is
        analysed then. BOTTOM until that pass."""
        if x.nid not in self.spec.rows:
            self.spec.rows[x.nid] = x
            self.changed = True
        return BOTTOM

    def records(self, fn: ir.Function) -> frozenset[int]:
        """``_records(fn)``, found once per function."""
        if fn.name not in self.record_ids or self.record_ids[fn.name][0] is not fn:
            self.record_ids[fn.name] = (fn, _records(fn))
        return self.record_ids[fn.name][1]

    def instance_name(self) -> str | None:
        """The name of the instance parameter where the specialization analysed is the entry's, else None."""
        return self.instance[1] if self.instance is not None and self.spec.key == self.instance[0] else None

    def tensor_rows(self, e: ir.Call) -> Kind | None:
        """``torch.tensor(tokens)`` of a host list whose length may differ per instance (a list of host data the
        program builds, or host data ``token_lists.is_host_list`` takes for such a list): built as
        the stacked list of one tensor per item once this pass over the specialization is done
        (``acrobat.analysis.rows``, issue 18 §2), BOTTOM until then; None for any other call."""
        if not token_lists.constructs_from_list(e) or isinstance(e.args[0], (ir.ListExpr, ir.TupleExpr)):
            return None  # a list display has one length in every instance
        k = self.spec.kinds.get(e.args[0].nid)
        if not (k == ListK(HOST) or type(k) is HostK and (
                token_lists.is_host_list(self.spec.fn, e.args[0], self.instance_name()) or
                self.instance_item_list(e.args[0]))):
            return None
        self.spec.forms[e.nid] = "tokens"
        return self.rows_of(e)

    def sized_rows(self, e: ir.Call) -> Kind | None:
        """``torch.arange(len(tokens))``, ``torch.zeros(n, D)``: a factory whose first size is per-instance host
        data (``acrobat.analysis.sized``), built as the stacked list of its rows once this pass over the
        specialization is done (``acrobat.analysis.rows``), BOTTOM until then; None for any other call.

        Raises:
            CompileError: only a later size is per-instance host data (``torch.zeros(3, n)``).
        """
        operands = sized.size_operands(e)
        if operands is None:
            return None
        first, later = ([x for x in xs if self.spec.kinds.get(x.nid) is HOST and sized.is_instance_data(x) and
                         not self.read_in_block(x)] for xs in operands)
        if not first and later:
            raise self.error(later[0], "a tensor factory whose size after the first is host data of the instance "
                                       "(a variable, not a constant) may have a per-instance shape, which no batched "
                                       "tensor or stacked list holds: the static tier takes such a size first only "
                                       "(`torch.zeros(n, 3)`, a stacked list of rows), or a constant, a shape read "
                                       "(`x.shape[0]`) or a shared value after it; the dynamic tier runs it")
        if not first:
            return None
        if any(has_tensor(self.spec.kinds.get(x.nid, BOTTOM)) for x in e.args):
            return None  # a size of a tensor kind: the factory's own rules judge it
        self.spec.forms[e.nid] = "sized"
        return self.rows_of(e)

    def shared_metadata(self, e: ir.Expr, operands: list[ir.Expr], kinds: list[Kind]) -> Kind:
        """The kind of a metadata read ``e`` (``o.shape``, ``o.dtype``, ``o.size(0)``, ``o.dim()``) of a shared
        tensor ``o`` (``operands[0]``; its arguments after it): host data, the same for every instance, which the
        once-per-run prologue computes where it can compute ``o`` and the arguments (shared values, constants;
        §5.1), else host code reads (a call's shared result: the prologue runs no call; an argument that is the
        instance's host data). Never a shared tensor: host code computes with it (`ws + [p.h0.size(0)]`)."""
        if any(k is BOTTOM for k in kinds):
            return BOTTOM
        if all(_shared_operand(x, k) or _is_const(x) for x, k in zip(operands, kinds)):
            self.spec.shared_ops.add(e.nid)
            return SharedK(("expr", self.spec.name, e.nid), host=True)
        return HOST

    def read_in_block(self, e: ir.Expr) -> bool:
        """Whether the size ``e`` reads a tensor's metadata that a block reads itself, a Python int under vmap: a
        shape (``t.shape[0]``, ``t.size(0)``, ``t.ndim``) of any tensor, ``len(x)`` of a per-instance one."""
        for y in ir.walk(e):
            match y:
                case ir.Attr(attr=a) if a in rules.SHAPE_ATTRS:
                    return True
                case ir.Call(kind=CallKind.METHOD, target=m) if m in rules.SHAPE_METHODS:
                    return True
                case ir.Call(kind=CallKind.BUILTIN, target="len", args=[x]) if has_tensor(self.spec.kinds.get(x.nid,
                                                                                                             BOTTOM)):
                    return True
        return False

    def cut_rows(self, e: ir.Subscript) -> Kind:
        """``W[a:b]``, a tensor cut along dim 0 by per-instance host bounds (``p.pos[:len(tokens)]``): its length
        differs per instance, so it is built as the stack of the rows it keeps once this pass over the
        specialization is done (``acrobat.analysis.rows``, issue 18 §2), a stacked list analysed then. BOTTOM
        until that pass."""
        self.spec.forms[e.nid] = "cut"
        return self.rows_of(e)

    def build_rows(self, spec: Spec) -> None:
        """After a pass over ``spec``: give it a copy of its function that builds the rows of the tensors the pass
        found iterated (``rows_of``; ``acrobat.analysis.rows``). The per-module calls of its module choices and
        the expansions of its starred calls are copies of calls that may have changed: made again next pass
        (the iterated tensors found in a per-module call are those of the call itself).

        Raises:
            CompileError: a tensor iterated where its rows cannot be built first (``rows.rewritten``).
        """
        if not spec.rows:
            return
        copies = {x.nid for _, calls in spec.choices.values() for call in calls for x in ir.walk(call)}
        spec.fn = rows.rewritten(spec.fn, {nid: x for nid, x in spec.rows.items() if nid not in copies}, spec.forms)
        spec.rows, spec.forms, spec.choices, spec.unpacked = {}, {}, {}, {}
        self.changed = True

    # -- expressions ---------------------------------------------------
    def expr(self, e: ir.Expr) -> Kind:
        return self.note(e, self.compute(e))

    def op_kind(self, e: ir.Expr, operands: list[ir.Expr], kinds: list[Kind], host_result: bool,
                host_receiver: bool = False, random: bool = False) -> Kind:
        """Kind of an operator applied to operands of the given kinds.

        With no tensor or shared operand, the result is host data when
        ``host_result`` (Python arithmetic, host methods), else a tensor op
        (a torch function of host numbers). ``host_receiver``: a method of
        host data, whose result is host data even with shared arguments.
        ``random``: the operator draws random numbers, so its result is
        per-instance whatever its operands (``acrobat.analysis.randomness``).
        """
        if any(k is BOTTOM for k in kinds):
            return BOTTOM  # an operand is not known yet (a call analysed later): the fixpoint comes back
        for x, k in zip(operands, kinds):
            self.no_ragged(x if x is not None else e, k, "an operand of this operator")
            if isinstance(k, OptionalK):
                raise self.error(x if x is not None else e, "this value may be None here: test it first "
                                 "(`if h is None: h = ...`) so that the operator only sees a tensor")
        # a shape read inside the operator (`p.Ws[x.shape[0] % 3]`) is computed in its block, which so takes
        # x as an input: the result is placed after x (App. A.1), as for a tensor operand
        shaped = [k for x in operands if x is not None for t in _shape_reads(x)
                  if isinstance(k := self.spec.kinds.get(t.nid, HOST), TensorK)]
        if any(has_tensor(k) for k in kinds) or shaped and (not host_result or any(has_shared(k) for k in kinds)):
            depths = [sdepth_of(k) for k in kinds + shaped if has_tensor(k)]
            self.spec.ops.add(e.nid)
            if None in depths:
                return DYNAMIC
            d = 1 + max(depths)
            return TensorK(d) if d <= MAX_STATIC_DEPTH else DYNAMIC
        if random:  # each instance draws its own numbers: never a shared value
            self.spec.ops.add(e.nid)
            return TensorK(0)
        if any(has_shared(k) for k in kinds):
            if all(_shared_operand(x, k) or _is_const(x) for k, x in zip(kinds, operands)):
                self.spec.shared_ops.add(e.nid)
                return SharedK(("expr", self.spec.name, e.nid))
            if host_receiver:
                return HOST
            self.spec.ops.add(e.nid)
            return TensorK(0)
        if host_result and any(isinstance(k, SharedK) for k in kinds) and all(
                _shared_operand(x, k) or _is_const(x) for k, x in zip(kinds, operands)):
            self.spec.shared_ops.add(e.nid)  # `p.rate * 0.5`: host data the same for every instance, once per run
            return SharedK(("expr", self.spec.name, e.nid), host=True)
        if host_result:
            return HOST
        if all(_is_const(x) for x in operands):
            self.spec.shared_ops.add(e.nid)
            return SharedK(("expr", self.spec.name, e.nid))
        self.spec.ops.add(e.nid)
        return TensorK(0)

    def compute(self, e: ir.Expr) -> Kind:
        match e:
            case ir.Const(value=None):
                return NONE
            case ir.Const():
                return HOST
            case ir.Name(id=name):
                k = self.env.get(name, BOTTOM)
                var = self.spec.var.get(name)
                if isinstance(var, ListK) and k is not BOTTOM:
                    return var  # one list, wherever it is changed: its kind is the same at every read
                return _stored(k, var) if var is not None else k
            case ir.Attr(obj=o, attr=a):
                k = self.expr(o)
                if isinstance(k, TupleK) and a in k.fields:  # a field of a namedtuple the model built
                    return k.items[k.fields.index(a)]
                if isinstance(k, TupleK) and len(k.items) == 2 and a in ("values", "indices"):
                    return k.items[a == "indices"]  # torch.return_types of max/min (a segment result)
                if isinstance(k, TupleK) and not all(is_host(i) for i in k.items):
                    raise self.error(e, f"attribute `.{a}` of a tuple whose fields acrobat does not know here (a "
                                        "namedtuple passed through a call or a list): index it (`t[0]`) or unpack it")
                if self.run_list is not None and isinstance(k, SharedK) and \
                        k.ref == ("arg", self.run_list.arg) and a == self.run_list.attr:
                    raise self.run_list_read(e, o)
                if isinstance(k, SharedK) and k.ref[0] == "arg":
                    return self.shared_path(k.ref + ((".", a),))
                if isinstance(k, SharedK) and a in rules.SHAPE_ATTRS:
                    return self.shared_metadata(e, [o], [k])
                if isinstance(k, SharedK):
                    return self.op_kind(e, [o], [k], host_result=False)
                if isinstance(k, TensorK) and a in rules.SHAPE_ATTRS:
                    self.spec.reads.add(o.nid)  # host code reads the per-instance shape: wait for the tensor (§4.2)
                    return HOST
                if isinstance(k, TensorK) and a in _VIEW_ATTRS:
                    return self.op_kind(e, [o], [k], host_result=False)  # `x.T`: an operator on the tensor
                if isinstance(k, OptionalK):
                    self.op_kind(e, [o], [k], host_result=False)  # raises: test `is None` first
                if type(k) is HostK and a in self.fields:  # `child.state`: a field the model stores
                    if has_tensor(self.fields[a]):
                        self.spec.loads.add(e.nid)
                    return self.fields[a]
                if isinstance(k, RaggedK) and a in rules.SHAPE_ATTRS | _VIEW_ATTRS:
                    self.no_ragged(e, k, f"read with `.{a}`" if a in rules.SHAPE_ATTRS else f"transposed with `.{a}`")
                if isinstance(k, TensorK) and a == "data" and self.data_read(e):
                    return self.op_kind(e, [o], [k], host_result=False)  # `x.detach()`
                if has_tensor(k):
                    raise self.error(e, f"attribute `.{a}` of a {k} is not supported inside a model: "
                                        f"{_ATTR_FIXES.get(a, _ATTR_FIX)}")
                return HOST if k is not BOTTOM else BOTTOM
            case ir.Subscript(obj=o, index=i):
                return self.subscript(e, o, i)
            case ir.Slice():
                kinds = [self.expr(x) for x in ir.children(e)]
                if any(has_tensor(k) for k in kinds):
                    raise self.error(e, "slice bounds must be host values or constants")
                return HOST
            case ir.TupleExpr(items=items):
                return TupleK(tuple(self.expr(x) for x in items))
            case ir.DictExpr(keys=[]) if e.nid not in self.records(self.spec.fn):
                return MapK(BOTTOM)  # `cache = {}`: filled with per-instance host keys
            case ir.DictExpr(keys=keys, values=vs):
                return DictK(tuple(keys), tuple(self.expr(x) for x in vs))
            case ir.ListExpr(items=items):
                elem: Kind = BOTTOM
                for x in items:
                    k = self.expr(x)
                    self.no_ragged(x, k, "put in a list")
                    elem = self.join_at(x, elem, k)
                return ListK(elem)
            case ir.BinOp(op=op, left=a, right=b):
                ka, kb = self.expr(a), self.expr(b)
                if e.inplace and (isinstance(ka, TensorK) or has_shared(ka)):
                    k = self.op_kind(e, [a, b], [ka, kb], host_result=True)
                    self.augmented_tensor(e, a, ka, k)
                    return k
                if e.inplace and isinstance(ka, HostK) and op in ("+", "*") and (
                        isinstance(kb, ListK) or isinstance(b, (ir.ListExpr, ir.TupleExpr))
                        or isinstance(a, ir.Name) and a.id in self.spec.fn.params and not isinstance(b, ir.Const)):
                    # `toks += [7]` of host data that may be a list (the instance's own: it changes in place) counts
                    # as a change of host state (a parameter's `depth += 1` does not)
                    self.spec.lists.host_effects[e.nid] = e
                if e.inplace and isinstance(ka, ListK) and op == "+":  # extends the list in place
                    self.mutate(e, a, kb.elem if isinstance(kb, ListK) else BOTTOM)
                    if isinstance(kb, ListK) and contains(kb.elem, ListK):
                        self.flow_elems(e, _path_of(a) or ("?", 0), b)
                    return self.spec.var.get(a.id, ka) if isinstance(a, ir.Name) else ka
                if isinstance(ka, ListK) and isinstance(kb, ListK) and op == "+":
                    return ListK(self.join_at(e, ka.elem, kb.elem))  # list concatenation, on the host
                if isinstance(ka, RaggedK) or isinstance(kb, RaggedK):
                    return self.ragged_binop(e, ka, kb)
                return self.op_kind(e, [a, b], [ka, kb], host_result=True)
            case ir.UnaryOp(op=op, operand=a):
                k = self.expr(a)
                if op == "not":
                    self.no_tensor(e, k, "`not`")
                    return HOST
                if isinstance(k, RaggedK) and k.depth == 1:  # `-S`, `~mask`: row by row
                    return self.ragged_node(e, "rows", None, RAGGED)
                return self.op_kind(e, [a], [k], host_result=True)
            case ir.Compare(operands=ops):
                kinds = [self.expr(x) for x in ops]
                if any(k is BOTTOM for k in kinds):
                    return BOTTOM  # an operand is not known yet (a call analysed later): the fixpoint comes back
                if e.ops in (["is"], ["is not"]) and any(isinstance(x, ir.Const) and x.value is None for x in ops):
                    return HOST  # `h is None`: host code tests the handle (a tensor is never None)
                if e.ops in (["in"], ["not in"]) and isinstance(kinds[1], MapK):  # `k in cache`: its keys, host data
                    self.no_tensor(ops[0], kinds[0], "a dict key")
                    return HOST
                if any(isinstance(k, OptionalK) for k in kinds):
                    raise self.error(e, "this value may be None: test it with `x is None` / `x is not None` first")
                over_shared = any(has_shared(k) for k in kinds) and all(
                    has_shared(k) or _is_const(x) for k, x in zip(kinds, ops))  # e.g. `torch.sum(p.h0) < 5.0`
                if any(has_tensor(k) for k in kinds) or over_shared:
                    if len(ops) > 2 or any(o in ("is", "is not", "in", "not in") for o in e.ops):
                        raise self.error(e, "compare a tensor with one `<`, `<=`, `>`, `>=`, `==` or `!=`")
                    if any(isinstance(k, RaggedK) for k in kinds):
                        return self.ragged_binop(e, *kinds)
                    return self.op_kind(e, ops, kinds, host_result=True)
                return HOST
            case ir.BoolOp(values=vs):
                for x in vs:
                    self.no_tensor(x, self.expr(x), f"`{e.op}`")
                return HOST
            case ir.IfExp(test=t, body=b, orelse=o):
                self.host_test(t, "conditional expression")  # a tensor test is a value read, as for `if` (§4.2)
                before = dict(self.env)
                kinds = []
                for x, name in zip((b, o), _none_test(t)):
                    self.narrow(name)
                    kinds.append(self.expr(x))
                    self.env = dict(before)
                return self.join_at(e, *kinds)
            case ir.Concurrent(calls=calls):
                return TupleK(tuple(self.expr(c) for c in calls))
            case ir.Call():
                return self.call(e)
        raise self.error(e, f"unsupported expression {type(e).__name__}")

    # -- lists of tensors as operands: ragged tensors (analysis.ragged) ---------
    def no_ragged(self, node: ir.Expr | ir.Stmt, k: Kind, where: str) -> None:
        if contains(k, RaggedK):
            raise self.error(node, f"a stacked list (`torch.stack(xs)`, its length differs per instance) cannot be "
                                   f"{where}: {_RAGGED_HINT}")
        if contains(k, LeadK):
            raise self.error(node, f"a stacked list with a unit axis in front (`torch.stack(xs).unsqueeze(0)`, of "
                                   f"shape (1, T, ...)) cannot be {where}: {_LEAD_HINT}")

    def ragged_call(self, e: ir.Call, recv: Kind | None, args: list[Kind], kws: list[Kind]) -> Kind | None:
        """The kind of a call that stacks, reduces or maps a per-instance list of tensors; None if it does not."""
        kind, what = e.kind, e.target
        is_list = bool(args) and isinstance(args[0], ListK) and not isinstance(e.args[0], (ir.ListExpr, ir.TupleExpr))
        if is_list and args[0].elem is BOTTOM and (kind is CallKind.BUILTIN and what == "sum" or
                                                   kind is CallKind.TORCH and ragged.is_stack(what)):
            return BOTTOM  # what the list holds is not known yet: the fixpoint comes back
        if kind is CallKind.BUILTIN and what == "sum" and args and args[0] is BOTTOM:
            return BOTTOM  # `sum(f(x))`, `sum(list(x))`: not host data before the operand's kind is known
        if kind is CallKind.TORCH and ragged.is_stack(what) and is_list and isinstance(
                args[0].elem, (TensorK, RaggedK)):
            self.dim_zero(e, e.args[1:])
            elem = args[0].elem
            return self.ragged_node(e, "stack", None, RaggedK(elem.depth + 1) if isinstance(elem, RaggedK) else RAGGED)
        if any(isinstance(k, LeadK) for k in ([recv] if recv is not None else []) + args + kws):
            return self.lead_call(e, recv)
        lead = self.lead_form(e, recv if kind is CallKind.METHOD else args[0] if args else None)
        if lead is not None:
            return self.ragged_node(e, lead, None, LEAD)
        for k in ([recv] if recv is not None else []) + args + kws:
            if isinstance(k, RaggedK) and k.depth > 1:
                raise self.error(e, "a stack of stacked lists can be indexed, iterated and returned; to compute "
                                    "with it, loop over it")
        ranking = rankings.ranking_name(e)
        if ranking is not None and isinstance(recv if kind is CallKind.METHOD else args[0] if args else None, RaggedK):
            op = rankings.ranking_form(e, ranking, self.spec.fn, lambda x: not has_tensor(self.expr(x)), self.error)
            return self.ragged_node(e, "topk" if ranking == "topk" else "segment", op,
                                    TupleK((RAGGED, RAGGED)) if op.n_outputs == 2 else RAGGED)
        if kind is CallKind.METHOD and isinstance(recv, RaggedK) and what == "tolist" and not e.args and not e.kwargs:
            return self.ragged_node(e, "tolist", None, HOST)  # host code reads every row's value (§4.2)
        if kind is CallKind.BUILTIN and what == "sum" and args and (
                isinstance(args[0], RaggedK) or is_list and isinstance(
                args[0].elem, TensorK)):
            if len(e.args) != 1 or e.kwargs:
                raise self.error(e, "sum() of a list of tensors takes the list only: add a start value after it")
            return self.ragged_node(e, "segment", ragged.SEGMENT_OPS["sum"], DYNAMIC)
        if self.row_axis(e, recv if kind is CallKind.METHOD else args[0] if args else None):
            return self.ragged_node(e, "rows", None, RAGGED)
        if kind is CallKind.METHOD and isinstance(recv, RaggedK) and what == "size" and len(e.args) == 1 and \
                not e.kwargs and _const(e.args[0]) == 0:
            return self.ragged_node(e, "length", None, HOST)  # the list's length
        if kind is CallKind.METHOD and isinstance(recv, RaggedK) and what in ragged.RESHAPE_METHODS:
            return self.ragged_reshape(e)
        rule = rowops.rule_of(e)
        operand = recv if kind is CallKind.METHOD else args[0] if args else None
        if rule is not None and (isinstance(operand, RaggedK) or (rule.pointwise or rule.einsum or rule.join) and any(
                isinstance(k, RaggedK) for k in [recv, *args, *kws])):
            return self.row_op(e, rule, [k for k in [recv, *args, *kws] if k is not None])
        if kind is CallKind.METHOD and isinstance(recv, RaggedK):
            assert e.receiver is not None
            if what in ragged.SEGMENT_OPS:
                return self.segment(e, self.segment_form(e, ragged.SEGMENT_OPS[what], e.receiver, e.args,
                                                         f".{what}()"))
            if ragged.is_rowwise_method(what) and not e.args and not e.kwargs:
                return self.ragged_node(e, "rows", None, RAGGED)
            if what in ("squeeze", "unsqueeze") and len(e.args) == 1 and not e.kwargs and isinstance(
                    _const(e.args[0]), int) and _const(e.args[0]) < 0:  # a trailing axis: row by row
                return self.ragged_node(e, "rows", None, RAGGED)
            if what == "squeeze" and e.args and _const(e.args[0]) == 0:
                raise self.error(e, "`.squeeze(0)` of a stacked list acts on its list axis, whose length differs per "
                                    f"instance: acrobat does not batch it; {_RAGGED_HINT}")
            raise self.error(e, f"`.{what}()` of a stacked list: {_RAGGED_HINT}")
        if kind in (CallKind.METHOD, CallKind.VALUE) and isinstance(recv, SharedK) and any(
                isinstance(k, RaggedK) for k in args + kws):  # p.lin(S): a module, checked at run time to act row-wise
            return self.ragged_node(e, "rows", None, RAGGED)
        if kind is CallKind.METHOD and what == "repeat" and isinstance(recv, TensorK) and self.repeats_rows(e):
            self.spec.forms[e.nid] = "repeat"  # `t.repeat(len(S), 1)`: len(S) rows `t[0]`
            return self.rows_of(e)
        if kind is CallKind.TORCH and ragged.is_elementwise(what) and len(e.args) == 2 and not e.kwargs and any(
                isinstance(k, RaggedK) for k in args):
            return self.ragged_binop(e, *args)  # `torch.mul(f, S)`: as `f * S`
        if kind is CallKind.TORCH and args and isinstance(args[0], RaggedK):
            op = ragged.segment_function(what)
            if op is not None:
                return self.segment(e, self.segment_form(e, ragged.SEGMENT_OPS[op], e.args[0], e.args[1:], op))
            others = args[1:] + kws
            if ragged.is_rowwise_function(what, only_operand=not others) and not any(
                    contains(k, RaggedK) for k in others) and "dim" not in e.kwargs:
                return self.ragged_node(e, "rows", None, RAGGED)
            raise self.error(e, f"`{getattr(what, '__name__', 'this operator')}` of a stacked list: {_RAGGED_HINT}")
        return None

    def augmented_tensor(self, e: ir.BinOp, a: ir.Expr, ka: Kind, k: Kind) -> None:
        """Check ``a op= b`` of a tensor ``a`` (``k``: the kind of ``a op b``): taken as ``a = a op b`` where the
        variable ``a`` alone holds a fresh per-call value (``acrobat.analysis.inplace.sole_holder``: an
        operator's result, or a factory's such as ``torch.zeros(())``, which plain calls make anew and the static
        tier shares but never changes) and the result is a per-instance tensor; lowering computes it out of place
        with the shape and dtype PyTorch's in-place update keeps (``inplace.inplace_result``). Issue 18 §2.

        Raises:
            CompileError: any other in-place update of a tensor, with the fix ``x = x op y``.
        """
        if k is BOTTOM or isinstance(k, TensorK) and e.op in inplace.OPS and isinstance(a, ir.Name) and (
                isinstance(ka, TensorK) or isinstance(ka, SharedK) and not ka.host) and \
                inplace.sole_holder(self.spec.fn, a.id):
            return
        raise self.error(e, f"`{e.op}=` updates a tensor in place (in PyTorch every tensor sharing its memory "
                            "changes too, a model parameter included): acrobat batches it only where the variable "
                            "alone holds a fresh per-instance result (not a parameter, a view, or a value also "
                            "stored, passed or bound elsewhere: acrobat.analysis.inplace); write "
                            f"`x = x {e.op} y`")

    def unzip(self, s: ir.Assign) -> Kind:
        """The kind of ``zip(*xs)`` in ``a, b = zip(*xs)`` (``s``): a tuple of lists (``unpacking.unzipped``),
        which the generated code computes as Python does, by ``zip``. Issue 18 §2.

        Raises:
            CompileError: ``xs`` is not a list of tuples of as many items as ``s`` has names.
        """
        e = s.value
        assert isinstance(e, ir.Call) and isinstance(e.args[0], ir.Starred) and s.target.items is not None
        k = self.note(e.args[0], self.expr(e.args[0].value))
        if k is BOTTOM or isinstance(k, ListK) and k.elem is BOTTOM:
            return self.note(e, BOTTOM)  # what the list holds is not known yet: the fixpoint comes back
        found = unpacking.unzipped(k, len(s.target.items))
        if isinstance(found, str):
            raise self.error(e, found)
        return self.note(e, found)

    def item_assignment(self, s: ir.ExprStmt) -> ir.Assign | None:
        """``x = item_set(x, idx, v)`` for the item assignment ``x[idx] = v`` (``s``) of a tensor variable ``x``
        that alone holds a fresh value (``inplace.sole_holder``, or ``inplace.written_fresh``: the write right
        after the binding), the same statement (node ids) at each pass (``spec.written``); the specialization's ``fn`` holds
        it once the analysis is done. None for any other item assignment (a list's; a tensor's, which the call
        rules reject). Issue 18 §2.

        Raises:
            CompileError: an index that is not ints and slices (constants or host ints).
        """
        e = s.value
        assert isinstance(e, ir.Call) and isinstance(e.receiver, ir.Name)
        k = self.env.get(e.receiver.id, BOTTOM)
        if not (isinstance(k, TensorK) or isinstance(k, SharedK) and not k.host) or not (
                s.nid in self.spec.written or inplace.written_fresh(self.spec.fn, s) or
                inplace.sole_holder(self.spec.fn, e.receiver.id)):
            return None
        index = e.args[0]
        for x in index.items if isinstance(index, ir.TupleExpr) else [index]:
            parts = ir.children(x) if isinstance(x, ir.Slice) else [x]
            if not all(isinstance(c, ir.Const) and type(c.value) is int or
                       not isinstance(x, ir.Slice) and not isinstance(c, ir.Const) and self.expr(c) is HOST
                       for c in parts):
                raise self.error(x, "an item assignment into a tensor is batched with int and slice indices (an "
                                    "int a constant or a host value, a slice's bounds constants): write "
                                    "`torch.where(mask, v, x)` for other positions")
        return self.spec.written.setdefault(s.nid, inplace.item_assignment(s))

    def lead_form(self, e: ir.Call, operand: Kind | None) -> str | None:
        """How ``e`` puts a unit axis in front of the stacked list ``operand`` (a ``LeadK``): ``"lead"`` for
        ``S.unsqueeze(0)``/``torch.unsqueeze(S, 0)`` (the same rows), ``"lead_view"`` for ``S.view(1, n, *shape)``
        / ``S.reshape(1, n, *shape)`` (``row.view(*shape)`` of every row, once host code has checked that ``n`` is
        the list's length or -1: ``ragged.row_count``); None for any other call."""
        if not (isinstance(operand, RaggedK) and operand.depth == 1):
            return None
        if e.kind is CallKind.METHOD and e.target == "unsqueeze" or e.kind is CallKind.TORCH and \
                e.target is torch.unsqueeze:
            at = 0 if e.kind is CallKind.METHOD else 1
            dim = e.args[at] if len(e.args) > at else e.kwargs.get("dim")
            return "lead" if len(e.args) + len(e.kwargs) == at + 1 and _const(dim) == 0 else None
        if e.kind is CallKind.METHOD and e.target in ragged.RESHAPE_METHODS and len(e.args) >= 3 and \
                _const(e.args[0]) == 1 and type(_const(e.args[0])) is int:
            self.ragged_reshape(e, lead=True)
            return "lead_view"
        return None

    def lead_call(self, e: ir.Call, recv: Kind | None) -> Kind:
        """A call with an operand of a stacked list with a unit axis in front (``LeadK``): ``.squeeze(0)`` gives
        the stacked list (the same rows, ``"unlead"``); a recurrent module's call is ``recurrent_call``'s.

        Raises:
            CompileError: any other call (the fix: ``.squeeze(0)`` first).
        """
        if e.kind is CallKind.METHOD and isinstance(recv, LeadK) and e.target == "squeeze" and \
                len(e.args) + len(e.kwargs) == 1 and _const(e.args[0] if e.args else e.kwargs.get("dim")) == 0:
            return self.ragged_node(e, "unlead", None, RAGGED)
        what = f".{e.target}()" if e.kind is CallKind.METHOD else f"{getattr(e.target, '__name__', e.target)}()"
        raise self.error(e, f"`{what}` of a stacked list with a unit axis in front (`torch.stack(xs).unsqueeze(0)`, "
                            f"of shape (1, T, ...)): {_LEAD_HINT}")

    def lead_subscript(self, e: ir.Subscript, i: ir.Expr) -> Kind:
        """``L[i]`` of a stacked list with a unit axis in front, ``(1, T, ...)``: ``L[0]`` (``L[-1]``) is the
        stacked list (``"unlead"``), ``L[0, i]`` its row ``i`` (a slice: some rows) and ``L[:, i]`` (``L[:, i, :]``)
        that row with its unit axis, ``(1, ...)`` (``"lead_row"``, ``"lead_unit_row"``); ``i`` host data.

        Raises:
            CompileError: any other index.
        """
        items = i.items if isinstance(i, ir.TupleExpr) else [i]
        kinds = [self.expr(x) for x in items]
        full = [isinstance(x, ir.Slice) and not ir.children(x) for x in items]
        unit = [isinstance(x, ir.Const) and type(x.value) is int and x.value in (0, -1) for x in items]
        if all(k is HOST for k in kinds):
            if len(items) == 1 and unit[0]:
                return self.ragged_node(e, "unlead", None, RAGGED)
            if len(items) == 2 and unit[0]:
                return self.ragged_node(e, "lead_row", None, RAGGED if isinstance(items[1], ir.Slice) else DYNAMIC)
            if len(items) in (2, 3) and full[0] and not isinstance(items[1], ir.Slice) and all(full[2:]):
                return self.ragged_node(e, "lead_unit_row", None, DYNAMIC)
        raise self.error(i, f"this index of a stacked list with a unit axis in front (`torch.stack(xs).unsqueeze(0)`, "
                            f"of shape (1, T, ...)): {_LEAD_HINT}")

    def row_axis(self, e: ir.Call, operand: Kind | None) -> bool:
        """Whether ``e`` applies ``squeeze``/``unsqueeze``/``softmax``/``log_softmax`` to the stacked list
        ``operand`` along a constant positive ``dim``: past the list axis, axis ``dim - 1`` of every row, so row by
        row (``acrobat.analysis.ragged.row_axis``)."""
        return isinstance(operand, RaggedK) and operand.depth == 1 and ragged.row_axis(e) is not None

    def ragged_reshape(self, e: ir.Call, lead: bool = False) -> Kind:
        """``S.view(n, *shape)`` (``.reshape``) of a stacked list: ``row.view(*shape)`` of every row, once host code
        has checked that ``n`` is the list's length (``ragged.row_count``; issue 18 §2). ``lead``: the form
        ``S.view(1, n, *shape)``, a unit axis in front (``LeadK``; its caller ``lead_form`` records it).

        Raises:
            CompileError: sizes that are not ints given one by one, or a first size that is a tensor.
        """
        count = e.args[int(lead)] if len(e.args) > int(lead) else None
        sizes = e.args[int(lead):]
        if count is None or e.kwargs or not all(self.host_int(x, i == 0) for i, x in enumerate(sizes)) or \
                isinstance(count, ir.TupleExpr):
            front = "1, " if lead else ""
            raise self.error(e, f"`.{e.target}()` of a stacked list (its length differs per instance) is batched row "
                                f"by row: write `.{e.target}({front}len(xs), ...)` with the list's length first, then "
                                f"the rows' new shape as constant ints or a module's int attributes (`p.heads`); "
                                f"{_RAGGED_HINT}")
        return self.ragged_node(e, "view", None, RAGGED)

    def host_int(self, x: ir.Expr, first: bool) -> bool:
        """Whether ``x`` may be a size of ``S.view(n, ...)``: a constant int, or a module's int attribute
        (``p.heads``: the same in every instance, so the rows of a launch keep one shape); the ``first``, ``n``
        (checked against the list's length by host code), also per-instance host data (``L = x.shape[0]``)."""
        k = self.spec.kinds.get(x.nid, HOST)
        if isinstance(x, ir.Const):
            return type(x.value) is int
        return isinstance(k, SharedK) and k.host or first and not has_tensor(k) and not isinstance(k, SharedK)

    def repeats_rows(self, e: ir.Call) -> bool:
        """Whether ``e`` is ``t.repeat(len(S), 1, ...)`` (sizes after the first all the constant 1) of a stacked list
        ``S``: as many copies of ``t`` along dim 0 as ``S`` has rows, to meet them (the child-sum TreeLSTM's
        ``self.fx(x).repeat(len(child_h), 1)``). For ``t`` of shape ``(1, ...)`` it is the stacked list of
        ``len(S)`` rows ``t[0]`` (``ragged.unit_row`` checks the shape at run time), issue 18 §2."""
        n = e.args[0] if e.args else None
        return not e.kwargs and isinstance(n, ir.Call) and n.kind is CallKind.BUILTIN and n.target == "len" and \
            len(n.args) == 1 and not n.kwargs and self.spec.kinds.get(n.args[0].nid) == RAGGED and all(
                isinstance(x, ir.Const) and type(x.value) is int and x.value == 1 for x in e.args[1:])

    def row_op(self, e: ir.Call, rule: rowops.RowRule, kinds: list[Kind]) -> Kind:
        """A call on a stacked list that ``rowops.ROW_RULES`` applies within its rows (``rule``; ``kinds``: its
        operands', receiver first): a map loop over the rows (``"rows"`` for a pointwise operator, whose dense
        operands broadcast against each row; ``"rowop"`` for the others, their dims the rows'), issue 18 §2.

        Raises:
            CompileError: a dim that is not a constant, or is the list axis; a stacked list where the rule takes a
                dense operand; an operand that is a container of tensors.
        """
        if BOTTOM in kinds:
            return BOTTOM  # an operand is not known yet (a call analysed later): the fixpoint comes back
        what = rowops.describe(e)
        anywhere = rule.pointwise or rule.einsum or rule.join  # stacked lists as any operand, or the first only
        for i, k in enumerate(kinds):
            if rule.join and i > 1 and not isinstance(k, RaggedK):
                raise self.error(e, f"`{what}` of stacked lists along a row axis joins their rows one by one: every "
                                    "item must be a stacked list of the same length, not a " + str(k))
            if isinstance(k, RaggedK) and (k.depth > 1 or i and not anywhere) or \
                    not isinstance(k, (RaggedK, TensorK, SharedK)) and has_tensor(k):
                raise self.error(e, f"`{what}` takes a stacked list (`torch.stack(xs)`, its length differs per "
                                    f"instance) as {'an operand' if anywhere else 'its first operand'} and applies "
                                    "within its rows; its other operands must be tensors of no list axis or host "
                                    "values, not a " + str(k))
        if rule.pointwise:
            return self.ragged_node(e, "rows", None, RAGGED)
        f = rowops.form(e, rule, what, [isinstance(k, RaggedK) for k in kinds])
        if isinstance(f, str):
            raise self.error(e, f"{f}; or loop over the list")
        return self.ragged_node(e, "rowop", None, RAGGED if f.outputs is None else TupleK((RAGGED,) * f.outputs))

    def ragged_binop(self, e: ir.BinOp | ir.Compare | ir.Call, ka: Kind, kb: Kind) -> Kind:
        """``a op b`` (or ``torch.mul(a, b)``, ``ragged.is_elementwise``) with a ragged operand: row by row
        (arithmetic and comparisons), or (``a @ S`` of two) a weighted sum over the list."""
        if BOTTOM in (ka, kb):
            return BOTTOM  # an operand is not known yet (a call analysed later): the fixpoint comes back
        if any(isinstance(k, RaggedK) and k.depth > 1 for k in (ka, kb)):
            raise self.error(e, "a stack of stacked lists can be indexed, iterated and returned; to compute with "
                                "it, loop over it")
        if isinstance(e, ir.BinOp):
            both = isinstance(ka, RaggedK) and isinstance(kb, RaggedK)
            if e.op == "@" and both:
                return self.ragged_node(e, "contract", ragged.SEGMENT_OPS["sum"], DYNAMIC)
            if e.op == "@" and not isinstance(ka, RaggedK):
                raise self.error(e, "`w @ torch.stack(xs)` with a dense `w`: the list axis is contracted only by a "
                                    "1-D stacked weight vector (`alpha @ torch.stack(xs)`); " + _RAGGED_HINT)
            if e.op not in ("+", "-", "*", "/", "//", "%", "**", "@", "&", "|", "^") or e.inplace:
                raise self.error(e, f"`{e.op}` on a stacked list: {_RAGGED_HINT}")
        for k in (ka, kb):
            if not isinstance(k, (RaggedK, TensorK, SharedK, HostK)):
                raise self.error(e, f"a {k} operand of a stacked list: {_RAGGED_HINT}")
        return self.ragged_node(e, "rows", None, RAGGED)

    def segment(self, e: ir.Call, op: SegmentOp) -> Kind:
        kind = RAGGED if op.ragged_out else DYNAMIC
        return self.ragged_node(e, "segment", op, TupleK((DYNAMIC, DYNAMIC)) if op.n_outputs == 2 else kind)

    def ragged_node(self, e: ir.Expr, how: str, op: SegmentOp | None, k: Kind) -> Kind:
        self.spec.ragged[e.nid] = (how, op)
        return k

    def dim_zero(self, e: ir.Call, rest: list[ir.Expr]) -> None:
        """Check that ``torch.stack`` of a per-instance list (``rest``: its arguments after the list) stacks along
        dim 0, the list axis."""
        dim = rest[0] if rest else e.kwargs.get("dim")
        if len(rest) > 1 or any(k != "dim" for k in e.kwargs) or dim is not None and _const(dim) != 0:
            raise self.error(e, "torch.stack of a list whose length differs per instance must work along the list "
                                f"axis: write dim=0 and no other options; {_RAGGED_HINT}")

    def segment_form(self, e: ir.Call, op: SegmentOp, operand: ir.Expr, rest: list[ir.Expr], what: str) -> SegmentOp:
        """``op`` as ``e`` applies it to the stacked list ``operand`` (``rest``: the positional arguments after the
        list): over the list axis, written ``dim=0`` or as a negative dim. A reduction's negative dim must be the
        list axis of rows whose rank the program text fixes (``acrobat.analysis.ranks``: ``dim=-(r+1)`` for
        r-D rows); a normalization's (softmax, log_softmax) is kept and read against the rows' rank at run time
        (the list axis, or an axis of every row: ``acrobat.runtime.segments``). Reductions take ``keepdim``;
        without ``dim``, sum/mean/amax/amin/max/min reduce every element of the list (``torch.stack(losses).mean()``:
        ``flat``, one segment of all the elements of each instance's rows) and argmax/argmin are the 1-D case's
        ``dim=0``. Issue 18 §2, beyond the paper's §3 language.

        Raises:
            CompileError: other options; a dim that is not the list axis, or that is not known to be.
        """
        dim = rest[0] if rest else e.kwargs.get("dim")
        keep = rest[1] if len(rest) > 1 else e.kwargs.get("keepdim")
        keepdim = keep is not None and _const(keep) is True
        d = _const(dim)
        if len(rest) > 2 or any(k not in ("dim", "keepdim") for k in e.kwargs) or keep is not None and (
                not isinstance(_const(keep), bool) or keepdim and op.ragged_out) or dim is None and (
                keepdim or what.strip(".()") not in ragged.FLAT_OK) or dim is not None and (
                type(d) is not int or d > 0):
            raise self.error(e, f"{what} of a list whose length differs per instance must work along the list axis: "
                                "write dim=0 (or the negative dim that is the list axis), with no other options "
                                f"than a reduction's keepdim; {_RAGGED_HINT}")
        if dim is None:  # a full reduction; max()/min() without dim give the values alone, as amax()/amin()
            full = ragged.SEGMENT_OPS[{"max": "amax", "min": "amin"}.get(op.op, op.op)]
            return dataclasses.replace(full, flat=True)
        if d == 0 or op.ragged_out:
            return dataclasses.replace(op, dim=d, keepdim=keepdim)
        r = ranks.row_rank(operand, self.spec.fn)
        if r is None:
            raise self.error(e, f"{what} with dim={d} of a list whose length differs per instance: acrobat batches "
                                "a reduction over the list axis only, and the rank of the list's items is not known "
                                f"here, so dim={d} may be an axis of each item: write dim=0 for the list axis; "
                                f"{_RAGGED_HINT}")
        if d > -(r + 1):
            raise self.error(e, f"{what} with dim={d} of a stacked list of {r}-D items reduces each item, not the "
                                f"list (its list axis is dim=0, or dim={-(r + 1)}): reduce the items before "
                                "stacking them, or loop over the list")
        if d < -(r + 1):
            raise self.error(e, f"{what} with dim={d} of a stacked list of {r}-D items is out of range (its list "
                                f"axis is dim=0, or dim={-(r + 1)})")
        return dataclasses.replace(op, keepdim=keepdim)

    def join_at(self, node: ir.Expr, a: Kind, b: Kind) -> Kind:
        try:
            return join(a, b)
        except KindConflict as exc:
            raise self.error(node, f"mixes host data and tensors ({exc}): keep them in separate lists") from None

    def no_tensor(self, e: ir.Expr, k: Kind, where: str) -> None:
        if has_tensor(k):
            raise self.error(e, f"a tensor is used in {where}: turn it into a host value first, "
                                "e.g. `bool(x)`, `int(torch.argmax(s))` or `x.item()`")

    def subscript(self, e: ir.Subscript, o: ir.Expr, i: ir.Expr) -> Kind:
        if isinstance(o, ir.Attr) and o.attr == "shape" and _const(i) == 0 and isinstance(self.expr(o.obj), RaggedK):
            return self.ragged_node(e, "length", None, HOST)  # `S.shape[0]`: the list's length
        ko, ki = self.expr(o), self.expr(i)
        if isinstance(ko, LeadK):
            return self.lead_subscript(e, i)
        if isinstance(ko, RaggedK) and isinstance(i, ir.Const) and i.value is None and ko.depth == 1:
            return self.ragged_node(e, "lead", None, LEAD)  # `S[None]`: a unit axis in front
        if isinstance(ko, RaggedK) and isinstance(i, ir.TupleExpr) and i.items and ragged.keeps_list_axis(i.items[0]):
            if ko.depth > 1 or not isinstance(ki, TupleK) or any(type(k) not in (HostK, NoneK) for k in ki.items):
                raise self.error(i, "a stacked list is indexed within its rows (`S[:, j]`, `S[..., :k]`) by host ints "
                                    "and slices, one level deep: " + _RAGGED_HINT)
            return self.ragged_node(e, "rows", None, RAGGED)  # `S[:, j]`: `row[j]` of every row
        if isinstance(ko, RaggedK):  # a row, or some rows, of a stacked list: the list's items
            if ki is not HOST:
                raise self.error(i, "index a stacked list (`torch.stack(xs)[i]`) with a host number or slice")
            return ko if isinstance(i, ir.Slice) else ko.rows
        if has_tensor(ki) and isinstance(ko, SharedK) and not ko.host:
            raise self.error(i, f"indexing {ko} with a per-instance tensor: index it with host numbers "
                                "(`W[t]` for each `t`, or an `nn.Embedding` called on `torch.tensor(t)`)")
        if has_tensor(ki) and not has_tensor(ko):
            raise self.error(i, "indexing host data with a tensor: turn the index into a host value first, e.g. `xs[int(i)]`")
        if isinstance(ko, SharedK) and ko.ref[0] == "arg" and isinstance(i, ir.Const):
            return self.shared_path(ko.ref + (("[", i.value),))
        if isinstance(ko, SharedK) and self.facts.get(ko.ref, "").startswith("modules"):
            return self.module_choice(e, ko, ki)
        if isinstance(ko, MapK):
            self.no_tensor(i, ki, "a dict key")
            return ko.value
        if isinstance(ko, DictK):
            if not (isinstance(i, ir.Const) and i.value in ko.keys):
                raise self.error(e, f"index a dict with one of its constant keys {list(ko.keys)}")
            return ko.items[ko.keys.index(i.value)]
        if isinstance(ko, ListK):
            return ko if isinstance(i, ir.Slice) else ko.elem  # xs[1:] is a list
        if isinstance(ko, TupleK):
            if isinstance(i, ir.Slice) and all(x is None or isinstance(_const(x), int) for x in ir.children(i)):
                return TupleK(ko.items[slice(*(None if x is None else x.value for x in (i.lower, i.upper, i.step)))])
            if isinstance(i, ir.Const) and isinstance(i.value, int):
                if not -len(ko.items) <= i.value < len(ko.items):
                    raise self.error(e, f"tuple index {i.value} out of range")
                return ko.items[i.value]
            elem: Kind = BOTTOM
            for k in ko.items:
                elem = self.join_at(e, elem, k)
            return elem
        if isinstance(i, ir.Slice) and self.has_rows(ko) and any(self.spec.kinds.get(x.nid) is HOST and any(
                not isinstance(y, ir.Const) for y in ir.walk(x) if not ir.children(y)) for x in ir.children(i)):
            return self.cut_rows(e)  # a bound is instance data (not constants, not shared host data)
        if isinstance(ko, (TensorK, SharedK)):
            return self.op_kind(e, [o, i], [ko, ki], host_result=True)
        return HOST if ko is not BOTTOM else BOTTOM

    def module_choice(self, e: ir.Subscript, ko: SharedK, ki: Kind) -> Kind:
        """``p.experts[k]``, ``p.mods[node.op]``: a module of the shared container ``ko`` chosen by the per-instance
        host value ``k``. Called (``p.experts[k](x)``), it is a ``ChoiceK``: the call rule ``_module_choice``
        makes it one static call per module (§4.1), which lowering dispatches on ``k``.

        Raises:
            CompileError: not called, chosen by what is not host data, or among more than ``MAX_CHOICES``
                modules: the dynamic tier runs it.
        """
        keys = module_keys(self.resolve(ko.ref)) if self.resolve is not None else None
        if e.nid not in self.called or not (is_host(ki) or ki is BOTTOM) or isinstance(e.index, ir.Slice) or \
                keys is None or len(keys) > MAX_CHOICES:
            raise self.error(e, "a module chosen by a per-instance value (`p.experts[k](x)`, `p.mods[node.op](x)`) "
                                "is analysed statically where it is called at once, chosen by host data among at "
                                f"most {MAX_CHOICES} modules; here it is not: the dynamic tier runs it, one launch "
                                "per module chosen with the rows that chose it")
        return ChoiceK(ko.ref, keys)

    def call(self, e: ir.Call) -> Kind:
        """The kind of a call (§4): a program function's is what its specialization returns (``program_call``);
        any other call goes through the rules of ``acrobat.analysis.rules`` (those of a stacked list first,
        ``ragged_call``), and a call that no rule decides is an operator (``operator``). A call with starred
        arguments is analysed as its expansion (``unpack``)."""
        if unpacking.starred(e):
            found = self.unpack(e)
            if found is None:
                return BOTTOM  # what a starred value holds is not known yet: the fixpoint comes back
            e = found
        if e.kind is CallKind.PROGRAM:
            return self.program_call(e)
        if e.kind is CallKind.VALUE and isinstance(e.receiver, ir.Subscript):
            self.called.add(e.receiver.nid)
        if self.method_call(e):
            return self.program_call(e)
        if rowops.join_call(e, lambda x: isinstance(self.expr(x), RaggedK)):
            self.changed = True  # `torch.cat([S, T], dim=1)`: joined row by row (acrobat.analysis.rowops)
        site = rules.Site(e, self.expr(e.receiver) if e.receiver is not None else None,
                          [self.expr(a) for a in e.args], [self.expr(v) for v in e.kwargs.values()])
        found = recurrent.call_kind(self, site)
        if found is None:
            found = self.ragged_call(e, site.recv, site.args, site.kws)
        if found is None:
            found = self.tensor_rows(e)
        if found is None:
            found = self.sized_rows(e)
        if found is not None:
            return found
        for rule in rules.rules_for(site):
            found = rule(self, site)
            if found is not None:
                return found
        return self.operator(site)

    def method_call(self, e: ir.Call) -> bool:
        """Make ``e`` a program call when it calls an ``@acrobat.function`` method of a shared module:
        ``self.forward(child)``, ``self.compose(l, r)``, ``model(tree)`` (its ``forward``, when neither the
        module's class nor hooks change what calling it does). The method is then analysed like a module-level
        function taking the module first (§4: recursion, control flow and host data in it are the program's,
        not one opaque operator of a block). Needs the run's shared arguments (``resolve``) to know the class;
        the class becomes a fact of the compile, so a run with a module of another class compiles again.
        A submodule called by its attribute (``self.tree_lstm(tree, xs)``, ``submodule``) is the call of its
        ``forward``. Only calls with positional arguments (and the method's constant defaults) are made so."""
        if e.kind not in (CallKind.METHOD, CallKind.VALUE) or e.receiver is None or e.kwargs or self.parse is None:
            return False
        recv = self.expr(e.receiver)
        name = str(e.target) if e.kind is CallKind.METHOD else "forward"
        receiver, called = e.receiver, e.kind is CallKind.VALUE
        sub = not called and self.submodule(recv, name)
        if sub:  # `self.tree_lstm(tree, xs)`: the submodule is called (its kind without a node: see below)
            recv, name, called = self.shared_path(recv.ref + ((".", name),)), "forward", True  # type: ignore[union-attr]
        fn = self.module_method(recv, name, called)
        implicit = fn is not None and fn is self.implicit_of(fn.fn)
        if fn is None or implicit and not any(type(k) is HostK or isinstance(k, RaggedK) for k in map(
                self.expr, e.args)) and not self.returns_tuple(fn):
            return False  # an undecorated method given only tensors and shared values, returning no tuple: one operator
        if sub:  # made only now: a node made at every visit of a call left as it is would never reach a fixpoint
            receiver = ir.Attr(e.receiver.loc, e.receiver, str(e.target))
        params = list(inspect.signature(fn.fn).parameters.values())
        given = 1 + len(e.args)
        rest = params[given:]
        if given > len(params) or any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) \
                or any(p.default is p.empty or not isinstance(p.default, (int, float, str, bool, type(None)))
                       for p in rest):
            return False
        if not self.adopt(fn, quiet=implicit):
            return False
        e.kind, e.target, e.receiver = CallKind.PROGRAM, fn, None
        e.args = [receiver, *e.args, *(ir.Const(e.loc, p.default) for p in rest)]
        self.method_sites[e.nid] = (name, called)
        return True

    def adopt(self, fn: Any, quiet: bool = False) -> bool:
        """Parse the program function ``fn`` (found during the analysis) and the functions it calls, once; False
        when the parser rejects it and ``quiet`` (an undecorated method, ``implicit_of``: then it is called as
        before, one operator).

        Raises:
            CompileError: the parser rejects ``fn`` or a function it calls, and not ``quiet``.
        """
        if fn in self.functions:
            return True
        try:
            found = self.parse(fn)  # type: ignore[misc]
        except CompileError:
            if quiet:
                return False
            raise
        self.functions.update({f: fn_ir for f, fn_ir in found.items() if f not in self.functions})  # kept as rewritten
        for attr in (a for f in found.values() for a in _stored_attrs(f)):
            self.fields.setdefault(attr, BOTTOM)  # a field its methods store (read as host data until now: a
            # read analysed before is then a conflict, a CompileError, never a host read of a tensor)
        return True

    def returns_tuple(self, fn: Any) -> bool:
        """Whether the program function ``fn`` (parsed here, ``adopt``; False where the parser rejects it) returns
        a tuple display (``return c, h``) anywhere: an undecorated method that does is analysed as a program
        function (``method_call``), so its result keeps its tuple kind (``a, b = zip(*[m.f(x) ...])``), where one
        operator's result would be one tensor. Issue 18 §2."""
        return self.adopt(fn, quiet=True) and any(
            isinstance(s, ir.Return) and isinstance(s.value, ir.TupleExpr)
            for s in ir.walk_stmts(self.functions[fn].body))

    def implicit_of(self, fn: Any) -> Any:
        """The program function made of ``fn`` when it is the model's own undecorated function
        (``rules.model_code``), else None (issue 18: a user decorates the entry, not every helper)."""
        if self.implicit is None or self.parse is None or not rules.model_code(fn):
            return None
        return self.implicit(fn)

    def helper_call(self, e: ir.Call) -> bool:
        """Make ``e``, a call of the model's own undecorated function given tensors or shared values, a program
        call, as if the function were an ``@acrobat.function`` (§4: analysed, not one opaque operator). False
        when it is no such function.

        Raises:
            CompileError: the parser rejects the function (its own file:line and fix), or the call's keywords
                do not fit its parameters (Python raises TypeError).
        """
        fn = self.implicit_of(e.target)
        if fn is None:
            return False
        self.adopt(fn)
        e.args, e.kwargs = bind_arguments(fn, e.args, e.kwargs, e.loc), {}
        e.kind, e.target = CallKind.PROGRAM, fn
        return True

    def submodule(self, recv: Kind, attr: str) -> bool:
        """Whether ``attr`` of the shared module the path ``recv`` names in this run is a submodule whose ``forward`` is an
        ``@acrobat.function`` or the model's own undecorated code (``implicit_of``; then ``recv.attr(...)``
        calls it, and ``method_call`` analyses its ``forward``)."""
        if not isinstance(recv, SharedK) or recv.host or recv.ref[0] != "arg" or self.resolve is None:
            return False
        module = self.resolve(recv.ref)
        sub = getattr(module, attr, None) if isinstance(module, torch.nn.Module) else None
        return isinstance(sub, torch.nn.Module) and ("forward" in program_methods(type(sub)) or self.implicit_of(
            inspect.getattr_static(type(sub), "forward", None)) is not None)

    def module_method(self, recv: Kind, name: str, called: bool) -> Any:
        """The ``@acrobat.function`` named ``name`` of the class of the shared module ``recv`` names in this
        run (or the program function made of an undecorated method of the model's own class, ``implicit_of``),
        or None (not a module, not known here, no such method; ``called``: the module itself is called, which
        runs ``forward`` only through ``nn.Module.__call__`` without hooks)."""
        if not isinstance(recv, SharedK) or recv.host or self.resolve is None:
            return None
        module = self.resolve(recv.ref)
        if not isinstance(module, torch.nn.Module):
            return None
        if called and (type(module).__call__ is not torch.nn.Module.__call__ or forward_hooks(module)):
            return None
        if name in program_methods(type(module)):
            fn = inspect.getattr_static(type(module), name)
        else:
            fn = self.implicit_of(inspect.getattr_static(type(module), name, None))
            if fn is None:
                return None
        self.facts[recv.ref] = shared_fact(module)
        return fn

    def data_read(self, e: ir.Attr) -> bool:
        """Whether ``x.data`` (``e``) of a per-instance tensor is ``x.detach()`` here, and if so records the rewrite
        (``Spec.detached``). Both give the same values, no gradient, and share ``x``'s storage; they differ only
        where the storage is then written in place (autograd checks such a write to a detached tensor, not to
        ``.data``): so only in a function that writes no tensor in place (no item assignment ``x[i] = v``, no
        augmented assignment ``x += v``). ``.data`` under vmap, in a static block, is an error; ``.detach()`` is
        not (nmt_attention's ``decoded.data.tolist()``)."""
        writes = any(isinstance(c, ir.Call) and c.kind is CallKind.METHOD and c.target == "__setitem__" or
                     isinstance(c, ir.BinOp) and c.inplace
                     for s in ir.walk_stmts(self.spec.fn.body) for root in ir.stmt_exprs(s) for c in ir.walk(root))
        if writes:
            return False
        if e.nid not in self.spec.detached:
            self.spec.detached[e.nid] = ir.Call(e.loc, CallKind.METHOD, "detach", [], {}, receiver=e.obj)
            self.spec.detached[e.nid].nid = e.nid
        return True

    def instance_arity(self, s: ir.Starred) -> int | None:
        """How many items ``*pair`` unpacks where ``pair`` is the entry's instance, never rebound, and every
        instance of the run's batch is a tuple (or list) of one length (``INSTANCE_ARITY``, a fact of the run:
        ``treelstm.pytorch``'s ``model(*pair)``); None otherwise (no batch known, lengths that differ)."""
        name = self.instance_name()
        if s.double or not isinstance(s.value, ir.Name) or s.value.id != name or self.resolve is None or any(
                name in ir.assigned_names(st) for st in self.spec.fn.body):
            return None
        found = self.batch_fact(INSTANCE_ARITY)
        return int(found.split()[1]) if found.startswith("tuple ") else None

    def ragged_instances(self) -> bool:
        """Whether the tensors of the run's instances differ in shape (``INSTANCE_SHAPES``): then an embedding of
        an int tensor of the instance is the stacked list of its rows (``recurrent.call_kind``), where a tensor
        of one shape for the whole batch could not hold it."""
        return self.batch_fact(INSTANCE_SHAPES) == "ragged"

    def instance_item_list(self, x: ir.Expr) -> bool:
        """Whether ``x`` is an item of the entry's instance (``tree, tokens = example``) that is a list in every
        instance of the run's batch (``INSTANCE_LISTS``, a fact of the run: another batch compiles again)."""
        at = token_lists.instance_item(self.spec.fn, x, self.instance_name())
        return at is not None and str(at) in self.batch_fact(INSTANCE_LISTS).split()[1:]

    def batch_fact(self, ref: tuple) -> str:
        """The fact ``ref`` of the run's batch (``batch_fact``), kept in ``facts`` so the compile is reused only
        by batches with the same; ``"missing"`` without the run's arguments (``source``)."""
        found = UNRESOLVED if self.resolve is None else self.resolve(ref)
        if found is not UNRESOLVED:
            self.facts[ref] = found
        return "missing" if found is UNRESOLVED else found

    def unpack(self, e: ir.Call) -> ir.Call | None:
        """``e`` with its starred arguments expanded (``acrobat.analysis.unpacking``), the same expansion (node
        ids) each time this specialization is analysed; None while the kind of a value it unpacks is not known.

        Raises:
            CompileError: a value the static tier cannot unpack (a list, a tensor).
        """
        shapes: dict[int, unpacking.Shape] = {}
        for s in unpacking.starred(e):
            k = self.expr(s.value)
            if k is BOTTOM:
                return None
            helper = self.implicit_of(e.target) if e.kind is CallKind.HOST and isinstance(k, ListK) else None
            if helper is not None:  # `_combine(*hs)`, the model's own helper given a list
                if k.elem is BOTTOM:  # type: ignore[union-attr]
                    return None  # whether the list holds tensors is not known yet: the fixpoint comes back
                if has_tensor(k):  # analysed, as a program function
                    self.adopt(helper)
                    e.kind, e.target = CallKind.PROGRAM, helper
            found = self.instance_arity(s) if k == HOST else None
            found = unpacking.shape(e, s, k) if found is None else found
            callee = self.functions[e.target] if found == unpacking.WHOLE else None
            if callee is not None and not unpacking.read_only(callee, callee.params[-1]):
                raise self.error(s, f"`*` passes a list, whose length may differ per instance, as the `*` "
                                    f"parameter of `{callee.name}`, which uses it other than by "
                                    "reading it (iterating, `len`, `sum`, indexing, `torch.stack`): Python gives "
                                    "it a tuple; take the list as one parameter (`def f(hs)`, `f(xs)`)")
            if isinstance(found, str):
                raise self.error(s, found)
            shapes[s.nid] = found
        known = self.spec.unpacked.get(e.nid)
        if known is None or known[0] != shapes:
            known = self.spec.unpacked[e.nid] = (shapes, unpacking.expanded(e, shapes))
        return known[1]

    def program_call(self, e: ir.Call) -> Kind:
        """A call of a program function: the return kind of its specialization on the kinds of the arguments
        (context sensitivity, App. B.1), analysed on request."""
        what = e.target
        arg_kinds = tuple(self.expr(a) for a in e.args)
        site = self.method_sites.get(e.nid)
        if site is not None and self.module_method(arg_kinds[0], *site) is not what:
            raise self.error(e, f"this call runs `.{site[0]}()` of modules of different classes (the function is "
                                "called with different modules): acrobat analyses one method per call site")
        fn = self.functions[what]
        if what in self.threads:
            arg_kinds = self.pass_run_list(e, what, fn, arg_kinds)
        if len(arg_kinds) != len(fn.params):
            captured = len(getattr(what, "captured", ()))  # a nested def's captures: not the user's arguments
            raise self.error(e, f"`{what.__name__}` takes {len(fn.params) - captured} arguments, "
                                f"{len(arg_kinds) - captured} given")
        if BOTTOM in arg_kinds:
            return BOTTOM  # an argument's kind is not known yet; the fixpoint comes back
        flags = self.tensor_params.setdefault(what, [False] * len(arg_kinds))
        for i, k in enumerate(arg_kinds):
            if has_tensor(k) and not flags[i]:
                flags[i] = True
                self.changed = True
        key: SpecKey = (what, tuple(_key_kind(k, f) for k, f in zip(arg_kinds, flags)))
        if self.spec.calls.get(e.nid) != key:
            self.spec.calls[e.nid] = key
            self.changed = True
        callee = self.request(key)
        if fn.region is not None:
            return self.region_call(e, callee, arg_kinds)
        self.link_list_args(e, callee, arg_kinds)
        if contains(callee.ret, HostOrK) and e.nid != self.returned:
            raise self.error(e, f"`{fn.name}` returns host data on one path and a tensor on another "
                                f"({callee.ret}): its result can only be returned as it is (`return {fn.name}(...)`)")
        return callee.ret

    def run_list_read(self, e: ir.Attr, obj: ir.Expr) -> CompileError:
        """The error for ``e``, a read of the list a shared module holds for the run (``run_lists``) that this
        function does not read as its variable yet: marked for ``analyze_kinds`` to thread the variable through
        the function (``run_lists.threaded``) where the module is a parameter of it, else a plain error."""
        rl, fn = self.run_list, self.spec.key[0]
        assert rl is not None
        if isinstance(obj, ir.Name) and obj.id in self.spec.fn.params and fn not in self.threads \
                and not any(obj.id in ir.assigned_names(s) for s in self.spec.fn.body):
            err = self.error(e, f"`{obj.id}.{rl.attr}` is read before the function takes the run's list")
            err.run_list = (fn, obj.id)  # type: ignore[attr-defined]
            return err
        module = self.entry_params[rl.arg]
        return self.error(e, f"`.{rl.attr}` of `{module}`, the list the entry sets up for the run "
                             f"(`{module}.{rl.attr} = []`), is read here through something other than a parameter "
                             "of the function holding the module, which acrobat does not follow: pass the module "
                             "as a parameter")

    def pass_run_list(self, e: ir.Call, what: Any, fn: ir.Function, arg_kinds: tuple[Kind, ...]) -> tuple[Kind, ...]:
        """The argument kinds of ``e``, a call of a function taking the run's list (``threads``), with the list
        passed: the caller's variable of it, put in ``e`` once (the caller is the entry or takes the list too;
        else it is marked for ``analyze_kinds`` to thread the list through it).

        Raises:
            CompileError: the call passes another module than the one holding the run's list.
        """
        rl, caller = self.run_list, self.spec.key[0]
        assert rl is not None
        if len(e.args) == len(fn.params) - 1:
            if caller not in self.threads and caller is not self.instance[0][0]:  # type: ignore[index]
                err = self.error(e, f"`{fn.name}` takes the run's list, which its caller does not hold yet")
                err.run_list = (caller, None)  # type: ignore[attr-defined]
                raise err
            e.args.append(ir.Name(e.loc, rl.var))
            arg_kinds = (*arg_kinds, self.expr(e.args[-1]))
        at = self.threads[what]
        if at is not None and arg_kinds[at] is not BOTTOM and arg_kinds[at] != SharedK(("arg", rl.arg)):
            module = self.entry_params[rl.arg]
            raise self.error(e, f"`{fn.name}` reads `.{rl.attr}` of its parameter `{fn.params[at]}`, the list "
                                f"`{module}` holds for the run (`{module}.{rl.attr} = []` in the entry), and this "
                                f"call passes it {arg_kinds[at]}: acrobat keeps one such list per run; pass "
                                f"`{module}` there, or keep the other list in a variable")
        return arg_kinds

    def region_call(self, e: ir.Call, callee: Spec, arg_kinds: tuple[Kind, ...]) -> Kind:
        """A call of a dynamic region (``acrobat.analysis.regions``): its specialization returns the region's
        kind (its body is not analysed: the user's own Python runs it). Given stacked lists, it is a padded
        function's call (``acrobat.analysis.padded``), of the kind its source shows.

        Raises:
            CompileError: an argument of a kind that cannot cross into a region (a stacked list, a module chosen
                per instance); the caller's error, so the whole program runs in the dynamic tier.
        """
        region = callee.fn.region
        if padded.roles(arg_kinds) is not None and region.tree is not None:  # a padded function's call
            kind, _ = padded.region_result(region, arg_kinds)
            if callee.ret != kind:
                callee.ret = kind
                self.changed = True
            return kind
        if region.padded_only:
            raise self.error(e, f"`{region.name}` is rejected by the static tier and runs as a padded function only "
                                f"when given stacked lists: {region.describe()}")
        for a, k in zip(e.args, arg_kinds):
            if not regions.crosses(k):
                raise self.error(a, f"`{region.name}` runs as a dynamic region (the static tier rejects it: "
                                    f"{region.describe()}) and cannot be given a {k}")
        if callee.ret != region.kind:
            callee.ret = region.kind
            self.changed = True
        return callee.ret

    def operator(self, s: rules.Site) -> Kind:
        """The call rules' fallback: an operator (a torch function, a method of a tensor, module or host value,
        a called module) applied to its receiver and arguments (``op_kind``)."""
        e = s.e
        if e.kind in (CallKind.METHOD, CallKind.VALUE) and s.recv is not None:
            host = not (has_tensor(s.recv) or has_shared(s.recv))
            if host and any(has_tensor(k) for k in s.kinds):
                raise self.error(e, "a tensor is passed to a host method: only torch operators and "
                                    "@acrobat.function functions take tensors")
            k = self.op_kind(e, [e.receiver, *s.operands], [s.recv, *s.kinds], host_result=host,
                             host_receiver=host, random=not host and is_random(e))
            return self.tuple_result(e, s.recv, k)
        return self.tuple_result(e, None, self.op_kind(e, s.operands, s.kinds, host_result=False,
                                                       random=is_random(e)))

    def tuple_result(self, e: ir.Call, recv: Kind | None, k: Kind) -> Kind:
        """The kind of an operator whose result is a tuple of tensors of a size known here: ``k`` for each of
        them (``torch.chunk(x, 3)``, ``p.lstm(x, (h, c))`` of an ``nn.LSTMCell``), else ``k``. Block outputs
        are single tensors, so such a tuple crosses block boundaries as its items (``acrobat.analysis.blocks``)."""
        if not isinstance(k, TensorK):
            return k
        if isinstance(recv, SharedK) and recv.ref[0] == "arg" and e.kind in (CallKind.VALUE, CallKind.METHOD):
            module = recv.ref if e.kind is CallKind.VALUE else recv.ref + ((".", e.target),)  # `p.cell(x)`
            self.shared_path(module)
            if self.facts.get(module) == "pair":
                return TupleK((k, k))
        chunks = e.args[1] if e.kind is CallKind.TORCH and len(e.args) == 2 else \
            e.args[0] if e.kind is CallKind.METHOD and len(e.args) == 1 else None
        if e.target in ("chunk", torch.chunk) and not e.kwargs and isinstance(chunks, ir.Const) and \
                isinstance(chunks.value, int) and 0 < chunks.value <= 16:
            return TupleK((k,) * chunks.value)
        if _values_indices(e):
            return TupleK((k, k))  # torch.return_types: (values, indices), `.values`/`.indices` or unpacked
        return k

_PAIRS = {"topk", "sort", "kthvalue", "mode"}
"""Operators whose result is always a (values, indices) pair."""
_PAIRS_WITH_DIM = {"max", "min", "median", "nanmedian", "cummax", "cummin"}
"""Operators whose result is a (values, indices) pair when given a ``dim``."""


def _values_indices(e: ir.Call) -> bool:
    """Whether the tensor call ``e`` returns a ``torch.return_types`` (values, indices) pair
    (``x.topk(2)``, ``torch.max(x, dim=0)``, ``x.max(0)``; not ``torch.max(x)`` nor ``torch.max(x, y)``)."""
    name = e.target if isinstance(e.target, str) else getattr(e.target, "__name__", None)
    if e.kind not in (CallKind.TORCH, CallKind.METHOD) or name not in _PAIRS | _PAIRS_WITH_DIM:
        return False
    if name in _PAIRS:
        return True
    if "dim" in e.kwargs:
        return True
    dim = e.args[1] if e.kind is CallKind.TORCH and len(e.args) >= 2 else \
        e.args[0] if e.kind is CallKind.METHOD and e.args else None
    return isinstance(dim, ir.Const) and isinstance(dim.value, int) and not isinstance(dim.value, bool)


def _shape_reads(e: ir.Expr) -> list[ir.Expr]:
    """The expressions whose shape ``e`` reads (``x.shape``, ``x.size(0)``, ``x.ndim``, ``len(x)``)."""
    out = []
    for x in ir.walk(e):
        if isinstance(x, ir.Attr) and x.attr in rules.SHAPE_ATTRS:
            out.append(x.obj)
        elif isinstance(x, ir.Call) and x.kind is CallKind.METHOD and x.target in rules.SHAPE_METHODS and x.receiver:
            out.append(x.receiver)
        elif isinstance(x, ir.Call) and x.kind is CallKind.BUILTIN and x.target == "len" and len(x.args) == 1:
            out.append(x.args[0])
    return out


def _path_of(e: ir.Expr) -> ListPath | None:
    """The variable path of ``e`` when it names a list by variable (``xs``, ``rows[i]``), else None."""
    if isinstance(e, ir.Name):
        return (e.id, 0)
    if isinstance(e, ir.Subscript) and not isinstance(e.index, ir.Slice):
        inner = _path_of(e.obj)
        return None if inner is None else (inner[0], inner[1] + 1)
    return None


def _container(k: Kind) -> str:
    """How messages name a container of kind ``k``."""
    return "dict" if isinstance(k, MapK) else "list"


def _fresh(e: ir.Expr) -> bool:
    """True when ``e`` makes a new list (or map) no variable holds (a display, ``a + b``, ``list(...)``, a slice,
    ``{}``)."""
    return isinstance(e, (ir.ListExpr, ir.BinOp, ir.DictExpr)) and not getattr(e, "inplace", False) or (
        isinstance(e, ir.Call) and e.kind is ir.CallKind.HOST and e.target is dict and not e.args) or (
        isinstance(e, ir.Subscript) and isinstance(e.index, ir.Slice)) or (
        isinstance(e, ir.Call) and e.kind is ir.CallKind.BUILTIN and e.target in ("list", "reversed"))


def _kind_at(k: Kind, steps: int) -> Kind:
    """The kind ``steps`` element steps into ``k`` (a list's element, a map's value; BOTTOM past anything else)."""
    for _ in range(steps):
        k = k.elem if isinstance(k, ListK) else k.value if isinstance(k, MapK) else BOTTOM
    return k


def _put_at(k: Kind, steps: int, new: Kind) -> Kind:
    """``k`` with the kind ``steps`` element steps in replaced by ``new`` (unchanged where ``k`` is no list)."""
    if steps == 0:
        return new
    if isinstance(k, MapK):
        return MapK(_put_at(k.value, steps - 1, new))
    if isinstance(k, ListK) or k is BOTTOM:
        return ListK(_put_at(k.elem if isinstance(k, ListK) else BOTTOM, steps - 1, new))
    return k


def _key_kind(k: Kind, tensor_somewhere: bool) -> Kind:
    """The kind a parameter is specialized on.

    Tensors count as recursion-dependent (one copy, not one per static
    depth), and a parameter that some call site passes a per-instance
    tensor takes per-instance tensors everywhere (shared values are lifted
    at the other sites): specializing those would split one operator's
    nodes over copies that cannot batch together. Parameters only ever
    given shared values (weights) keep their identity: code duplication
    for parameter reuse (App. B.1).
    """
    if isinstance(k, TensorK) or isinstance(k, SharedK) and tensor_somewhere:
        return DYNAMIC
    if isinstance(k, ListK):
        return ListK(_key_kind(k.elem, tensor_somewhere))
    if isinstance(k, MapK):
        return MapK(_key_kind(k.value, tensor_somewhere))
    if isinstance(k, TupleK):
        return TupleK(tuple(_key_kind(i, tensor_somewhere) for i in k.items), k.fields)
    if isinstance(k, DictK):
        return DictK(k.keys, tuple(_key_kind(i, tensor_somewhere) for i in k.items))
    if isinstance(k, OptionalK):
        return OptionalK(_key_kind(k.inner, tensor_somewhere))
    return k


#: What to write instead of a tensor attribute that is not a shape or an operator (``_ATTR_FIX`` for the rest).
_ATTR_FIXES = {
    "data": "`.data` is read as `x.detach()` only in a function that writes no tensor in place (`x[i] = v`, "
            "`x += v`), as it shares `x`'s storage; write `x.detach().clone()` for a copy the writes leave alone",
    "grad": "gradients exist once the batched run's results are backpropagated: read `.grad` of the "
            "parameters after `loss.backward()`, outside the model",
}
_ATTR_FIX = ("read shapes with `.shape`/`.size()`/`.ndim`/`len()`, transpose with `.T`, or compute other tensor "
             "properties with torch operators")
_LEAD_HINT = ("acrobat batches it as the input of a batch_first nn.LSTM/nn.GRU/nn.RNN, returned, or read back by "
              "`.squeeze(0)` or `[0]` (the stacked list), `[0, i]` (a row) and `[:, i]` / `[:, i, :]` (a row with its "
              "unit axis); take `.squeeze(0)` first for anything else")
_RAGGED_HINT = ("acrobat batches it by reducing it over the list axis with dim=0 (sum, mean, max, min, amax, amin, "
                "logsumexp, softmax, log_softmax; or sum(xs)) or over all of it without dim (sum, mean, max, min, "
                "amax, amin), by ranking it over the list axis (sort, argsort, "
                "topk with a host k), by `alpha @ torch.stack(xs)` with a stacked 1-D `alpha`, by reading it with "
                "`.tolist()`, by applying pointwise operators, `@ w`, F.linear and arithmetic with smaller "
                "operands row by row, and by operators along the rows' axes (a dim >= 1 or a negative dim of the "
                "rows: chunk, transpose, permute(0, ...), flatten(1), layer_norm, normalize, view(len(xs), ...); "
                "acrobat.analysis.rowops); for anything else, loop over the list")


def _records(fn: ir.Function) -> frozenset[int]:
    """The node ids of the empty dict displays of ``fn`` that are records, not maps (``MapK``): ``d = {}`` where
    every item store ``d[k] = v`` of ``fn`` has a constant string key (``parts["g"] = ...``, a record written field
    by field, whose values may differ in kind per key, as a dict display's do: the static tier takes records as
    one display). A dict that ``fn`` stores into with another key, or never stores into (a callee fills it:
    ``dag_enc(root, p, cache)``), is a map."""
    stores: dict[str, list[ir.Expr]] = {}
    for st in ir.walk_stmts(fn.body):
        for root in ir.stmt_exprs(st):
            for c in ir.walk(root):
                if isinstance(c, ir.Call) and c.kind is CallKind.METHOD and c.target == "__setitem__" and \
                        isinstance(c.receiver, ir.Name) and c.args:
                    stores.setdefault(c.receiver.id, []).append(c.args[0])
    return frozenset(st.value.nid for st in ir.walk_stmts(fn.body)
                      if isinstance(st, ir.Assign) and st.target.name is not None and
                      isinstance(st.value, ir.DictExpr) and not st.value.keys and stores.get(st.target.name) and
                      all(isinstance(k, ir.Const) and isinstance(k.value, str) for k in stores[st.target.name]))


def _stored_attrs(fn: ir.Function) -> set[str]:
    """The attribute names ``fn`` stores (``obj.attr = v``, parsed as ``setattr(obj, "attr", v)``)."""
    return {c.args[1].value for s in ir.walk_stmts(fn.body) for root in ir.stmt_exprs(s) for c in ir.walk(root)
            if isinstance(c, ir.Call) and c.kind is CallKind.BUILTIN and c.target == "setattr" and len(c.args) == 3
            and isinstance(c.args[1], ir.Const) and isinstance(c.args[1].value, str)}


def _host_lists(k: Kind) -> bool:
    """Whether every list in ``k`` holds host data only (a list of numbers may be stored on an object)."""
    if isinstance(k, (ListK, MapK)):
        return type(_items(k)[0]) is HostK
    return all(_host_lists(i) for i in _items(k))


def _const(x: ir.Expr | None) -> Any:
    """The value of a constant expression, else a sentinel that equals nothing."""
    return x.value if isinstance(x, ir.Const) else object()


def _none_test(t: ir.Expr) -> tuple[set[str], set[str]]:
    """The names a test proves not None where it holds, and where it fails (``x is None``, ``x is not None``,
    and ``and``/``or``/``not`` of such tests)."""
    if isinstance(t, ir.Compare) and len(t.ops) == 1 and t.ops[0] in ("is", "is not"):
        a, b = t.operands
        if isinstance(b, ir.Const) and b.value is None and isinstance(a, ir.Name):
            return (set(), {a.id}) if t.ops[0] == "is" else ({a.id}, set())
    if isinstance(t, ir.UnaryOp) and t.op == "not":
        holds, fails = _none_test(t.operand)
        return fails, holds
    if isinstance(t, ir.BoolOp):
        parts = [_none_test(v) for v in t.values]
        if t.op == "and":  # all hold where it holds
            return set().union(*(h for h, _ in parts)), set()
        return set(), set().union(*(f for _, f in parts))  # or: all fail where it fails
    return set(), set()


def _stored(k: Kind, var: Kind) -> Kind:
    """The kind of a variable's value as the skeleton holds it: ``k`` (what flows here) with every shared value
    lifted where the variable's joined kind ``var`` is per-instance, at any nesting (a dict item, a tuple item,
    an optional). An assignment stores the value coerced to ``var`` (``codegen.visitor.coercion``), so a use must
    see that representation, not the shared value assigned: a handle read as a shared value is a wrong answer."""
    match k, var:
        case SharedK(), TensorK():
            return TensorK(LIFTED_DEPTH)  # stored lifted: the variable is per-instance elsewhere
        case SharedK(ref=ref, host=host), TupleK(items=vitems):  # a shared tuple stored item by item
            return TupleK(tuple(_stored(SharedK(ref + (("[", i),), host), v) for i, v in enumerate(vitems)))
        case OptionalK(inner=inner), OptionalK(inner=vinner):
            return OptionalK(_stored(inner, vinner))
        case OptionalK(inner=inner), _:
            return OptionalK(_stored(inner, var))
        case NoneK(), _:
            return k
        case _, OptionalK(inner=vinner):
            return _stored(k, vinner)
        case TupleK(items=items), TupleK(items=vitems) if len(items) == len(vitems):
            return TupleK(tuple(_stored(i, v) for i, v in zip(items, vitems)), k.fields or var.fields)
        case DictK(keys=keys, items=items), DictK(keys=vkeys, items=vitems) if keys == vkeys:
            return DictK(keys, tuple(_stored(i, v) for i, v in zip(items, vitems)))
    return k


def _lifted(k: Kind) -> Kind:
    """``k`` with every shared value in it per-instance (what ``_rt.lift`` makes of it)."""
    match k:
        case SharedK(host=True):
            return HOST
        case SharedK():
            return TensorK(LIFTED_DEPTH)
        case ListK(elem=elem):
            return ListK(_lifted(elem))
        case MapK(value=value):
            return MapK(_lifted(value))
        case TupleK(items=items, fields=names):
            return TupleK(tuple(_lifted(i) for i in items), names)
        case DictK(keys=keys, items=items):
            return DictK(keys, tuple(_lifted(i) for i in items))
        case OptionalK(inner=inner):
            return OptionalK(_lifted(inner))
    return k


def _shared_operand(x: ir.Expr | None, k: Kind) -> bool:
    """An operand the once-per-run prologue can compute: a shared value, or a literal tuple/list of them (a
    variable holding a list of shared values is the instance's own list, which the prologue cannot see)."""
    if isinstance(x, ir.Call) and x.kind is CallKind.PROGRAM:
        return False  # a call's result, even a shared one: the prologue runs no program function
    if isinstance(k, SharedK):
        return True
    if isinstance(x, (ir.TupleExpr, ir.ListExpr)) and isinstance(k, (TupleK, ListK)):
        items = k.items if isinstance(k, TupleK) else [k.elem] * len(x.items)
        return all(_shared_operand(i, ik) or _is_const(i) for i, ik in zip(x.items, items))
    return False


def _is_const(x: ir.Expr | None) -> bool:
    if x is None or isinstance(x, ir.Const):
        return True
    if isinstance(x, (ir.TupleExpr, ir.ListExpr)):
        return all(_is_const(i) for i in x.items)
    return False


def analyze_kinds(functions: dict[Any, ir.Function], entry: Any, n_shared: int, instance: int = 0,
                  resolve: Resolver | None = None,
                  parse: Callable[[Any], Mapping[Any, ir.Function]] | None = None,
                  implicit: Callable[[Callable], Any] | None = None) -> KindTable:
    """Run the kind analysis to a fixpoint from the entry function.

    The entry's parameter at position ``instance`` (the first, or the one
    after ``self`` for a method) is the instance (host data); its other
    ``n_shared`` parameters are shared roots (``SharedK(("arg", i))``, ``i``
    the parameter's position). ``resolve`` (when the run's shared arguments
    are known) tells which paths into them hold plain host data; the table's
    ``facts`` say what was found. ``parse`` parses a program function found only now (a method of a module
    the run passes, ``method_call``) with the functions it calls; ``functions`` grows by them. ``implicit``
    makes a program function of the model's own undecorated helper (``helper_call``; ``Function.implicit``).

    A variable that holds host data and then a tensor (``inputs = self.emb(inputs)``), or that names a list
    changed in place and, elsewhere, a list the analysis does not follow (``aliases.check_lists``: ``bptrs_t =
    []`` in one loop, ``for bptrs_t in reversed(backpointers)`` in another), is split into one variable per
    binding (``acrobat.analysis.versions``), or where it is a host-number accumulator (``loss = 0`` then
    ``loss += t`` in a loop) into the number and an optional tensor (``acrobat.analysis.accumulators``), or where
    no split separates a tensor and a stacked list it holds, made a stacked list throughout (``stacked_join``), and
    the analysis runs again. So does a ``for`` over shared containers of the run (``for lyr in p.layers``), once
    replaced by its iterations (``_Analyzer.shared_loop``, ``acrobat.analysis.unrolling``).

    Raises:
        CompileError: a construct whose kinds cannot be batched (host data
            mixed with tensors, tensor-dependent control flow, ...).
    """
    tried: set[tuple[Any, str, Callable]] = set()  # (function, variable, rewrite) already applied
    functions[entry], run_list = run_lists.found(functions[entry], instance)
    threads: dict[Any, int | None] = {}  # functions taking the run's list (``_Analyzer.threads``)
    stacked: set[tuple[Any, str]] = set()  # variables made stacked lists (``_Analyzer.stacked``)
    unrolls: dict[int, tuple[unrolling.LoopOver, tuple]] = {}  # loops over shared containers unrolled
    while True:
        try:
            table = _fixpoint(functions, entry, n_shared, instance, resolve, parse, implicit, run_list, threads,
                              frozenset(stacked), unrolls)
            aliases.check_lists(table.specs)
            return table
        except CompileError as err:
            unroll = getattr(err, "unroll", None)
            if unroll is not None:  # a loop over shared containers: its iterations instead (``shared_loop``)
                f, loop, keys = unroll
                functions[f], anchor, over = unrolling.unrolled(functions[f], loop, keys)
                unrolls[anchor.nid] = (over, keys)
                continue
            through = getattr(err, "run_list", None)
            if through is not None and run_list is not None and through[0] not in threads:
                f, param = through
                threads[f] = None if param is None else functions[f].params.index(param)
                functions[f] = run_lists.threaded(functions[f], param, run_list)
                continue  # analyse again, the function taking the list
            var = getattr(err, "variable", None)
            fn = None
            # `inputs = self.emb(inputs)`: one variable per top-level binding; `loss = 0` ... `loss += t`: the
            # number and the tensor apart (after a split into versions, its loop's conflict comes back)
            for rewrite in (versions.split, accumulators.split) if var is not None else ():
                if (*var, rewrite) not in tried:
                    tried.add((*var, rewrite))
                    fn = rewrite(functions[var[0]], var[1])
                    if fn is not None:
                        break
            if fn is None and getattr(err, "stackable", False) and var not in stacked:
                stacked.add(var)  # no split separates its tensor and its stacked list: a stacked list throughout
                continue
            if fn is None:
                raise
            functions[var[0]] = fn  # then analyse again


def _fixpoint(functions: dict[Any, ir.Function], entry: Any, n_shared: int, instance: int, resolve: Resolver | None,
              parse: Callable[[Any], Mapping[Any, ir.Function]] | None,
              implicit: Callable[[Callable], Any] | None, run_list: RunList | None = None,
              threads: Mapping[Any, int | None] | None = None,
              stacked: frozenset[tuple[Any, str]] = frozenset(),
              unrolls: Mapping[int, tuple[unrolling.LoopOver, tuple]] | None = None) -> KindTable:
    """One run of the kind analysis to its fixpoint (``analyze_kinds``, which may split a variable and run it
    again)."""
    fn = functions[entry]
    if len(fn.params) != 1 + n_shared:
        raise CompileError(f"the entry `{fn.name}({', '.join(fn.params)})` takes the instance and "
                           f"{len(fn.params) - 1} shared parameter(s), but {n_shared} shared argument(s) were "
                           "given (to run(), or n_shared of compile()/source())", fn.loc.file, fn.loc.line,
                           fallback=False)
    an = _Analyzer(functions, fn.params, resolve, parse, implicit, run_list, threads, stacked, unrolls)
    key: SpecKey = (entry, tuple(HOST if i == instance else SharedK(("arg", i)) for i in range(1 + n_shared)))
    an.instance = (key, fn.params[instance])
    an.request(key)
    an.changed = True
    while an.changed:
        an.changed = False
        for spec in list(an.specs.values()):
            an.spec = spec
            an.env = {}
            for name, k in zip(spec.fn.params, spec.key[1]):
                an.set_var(spec.fn.body[0] if spec.fn.body else spec.fn, name, k)  # type: ignore[arg-type]
                an.env[name] = k
            an.body(spec.fn.body, entry=spec.key == key)
            an.sync_lists()
            an.build_rows(spec)
        an.changed = an.changed or an.fields_read_before_stored()
    reachable: dict[SpecKey, Spec] = {}
    todo = [key]
    while todo:  # specializations requested with not-yet-final kinds are dropped
        k = todo.pop()
        if k not in reachable:
            reachable[k] = an.specs[k]
            todo.extend(reachable[k].calls.values())
    for spec in reachable.values():
        # the later passes see calls with starred arguments expanded
        spec.fn = unpacking.rewritten(spec.fn, {**{nid: call for nid, (_, call) in spec.unpacked.items()},
                                                **spec.detached}, spec.written)
        # became per-instance once the fixpoint saw tensor operands (an op's kind, or its operand's: the item of
        # what was a shared op and became a tuple of tensors is no op at all)
        spec.shared_ops = {n for n in spec.shared_ops - spec.ops if isinstance(spec.kinds.get(n), SharedK)}
    return KindTable(reachable, key, an.facts, an.fields, run_list)


# The call rules and the expansion of starred arguments build on the lattice above; imported last, as they import
# it (until the analyzer has a module of its own, ``kinds`` holds both).
from acrobat.analysis import accumulators, aliases, padded, recurrent, regions, rules, unpacking, versions  # noqa: E402


def forward_hooks(module: torch.nn.Module) -> str | None:
    """Where forward hooks run when ``module`` is called (they change what calling it does): ``"on all
    modules"`` for global ones, ``"on `name`"`` for a submodule's, ``"on the module itself"``, or None."""
    g = torch.nn.modules.module
    if g._global_forward_hooks or g._global_forward_pre_hooks:
        return "on all modules"
    for name, m in module.named_modules():
        if m._forward_hooks or m._forward_pre_hooks:
            return f"on `{name}`" if name else "on the module itself"
    return None
