"""The compiled backend: each static block as one TorchInductor kernel over arena memory (§5, App. C).

Per block and argument signature (per-instance shapes, shared shapes),
the tracer the program hands the backend (``acrobat.codegen.kernels.trace_block``,
an ``acrobat.runtime.plan.Tracer``) traces the batched aten graph once, with a
symbolic batch size, and TorchInductor (``torch._inductor.compile``: C++/
OpenMP on CPU, Triton on CUDA) turns it into fused loops around library
GEMMs. One compiled kernel serves every batch size (a launch of one row
is padded to two); ``RunStats.compiles`` counts compiles. The graph goes
to Inductor directly, not through Dynamo: acrobat's own signature key
replaces Dynamo's guards, which cost ~50 µs per launch.

Gathers (§5.2) come two ways: explicit (the runtime copies the rows into a
contiguous batch, a view when they are contiguous) and fused (the kernel
takes the arena storage and an index vector and reads in place). With
``gather="auto"`` each block chooses per launch size class
(``acrobat.runtime.threads.size_class``) by measurement (profile-guided,
App. C.1): a ``acrobat.runtime.tuning.Trial`` runs the two by turns of
whole runs, ``PROBE_RUNS`` each, and keeps fused (the default) unless
explicit takes at most ``GATHER_MARGIN`` of its median time per row. The
trial starts once the class's threads per launch are chosen and holds the
fused gather until then, so the two probes never time each other; a run
in which the launch compiled a variant is no sample. Settled choices are
kept on disk beside the kernels (``acrobat.runtime.remembered``): a new
process starts with them. ``report()`` says what was picked and which
blocks still probe. Kernels store their outputs straight into the arena rows
allocated for the launch (no copy after the kernel).

Each launch calls Inductor's generated ``call`` directly (the compiled
graph's ``current_callable``), not the callable ``torch._inductor.compile``
returns: that one wraps it in AOTAutograd's runtime wrappers (grad-mode
switches, version counter bumps, Dynamo's disable decorator), about 4.5 µs
a launch of a tiny block, half the launch (``scripts/launch_cost.py``).
Skipping them is sound because the graph returns nothing and keeps its
output stores (``copy_`` into arena rows) in the graph; a compiled graph
that returns something (AOTAutograd would apply some mutation after it)
is called through the wrappers instead.

``$ACROBAT_KERNEL_WRAPPER`` picks what ``call`` is: ``python`` (default,
Inductor's Python wrapper around the kernels) or ``cpp`` (Inductor's
``cpp_wrapper``: the schedule compiled into C++, called through one
pybind entry). Both cost about the same per launch on the CPU; see
BENCHMARKS.md ("Kernel call cost by wrapper").

Compiled kernels are cached on disk by Inductor's FX graph cache, under
``acrobat.cachedir.cache_dir()/inductor`` (``$ACROBAT_CACHE_DIR`` or
``~/.cache/acrobat``; a folder that cannot be used is replaced by a
temporary one with a warning, ``acrobat.cachedir.inductor_dir``), named to
Inductor only while acrobat compiles (``acrobat.cachedir.inductor_cache``); its key
includes Inductor's config, so the two wrappers' kernels are cached apart.
The backend runs inference only: the arena is overwritten by the next run.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence

import numpy as np
import torch
import torch._inductor
import torch.utils._pytree as pytree
from torch._dynamo.utils import counters
from torch._inductor.graph import GraphLowering
from torch._inductor.output_code import CompiledFxGraph

from acrobat.cachedir import inductor_cache, inductor_dir
from acrobat.errors import AcrobatError
from acrobat.runtime import kernel_facts
from acrobat.runtime.arena import Arena
from acrobat.runtime.dfg import POOL_SHIFT, ROW_BITS, Group, handle_matrix
from acrobat.runtime.eager import EagerKernel
from acrobat.runtime.gather import IndexBuffer, LaunchIndex, gather, host_columns, select_rows
from acrobat.runtime.progress import CompileNotes
from acrobat.runtime.plan import BlockCode, Form, KernelGraph, RowSpec, Tracer, flatten_forms
from acrobat.runtime.size_guard import SizeGuard
from acrobat.runtime.remembered import ChoiceMemory
from acrobat.runtime.threads import ThreadPolicy, class_rows, size_class
from acrobat.runtime.tier import TierChoice
from acrobat.runtime.tuning import Trial

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime

log = logging.getLogger("acrobat.compile")
COMPILE_LOCK = threading.Lock()  # kernel tracing and compiling are not thread-safe in torch

MAX_SPECIALIZED = 8  # kernels per signature compiled for sizes the compiler specialized on (SizeGuard)
PROBE_RUNS = 5
"""Runs per gather mode a (block, launch size class) is timed in before its choice."""
GATHER_MARGIN = 0.95
"""Explicit gathers replace the fused default only when they take at most this share of its time per row."""
GATHER_MODES = ("auto", "explicit", "fused")
WRAPPER_ENV = "ACROBAT_KERNEL_WRAPPER"
WRAPPERS = ("python", "cpp")  # Inductor's Python wrapper, or its cpp_wrapper


def kernel_wrapper() -> str:
    """The wrapper kernels are compiled with: ``$ACROBAT_KERNEL_WRAPPER`` (default ``python``).

    Raises:
        AcrobatError: an unknown wrapper named.
    """
    name = os.environ.get(WRAPPER_ENV, "python") or "python"
    if name not in WRAPPERS:
        raise AcrobatError(f"${WRAPPER_ENV}={name!r}: choose one of {', '.join(WRAPPERS)}")
    return name


@dataclass
class Variant:
    """One compiled kernel of a block: for one gather mode and argument signature (see ``KernelGraph``)."""

    out_rows: list[RowSpec]  # per block output: its per-instance shape and dtype
    storage_rows: list[RowSpec]  # the arena storages the kernel's fused gathers read, by row spec
    in_slots: list[int | None]
    fn: Callable  # fn([*inputs, *outs, *shared]): Inductor's boxed call (it empties the list)
    code: list[str] = field(default_factory=list)  # Inductor's generated wrapper module(s)
    guard: SizeGuard | None = None  # the sizes the compiler specialized the kernel on (None: every size)
    specialized: dict[tuple[int, ...], "Variant"] = field(default_factory=dict)  # recompiled for other sizes
    launches: int = 0
    first_run: int = 0  # serial of the run it was compiled in (its launches there are not profiled)
    fused_columns: list[int] = field(default_factory=list)  # tensor columns (in tensor-parameter order) read fused
    # per-launch layout, fixed at compile time:
    all_fused: bool = False  # every tensor column is read fused
    all_simple: bool = False  # ... and there are no host columns: the index rows are the batched inputs
    out_groups: list[tuple[tuple[int, ...], torch.dtype, list[int]]] = field(default_factory=list)  # per output spec
    storage_pids: list[int] | None = None  # arena pool ids of ``storage_rows`` (set on the first launch)
    storages: list[torch.Tensor] = field(default_factory=list)  # the pools' storages of ``storage_pids`` ...
    storages_at: int = -1  # ... as of this count of arena growths (a pool that grows gets a new storage)


@dataclass
class Layout:
    """Per argument signature of a block: where its tensor columns' pools are, and its variants."""

    shared_sig: int  # id of the shared arguments' signature
    specs: tuple[RowSpec, ...]  # per batched argument its per-instance spec
    pool_base: np.ndarray | None  # per tensor column ``pool id << POOL_SHIFT``; None: some spec has no pool
    variants: dict[bool, Variant] = field(default_factory=dict)  # fused gather or not -> the kernel


