"""Side-by-side comparison of acrobat with its baselines on identical inputs and weights.

For each model: acrobat (each backend), the plain per-instance PyTorch
reference and the hand-batched expert version run on the same batch; all
outputs are checked equal first (a system whose outputs differ is reported
as wrong, not timed); times are medians of repeated runs after warm-up;
speedups are ratios against acrobat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from acrobat.bench.machine import machine_line
from acrobat.bench.timing import Timing, time_call
from acrobat.models import ModelSpec
from acrobat.runtime.stats import RunStats

RTOL, ATOL = 1e-4, 1e-5


@dataclass
class SystemResult:
    """One system on one configuration: its timing, or why it was not timed."""

    system: str
    timing: Timing | None = None
    status: str = "ok"  # "ok", "wrong" or "not available"


@dataclass
class Comparison:
    """All systems on one (model, size, batch size) configuration."""

    model: str
    size: str
    batch_size: int
    results: list[SystemResult] = field(default_factory=list)
    stats: RunStats | None = None  # acrobat's per-run figures (one run)

    def acrobat_ms(self) -> float | None:
        r = next((r for r in self.results if r.system.startswith("acrobat") and r.timing), None)
        return r.timing.median if r and r.timing else None


def outputs_equal(a: list, b: list) -> bool:
    """True when two lists of per-instance results agree to (RTOL, ATOL)."""
    try:
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)
    except AssertionError:
        return False
    return True


def compare(spec: ModelSpec, batch: list[Any], params: torch.nn.Module, size: str, repeats: int,
            backends: tuple[str, ...] = ("eager",), grad: bool = False) -> Comparison:
    """Time every available system for ``spec`` on ``batch``.

    Inference (``torch.inference_mode``) by default; ``grad=True`` runs with
    autograd recording, as a training forward pass would.
    """
    cmp = Comparison(spec.name, size, len(batch))
    systems: dict[str, Callable[[], list]] = {}
    for be in backends:
        systems[f"acrobat ({be})"] = lambda be=be: spec.program.run(batch, params, backend=be)
    systems["PyTorch per instance"] = lambda: [spec.reference(x, params) for x in batch]
    if spec.hand_batched is not None:
        systems["hand-batched PyTorch"] = lambda: spec.hand_batched(batch, params)  # type: ignore[misc]
    with torch.enable_grad() if grad else torch.inference_mode():
        expected = systems["PyTorch per instance"]()
        for name, fn in systems.items():
            if not outputs_equal(fn(), expected):
                cmp.results.append(SystemResult(name, status="wrong"))
                continue
            cmp.results.append(SystemResult(name, time_call(fn, repeats)))
        cmp.stats = RunStats()
        spec.program.run(batch, params, stats=cmp.stats)
    return cmp


def format_table(comparisons: list[Comparison]) -> str:
    """A Markdown table: ms per batch (median ± half-range) and acrobat's speedup over each system."""
    lines = [f"Machine: {machine_line()}", "",
             "| model | size | batch | system | ms / batch | acrobat speedup |",
             "|---|---|---:|---|---:|---:|"]
    for c in comparisons:
        base = c.acrobat_ms()
        for r in c.results:
            if r.timing is None:
                lines.append(f"| {c.model} | {c.size} | {c.batch_size} | {r.system} | {r.status} | - |")
                continue
            speed = f"{r.timing.median / base:.2f}x" if base else "-"
            lines.append(f"| {c.model} | {c.size} | {c.batch_size} | {r.system} | "
                         f"{r.timing.median:.1f} ± {r.timing.spread:.1f} | {speed} |")
    return "\n".join(lines)


def overhead_lines(comparisons: list[Comparison]) -> str:
    """acrobat's time split per configuration: DFG construction, scheduling+gathers, kernels."""
    out = []
    for c in comparisons:
        s = c.stats
        if s is None or not s.total_ms:
            continue
        out.append(f"{c.model} {c.size} b{c.batch_size}: total {s.total_ms:.1f} ms = DFG construction "
                   f"{s.construct_ms:.1f} + scheduling/gathers {s.schedule_ms:.1f} + kernels {s.kernel_ms:.1f}; "
                   f"overhead {100 * s.overhead_ms / s.total_ms:.0f}%; {s.dfg_nodes} DFG nodes, "
                   f"{s.kernel_launches} launches")
    return "\n".join(out)
