"""The user API: ``@acrobat.function``, ``@acrobat.program``, and the compile driver (Fig. 3).

Compilation runs the pipeline (``acrobat.pipeline``: named passes, frontend
(parse) -> analyses (kinds/parameter reuse, static blocks + hoisting, map
loops, phases) -> code generation (blocks, skeleton, prologue)) once per
program and options, then loads the generated code as a ``Plan``. ``run``
then executes a batch of instances through the runtime.
"""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import threading
import time
import types
import traceback
from types import MappingProxyType
import warnings
import weakref
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, ParamSpec, Sequence, TypeVar, overload

import torch

from acrobat import pipeline
from acrobat.analysis.kinds import (BATCH_FACTS, UNRESOLVED, Kind, Resolver, SharedK, batch_fact, has_tensor,
                                    shared_fact)
from acrobat.analysis.lowered import Block, LoweredFunction
from acrobat.analysis.outline import outline_region
from acrobat.analysis.padded_runs import grow, taken
from acrobat.analysis.regions import MAX_REGIONS, Region, region_of
from acrobat.analysis.shared import SharedSlots
from acrobat.codegen.aot import result_layout
from acrobat.codegen.kernels import trace_block
from acrobat.diagnosis import blame, user_line
from acrobat.errors import (AcrobatError, BatchError, CompileError, DynamicFallbackWarning, InstanceError, InternalError,
                            ParamError, ShapeError)
from acrobat.frontend import ir
from acrobat.frontend.parser import NestedFunction, parse_function
from acrobat.frontend.source import SourceSnapshot
from acrobat.runtime.backend import check_trains, choose_backend, get_backend, records_grad
from acrobat.runtime.dynamic import Signatures, tensors_of
from acrobat.runtime.executor import Backend, BlockKernel, Runtime
from acrobat.runtime.lookup import sparse_grads as lookup_grads
from acrobat.runtime.padded import PaddedKernel
from acrobat.runtime.plan import DynamicLayout, PaddedOp, Plan, RecurrentOp, Site
from acrobat.runtime.recurrent import RecurrentKernel
from acrobat.runtime.run_list import held
from acrobat.runtime.segments import SegmentKernel
from acrobat.runtime.stats import RunStats
from acrobat.runtime.tier import DYNAMIC, PLAIN, TierChoice
from acrobat.runtime.tuning import Trial


def concurrent(*results: Any) -> tuple:
    """Mark program calls as independent: ``l, r = acrobat.concurrent(f(a), f(b))`` (§4.1).

    Run as plain Python it just returns the results as a tuple; compiled,
    the calls start at the same depth so their operators batch together.
    """
    return results


def phase() -> None:
    """Mark a program-phase boundary in the entry function (§4.1); a no-op in plain Python."""


@dataclass(frozen=True)
class Options:
    """Compile-time switches of acrobat's optimizations (for ablations, paper Fig. 8).

    - ``coarsening``: group straight-line tensor ops into static blocks (App. A.2);
      off, every operator statement is its own block;
    - ``hoisting``: give recursion-independent blocks static depths (App. A.1);
    - ``concurrency``: concurrent calls and map loops share depths (§4.1);
    - ``phases``: split the entry into program phases (§4.1);
    - ``stages``: give the iterations of a sequential loop of the entry whose
      body mixes work of varying depth (an inner loop, a call) with fixed work
      phases of their own, so the fixed work batches (staged loops,
      ``acrobat.analysis.phases``; needs ``phases``);
    - ``ghosts``: pad ``if`` branches with ghost operators so both advance
      the depth equally (§4.1, App. A.3);
    - ``fibers``: with tensor-dependent control flow, run concurrent calls
      as child fibers so their operators batch (§4.2); off, they run one
      after the other on their instance's fiber;
    - ``horizontal_fusion``: matmuls of one input with several weights in a
      block become one matmul against the concatenated weights (App. B.1).
    - ``static``: compile the program with the static analysis (the paper's
      tier); off, it runs in the dynamic tier (``acrobat.runtime.dynamic``:
      the user's own Python per instance, its operators batched at run time);
    - ``strict``: a program the static analysis cannot take is a
      ``CompileError`` (with file:line and what to write instead) instead of
      running in the dynamic tier, for users who want only the fast path.
    """

    coarsening: bool = True
    hoisting: bool = True
    concurrency: bool = True
    phases: bool = True
    stages: bool = True
    ghosts: bool = True
    fibers: bool = True
    horizontal_fusion: bool = True
    static: bool = True
    strict: bool = False


P = ParamSpec("P")
R = TypeVar("R")


class Function(Generic[P, R]):
    """A program function (``@acrobat.function``). Calling it runs plain Python.

    Typed as the function it wraps (``Function[P, R]``: the same parameters ``P`` and result ``R``), so a
    type checker and an IDE see its signature.

    A descriptor like a plain function: defined in a class (an ``nn.Module``
    subclass), ``module.cell(x)`` calls it with ``self`` bound to the module.
    Its source is taken when it is decorated (``snapshot``,
    ``acrobat.frontend.source``): a later edit of its file changes nothing.
    """

    def __init__(self, fn: Callable[P, R]):
        self.fn = fn
        self.snapshot = SourceSnapshot.take(fn)  # its source as Python ran it: taken now, compiled later
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __deepcopy__(self, memo: dict) -> "Function[P, R]":
        """The function itself: IR copied by the compiler (``copy.deepcopy``) keeps naming the same function."""
        return self

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        """Accessed on an instance: a bound method (``self`` first); on the class: the function itself."""
        return self if obj is None else types.MethodType(self, obj)

    @staticmethod
    def implicit(fn: Callable) -> "Function":
        """The program function the analysis makes of ``fn``, the model's own undecorated helper (a module-level
        function given tensors, or a method of the model's class given per-instance host data), as if it were
        decorated with ``@acrobat.function``: one per ``fn``, so recursion through it finds the same function
        (issue 18: decorators on the entry alone; ``acrobat.analysis.kinds._Analyzer.helper_call``)."""
        found = _IMPLICIT.get(fn)
        if found is None:
            found = _IMPLICIT[fn] = Function(fn)
        return found


_IMPLICIT: "weakref.WeakKeyDictionary[Callable, Function]" = weakref.WeakKeyDictionary()


def function(fn: Callable[P, R]) -> Function[P, R]:
    """Decorator: a helper function of an acrobat model (recursion allowed); calling it runs plain Python."""
    return Function(fn)


