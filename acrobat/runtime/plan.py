"""The hand-off from the compiler to the runtime: what a compiled program gives the runtime to run (§3, Fig. 3).

The compiler (``acrobat.program`` driving ``acrobat.codegen``) turns a
program into a ``Plan``: the skeleton's entry function, the shared-value
prologue, every static block as a ``BlockCode``, the base depth, whether
instances run on fibers, and the layout of the entry's result. The runtime
reads only this module's types, so it imports nothing from
``acrobat.analysis`` or ``acrobat.codegen`` (``tests/test_layers.py``
checks it); the compiler imports this module to build them.

The plan also fixes what compiled code hands over at run time and the
runtime takes apart: handles stand for per-instance tensors (``acrobat.runtime.dfg``),
a ``Form`` is a callable shared value whose tensors are pytree leaves, and
a ``Tracer`` builds a block's batched kernel graph for a backend that
compiles (the kernel JIT, ``acrobat.codegen.kernels.trace_block``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Protocol, Sequence

import torch
import torch.utils._pytree as pytree

if TYPE_CHECKING:
    from torch.fx import GraphModule



class Site(NamedTuple):
    """A model source location (``file:line``) and the text of its line, stripped: where an error points."""

    loc: str
    text: str

    def where(self) -> str:
        """``  at file:line: source``, the line error messages end with."""
        return f"  at {self.loc}: {self.text}"


class BatchedParam(NamedTuple):
    """A block parameter that gets one value per DFG node: ``role`` ``"tensor"`` (a handle) or a host
    role (a Python number); ``source`` is the model expression that computes it and ``site`` its line."""

    name: str
    role: str
    source: str
    site: Site


@dataclass(frozen=True)
class SegmentOp:
    """A segment operator: ``op`` over the list axis of one instance's rows (``acrobat.runtime.segments``).

    ``n_outputs`` is 2 for ``max``/``min`` (values, indices); ``ragged_out``
    when the result has one row per input row (softmax, log_softmax);
    ``flat`` for an operator written without ``dim``: ``sum``, ``mean``,
    ``amax``, ``amin`` (``max``/``min`` without dim are these) reduce every
    element of the instance's list, its rows flattened into one segment
    (a ``(B,)`` result: each instance's 0-D value); ``argmax``/``argmin``
    are checked at run time to be the 1-D case, where they equal ``dim=0``.
    ``dim`` is 0 (the list
    axis), or for ``softmax``/``log_softmax`` a negative dim as written,
    which the kernel reads against the rows' rank at run time (the list
    axis, or an axis of every row); ``keepdim`` keeps the list axis of a
    reduction as a length-1 axis. The rankings (``sort``, ``argsort``,
    ``topk``) are ``ragged_out``: each instance's rows sorted over the list
    axis, largest first where ``descending`` (``topk``'s ``largest``); a
    ``topk`` node sorts the whole list and host code keeps its first k rows.
    """

    op: str
    n_outputs: int = 1
    ragged_out: bool = False
    flat: bool = False  # written without dim: a full reduction of the list (argmax/argmin: only of a 1-D list)
    dim: int = 0
    keepdim: bool = False
    descending: bool = False


@dataclass(frozen=True)
class RecurrentOp(SegmentOp):
    """A recurrent module (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) over each instance's stacked list of rows: a
    segment node per instance, one module call over a packed sequence per launch (``acrobat.runtime.recurrent``;
    issue 18 §2, beyond the paper's §3 language).

    ``op`` is the module's class name (``"LSTM"``); a node holds the instance's rows, then ``states`` handles of
    its initial state (0: none given; 1: ``h0``; 2: ``(h0, c0)`` of an LSTM). Its outputs: one handle per row
    (the output sequence), then ``h_n`` (and ``c_n``) of the instance; ``n_outputs`` counts them. ``lead``: the
    rows are those of a ``(1, T, E)`` input of a ``batch_first`` module (``kinds.LeadK``), whose ``h_n``/``c_n``
    are ``(layers * dirs, 1, H)``."""

    states: int = 0
    lead: bool = False


@dataclass(frozen=True)
class PaddedOp(SegmentOp):
    """A padded function (``acrobat.runtime.padded``; issue 18 §2, beyond the paper's §3 language): a program
    function given stacked lists whose body the row-wise analysis rejects, one segment node per instance and,
    per launch, ONE call of the user's function on padded ``(B, Lmax, ...)`` values.

    ``call(args)`` calls the user's function (``acrobat.analysis.regions.Region.call``); ``where`` is its
    ``file:line``. ``roles`` says per argument what the node holds of it: ``"rows"`` (a stacked list: its row
    handles, its length a host value), ``"tensor"`` (a per-instance tensor: one handle), ``"shared"`` or
    ``"host"`` (the value itself, among the node's host values; nodes with different host values run in
    separate calls). ``ragged`` says per result item (``n_outputs`` of them; ``arity`` None: one value, not a
    tuple) whether it is a stacked list with as many rows as the first stacked-list argument, else one
    per-instance tensor."""

    call: Any = None
    where: str = ""
    roles: tuple[str, ...] = ()
    ragged: tuple[bool, ...] = ()
    arity: int | None = None


@dataclass(frozen=True, eq=False)
class BlockCode:
    """A static block as the runtime runs it: a DFG node's arguments, its per-instance code, its errors' sites.

    ``fn(*batched, *shared)`` is the per-instance function (the batched
    launch is ``vmap`` of it or a kernel traced from it, §5); its batched
    arguments are ``params`` in order, its shared ones the run's shared
    values at ``shared_slots`` (parameter reuse, §5.1). ``hoisted``: the
    block has a static depth (App. A.1). With ``segment`` set it is a
    segment operator over one list per node instead. ``source`` is the
    generated code of ``fn`` (compiled as ``filename``), ``line_map`` maps
    its lines to model lines.
    """

    id: int
    name: str
    site: Site  # the block's first model line
    params: tuple[BatchedParam, ...]
    shared_slots: tuple[int, ...]
    outputs: tuple[str, ...]  # names of the per-instance outputs (handles per DFG node)
    fn: Callable
    hoisted: bool
    segment: SegmentOp | None = None
    source: str = ""
    filename: str = ""
    line_map: dict[int, Site] = field(default_factory=dict)

    @cached_property
    def batched_roles(self) -> tuple[str, ...]:
        """The role of each batched parameter (``"tensor"`` or a host role)."""
        return tuple(p.role for p in self.params)

    @cached_property
    def n_tensor_params(self) -> int:
        """How many batched parameters are tensors (the rest are host values)."""
        return self.batched_roles.count("tensor")

    @property
    def n_outputs(self) -> int:
        """How many outputs a DFG node of this block has (handles per node)."""
        return self.segment.n_outputs if self.segment is not None else len(self.outputs)

    def where(self) -> str:
        """``  at file:line: source`` of the block's first model line, for error messages."""
        return self.site.where()


# ---------------------------------------------------------------- the entry's result layout


class Layout:
    """Where the per-instance tensors lie in the entry's result: a tree shaped like the value.

    The compiler derives it from the result's kind; the runtime walks it to
    replace every handle by its tensor.
    """


@dataclass(frozen=True)
class TensorLayout(Layout):
    """A per-instance tensor (a handle while the run builds the DFG)."""


@dataclass(frozen=True)
class RaggedLayout(Layout):
    """A stacked list (a ragged tensor): a list of rows, stacked into one tensor in the result (``lead``: with a
    unit axis in front, ``(1, T, ...)``: ``kinds.LeadK``)."""

    rows: Layout
    lead: bool = False


class NoRows(list):
    """A stacked list with no rows cut from one with rows (``torch.topk(S, 0)``): empty, and ``like`` is the handle
    of a row of ``S``, whose shape and dtype a result of shape ``(0, *row)`` takes."""

    def __init__(self, like: int):
        super().__init__()
        self.like = like


@dataclass(frozen=True)
class OptionalLayout(Layout):
    """None or a value of layout ``inner``."""

    inner: Layout


@dataclass(frozen=True)
class HostOrLayout(Layout):
    """Host data on some paths, a value of layout ``inner`` on others (``kinds.HostOrK``): the skeleton returns
    the host value tagged as a ``HostResult`` (a handle is an int, so an int must be told apart), or None."""

    inner: Layout


@dataclass(frozen=True, slots=True)
class HostResult:
    """Host data (``value``: a Python number, None, ...) that the skeleton returns where the result's layout is a
    ``HostOrLayout``: the runtime hands back ``value`` itself."""

    value: Any


@dataclass(frozen=True)
class DictLayout(Layout):
    """A dict with fixed ``keys``, the value of each of layout ``items[i]``."""

    keys: tuple[str, ...]
    items: tuple[Layout, ...]


@dataclass(frozen=True)
class MapLayout(Layout):
    """A dict keyed by host data (``kinds.MapK``), each value of layout ``value``: its keys and their order are
    the instance's own; not ``followed`` when the compiler saw nothing stored in it (as ``ListLayout``)."""

    value: Layout
    followed: bool = True


@dataclass(frozen=True)
class TupleLayout(Layout):
    """A tuple whose item ``i`` has layout ``items[i]``."""

    items: tuple[Layout, ...]


@dataclass(frozen=True)
class ListLayout(Layout):
    """A list of values of layout ``elem``; not ``followed`` when the compiler saw nothing put in it
    (a non-empty one at run time holds values it did not follow: an internal error)."""

    elem: Layout
    followed: bool = True


@dataclass(frozen=True)
class HostLayout(Layout):
    """Plain Python data (numbers, strings, None, shared values): returned as it is."""


@dataclass(frozen=True)
class DynamicLayout(Layout):
    """A result of the dynamic tier: any value whose pytree leaves may be lazy tensors
    (``acrobat.runtime.lazy``), replaced by their values."""




@dataclass(frozen=True)
class RunList:
    """The list ``<entry parameter arg>.attr`` a shared module holds for the run, as the variable ``var`` of the
    run (``acrobat.analysis.run_lists`` rewrites the program so; ``acrobat.runtime.run_list`` holds the attribute
    while a batch runs)."""

    arg: int  # the entry parameter's position (the kind analysis's shared root ``("arg", arg)``)
    shared: int  # its position among the shared arguments a run passes
    attr: str
    var: str

    def settle(self, results: list, shared_args: tuple) -> list:
        """Per-instance results ``(result, list)`` as the rewritten entry returns them (tensors) -> the results;
        the last instance's list set on the module (``shared_args[self.shared]``), as plain calls, instance
        after instance, leave it."""
        setattr(shared_args[self.shared], self.attr, results[-1][1])
        return [r[0] for r in results]


@dataclass(frozen=True)
class Plan:
    """A compiled program as the runtime runs it (``Runtime(plan, kernels, slots).run(instances, shared)``).

    ``entry(rt, depth, instance, *shared) -> (result, depth)`` runs one
    instance's skeleton, adding DFG nodes to ``rt`` (§4.1); its depth
    counter starts at ``base``. ``prologue(args) -> slots`` computes the
    run's shared values from the entry's arguments (``None`` at the
    instance's place). ``needs_fibers``: the program reads tensor values in
    host code, so instances run on fibers (§4.2). ``result`` is the layout
    of the entry's result. ``dynamic``: the program runs in the dynamic tier
    (``acrobat.runtime.dynamic``): the entry is the user's own function, and
    this says why the static tier did not take it; ``site`` is its entry's line, ``signatures`` its operator
    signatures' blocks and kernels, kept across its runs (``acrobat.runtime.dynamic.Signatures``). ``fields``:
    the layout of each attribute that holds tensors and the program stores on the instance's objects
    (``node.state``), whose handles the runtime replaces by tensors on the objects after the run. ``run_list``:
    the list a shared module holds for the run (``RunList``), which the entry returns after its result; the
    runtime sets the last instance's on the module after the run. ``regions``: the program functions the
    skeleton runs as the user's own Python, their operators recorded as in the dynamic tier (``Runtime.region``).
    """

    entry: Callable
    prologue: Callable[[tuple], list]
    blocks: dict[int, BlockCode]
    base: int
    needs_fibers: bool
    result: Layout
    dynamic: str | None = None
    site: Site | None = None
    fields: Mapping[str, Layout] = field(default_factory=dict)
    run_list: RunList | None = None
    signatures: Any = None  # acrobat.runtime.dynamic.Signatures (a dynamic-tier program's, or its regions')
    regions: tuple = ()  # the dynamic regions the skeleton calls (``acrobat.analysis.regions.Region``)


# ---------------------------------------------------------------- values and kernels compiled code hands over


class Form:
    """A callable shared value the prologue makes for blocks (``acrobat.codegen.modules``: a module's
    batchable form, a method of a shared tensor).

    A pytree node whose leaves are its tensors: a compiled kernel takes them
    as inputs (parameter reuse, §5.1); ``key`` is what else its computation
    depends on (settings, method name), part of a kernel's signature.
    """

    key: Any


def flatten_forms(values: Sequence[Any]) -> tuple[list[Any], list[pytree.TreeSpec | None]]:
    """``values`` with every form replaced by its tensors (the kernel's inputs), and per value
    the spec to rebuild it (None: not a form, kept as it is). An ``nn.ParameterList`` (``p.biases[k]`` by a
    per-instance int, ``acrobat.runtime.lookup``) is kept as the tuple of its parameters: a pytree whose
    leaves the kernel takes as inputs, where the list itself would be one opaque constant."""
    flat: list[Any] = []
    specs: list[pytree.TreeSpec | None] = []
    for v in values:
        if isinstance(v, torch.nn.ParameterList):
            flat.append(tuple(v))
            specs.append(None)
        elif isinstance(v, Form):
            leaves, spec = pytree.tree_flatten(v)
            flat += leaves
            specs.append(spec)
        else:
            flat.append(v)
            specs.append(None)
    return flat, specs


def unflatten_forms(flat: Sequence[Any], specs: Sequence[pytree.TreeSpec | None]) -> list[Any]:
    """The inverse of ``flatten_forms``: the values, forms rebuilt around the tensors in ``flat``."""
    out: list[Any] = []
    i = 0
    for spec in specs:
        if spec is None:
            out.append(flat[i])
            i += 1
        else:
            out.append(pytree.tree_unflatten(flat[i:i + spec.num_leaves], spec))
            i += spec.num_leaves
    return out


class RowSpec(NamedTuple):
    """The per-instance shape and dtype of one batched tensor (the batch dimension left out).

    A named tuple: made and hashed in C, as the runtime does for every argument of every launch.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype

    @staticmethod
    def of(t: torch.Tensor) -> "RowSpec":
        """The row spec of a batched ``(B, ...)`` tensor."""
        return RowSpec(tuple(t.shape[1:]), t.dtype)


@dataclass
class KernelGraph:
    """A block's batched computation, traced for one argument signature (§5, App. C).

    ``gm(*storages, *inputs, *outs, *shared)`` (``shared`` flattened by
    ``flatten_forms``: module forms as their tensors, then all arguments
    into their pytree leaves) returns nothing: it writes
    output ``k`` into ``outs[k]``, ``(B, *out_rows[k].shape)``.
    ``storages[j]`` holds rows of spec ``storage_rows[j]``. ``inputs`` are
    per batched parameter one ``(B, ...)`` tensor (explicit gather; host
    parameters always), or for a tensor parameter with fused gather a
    ``(B,)`` index into ``storages[in_slots[i]]`` (§5.2).
    """

    gm: GraphModule
    out_rows: list[RowSpec]
    storage_rows: list[RowSpec]
    in_slots: list[int | None]  # per batched parameter: the storage its fused gather reads, or None
    # fake tensors (and leaves of shared arguments), dim 0 of batched inputs symbolic: what the compiler specializes on
    example_inputs: list[Any]


class Tracer(Protocol):
    """The kernel JIT a compiling backend is handed (``acrobat.codegen.kernels.trace_block``): ``block``'s
    batched form for arguments of per-instance specs ``in_rows`` and the shared arguments ``shared``,
    with fused gathers or not, on ``device``; ``hints``: the dim-0 sizes of its inputs the compiler is told
    to expect (None: typical sizes)."""

    def __call__(self, block: BlockCode, in_rows: Sequence[RowSpec], shared: Sequence[Any], fused: bool,
                 device: torch.device, hints: Sequence[int] | None = None) -> KernelGraph:
        ...
