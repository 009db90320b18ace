"""Timing helpers for the benchmark command (never asserted in tests). Times in ms."""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

BUDGET_MS = 8000.0
"""Timed runs of one system stop early past this much time (at least ``MIN_REPEATS`` runs are made)."""

MIN_REPEATS = 3


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of repeated calls, in ms."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """Half the range between the fastest and slowest run, in ms."""
        return (max(self.samples) - min(self.samples)) / 2

    @property
    def quartiles(self) -> tuple[float, float]:
        """The first and third quartiles of the runs, in ms (their interquartile range; one run: its time twice)."""
        if len(self.samples) < 2:
            return self.samples[0], self.samples[0]
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]


@dataclass(frozen=True)
class TimingPolicy:
    """How a system is timed: ``repeats`` runs at most, stopping past ``budget_ms`` once
    ``min_repeats`` runs are done. The untimed output-check run is the first warm-up;
    one more follows unless that run took longer than ``slow_ms``."""

    repeats: int = 10
    budget_ms: float = BUDGET_MS
    min_repeats: int = MIN_REPEATS
    slow_ms: float = 1000.0
    sync: bool = False  # synchronize CUDA after each run, so its time includes the GPU's work


def time_call(fn: Callable[[], object], repeats: int, warmup: int = 1, budget_ms: float = BUDGET_MS,
              min_repeats: int = MIN_REPEATS, sync: bool = False) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then up to ``repeats`` times timed (``time_by_turns`` of one).

    Runs stop once ``budget_ms`` is spent (but never before
    ``min(repeats, min_repeats)`` runs), so a very slow configuration, e.g.
    an ablation step with every optimization off, does not dominate the
    benchmark's time. With ``sync`` each run ends with ``torch.cuda.synchronize()``.

    Raises:
        Exception: whatever ``fn`` raises.
    """
    timing = time_by_turns([fn], TimingPolicy(repeats, budget_ms, min_repeats, sync=sync), [warmup])[0]
    if isinstance(timing, Exception):
        raise timing
    return timing


def time_by_turns(fns: Sequence[Callable[[], object]], policy: TimingPolicy,
                  warmups: Sequence[int]) -> list[Timing | Exception]:
    """Time several systems by turns: after ``warmups[i]`` untimed calls of each ``fns[i]``, every round
    calls each system once, timed (ms), the round's order rotating, until each was timed ``policy.repeats``
    times or spent ``policy.budget_ms`` (after ``policy.min_repeats`` runs). A machine that slows down or
    speeds up during the benchmark (another process, a frequency change) then moves every system's times
    alike, and their ratios stay true (timed one after another, the first systems measured a different
    machine than the last). As ``timeit`` does, the cycle collector is off during timed runs (and runs
    before each), so garbage one system left does not land on the next.

    Returns per system its ``Timing``, or the exception one of its runs raised (it is not run again).
    """
    out: list[Timing | Exception | None] = [None] * len(fns)
    for i, (fn, warmup) in enumerate(zip(fns, warmups)):
        try:
            for _ in range(warmup):
                fn()
        except Exception as exc:  # noqa: BLE001 - reported for this system; the others go on
            out[i] = exc
    samples: list[list[float]] = [[] for _ in fns]
    active = [i for i in range(len(fns)) if out[i] is None]
    was_enabled = gc.isenabled()
    try:
        for r in range(policy.repeats):
            if not active:
                break
            turn = active[r % len(active):] + active[:r % len(active)]
            for i in turn:
                gc.collect()
                gc.disable()
                try:
                    t0 = time.perf_counter()
                    fns[i]()
                    if policy.sync:
                        torch.cuda.synchronize()
                    samples[i].append((time.perf_counter() - t0) * 1e3)
                except Exception as exc:  # noqa: BLE001 - reported for this system; the others go on
                    out[i] = exc
                    active.remove(i)
                    continue
                finally:
                    if was_enabled:
                        gc.enable()
                if sum(samples[i]) > policy.budget_ms and len(samples[i]) >= policy.min_repeats:
                    active.remove(i)
    finally:
        if was_enabled:
            gc.enable()
    return [o if o is not None else Timing(tuple(s)) for o, s in zip(out, samples)]