class CompiledKernel:
    """A block's batched launch through compiled kernels (see the module docstring).

    Raises (when called):
        AcrobatError: a shared tensor requires grad with grad mode on
            (the compiled backend is inference only; use the eager backend).
    """

    def __init__(self, backend: "CompiledBackend", block: BlockCode, trace: Tracer):
        self.backend = backend
        self.block = block
        self.trace = trace
        self.variants: dict[tuple, Variant] = {}
        self.forced: str | None = None if backend.gather == "auto" else backend.gather
        # (shared signature id, launch size class) -> its gather trial ("fused" or "explicit"; gather="auto")
        self.trials: dict[tuple[int, int], Trial[str]] = {}
        self._keys: dict[int, str | None] = {}  # shared signature id -> the block's key in the backend's memory
        self._run = 0  # serial of the run of the last launch
        # this run's shared arguments: the id of their signature, and them flattened for the kernel
        self._shared_sig = 0
        self._flat_shared: list = []
        self._shared_ids: dict[tuple, int] = {}  # signature of shared arguments -> small id (cheap to hash in keys)
        # (shared signature id (it fixes the device), argument specs) -> tensor columns' pools and variants
        self._layouts: dict[tuple[int, tuple[RowSpec, ...]], Layout] = {}
        self._last: Layout | None = None  # the layout of the last launch whose values all lay in the arena
        self._index = IndexBuffer(block.n_tensor_params)
        self._no_hosts: list[None] = [None] * block.n_tensor_params  # the host columns of a block without any
        self.eager: EagerKernel | None = None  # set when TorchInductor could not compile the block
        self.eager_reason = ""

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        if self.eager is not None:
            return self.eager(g, rt)
        if self._run != rt.serial:  # the block's first launch in this run
            self._start_run(rt)
        t0 = time.perf_counter()
        stats = rt.stats
        compile_ms, compiles = stats.compile_ms, stats.compiles  # a compile in this launch counts as compiling
        n = g.size()
        trial = None
        if self.forced is not None:
            mode = self.forced
        elif not self.block.n_tensor_params:
            mode = "explicit"  # nothing to gather
        else:
            trial = self._trial(n, rt)
            if trial.choice is not None:
                mode, trial = trial.choice, None
            elif rt.threads is not None and not rt.threads.settled(self.block.id, n):
                mode, trial = trial.default, None  # the threads trial first, at the default gather
            else:
                mode = trial.setting(rt.serial)
                if trial.choice is not None:
                    self._keep(trial, n)
                    trial = None
        layout, hosts, index = self._locate(g, n, rt)
        fused = index is not None and mode == "fused"
        variant = layout.variants.get(fused)
        if variant is None:
            try:
                variant = layout.variants[fused] = self._variant(fused, layout.specs, rt)
            except AcrobatError:
                raise
            except Exception as exc:  # noqa: BLE001 - the kernel compiler's limit, not the model's error
                return self._give_up(exc, g, rt)
        rows = n + (n == 1)  # a launch of one row is padded to two
        args = self._arguments(variant, g, index, hosts, layout.specs, n, rt)
        outs, places = _alloc_outputs(variant.out_groups, len(variant.out_rows), rows, rt)
        t1 = time.perf_counter()
        args += outs
        args += self._flat_shared
        if variant.guard is not None and not variant.guard.holds(args):
            try:
                variant = self._for_sizes(variant, fused, layout.specs, args, rt)
            except AcrobatError:
                raise
            except Exception as exc:  # noqa: BLE001 - the kernel compiler's limit, not the model's error
                return self._give_up(exc, g, rt)
        variant.fn(args)
        if rt.sync:
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        stats.gather_ms += (t1 - t0) * 1e3 - (stats.compile_ms - compile_ms)
        stats.kernel_ms += (t2 - t1) * 1e3
        if trial is not None:
            if stats.compiles != compiles or variant.first_run == rt.serial:
                trial.discard(rt.serial)  # a run that compiled (or first ran) a variant is no sample
            else:
                trial.record(mode, (t2 - t0) * 1e6, n, rt.serial)
        variant.launches += 1
        place = rt.table.place
        for k, pid, start in places:
            place(g, k, pid, start, variant.out_rows[k])
        return tuple(outs) if rows == n else tuple(o[:n] for o in outs)

    def _give_up(self, exc: Exception, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        """TorchInductor could not trace or compile the block: run it eagerly (vmap) from now on, and say so.

        A model error (a shape mismatch) fails the same way eagerly, where the
        runtime's diagnosis names the instance and source line.
        """
        self.eager_reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        log.warning("block %s: TorchInductor could not compile it (%s); it runs eagerly (vmap)",
                    self.block.name, self.eager_reason)
        self.eager = EagerKernel(self.block)
        return self.eager(g, rt)

    # -- pieces --------------------------------------------------------------
    def _shared_signature(self, shared: Sequence[Any]) -> tuple[int, list]:
        """An id of the shapes, strides and dtypes of a run's shared arguments ``shared`` (one per distinct
        signature), and the arguments as the kernel takes them (module forms flattened into their
        tensors, then everything into pytree leaves)."""
        flat, _ = flatten_forms(shared)
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in flat):
            raise AcrobatError("the compiled backend runs inference only (outputs live in reused arena memory); "
                               "run under torch.inference_mode()/no_grad(), or use backend='eager' for training")
        sig = tuple(_signature(x) for x in shared)
        leaves = pytree.tree_leaves(flat)  # the kernel's own arguments (Inductor's call takes pytree leaves)
        return self._shared_ids.setdefault(sig, len(self._shared_ids)), leaves

    def _start_run(self, rt: "Runtime") -> None:
        """The block's first launch in run ``rt``: take the run's shared arguments."""
        self._shared_sig, self._flat_shared = self._shared_signature(rt.shared[self.block.id])
        self._run = rt.serial

    def _trial(self, rows: int, rt: "Runtime") -> Trial[str]:
        """The gather trial of this run's shared signature and launches of ``rows`` rows; a new one starts
        with the choice remembered for the block (``acrobat.runtime.remembered``), if any."""
        key = (self._shared_sig, size_class(rows))
        trial = self.trials.get(key)
        if trial is None:
            trial = self.trials[key] = Trial("fused", "explicit", PROBE_RUNS, GATHER_MARGIN)
            if self._shared_sig not in self._keys:
                pool = rt.threads.pool if rt.threads is not None else torch.get_num_threads()  # (not the launch's)
                self._keys[self._shared_sig] = self.backend.memory.key(self.block, rt.shared[self.block.id],
                                                                       rt.device, pool)
            kept = self.backend.memory.recall(self._keys[self._shared_sig], "gather", key[1])
            if kept in ("fused", "explicit"):
                trial.choice = kept
        return trial

    def _keep(self, trial: Trial[str], rows: int) -> None:
        """Keep a gather choice just made, and log it."""
        assert trial.choice is not None
        log.info("block %s, %s rows: %s gather (explicit %.2f µs/row, fused %.2f µs/row)", self.block.name,
                 class_rows(size_class(rows)), trial.choice, trial.us_per_row("explicit"), trial.us_per_row("fused"))
        self.backend.memory.keep(self._keys.get(self._shared_sig), self.block.name, "gather", size_class(rows),
                                 trial.choice)

    def probing(self) -> list[str]:
        """The launch sizes of this block still probing their gather mode, e.g. ``treelstm_1 (8-15 rows)``."""
        return [f"{self.block.name} ({class_rows(size)} rows)" for (_, size), t in sorted(self.trials.items())
                if t.choice is None and self.eager is None]

    def _locate(self, g: Group, n: int,
                rt: "Runtime") -> tuple[Layout, list[torch.Tensor | None], LaunchIndex | None]:
        """A launch's layout (argument specs, pools), host columns and arena rows (``n`` per tensor column in
        ``LaunchIndex.located``; None when some value is not in the pool of its column's spec).

        A block without host parameters first tries the layout of its last launch: when every value lies in
        that layout's pools (one native pass), the values have its specs (a pool holds rows of one spec),
        so the specs need not be looked up from the values.
        """
        last = self._last
        if last is not None and not g.hosts and last.shared_sig == self._shared_sig:
            index = self._index.get(n)
            if rt.table.arena_rows(g.tensor_buf, last.pool_base, index.located) is not None:  # type: ignore[arg-type]
                return last, self._no_hosts, index
        hosts = host_columns(g, rt.device) if g.hosts else self._no_hosts
        specs = self._specs(g, hosts, rt)
        layout = self._layouts.get((self._shared_sig, specs)) or self._layout(specs, hosts, rt)
        if layout.pool_base is None:  # no tensor columns, or some spec has no pool yet
            return layout, hosts, None
        index = self._index.get(n)
        if rt.table.arena_rows(g.tensor_buf, layout.pool_base, index.located) is None:
            return layout, hosts, None
        if not g.hosts:
            self._last = layout
        return layout, hosts, index

    def _specs(self, g: Group, hosts: list[torch.Tensor | None], rt: "Runtime") -> tuple[RowSpec, ...]:
        """The per-instance spec of each batched argument (the kernel signature), from its first value."""
        specs = rt.table.specs
        heads = g.heads(self.block.n_tensor_params)
        if hosts is self._no_hosts:  # tensor parameters only
            return tuple([specs.get(h >> ROW_BITS) or _spec(h, rt) for h in heads])
        it = iter(heads)
        return tuple([RowSpec.of(h) if h is not None else _spec(next(it), rt) for h in hosts])

    def _layout(self, specs: tuple[RowSpec, ...], hosts: list[torch.Tensor | None], rt: "Runtime") -> "Layout":
        """What a launch of argument specs ``specs`` needs besides its values: per tensor column,
        ``id << POOL_SHIFT`` of the arena pool of its spec as a (columns,) array (None when a column's
        spec has no pool yet: its values cannot be in the arena); kept once every pool exists
        (a pool keeps its id when it grows)."""
        pools = rt.arena.pools  # type: ignore[union-attr]
        ids = [pools[(s.shape, s.dtype, rt.device)].pid if (s.shape, s.dtype, rt.device) in pools else -1
               for s, h in zip(specs, hosts) if h is None]
        if ids and min(ids) < 0:
            return Layout(self._shared_sig, specs, None)  # not kept: the pools may exist next launch
        base = np.array(ids, dtype=np.int64) << POOL_SHIFT if ids else None
        layout = self._layouts[(self._shared_sig, specs)] = Layout(self._shared_sig, specs, base)
        return layout

    def _variant(self, fused: bool, specs: tuple[RowSpec, ...], rt: "Runtime") -> Variant:
        key = (fused, specs, self._shared_sig)
        variant = self.variants.get(key)
        if variant is None:
            variant = self.variants[key] = self._compile(list(specs), rt.shared[self.block.id], fused, rt)
        return variant

    def _for_sizes(self, general: Variant, fused: bool, specs: tuple[RowSpec, ...], args: list,
                   rt: "Runtime") -> Variant:
        """The variant of ``general``'s signature for the sizes of a launch's ``args``, where the compiler
        specialized ``general`` on other sizes (``SizeGuard``): compiled for these sizes on first need, at
        most ``MAX_SPECIALIZED`` per signature.

        Raises:
            RuntimeError: too many sizes, or a kernel compiled for these sizes does not hold for them
                (the caller runs the block eagerly from then on).
        """
        assert general.guard is not None
        sizes = general.guard.sizes(args)
        variant = general.specialized.get(sizes)
        if variant is None:
            if len(general.specialized) >= MAX_SPECIALIZED:
                raise RuntimeError(f"TorchInductor specialized the kernel on its sizes ({general.guard}) and "
                                   f"{MAX_SPECIALIZED} sizes were compiled already")
            n_inputs = len(general.storage_rows) + len(general.in_slots) + len(general.out_rows)
            hints = [a.shape[0] for a in args[:n_inputs]]
            variant = general.specialized[sizes] = self._compile(list(specs), rt.shared[self.block.id], fused, rt,
                                                                 hints)
        if variant.guard is not None and not variant.guard.holds(args):
            raise RuntimeError(f"TorchInductor specialized the kernel on sizes ({variant.guard}) other than "
                               f"the launch's {sizes}")
        return variant

    def _arguments(self, v: Variant, g: Group, index: LaunchIndex | None,
                   hosts: list[torch.Tensor | None], specs: tuple[RowSpec, ...], n: int,
                   rt: "Runtime") -> list[torch.Tensor]:
        """The kernel's inputs before the outputs: storages and batched arguments (see ``KernelGraph``).

        ``g.tensors`` holds the tensor columns' handles (node after node); ``index`` their arena
        rows (None when some are not in the arena); ``specs`` the per-instance spec of every batched
        argument. The fused gathers' index vectors are ``index``'s (§5.2: written in place, no tensor
        made per launch); on another device they go there as one tensor (one copy, not one per column).
        A launch of batch size ``n`` = 1 is padded to 2 (its row twice):
        kernels are compiled for sizes >= 2, where the compiler may assume a size is not 1.
        """
        reps = 2 if n == 1 else 1
        arena = rt.arena
        assert arena is not None
        if v.storages_at != arena.growths:  # a pool grew: its rows are in a new storage (App. C)
            if v.storage_pids is None:
                v.storage_pids = [arena.pools[(r.shape, r.dtype, rt.device)].pid for r in v.storage_rows]
            v.storages = [arena.by_pid[pid].storage for pid in v.storage_pids]
            v.storages_at = arena.growths
        args = v.storages.copy()
        if v.fused_columns:
            assert index is not None
            if reps > 1:
                np.copyto(index.padded, index.located)  # (columns, 1) -> (columns, 2)
            vectors = index.vectors if rt.device.type == "cpu" else index.matrix.to(rt.device).unbind(0)
            if v.all_simple:  # tensor columns only, all fused: the index vectors are the batched inputs
                args += vectors
                return args
        col = 0
        handles = None
        for h, spec, slot in zip(hosts, specs, v.in_slots):
            if h is not None:
                args.append(h if reps == 1 else torch.cat([h, h]))
                continue
            if slot is not None:
                args.append(vectors[col])
            elif index is not None:
                storage = arena.pool(spec.shape, spec.dtype, rt.device).storage
                x = select_rows(storage, index.located[col], rt.device)
                args.append(x if reps == 1 else torch.cat([x, x]))
            else:  # compiled kernels take contiguous rows (a gathered view may be strided)
                if handles is None:
                    handles = handle_matrix(g.tensors, self.block.n_tensor_params)
                x = gather(rt.table, handles[col], rt.device).contiguous()
                args.append(x if reps == 1 else torch.cat([x, x]))
            col += 1
        return args

    def _compile(self, in_rows: list[RowSpec], shared: Sequence[Any], fused: bool, rt: "Runtime",
                 hints: Sequence[int] | None = None) -> Variant:
        """Trace the variant for ``in_rows``, ``shared`` and ``fused`` and compile it with TorchInductor (or
        load it from the disk cache); ``hints``: the dim-0 sizes to compile for (see ``trace_block``).

        Raises:
            Exception: tracing or Inductor failed (the caller runs the block eagerly); such a failure is kept
                (``kernel_facts``, keyed by the block's code and signature) and raised at once by later
                processes instead of spending the compile again (tens of seconds)."""
        t0 = time.perf_counter()
        # Tracing (torch.fx's patcher) and Inductor's hooks are process-global: one compile at a time.
        with COMPILE_LOCK, self.backend.notes.progress.kernel(self.block.name, self.block.site.loc,
                                                         "fused" if fused else "explicit") as hit:
            hits = cache_hits()
            key = kernel_facts.block_key(self.block.source, (in_rows, tuple(map(_signature, shared)), fused, hints),
                                         self.backend.wrapper)
            failed = (kernel_facts.load(key) or {}).get("failed")
            if failed:
                raise RuntimeError(f"TorchInductor failed on this block before ({failed}; kept in "
                                   f"{kernel_facts.where(key)}: delete it to try again)")
            try:
                graph = self.trace(self.block, in_rows, shared, fused, rt.device, hints)
                fn, code, guard = compile_graph(graph, self.backend.wrapper)
            except (AcrobatError, OSError, MemoryError):
                raise  # the model's, or the machine's: not kept
            except Exception as exc:  # the kernel compiler's limit: kept, so no later process spends it again
                first = str(exc).splitlines()[0][:160] if str(exc) else ""
                kernel_facts.save(key, {"failed": f"{type(exc).__name__}: {first}"})
                raise
            hit.append(cache_hits() > hits)
        tensor_slots = [slot for slot, role in zip(graph.in_slots, self.block.batched_roles) if role == "tensor"]
        fused_columns = [j for j, slot in enumerate(tensor_slots) if slot is not None]
        variant = Variant(graph.out_rows, graph.storage_rows, graph.in_slots, fn, code, guard=guard,
                          first_run=rt.serial, fused_columns=fused_columns)  # the traced graph is not kept
        variant.all_fused = len(fused_columns) == len(tensor_slots)
        variant.all_simple = variant.all_fused and len(tensor_slots) == len(graph.in_slots)
        variant.out_groups = [(r.shape, r.dtype, [k for k, o in enumerate(graph.out_rows) if o == r])
                              for r in dict.fromkeys(graph.out_rows)]
        rt.stats.compiles += 1
        rt.stats.compile_ms += (time.perf_counter() - t0) * 1e3
        return variant


