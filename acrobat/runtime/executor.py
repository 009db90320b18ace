"""The runtime: build the DFG by running the skeleton, then run it group by group (§4).

A ``Runtime`` runs one batch of a compiled program's ``Plan``
(``acrobat.runtime.plan``) with a backend's kernel per block. Without
tensor-dependent control flow every instance's skeleton runs to the end
first (lazy DFG construction, §4.1), then groups run in (phase, depth)
order, each as one batched call of its block; results are read from the
groups' output tensors through the handles. With tensor-dependent control
flow instances run on fibers and the DFG is flushed whenever they all wait (§4.2).
With the eager backend everything is out of place (``index_select``,
``cat``, slicing), so autograd can run ``backward`` through a batched run;
the compiled backend writes into arena memory and runs inference only.

The backends' side of the kernel seam is defined here, where it is used:
a ``Backend`` makes a ``BlockKernel`` per block (``acrobat.runtime.eager``,
``acrobat.runtime.compiled``; named in ``acrobat.runtime.backend``).
"""

from __future__ import annotations

import gc
import itertools
import time
import traceback
from typing import Any, Callable, ContextManager, Iterator, Protocol, Sequence

import torch
import torch.utils._pytree as pytree

from acrobat.diagnosis import mark_limit, user_line
from acrobat.errors import AcrobatError, BatchError, InstanceError, LimitError, ShapeError
from acrobat.runtime.accumulate import GradSink
from acrobat.runtime.arena import Arena
from acrobat.runtime.dfg import (OUTPUT_STEP, ROW_BITS, ROW_MASK, STAGE_BITS, STAGE_MASK, Group, Handle, ValueTable,
                                 group_key, handle_matrix, new_dfg, snapshot)
from acrobat.runtime.dynamic import MAX_OUTPUTS, Recorder, lazy_left_in, replace_lazy_in, shared_host_state
from acrobat.runtime.fibers import FiberScheduler
from acrobat.runtime.gather import gather_values, host_tensor
from acrobat.runtime.lazy import Lazy, meta_of
from acrobat.runtime.padded import padded_node
from acrobat.runtime.plan import (BlockCode, DictLayout, DynamicLayout, Form, HostOrLayout, HostResult, Layout,
                                  ListLayout, MapLayout, NoRows, OptionalLayout, Plan, RaggedLayout, RecurrentOp,
                                  RowSpec, Site, TensorLayout, Tracer, TupleLayout)
from acrobat.runtime.stats import BlockStats, RunStats
from acrobat.runtime.threads import ThreadPolicy
from acrobat.runtime.tier import TierChoice


_SERIALS = itertools.count(1)
STAGE_LIMIT = STAGE_MASK
"""The last stage of a program phase: a staged loop's later iterations stay in it (``Runtime.enter_stage``)."""


class BlockKernel(Protocol):
    """One block's batched launch: ``kernel(group, runtime) -> tuple of (B, ...) outputs``.

    Adds its gather time to ``runtime.stats.gather_ms`` and its kernel
    time to ``runtime.stats.kernel_ms`` (ms).
    """

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        ...


class Backend(Protocol):
    """What the runtime needs from a kernel backend: per-block kernels, and the arena they write to (or None)."""

    name: str
    arena: Arena | None
    threads: ThreadPolicy  # threads per launch, chosen per block (kept across runs)
    tiers: TierChoice  # dynamic tier or plain calls, per batch size, for programs the static tier did not take
    trains: bool  # autograd may record through its runs (``loss.backward()`` through the results)

    def kernel(self, block: BlockCode, trace: Tracer) -> BlockKernel:
        """The batched launch of ``block``; ``trace`` builds its batched kernel graph (for a backend that compiles)."""
        ...

    def report(self) -> str:
        """What the backend did (compiles, gather choices), for the run report; empty if nothing."""
        ...

    def tuned(self) -> bool:
        """Whether every block launched so far has made its run-time choices (threads per launch; on the
        compiled backend also its gather), so later runs time nothing on trial: what a server's warm-up
        waits for. True for a backend that tunes nothing."""
        ...

    def probing(self) -> list[str]:
        """What is still probing (block, launch rows and which choice), for the run report; empty exactly
        when ``tuned``."""
        ...

    def exclusive(self) -> ContextManager[Any]:
        """A context held for a whole run: concurrent runs of one backend wait for each other
        where they share state (the compiled backend's arena), else a no-op."""
        ...

    def compiling(self, program: str, n_blocks: int) -> ContextManager[None]:
        """Held around every run of ``program`` (``n_blocks`` kernel blocks): a backend that compiles shows its
        compiles and says what it compiled or loaded from its cache (``acrobat.runtime.progress``), else a
        no-op."""
        ...