@dataclass
class Compiled:
    """A compiled program: the plan the runtime runs, and the generated code and analysed IR it came from."""

    plan: Plan  # skeleton entry, prologue, block code, base depth, fibers (§4.2), result layout
    skeleton_source: str
    prologue_source: str
    blocks: dict[int, Block]  # the analysed static blocks (``plan.blocks`` holds their code)
    n_phases: int
    lowered: list[LoweredFunction]  # the analysed IR the skeleton was generated from
    entry_key: Any
    slots: SharedSlots
    skeleton_options: Options  # as the skeleton was written (fibers off where no value is read)
    effects: frozenset  # spec keys whose calls change host state that outlives them (their concurrent calls don't fork)
    facts: dict[tuple, str] | None  # shared refs -> ``shared_fact`` of their values ("missing"); None: compiled blind
    bug: str | None = None  # the compiler's own failure after which the program runs in the dynamic tier
    fields: Mapping[str, Kind] = dataclasses.field(default_factory=dict)  # attribute -> kind of the fields the program stores
    grad_off: tuple[ir.Loc, ...] = ()  # where the `with torch.no_grad():` the static tier runs inline are


class Program(Function[P, R]):
    """The entry of a model (``@acrobat.program``): compiled on first use.

    Typed ``Program[P, R]`` after the entry it wraps: a plain call takes ``P`` and returns ``R``, and
    ``run`` returns ``list[R]``, one result per instance.

    ``program(instance, *shared)`` runs one instance as plain Python;
    ``program.run(instances, *shared)`` runs a batch through acrobat.
    The first parameter is the instance; the others are shared by all
    instances (model parameters: ``nn.Module``s, tensors, numbers).

    Defined as a method of a class (an ``nn.Module`` subclass), the
    parameter after ``self`` is the instance and ``self`` is the first
    shared parameter: ``module.prog.run(instances)`` (or
    ``Class.prog.run(instances, module)``) runs the batch with the module
    as the model parameters, ``module.prog(instance)`` one instance.
    """

    def __init__(self, fn: Callable[P, R], options: Options = Options()):
        super().__init__(fn)
        self.options = options
        self.instance_pos = 0  # position of the instance among the entry's parameters (1 for a method)
        # per (shared arguments, options): the compiles, each for the shared values' facts it found (see compile)
        self._compiled: dict[tuple[int, Options], list[Compiled]] = {}
        self._backends: dict[tuple[int, Options, str], Backend] = {}
        self._kernels: dict[tuple[int, str], dict[int, BlockKernel]] = {}  # (id of a Compiled, backend) -> kernels
        self._lock = threading.RLock()  # compiling and making backends, when threads call run at once

    def __set_name__(self, owner: type, name: str) -> None:
        """Defined in a class body: a method, whose instance parameter follows ``self``."""
        self.instance_pos = 1

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> "Program[P, R]": ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> "BoundProgram[R]": ...

    def __get__(self, obj: object, objtype: type | None = None) -> "Program[P, R] | BoundProgram[R]":
        """Accessed on an instance: the program with ``self`` bound as its first shared parameter."""
        return self if obj is None else BoundProgram(self, obj)

    def check_arity(self, n_shared: int, call: str = "run") -> None:
        """Raise ``BatchError`` unless the entry takes the instance and ``n_shared`` shared parameters.

        Raises:
            BatchError: the message says how many the entry takes and how many were passed.
        """
        try:
            params = list(inspect.signature(self.fn).parameters)
        except (TypeError, ValueError):  # no signature: the compiler reports what it finds
            return
        shared = params[:self.instance_pos] + params[self.instance_pos + 1:]
        if len(shared) != n_shared:
            names = ", ".join(f"`{n}`" for n in shared) or "none"
            fix = f"{self.__name__}.{call}(instances{''.join(', ' + n for n in shared)})"
            if self.instance_pos:  # a method: self is bound by accessing the program on the object
                fix = f"{shared[0]}.{fix[:-1].replace(', ' + shared[0], '', 1)})"
            raise BatchError(f"program `{self.__name__}({', '.join(params)})` takes the instance "
                             f"`{params[self.instance_pos]}` and {len(shared)} shared parameter(s) ({names}), "
                             f"but {call}() was given {n_shared} shared argument(s): call {fix}")

    def plain(self, instance: Any, shared: tuple) -> Any:
        """``instance`` run alone as plain Python with the shared arguments ``shared`` (as ``run`` takes them)."""
        k = self.instance_pos
        return self.fn(*shared[:k], instance, *shared[k:])

    def shared_args(self, shared: tuple) -> tuple:
        """The entry's arguments as the prologue reads them (``_A``): ``shared`` with None at the instance's place."""
        k = self.instance_pos
        return (*shared[:k], None, *shared[k:])

    def functions(self, root: Any = None, regions: Mapping[Any, Region] | None = None) -> dict[Any, ir.Function]:
        """The entry (or the program function ``root``: a module's method the analysis found) and every program
        function reachable from it, parsed (§3), by function object. A function of ``regions`` (a dynamic
        region, ``acrobat.analysis.regions``) is not parsed: its IR is an empty body marked with the region,
        and what it calls is not followed (it runs as the user's own Python).

        Raises:
            CompileError: a function outside the supported Python, or a call of a program entry; its
                ``function`` attribute is the function whose parse failed.
        """
        markers = {"concurrent": concurrent, "phase": phase}

        def is_program_fn(obj: Any) -> str | None:
            return obj.__name__ if isinstance(obj, Function) else None

        functions: dict[Any, ir.Function] = {}
        outlines: dict[Any, list[Any]] = {}  # function -> its statements outlined into regions (analysis.outline)
        for r in (regions or {}).values():
            if r.outline is not None:
                outlines.setdefault(r.outline.parent, []).append(r.outline)
        todo: list[Any] = [self if root is None else root]
        while todo:
            f = todo.pop()
            if f in functions:
                continue
            region = (regions or {}).get(f)
            if region is not None:
                params = list(inspect.signature(f.fn).parameters)
                loc = ir.Loc(f.snapshot.filename, f.fn.__code__.co_firstlineno)
                functions[f] = ir.Function(f.__name__, params, [], loc, {}, region=region)
                continue
            try:
                functions[f] = (f.ir if isinstance(f, NestedFunction)
                                else parse_function(f.fn, f.snapshot, is_program_fn, markers, outlines.get(f, ())))
            except CompileError as exc:
                if getattr(exc, "function", None) is None:
                    exc.function = f  # type: ignore[attr-defined]
                raise
            if f is self and any(q.kind is inspect.Parameter.VAR_POSITIONAL
                                 for q in inspect.signature(f.fn).parameters.values()):
                raise CompileError(f"the entry `{f.__name__}` takes `*args`: name the instance and each shared "
                                   "parameter (`def model(x, p)`); the functions it calls may take `*args`",
                                   functions[f].loc.file, functions[f].loc.line, functions[f].loc.col)
            for s in ir.walk_stmts(functions[f].body):
                for root in ir.stmt_exprs(s):
                    for e in ir.walk(root):
                        if isinstance(e, ir.Call) and e.kind is ir.CallKind.PROGRAM:
                            if isinstance(e.target, Program):
                                raise CompileError(
                                    f"`{e.target.__name__}` is a program entry (@acrobat.program): a model cannot call "
                                    "an entry, itself included; put the part to call in an @acrobat.function and call "
                                    "that from the entry", e.loc.file, e.loc.line, e.loc.col)
                            todo.append(e.target)
        return functions

    def compile(self, n_shared: int, options: Options | None = None, shared: tuple | None = None,
                instances: Sequence | None = None) -> Compiled:
        """Compile for ``n_shared`` shared arguments (cached).

        With the run's ``shared`` arguments, paths into them that hold plain host data (``p.steps``, a list of
        floats) are host values of the program (``acrobat.analysis.kinds.shared_fact``); the compile is kept
        with what it found and reused by later runs whose arguments agree, else the program is compiled again.
        Without them, every path is a shared value. With the run's ``instances`` too, facts of the batch are
        known and checked for each batch in the same way (``kinds.batch_fact``): the entry may unpack its
        instance (``model(*pair)``) where every instance is a tuple of one length, and an embedding of an
        instance's int tensor is a stacked list where those tensors differ in shape.

        Raises:
            CompileError: the model uses Python acrobat cannot batch.
        """
        options = options or self.options
        key = (n_shared, options)
        resolve = None if shared is None else _resolver(self.shared_args(shared), instances)
        asked: set[tuple] = set()  # the facts of the batch the analysis asked for (a rejection may depend on them)
        if resolve is not None:
            resolve = _asking(resolve, asked)
        with self._lock:
            done = self._compiled.setdefault(key, [])
            for c in done:
                if (resolve is None) == (c.facts is None) and (resolve is None or all(
                        _fact(resolve, ref) == fact for ref, fact in c.facts.items())):  # type: ignore[union-attr]
                    return c
            try:
                if not options.static:
                    c = _dynamic(self, "Options(static=False)", resolve is not None)
                else:
                    c = self._static(n_shared, options, resolve)
            except CompileError as exc:  # the static tier cannot take it: the dynamic tier runs it, and says why
                if options.strict or not exc.fallback:
                    raise
                c = _dynamic(self, str(exc), resolve is not None)
                if asked:  # a batch with other facts (`model(*pair)` of tuples of one length) may compile statically
                    c = dataclasses.replace(c, facts={ref: _fact(resolve, ref) for ref in asked})
            except InternalError as exc:  # a pass broke an invariant of the IR (acrobat.pipeline): the compiler's bug
                if options.strict:
                    raise
                c = self._after_bug("; ".join(line.strip() for line in str(exc).splitlines()), resolve is not None)
            except AcrobatError:
                raise
            except Exception as exc:  # the compiler's own failure on a program it should take or reject
                if options.strict:
                    raise InternalError(f"acrobat's compiler failed on program `{self.__name__}`: "
                                        f"{type(exc).__name__}: {exc}\n  this is a bug in acrobat, please report it "
                                        "with the model; without Options(strict=True) it runs in the dynamic tier") \
                        from exc
                c = self._after_bug(f"acrobat's compiler failed ({type(exc).__name__}: {exc}): a bug in acrobat, "
                                    "please report it", resolve is not None)
            done.append(c)
            return c

    def _static(self, n_shared: int, options: Options, resolve: Resolver | None) -> Compiled:
        """The program compiled for the static tier, where each program function the static tier rejects
        (not the entry) becomes a dynamic region when it can (``acrobat.analysis.regions``): the function
        runs as the user's own Python inside the static program, and the compile is tried again.

        Raises:
            CompileError: the static tier's first rejection, where a region cannot take it (the whole program
                then runs in the dynamic tier), or any rejection under ``Options(strict=True)``.
        """
        regions: dict[Any, Region] = {}
        first: CompileError | None = None
        while True:
            try:
                compiled = _compile(self, n_shared, options, resolve, regions)
            except CompileError as exc:
                first = first or exc
                fn = getattr(exc, "function", None)
                if not exc.fallback or fn in regions or len(regions) >= MAX_REGIONS:
                    raise first from None
                found = region_of(exc, fn, self)
                if isinstance(found, str) and not options.strict:  # the smallest statement holding it, outlined
                    found = outline_region(exc, fn, regions, Function)
                if isinstance(found, str):
                    raise first from None
                # under Options(strict=True) only as a padded function (static-tier code): a call that makes it a
                # dynamic region raises (``kinds.region_call``), and so this first rejection
                if options.strict:
                    found = dataclasses.replace(found, padded_only=True)
                regions[fn if found.outline is None else found.outline.function] = found
            else:
                return self._padded_runs(compiled, regions, n_shared, options, resolve)

    def _padded_runs(self, compiled: Compiled, regions: dict[Any, Region], n_shared: int, options: Options,
                     resolve: Resolver | None) -> Compiled:
        """``compiled`` with each padded function's call grown into the run of statements around it, outlined
        as one padded function (``acrobat.analysis.padded_runs``), where the compile makes that run's call a
        padded function without host arguments; otherwise the compile before."""
        while len(regions) < MAX_REGIONS:
            padded = {b.segment.op for b in compiled.plan.blocks.values() if isinstance(b.segment, PaddedOp)}
            found = grow(compiled.lowered, regions, padded, Function) if padded else None
            if found is None:
                break
            if options.strict:
                found = dataclasses.replace(found, padded_only=True)
            trial = {**regions, found.outline.function: found}
            try:
                grown = _compile(self, n_shared, options, resolve, trial)
            except AcrobatError:  # the run's outline does not compile: the compile before stands
                break
            if not taken(found, grown.plan):
                break
            regions, compiled = trial, grown
        return compiled

    def source(self, n_shared: int = 1, options: Options | None = None) -> str:
        """The generated code: skeleton, shared-value prologue and every block."""
        c = self.compile(n_shared, options)
        parts = [c.skeleton_source, c.prologue_source]
        parts += [f"# static block {b.name} ({b.site.loc})\n{b.source}" for b in c.plan.blocks.values()]
        return "\n".join(parts)

    def explain(self, *shared: Any, options: Options | None = None, instances: Sequence | None = None) -> str:
        """What acrobat makes of the program, before running it: the static tier (its functions, static blocks,
        fibers, phases; §4, and each dynamic region: the function, its file:line and the ``CompileError`` that
        made it one) or the dynamic tier, and then why: the ``CompileError`` the static tier gave,
        with its file:line and fix. ``shared``: the run's shared arguments, where the compile depends on them
        (plain data in the parameters, module kinds); without them, one shared argument is assumed. ``instances``:
        a batch, where the compile depends on facts of it (``compile``)."""
        options = options or self.options
        c = self.compile(len(shared) if shared else 1, options, shared if shared else None, instances)
        if c.plan.dynamic is not None:
            return (f"program `{self.__name__}` runs in the dynamic tier: its own Python per instance, on fibers, "
                    f"its torch operators recorded and batched at run time (acrobat.runtime.dynamic)\n"
                    f"  why: {c.plan.dynamic}\n"
                    f"  Options(strict=True) raises that CompileError instead; fix it to run in the static tier")
        blocks = c.plan.blocks.values()
        hoisted = sum(b.hoisted for b in blocks)
        segments = sum(b.segment is not None for b in blocks)
        names = ", ".join(dict.fromkeys(f.spec.fn.name for f in c.lowered))
        fibers = "yes (host code reads tensor values, §4.2)" if c.plan.needs_fibers else "no"
        grad = (f"\n  runs recording autograd: in the dynamic tier, which computes `with torch.no_grad()` at "
                f"{', '.join(map(str, c.grad_off))} without autograd as plain calls do" if c.grad_off else "")
        regions = "".join(f"\n  dynamic region {r.describe()}\n    runs as its own Python per instance, its torch "
                          "operators batched at run time with the static blocks (acrobat.analysis.regions); "
                          "Options(strict=True) raises that CompileError instead" for r in c.plan.regions)
        regions += "".join(f"\n  padded function `{b.segment.op}` ({b.segment.where}): one node per instance, each "
                           "launch its own Python once over the stacked lists padded to (B, Lmax, ...) with their "
                           "lengths (acrobat.analysis.padded); an operator without a padding rule reruns the batch "
                           "in the dynamic tier" for b in blocks if isinstance(b.segment, PaddedOp))
        return (f"program `{self.__name__}` runs in the static tier (compiled: §4, §5)\n"
                f"  functions: {names}\n"
                f"  static blocks: {len(c.plan.blocks)} ({hoisted} hoisted, {segments} list reductions), program "
                f"phases: {c.n_phases}, fibers: {fibers}{grad}{regions}")

    def run(self, instances: Sequence, *shared: Any, backend: str = "auto", options: Options | None = None,
            stats: RunStats | None = None, sync: bool = False, sparse_grads: bool = False) -> list[R]:
        """Run a batch of instances with auto-batching; per-instance results, in order.

        Args:
            instances: the mini-batch, a list (or tuple) of instances: any Python objects the entry takes
                (trees, token lists, dicts); not empty.
            shared: the model parameters, passed to every instance.
            backend: kernel backend name: ``"auto"`` (default: ``"eager-accum"`` while autograd records,
                i.e. grad mode is on and a shared parameter or a tensor inside an instance requires
                grad, else ``"compiled"``),
                ``"eager"`` (vmap, op by op; supports autograd), ``"eager-accum"`` (``"eager"`` with
                gathers whose backward adds gradient rows into one buffer per source output: faster
                training steps, the same gradients), ``"compiled"`` (TorchInductor kernels,
                profile-guided gather fusion; the first run of each process compiles
                the kernels or loads them from the disk cache, saying so on stderr, and the next runs
                tune them: time with ``acrobat.benchmark``; while autograd records it runs
                ``"compiled-train"``), ``"compiled-train"`` (``"eager-accum"``'s graphs compiled by
                TorchInductor with their backward kernels, §5 extended to training), ``"compiled-explicit"``
                or ``"compiled-fused"`` (one gather mode forced; inference only).
                ``stats.backend`` says which one ran.
            options: optimization switches (defaults to the program's).
            stats: if given, the run's figures are added to it.
            sync: synchronize the GPU around timed regions, so ``stats`` splits
                time correctly on CUDA (profiling; slower).
            sparse_grads: an embedding lookup ``W[i]`` (a shared 2-D weight indexed by a per-instance
                int) gives ``W`` a sparse COO gradient holding only the rows looked up, as
                ``nn.Embedding(sparse=True)`` does (``acrobat.runtime.lookup``); the optimizer must take
                sparse gradients for it (``torch.optim.SparseAdam``, ``Adagrad``). Off: the dense
                gradient plain PyTorch gives.

        Returns:
            One result per instance: tensors (or tuples/lists of them)
            equal to running ``self(instance, *shared)`` alone.

        Raises:
            AcrobatError: ``"compiled-explicit"`` or ``"compiled-fused"`` named while autograd would record
                (they run inference only).
            BatchError: ``instances`` is not a list (or tuple) of instances (one instance passed alone),
                an empty batch, or not as many shared arguments as the entry takes.
            CompileError: see ``compile``.
            ParamError: a shared argument lacks an attribute or item the model reads
                (names the program, the parameter, what is missing and the source line).
            ShapeError: an operator failed for an instance (names it and the source line).
            InstanceError: the model's host code failed for an instance (names it and the source line).
            InternalError: acrobat failed where plain Python runs the instance (acrobat's bug; the message
                names the instance and what gives the right result meanwhile).
            ValueError: unknown backend name.
        """
        check_batch(instances, self.__name__)
        self.check_arity(len(shared))
        options = self._grad_tier(instances, shared, options or self.options)
        run_list = self.compile(len(shared), options, shared, instances).plan.run_list
        if run_list is None:
            return self._run(instances, shared, backend, options, stats, sync, sparse_grads)
        with held(run_list, shared):  # the prologue's shared values too see it held
            return self._run(instances, shared, backend, options, stats, sync, sparse_grads)

    def _run(self, instances: Sequence, shared: tuple, backend: str, options: Options, stats: RunStats | None,
             sync: bool, sparse_grads: bool) -> list[Any]:
        """``run``, once the options are the run's (``_grad_tier``) and a run list is held (``run_lists``)."""
        c, be, rt = self._start(instances, shared, backend, options)
        rt.sync = sync
        trial: Trial[str] | None = None  # the tier trial of a program the static tier rejected (wholly or in part)
        serial = 0
        rejected = c.plan.dynamic if c.plan.dynamic is not None else "; ".join(
            f"the dynamic region {r.describe()}" for r in c.plan.regions) or None
        if rejected is not None and options.static and not records_grad(rt.slots, instances):
            # rejected, wholly or in a region: batched (the dynamic tier, or the static one with its regions) or
            # plain calls, by measurement
            tier, trial, serial = be.tiers.next_batch((), len(instances))
            if tier == PLAIN:
                return self._run_plain(instances, shared, rejected, trial, serial, stats)
        t0 = time.perf_counter()
        rng = _rng_state()  # a rerun in the dynamic tier draws as a run there would (not after the failed one)
        with be.exclusive():  # threads may call run at once; a backend with shared state runs one at a time
            try:
                with be.compiling(self.__name__, sum(b.segment is None for b in c.plan.blocks.values())), \
                        lookup_grads(sparse_grads):
                    out = rt.run(instances, shared)
            except Exception as exc:  # whose failure: the model's, or acrobat's (plain Python decides)
                judged = blame(exc, self.__name__, instances, lambda x: self.plain(x, shared), be.name)
                if judged is exc:
                    raise
                if isinstance(judged, InternalError) and getattr(exc, "static_limit", False):
                    judged = exc  # plain calls run it: a limit of the static tier (tensors of per-instance shapes)
                    if c.plan.dynamic is not None or c.effects or options.strict:
                        raise
                elif not isinstance(judged, InternalError) or c.plan.dynamic is not None or c.effects \
                        or options.strict:
                    raise judged from exc
                failed: AcrobatError | None = judged
            else:
                failed = None
                rt.stats.probing = be.probing()
                rt.stats.fallback = c.bug
        if failed is not None:
            _set_rng_state(rng)
            return self._run_dynamic(failed, c, instances, shared, options, stats, sync, sparse_grads)
        if trial is not None:
            if rt.stats.dynamic is not None and rt.stats.dynamic.random:
                TierChoice.keep_dynamic(trial)  # plain calls draw other numbers: seeded runs would not repeat
            TierChoice.record(trial, DYNAMIC, (time.perf_counter() - t0) * 1e6, len(instances), serial)
            if trial.choice is None or trial.note:
                rt.stats.plain = f"the dynamic tier ran this batch: {TierChoice.why(trial)} (acrobat.runtime.tier)"
        if stats is not None:
            stats.add(rt.stats)
        return out

    def _run_plain(self, instances: Sequence, shared: tuple, rejected: str, trial: Trial[str], serial: int,
                   stats: RunStats | None) -> list[Any]:
        """The batch as plain calls, one instance at a time (``acrobat.runtime.tier``: faster than the dynamic
        tier for this program, which the static tier rejected with ``rejected``, or a turn of that
        measurement); the run report says so.

        Raises:
            InstanceError: an instance failed (names it; the exception it raised is its cause).
        """
        t0 = time.perf_counter()
        out = []
        for i, x in enumerate(instances):
            try:
                out.append(self.plain(x, shared))
            except Exception as exc:  # noqa: BLE001 - the model's own error, on this instance
                raise InstanceError(f"instance {i}: {type(exc).__name__}: {exc} (running `{self.__name__}` as plain "
                                    f"per-instance calls){user_line(exc)}", i) from exc
        us = (time.perf_counter() - t0) * 1e6
        TierChoice.record(trial, PLAIN, us, len(instances), serial)
        if stats is not None:
            st = RunStats(instances=len(instances), total_ms=us / 1e3, runs=1, backend="plain calls")
            st.plain = (f"ran as plain per-instance calls, unbatched, because the static tier rejected it "
                        f"({rejected.strip().splitlines()[0] if rejected.strip() else '?'}) and the dynamic tier "
                        f"was not faster: {TierChoice.why(trial)}; Options(static=False) runs the dynamic tier "
                        "always (acrobat.runtime.tier)")
            stats.add(st)
        return out

    def _after_bug(self, reason: str, resolved: bool) -> Compiled:
        """The program for the dynamic tier after the compiler's own failure ``reason`` (acrobat's bug): said by a
        ``DynamicFallbackWarning`` now and in ``stats.fallback`` of every run, as for a failure at run time."""
        warnings.warn(f"{reason}\n  {self.__name__} runs in the dynamic tier instead (slower; Options(strict=True) "
                      "raises the error)", DynamicFallbackWarning, stacklevel=4)
        return dataclasses.replace(_dynamic(self, reason, resolved), bug=reason)

    def _grad_tier(self, instances: Sequence, shared: tuple, options: Options) -> Options:
        """The options a run takes: ``options``, or the dynamic tier's where autograd records through the run
        and the static tier would run a ``with torch.no_grad():`` of the program inline (in the run's grad
        mode, so gradients would flow where the plain call has none); the dynamic tier runs that body without
        autograd. Inference runs (grad mode off, or nothing requiring grad) keep the static tier.

        Raises:
            CompileError: that case under ``Options(strict=True)``, naming the ``with`` statements.
        """
        if not options.static or not torch.is_grad_enabled():
            return options
        c = self.compile(len(shared), options, shared, instances)
        if not c.grad_off or c.plan.dynamic is not None or not records_grad(tensors_of(shared), instances):
            return options
        if options.strict:
            raise CompileError(f"program `{self.__name__}` turns autograd off in its code (`with torch.no_grad()` "
                               f"at {', '.join(map(str, c.grad_off))}) and this run records autograd: the static "
                               "tier computes such a body with autograd, so write `.detach()` on the values it "
                               "computes instead, or run without Options(strict=True) (the dynamic tier runs it)",
                               c.grad_off[0].file, c.grad_off[0].line, c.grad_off[0].col)
        return dataclasses.replace(options, static=False)

    def _run_dynamic(self, failed: AcrobatError, c: Compiled, instances: Sequence, shared: tuple, options: Options,
                     stats: RunStats | None, sync: bool, sparse_grads: bool) -> list[Any]:
        """The batch again in the dynamic tier (the model's own Python per instance, its operators batched at
        run time: correct by construction), after the static tier's program ``c`` failed on it with ``failed``:
        acrobat's own bug (an ``InternalError``), or a limit of the static tier met at run time where plain calls
        run the instance (a ``ShapeError`` whose ``static_limit`` names it: tensors whose shapes differ between
        instances meeting in one static block, or an operand a stacked list's rows cannot take). Said by a
        ``DynamicFallbackWarning`` and in ``stats.fallback``. After a limit, later batches run as programs the
        static tier rejected do (the dynamic tier or plain calls, by measurement: ``acrobat.runtime.tier``),
        where each would otherwise run twice. Only for programs whose calls change no host state that outlives
        them (a second run would repeat those changes).

        Raises:
            InternalError: ``failed``, when it is one and the dynamic tier fails as well.
            AcrobatError: the dynamic tier's own error (naming the instance) after a ``static_limit`` one.
        """
        limit = "" if isinstance(failed, InternalError) else f"{getattr(failed, 'static_limit', 'a limit')}: "
        later = " and later batches run as a program the static tier rejects (acrobat.runtime.tier)" if limit else ""
        warnings.warn(f"{limit}{failed}\n  the batch ran in the dynamic tier instead{later} (slower; "
                      "Options(strict=True) raises the error)", DynamicFallbackWarning, stacklevel=3)
        try:
            out = self.run(instances, *shared, backend="eager", options=dataclasses.replace(options, static=False),
                           stats=stats, sync=sync, sparse_grads=sparse_grads)
        except AcrobatError as exc:
            if limit:
                raise
            raise failed from exc
        why = limit + " ".join(line.strip() for line in str(failed).splitlines()[:2])
        if limit:
            with self._lock:
                done = self._compiled.get((len(shared), options), [])
                at = next((i for i, x in enumerate(done) if x is c), None)
                if at is not None:
                    done[at] = _dynamic(self, f"the static tier met its limit on a batch: {why}",
                                                   c.facts is not None)
        if stats is not None:
            stats.fallback = why
            if stats.dynamic is not None:  # the rerun's options say static=False; the reason is the static tier's
                stats.dynamic.reason = f"the static tier failed on this batch: {why}"
        return out

    def trace(self, instances: Sequence, *shared: Any,
              options: Options | None = None) -> list[tuple[int, str, int, int, int]]:
        """The DFG of a batch as it ran: sorted (instance, block name, program phase, loop stage, depth), one per
        node (the stage is 0 outside staged loops, ``acrobat.analysis.phases``)."""
        options = options or self.options
        self.check_arity(len(shared), "trace")
        rt = self.runtime(*shared, options=options)
        rt.trace = []
        rt.run(instances, shared)
        return sorted(rt.trace)

    def runtime(self, *shared: Any, backend: str = "eager", options: Options | None = None) -> Runtime:
        """A fresh ``Runtime`` for one batched run with ``backend``'s kernels (cached per backend and options);
        ``"auto"`` picks as ``run`` does."""
        return self._start((), shared, backend, options or self.options)[2]

    def _start(self, instances: Sequence, shared: tuple, backend: str,
               options: Options) -> tuple[Compiled, Backend, Runtime]:
        """The compiled program, the backend picked for ``instances`` and ``shared`` (``"auto"`` resolved,
        a backend that cannot train refused under autograd) and a fresh ``Runtime`` over that backend's
        kernels and this run's shared values."""
        c = self.compile(len(shared), options, shared, instances)
        slots = c.plan.prologue(self.shared_args(shared))
        be, kernels = self._backend(choose_backend(backend, slots, instances), c, len(shared), options)
        check_trains(be, slots, instances)
        rt = Runtime(c.plan, kernels, slots, arena=be.arena, threads=be.threads)
        rt.stats.backend = be.name
        return c, be, rt

    def backend(self, name: str, n_shared: int = 1, options: Options | None = None) -> tuple[Backend, dict[int, BlockKernel]]:
        """The backend ``name`` this program runs with, and its kernel per block (made once, then reused).

        Raises:
            ValueError: unknown backend name.
        """
        options = options or self.options
        with self._lock:
            done = self._compiled.get((n_shared, options))
            return self._backend(name, done[-1] if done else self.compile(n_shared, options), n_shared, options)

    def reset_backends(self) -> None:
        """Forget every backend's kernels, arena and tuning: the next run starts as in a new process (the
        disk cache of compiled kernels is kept)."""
        with self._lock:
            self._backends.clear()
            self._kernels.clear()

    def _backend(self, name: str, c: Compiled, n_shared: int,
                 options: Options) -> tuple[Backend, dict[int, BlockKernel]]:
        """Backend ``name`` (one per shared-argument count and options: its arena and tuning are kept across
        runs) and its kernel per block of compiled program ``c``."""
        with self._lock:
            be = self._backends.get((n_shared, options, name))
            if be is None:
                be = self._backends[(n_shared, options, name)] = get_backend(name)
            kernels = self._kernels.get((id(c), name))
            if kernels is None:
                kernels = self._kernels[(id(c), name)] = block_kernels(be, c.plan)
            return be, kernels


