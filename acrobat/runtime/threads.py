"""Threads per launch: each static block runs on 1 CPU thread or on all, chosen by measurement.

A batched launch of a tiny block (8 rows of a 32-wide RNN cell) is a few
µs of work; run on torch's OpenMP pool it pays a fork/join on every call,
and on a machine whose cores are busy with other processes that join waits
for a descheduled worker: on a shared 2-core machine a 4.6 µs launch took
24 ms at 2 threads (``scripts/threads_per_launch.py``). Large launches gain
from the pool (a (1024, 512) matmul: 0.52 of the 1-thread time at 2 threads).
The kernel row of Table 6 is only small next to the runtime when each
launch runs at the thread count that suits it.

``ThreadPolicy`` picks per block, as the compiled backend picks gathers
(App. C.1): a block's first ``PROBE_LAUNCHES`` launches at each setting, by
turns (1 thread, all threads, ...), are timed (gather + kernel, µs per
batched row); then it keeps all threads only if their median is clearly
faster (``MARGIN``), else 1. A pool that is already ``GIVE_UP`` times
slower after ``EARLY_LAUNCHES`` launches each ends the probing at 1 thread. ``torch.set_num_threads`` costs
about 0.1 µs, so it is set around each launch that needs another count
than the process's; TorchInductor's CPU kernels (``#pragma omp parallel``
with no fixed count) and ATen's GEMMs both follow it. Launches that
compiled a kernel are not timed. Only CPU launches are governed (a CUDA
launch's host thread count is not its speed).

``$ACROBAT_LAUNCH_THREADS``: ``auto`` (default, as above), ``all`` (never
change torch's setting) or ``1`` (every launch single-threaded).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import torch

from acrobat.runtime.stats import RunStats

if TYPE_CHECKING:
    from acrobat.runtime.dfg import Group

T = TypeVar("T")

PROBE_LAUNCHES = 8
"""Timed launches per thread setting before a block's choice."""
MARGIN = 0.8
"""All threads are kept only when they take at most this share of the 1-thread time: the risks are not
alike (at worst 1 thread halves a large launch's speed on 2 cores; a pool on busy cores made a tiny
launch 1000x slower), and near-equal medians mean the pool buys nothing."""
GIVE_UP = 4.0
"""Probing stops early, at 1 thread, once ``EARLY_LAUNCHES`` launches of each setting show the pool this many
times slower: on busy cores every further pooled probe of a tiny block costs milliseconds."""
EARLY_LAUNCHES = 2
MODES = ("auto", "all", "1")
ENV = "ACROBAT_LAUNCH_THREADS"


@dataclass
class BlockThreads:
    """One block's thread choice: samples (µs per row) per thread count, then the count kept."""

    name: str
    samples: dict[int, list[float]] = field(default_factory=dict)  # threads -> µs per batched row, per launch
    choice: int | None = None
    turn: int = 0  # launches so far (probing alternates by launch)

    def us_per_row(self, threads: int) -> float:
        """Median µs per batched row of the launches timed at ``threads`` threads (0.0 if none)."""
        s = self.samples.get(threads)
        return statistics.median(s) if s else 0.0


class ThreadPolicy:
    """Per static block: run its launches single-threaded or on torch's whole pool (module docstring).

    ``mode`` is ``"auto"`` (measure, then choose), ``"all"`` (leave torch's
    thread count alone) or ``"1"``; by default ``$ACROBAT_LAUNCH_THREADS``,
    else ``"auto"``.

    Raises:
        ValueError: unknown mode.
    """

    def __init__(self, mode: str | None = None):
        mode = mode or os.environ.get(ENV) or "auto"
        if mode not in MODES:
            raise ValueError(f"unknown launch-threads mode {mode!r} (${ENV}); choose one of {', '.join(MODES)}")
        self.mode = mode
        self.blocks: dict[int, BlockThreads] = {}

    def threads_for(self, bid: int, name: str, pool: int) -> int:
        """How many threads the next launch of block ``bid`` runs on, with ``pool`` threads in torch's pool."""
        if self.mode == "all" or pool <= 1:
            return pool
        if self.mode == "1":
            return 1
        b = self.blocks.get(bid)
        if b is None:
            b = self.blocks[bid] = BlockThreads(name)
        if b.choice is not None:
            return 1 if b.choice == 1 else pool
        b.turn += 1
        return 1 if b.turn % 2 else pool

    def record(self, bid: int, threads: int, us: float, rows: int) -> None:
        """A timed launch of block ``bid``: ``us`` µs for ``rows`` batched rows at ``threads`` threads;
        once both settings have ``PROBE_LAUNCHES`` samples, keep the faster."""
        b = self.blocks.get(bid)
        if b is None or b.choice is not None:
            return
        b.samples.setdefault(threads, []).append(us / max(rows, 1))
        if len(b.samples) < 2:
            return
        many, fewest = max(b.samples), min(map(len, b.samples.values()))
        if fewest >= PROBE_LAUNCHES:
            b.choice = many if b.us_per_row(many) <= MARGIN * b.us_per_row(1) else 1
        elif fewest >= EARLY_LAUNCHES and b.us_per_row(many) >= GIVE_UP * b.us_per_row(1):
            b.choice = 1  # the pool is already clearly slower: stop paying for its probes

    def governs(self, device: torch.device) -> bool:
        """Whether launches on ``device`` are governed (timed, maybe run at another thread count);
        if not, the runtime calls the kernel itself, not ``run``."""
        return self.mode != "all" and device.type == "cpu" and torch.get_num_threads() > 1

    def run(self, bid: int, name: str, rows: int, stats: RunStats, launch: Callable[[Group, Any], T], g: Group,
            rt: Any) -> T:
        """``launch(g, rt)``, one launch of block ``bid`` (``rows`` batched rows), at the block's thread
        count, timed; call only where ``governs`` holds. (A plain call, not a context manager: a
        generator-based one cost 1.2 µs a launch.)

        ``stats`` are the run's: a launch that compiled a kernel (``stats.compiles`` grew) is not a sample.
        Only launches of a block still probing are timed.
        """
        pool = torch.get_num_threads()
        n = self.threads_for(bid, name, pool)
        b = self.blocks.get(bid)
        probing = b is not None and b.choice is None
        compiles = stats.compiles
        if n != pool:
            torch.set_num_threads(n)
        t0 = time.perf_counter()
        try:
            out = launch(g, rt)
        finally:
            if n != pool:
                torch.set_num_threads(pool)
        if probing and stats.compiles == compiles:
            self.record(bid, n, (time.perf_counter() - t0) * 1e6, rows)
        return out

    def report(self) -> str:
        """Per block: the thread count its launches run at and why (measured µs per row at 1 and all)."""
        if self.mode != "auto":
            return f"threads per launch: {self.mode} ({'forced' if os.environ.get(ENV) else 'set'} by ${ENV})"
        if not self.blocks:
            return ""
        pool = torch.get_num_threads()
        lines = [f"{'block':<34} threads per launch (of {pool})"]
        for b in self.blocks.values():
            many = next((t for t in b.samples if t != 1), pool)
            measured = (f"1 thread {b.us_per_row(1):.2f} µs/row, {many} threads {b.us_per_row(many):.2f} µs/row"
                        if len(b.samples) == 2 else "")
            if b.choice is None:
                how = f"probing ({b.turn} launches){': ' + measured if measured else ''}"
            else:
                how = f"{b.choice} (measured: {measured})"
            lines.append(f"{b.name:<34} {how}")
        return "\n".join(lines)
