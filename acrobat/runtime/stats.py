"""Run statistics, the batching report (per block: launches, mean batch size), and timing a region of a run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch


@dataclass
class BlockStats:
    """Per static block: how often it launched and how many DFG nodes it covered."""

    name: str
    launches: int = 0
    nodes: int = 0
    hoisted: bool = False

    @property
    def mean_batch(self) -> float:
        """DFG nodes per launch."""
        return self.nodes / self.launches if self.launches else 0.0


@dataclass
class RunStats:
    """Figures of one batched run. Times in ms (wall clock, ``time.perf_counter``).

    The rows of the paper's Table 6: ``construct_ms`` DFG construction
    (running the skeleton), ``schedule_ms`` scheduling (grouping, argument
    bookkeeping, arena allocation), ``gather_ms`` explicit gathers and
    memory copies, ``kernel_ms`` batched kernel calls (with fused gathers
    inside), ``kernel_launches`` their number. ``compile_ms`` is time spent
    tracing and compiling kernels (first batches only), ``compiles`` how
    many kernels were compiled. ``phases`` counts program phases, ``stages``
    the loop stages of staged loops (§4.1). ``probing`` names the blocks
    (launch rows, choice) whose gather or threads per launch were still
    being chosen by trial after the last run (``Backend.probing``). ``overhead_ms`` is everything but kernels
    and compiles. ``runs`` counts the batched runs added up here (1 for
    one run), ``backend`` names the kernel backend that ran them (the one
    ``backend="auto"`` picked; several joined by ``+`` if they differ).
    """

    instances: int = 0
    dfg_nodes: int = 0
    kernel_launches: int = 0
    phases: int = 0
    stages: int = 0  # loop stages of the program phases of staged loops (the most any one reached)
    construct_ms: float = 0.0
    schedule_ms: float = 0.0
    gather_ms: float = 0.0
    kernel_ms: float = 0.0
    compile_ms: float = 0.0
    compiles: int = 0
    total_ms: float = 0.0
    runs: int = 0
    backend: str = ""
    blocks: dict[int, BlockStats] = field(default_factory=dict)
    dynamic: Any = None  # the dynamic tier's figures (acrobat.runtime.dynamic.DynamicStats), when it ran
    probing: list[str] = field(default_factory=list)  # after the (last) run: blocks still probing a choice
    fallback: str | None = None  # the static tier's failure (acrobat's bug, or its limit) after which the batch ran dynamically
    plain: str | None = None  # why the (last) batch ran as plain per-instance calls, unbatched (acrobat.runtime.tier)

    LOW_BATCH = 0.25
    """``report()`` flags a block whose mean batch is below this share of the mean batch size (instances per run)."""

    @property
    def run_ms(self) -> float:
        """Wall time of the run without kernel compiles, in ms."""
        return self.total_ms - self.compile_ms

    @property
    def overhead_ms(self) -> float:
        """Runtime time that is neither batched kernel calls nor compiling, in ms."""
        return self.total_ms - self.kernel_ms - self.compile_ms

    def add(self, other: "RunStats") -> None:
        """Accumulate another run's figures into this one."""
        for name in ("instances", "dfg_nodes", "kernel_launches", "construct_ms", "schedule_ms", "gather_ms", "kernel_ms",
                     "compile_ms", "compiles", "total_ms", "runs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.backend and other.backend not in self.backend.split("+"):
            self.backend = f"{self.backend}+{other.backend}" if self.backend else other.backend
        if other.dynamic is not None:
            self.dynamic = other.dynamic if self.dynamic is None else self.dynamic.merged(other.dynamic)
        if other.runs:
            self.probing = list(other.probing)
        self.fallback = other.fallback or self.fallback
        if other.runs:
            self.plain = other.plain
        self.phases = max(self.phases, other.phases)
        self.stages = max(self.stages, other.stages)
        for bid, b in other.blocks.items():
            mine = self.blocks.setdefault(bid, BlockStats(b.name, hoisted=b.hoisted))
            mine.launches += b.launches
            mine.nodes += b.nodes

    @property
    def batch_size(self) -> float:
        """Instances per run (the mini-batch size; a mean over the runs added up here)."""
        return self.instances / self.runs if self.runs else float(self.instances)

    def low_batch(self, b: BlockStats) -> bool:
        """Whether block ``b`` batched poorly: its mean batch is below ``LOW_BATCH`` of the batch size."""
        return b.launches > 0 and b.mean_batch < self.LOW_BATCH * self.batch_size

    def summary(self) -> str:
        """A short report of the runs added up here: DFG nodes and launches per run, the mean batch (DFG nodes
        per launch), how many blocks batched poorly (``low_batch``) and, when the dynamic tier ran, its first
        line (``report()`` has the tables)."""
        runs = max(self.runs, 1)
        mean = self.dfg_nodes / self.kernel_launches if self.kernel_launches else 0.0
        low = sum(self.low_batch(b) for b in self.blocks.values())
        lines = [f"{self.dfg_nodes / runs:.0f} DFG nodes in {self.kernel_launches / runs:.0f} batched launches per "
                 f"batch (mean batch {mean:.1f} nodes per launch), {len(self.blocks)} block(s)"
                 + (f", {low} batching poorly (see --verbose)" if low else "")]
        if self.dynamic is not None:
            lines.append(self.dynamic.report(self.blocks.values()).splitlines()[0])
        if self.fallback:
            lines.append(f"the static tier could not run the batch, which ran in the dynamic tier: {self.fallback}")
        if self.plain:
            lines.append(self.plain)
        return "\n".join(lines)

    def report(self) -> str:
        """A readable batching report: one line per block (launches, DFG nodes, mean batch = nodes per
        launch), blocks whose mean batch fell below ``LOW_BATCH`` of the batch size flagged with ``!``."""
        on = f", {self.backend} backend" if self.backend else ""
        staged = f" ({self.stages} loop stages)" if self.stages else ""
        lines = [f"{self.dfg_nodes} DFG nodes in {self.kernel_launches} batched launches, {self.phases} program "
                 f"phase(s){staged}{on}; batch size {self.batch_size:.0f}",
                 f"{'block':<34} {'launches':>9} {'nodes':>8} {'mean batch':>11}  depth"]
        low = 0
        for b in sorted(self.blocks.values(), key=lambda b: -b.nodes):
            flag = self.low_batch(b)
            low += flag
            lines.append(f"{b.name:<34} {b.launches:>9} {b.nodes:>8} {b.mean_batch:>11.1f}{'!' if flag else ' '} "
                         f"{'hoisted (static)' if b.hoisted else 'inline'}")
        if low:
            lines.append(f"! {low} block(s) with a mean batch below {self.LOW_BATCH:.0%} of the batch size: their "
                         "launches are mostly per-instance work (value reads that split the batch, §4.2, or "
                         "control flow that ghost operators could not line up)")
        if self.dynamic is not None:
            lines.append(self.dynamic.report(self.blocks.values()))
        if self.fallback:
            lines.append(f"the static tier could not run the batch, which ran in the dynamic tier: {self.fallback}")
        if self.plain:
            lines.append(self.plain)
        if self.probing:
            lines.append(f"still probing after the last run ({len(self.probing)}; runs until then time "
                         f"settings on trial): {'; '.join(self.probing)}")
        return "\n".join(lines)


def timed(stats: RunStats, name: str, sync: bool, f: Callable[[], Any]) -> Any:
    """``f()``, adding its wall time in ms to ``stats.<name>`` (after a device sync when ``sync``: profiling)."""
    t0 = time.perf_counter()
    out = f()
    if sync:
        torch.cuda.synchronize()
    setattr(stats, name, getattr(stats, name) + (time.perf_counter() - t0) * 1e3)
    return out