def check_batch(instances: Any, name: str) -> None:
    """Raise unless ``instances`` is a non-empty batch: a list, tuple or other sequence of instances.

    Raises:
        BatchError: one instance passed where the batch goes (a tree, a dict, a tensor: anything that is
            not a sequence, or a string), or an empty batch; the message says to pass a list of instances.
    """
    if isinstance(instances, (str, bytes)) or not isinstance(instances, SequenceABC):
        raise BatchError(f"{name}.run() takes a list of instances (the mini-batch), but was given one "
                         f"`{type(instances).__name__}`: pass a list, e.g. {name}.run([x], ...) for one "
                         f"instance (or call {name}(x, ...) to run it as plain Python)")
    if len(instances) == 0:
        raise BatchError("empty batch: run() needs at least one instance")


def block_kernels(be: Backend, plan: Plan) -> dict[int, BlockKernel]:
    """Each block's batched launch on backend ``be``, which is handed the kernel JIT (``trace_block``);
    segment operators run the same on every backend."""
    return {bid: be.kernel(b, trace_block) if b.segment is None else
            RecurrentKernel(b) if isinstance(b.segment, RecurrentOp) else
            PaddedKernel(b) if isinstance(b.segment, PaddedOp) else SegmentKernel(b)
            for bid, b in plan.blocks.items()}


