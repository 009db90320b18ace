"""What every benchmarked system shares: its inputs (``Setup``), its runner, ``Unavailable``, ``OutOfMemory``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from torch import nn

from acrobat.bench.timing import Timing, TimingPolicy, time_call
from acrobat.models import ModelSpec
from acrobat.runtime.stats import RunStats


class Unavailable(Exception):
    """A system cannot run here: not installed, or no version of the model for it (the message says which)."""


class OutOfMemory(Unavailable):
    """A system ran out of memory on this configuration (reported as such, not as an error: paper Table 5)."""


@dataclass(frozen=True)
class Setup:
    """One configuration's inputs: the model, its instances and its weights (shared by all systems)."""

    spec: ModelSpec
    instances: list[Any]
    params: nn.Module
    size: str
    grad: bool = False
    repeats: int = 5  # timed runs (for systems that time themselves, e.g. in a subprocess)
    device: str = "cpu"


class Runner(Protocol):
    """A system prepared for one configuration."""

    def outputs(self) -> list:
        """One run's per-instance outputs."""
        ...

    def time(self, policy: TimingPolicy, warmup: int) -> Timing:
        """Times (ms) of up to ``policy.repeats`` runs after ``warmup`` untimed ones."""
        ...


class FnRunner:
    """A runner for a system that is a Python callable returning the batch's outputs."""

    def __init__(self, fn: Callable[[], list]) -> None:
        self.fn = fn

    def outputs(self) -> list:
        return self.fn()

    def time(self, policy: TimingPolicy, warmup: int) -> Timing:
        return time_call(self.fn, policy.repeats, warmup, policy.budget_ms, policy.min_repeats, policy.sync)


class AcrobatRunner(FnRunner):
    """A runner for acrobat-based systems: ``run(stats)`` runs the batch adding its figures to ``stats``.

    ``stats()`` is the last timed run's ``RunStats`` (no extra run).
    """

    def __init__(self, run: Callable[[RunStats], list]) -> None:
        self.last = RunStats()

        def once() -> list:
            st = RunStats()
            out = run(st)
            self.last = st
            return out

        super().__init__(once)

    def stats(self) -> RunStats:
        return self.last