class Runtime:
    """One batched run of ``plan``: the DFG under construction and its execution.

    ``kernels[i]`` is the batched launch of block ``i`` (from a backend);
    ``slots`` are the run's shared values (computed by ``plan.prologue``,
    read by the skeleton as ``_S``). With an
    ``arena``, block outputs live in its pools and results are copied out
    at the end of the run. ``device`` defaults to the first shared tensor's.
    ``threads`` (the backend's, kept across runs) runs each launch on 1 CPU
    thread or all, per block (``acrobat.runtime.threads``); None: torch's setting.
    """

    def __init__(self, plan: Plan, kernels: dict[int, BlockKernel], slots: list, arena: Arena | None = None,
                 device: torch.device | None = None, threads: ThreadPolicy | None = None):
        self.serial = next(_SERIALS)  # unique per run (``id`` may be reused by a later run)
        self.plan = plan
        self.slots = slots
        self.shared = {bid: [slots[i] for i in b.shared_slots] for bid, b in plan.blocks.items()}
        records = plan.dynamic is not None or bool(plan.regions)  # the dynamic tier records operators in this run
        self.kernels = kernels if not records else dict(kernels)  # the dynamic tier adds its own
        self.blocks = plan.blocks if not records else dict(plan.blocks)
        self.arena = arena
        self.device = device if device is not None else _device_of(slots)
        # launches on 1 thread or all, per block; None when the policy does not govern this device or pool
        self.threads = threads if threads is not None and threads.governs(self.device) else None
        self.sync = False  # synchronize the device around timed regions (profiling on CUDA)
        outputs = max((b.n_outputs for b in plan.blocks.values()), default=1)
        self.table = ValueTable(outputs if not records else max(outputs, MAX_OUTPUTS))
        self.dfg = new_dfg(self.table, self.blocks)  # node insertion, the running instance and phase (native)
        self.recorder: Recorder | None = None  # the dynamic tier's, while a dynamic program (or region) runs
        self.host_state: Callable[[], tuple] | None = None  # the shared arguments' host state (``region``)
        self.groups: dict[int, Group] = self.dfg.groups  # pending groups by group_key(phase, depth, block id)
        self.lifted: dict[int, Handle] = {}
        self.numbers: dict[int, list] = {}  # a computed group output as Python numbers, by handle >> ROW_BITS (item)
        self.stats = RunStats()
        self.scheduler: FiberScheduler | None = None
        self.exec_ms = 0.0  # time spent executing groups (scheduling, gathers, kernels)
        self.trace: list[tuple[int, str, int, int, int]] | None = None  # (instance, block, phase, stage, depth)
        self.sinks: dict[int, GradSink] = {}  # gradient buffers by source id (``acrobat.runtime.accumulate``)
        # the fields stored on the instances' objects (``store``), by object id: (object, the instance that
        # stores on it, {attribute: (value, phase, depth)})
        self.objects: dict[int, tuple[Any, int, dict[str, tuple[Any, int, int]]]] = {}

    # -- called by the generated skeleton ----------------------------------
    def segment(self, block: BlockCode, depth: int, rows: list[Handle], *state: Handle) -> Any:
        """Add a segment node of ``block`` (an operator over the list ``rows``) at ``depth``; its lazy result.

        The group keeps all its nodes' rows in one handle array and each
        node's length (``acrobat.runtime.segments`` runs it). The result is
        one handle, a ``torch.return_types`` pair for ``max``/``min``, a
        list of one handle per row for ``softmax``/``log_softmax``/``argsort``,
        or a ``torch.return_types.sort`` pair of such lists for ``sort``/``topk``.
        A recurrent module's node (``RecurrentOp``) also holds the instance's initial ``state`` handles, after
        its rows; its result is ``(rows, h_n)`` (``(rows, (h_n, c_n))`` of an LSTM), the output sequence a list of
        one handle per row (``acrobat.runtime.recurrent`` runs it).

        Raises:
            InstanceError: the list is empty (PyTorch cannot stack it either).
        """
        op = block.segment
        assert op is not None
        if not rows:
            raise mark_limit(InstanceError(f"instance {self.dfg.inst}: {op.op} over an empty list of tensors "
                                           f"(torch.stack of an empty list fails; sum() of one is the int 0, which "
                                           f"acrobat cannot batch with tensors)\n{block.where()}", self.dfg.inst))
        g = self.dfg.group(depth, block.id)
        first = len(g.tensor_buf) // 8
        row = self.dfg.node_hosts(depth, block.id, (len(rows),), *rows, *state) - g.base
        if isinstance(op, RecurrentOp):  # the output rows are numbered without the nodes' state handles
            first -= row * op.states
            out = [g.base + first + j for j in range(len(rows))]
            finals = [g.base + k * OUTPUT_STEP + row for k in range(1, op.n_outputs)]
            return out, finals[0] if len(finals) == 1 else tuple(finals)
        if op.ragged_out and op.n_outputs == 2:  # sort, topk: (values, indices), one handle per row each
            return torch.return_types.sort(([g.base + first + j for j in range(len(rows))],  # type: ignore[arg-type]
                                            [g.base + OUTPUT_STEP + first + j for j in range(len(rows))]))
        if op.ragged_out:
            return [g.base + first + j for j in range(len(rows))]
        if op.n_outputs == 2:
            return getattr(torch.return_types, op.op)((g.base + row, g.base + OUTPUT_STEP + row))
        return g.base + row

    def add_block(self, block: BlockCode, kernel: BlockKernel, shared: list) -> None:
        """A block the dynamic tier made in this run (``acrobat.runtime.dynamic``): its kernel and shared values."""
        self.blocks[block.id] = block
        self.kernels[block.id] = kernel
        self.shared[block.id] = shared

    snapshot = staticmethod(snapshot)  # a host argument as it is now (``acrobat.runtime.dfg.snapshot``)
    host_result = HostResult  # host data returned where the result may also be a tensor (``HostOrLayout``)

    @staticmethod
    def retuple(like: tuple, items: Sequence[Any]) -> tuple:
        """``tuple_like``: a tuple the skeleton rebuilds (its items coerced) keeps a namedtuple's class."""
        return tuple_like(like, items)

    def lift(self, t: Any) -> Handle:
        """A shared tensor used where a per-instance tensor is expected."""
        v = self.lifted.get(id(t))
        if v is None:
            g, v = self.table.lifted(host_tensor(t, self.device))
            self.lifted[id(t)] = v
            if self.arena is not None:  # in the arena too, so that kernels can gather it with the rest
                row = g.outs[0]  # type: ignore[index]
                pool, start = self.arena.alloc(tuple(row.shape[1:]), row.dtype, self.device, 1)
                pool.storage[start] = row[0]
                self.table.place(g, 0, pool.pid, start, RowSpec.of(row))
        return v

    def value(self, x: Handle) -> torch.Tensor:
        """The concrete tensor of a lazy value, for host code (a sync point, §4.2).

        On a fiber, waits for the next flush when the value is not computed yet.
        """
        g, k, row = self.table.locate(x)
        if g.outs is None:
            self._wait(g)
        return g.outputs()[k][row]

    def drain(self) -> None:
        """On a fiber, wait until every group pending now has run: before the dynamic tier writes into a tensor
        in place for an instance, so that the launches recorded before the write read it as it was (§4.2's
        value read, for all pending work)."""
        groups = self.dfg.groups
        if groups:
            self._wait(groups[max(groups)])

    def _wait(self, g: Group) -> None:
        """On a fiber, wait until pending group ``g`` has run (§4.2)."""
        if self.scheduler is None:
            raise AcrobatError("internal: a tensor value was read before it was computed outside a fiber")
        self.scheduler.wait(group_key(g.phase, g.depth, g.block.id))  # type: ignore[union-attr]

    def item(self, x: Handle) -> bool | int | float:
        """``value(x).item()``, for host code that wants a one-element value as a Python number (``x.item()``,
        ``int(x)``, ``float(x)``, ``bool(x)``; §4.2). The first read of a group output converts the whole
        output with one ``tolist()``; later reads of it index that list (no tensor per read).

        Raises:
            RuntimeError: the value has more than one element (torch's own error, as ``.item()`` raises).
        """
        src = x >> ROW_BITS
        column = self.numbers.get(src)
        if column is None:
            g, k, row = self.table.locate(x)
            if g.outs is None:
                self._wait(g)  # other fibers may read the same output meanwhile
            column = self.numbers.get(src)
            if column is None:
                out = g.outputs()[k]
                if out[row].numel() != 1:
                    return out[row].item()
                column = self.numbers[src] = out.reshape(len(out)).tolist()
        return column[x & ROW_MASK]

    def store(self, obj: Any, attr: str, value: Any, d: int) -> None:
        """``obj.attr = value`` for the running instance: a field holding handles, ready at depth ``d`` of the
        current phase (§4.1). Set on the object as Python sets it; ``settle_fields`` puts the tensors there
        after the run.

        Raises:
            InstanceError: another instance of the batch stores on ``obj`` too (see ``_shared_object``).
        """
        inst = self.dfg.inst
        rec = self.objects.get(id(obj))
        if rec is None:
            rec = self.objects[id(obj)] = (obj, inst, {})
        elif rec[1] != inst:
            raise self._shared_object(obj, attr, rec[1])
        setattr(obj, attr, value)
        rec[2][attr] = (value, self.dfg.phase, d)

    def load(self, obj: Any, attr: str, d: int) -> tuple[Any, int]:
        """``obj.attr`` of a field the running instance stored (``store``), and the depth counter ``d`` raised
        to the depth the value was stored at when that was in the current phase: a node reading it runs after
        the nodes computing it, wherever the store happened (a map loop's earlier iteration, a concurrent
        call; inline depth computation, §4.1).

        Raises:
            InstanceError: the running instance has not stored ``attr`` on ``obj`` in this run.
        """
        rec = self.objects.get(id(obj))
        if rec is not None and rec[1] != self.dfg.inst:
            raise self._shared_object(obj, attr, rec[1])
        got = rec[2].get(attr) if rec is not None else None
        if got is None:
            raise mark_limit(InstanceError(
                f"instance {self.dfg.inst}: `.{attr}` of a {type(obj).__name__} is read before the model stored it "
                f"in this run: acrobat's static tier reads a stored attribute only after the instance stores it on "
                f"that object (a value left from before the run is not batched); store it first, or pass the value "
                f"as an argument", self.dfg.inst))
        value, phase, stored = got
        return value, stored if phase == self.dfg.phase and stored > d else d

    def _shared_object(self, obj: Any, attr: str, other: int) -> InstanceError:
        """The error for a field ``attr`` of ``obj`` that instance ``other`` stores and the running one uses:
        one object shared by two instances, whose stored values a batched run cannot keep apart."""
        return mark_limit(InstanceError(
            f"instances {other} and {self.dfg.inst} share a {type(obj).__name__} object whose `.{attr}` the model "
            f"stores: a batched run keeps one value per object, so instances may not share the objects the model "
            f"stores on; give every instance its own (`copy.deepcopy(instance)`)", self.dfg.inst))

    def settle_fields(self) -> None:
        """After a static-tier run: the handles of every field stored on the instances' objects (``store``)
        replaced by their tensors on the objects, as plain calls leave them (one gather for all)."""
        layouts = self.plan.fields
        handles: list[Handle] = []
        for _, _, values in self.objects.values():
            for attr, (value, _, _) in values.items():
                _collect(value, layouts[attr], handles)
        tensors = iter(self.copied(handles) if handles else [])
        for obj, _, values in self.objects.values():
            for attr, (value, _, _) in values.items():
                setattr(obj, attr, _rebuild(value, layouts[attr], tensors))

    def fork(self, thunks: Sequence[Callable[[], Any]]) -> list:
        """Run independent calls: as child fibers when running on fibers, else one after the other."""
        if self.scheduler is None:
            return [t() for t in thunks]
        return self.scheduler.fork(thunks)

    def enter_phase(self, phase: int) -> None:
        """Start program phase ``phase`` for the running instance (a barrier on fibers)."""
        self._enter(phase << STAGE_BITS)

    def enter_stage(self, index: int, stages: int, d: int) -> int:
        """Start stage ``index`` (of ``stages``) of the running instance's iteration of a staged loop (§4.1,
        ``acrobat.analysis.phases``); stage 0 starts the next iteration. Iteration t's stage s is stage
        ``1 + t * stages + s`` of the program phase, the same for every instance. Returns the depth
        counter to go on with: the base depth (a stage is a phase of its own).

        Past ``STAGE_LIMIT`` stages the instance stays in the last one and keeps its depth counter:
        depth scheduling within that stage, still in dependency order.
        """
        stage = self.dfg.phase & STAGE_MASK
        if stage >= STAGE_LIMIT:
            return d
        first = stage - (stage - 1) % stages if stage else 1  # the running iteration's stage 0
        new = first + (index if index or not stage else stages)
        self._enter((self.dfg.phase & ~STAGE_MASK) | min(new, STAGE_LIMIT))
        return self.plan.base

    def _enter(self, phase: int) -> None:
        """Move the running instance to ``phase`` (``program phase << STAGE_BITS | stage``); a barrier on fibers."""
        if self.scheduler is not None:
            self.scheduler.barrier(phase)
        self.dfg.phase = phase

    # -- execution ------------------------------------------------------------
    def run(self, instances: Sequence, shared_args: tuple) -> list:
        """Build the DFG of all instances, execute it, return per-instance results.

        ``shared_args`` are the entry's shared arguments. With
        ``plan.needs_fibers`` (programs with tensor-dependent control flow), every
        instance runs on its own fiber and the DFG is flushed whenever all
        of them wait for values (§4.2); otherwise each instance's skeleton
        runs to the end, then the whole DFG executes once (§4.1).
        """
        plan = self.plan
        if len(instances) == 0:
            raise BatchError("empty batch: run() needs at least one instance")
        # The DFG holds no reference cycles (refcounting frees it), so the cycle
        # collector is paused: its passes over thousands of fresh nodes cost
        # 100+ ms spikes in DFG construction.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        if self.arena is not None:
            self.arena.reset()
        try:
            t0 = time.perf_counter()
            if plan.dynamic is not None:
                results = self.run_dynamic(instances, shared_args)
            elif plan.needs_fibers:
                self.scheduler = FiberScheduler(self, self.region_recorder(shared_args) if plan.regions else None)
                results = self.scheduler.run(plan.entry, plan.base, instances, shared_args)
            else:
                results = []
                for i, inst in enumerate(instances):
                    self.dfg.inst = i
                    self.dfg.phase = 0
                    results.append(plan.entry(self, plan.base, inst, *shared_args)[0])
            self.flush()
            t_copy = time.perf_counter()
            out = self.results(results, plan.result)
            if plan.run_list is not None:
                out = plan.run_list.settle(out, shared_args)
            if plan.dynamic is not None:
                self.settle(out, instances, shared_args)
            elif self.objects:
                self.settle_fields()
            t1 = time.perf_counter()
            self.stats.gather_ms += (t1 - t_copy) * 1e3  # copying results out: memory copies, not construction
            self.exec_ms += (t1 - t_copy) * 1e3
        finally:
            if gc_was_enabled:
                gc.enable()
            self.scheduler = None
        s = self.stats
        s.instances = len(instances)
        s.runs = 1
        s.total_ms = (t1 - t0) * 1e3
        s.construct_ms = s.total_ms - self.exec_ms
        s.schedule_ms = self.exec_ms - s.kernel_ms - s.gather_ms - s.compile_ms
        return out

    def run_dynamic(self, instances: Sequence, shared_args: tuple) -> list:
        """Run a program of the dynamic tier: every instance's own Python on a fiber, its torch operators
        recorded as DFG nodes by a ``Recorder`` (``acrobat.runtime.dynamic``); the results with their lazy
        values still in them (``results`` replaces them)."""
        assert self.plan.site is not None and self.plan.signatures is not None
        rec = self.recorder = Recorder(self, shared_args, self.plan.site, self.plan.signatures)
        rec.stats.reason = self.plan.dynamic or ""
        self.scheduler = FiberScheduler(self, rec, shared_host_state(shared_args))
        with rec.mode:
            results = self.scheduler.run(self.plan.entry, self.plan.base, instances, shared_args)
        self.stats.dynamic = rec.stats
        return results

    def region_recorder(self, shared_args: tuple) -> Recorder:
        """The recorder of a static program's dynamic regions (``acrobat.analysis.regions``) for this run: their
        operators become DFG nodes of this run's DFG, in blocks numbered after the static ones."""
        first = self.plan.regions[0]
        assert self.plan.signatures is not None
        rec = self.recorder = Recorder(self, shared_args, Site(first.where, f"def {first.name}"), self.plan.signatures)
        rec.stats.regions = tuple(r.describe() for r in self.plan.regions)
        self.stats.dynamic = rec.stats
        self.host_state = shared_host_state(shared_args)
        return rec

    def padded(self, block: BlockCode, d: int, args: tuple) -> tuple[Any, int]:
        """The running instance's node of padded function ``block`` at depth ``d`` (``args``: its arguments);
        its result handles and the depth counter past it (``acrobat.runtime.padded.padded_node``)."""
        return padded_node(self, block, d, args)

    def region(self, region: Any, layouts: tuple[Layout, ...], d: int, args: tuple) -> tuple[Any, int]:
        """Run dynamic region ``region`` (``acrobat.analysis.regions.Region``) for the running instance, on its
        fiber, from depth counter ``d``: the user's own function on ``args`` (of ``layouts``), its tensor
        arguments as lazy values and its torch operators recorded as DFG nodes of this run
        (``acrobat.runtime.dynamic``); its result as handles for the static code, and the depth counter
        raised past every node that computes them (§4.1: a static node reading them launches after them).

        A tensor argument's value is waited for (§4.2: every instance's fiber reaches the call, then one flush
        computes their arguments), which gives its shape and dtype; as a lazy value it is ready at ``d - 1``,
        so the region's first operators are nodes at ``d``, where a static block's would be.

        Raises:
            InstanceError: the region's code failed for the instance (names it and the line), or it changed the
                host state of a shared argument (which the static program does not order).
            ShapeError: it returned what its ``return`` statements did not show (``static_limit``: the batch
                runs again in the dynamic tier).
        """
        rec = self.recorder
        assert rec is not None
        inst = self.dfg.inst
        values = [self._lazy(a, k, d) for a, k in zip(args, layouts)]
        before = self.host_state() if self.host_state is not None else None
        given = _argument_state(values)
        try:
            with rec.mode:
                out = region.call(values)
        except AcrobatError:
            raise
        except Exception as exc:  # the model's own code failed: as plain Python would for this instance
            raise InstanceError(f"instance {inst}: {type(exc).__name__}: {exc} (in the dynamic region "
                                f"`{region.name}`){user_line(exc)}", inst) from exc
        if _argument_state(values) != given:
            changed = InstanceError(
                f"instance {inst}: the dynamic region `{region.name}` ({region.where}) changed an argument in place "
                f"(`h += 1` of a tensor, `xs += [h]` of a list), which a plain call's caller sees and the static "
                f"program around it does not: write it out of place (`h = h + 1`), or run the program with "
                f"Options(static=False)", inst)
            changed.static_limit = "a dynamic region changing its argument in place"  # type: ignore[attr-defined]
            raise changed
        if before is not None and self.host_state() != before:  # type: ignore[misc]
            raise mark_limit(InstanceError(
                f"instance {inst}: the dynamic region `{region.name}` ({region.where}) changed host state of a "
                f"shared argument, which the static program around it does not order as plain calls do: keep "
                f"such state out of the function, or run the program with Options(static=False)", inst))
        depth = d
        try:
            if region.arity is None:
                h, depth = _region_handle(self, out, depth)
                return h, depth
            if not isinstance(out, tuple) or len(out) != region.arity:
                raise TypeError
            handles = []
            for x in out:
                h, depth = _region_handle(self, x, depth)
                handles.append(h)
            return tuple(handles), depth
        except TypeError:
            want = "a tensor" if region.arity is None else f"a tuple of {region.arity} tensors"
            err = ShapeError(f"instance {inst}: the dynamic region `{region.name}` ({region.where}) returned "
                             f"{type(out).__name__}, where its `return` statements give {want}", instance=inst)
            err.static_limit = "a dynamic region's result the static program cannot take"  # type: ignore[attr-defined]
            raise err from None

    def _lazy(self, x: Any, layout: Layout, d: int) -> Any:
        """Argument ``x`` (of ``layout``) of a dynamic region as the region takes it: its handles as lazy values of
        their computed shapes and dtypes, ready at depth ``d - 1`` (``region``)."""
        match layout:
            case TensorLayout():
                t = self.value(x)
                return Lazy(x, meta_of(t.shape, t.dtype), d - 1, t.requires_grad, self.recorder)
            case OptionalLayout(inner=inner) | HostOrLayout(inner=inner):
                return x if x is None or isinstance(x, HostResult) else self._lazy(x, inner, d)
            case TupleLayout(items=items):
                return tuple(self._lazy(v, k, d) for v, k in zip(x, items))
            case ListLayout(elem=elem):
                return [self._lazy(v, elem, d) for v in x]
            case DictLayout(keys=keys, items=items):
                return {key: self._lazy(x[key], k, d) for key, k in zip(keys, items)}
        return x

    def flush(self, upto: int | None = None) -> None:
        """Execute pending groups in (phase, depth, block) order: all, or those with keys up to ``upto``.

        Groups past ``upto`` stay pending, so nodes other fibers add at
        their depths later still join them (a partial flush, §4.2). In a
        partial flush, hoisted groups (static depth, App. A.1) run only when
        the flush needs their values (``upto`` itself, or an input of a group
        that runs); the others stay pending, so the nodes later steps of
        every fiber add at the same static depth join them: one launch per
        run instead of one per flush.
        """
        t0 = time.perf_counter()
        keys = [k for k in sorted(self.groups) if upto is None or k <= upto]
        if upto is not None:
            keys = self._needed(keys, upto)
        for key in keys:
            g = self.groups.pop(key)
            phase, stage = g.phase >> STAGE_BITS, g.phase & STAGE_MASK
            if self.trace is not None:
                self.trace.extend((inst, g.block.name, phase, stage, g.depth) for inst in g.insts)  # type: ignore[union-attr]
            self.run_group(g)
            self.stats.phases = max(self.stats.phases, phase + 1)
            self.stats.stages = max(self.stats.stages, stage)
        self.exec_ms += (time.perf_counter() - t0) * 1e3

    def _needed(self, keys: list[int], upto: int) -> list[int]:
        """Of the pending ``keys`` (sorted, all up to ``upto``), those a partial flush runs: every
        inline group, ``upto``, and the hoisted groups whose outputs they read, directly or through
        other hoisted groups (a group's inputs always have smaller keys, so one backward pass finds them)."""
        groups = self.groups
        hoisted = {groups[k].gid for k in keys if k != upto and groups[k].block.hoisted}  # type: ignore[union-attr]
        if not hoisted:
            return keys
        needed: set[int] = set()
        run: list[int] = []
        for key in reversed(keys):
            g = groups[key]
            if g.gid in hoisted and g.gid not in needed:
                continue  # not needed yet: more nodes may join it
            run.append(key)
            needed |= self.table.read_groups(g) & hoisted
        run.reverse()
        return run

    def run_group(self, g: Group) -> None:
        """Run one group as one batched call of its block: gather, call, keep the (B, ...) outputs."""
        block = g.block
        assert block is not None
        if g.size() > ROW_MASK:
            raise mark_limit(BatchError(f"{g.size()} DFG nodes in one launch of block {block.name}: at most "
                                        f"{ROW_MASK} are supported; run smaller batches"))
        try:
            if self.threads is None:
                outs = self.kernels[block.id](g, self)
            else:
                outs = self.threads.run(block.id, block.name, g.size(), self.stats, self.kernels[block.id], g, self)
        except AcrobatError:
            raise
        except Exception as exc:  # a failing operator: find the instance and the source line
            try:
                err = self.diagnose(g, exc)
            except Exception:  # noqa: BLE001 - the diagnosis itself failed: report the launch's failure
                err = BatchError(f"static block {block.name} failed: {type(exc).__name__}: {exc}\n{block.where()}")
            raise err from exc
        g.outs = outs
        s = self.stats
        s.kernel_launches += 1
        s.dfg_nodes += g.size()
        b = s.blocks.get(block.id)
        if b is None:
            b = s.blocks[block.id] = BlockStats(block.name, hoisted=block.hoisted)
        b.launches += 1
        b.nodes += g.size()

    def results(self, results: list, layout: Layout) -> list:
        """The instances' results (each of layout ``layout``) with every lazy value replaced by its tensor,
        copied out of the arena (whose rows the next run reuses) or the groups' outputs: one
        ``index_select`` per arena pool or group output, not one copy per value."""
        copied = self.copied
        if isinstance(layout, DynamicLayout):  # any value: its lazy pytree leaves (acrobat.runtime.lazy)
            leaves = [pytree.tree_flatten(r) for r in results]
            lazy = [x.h for ls, _ in leaves for x in ls if type(x) is Lazy]
            values = iter(copied(lazy) if lazy else [])
            return [pytree.tree_unflatten([next(values) if type(x) is Lazy else x for x in ls], spec)
                    for ls, spec in leaves]
        flat = _flat_tensors(layout)
        if flat == 0:  # one tensor per instance
            return copied(results)
        if flat is not None:  # a tuple of tensors per instance: a column per position (usually one pool each)
            return [tuple_like(r, row) for r, row in zip(results, zip(*[copied(col) for col in zip(*results)]))]
        handles: list[Handle] = []
        for r in results:
            _collect(r, layout, handles)
        if not handles and not _tags(layout):
            return results
        it = iter(copied(handles) if handles else [])
        return [_rebuild(r, layout, it) for r in results]

    def copied(self, handles: Sequence[Handle]) -> list[torch.Tensor]:
        """The tensors of ``handles``, copied out of the arena (whose rows the next run reuses) or the groups'
        outputs: one ``index_select`` per arena pool or group output, not one copy per value."""
        storages = [p.storage for p in self.arena.pools.values()] if self.arena is not None else []  # by pool id
        return gather_values(self.table, handle_matrix(handles, 1)[0], self.device, storages)

    def settle(self, *roots: Any) -> None:
        """After a dynamic-tier run: the lazy values the user's code left on its objects (``node.state =
        cell(...)`` on an instance, ``self.outputs.append(h)`` on a module, a returned object's attributes)
        replaced by their tensors, as plain calls leave them (one gather for all)."""
        left = lazy_left_in(roots)
        if not left:
            return
        values = self.copied([x.h for x in left])
        by_handle = {x.h: v for x, v in zip(left, values)}
        replace_lazy_in(roots, lambda x: by_handle[x.h])

    def diagnose(self, g: Group, exc: Exception) -> Exception:
        """Re-run a failed group instance by instance to name the instance and source line.

        Returns ``ShapeError`` (an operator fails for an instance, or instances
        disagree on shapes or dtypes), ``InstanceError`` (a host operand is no number) or
        ``BatchError`` (only the batched form fails); each names the model source line.
        """
        block = g.block
        assert block is not None
        per_instance = []
        for row, inst in enumerate(g.insts):
            args = g.node_args(row)
            values = []
            for p, a in zip(block.params, args):
                try:
                    values.append(self.table.tensor(a) if p.role == "tensor" else host_tensor(a, self.device))
                except Exception as e:  # noqa: BLE001 - a host value that is no number (a str, None, ...)
                    return InstanceError(f"instance {inst}: the host value `{p.source}` "
                                      f"({type(a).__name__} {a!r}) is an operand of a tensor operator but is no "
                                      f"number ({type(e).__name__}: {e})\n{p.site.where()}\n"
                                      f"  (static block {block.name})", inst)
            per_instance.append(values)
            try:
                block.fn(*values, *self.shared[block.id])
            except Exception as e:  # noqa: BLE001 - reported with its location
                err = ShapeError(f"instance {inst}: {type(e).__name__}: {e}\n{_failing_line(block, e).where()}\n"
                                 f"  (static block {block.name})", instance=inst)
                if isinstance(e, LimitError):  # the static tier's limit (Program.run reruns it in the dynamic tier)
                    err.static_limit = "a limit of the static tier"  # type: ignore[attr-defined]
                return err
        for j, p in enumerate(block.params):
            shapes = [tuple(v[j].shape) for v in per_instance]
            if len(set(shapes)) > 1:
                first = shapes[0]
                odd = next(r for r, s in enumerate(shapes) if s != first)
                err = ShapeError(
                    f"instances {g.insts[0]} and {g.insts[odd]} give `{p.source}` different shapes {first} vs "
                    f"{shapes[odd]} in static block {block.name}: instances batched together must agree on tensor "
                    f"shapes\n{p.site.where()}", instance=g.insts[odd])
                err.static_limit = "the static tier batches tensors of equal shapes only"  # type: ignore[attr-defined]
                return err
            dtypes = [v[j].dtype for v in per_instance]
            if len(set(dtypes)) > 1:  # (`acc` of a cat fold: float32 items in one instance, float64 in another)
                odd = next(r for r, d in enumerate(dtypes) if d != dtypes[0])
                err = ShapeError(
                    f"instances {g.insts[0]} and {g.insts[odd]} give `{p.source}` different dtypes {dtypes[0]} vs "
                    f"{dtypes[odd]} in static block {block.name}: instances batched together must agree on tensor "
                    f"dtypes\n{p.site.where()}", instance=g.insts[odd])
                err.static_limit = "the static tier batches tensors of equal dtypes only"  # type: ignore[attr-defined]
                return err
        why = ("an operator there has no batching rule, or reads a tensor's value inside the block"
               if self.arena is None else "an operator there has no batching rule or is rejected by the kernel "
               "compiler; backend='eager' runs the block without compiling it")
        return BatchError(f"static block {block.name} runs instance by instance but its batched form "
                          f"fails: {type(exc).__name__}: {exc}\n{_failing_line(block, exc).where()}\n  ({why})")