def compile_graph(graph: KernelGraph, wrapper: str,
                  train: bool = False) -> tuple[Callable, list[str], SizeGuard | None]:
    """``graph`` compiled by TorchInductor with ``wrapper`` (see ``WRAPPERS``), or loaded from its disk cache:
    a boxed call of the kernel (``fn(list of the arguments' leaves)``, see ``_direct_call``), the generated
    wrapper module(s)' source, and the sizes the kernel holds for (None: every size; ``SizeGuard``).

    ``train``: a training graph (``acrobat.runtime.compiled_train``): compiled with grad mode on through
    AOTAutograd for the example inputs that require grad, into a forward and a backward kernel (the
    backward compiled now, not at the first ``backward``); the call is AOTAutograd's, which autograd records.

    A graph Inductor specializes on its sizes (fixes one to a constant) is compiled afresh for the sizes
    ``graph`` hints, never taken from Inductor's cache, which would hand back one compiled for other sizes;
    a graph whose sizes Inductor only bounded (a float32 sum over the batch rows in a backward kernel uses
    a cascade sum above 4096 rows) is taken from the cache with the bound learnt on its fresh compile
    (``kernel_facts``). Callers hold ``COMPILE_LOCK`` (the hooks used are process-global)."""
    key = kernel_facts.graph_key(graph, wrapper)
    known = kernel_facts.load(key)
    use_cache = known is None or not known.get("specialized", True)
    fn, code, hit = _inductor_compile(graph, wrapper, use_cache, train)
    if hit and known is None:  # cached before acrobat kept its facts: compile it once more to learn them
        fn, code, hit = _inductor_compile(graph, wrapper, use_cache=False, train=train)
    if hit and known is not None:
        return fn, code, SizeGuard.of_fact(known["guard"]) if known.get("guard") else None
    guard = SizeGuard.of(graph.example_inputs)
    if known is None:
        fact = guard.fact() if guard is not None else None
        kernel_facts.save(key, {"specialized": guard is not None and (guard.specializes or fact is None),
                                "guard": fact})
    return fn, code, guard


