"""Threads per launch: each static block runs on 1 CPU thread or on all, chosen by measurement.

A batched launch of a tiny block (8 rows of a 32-wide RNN cell) is a few
µs of work; run on torch's OpenMP pool it pays a fork/join on every call,
and on a machine whose cores are busy with other processes that join waits
for a descheduled worker: on a shared 2-core machine a 4.6 µs launch took
24 ms at 2 threads (``scripts/threads_per_launch.py``). Large launches gain
from the pool (a (1024, 512) matmul: 0.52 of the 1-thread time at 2 threads).
The kernel row of Table 6 is only small next to the runtime when each
launch runs at the thread count that suits it.

``ThreadPolicy`` picks per block and launch size (rows in ``size_class``:
powers of two), as the compiled backend picks gathers (App. C.1): the same
block gains from the pool at a 600-row level and loses at a 3-row one, and a
choice made on batches of 8 must not hold for batches of 64. A (block, size)
pair's launches run on 1 thread in one run and on all in the next, by turns,
until each setting was timed in ``PROBE_RUNS`` runs (gather + kernel, µs per
batched row of the whole run); then it keeps all threads only if their
median is clearly faster (``MARGIN``), else 1. Whole runs, not single
launches, take turns: a block's launches in one run differ in size (a
TreeLSTM level of 600 nodes, then of 3), and turns by launch gave one
setting the same levels run after run. The turns go by pairs of runs (1, 1,
all, all, ...), so that the compiled backend's gather probe, which
alternates by single runs, sees each thread setting with both gathers. A run
in which a launch compiled a kernel is no sample. A pooled launch that is
``GIVE_UP`` times slower than the 1-thread rate and over ``STALL_US`` ends
the probing at 1 thread at once (busy cores). ``torch.set_num_threads`` costs
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

PROBE_RUNS = 3
"""Runs per thread setting a block is timed in before its choice."""
MARGIN = 0.8
"""All threads are kept only when they take at most this share of the 1-thread time: the risks are not
alike (at worst 1 thread halves a large launch's speed on 2 cores; a pool on busy cores made a tiny
launch 1000x slower), and near-equal medians mean the pool buys nothing."""
GIVE_UP = 4.0
"""Probing stops at once, at 1 thread, when a pooled launch takes this many times the 1-thread rate for its
rows (and over ``STALL_US``): on busy cores every further pooled launch of a tiny block costs milliseconds."""
STALL_US = 1000.0
MODES = ("auto", "all", "1")
ENV = "ACROBAT_LAUNCH_THREADS"


SIZE_CLASSES = 10
"""Launch sizes are told apart up to ``2 ** (SIZE_CLASSES - 1)`` rows; larger launches share the last class."""


def size_class(rows: int) -> int:
    """The size class of a launch of ``rows`` rows: 0 for 1 row, 1 for 2-3, 2 for 4-7, ... (at most
    ``SIZE_CLASSES - 1``)."""
    return min(rows.bit_length(), SIZE_CLASSES) - 1


@dataclass
class BlockThreads:
    """One block's thread choice for one launch size class: per thread count, per run, the timed µs and rows;
    then the count kept."""

    name: str
    samples: dict[int, dict[int, list[float]]] = field(default_factory=dict)  # threads -> run -> [µs, rows]
    choice: int | None = None
    runs: int = 0  # runs the block launched in while probing (settings alternate by run)
    serial: int = -1  # the run of its last launch
    skip: int = -1  # a run in which a launch compiled a kernel: not a sample

    def us_per_row(self, threads: int) -> float:
        """Median over the runs timed at ``threads`` threads of the run's µs per batched row (0.0 if none)."""
        runs = self.samples.get(threads)
        return statistics.median(us / max(rows, 1) for us, rows in runs.values()) if runs else 0.0


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
        self.blocks: dict[tuple[int, int], BlockThreads] = {}  # (block id, size class) -> its choice

    def threads_for(self, bid: int, name: str, pool: int, serial: int, rows: int) -> int:
        """How many threads the next launch of block ``bid`` (``rows`` rows) runs on, in run ``serial``, with
        ``pool`` threads in torch's pool. The first launch of a (block, size class) in a run that finds both
        settings timed in ``PROBE_RUNS`` runs makes the choice: all threads when their median µs per row is
        at most ``MARGIN`` of 1 thread's."""
        if self.mode == "all" or pool <= 1:
            return pool
        if self.mode == "1":
            return 1
        key = (bid, size_class(rows))
        b = self.blocks.get(key)
        if b is None:
            b = self.blocks[key] = BlockThreads(name)
        if b.choice is None and b.serial != serial:
            b.serial = serial
            b.runs += 1
            if len(b.samples) == 2 and min(map(len, b.samples.values())) >= PROBE_RUNS:
                many = max(b.samples)
                b.choice = many if b.us_per_row(many) <= MARGIN * b.us_per_row(1) else 1
        if b.choice is not None:
            return 1 if b.choice == 1 else pool
        return 1 if (b.runs - 1) // 2 % 2 == 0 else pool  # runs 1, 2: 1 thread; 3, 4: all; ... (module docstring)

    def record(self, bid: int, threads: int, us: float, rows: int, serial: int) -> None:
        """A timed launch of block ``bid`` in run ``serial``: ``us`` µs for ``rows`` batched rows at ``threads``
        threads. A pooled launch that stalls (``GIVE_UP``, ``STALL_US``) ends the probing at 1 thread."""
        b = self.blocks.get((bid, size_class(rows)))
        if b is None or b.choice is not None or serial == b.skip:
            return
        run = b.samples.setdefault(threads, {}).setdefault(serial, [0.0, 0])
        run[0] += us
        run[1] += rows
        if threads != 1 and us > STALL_US and b.samples.get(1) and us >= GIVE_UP * b.us_per_row(1) * max(rows, 1):
            b.choice = 1

    def tuned(self) -> bool:
        """Whether every (block, launch size class) launched so far has its thread count chosen."""
        return all(b.choice is not None for b in self.blocks.values())

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
        n = self.threads_for(bid, name, pool, rt.serial, rows)
        b = self.blocks.get((bid, size_class(rows)))
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
        if probing:
            if stats.compiles == compiles:
                self.record(bid, n, (time.perf_counter() - t0) * 1e6, rows, rt.serial)
            else:
                self.discard(bid, n, rt.serial, rows)
        return out

    def discard(self, bid: int, threads: int, serial: int, rows: int) -> None:
        """Run ``serial`` of block ``bid`` compiled a kernel in a launch of ``rows`` rows: none of the run's
        launches of that size class is a sample."""
        b = self.blocks[(bid, size_class(rows))]
        b.samples.get(threads, {}).pop(serial, None)
        b.skip = serial

    def report(self) -> str:
        """Per block and launch size class: the thread count its launches run at and why (measured µs per row
        at 1 and all)."""
        if self.mode != "auto":
            return f"threads per launch: {self.mode} ({'forced' if os.environ.get(ENV) else 'set'} by ${ENV})"
        if not self.blocks:
            return ""
        pool = torch.get_num_threads()
        lines = [f"{'block':<34} {'rows':>9}  threads per launch (of {pool})"]
        for (_, size), b in sorted(self.blocks.items()):
            many = next((t for t in b.samples if t != 1), pool)
            measured = (f"1 thread {b.us_per_row(1):.2f} µs/row, {many} threads {b.us_per_row(many):.2f} µs/row"
                        if len(b.samples) == 2 else "")
            if b.choice is None:
                how = f"probing ({b.runs} runs){': ' + measured if measured else ''}"
            else:
                how = f"{b.choice} (measured: {measured})"
            low = 1 << size
            rows = f"{low}+" if size == SIZE_CLASSES - 1 else (f"{low}" if size == 0 else f"{low}-{2 * low - 1}")
            lines.append(f"{b.name:<34} {rows:>9}  {how}")
        return "\n".join(lines)
