"""``acrobat.benchmark``: a fair comparison of a program's batched run with the per-instance loop.

Timing a batched run right after the first one measures compiling and
tuning, not the run: the compiled backend compiles each static block on its
first launch (or loads it from the disk cache), then times each block's two
gathers and its threads per launch on its next runs (§5.2, App. C.1). So
``benchmark`` first runs warm-up batches until no kernel was compiled in the
last one and the backend reports every choice made (``tuned()``), at most
``max_warmup`` of them; then it times the batched run and the per-instance
loop by turns (so a machine that gets busier slows both alike), and reports
medians and spreads of those timed runs only, and whether the results are
equal (``torch.testing.assert_close``).
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from acrobat.errors import BatchError
from acrobat.program import BoundProgram, Options, Program
from acrobat.runtime.backend import BACKENDS
from acrobat.runtime.stats import RunStats

RTOL, ATOL = 1e-4, 1e-5
"""Default tolerances of the result check (float32 batched kernels sum in another order than the loop); also
those of ``acrobat run --check`` and ``acrobat bench``."""


@dataclass(frozen=True)
class BenchmarkResult:
    """What ``benchmark`` measured. Times in ms, wall clock (``time.perf_counter``).

    ``batched_ms`` and ``per_instance_ms`` hold one sample per timed round
    (the whole batch: one ``program.run`` call, or the loop over every
    instance); warm-up batches are in neither. ``str(result)`` is one line:
    ``batched 16.8 ms, per instance 94.7 ms, 5.6x, results equal (12 warm-up batches, ...)``.
    """

    batched_ms: tuple[float, ...]
    per_instance_ms: tuple[float, ...]
    warmup_batches: int
    tuned: bool  # the backend made every choice within the warm-up cap (else the timings include tuning)
    equal: bool
    mismatch: str  # the first line of assert_close's message when the results differ, else ""
    backend: str  # the backend that ran (``RunStats.backend``: what "auto" picked)
    instances: int
    stats: RunStats  # the timed batched runs added up (launches, mean batch per block)

    @property
    def batched_median_ms(self) -> float:
        """Median ms of one batched run over the timed rounds."""
        return statistics.median(self.batched_ms)

    @property
    def per_instance_median_ms(self) -> float:
        """Median ms of the per-instance loop over the whole batch."""
        return statistics.median(self.per_instance_ms)

    @property
    def speedup(self) -> float:
        """Per-instance median over batched median (above 1: batching is faster)."""
        return self.per_instance_median_ms / self.batched_median_ms

    @staticmethod
    def _spread(samples: tuple[float, ...]) -> float:
        """Half the range of ``samples`` over their median, as a fraction."""
        return (max(samples) - min(samples)) / 2 / statistics.median(samples)

    def __str__(self) -> str:
        check = "results equal" if self.equal else f"results DIFFER ({self.mismatch})"
        tuning = "" if self.tuned else ", still tuning at the warm-up cap"
        return (f"batched {self.batched_median_ms:.1f} ms, per instance {self.per_instance_median_ms:.1f} ms, "
                f"{self.speedup:.1f}x, {check} ({self.warmup_batches} warm-up batches{tuning}; medians of "
                f"{len(self.batched_ms)} rounds, spread ±{self._spread(self.batched_ms):.0%} / "
                f"±{self._spread(self.per_instance_ms):.0%}; {self.backend} backend)")


def benchmark(program: Program[..., Any] | BoundProgram[Any], instances: Sequence[Any], *params: Any,
              backend: str = "auto", options: Options | None = None, reference: Callable[..., Any] | None = None,
              rounds: int = 5, max_warmup: int = 50, rtol: float = RTOL, atol: float = ATOL) -> BenchmarkResult:
    """Time ``program.run(instances, *params)`` against the per-instance loop, after warming up.

    Everything runs under ``torch.inference_mode()`` (so ``backend="auto"``
    picks the compiled backend). Warm-up: batched runs of ``instances`` until
    one compiles no kernel and the backend says every choice is made
    (``tuned()``: each block's gather and threads per launch), at least one
    and at most ``max_warmup``. Then ``rounds`` rounds, each timing one
    batched run and one loop ``[reference(x, *params) for x in instances]``.
    The results of the last batched run are checked against the loop's with
    ``torch.testing.assert_close(rtol, atol)``.

    Args:
        program: an ``@acrobat.program`` (or one bound to an ``nn.Module``).
        instances: the mini-batch, a list of instances (any Python objects the program takes).
        params: the shared arguments (model parameters), as ``run`` takes them.
        backend: as ``Program.run``.
        options: as ``Program.run``.
        reference: the per-instance function to compare with (default: the program itself, run as plain
            Python, ``program(x, *params)``).
        rounds: timed rounds (at least 1).
        max_warmup: the cap on warm-up batches (at least 1).
        rtol: relative tolerance of the check.
        atol: absolute tolerance of the check.

    Returns:
        A ``BenchmarkResult``; ``print(result)`` prints one line.

    Raises:
        BatchError: ``instances`` is not a non-empty list or tuple, or ``rounds``/``max_warmup`` below 1.
        AcrobatError: whatever ``program.run`` raises for the batch.
    """
    if not isinstance(instances, (list, tuple)) or not instances:
        raise BatchError("benchmark() takes a non-empty list of instances (the mini-batch), got "
                         f"{type(instances).__name__}")
    if rounds < 1 or max_warmup < 1:
        raise BatchError(f"benchmark(): rounds and max_warmup must be at least 1 (got {rounds}, {max_warmup})")
    prog, shared = (program.program, (program.obj, *params)) if isinstance(program, BoundProgram) \
        else (program, params)
    loop: Callable[[Any], Any] = ((lambda x: reference(x, *params)) if reference is not None  # noqa: E731
                                  else (lambda x: prog.plain(x, shared)))
    with torch.inference_mode():
        warmup, tuned = _warm_up(prog, instances, shared, backend, options, max_warmup)
        stats = RunStats()
        batched: list[float] = []
        looped: list[float] = []
        out: list[Any] = []
        expected: list[Any] = []
        for _ in range(rounds):
            ms, out = _timed(lambda: prog.run(instances, *shared, backend=backend, options=options, stats=stats))
            batched.append(ms)
            ms, expected = _timed(lambda: [loop(x) for x in instances])
            looped.append(ms)
    mismatch = ""
    try:
        torch.testing.assert_close(out, expected, rtol=rtol, atol=atol, check_dtype=False)
    except (AssertionError, TypeError, ValueError) as exc:
        mismatch = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return BenchmarkResult(tuple(batched), tuple(looped), warmup, tuned, not mismatch, mismatch, stats.backend,
                           len(instances), stats)


def _warm_up(prog: Program[..., Any], instances: Sequence[Any], shared: tuple[Any, ...], backend: str,
             options: Options | None, cap: int) -> tuple[int, bool]:
    """Batched runs until one compiles nothing and its backend is tuned (at most ``cap``): how many ran, and
    whether the backend ended tuned."""
    for n in range(1, cap + 1):
        st = RunStats()
        prog.run(instances, *shared, backend=backend, options=options, stats=st)
        # the backend that ran; a batch the tier choice ran as plain calls (``st.backend == "plain calls"``,
        # acrobat.runtime.tier) is the requested backend's, which holds that choice
        be, _ = prog.backend(st.backend if st.backend in BACKENDS else backend, len(shared), options)
        if st.compiles == 0 and be.tuned():
            return n, True
    return cap, False


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``fn()`` timed in ms with the cycle collector held off (as ``timeit`` does), and its result; on a
    GPU the time includes the device's work (a synchronize after the call)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3, out
    finally:
        if enabled:
            gc.enable()