def _inductor_compile(graph: KernelGraph, wrapper: str, use_cache: bool,
                      train: bool = False) -> tuple[Callable, list[str], bool]:
    """``graph`` through ``torch._inductor.compile`` (with its FX graph and AOTAutograd caches, or without;
    ``train``: see ``compile_graph``): the boxed call, the wrapper module's source, and whether it came from
    the cache."""
    code: list[str] = []
    compiled: list[CompiledFxGraph] = []
    before = GraphLowering.save_output_code, CompiledFxGraph.post_compile
    GraphLowering.save_output_code = code.append  # Inductor's hook, called on fresh compiles and cache hits

    def post_compile(self: CompiledFxGraph, *args: Any, **kwargs: Any) -> None:  # fresh compiles and cache hits
        before[1](self, *args, **kwargs)
        compiled.append(self)

    CompiledFxGraph.post_compile = post_compile  # type: ignore[method-assign]
    hits = cache_hits()
    try:
        # An inference graph: no autograd bookkeeping in the kernel's wrapper. Without per-call size
        # asserts: the key fixes the shared arguments' strides, and every batched input, index and
        # output the runtime passes is contiguous with the traced row shape (about 1 µs per input).
        # A training graph keeps them (its inputs come from autograd-recorded gathers).
        patch = {"size_asserts": train, "cpp_wrapper": wrapper == "cpp", "fx_graph_cache": use_cache}
        with inductor_cache(), torch.enable_grad() if train else torch.no_grad(), \
                torch._inductor.config.patch(patch), \
                torch._functorch.config.patch(enable_autograd_cache=use_cache, force_non_lazy_backward_lowering=train), \
                warnings.catch_warnings():
            # torch's own: AOTAutograd deep-copies the backward graph, whose pytree spec warns
            warnings.filterwarnings("ignore", message=".*LeafSpec.* is deprecated", category=FutureWarning)
            wrapped = torch._inductor.compile(graph.gm, graph.example_inputs)
    finally:
        GraphLowering.save_output_code, CompiledFxGraph.post_compile = before
    return _direct_call(compiled, wrapped), code, cache_hits() > hits


