"""The dynamic tier: the user's own Python, run per instance on fibers, its torch operators batched at run time.

What the static analysis cannot take still runs (DESIGN.md, "two tiers"; the
"hybrid" of the paper's title taken one step further, as DyNet batches any
program by recording operators lazily). The program runs as written, each
instance on its own fiber (§4.2), with a ``TorchFunctionMode`` that turns
every torch operator on per-instance data into a DFG node of the run's
DFG instead of running it:

- the node's key is the operator, its non-tensor arguments, its tensor
  inputs' shapes and dtypes, and the identity of the shared tensors it reads
  (model parameters): nodes of equal keys at one depth run as one launch
  (``torch.func.vmap`` of the operator over the stacked inputs, the eager
  backend's kernel);
- its depth is one more than its deepest input's (DyNet's schedule), so
  independent subtrees batch without ``acrobat.concurrent``;
- its output is a ``Lazy`` whose shape and dtype come from running the
  operator on meta tensors (cached per key): shapes need no value;
- operators on parameters alone are computed once per run (their result is a
  shared value, as in the static tier's prologue); indexing a parameter with
  a per-instance number (an embedding lookup) is a node;
- an operator the model calls with autograd off while the run records
  (under its own ``with torch.no_grad():``) is a signature of its own whose
  launches run without autograd, as the plain call computes it (``_NoGrad``);
- anything a lazy value cannot model runs eagerly for that instance, after
  waiting for the values it reads: value reads (``bool``, ``.item()``),
  in-place operators (after every launch recorded before them has run, so
  those read the tensor as it was; a computed value is written in the
  instance's own copy, ``Recorder.write_own``), operators meta tensors cannot run (data-dependent
  shapes), operators that make tensors from host data (``torch.tensor``,
  ``torch.zeros``: their results are the instance's own tensors).

Host state, as plain calls leave it: lazy values the user's code stored on
its objects (``node.state = cell(...)``, ``self.outputs.append(h)``) are
replaced by their tensors once the run has computed them (``lazy_left_in``,
``Runtime.settle``); an instance that changes host state every instance
shares (a shared module's attribute or list) runs alone from that change
until it is done, as plain calls run one after another
(``shared_host_state``, ``FiberScheduler``), or, if other instances were
already part-way through, the run stops with an ``InstanceError``.

Correct by construction: every operator computes exactly what it computes
in plain Python, on the values plain Python would give it. The run report
counts the operators recorded, their launches and mean batch
(``DynamicStats``).
"""

from __future__ import annotations

import itertools
from struct import pack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Sequence

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

from acrobat.runtime.dfg import OUTPUT_STEP, Recording
from acrobat.runtime.batching import Leaf, RuleMismatch, rule_for
from acrobat.runtime.eager import RowLoopKernel
from acrobat.diagnosis import calling_line, mark_limit
from acrobat.errors import InstanceError
from acrobat.runtime.lazy import Lazy, Meta, meta_of
from acrobat.runtime.plan import BatchedParam, BlockCode, Site

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime

MAX_OUTPUTS = 32
"""Outputs one recorded operator may have (``torch.unbind`` of a long tensor has more: it runs eagerly)."""

#: Methods that read a tensor's value: they run eagerly on the instance's values.
_VALUE_READS = frozenset({"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "__complex__",
                          "__len__", "__repr__", "__str__", "__format__", "__array__", "__contains__", "data_ptr",
                          "equal", "allclose", "is_nonzero", "backward", "register_hook", "retain_grad", "storage",
                          "untyped_storage", "__deepcopy__", "__reduce_ex__"})
#: Methods that read a tensor's value, or write into one (also every ``name_`` method): they run eagerly. The
#: in-place operators by the ``__name__`` torch gives them (``Tensor.__itruediv__`` is ``__idiv__``: a write
#: missed here was recorded as a lazy view of its operand, and the next write replayed it: ``x /= 2`` then
#: ``x -= y`` divided ``x`` three times).
_EAGER_NAMES = _VALUE_READS | {"__setitem__", "__iadd__", "__isub__", "__imul__", "__idiv__", "__itruediv__",
                               "__imatmul__", "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__",
                               "__ixor__", "__ilshift__", "__irshift__", "copy_", "set_", "share_memory_",
                               "detach_", "requires_grad_", "clone_"}
#: Indexing a parameter with a per-instance number: a node (an embedding lookup batches as one gather).
_LOOKUPS = {torch.Tensor.__getitem__, torch.Tensor.index_select, torch.nn.functional.embedding, torch.embedding}
#: Shape queries of a real tensor: answered directly (no node, no key).
_SHAPE_QUERIES = {torch.Tensor.dim, torch.Tensor.ndimension, torch.Tensor.size, torch.Tensor.numel,
                  torch.Tensor.nelement, torch.Tensor.is_floating_point, torch.Tensor.is_complex,
                  torch.Tensor.element_size, torch.Tensor.shape.__get__, torch.Tensor.ndim.__get__,
                  torch.Tensor.dtype.__get__, torch.Tensor.device.__get__}
_SCALAR_TYPES = {int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout,
                 torch.memory_format, slice, type(Ellipsis), torch.Size}
_FAST_SCALARS = frozenset(_SCALAR_TYPES - {slice})  # the constants keyed (type, value): all but slices


def _name(func: Any) -> str:
    return getattr(func, "__name__", None) or getattr(func, "name", None) or str(func)


@dataclass
class OpStats:
    """One recorded operator's figures in a run: DFG nodes and calls run eagerly (its launches are its blocks'
    ``BlockStats``, named ``"<operator> (dynamic)"``)."""

    nodes: int = 0
    eager: int = 0  # calls run eagerly for one instance (value reads, in-place, no meta kernel)