class BoundProgram(Generic[R]):
    """An ``@acrobat.program`` method accessed on an object: ``self`` is bound as the first shared argument.

    ``bound(instance, *shared)`` runs one instance as plain Python,
    ``bound.run(instances, *shared)`` a batch (``list[R]``); other attributes are the program's.
    """

    def __init__(self, program: Program[Any, R], obj: Any):
        self.program = program
        self.obj = obj
        self.__name__ = program.__name__

    def __call__(self, instance: Any, *shared: Any) -> R:
        return self.program.fn(self.obj, instance, *shared)

    def run(self, instances: Sequence, *shared: Any, **kwargs: Any) -> list[R]:
        """``Program.run`` with ``self`` first among the shared arguments."""
        return self.program.run(instances, self.obj, *shared, **kwargs)

    def trace(self, instances: Sequence, *shared: Any, **kwargs: Any) -> list:
        """``Program.trace`` with ``self`` first among the shared arguments."""
        return self.program.trace(instances, self.obj, *shared, **kwargs)

    def runtime(self, *shared: Any, **kwargs: Any) -> Runtime:
        """``Program.runtime`` with ``self`` first among the shared arguments."""
        return self.program.runtime(self.obj, *shared, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.program, name)


@overload
def program(fn: Callable[P, R], *, options: Options = ...) -> Program[P, R]: ...