def cache_hits() -> int:
    """How many graphs this process loaded from Inductor's FX graph cache or AOTAutograd's cache (a training
    graph's hit is AOTAutograd's)."""
    return counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]


def _direct_call(compiled: list[CompiledFxGraph], wrapped: Callable) -> Callable:
    """A boxed call of the kernel (on its arguments' pytree leaves): Inductor's own ``call`` of the one graph
    compiled, when the graph returns nothing (see the module docstring); else ``wrapped`` (what
    ``torch._inductor.compile`` returned: a training graph's forward and backward are two)."""
    if len(compiled) == 1 and compiled[0].current_callable is not None and compiled[0].output_strides == []:
        return compiled[0].current_callable
    return lambda leaves: wrapped(*leaves)


def _alloc_outputs(out_groups: list[tuple[tuple[int, ...], torch.dtype, list[int]]], n_out: int, rows: int,
                   rt: "Runtime") -> tuple[list[torch.Tensor], list[tuple[int, int, int]]]:
    """Arena rows for ``rows`` rows of every output: the outputs' views of their pools, and
    (output, pool id, first row) of each.

    Outputs of one spec (``out_groups``: shape, dtype, output indices) are allocated in one call: a pool
    that grew between two of them would leave the first one's rows in a storage it no longer uses.
    """
    outs: list[torch.Tensor] = [None] * n_out  # type: ignore[list-item]
    places = []
    alloc = rt.arena.alloc  # type: ignore[union-attr]
    for shape, dtype, ks in out_groups:
        pool, start = alloc(shape, dtype, rt.device, rows * len(ks))
        storage = pool.storage
        for k in ks:
            outs[k] = storage[start:start + rows]
            places.append((k, pool.pid, start))
            start += rows
    return outs, places


