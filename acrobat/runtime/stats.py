"""Run statistics and the batching report (per block: launches, mean batch size)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    many kernels were compiled. ``overhead_ms`` is everything but kernels
    and compiles.
    """

    instances: int = 0
    dfg_nodes: int = 0
    kernel_launches: int = 0
    phases: int = 0
    construct_ms: float = 0.0
    schedule_ms: float = 0.0
    gather_ms: float = 0.0
    kernel_ms: float = 0.0
    compile_ms: float = 0.0
    compiles: int = 0
    total_ms: float = 0.0
    blocks: dict[int, BlockStats] = field(default_factory=dict)

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
                     "compile_ms", "compiles", "total_ms"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.phases = max(self.phases, other.phases)
        for bid, b in other.blocks.items():
            mine = self.blocks.setdefault(bid, BlockStats(b.name, hoisted=b.hoisted))
            mine.launches += b.launches
            mine.nodes += b.nodes

    def report(self) -> str:
        """A readable batching report: one line per block."""
        lines = [f"{self.dfg_nodes} DFG nodes in {self.kernel_launches} batched launches, {self.phases} program phase(s)",
                 f"{'block':<34} {'launches':>9} {'nodes':>8} {'mean batch':>11}  depth"]
        for b in sorted(self.blocks.values(), key=lambda b: -b.nodes):
            lines.append(f"{b.name:<34} {b.launches:>9} {b.nodes:>8} {b.mean_batch:>11.1f}  "
                         f"{'hoisted (static)' if b.hoisted else 'inline'}")
        return "\n".join(lines)
