"""Side-by-side comparison of acrobat with its baselines on identical inputs and weights (paper §6).

For one configuration (model, size, batch size) every selected system is
prepared on the same instances and the same parameter object; its outputs
are checked equal to the per-instance PyTorch reference (a system whose
outputs differ is reported as wrong and not timed; one that cannot run
here says why, one that runs out of memory is reported as such); then it is timed: median of repeated runs after a
warm-up, in ms (``TimingPolicy``), the systems timed by turns (``time_by_turns``). acrobat-based systems also report the
last timed run's ``RunStats`` (DFG construction, scheduling + gathers, kernels).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from acrobat.bench.base import FnRunner, OutOfMemory, Runner, Setup, Unavailable
from acrobat.bench.systems import System, default_backend
from acrobat.bench.timing import Timing, TimingPolicy, time_by_turns
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


def check_system(system: System, setup: Setup, expected: list,
                 policy: TimingPolicy) -> tuple[SystemResult, Runner | None, int]:
    """Prepare one system on one configuration and check its outputs: its result so far, and the runner to
    time with its warm-up runs (None: not to be timed: wrong, unavailable, out of memory or failed)."""
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
            return res, None, 0
        return res, runner, 0 if first_ms > policy.slow_ms else 1
    except Exception as exc:  # noqa: BLE001 - one broken system must not stop the benchmark
        _failed(res, exc)
    return res, None, 0


def _failed(res: SystemResult, exc: Exception) -> None:
    """``res`` failed with ``exc``: out of memory (the paper's Table 5 reports these as "OOM", not as
    failures), not installed or not available here, or an error."""
    if isinstance(exc, OutOfMemory):
        res.status = OUT_OF_MEMORY
        res.detail = str(exc)
    elif isinstance(exc, Unavailable):
        msg = str(exc)
        res.status = NOT_INSTALLED if msg.startswith(NOT_INSTALLED) else NOT_AVAILABLE
        res.detail = msg
    else:
        res.status = ERROR
        res.detail = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


def _finish(res: SystemResult, runner: Runner, timing: Timing | Exception) -> None:
    """Put a checked system's timing (or the failure of a timed run) and its last run's figures into ``res``."""
    if isinstance(timing, Exception):
        _failed(res, timing)
        return
    res.timing = timing
    res.detail = getattr(runner, "detail", res.detail)
    if hasattr(runner, "stats"):
        res.stats = runner.stats()


def run_system(system: System, setup: Setup, expected: list, policy: TimingPolicy) -> SystemResult:
    """Prepare, check and time one system on one configuration (alone; ``compare`` times systems by turns)."""
    res, runner, warmup = check_system(system, setup, expected, policy)
    if runner is not None:
        _finish(res, runner, _time_alone(runner, policy, warmup))
    return res


def _time_alone(runner: Runner, policy: TimingPolicy, warmup: int) -> Timing | Exception:
    """``runner``'s own timing (its runs alone), or the exception a run raised."""
    try:
        return runner.time(policy, warmup)
    except Exception as exc:  # noqa: BLE001 - one broken system must not stop the benchmark
        return exc


def compare(setup: Setup, systems: list[System], policy: TimingPolicy, on_system: Callable[[System], None] | None = None,
            on_done: Callable[[System], None] | None = None) -> Comparison:
    """Run every system of ``systems`` on ``setup``; ``on_system``/``on_done`` are called around each (progress).

    Every system is prepared and checked first; then the systems that run in this process are timed by turns
    (``time_by_turns``: one run of each a round, so a machine whose speed drifts moves them alike), and a
    system that times itself elsewhere (DyNet's subprocess) alone.
    """
    cmp = Comparison(setup.spec.name, setup.size, setup.spec.hidden(setup.size), len(setup.instances))
    with torch.enable_grad() if setup.grad else torch.inference_mode():
        expected = [setup.spec.reference(x, setup.params) for x in setup.instances]
        checked = []
        for system in systems:
            if on_system is not None:
                on_system(system)
            checked.append(check_system(system, setup, expected, policy))
        by_turns = [(res, runner, warmup) for res, runner, warmup in checked if isinstance(runner, FnRunner)]
        timings = time_by_turns([runner.fn for _, runner, _ in by_turns], policy, [w for _, _, w in by_turns])
        for (res, runner, _), timing in zip(by_turns, timings):
            _finish(res, runner, timing)
        for system, (res, runner, warmup) in zip(systems, checked):
            if runner is not None and not isinstance(runner, FnRunner):
                _finish(res, runner, _time_alone(runner, policy, warmup))
            cmp.results.append(res)
            if on_done is not None:
                on_done(system)
    return cmp
