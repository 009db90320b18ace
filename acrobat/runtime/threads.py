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
choice made on batches of 8 must not hold for batches of 64. Each (block,
size class) is a ``acrobat.runtime.tuning.Trial``: its launches run on 1
thread in one run and on all in the next, by turns, until each setting was
timed in ``PROBE_RUNS`` runs (gather + kernel, µs per batched row of the
whole run); then it keeps all threads only if they were clearly faster
(``MARGIN``) at the median and never slower than 1 thread's median, else 1. On the compiled backend this trial comes
first: the block's gather trial waits for it, at the default gather, so
the two never time each other (``settled``). A pooled launch that is
``GIVE_UP`` times slower than the 1-thread rate and over ``STALL_US``, in
``STALL_RUNS`` runs, ends the probing at 1 thread (busy cores; one such
launch is no proof: the first pooled launch of a process starts OpenMP's
workers). ``torch.set_num_threads`` costs
about 0.1 µs, so it is set around each launch that needs another count
than the process's; TorchInductor's CPU kernels (``#pragma omp parallel``
with no fixed count) and ATen's GEMMs both follow it. Launches that
compiled a kernel are not timed. Only CPU launches are governed (a CUDA
launch's host thread count is not its speed). Settled choices are kept on
disk (``acrobat.runtime.remembered``), so the next process starts with them.

``$ACROBAT_LAUNCH_THREADS``: ``auto`` (default, as above), ``all`` (never
change torch's setting) or ``1`` (every launch single-threaded).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import torch

from acrobat.runtime.remembered import ChoiceMemory
from acrobat.runtime.stats import RunStats
from acrobat.runtime.tuning import Trial

if TYPE_CHECKING:
    from acrobat.runtime.dfg import Group

T = TypeVar("T")

PROBE_RUNS = 5
"""Runs per thread setting a (block, size class) is timed in before its choice."""
MARGIN = 0.8
"""All threads are kept only when their median time is at most this share of the 1-thread median, and none
of their runs took longer than that median (``Trial.every_run``): the risks are not alike (at worst 1 thread halves a large launch's speed on 2
cores; a pool on busy cores made a tiny launch 1000x slower), and near-equal times mean the pool buys
nothing."""
GIVE_UP = 4.0
"""Probing stops, at 1 thread, when pooled launches take this many times the 1-thread rate for their rows
(and over ``STALL_US``) in ``STALL_RUNS`` runs: on busy cores every further pooled launch of a tiny block
costs milliseconds."""
STALL_US = 1000.0
STALL_RUNS = 2
MIN_POOL_ROWS = 16
"""Launches of fewer rows always run on 1 thread, untimed: so little work per thread never repays OpenMP's
fork and join, and a pooled choice made for them while the cores were briefly idle (then remembered) ran
TreeLSTM's cell 3-8x slower once they were busy again."""
ALL = 0
"""The setting "torch's whole pool" (whatever its size)."""
MODES = ("auto", "all", "1")
ENV = "ACROBAT_LAUNCH_THREADS"


SIZE_CLASSES = 10
"""Launch sizes are told apart up to ``2 ** (SIZE_CLASSES - 1)`` rows; larger launches share the last class."""


def size_class(rows: int) -> int:
    """The size class of a launch of ``rows`` rows: 0 for 1 row, 1 for 2-3, 2 for 4-7, ... (at most
    ``SIZE_CLASSES - 1``)."""
    return min(rows.bit_length(), SIZE_CLASSES) - 1


def class_rows(size: int) -> str:
    """The rows of size class ``size`` as text: ``1``, ``2-3``, ..., ``512+``."""
    low = 1 << size
    return f"{low}+" if size == SIZE_CLASSES - 1 else (f"{low}" if size == 0 else f"{low}-{2 * low - 1}")


class ThreadPolicy:
    """Per static block and launch size class: run its launches single-threaded or on torch's whole pool
    (module docstring).

    ``mode`` is ``"auto"`` (measure, then choose), ``"all"`` (leave torch's
    thread count alone) or ``"1"``; by default ``$ACROBAT_LAUNCH_THREADS``,
    else ``"auto"``. ``memory``: where settled choices are kept across
    processes (None: nowhere).

    Raises:
        ValueError: unknown mode.
    """

    def __init__(self, mode: str | None = None, memory: ChoiceMemory | None = None):
        mode = mode or os.environ.get(ENV) or "auto"
        if mode not in MODES:
            raise ValueError(f"unknown launch-threads mode {mode!r} (${ENV}); choose one of {', '.join(MODES)}")
        self.mode = mode
        self.memory = memory
        self.blocks: dict[tuple[int, int], Trial[int]] = {}  # (block id, size class) -> its trial (1 or ALL)
        self.names: dict[int, str] = {}  # block id -> name (for the report)
        self._keys: dict[int, str | None] = {}  # block id -> its key in ``memory``
        self._stalls: dict[tuple[int, int], set[int]] = {}  # (block id, size class) -> runs with a stalled launch
        self.pool = torch.get_num_threads()  # torch's thread count outside the launch in progress (``run``)

    def trial(self, bid: int, rows: int, rt: Any = None, pool: int = 0) -> Trial[int]:
        """The trial of block ``bid``'s launches of ``rows`` rows; a new one starts with the choice remembered
        for the block (``rt``: the run, which names the block, its shared arguments and device; ``pool``:
        torch's thread count), if any."""
        key = (bid, size_class(rows))
        t = self.blocks.get(key)
        if t is None:
            t = self.blocks[key] = Trial(1, ALL, PROBE_RUNS, MARGIN, every_run=True)
            if self.memory is not None and rt is not None:
                if bid not in self._keys:  # (the dynamic tier's operators have no shared arguments: not kept)
                    block, shared = rt.blocks.get(bid), rt.shared.get(bid)
                    self._keys[bid] = None if block is None or shared is None else self.memory.key(block, shared,
                                                                                                  rt.device, pool)
                kept = self.memory.recall(self._keys[bid], "threads", key[1])
                if kept is not None:
                    t.choice = 1 if kept == "1" else ALL
        return t

    def threads_for(self, bid: int, name: str, pool: int, serial: int, rows: int, rt: Any = None) -> int:
        """How many threads the next launch of block ``bid`` (``rows`` rows) runs on, in run ``serial``, with
        ``pool`` threads in torch's pool (``rt``: the run, for ``trial``). The first launch of a (block, size
        class) in a run that finds both settings timed in ``PROBE_RUNS`` runs makes the choice (``Trial``):
        all threads when their median µs per row is at most ``MARGIN`` of 1 thread's."""
        if self.mode == "all" or pool <= 1:
            return pool
        if self.mode == "1":
            return 1
        if rows < MIN_POOL_ROWS:
            return 1
        self.names.setdefault(bid, name)
        t = self.trial(bid, rows, rt, pool)
        if t.choice is None:
            setting = t.setting(serial)
            if t.choice is not None:
                self._keep(bid, rows, t)
        else:
            setting = t.choice
        return 1 if setting == 1 else pool

    def settled(self, bid: int, rows: int) -> bool:
        """Whether block ``bid``'s launches of ``rows`` rows have their thread count chosen (or nothing to
        choose: a mode other than ``auto``). The compiled backend's gather trial waits for this."""
        if self.mode != "auto" or rows < MIN_POOL_ROWS:
            return True
        t = self.blocks.get((bid, size_class(rows)))
        return t is not None and t.choice is not None

    def record(self, bid: int, threads: int, us: float, rows: int, serial: int) -> None:
        """A timed launch of block ``bid`` in run ``serial``: ``us`` µs for ``rows`` batched rows at ``threads``
        threads. Pooled launches that stall in ``STALL_RUNS`` runs (``GIVE_UP``, ``STALL_US``) end the probing
        at 1 thread."""
        key = (bid, size_class(rows))
        t = self.blocks.get(key)
        if t is None or t.choice is not None:
            return
        setting = 1 if threads == 1 else ALL
        t.record(setting, us, rows, serial)
        if setting == ALL and us > STALL_US and t.samples.get(1) and us >= GIVE_UP * t.us_per_row(1) * max(rows, 1):
            stalls = self._stalls.setdefault(key, set())
            stalls.add(serial)
            if len(stalls) >= STALL_RUNS:
                t.choice = 1
                self._keep(bid, rows, t)

    def _keep(self, bid: int, rows: int, t: Trial[int]) -> None:
        """Keep a choice just made in ``memory``."""
        if self.memory is not None:
            self.memory.keep(self._keys.get(bid), self.names.get(bid, str(bid)), "threads", size_class(rows),
                             "1" if t.choice == 1 else "all")

    def probing(self) -> list[str]:
        """The (block, launch rows) still probing their thread count, e.g. ``treelstm_1 (8-15 rows)``."""
        return [f"{self.names.get(bid, bid)} ({class_rows(size)} rows)"
                for (bid, size), t in sorted(self.blocks.items()) if t.choice is None]

    def tuned(self) -> bool:
        """Whether every (block, launch size class) launched so far has its thread count chosen."""
        return not self.probing()

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
        pool = self.pool = torch.get_num_threads()
        n = self.threads_for(bid, name, pool, rt.serial, rows, rt)
        t = self.blocks.get((bid, size_class(rows)))
        probing = t is not None and t.choice is None
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
                self.discard(bid, rt.serial, rows)
        return out

    def discard(self, bid: int, serial: int, rows: int) -> None:
        """Run ``serial`` of block ``bid`` compiled a kernel in a launch of ``rows`` rows: none of the run's
        launches of that size class is a sample."""
        self.blocks[(bid, size_class(rows))].discard(serial)

    def report(self) -> str:
        """Per block and launch size class: the thread count its launches run at and why (measured µs per row
        at 1 and all; "remembered" for a choice taken from an earlier process)."""
        if self.mode != "auto":
            return f"threads per launch: {self.mode} ({'forced' if os.environ.get(ENV) else 'set'} by ${ENV})"
        if not self.blocks:
            return ""
        pool = torch.get_num_threads()
        lines = [f"{'block':<34} {'rows':>9}  threads per launch (of {pool})"]
        for (bid, size), t in sorted(self.blocks.items()):
            measured = (f"1 thread {t.us_per_row(1):.2f} µs/row, {pool} threads {t.us_per_row(ALL):.2f} µs/row"
                        if t.samples.get(1) and t.samples.get(ALL) else "")
            if t.choice is None:
                how = f"probing ({t.progress()}){': ' + measured if measured else ''}"
            else:
                count = 1 if t.choice == 1 else pool
                how = f"{count} (measured: {measured})" if measured else f"{count} (remembered)"
            lines.append(f"{self.names.get(bid, str(bid)):<34} {class_rows(size):>9}  {how}")
        return "\n".join(lines)