@overload
def program(fn: None = None, *, options: Options = ...) -> Callable[[Callable[P, R]], Program[P, R]]: ...


def program(fn: Callable[P, R] | None = None, *,
            options: Options = Options()) -> Program[P, R] | Callable[[Callable[P, R]], Program[P, R]]:
    """Decorator: the entry function of an acrobat model. ``@acrobat.program`` or ``@acrobat.program(options=...)``.

    The entry's first parameter is the instance (any Python object: a tree, a list of token ids, a
    dict), the others are shared by every instance (the model's parameters). Returns a ``Program``:
    ``prog(instance, *params)`` runs plain Python, ``prog.run(instances, *params)`` a batch.
    """
    if fn is None:
        return lambda f: Program(f, options)
    return Program(fn, options)


# ------------------------------------------------------------------ compile driver


def _resolver(args: tuple, instances: Sequence | None = None) -> Resolver:
    """``resolve(ref)``: the object shared reference ``ref`` (``("arg", pos, (".", attr) | ("[", key), ...)``)
    names among the entry's arguments ``args``, or ``UNRESOLVED`` (the prologue reports what is missing); for
    ``("instance", ...)`` (``kinds.INSTANCE_ARITY``, ``kinds.INSTANCE_SHAPES``), ``kinds.batch_fact`` of the batch
    ``instances``; without one, of an empty batch (``"mixed"``, ``"uniform"``: what the analysis assumes where it
    knows nothing of the batch, so a compile for the shared arguments alone is the one a batch of those facts
    runs)."""
    def resolve(ref: tuple) -> Any:
        if ref[0] == "instance":
            return batch_fact(ref, instances or ())
        if ref[0] != "arg" or ref[1] >= len(args):
            return UNRESOLVED
        obj = args[ref[1]]
        try:
            for kind, key in ref[2:]:
                obj = getattr(obj, key) if kind == "." else obj[key]
        except Exception:  # noqa: BLE001 - any failure to read it: not known here
            return UNRESOLVED
        return obj

    return resolve