def _argument_state(x: Any) -> Any:
    """What a dynamic region's arguments ``x`` (``Runtime._lazy``'s values) hold, to tell whether the region
    changed one in place: each lazy value's handle (an in-place write makes it refer to the instance's written
    copy: ``Recorder.write_own``) and the items of each list and dict (by identity, their order kept)."""
    if type(x) is Lazy:
        return x.h
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(_argument_state(v) for v in x))
    if isinstance(x, dict):
        return tuple((k, _argument_state(v)) for k, v in x.items())
    return id(x)


def _region_handle(rt: Runtime, x: Any, depth: int) -> tuple[Handle, int]:
    """The handle of tensor ``x`` a dynamic region returned (a lazy value's; a tensor it made or a shared one, as
    a one-row value of the run's DFG), and the depth counter ``depth`` raised past the node computing it.

    Raises:
        TypeError: ``x`` is no tensor.
    """
    if type(x) is Lazy:
        return x.h, max(depth, x.depth + 1)
    if isinstance(x, torch.Tensor):
        return rt.table.lifted(x)[1], depth
    raise TypeError


def _flat_tensors(layout: Layout) -> int | None:
    """0 if results of ``layout`` are single tensors, n if they are tuples of n tensors, else None."""
    if isinstance(layout, TensorLayout):
        return 0
    if isinstance(layout, TupleLayout) and layout.items and all(isinstance(k, TensorLayout) for k in layout.items):
        return len(layout.items)
    return None