def _spec(h: int, rt: "Runtime") -> RowSpec:
    """The row spec of handle ``h``'s value (recorded when it was placed in the arena, else from its tensor)."""
    spec = rt.table.spec_of(h)
    return spec if spec is not None else RowSpec.of(rt.table.tensor_of(h))


def _signature(x: Any) -> Any:
    """A hashable description of a shared argument: shape, strides, dtype and device for tensors, else the value."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.stride(), x.dtype, x.device)
    if isinstance(x, (list, tuple, torch.nn.ParameterList)):
        return tuple(_signature(i) for i in x)
    if isinstance(x, Form):  # a module form: its settings and its tensors' signatures
        return type(x), x.key, tuple(_signature(i) for i in pytree.tree_leaves(x))
    return x


class CompiledBackend:
    """Blocks as TorchInductor kernels with arena memory and explicit/fused/auto gathers (§5).

    ``gather`` is ``"auto"`` (profile-guided per block and launch size class), ``"explicit"`` or
    ``"fused"``. ``arena`` holds block outputs across runs.

    Raises:
        ValueError: unknown gather mode.
        AcrobatError: unknown ``$ACROBAT_KERNEL_WRAPPER``.
    """

    trains = False  # inference only: ``acrobat.runtime.backend.check_trains`` refuses runs under autograd

    def __init__(self, gather: str = "auto"):
        if gather not in GATHER_MODES:
            raise ValueError(f"unknown gather mode {gather!r}; choose one of {', '.join(GATHER_MODES)}")
        self.gather = gather
        self.wrapper = kernel_wrapper()
        self.name = "compiled" if gather == "auto" else f"compiled-{gather}"
        self.arena = Arena()
        self.kernels: list[CompiledKernel] = []
        self._lock = threading.Lock()
        self.notes = CompileNotes()  # this run's compiles (``compiling``)
        self.threads = ThreadPolicy()
        # settled choices, kept across processes (a gather chosen under forced threads per launch kept apart)
        self.memory = ChoiceMemory(self.name, f"{self.wrapper} wrapper, threads per launch {self.threads.mode}")
        self.threads.memory = self.memory
        self.tiers = TierChoice()  # programs the static tier did not take: dynamic tier or plain calls

    def exclusive(self) -> ContextManager[Any]:
        """Held for a whole run: runs share the arena (overwritten by each run) and the gather probes."""
        return self._lock

    def compiling(self, program: str, n_blocks: int) -> ContextManager[None]:
        """Held around each run of ``program`` (``n_blocks`` static blocks with kernels): on the first run a
        line saying the blocks are compiled or loaded from the disk cache; during each compile a live
        line; after a run that compiled, how many kernels were compiled and loaded, in how long
        (``acrobat.runtime.progress.CompileNotes``)."""
        return self.notes.run(program, n_blocks, inductor_dir())

    def kernel(self, block: BlockCode, trace: Tracer) -> CompiledKernel:
        k = CompiledKernel(self, block, trace)
        self.kernels.append(k)
        return k

    def probing(self) -> list[str]:
        """The blocks (and launch rows) still probing a choice: ``gather`` or ``threads``, e.g.
        ``treelstm_1 (8-15 rows): threads``; empty when every launched block is tuned."""
        gather = [f"{p}: gather" for k in self.kernels for p in k.probing()]
        return gather + [f"{p}: threads" for p in self.threads.probing()] + self.tiers.probing()

    def tuned(self) -> bool:
        """Whether nothing is probing (``probing``): every block launched so far has its gather mode and its
        threads per launch chosen for every launch size class it ran at (a block that gathers no tensor,
        runs eagerly or has its gather forced has none to choose)."""
        return not self.probing()

    def report(self) -> str:
        """Per block: compiled variants, launches and the gather mode in use (per launch size class); the
        arena's size; each block's threads per launch; then what is still probing."""
        lines = [f"{'block':<34} {'kernels':>7} {'launches':>9}  gather"]
        for k in self.kernels:
            if k.eager is not None:
                lines.append(f"{k.block.name:<34} {0:>7} {'-':>9}  eager, not compiled ({k.eager_reason})")
                continue
            if not k.variants:
                continue
            launches = sum(v.launches for v in k.variants.values())
            if not k.block.n_tensor_params:
                hows = ["none (no tensor inputs)"]
            elif k.forced is not None:
                hows = [f"{k.forced} (forced)"]
            else:
                hows = [f"{class_rows(size)} rows: {_gather_how(t)}" for (_, size), t in sorted(k.trials.items())]
            lines.append(f"{k.block.name:<34} {len(k.variants):>7} {launches:>9}  {hows[0] if hows else '-'}")
            lines += [f"{'':<53}{how}" for how in hows[1:]]
        lines.append(f"arena: {self.arena.nbytes / 2 ** 20:.1f} MiB in {len(self.arena.pools)} pool(s), "
                     f"{self.arena.growths} allocation(s)")
        threads = self.threads.report()
        probing = self.probing()
        tail = [f"still probing ({len(probing)}): {'; '.join(probing)}" if probing else "tuned: nothing is probing"]
        return "\n".join(lines + ([threads] if threads else []) + tail)


def _gather_how(t: Trial[str]) -> str:
    """A gather trial's state for the report: its choice and the measured µs per row, or its progress."""
    measured = (f"explicit {t.us_per_row('explicit'):.2f} µs/row, fused {t.us_per_row('fused'):.2f} µs/row"
                if t.samples.get("explicit") and t.samples.get("fused") else "")
    if t.choice is None:
        return f"probing ({t.progress()})" + (f": {measured}" if measured else "")
    return f"{t.choice} (profiled: {measured})" if measured else f"{t.choice} (remembered)"