def _asking(resolve: Resolver, asked: set[tuple]) -> Resolver:
    """``resolve``, adding to ``asked`` each fact of the batch (``("instance", ...)``, ``kinds.BATCH_FACTS``) it is
    asked for."""
    def ask(ref: tuple) -> Any:
        if ref in BATCH_FACTS:
            asked.add(ref)
        return resolve(ref)

    return ask


def _fact(resolve: Resolver, ref: tuple) -> str:
    """``shared_fact`` of what ``ref`` names in a run (for a fact of the batch, ``kinds.batch_fact``), or
    ``"missing"``."""
    value = resolve(ref)
    return "missing" if value is UNRESOLVED else value if ref[0] == "instance" else shared_fact(value)


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    """torch's generator states (CPU, and every CUDA device's once CUDA is initialized), for ``_set_rng_state``."""
    return torch.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor] | None]) -> None:
    """Put back the generator states ``_rng_state`` gave."""
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])


def _dynamic(prog: Program, reason: str, resolved: bool) -> Compiled:
    """``prog`` for the dynamic tier (``acrobat.runtime.dynamic``): its entry runs the user's own function on
    the instance's fiber, and ``reason`` says why the static tier did not take it; ``resolved``: compiled for a
    run's shared arguments."""
    k = prog.instance_pos
    fn = prog.fn

    def entry(rt: Runtime, d: int, inst: Any, *shared: Any) -> tuple[Any, int]:
        return fn(*shared[:k], inst, *shared[k:]), d

    code = getattr(fn, "__code__", None)
    site = Site(f"{code.co_filename}:{code.co_firstlineno}" if code else prog.__name__, f"def {prog.__name__}")
    plan = Plan(entry, tensors_of, {}, 0, True, DynamicLayout(), dynamic=reason, site=site,
                signatures=Signatures())
    note = f"# {prog.__name__} runs in the dynamic tier (acrobat.runtime.dynamic): {reason}\n"
    # ``resolved``: made for a run's shared arguments; later runs reuse it whatever their arguments (facts {}),
    # where a compile without them (``source``, ``explain``) is kept apart (None), as for the static tier
    return Compiled(plan, note, "", {}, 1, [], None, SharedSlots(), Options(), frozenset(), {} if resolved else None)


