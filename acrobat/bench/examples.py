"""The ``acrobat examples`` subcommand: the user-style models of ``examples/`` side by side.

    acrobat examples [NAME...] [--batch-size 64] [--backends eager,compiled,dynamic] [--repeats 5] [--json FILE]

For each example (``examples.EXAMPLES``; an example module has ``program``,
``make_params``, ``instances``, ``reference``) one seeded batch is run three
ways on the same weights: a per-instance loop (plain Python calling the
program on one instance at a time), and acrobat with each backend. Every
output is checked against the example's independent reference; acrobat's
rows say whether it ran, was rejected (the ``CompileError``'s gist) or got
it wrong, with kernel launches per batch, their mean batch (DFG nodes per launch)
and the median ms per batch, the systems timed by turns. Times
are never asserted anywhere (tests check the table's structure only).
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from acrobat.bench.compare import outputs_equal
from acrobat.bench.machine import describe_machine, machine_line
from acrobat.bench.systems import warm_up
from acrobat.bench.timing import TimingPolicy, time_by_turns
from acrobat.errors import CompileError
from acrobat.program import Options
from acrobat.runtime.executor import Backend
from acrobat.runtime.stats import RunStats

RAN, DYNAMIC, PLAIN, REJECTED, WRONG, ERROR = ("ran", "ran dynamic", "ran unbatched", "rejected", "wrong",
                                               "error")
"""An example's status on one system (``PLAIN``: the static tier rejected it and plain per-instance calls
were faster than the dynamic tier, ``acrobat.runtime.tier``)."""

LOOP = "per-instance loop"
DYNAMIC_TIER = "dynamic"
"""The ``--backends`` name of the dynamic tier alone (``Options(static=False)``, eager backend)."""
BUDGET_MS = 3000.0
"""Timed runs of one system stop past this much time (after at least 2)."""


@dataclass
class ExampleResult:
    """One system on one example's batch. ``ms``: median wall time per batch; ``launches``: kernel launches
    per batch and ``mean_batch`` DFG nodes per launch (acrobat only); ``max_error``: largest absolute
    difference from the reference."""

    system: str
    status: str = RAN
    detail: str = ""
    launches: int | None = None
    mean_batch: float | None = None
    ms: float | None = None
    max_error: float | None = None


@dataclass
class ExampleReport:
    """All systems on one example."""

    name: str
    summary: str
    batch_size: int
    results: list[ExampleResult] = field(default_factory=list)

    def result(self, system: str) -> ExampleResult | None:
        return next((r for r in self.results if r.system == system), None)


def load_examples() -> ModuleType:
    """The ``examples`` package (the repository's ``examples/`` folder, next to ``acrobat/``).

    Raises:
        ValueError: acrobat is installed without its source checkout, so there are no examples.
    """
    try:
        import examples
    except ImportError:
        root = Path(__file__).resolve().parents[2]
        if not (root / "examples" / "__init__.py").is_file():
            raise ValueError(f"`acrobat examples` needs the clone: there is no examples/ folder next to "
                             f"{root / 'acrobat'}, as the examples are not installed with the package; clone the "
                             "repository and install it from there with `pip install -e .`") from None
        sys.path.insert(0, str(root))
        import examples
    return examples


def max_error(a: Any, b: Any) -> float:
    """Largest absolute difference between two results (tensors, numbers, nested lists/tuples); inf when
    their structure or shapes differ."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        if a.shape != b.shape:
            return math.inf
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return math.inf
        return max((max_error(x, y) for x, y in zip(a, b)), default=0.0)
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return float(abs(a - b))  # type: ignore[operator]
    return math.inf


def _gist(exc: Exception) -> str:
    """The first line of an error, with a CompileError's path cut to the file name."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, CompileError):
        return text.replace(exc.filename, Path(exc.filename).name)
    return f"{type(exc).__name__}: {text}"


def _check_system(name: str, run: Callable[[RunStats], list], expected: list,
                  be: Callable[[], Backend] | None) -> tuple[ExampleResult, Callable[[], Any] | None]:
    """Run once (compile errors surface here), warm up until the backend ``be()`` is tuned (``warm_up``; None:
    no warm-up), check against ``expected``: the system's result so far and the call to time (None: not to be
    timed)."""
    res = ExampleResult(name)
    try:
        out = run(RunStats())
        if be is not None:
            warm_up(run, be())
        res.max_error = max_error(out, expected)
        if not outputs_equal(out, expected):
            res.status, res.detail = WRONG, "outputs differ from the reference"
            return res, None
        stats = RunStats()
        run(stats)
        if name != LOOP:
            res.launches = stats.kernel_launches
            res.mean_batch = stats.dfg_nodes / stats.kernel_launches if stats.kernel_launches else None
        if stats.dynamic is not None:  # the static tier did not take it: say why (acrobat.runtime.dynamic)
            res.status = DYNAMIC
            res.detail = stats.dynamic.reason.strip().splitlines()[0] if stats.dynamic.reason else ""
        elif stats.plain:  # ... and plain calls were faster than the dynamic tier (acrobat.runtime.tier)
            res.status, res.detail = PLAIN, stats.plain
        return res, lambda: run(RunStats())
    except CompileError as exc:
        res.status, res.detail = REJECTED, _gist(exc)
    except Exception as exc:  # noqa: BLE001 - one broken example must not stop the others
        res.status, res.detail = ERROR, _gist(exc)
    return res, None


def measure(ex: ModuleType, batch_size: int = 64, backends: tuple[str, ...] = ("eager", "compiled"),
            repeats: int = 5, seed: int = 0) -> ExampleReport:
    """One seeded batch of example ``ex``: the per-instance loop and acrobat on each backend (inference mode),
    each checked, then timed by turns (``time_by_turns``). The backend ``dynamic`` is the dynamic tier alone
    (``Options(static=False)`` on the eager backend)."""
    params = ex.make_params(seed)
    batch = ex.instances(batch_size, seed)
    rep = ExampleReport(ex.NAME, ex.SUMMARY, batch_size)
    with torch.inference_mode():
        expected = [ex.reference(x, params) for x in batch]
        checked = [_check_system(LOOP, lambda st: [ex.program(x, params) for x in batch], expected, None)]
        for backend in backends:
            real, options = ("eager", Options(static=False)) if backend == DYNAMIC_TIER else (backend, None)

            def run(st: RunStats, backend: str = real, options: Options | None = options) -> list:
                return ex.program.run(batch, params, backend=backend, options=options, stats=st)

            def be(backend: str = real) -> Backend:
                return ex.program.backend(backend)[0]

            checked.append(_check_system(f"acrobat ({backend})", run, expected, be))
        timed = [(res, fn) for res, fn in checked if fn is not None]
        policy = TimingPolicy(repeats, BUDGET_MS, min(repeats, 2))
        for (res, _), timing in zip(timed, time_by_turns([fn for _, fn in timed], policy, [0] * len(timed))):
            if isinstance(timing, Exception):
                res.status, res.detail = ERROR, _gist(timing)
            else:
                res.ms = timing.median
        rep.results = [res for res, _ in checked]
    return rep


def _cell(value: float | int | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def example_table(reports: list[ExampleReport]) -> str:
    """A Markdown table: one row per (example, system), with the speedup over the per-instance loop."""
    lines = ["| example | batch | system | status | launches/batch | ms/batch | vs loop | mean batch | max error "
             "| detail |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---|"]
    for rep in reports:
        loop = rep.result(LOOP)
        loop_ms = loop.ms if loop is not None else None
        for r in rep.results:
            speedup = f"{loop_ms / r.ms:.2f}x" if loop_ms and r.ms and r.system != LOOP else "-"
            lines.append(f"| {rep.name} | {rep.batch_size} | {r.system} | {r.status} | {_cell(r.launches, 'd')} | "
                         f"{_cell(r.ms, '.2f')} | {speedup} | {_cell(r.mean_batch, '.1f')} | "
                         f"{_cell(r.max_error, '.1e')} | "
                         f"{r.detail.replace('|', '/')} |")
    return "\n".join(lines)


def add_parser(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    """Add the ``examples`` subparser to the ``acrobat`` command's subparsers."""
    p = sub.add_parser("examples", help="run the user-style models of examples/: acrobat (each backend) vs a "
                                        "per-instance loop, ran / rejected / wrong, launches and times",
                       description="For each example in examples/ (default all), one seeded batch: a per-instance "
                                   "Python loop and acrobat on each backend, checked against the example's "
                                   "reference, side by side.")
    p.add_argument("names", nargs="*", metavar="NAME", help="examples to run (default: all)")
    p.add_argument("--batch-size", type=int, default=64, help="instances per batch (default 64)")
    p.add_argument("--backends", default="eager,compiled", metavar="B[,B]",
                   help="acrobat backends to compare (default eager,compiled; `dynamic`: the dynamic tier alone, "
                        "Options(static=False) on the eager backend)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per system (default 5; at least 2, "
                   "stopping past 3 s)")
    p.add_argument("--seed", type=int, default=0, help="weight and instance seed (default 0)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(func=cmd_examples)
    return p


def cmd_examples(args: argparse.Namespace) -> int:
    """Measure the named examples (default all) and print the machine and the side-by-side table."""
    from acrobat.runtime.backend import BACKENDS

    ex_pkg = load_examples()
    names = args.names or list(ex_pkg.EXAMPLES)
    modules = [ex_pkg.load(n) for n in names]
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    unknown = [b for b in backends if b not in BACKENDS and b != DYNAMIC_TIER]
    if unknown:
        raise ValueError(f"unknown backend(s) {', '.join(unknown)}; available: {', '.join(BACKENDS)}, "
                         f"{DYNAMIC_TIER}")
    if args.repeats < 1:
        raise ValueError("--repeats must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"machine  {machine_line()}")
    print(f"batch    {args.batch_size} instances per example (seed {args.seed}), inference mode, "
          f"median of up to {args.repeats} timed runs", flush=True)
    reports = []
    for ex in modules:
        print(f"[acrobat] example {ex.NAME} ...", file=sys.stderr, flush=True)
        reports.append(measure(ex, args.batch_size, backends, args.repeats, args.seed))
    print()
    print(example_table(reports))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": describe_machine(), "batch_size": args.batch_size,
                       "examples": [asdict(r) for r in reports]}, f, indent=2)
        print(f"wrote {args.json}")
    return 0
