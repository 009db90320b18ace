"""The compiled backend: each static block as one TorchInductor kernel over arena memory (§5, App. C).

Per block and argument signature (per-instance shapes, shared shapes),
``acrobat.codegen.kernels`` traces the batched aten graph once, with a
symbolic batch size, and TorchInductor (``torch._inductor.compile``: C++/
OpenMP on CPU, Triton on CUDA) turns it into fused loops around library
GEMMs. One compiled kernel serves every batch size (a launch of one row
is padded to two); ``RunStats.compiles`` counts compiles. The graph goes
to Inductor directly, not through Dynamo: acrobat's own signature key
replaces Dynamo's guards, which cost ~50 µs per launch.

Gathers (§5.2) come two ways: explicit (the runtime copies the rows into a
contiguous batch, a view when they are contiguous) and fused (the kernel
takes the arena storage and an index vector and reads in place). With
``gather="auto"`` each block is profiled both ways on its first launches
and keeps the faster (profile-guided, App. C.1); ``report()`` says what
was picked. Outputs are copied into arena rows after the kernel (counted
with the gathers as memory copies).

Compiled kernels are cached on disk by Inductor's FX graph cache, under
``acrobat.cachedir.cache_dir()/inductor`` (``$ACROBAT_CACHE_DIR`` or
``~/.cache/acrobat``).
The backend runs inference only: the arena is overwritten by the next run.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
import torch._inductor
from torch._inductor.graph import GraphLowering

from acrobat.analysis.lowered import Block
from acrobat.codegen.kernels import RowSpec, trace_block
from acrobat.errors import AcrobatError
from acrobat.runtime.arena import Arena
from acrobat.runtime.backend import columns
from acrobat.runtime.dfg import Group, Value
from acrobat.runtime.gather import arena_rows, gather_columns, index_or_slice, int_tensor

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime

log = logging.getLogger("acrobat.compile")

PROBE_LAUNCHES = 6  # timed launches per gather mode before a block's choice (after one warm-up each)
GATHER_MODES = ("auto", "explicit", "fused")


@dataclass
class Variant:
    """One compiled kernel of a block: for one gather mode and argument signature."""

    out_rows: list[RowSpec]  # per block output: its per-instance shape and dtype
    fn: Callable
    code: list[str] = field(default_factory=list)  # Inductor's generated wrapper module(s)
    launches: int = 0


class CompiledKernel:
    """A block's batched launch through compiled kernels (see the module docstring).

    Raises (when called):
        AcrobatError: a shared tensor requires grad with grad mode on
            (the compiled backend is inference only; use the eager backend).
    """

    def __init__(self, backend: "CompiledBackend", block: Block, fn: Callable):
        self.backend = backend
        self.block = block
        self.fn = fn
        self.variants: dict[tuple, Variant] = {}
        # per gather mode, per profiled launch: (µs of gather + kernel, rows)
        self.samples: dict[str, list[tuple[float, int]]] = {"explicit": [], "fused": []}
        self.choice: str | None = None if backend.gather == "auto" else backend.gather
        self._shared: tuple[int, tuple] = (0, ())  # (serial of the run, signature of its shared arguments)

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        shared = rt.shared[self.block.id]
        shared_sig = self._shared_signature(rt, shared)
        t0 = time.perf_counter()
        tensor_cols, hosts = columns(g, rt.device)
        located = [arena_rows(c) for c in tensor_cols]
        fused = bool(tensor_cols) and self._mode(all(loc is not None for loc in located)) == "fused"
        args, in_rows = self._arguments(tensor_cols, located, hosts, fused, len(g.args), rt)
        t1 = time.perf_counter()
        rt.stats.gather_ms += (t1 - t0) * 1e3
        key = (fused, tuple(in_rows), shared_sig)
        variant = self.variants.get(key)
        if variant is None:
            variant = self._compile(key, in_rows, shared, fused, rt)
        n = len(g.args)
        spans = [rt.arena.alloc(r.shape, r.dtype, rt.device, n) for r in variant.out_rows]  # type: ignore[union-attr]
        outs = [s[start:start + n] for s, start in spans]
        t2 = time.perf_counter()
        results = variant.fn(*args, *shared)
        if rt.sync:
            torch.cuda.synchronize()
        t3 = time.perf_counter()
        rt.stats.kernel_ms += (t3 - t2) * 1e3
        if variant.launches > 0 and self.choice is None and tensor_cols:
            self.samples["fused" if fused else "explicit"].append(((t1 - t0 + t3 - t2) * 1e6, n))
            self._maybe_choose()
        variant.launches += 1
        for o, r in zip(outs, results):
            o.copy_(r[:n])  # a padded launch (batch size 1) computed 2 rows
        rt.stats.gather_ms += (time.perf_counter() - t3) * 1e3
        g.spans = tuple(spans)
        return tuple(outs)

    # -- pieces --------------------------------------------------------------
    def _shared_signature(self, rt: "Runtime", shared: Sequence[Any]) -> tuple:
        if self._shared[0] != rt.serial:
            if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in shared):
                raise AcrobatError("the compiled backend runs inference only (outputs live in reused arena memory); "
                                   "run under torch.inference_mode()/no_grad(), or use backend='eager' for training")
            self._shared = (rt.serial, tuple(_signature(x) for x in shared))
        return self._shared[1]

    def _mode(self, fusable: bool) -> str:
        """The gather mode of this launch: the choice, or while probing the mode with fewer samples."""
        if not fusable:
            return "explicit"
        if self.choice is not None:
            return self.choice
        return "fused" if len(self.samples["fused"]) < len(self.samples["explicit"]) else "explicit"

    def us_per_row(self, mode: str) -> float:
        """Profiled time of ``mode`` (gather + kernel) per batched row, µs: total time over total rows.

        Launches alternate between the modes, so both see the same mix of batch sizes.
        """
        s = self.samples[mode]
        return sum(us for us, _ in s) / max(1, sum(n for _, n in s))

    def _maybe_choose(self) -> None:
        if min(len(self.samples["explicit"]), len(self.samples["fused"])) >= PROBE_LAUNCHES:
            e, f = self.us_per_row("explicit"), self.us_per_row("fused")
            self.choice = "fused" if f < e else "explicit"
            log.info("block %s: %s gather (explicit %.2f µs/row, fused %.2f µs/row)", self.block.name, self.choice, e, f)

    def _arguments(self, tensor_cols: list[Sequence[Value]], located: list, hosts: list[torch.Tensor | None],
                   fused: bool, n: int, rt: "Runtime") -> tuple[list[torch.Tensor], list[RowSpec]]:
        """The kernel's batched inputs and their per-instance specs (the signature).

        Fused: every tensor column is (arena storage, index); the indices of
        all columns go to the device as one tensor (one copy, not one per column).
        A launch of batch size ``n`` = 1 is padded to 2 (its row twice): kernels
        are compiled for sizes >= 2, where the compiler may assume a size is not 1.
        """
        reps = 2 if n == 1 else 1
        args: list[torch.Tensor] = []
        in_rows: list[RowSpec] = []
        if fused:
            flat = [r for _, rows in located for r in rows * reps]
            idx = iter(int_tensor(flat, rt.device).split(n * reps))
        cols, locs = iter(tensor_cols), iter(located)
        for h in hosts:
            if h is not None:
                args.append(h if reps == 1 else torch.cat([h, h]))
                in_rows.append(RowSpec.of(h))
                continue
            col, loc = next(cols), next(locs)
            if fused:
                args += [loc[0], next(idx)]
                in_rows.append(RowSpec.of(loc[0]))
                continue
            if loc is None:  # compiled kernels take contiguous rows (a lifted weight may be a strided view)
                x = gather_columns([col], rt.device)[0].contiguous()
            else:
                storage, rows = loc
                sel = index_or_slice(rows, rt.device)
                x = storage[sel] if isinstance(sel, slice) else storage.index_select(0, sel)
            args.append(x if reps == 1 else torch.cat([x, x]))
            in_rows.append(RowSpec.of(x))
        return args, in_rows

    def _compile(self, key: tuple, in_rows: list[RowSpec], shared: Sequence[Any], fused: bool,
                 rt: "Runtime") -> Variant:
        """Trace the variant for ``key`` and compile it with TorchInductor (or load it from the disk cache)."""
        t0 = time.perf_counter()
        log.info("compiling block %s (%s gather) ...", self.block.name, "fused" if fused else "explicit")
        graph = trace_block(self.block, self.fn, in_rows, shared, fused, rt.device)
        code: list[str] = []
        before = GraphLowering.save_output_code
        GraphLowering.save_output_code = code.append  # Inductor's hook, called on fresh compiles and cache hits
        try:
            with torch.no_grad():  # an inference graph: no autograd bookkeeping in the kernel's wrapper
                fn = torch._inductor.compile(graph.gm, graph.example_inputs)
        finally:
            GraphLowering.save_output_code = before
        variant = self.variants[key] = Variant(graph.out_rows, fn, code)  # the traced graph is not kept
        rt.stats.compiles += 1
        rt.stats.compile_ms += (time.perf_counter() - t0) * 1e3
        return variant


def _signature(x: Any) -> Any:
    """A hashable description of a shared argument: shape, strides, dtype and device for tensors, else the value."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.stride(), x.dtype, x.device)
    if isinstance(x, (list, tuple)):
        return tuple(_signature(i) for i in x)
    return x