def kernel_listing(backend: CompiledBackend) -> str:
    """Per block and compiled variant: the generated kernels and Inductor's ``call`` schedule.

    The ``call`` function of Inductor's wrapper is the launch's whole
    schedule: each ``cpp_fused_*`` / ``triton_*`` line is one generated
    (fused) kernel, each ``extern_kernels.*`` a library call (GEMMs).
    """
    parts = []
    for k in backend.kernels:
        for (fused, in_rows, _), v in k.variants.items():
            head = (f"# block {k.block.name} ({k.block.site.loc}), {'fused' if fused else 'explicit'} gather, "
                    f"inputs {[r.shape for r in in_rows]}, {v.launches} launches")
            if not v.code:
                parts.append(head + "\n#   (no generated code captured: compiled before this process captured it)")
                continue
            call = _call_function(v.code[0])
            kernels = sorted(set(re.findall(r"\b((?:cpp|triton)_\w+?)(?:\.run)?\(", call)))
            externs = re.findall(r"extern_kernels\.(\w+)\(", call)
            parts.append(f"{head}\n#   {len(kernels)} generated kernel(s): {', '.join(kernels) or '-'}"
                         f"\n#   library calls: {', '.join(externs) or '-'}\n{call}")
    return "\n\n".join(parts) if parts else "(no kernels compiled yet)"


def _call_function(code: str) -> str:
    """The ``call`` function of an Inductor wrapper module's source (top level, or a method of ``Runner``)."""
    lines = code.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def call(")), None)
    if start is None:
        return code
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    return "\n".join(line[indent:] for line in lines[start:end]).rstrip()