def _tags(layout: Layout) -> bool:
    """Whether results of ``layout`` may hold host values the skeleton tagged (``HostResult``: a ``HostOrLayout``)."""
    match layout:
        case HostOrLayout():
            return True
        case OptionalLayout(inner=inner) | RaggedLayout(rows=inner) | ListLayout(elem=inner) | MapLayout(value=inner):
            return _tags(inner)
        case DictLayout(items=items) | TupleLayout(items=items):
            return any(_tags(k) for k in items)
    return False


def _collect(x: Any, layout: Layout, handles: list[Handle]) -> None:
    """Append the handles in ``x`` (a result of layout ``layout``) to ``handles``, depth first."""
    match layout:
        case TensorLayout():
            handles.append(x)
        case RaggedLayout(rows=rows):  # a stacked list: its rows
            if isinstance(x, NoRows):  # no rows: one of the list it was cut from, for its shape
                handles.append(x.like)
            for i in x:
                _collect(i, rows, handles)
        case OptionalLayout(inner=inner) | HostOrLayout(inner=inner):
            if x is not None and not isinstance(x, HostResult):
                _collect(x, inner, handles)
        case DictLayout(keys=keys, items=items):
            for key, k in zip(keys, items):
                _collect(x[key], k, handles)
        case TupleLayout(items=items):
            for i, k in zip(x, items):
                _collect(i, k, handles)
        case ListLayout(elem=elem, followed=followed) | MapLayout(value=elem, followed=followed):
            if x and not followed:  # the analysis saw nothing put in: never hand out what is there
                raise AcrobatError(f"internal: a result {type(x).__name__} holds {len(x)} value(s) of a kind the "
                                   "compiler did not follow; please report this model")
            for i in x.values() if isinstance(layout, MapLayout) else x:
                _collect(i, elem, handles)