@dataclass
class DynamicStats:
    """What the dynamic tier did in a run: per operator name, nodes, launches and eager calls."""

    reason: str = ""
    ops: dict[str, OpStats] = field(default_factory=dict)
    random: bool = False  # the run called a random operator (``torch.randn_like``, dropout in training)
    regions: tuple[str, ...] = ()  # the dynamic regions of a static program (``Region.describe``), when those ran

    def report(self, blocks: Any) -> str:
        """What the dynamic tier ran and why, with the launches and mean batch of its operators (``blocks``:
        the run's ``BlockStats``, the dynamic tier's named ``"<operator> (dynamic)"``)."""
        launches = sum(b.launches for b in blocks if b.name.endswith("(dynamic)"))
        nodes = sum(s.nodes for s in self.ops.values())
        eager = sum(s.eager for s in self.ops.values())
        top = sorted(self.ops.items(), key=lambda kv: -kv[1].nodes)[:8]
        by_op = ", ".join(f"{name} {s.nodes}" for name, s in top if s.nodes)
        eager_ops = ", ".join(f"{name} {s.eager}" for name, s in sorted(self.ops.items(), key=lambda kv: -kv[1].eager)
                              if s.eager)[:300]
        mean = nodes / launches if launches else 0.0
        head = (f"dynamic regions: the static program ran {len(self.regions)} function(s) as their own Python, "
                f"their torch operators batched at run time (acrobat.analysis.regions): {'; '.join(self.regions)}"
                if self.regions else
                f"dynamic tier: the program ran as its own Python, its torch operators batched at run time "
                f"(acrobat.runtime.dynamic), because {self.reason.splitlines()[0] if self.reason else '?'}")
        return (f"{head}\n"
                f"  {nodes} operator calls recorded in {launches} launches (mean batch {mean:.1f}): {by_op}\n"
                f"  {eager} calls ran per instance, on values (value reads, in-place operators, operators with no "
                f"meta kernel){': ' + eager_ops if eager_ops else ''}")

    def merged(self, other: "DynamicStats") -> "DynamicStats":
        """These figures and ``other``'s, added up."""
        out = DynamicStats(other.reason or self.reason, random=self.random or other.random,
                           regions=other.regions or self.regions)
        for src in (self, other):
            for name, s in src.ops.items():
                mine = out.op(name)
                mine.nodes += s.nodes
                mine.eager += s.eager
        return out

    def op(self, name: str) -> OpStats:
        s = self.ops.get(name)
        if s is None:
            s = self.ops[name] = OpStats()
        return s


class _Mode(TorchFunctionMode):
    """Routes every torch operator the fibers' code calls to the recorder."""

    def __init__(self, rec: "Recorder"):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        rec = self.rec
        if not rec.active:  # the runtime's own operators (a flush between fibers' steps)
            return func(*args, **(kwargs or {}))
        out = rec.record(func, args, kwargs)  # `call`'s first step inline
        if out is not NotImplemented:
            return out
        return rec.call(func, args, kwargs or {})


class _Op(NamedTuple):
    """A recorded operator signature's block, and where its results go. ``acrobat._native.Recording`` reads
    the first five fields and ``aliases`` by position."""

    bid: int  # block.id
    out_meta: tuple[Meta, ...]  # per tensor output
    floating: tuple[bool, ...]  # per tensor output: its dtype is floating (autograd may record it)
    kind: int  # _ONE, _TUPLE or _TREE
    stats: OpStats
    block: BlockCode
    out_spec: Any  # the result's pytree spec (None: one tensor)
    out_where: tuple[int, ...]  # the leaf positions of the tensor outputs in the result
    aliases: tuple[int, ...] = ()  # per tensor output: the argument leaf whose memory it shares (a view), -1, or _SHARED_VIEW


class _View(NamedTuple):
    """How a lazy value that shares memory with a lazy argument (a view: ``y[:2]``, ``y.detach()``) was made:
    ``func`` of ``leaves`` (``struct``), the base at leaf ``leaf``, the view its tensor output ``out``
    (``Recorder.index_views``, ``Recorder.write_own``)."""

    lazy: Any  # the view (a Lazy), kept alive with the run: ``views`` is keyed by its id
    base: Any  # the Lazy it views
    func: Any
    op: _Op
    leaves: tuple
    struct: Any
    leaf: int
    out: int


_ONE, _TUPLE, _TREE = 0, 1, 2
"""``_Op.kind``: the result is one tensor, a tuple of tensors only, or another structure (pytree builds it)."""


@dataclass(frozen=True)
class _FuncInfo:
    """What the recorder needs to know of an operator, found once per function object."""

    name: str
    eager: bool  # writes into a tensor or reads a value: run it for the instance, on values
    random: bool
    lookup: bool  # indexing a tensor: a parameter indexed by a per-instance number is a node
    shape_query: bool  # answered directly for the instance's own tensor (``_SHAPE_QUERIES``)
    special: bool  # eager or shape_query: ``Recorder.call`` looks closer
    writes: bool  # eager and not a value read: writes into a tensor (``Recorder.eager`` runs what is pending first)


_FUNCS: dict[Any, _FuncInfo] = {}
_META_CACHE: dict[Any, tuple[Any, tuple, tuple[int, ...], tuple[int, ...]] | None] = {}
"""Per operator signature (shapes, dtypes, constants): its result's structure and tensor metas (None: meta
tensors cannot run it), kept across runs."""
_NESTED = (list, tuple, dict)
_MAX_POSITIONAL = 8  # acrobat._native's MAX_FAST_ARGS
_SHARED_VIEW = -2  # in ``_Op.aliases``: the output is a view of a shared tensor (a parameter)
_POSITIONAL = tuple((0,) * n for n in range(_MAX_POSITIONAL))
"""``_flatten``'s structure of ``n`` positional arguments holding no list, tuple or dict."""


def _info(func: Any) -> _FuncInfo:
    info = _FUNCS.get(func)
    if info is None:
        name = _name(func)
        eager = name in _EAGER_NAMES or (name.endswith("_") and not name.endswith("__"))
        shape_query = func in _SHAPE_QUERIES
        info = _FUNCS[func] = _FuncInfo(name, eager, _random(func), func in _LOOKUPS, shape_query,
                                        eager or shape_query, eager and name not in _VALUE_READS)
    return info


def _flatten(args: tuple, kwargs: dict) -> tuple[list, Any] | None:
    """``args`` and ``kwargs`` as a flat list of leaves and a hashable structure, when no list or tuple in
    them holds another container (else None: the caller uses ``torch.utils._pytree``)."""
    leaves: list = []
    struct: list = []
    for a in args:
        t = type(a)
        if t is list or t is tuple:
            for x in a:
                if type(x) in _NESTED:
                    return None
            leaves.extend(a)
            struct.append((t, len(a)))
        elif t is dict:
            return None
        else:
            leaves.append(a)
            struct.append(0)
    if kwargs:
        for v in kwargs.values():
            if type(v) in _NESTED:
                return None
        leaves.extend(kwargs.values())
        struct.append(tuple(kwargs))
    return leaves, tuple(struct)


