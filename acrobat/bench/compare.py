"""Side-by-side comparison of acrobat with its baselines on identical inputs and weights (paper §6).

For one configuration (model, size, batch size) every selected system is
prepared on the same instances and the same parameter object; its outputs
are checked equal to the per-instance PyTorch reference (a system whose
outputs differ is reported as wrong and not timed; one that cannot run
here says why, one that runs out of memory is reported as such); then it is timed: median of repeated runs after a
warm-up, in ms (``TimingPolicy``). acrobat-based systems also report the
last timed run's ``RunStats`` (DFG construction, scheduling + gathers, kernels).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from acrobat.bench.base import OutOfMemory, Setup, Unavailable
from acrobat.bench.systems import System, default_backend
from acrobat.bench.timing import Timing, TimingPolicy
from acrobat.benchmarking import ATOL, RTOL
from acrobat.runtime.stats import RunStats


OK, WRONG, NOT_INSTALLED, NOT_AVAILABLE, OUT_OF_MEMORY, ERROR = (
    "ok", "wrong", "not installed", "not available", "out of memory", "error")
"""A system's status on a configuration."""


@dataclass
class SystemResult:
    """One system on one configuration: its timing, or why it was not timed."""

    system: str
    group: str
    status: str = OK
    detail: str = ""
    timing: Timing | None = None
    stats: RunStats | None = None  # acrobat-based systems: one run's figures


@dataclass
class Comparison:
    """All systems on one (model, size, batch size) configuration."""

    model: str
    size: str
    hidden: int
    batch_size: int
    results: list[SystemResult] = field(default_factory=list)

    def result(self, system: str) -> SystemResult | None:
        return next((r for r in self.results if r.system == system), None)

    def ms(self, system: str) -> float | None:
        """Median ms of ``system``, or None when it was not timed."""
        r = self.result(system)
        return r.timing.median if r is not None and r.timing is not None else None

    def acrobat_ms(self) -> float | None:
        """Median ms of acrobat with the default backend (the speedups' reference)."""
        return self.ms(f"acrobat ({default_backend()})")


def outputs_equal(a: Any, b: Any) -> bool:
    """True when two per-instance result lists agree to (RTOL, ATOL) (lists and tuples alike)."""
    try:
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL, check_dtype=False)
    except (AssertionError, TypeError, ValueError, RuntimeError):
        return False
    return True


def run_system(system: System, setup: Setup, expected: list, policy: TimingPolicy) -> SystemResult:
    """Prepare, check and time one system on one configuration."""
    res = SystemResult(system.name, system.group)
    try:
        runner = system.prepare(setup)
        t0 = time.perf_counter()
        out = runner.outputs()
        first_ms = (time.perf_counter() - t0) * 1e3
        res.detail = getattr(runner, "detail", "")
        if not outputs_equal(out, expected):
            res.status = WRONG
            res.detail = f"outputs differ from the per-instance reference (rtol {RTOL}, atol {ATOL})"
            return res
        res.timing = runner.time(policy, 0 if first_ms > policy.slow_ms else 1)
        res.detail = getattr(runner, "detail", res.detail)
        if hasattr(runner, "stats"):
            res.stats = runner.stats()
    except OutOfMemory as exc:  # the paper's Table 5 reports these runs as "OOM", not as failures
        res.status = OUT_OF_MEMORY
        res.detail = str(exc)
    except Unavailable as exc:
        msg = str(exc)
        res.status = NOT_INSTALLED if msg.startswith(NOT_INSTALLED) else NOT_AVAILABLE
        res.detail = msg
    except Exception as exc:  # noqa: BLE001 - one broken system must not stop the benchmark
        res.status = ERROR
        res.detail = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return res


def compare(setup: Setup, systems: list[System], policy: TimingPolicy, on_system: Callable[[System], None] | None = None,
            on_done: Callable[[System], None] | None = None) -> Comparison:
    """Run every system of ``systems`` on ``setup``; ``on_system``/``on_done`` are called around each (progress)."""
    cmp = Comparison(setup.spec.name, setup.size, setup.spec.hidden(setup.size), len(setup.instances))
    with torch.enable_grad() if setup.grad else torch.inference_mode():
        expected = [setup.spec.reference(x, setup.params) for x in setup.instances]
        for system in systems:
            if on_system is not None:
                on_system(system)
            cmp.results.append(run_system(system, setup, expected, policy))
            if on_done is not None:
                on_done(system)
    return cmp