def _rebuild(x: Any, layout: Layout, tensors: Iterator[torch.Tensor]) -> Any:
    """``x`` (a result of layout ``layout``) with its handles replaced by the next ``tensors``, depth first."""
    match layout:
        case TensorLayout():
            return next(tensors)
        case RaggedLayout(rows=rows, lead=lead):
            if isinstance(x, NoRows):
                like = next(tensors)
                return like.new_empty((0, *like.shape))
            stacked = torch.stack([_rebuild(i, rows, tensors) for i in x])
            return stacked.unsqueeze(0) if lead else stacked
        case OptionalLayout(inner=inner):
            return None if x is None else _rebuild(x, inner, tensors)
        case HostOrLayout(inner=inner):
            return x.value if isinstance(x, HostResult) else None if x is None else _rebuild(x, inner, tensors)
        case DictLayout(keys=keys, items=items):
            return {key: _rebuild(x[key], k, tensors) for key, k in zip(keys, items)}
        case TupleLayout(items=items):
            return tuple_like(x, [_rebuild(i, k, tensors) for i, k in zip(x, items)])
        case MapLayout(value=value):  # in the instance's own key order
            return {key: _rebuild(v, value, tensors) for key, v in x.items()}
        case ListLayout(elem=elem):  # a tuple where the program holds one (`cs, hs = zip(*pairs)`), as Python
            items = [_rebuild(i, elem, tensors) for i in x]
            return tuple(items) if isinstance(x, tuple) else items
    return x


