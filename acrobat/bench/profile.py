"""``acrobat profile``: where a batch's time goes, per backend (the rows of the paper's Table 6).

Each backend first runs warm-up batches, cycled until the backend is tuned
(at most ``acrobat.bench.systems.TUNE_RUNS`` more: kernel compiles and the
gather and threads-per-launch trials happen there), then the measured batches;
the table gives per-batch medians in ms: DFG construction, scheduling,
gathers and memory copies, kernel time, and the runtime overhead
(everything but kernels) as a share of the total. Kernel compiles (first
launches of a block, batch size 1) are counted apart, not in the total.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from tqdm import tqdm

from acrobat.bench.systems import TUNE_RUNS
from acrobat.models import ModelSpec
from acrobat.runtime.stats import RunStats

ROWS = [("DFG construction", "construct_ms"), ("scheduling", "schedule_ms"), ("gathers + memory copies", "gather_ms"),
        ("kernel time", "kernel_ms")]


@dataclass
class Profile:
    """Measured batches of one backend (after warm-up), their sum (``total``: the batching report,
    which backend ran), its warm-up figures and the backend's own report."""

    backend: str
    batches: list[RunStats] = field(default_factory=list)
    warmup: RunStats = field(default_factory=RunStats)
    total: RunStats = field(default_factory=RunStats)
    report: str = ""

    def median(self, attr: str) -> float:
        """Median over the measured batches of a ``RunStats`` figure."""
        return statistics.median(getattr(b, attr) for b in self.batches)


def profile_backends(spec: ModelSpec, params: Any, warmup: Sequence[Sequence], batches: Sequence[Sequence],
                     backends: Sequence[str], sync: bool) -> list[Profile]:
    """Per backend, run the ``warmup`` batches (again, by turns, until the backend is tuned: at most
    ``TUNE_RUNS`` more), then measure ``batches`` (under ``torch.inference_mode``).

    Raises:
        ValueError: unknown backend. AcrobatError: see ``Program.run``.
    """
    out = []
    with torch.inference_mode():
        for name in backends:
            prof = Profile(name)
            for b in tqdm(warmup, desc=f"{name}: warm-up", unit="batch", leave=False):
                spec.program.run(b, params, backend=name, stats=prof.warmup, sync=sync)
            be = spec.program.backend((prof.warmup.backend or name).split("+")[-1])[0]
            for b in itertools.islice(itertools.cycle(warmup), TUNE_RUNS if warmup else 0):
                if be.tuned():
                    break
                spec.program.run(b, params, backend=name, stats=prof.warmup, sync=sync)
            for b in tqdm(batches, desc=f"{name}: measuring", unit="batch", leave=False):
                st = RunStats()
                spec.program.run(b, params, backend=name, stats=st, sync=sync)
                prof.batches.append(st)
                prof.total.add(st)
            prof.report = spec.program.backend(prof.total.backend or name)[0].report()
            out.append(prof)
    return out


def profile_table(profiles: Sequence[Profile]) -> str:
    """The Table 6 rows side by side: ms per batch (median) and share of the total, per backend."""
    width = 24
    head = f"{'per batch (median)':<{width}}" + "".join(f"{p.backend:>26}" for p in profiles)
    lines = [head, "-" * len(head)]
    for label, attr in ROWS:
        cells = []
        for p in profiles:
            v, total = p.median(attr), p.median("run_ms")
            cells.append(f"{v:>10.2f} ms {100 * v / total:>5.1f}%      ")
        lines.append(f"{label:<{width}}" + "".join(f"{c:>26}" for c in cells))
    lines.append(f"{'total':<{width}}" + "".join(f"{p.median('run_ms'):>10.2f} ms{'':>13}" for p in profiles))
    lines.append(f"{'runtime overhead':<{width}}" + "".join(
        f"{p.median('overhead_ms'):>10.2f} ms {100 * p.median('overhead_ms') / p.median('run_ms'):>5.1f}%      "
        for p in profiles))
    lines.append(f"{'kernel launches':<{width}}" + "".join(f"{p.median('kernel_launches'):>13.0f}{'':>13}"
                                                           for p in profiles))
    lines.append(f"{'µs per launch':<{width}}" + "".join(
        f"{1e3 * p.median('kernel_ms') / max(1, p.median('kernel_launches')):>13.1f}{'':>13}" for p in profiles))
    lines.append(f"{'DFG nodes':<{width}}" + "".join(f"{p.median('dfg_nodes'):>13.0f}{'':>13}" for p in profiles))
    lines.append(f"{'compiles (not in total)':<{width}}" + "".join(
        f"{p.warmup.compiles + sum(b.compiles for b in p.batches):>6} "
        f"({(p.warmup.compile_ms + sum(b.compile_ms for b in p.batches)) / 1e3:.1f} s){'':>9}" for p in profiles))
    return "\n".join(lines)