def _compile(prog: Program, n_shared: int, options: Options, resolve: Resolver | None = None,
             regions: Mapping[Any, Region] | None = None) -> Compiled:
    """``prog`` through the compile pipeline (``acrobat.pipeline``), its generated code loaded as a ``Plan``;
    the functions of ``regions`` run as dynamic regions (``acrobat.analysis.regions``).

    Raises:
        CompileError: a pass rejects the program.
        InternalError: a pass broke an invariant of the IR (acrobat's bug).
    """
    s = pipeline.run(pipeline.Request(prog, n_shared, options, resolve, MappingProxyType(dict(regions or {}))))
    table, kernels, skeleton, prologue = s.table, s.kernels, s.skeleton, s.prologue
    codes = dict(kernels.codes)
    namespace: dict[str, Any] = dict(prologue.globals.values)
    namespace["_B"] = codes
    skeleton_file = f"<acrobat skeleton {prog.__name__}>"
    linecache.cache[skeleton_file] = (len(skeleton.source), None, skeleton.source.splitlines(True), skeleton_file)
    exec(compile(skeleton.source, skeleton_file, "exec"), namespace)
    prologue_file = f"<acrobat prologue {prog.__name__}>"
    linecache.cache[prologue_file] = (len(prologue.source), None, prologue.source.splitlines(True), prologue_file)
    exec(compile(prologue.source, prologue_file, "exec"), namespace)
    lowered = list(s.lowered)
    entry_fn = next(f for f in lowered if f.spec.key == table.entry)
    n_phases = 1 + sum(isinstance(st, ir.PhaseMark) for st in entry_fn.body)
    entry = located(namespace[skeleton.entry_name], skeleton_file, dict(skeleton.line_map), prog.instance_pos)
    located_prologue = _located_prologue(namespace["_prologue"], prologue_file, dict(prologue.line_slots),
                                         prologue.slots, entry_fn.spec.fn, prog.__name__, prog.instance_pos)
    fields = {name: result_layout(k) for name, k in table.fields.items() if has_tensor(k)}
    # the regions some call runs as their own Python (the others run only as padded functions)
    dynamic = tuple(dict.fromkeys(sp.fn.region for key, sp in s.lowering.specs.items()
                                  if sp.fn.region is not None and key not in kernels.padded))
    plan = Plan(entry, located_prologue, codes, skeleton.base, skeleton.needs_fibers,
                result_layout(entry_fn.spec.ret), fields=fields, run_list=table.run_list, regions=dynamic,
                signatures=Signatures(max(codes, default=-1) + 1) if dynamic else None)  # blocks after the static
    facts = None if resolve is None else {ref: _fact(resolve, ref) for ref in table.facts}
    grad_off = tuple(dict.fromkeys(loc for sp in table.specs.values() for loc in sp.fn.grad_off))
    return Compiled(plan, skeleton.source, prologue.source, dict(kernels.blocks), n_phases, lowered, table.entry,
                    prologue.slots, skeleton.options, s.effects, facts, fields=types.MappingProxyType(dict(table.fields)),
                    grad_off=grad_off)


