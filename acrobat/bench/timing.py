"""Timing helpers for the benchmark command (never asserted in tests). Times in ms."""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from typing import Callable

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
    """Call ``fn`` ``warmup`` times untimed, then up to ``repeats`` times timed.

    Runs stop once ``budget_ms`` is spent (but never before
    ``min(repeats, min_repeats)`` runs), so a very slow configuration, e.g.
    an ablation step with every optimization off, does not dominate the
    benchmark's time. With ``sync`` each run ends with ``torch.cuda.synchronize()``.
    As ``timeit`` does, the cycle collector is off during timed runs (and runs
    before each), so garbage one system left does not land on the next.
    """
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    spent = 0.0
    was_enabled = gc.isenabled()
    try:
        for _ in range(repeats):
            gc.collect()
            gc.disable()
            t0 = time.perf_counter()
            fn()
            if sync:
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3
            if was_enabled:
                gc.enable()
            samples.append(ms)
            spent += ms
            if spent > budget_ms and len(samples) >= min_repeats:
                break
    finally:
        if was_enabled:
            gc.enable()
    return Timing(tuple(samples))