def _leaves(args: tuple, kwargs: dict) -> tuple[list, Any]:
    """The leaves of ``args`` and ``kwargs`` and their structure: ``_flatten``'s, or ``torch.utils._pytree``'s
    spec where containers nest."""
    flat = _flatten(args, kwargs)
    return flat if flat is not None else pytree.tree_flatten((args, kwargs))


def _unflatten(leaves: list, struct: Any) -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` of ``_flatten``'s leaves and structure (or of a ``torch.utils._pytree`` spec)."""
    if not isinstance(struct, tuple):
        return pytree.tree_unflatten(leaves, struct)
    args: list = []
    i = 0
    kwargs: dict = {}
    for part in struct:
        if part == 0:
            args.append(leaves[i])
            i += 1
        elif type(part[0]) is type:
            t, n = part
            args.append(t(leaves[i:i + n]))
            i += n
        else:
            kwargs = dict(zip(part, leaves[i:]))
    return tuple(args), kwargs


def _int_lists_as_tensors(index: Any) -> Any:
    """``index`` (of ``x[index]``) with each list of ints or bools in it (nested lists too) the tensor of them,
    as PyTorch reads such a list (an advanced index); ``index`` itself where it holds none."""
    if isinstance(index, list) and (leaves := pytree.tree_leaves(index)) and all(type(i) in (int, bool)
                                                                                 for i in leaves):
        return torch.tensor(index)
    if type(index) is tuple:
        items = tuple(_int_lists_as_tensors(i) for i in index)
        return items if any(a is not b for a, b in zip(items, index)) else index
    return index


class Recorder:
    """One run's dynamic tier: records operators as DFG nodes of ``rt``'s DFG (see the module docstring).

    ``shared`` are the run's shared arguments: their tensors (module parameters and buffers, tensors held
    by them) are shared values, passed to launches unbatched (parameter reuse, §5.1).
    """

    def __init__(self, rt: "Runtime", shared: tuple, site: Site, signatures: Signatures):
        self.rt = rt
        self.site = site
        self.ops: dict[Any, _Op] = {}
        self.held: list[torch.Tensor] = tensors_of(shared)  # the shared tensors, alive while their ids are keys
        self.shared: dict[int, bool] = {id(t): _requires_grad(t) for t in self.held}  # by id: requires_grad
        self.node = rt.dfg.node
        self.node_hosts = rt.dfg.node_hosts
        # the calls that made lazy views of lazy values or of shared tensors (an op with ``aliases``:
        # `torch.chunk(y, 3)`, `y[:2]`, `p.emb[t]`),
        # ``(op, func, leaves, struct, result)`` in the order recorded, by either path; read into ``views`` only
        # when the instance writes in place (``index_views``), so a run that never writes pays one append a view
        self.view_log: list[tuple] = []
        self.grad = torch.is_grad_enabled()  # the run's grad mode (made by the run, before its fibers start)
        # `call`'s common case, in C; it declines a call made with autograd off in a run that records (`grad_off`)
        self.record = Recording(rt.dfg, self.ops, self.shared, _FAST_SCALARS, _POSITIONAL, Lazy, self,
                                torch.is_grad_enabled, OUTPUT_STEP, self.view_log, self.grad,
                                frozenset(_LOOKUPS)).record
        self.memo: dict[Any, Any] = {}  # operators over shared values only, computed once this run
        self.views: dict[int, _View] = {}  # id of a lazy view -> how it was made from its base
        self.view_lazies: dict[int, list[Lazy]] = {}  # id of a lazy value -> the lazy views made from it
        self.shared_views: dict[int, Lazy] = {}  # id -> a lazy value that is a view of a shared tensor (`p.emb[t]`)
        self.signatures = signatures  # the program's operator signatures, kept across runs
        self.claimed: dict[tuple, int] = {}  # per kept signature, how many of this run's took an entry (``claim``)
        self.own_ids = signatures.own_ids()
        self.stats = DynamicStats()
        self.mode = _Mode(self)
        self.active = False  # a fiber runs: operators are recorded (set by the fiber scheduler)

    def grad_off(self) -> bool:
        """Whether the running instance's code turned autograd off where the run records (``torch.no_grad()``
        in the model): its operators then compute without autograd, as in the plain call."""
        return self.grad and not torch.is_grad_enabled()

    # -- the recording ---------------------------------------------------------------
    def call(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """``func(*args, **kwargs)`` in the dynamic tier: a recorded node's lazy result, or the eager result.

        The node's signature (``key``) is ``(func, struct, *parts)``, one part per leaf of the arguments: a
        lazy value's ``Meta``, the ``Meta.Host`` of the instance's own tensor, the ``id`` of a shared tensor
        (alive for the run: ``Recorder.held``), a constant's ``(type, value)``. Positional arguments with
        no list or tuple among them (the common call: ``x @ W``, ``torch.sigmoid(x)``) are the leaves
        themselves; others go through ``_flatten``. A signature seen before is recorded by
        ``acrobat._native.Recording`` (keyword arguments and list arguments too: ``torch.cat([a, b], dim=-1)``).
        """
        out = self.record(func, args, kwargs)  # (the C path declines a call with grad off: its own signatures, `add`)
        if out is not NotImplemented:
            return out
        info = _FUNCS.get(func) or _info(func)
        if info.random:  # (a signature's first call in a run takes this path: the C path records known ones)
            self.stats.random = True
        if info.special:
            if info.shape_query and args and type(args[0]) is not Lazy:
                return func(*args, **kwargs)  # `x.dim()` of the instance's own tensor (an nn module checking it)
            if info.eager:
                return self.eager(func, args, kwargs, info)
        if kwargs:
            if "out" in kwargs:
                return self.eager(func, args, kwargs, info)
            leaves, struct = _leaves(args, kwargs)
        elif len(args) < _MAX_POSITIONAL:
            leaves, struct = args, _POSITIONAL[len(args)]
        else:
            leaves, struct = _leaves(args, kwargs)
        shared = self.shared
        while True:  # twice at most: positional leaves holding a list or tuple are flattened, then signed again
            key: list = [func, struct]
            handles: list[int] = []
            hosts: list = []
            depth = 0
            grad = False
            tensors = False
            for x in leaves:
                t = type(x)
                if t is Lazy:
                    key.append(x.meta)
                    handles.append(x.h)
                    if x.depth > depth:
                        depth = x.depth
                    if x.requires_grad:
                        grad = True
                elif t in _SCALAR_TYPES:
                    key.append(_const_part(t, x))
                elif (shared_grad := shared.get(id(x))) is not None:  # a shared tensor
                    key.append(id(x))
                    tensors = True
                    if shared_grad:
                        grad = True
                elif isinstance(x, torch.Tensor):  # the instance's own tensor (its data, or one made by its code)
                    key.append(meta_of(x.shape, x.dtype).host)
                    hosts.append(x)
                    tensors = True
                    grad = grad or _requires_grad(x)
                elif t in _NESTED and leaves is args:
                    break
                else:
                    return self.eager(func, args, kwargs, info)  # an object the key cannot hold
            else:
                break
            leaves, struct = _leaves(args, kwargs)
        if not handles and not hosts:
            if not tensors or info.random:
                return self.eager(func, args, kwargs, info, lazy=False)  # the instance's own (torch.zeros, randn)
            if info.lookup and any(type(x) is int for x in leaves[1:]):
                return self.lookup(func, leaves, struct, info)
            return self.shared_value(func, leaves, struct, tuple(key))
        return self.add(tuple(key), leaves, struct, handles, hosts, depth, grad, info)

    def add(self, key: tuple, leaves: Sequence, struct: Any, handles: list[int], hosts: list, depth: int,
            grad: bool, info: _FuncInfo) -> Any:
        """Add a DFG node of the signature ``key`` for the running instance; its lazy result."""
        off = self.grad_off()
        op_key = (key, _GRAD_OFF) if off else key
        op = self.ops.get(op_key)
        if op is None:
            op = self.new_op(key, leaves, struct, info, off)
            if op is None:
                return self.eager(key[0], *_unflatten(list(leaves), struct), info, lazy=bool(handles))
            self.ops[op_key] = op
        if op.aliases and any(i >= 0 and type(leaves[i]) is not Lazy for i in op.aliases):
            # a view of the instance's own tensor (`inst.x[:2]`, `inst.x.detach()`): made now, a real view, so a
            # write through it reaches the tensor and a write into the tensor reaches it, as in the plain call
            return self.eager(key[0], *_unflatten(list(leaves), struct), info, lazy=bool(handles))
        result = self.node_result(op, leaves, struct, handles, hosts, depth, grad)
        if op.aliases:  # as the C path logs it (``acrobat._native.Recording``)
            self.view_log.append((op, key[0], tuple(leaves), struct, result))
        return result

    def node_result(self, op: _Op, leaves: Sequence, struct: Any, handles: list[int], hosts: list, depth: int,
                    grad: bool) -> Any:
        """A new DFG node of ``op`` for the running instance, at one more than ``depth``: its lazy result."""
        depth += 1
        if hosts:  # the node takes its host values as they are now (a clone of a tensor: not to be recorded)
            self.active = False
            try:
                h = self.node_hosts(depth, op.bid, tuple(hosts), *handles)
            finally:
                self.active = True
        else:
            h = self.node(depth, op.bid, *handles)
        op.stats.nodes += 1
        if grad:
            grad = torch.is_grad_enabled()
        if op.kind == _ONE:
            m = op.out_meta[0]
            return Lazy(h, m, depth, grad and m.floating, self)
        outs = [Lazy(h + k * OUTPUT_STEP, m, depth, grad and m.floating, self) for k, m in enumerate(op.out_meta)]
        if op.kind == _TUPLE:  # torch.chunk, torch.split, torch.unbind
            return tuple(outs)
        result: list = [None] * op.out_spec.num_leaves
        for k, i in enumerate(op.out_where):
            result[i] = outs[k]
        return pytree.tree_unflatten(result, op.out_spec)

    def lookup(self, func: Any, leaves: list, struct: Any, info: _FuncInfo) -> Any:
        """A parameter indexed by per-instance numbers (``p.emb[word]``): a node whose numbers are batched. A list
        of ints in the index (``p.emb[toks]``) is one advanced index, the instance's own tensor of them, where its
        numbers batched one by one would make it a tuple of 0-d tensors under vmap (``p.emb[1, 2]``)."""
        if func is torch.Tensor.__getitem__:
            args, kwargs = _unflatten(leaves, struct)
            index = _int_lists_as_tensors(args[1])
            if index is not args[1]:
                return self.call(func, (args[0], index), kwargs)
        key: list = [func, struct]
        hosts = []
        for x in leaves:
            if type(x) is int:
                key.append(int)
                hosts.append(x)
            elif isinstance(x, torch.Tensor):  # shared: `call` found no lazy value or instance tensor
                key.append(id(x))
            else:
                key.append(_const_part(type(x), x))
        return self.add(tuple(key), leaves, struct, [], hosts, 0, False, info)

    def new_op(self, key: tuple, leaves: list, struct: Any, info: _FuncInfo, off: bool = False) -> _Op | None:
        """The block of a new operator signature (the caller keeps it in ``ops``), or None when meta tensors cannot
        run it (it runs eagerly); ``off``: recorded with autograd off in a run that records (``grad_off``), its
        launches run without it. The block and its kernel are the program's ``Signatures`` entry for the
        signature, made by an earlier run where one did; the run gives it this call's shared tensors."""
        func = key[0]
        sig = key[2:]
        stable = (func, struct, tuple(_shared_part(x) if type(part) is int else part for x, part in zip(leaves, sig)))
        meta = _META_CACHE.get(stable, False)
        if meta is False:
            meta = _META_CACHE[stable] = _infer(func, leaves, struct)
        if meta is None:
            return None
        kept = self.signatures.claim((stable, off), self.claimed, self.own_ids,
                                     lambda bid: _signature(func, leaves, sig, struct, info, meta, bid, off, self.site))
        if kept is None:
            return None  # more distinct operator signatures than a group key holds: run eagerly
        self.rt.add_block(kept.block, kept.kernel, [leaves[i] for i in kept.shared])
        return _Op(kept.block.id, kept.out_meta, tuple(m.floating for m in kept.out_meta), kept.kind,
                   self.stats.op(info.name), kept.block, kept.out_spec, kept.out_where, kept.aliases)

    def shared_value(self, func: Any, leaves: Sequence, struct: Any, key: tuple) -> Any:
        """An operator over shared values and constants only: computed once per run, its result shared too."""
        k = (key, _GRAD_OFF) if self.grad_off() else key
        out = self.memo.get(k)
        if out is None:
            a, kw = _unflatten(leaves, struct)
            out = self.memo[k] = func(*a, **kw)
            for t in pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.held.append(t)
                    self.shared[id(t)] = _requires_grad(t)
        return out

    def eager(self, func: Any, args: tuple, kwargs: dict, info: _FuncInfo, lazy: bool = True) -> Any:
        """``func`` run now for the running instance, on the values of its lazy arguments (waiting for them;
        ``lazy`` False: the caller knows there are none).

        Raises:
            InstanceError: ``func`` writes into a tensor every instance shares (a parameter, or a value computed
                from parameters alone, shared too in the dynamic tier).
        """
        self.stats.op(info.name).eager += 1
        target = args[0] if args else None
        if info.writes and isinstance(target, torch.Tensor) and id(target) in self.shared:
            raise mark_limit(InstanceError(
                f"instance {self.rt.dfg.inst}: `{info.name}` writes into a tensor every instance shares (a model "
                f"parameter, or a value computed from parameters alone): write it out of place\n"
                f"{calling_line() or self.site.where()}", self.rt.dfg.inst))
        if info.writes or "out" in kwargs:
            # the launches recorded before the write read the tensor as it was: they run first
            with torch._C.DisableTorchFunction():
                self.rt.drain()
            if info.writes and type(target) is Lazy:
                return self.write_own(func, target, args[1:], kwargs)
        if lazy:
            args, kwargs = pytree.tree_map(lambda x: self.value(x) if type(x) is Lazy else x, (args, kwargs))
        return func(*args, **kwargs)

    def index_views(self) -> None:
        """Read the calls logged since the last write (``view_log``) into ``views`` and ``view_lazies``: how each
        lazy output that shares memory with a lazy argument (a view of it) is made from it, so that a write
        through either reaches the other (``write_own``)."""
        for op, func, leaves, struct, result in self.view_log:
            outs = [result] if op.kind == _ONE else list(result) if op.kind == _TUPLE else [
                pytree.tree_leaves(result)[i] for i in op.out_where]
            for k, (out, i) in enumerate(zip(outs, op.aliases)):
                if i == _SHARED_VIEW:
                    self.shared_views[id(out)] = out
                elif i >= 0:
                    base = leaves[i]
                    self.views[id(out)] = _View(out, base, func, op, leaves, struct, i, k)
                    self.view_lazies.setdefault(id(base), []).append(out)
        self.view_log.clear()

    def write_own(self, func: Any, target: Lazy, rest: tuple, kwargs: dict) -> Any:
        """``func(target, *rest, **kwargs)``, an in-place write into a computed value (``y[0] = v``, ``y.add_(1)``,
        ``y[:2].mul_(0)``): done on the instance's own copy of the value the write reaches (``target``'s base,
        when ``target`` is a view of another lazy value: ``views``), which the base (every alias of it in the
        user's code) then refers to, as a one-row value of the run's DFG; every lazy view of that base is made
        again from the copy, as a plain call's views see the write. Written in the batched output instead, the
        write would change the storage the other instances' rows share, which autograd saved for their
        backward."""
        rest, kwargs = pytree.tree_map(lambda x: self.value(x) if type(x) is Lazy else x, (rest, kwargs))
        self.index_views()
        root = target
        while id(root) in self.views:
            root = self.views[id(root)].base
        if id(root) in self.shared_views:
            raise mark_limit(InstanceError(
                f"instance {self.rt.dfg.inst}: `{getattr(func, '__name__', func)}` writes into a view of a tensor "
                f"every instance shares (`p.emb[t]` of a parameter is a view of it in PyTorch, so the write would "
                f"change the parameter): write it out of place, or write into a copy (`.clone()`)\n"
                f"{calling_line() or self.site.where()}", self.rt.dfg.inst))
        with torch._C.DisableTorchFunction():  # the runtime's own operators: not recorded
            own = self.value(root).clone()
            written = self.remade(target, root, own)
            out = func(written, *rest, **kwargs)
            self.settle_view(root, own)
            todo = list(self.view_lazies.get(id(root), ()))
            while todo:
                w = todo.pop()
                self.settle_view(w, self.remade(w, root, own))
                todo += self.view_lazies.get(id(w), ())
        return target if out is written else out

    def remade(self, view: Lazy, root: Lazy, own: torch.Tensor) -> torch.Tensor:
        """The tensor ``view`` (``root`` itself, or a lazy view made from it through ``views``) is, made again
        from ``own``, the instance's copy of ``root``: a real view of ``own`` (autograd off in the recorder)."""
        if view is root:
            return own
        v = self.views[id(view)]
        base = self.remade(v.base, root, own)
        filled = [base if j == v.leaf else self.value(x) if type(x) is Lazy else x for j, x in enumerate(v.leaves)]
        a, kw = _unflatten(filled, v.struct)
        out = v.func(*a, **kw)
        return out if v.op.out_spec is None else pytree.tree_leaves(out)[v.op.out_where[v.out]]

    def settle_view(self, lazy: Lazy, t: torch.Tensor) -> None:
        """``lazy`` now refers to ``t``, a one-row value of the run's DFG (after an in-place write, ``write_own``)."""
        _, lazy.h = self.rt.table.lifted(t)
        lazy.requires_grad = t.requires_grad
        lazy.depth = 0

    def value(self, x: Lazy) -> torch.Tensor:
        """The computed tensor of ``x`` (on a fiber, waits for it: a value read, §4.2)."""
        with torch._C.DisableTorchFunction():
            return self.rt.value(x.h)


_GRAD_OFF = "grad off"
"""Marks the signature (and shared value) of an operator recorded with autograd off in a run that records."""


class _NoGrad:
    """The kernel of an operator signature recorded under the model's own ``torch.no_grad()`` in a run that
    records autograd (``Recorder.grad_off``): its launches run without autograd, so its outputs carry no
    gradient, as the plain call's do. Takes and returns what the wrapped ``BlockKernel`` does."""

    def __init__(self, kernel: RowLoopKernel):
        self.kernel = kernel

    def __call__(self, g: Any, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        with torch.no_grad():
            return self.kernel(g, rt)


class _Kept(NamedTuple):
    """One operator signature's block as a program keeps it across runs (``Signatures``): what ``_Op`` holds but
    the run's own figures, and the leaf positions of its shared tensors (which each run passes its own of)."""

    block: BlockCode
    kernel: Any  # RowLoopKernel, or _NoGrad of one
    out_meta: tuple[Meta, ...]
    kind: int
    out_spec: Any
    out_where: tuple[int, ...]
    aliases: tuple[int, ...]
    shared: tuple[int, ...]


class Signatures:
    """A dynamic-tier program's operator signatures, kept across its runs: per signature its block and batched
    kernel (the batching rule found, ``vmap`` made), made by the first run that met it, so a later run's first
    call of it costs a dictionary lookup instead of building them again (about 70 µs a signature: a
    Transformer over sentences of 16 lengths met 417 a batch).

    A signature is kept by what its block depends on: the operator, the call's structure, its lazy values' and
    the instance's tensors' shapes and dtypes, its constants, and per shared tensor its shape, strides, dtype
    and device (``_shared_part``; never its identity, which a run's key holds: ``Recorder.ops``), and whether
    it ran with autograd off (``_NoGrad``). Calls of one run that differ only in which shared tensor they read
    (two weights of one shape) are signatures of their own in the run, so the n-th of them a run meets takes
    the kept entry n (``claim``). Kept blocks have ids ``first + [0, KEPT)``, one each for good; past that a
    run makes its other signatures' blocks itself, ids ``first + KEPT`` on, as a run made every block before.
    Safe to share between runs at once: an entry is only ever appended, whole, and a run takes entry n of a key
    once. The blocks are the dynamic tier's static blocks, their kernels §5's batched kernels (a batching rule
    or ``vmap``, explicit gathers).
    """

    KEPT = 1 << 15
    """Signatures kept per program (block ids); a group key holds block ids below ``1 << 16``."""

    def __init__(self, first: int = 0):
        self.first = first
        self.kept: dict[tuple, list[_Kept]] = {}
        self.ids = itertools.count(first)

    def claim(self, key: tuple, claimed: dict[tuple, int], own: Iterator[int],
              make: Callable[[int], _Kept]) -> _Kept | None:
        """The entry for the next signature of kept key ``key`` the run meets (``claimed``: the run's count per
        key), made by ``make(block id)`` if none is kept yet; once ``KEPT`` are kept, made for the run alone with
        the next of its own block ids ``own``; None when no block id is left for it."""
        n = claimed.get(key, 0)
        claimed[key] = n + 1
        entries = self.kept.setdefault(key, [])
        if n < len(entries):
            return entries[n]
        bid = next(self.ids)
        if bid < self.first + self.KEPT:
            entries.append(make(bid))
            return entries[n]  # (a run at once may have appended entry n meanwhile: this run takes that one)
        bid = next(own)
        return make(bid) if bid < 1 << 16 else None

    def own_ids(self) -> Iterator[int]:
        """The block ids of a run's signatures past the kept ones."""
        return itertools.count(self.first + self.KEPT)


def _shared_part(x: torch.Tensor) -> tuple:
    """What a block of a signature depends on of a shared tensor it reads (``Signatures``)."""
    return ("shared", tuple(x.shape), x.stride(), x.dtype, x.device)


def _signature(func: Any, leaves: list, sig: tuple, struct: Any, info: _FuncInfo, meta: tuple, bid: int, off: bool,
               site: Site) -> _Kept:
    """The block (id ``bid``) and batched kernel of a new operator signature: ``func`` called on ``leaves``
    (``struct``), signed ``sig``, its result as ``_infer`` gives it (``meta``); ``off``: its launches run without
    autograd (``_NoGrad``). Its kernel takes the lazy values, the instance's tensors and numbers batched, the
    shared tensors as they are (a rule of ``acrobat.runtime.batching``, else ``vmap``)."""
    out_spec, out_meta, out_where, aliases = meta
    batched: list[int] = []  # leaf positions of the batched arguments (lazy values, instance data, numbers)
    shared: list[int] = []
    params = []
    for i, (x, part) in enumerate(zip(leaves, sig)):
        if type(x) is Lazy:
            batched.append(i)
            params.append(BatchedParam(f"x{i}", "tensor", info.name, site))
        elif isinstance(part, Meta.Host) or part is int:
            batched.append(i)
            params.append(BatchedParam(f"x{i}", "host", info.name, site))
        elif type(part) is int:
            shared.append(i)
    template = list(leaves)
    for i in batched + shared:
        template[i] = None
    n_batched = len(batched)

    def fn(*values: Any) -> tuple:
        filled = list(template)
        for i, v in zip(batched, values[:n_batched]):
            filled[i] = v
        for i, v in zip(shared, values[n_batched:]):
            filled[i] = v
        a, kw = _unflatten(filled, struct)
        out = func(*a, **kw)
        return (out,) if out_spec is None else tuple(pytree.tree_leaves(out)[i] for i in out_where)

    block = BlockCode(bid, f"{info.name} (dynamic)", site, tuple(params), tuple(range(len(shared))),
                      tuple(f"out{k}" for k in range(len(out_meta))), fn, hoisted=False)
    lazy = [leaves[i].meta for i in batched if type(leaves[i]) is Lazy]
    kernel = RowLoopKernel(block, _direct(func, leaves, sig, struct, batched, shared, template, out_spec, out_meta,
                                          out_where), merged=len(lazy) > 1 and len(set(lazy)) == 1)
    kind = _ONE if out_spec is None else _TUPLE if out_spec.type is tuple and len(out_where) == (
        out_spec.num_leaves) and all(c.is_leaf() for c in out_spec.children()) else _TREE
    # the outputs that share memory with a lazy value or the instance's own tensor (the leaf's position), or
    # with a shared tensor (``_SHARED_VIEW``: a lookup `p.emb[t]` is a view of the parameter, a node all the
    # same, whose result a write must not reach: ``write_own``)
    aliases = tuple(-1 if i < 0 else i if type(leaves[i]) is Lazy or isinstance(sig[i], Meta.Host) else
                    _SHARED_VIEW for i in aliases)
    return _Kept(block, _NoGrad(kernel) if off else kernel, out_meta, kind, out_spec, out_where,
                 aliases if any(i != -1 for i in aliases) else (), tuple(shared))


def _direct(func: Any, leaves: list, sig: tuple, struct: Any, batched: list[int], shared: list[int], template: list,
            out_spec: Any, out_meta: tuple, out_where: tuple[int, ...]
            ) -> Callable[..., tuple[torch.Tensor, ...]] | None:
    """The batched call of a new operator signature from its batching rule (``acrobat.runtime.batching``): a
    function of the launch's batched and shared arguments, as ``vmap`` of the block's function takes them;
    None where no rule applies. ``out_meta``: the per-row outputs' shapes and dtypes (``_infer``), which the
    rule's outputs must match row for row."""
    infos = []
    for x, part in zip(leaves, sig):
        if type(x) is Lazy:
            infos.append(Leaf("B", tuple(x.meta.shape), x.meta.dtype))
        elif isinstance(part, Meta.Host):
            infos.append(Leaf("B", tuple(part.meta.shape), part.meta.dtype))
        elif part is int:
            infos.append(Leaf("B", (), torch.int64))
        elif isinstance(x, torch.Tensor):
            infos.append(Leaf("S", value=x))
        else:
            infos.append(Leaf("C", value=x))
    rule = rule_for(func, infos, lambda ls: _unflatten(ls, struct))
    if rule is None:
        return None
    n = len(batched)
    expect = [(tuple(m.shape), m.dtype) for m in out_meta]

    def call(*values: Any) -> tuple[torch.Tensor, ...]:
        filled = list(template)
        for i, v in zip(batched, values[:n]):
            filled[i] = v
        for i, v in zip(shared, values[n:]):
            filled[i] = v
        outs = rule(*filled)
        outs = outs if out_spec is None or len(outs) == len(out_where) else tuple(outs[i] for i in out_where)
        rows = values[0].shape[0] if n else outs[0].shape[0]
        if [(tuple(o.shape), o.dtype) for o in outs] != [((rows, *s), d) for s, d in expect]:
            raise RuleMismatch(f"the batching rule of {_name(func)} gave {[tuple(o.shape) for o in outs]}")
        return outs

    return call


def _infer(func: Any, leaves: list, struct: Any) -> tuple[Any, tuple, tuple[int, ...], tuple[int, ...]] | None:
    """Run ``func`` on meta tensors shaped like ``leaves``: its result's structure (tensor leaves as None),
    per tensor output its (shape, dtype), their leaf positions, and per tensor output the argument leaf whose
    memory it shares (a view, -1 for none); None when meta tensors cannot run it or it gives no tensor (or too
    many)."""
    def meta(x: Any) -> Any:
        if type(x) is Lazy:
            return torch.empty(x.meta.shape, dtype=x.meta.dtype, device="meta")
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        return x

    try:
        with torch._C.DisableTorchFunction():
            metas = [meta(x) for x in leaves]
            a, kw = _unflatten(metas, struct)
            if func is F.embedding and kw.get("scale_grad_by_freq", a[5] if len(a) > 5 else False):
                return None  # its gradient counts the indices of the call: batched, the batch's; run per instance
            out = func(*a, **kw)
    except Exception:  # noqa: BLE001 - no meta kernel, a data-dependent shape, a value read: run it eagerly
        return None
    storages = {x.untyped_storage()._cdata: i for i, x in enumerate(metas) if isinstance(x, torch.Tensor)}

    def alias(t: torch.Tensor) -> int:  # the argument leaf whose memory ``t`` shares (a view of it), or -1
        return storages.get(t.untyped_storage()._cdata, -1)
    if isinstance(out, torch.Tensor):
        return None, (meta_of(out.shape, out.dtype),), (0,), (alias(out),)
    out_leaves, out_spec = pytree.tree_flatten(out)
    where = tuple(i for i, x in enumerate(out_leaves) if isinstance(x, torch.Tensor))
    if not where or len(where) > MAX_OUTPUTS or any(type(x) not in _SCALAR_TYPES for i, x in
                                                    enumerate(out_leaves) if i not in where):
        return None
    return (out_spec, tuple(meta_of(out_leaves[i].shape, out_leaves[i].dtype) for i in where), where,
            tuple(alias(out_leaves[i]) for i in where))


def _const_part(t: type, x: Any) -> Any:
    """The signature part of constant ``x`` of type ``t``: ``(t, x)``, a slice's bounds, and a float's (or a
    complex's) bits where equality would merge constants that compute differently (``0.0 == -0.0``: ``1 / x``
    gives ``inf`` and ``-inf``) or never match (NaN)."""
    if t is slice:
        return (t, x.start, x.stop, x.step)
    if t is float and (x == 0.0 or x != x) or t is complex:
        return (t, pack("<2d", x.real, x.imag))
    return (t, x)


def _requires_grad(t: torch.Tensor) -> bool:
    """``t.requires_grad``, read past the recorder's own mode (which would record the read as an operator)."""
    with torch._C.DisableTorchFunction():
        return t.requires_grad


def _random(func: Any) -> bool:
    name = _name(func)
    return name in ("rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "bernoulli", "multinomial",
                    "normal", "poisson", "dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout",
                    "dropout1d", "dropout2d", "dropout3d", "rrelu", "randperm", "uniform_", "normal_")


def tensors_of(values: Any, seen: set[int] | None = None) -> list[torch.Tensor]:
    """Every tensor reachable from ``values``: modules' parameters and buffers, tensors held in attributes,
    lists, tuples and dicts (the run's shared values). The dynamic tier's prologue gives them as the run's
    slots, so the run's device and whether autograd records through it are those of the parameters."""
    seen = set() if seen is None else seen
    out: list[torch.Tensor] = []
    stack = list(values) if isinstance(values, (list, tuple)) else [values]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, torch.nn.Module):
            out.extend(v.parameters())
            out.extend(v.buffers())
            stack.extend(x for x in vars(v).values() if not isinstance(x, dict))
        elif isinstance(v, (list, tuple, set)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif hasattr(v, "__dict__") and not isinstance(v, (type, Callable)):  # type: ignore[arg-type]
            stack.extend(vars(v).values())
    return out


_ATOMS = (torch.Tensor, int, float, bool, complex, str, bytes, type(None), type, torch.dtype, torch.device)
_PLAIN = frozenset({int, float, bool, complex, str, bytes, type(None)})
"""The exact types of the commonest ``_ATOMS``: ``_walk`` passes their values by without a call."""
_SLOTS: dict[type, list[str]] = {}
"""Per class, the ``__slots__`` names of it and its bases that ``_walk`` reads (not ``__dict__``, ``__weakref__``)."""


def lazy_left_in(roots: Sequence) -> list[Lazy]:
    """Every ``Lazy`` reachable from ``roots`` (the instances, the shared arguments) through lists, tuples,
    dicts and objects' attributes: values the user's code stored on its objects (``node.state = cell(...)``,
    ``self.outputs.append(h)``) that plain calls would have left there as tensors."""
    out: list[Lazy] = []
    _walk_objects(list(roots), lambda x: out.append(x) or x, set())
    return out


def replace_lazy_in(roots: Sequence, value: Callable[[Lazy], torch.Tensor]) -> None:
    """Replace every ``Lazy`` reachable from ``roots`` (as ``lazy_left_in`` finds them) by ``value(lazy)``, in
    place: list items, dict values and attributes are reassigned; a tuple holding one is rebuilt (a
    namedtuple keeps its type) and stored where the tuple was."""
    _walk_objects(list(roots), value, {})


def _walk_objects(roots: list, fn: Callable[[Lazy], Any], memo: Any) -> None:
    for r in roots:
        _walk(r, fn, memo)


def _walk(x: Any, fn: Callable[[Lazy], Any], memo: Any) -> Any:
    """``x`` with every ``Lazy`` in it replaced by ``fn(lazy)`` (mutable containers and objects in place).

    ``memo`` is a set of visited ids (collecting) or a dict id -> rebuilt value (replacing), so shared and
    cyclic structure is visited once."""
    t = type(x)
    if t is Lazy:
        return fn(x)
    if t in _PLAIN or isinstance(x, _ATOMS) or callable(x) and not isinstance(x, torch.nn.Module):
        return x
    if id(x) in memo:
        return memo[id(x)] if isinstance(memo, dict) else x
    if isinstance(memo, dict):
        memo[id(x)] = x
    else:
        memo.add(id(x))
    if isinstance(x, list):
        for i, v in enumerate(x):
            if type(v) in _PLAIN:
                continue
            new = _walk(v, fn, memo)
            if new is not v:
                x[i] = new
    elif isinstance(x, dict):
        for k, v in list(x.items()):
            new = _walk(v, fn, memo)
            if new is not v:
                x[k] = new
    elif isinstance(x, tuple):
        items = [_walk(v, fn, memo) for v in x]
        if any(a is not b for a, b in zip(items, x)):
            rebuilt = type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
            if isinstance(memo, dict):
                memo[id(x)] = rebuilt
            return rebuilt
    elif isinstance(x, torch.nn.Module):  # its own attributes and submodules (parameters are tensors)
        for k, v in list(vars(x).items()):
            if not k.startswith("_"):
                new = _walk(v, fn, memo)
                if new is not v:
                    vars(x)[k] = new
        for m in x.children():
            _walk(m, fn, memo)
    elif hasattr(x, "__dict__") or hasattr(type(x), "__slots__"):
        names = list(vars(x)) if hasattr(x, "__dict__") else []
        slots = _SLOTS.get(t)
        if slots is None:
            slots = _SLOTS[t] = [s for c in t.__mro__ for s in getattr(c, "__slots__", ())
                                 if s not in ("__dict__", "__weakref__")]
        for k in names + slots if slots else names:
            v = getattr(x, k, None)
            if type(v) in _PLAIN:
                continue
            new = _walk(v, fn, memo)
            if new is not v:
                object.__setattr__(x, k, new)  # as plain code set it (a frozen dataclass's too)
    return x


def shared_host_state(shared: tuple) -> Callable[[], tuple] | None:
    """A fingerprint of the host state the shared arguments hold, or None when they hold none to watch.

    The state is every attribute of the shared ``nn.Module``s (and their submodules) that is not torch's
    own (``model.outputs``), and every attribute of other shared objects; the fingerprint holds, per
    attribute, the identity of its value and, for a list, dict or set, its length and its last item. The
    fiber scheduler compares it around every slice a fiber runs: instances run one after another in plain
    Python, so one that changes state every instance shares must run alone until it is done
    (``FiberScheduler``).
    """
    owners: list[tuple[Any, bool]] = []
    for a in shared:
        if isinstance(a, torch.nn.Module):
            owners += [(m, True) for m in a.modules()]
        elif hasattr(a, "__dict__") and not isinstance(a, _ATOMS) and not callable(a):
            owners.append((a, False))
    if not owners:
        return None

    attrs = [(id(o), vars(o), module) for o, module in owners]
    watched: list[tuple[tuple, list[str]] | None] = [None] * len(attrs)  # per owner: its names, those watched

    def fingerprint() -> tuple:
        out: list = []
        for i, (oid, d, module) in enumerate(attrs):
            keys = tuple(d)  # the names to watch are found again only when the owner's names change
            seen = watched[i]
            if seen is None or seen[0] != keys:
                seen = watched[i] = (keys, [k for k in keys if not (module and k.startswith("_"))])
            for k in seen[1]:
                v = d[k]
                if isinstance(v, (list, dict, set)):
                    last = id(v[-1]) if isinstance(v, list) and v else None
                    out.append((oid, k, id(v), len(v), last))
                else:
                    out.append((oid, k, id(v)))
        return tuple(out)

    return fingerprint


def changed_names(before: tuple, after: tuple) -> list[str]:
    """The attribute names whose entries differ between two ``shared_host_state`` fingerprints."""
    a, b = set(before), set(after)
    return sorted({e[1] for e in a ^ b})