def located(entry: Callable, filename: str, line_map: dict[int, tuple[ir.Loc, str]], instance_pos: int = 0) -> Callable:
    """Wrap the skeleton entry: an exception in the model's host code names the instance and source line.

    The wrapper takes ``(rt, d, inst, *shared)`` and passes the instance at
    parameter position ``instance_pos`` (1 for a method: after ``self``).
    """
    k = instance_pos

    def run_entry(rt: Runtime, d: int, inst: Any, *shared: Any) -> Any:
        try:
            return entry(rt, d, *shared[:k], inst, *shared[k:])
        except AcrobatError:
            raise
        except Exception as exc:  # the model's own host code failed (bad data, a non-scalar test, ...)
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
            where = line_map.get(frames[-1].lineno) if frames and frames[-1].lineno is not None else None
            at = f"\n  at {where[0]}: {where[1]}" if where else ""
            raise InstanceError(f"instance {rt.dfg.inst}: {type(exc).__name__}: {exc}{at}", rt.dfg.inst) from exc

    return run_entry


def _located_prologue(prologue: Callable, filename: str, line_slots: dict[int, int], slots: SharedSlots,
                      entry: ir.Function, prog_name: str, instance_pos: int) -> Callable:
    """Wrap the prologue: a failure names the program, the parameter and the model source line.

    The wrapper raises ``ParamError`` when reading a path of a shared
    argument (``p.W_out``, ``p.layers[0]``) fails, ``ShapeError`` (with no
    instance) when an operator over shared values fails.
    """

    def run_prologue(args: tuple) -> list:
        try:
            return prologue(args)
        except AcrobatError:
            raise
        except Exception as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
            i = line_slots.get(frames[-1].lineno) if frames and frames[-1].lineno is not None else None
            if i is None:
                raise
            raise _prologue_error(exc, i, args, slots, entry, prog_name, instance_pos) from exc

    return run_prologue


def _prologue_error(exc: Exception, i: int, args: tuple, slots: SharedSlots, entry: ir.Function, prog_name: str,
                    instance_pos: int) -> AcrobatError:
    """The error for slot ``i`` of the prologue failing with ``exc`` (see ``_located_prologue``)."""
    d = slots.defs[i]
    loc, text = _slot_site(slots, i)
    at = f"\n  at {loc}: {text.strip()}" if loc is not None else ""
    if d.ref[0] != "arg" or len(d.ref) < 3:
        return ShapeError(f"program `{prog_name}`: a shared value (computed once per run, for every instance) "
                          f"failed: {type(exc).__name__}: {exc}{at}")
    pos = d.ref[1]
    name = entry.params[pos] if pos < len(entry.params) else f"arg{pos}"
    obj = args[pos]
    path = name
    for step in d.ref[2:-1]:  # the value the failing step reads from (the earlier steps succeeded)
        obj = getattr(obj, step[1]) if step[0] == "." else obj[step[1]]
        path += f".{step[1]}" if step[0] == "." else f"[{step[1]!r}]"
    kind, key = d.ref[-1]
    missing = f"attribute `{key}`" if kind == "." else f"item [{key!r}]"
    shared_no = pos + (pos < instance_pos)  # position among the shared arguments of run(), 1-based
    what = ("None" if obj is None else "a dict" if isinstance(obj, dict) else
            f"an object of type `{type(obj).__name__}`")
    if obj is None:
        hint = "pass the model's parameters (e.g. an nn.Module)"
    elif isinstance(obj, dict) and kind == ".":
        hint = "a dict's entries are not attributes: pass an object with attributes (an nn.Module, or types.SimpleNamespace(**d))"
    else:
        hint = f"pass an object that has {missing}"
    where = f"`{path}` (parameter `{name}`, " if path != name else f"parameter `{name}` ("
    return ParamError(f"program `{prog_name}`: {where}shared argument {shared_no} of run()) "
                      f"is {what} with no {missing}, which the model reads{at}\n  ({hint}; "
                      f"{type(exc).__name__}: {exc})", param=name, attr=str(key))


def _slot_site(slots: SharedSlots, i: int) -> tuple[ir.Loc | None, str]:
    """The first model source line that reads shared slot ``i``, and its text (None, "" if none is found)."""
    d = slots.defs[i]
    if d.expr is not None and d.spec is not None:
        return d.expr.loc, d.spec.fn.source_lines.get(d.expr.loc.line, "")
    if d.parts:
        return _slot_site(slots, d.parts[0])
    sites = [(e.loc.file, e.loc.line, e.loc.col, spec.fn.source_lines.get(e.loc.line, ""))
             for spec in slots.owners.values() for s in ir.walk_stmts(spec.fn.body) for root in ir.stmt_exprs(s)
             for e in ir.walk(root) if isinstance(k := spec.kinds.get(e.nid), SharedK) and k.ref == d.ref]
    if not sites:
        return None, ""
    file, line, _, text = min(sites)
    return ir.Loc(file, line), text