class CompiledBackend:
    """Blocks as TorchInductor kernels with arena memory and explicit/fused/auto gathers (§5).

    ``gather`` is ``"auto"`` (profile-guided per block), ``"explicit"`` or
    ``"fused"``. ``arena`` holds block outputs across runs.

    Raises:
        ValueError: unknown gather mode.
    """

    def __init__(self, gather: str = "auto"):
        if gather not in GATHER_MODES:
            raise ValueError(f"unknown gather mode {gather!r}; choose one of {', '.join(GATHER_MODES)}")
        self.gather = gather
        self.name = "compiled" if gather == "auto" else f"compiled-{gather}"
        self.arena = Arena()
        self.kernels: list[CompiledKernel] = []

    def kernel(self, block: Block, fn: Callable) -> CompiledKernel:
        k = CompiledKernel(self, block, fn)
        self.kernels.append(k)
        return k

    def report(self) -> str:
        """Per block: compiled variants, launches and the gather mode in use; then the arena's size."""
        lines = [f"{'block':<34} {'kernels':>7} {'launches':>9}  gather"]
        for k in self.kernels:
            if not k.variants:
                continue
            launches = sum(v.launches for v in k.variants.values())
            if not any(p.role == "tensor" for p in k.block.batched_params):
                how = "none (no tensor inputs)"
            elif k.choice is None:
                how = "explicit (rows not in one arena storage yet)" if not k.samples["fused"] else "probing"
            elif self.gather != "auto":
                how = f"{k.choice} (forced)"
            else:
                how = (f"{k.choice} (profiled: explicit {k.us_per_row('explicit'):.2f} µs/row, "
                       f"fused {k.us_per_row('fused'):.2f} µs/row)")
            lines.append(f"{k.block.name:<34} {len(k.variants):>7} {launches:>9}  {how}")
        lines.append(f"arena: {self.arena.nbytes / 2 ** 20:.1f} MiB in {len(self.arena.pools)} pool(s), "
                     f"{self.arena.growths} allocation(s)")
        return "\n".join(lines)


def kernel_listing(backend: CompiledBackend) -> str:
    """Per block and compiled variant: the generated kernels and Inductor's ``call`` schedule.

    The ``call`` function of Inductor's wrapper is the launch's whole
    schedule: each ``cpp_fused_*`` / ``triton_*`` line is one generated
    (fused) kernel, each ``extern_kernels.*`` a library call (GEMMs).
    """
    parts = []
    for k in backend.kernels:
        for (fused, in_rows, _), v in k.variants.items():
            head = (f"# block {k.block.name} ({k.block.loc}), {'fused' if fused else 'explicit'} gather, "
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