def tuple_like(x: tuple, items: Sequence[Any]) -> tuple:
    """``items`` as a tuple of ``x``'s type: a namedtuple (``Pair(a=..., b=...)``) keeps its class, as plain Python
    has it (a result, or a tuple whose items the skeleton coerces: ``codegen.visitor.Fields``)."""
    return type(x)(*items) if hasattr(x, "_fields") else tuple(items)


def _failing_line(block: BlockCode, e: Exception) -> Site:
    """The model source line of the block statement that raised ``e`` (the block's first line if none is found)."""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename == block.filename and frame.lineno in block.line_map:
            return block.line_map[frame.lineno]
    return block.site


def _device_of(slots: list) -> torch.device:
    """The device of the first shared tensor (model parameters, a module's or a module form's), CPU if there is none."""
    for v in slots:
        if isinstance(v, torch.Tensor):
            return v.device
        if isinstance(v, torch.nn.Module):
            inner = itertools.chain(v.parameters(), v.buffers())
        elif isinstance(v, Form):
            inner = (t for t in pytree.tree_leaves(v) if isinstance(t, torch.Tensor))
        else:
            inner = iter(())
        first = next(inner, None)
        if first is not None:
            return first.device
        for t in getattr(v, "__dict__", {}).values():
            if isinstance(t, torch.Tensor):
                return t.device
    return torch.device("cpu")


