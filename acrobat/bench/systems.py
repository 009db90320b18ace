"""The systems a benchmark compares: acrobat and its baselines (paper §6), each behind one interface.

A ``System`` prepares a ``Runner`` for one (model, instances, weights)
configuration, or raises ``Unavailable`` with the reason it cannot run there
(not installed, no version of that model). A runner returns the
per-instance outputs (checked against the per-instance PyTorch reference
before anything is timed) and times repeated runs.

Groups (the ``--systems`` names):

- ``acrobat``: acrobat with all optimizations, one system per backend in
  ``acrobat.runtime.backend.BACKENDS`` (eager; compiled with the gather
  chosen per block, forced explicit, forced fused); each is warmed up until
  its backend is tuned (compiles, then the gather and threads-per-launch
  trials; at most ``TUNE_RUNS`` runs) before it is checked and timed, and a
  system still probing then says so in its detail;
- ``pytorch``: PyTorch eager, one instance at a time (the reference);
- ``hand``: hand-batched PyTorch, where the model has one;
- ``torchfold``: TorchFold (``acrobat.bench.torchfold_models``), where its API can express the model
  (not with tensor-dependent control flow: DRNN, Berxit, StackRNN say so);
- ``dynet``: DyNet with autobatching, best of its two strategies, all seven
  models (``acrobat.bench.dynet_models``, run in a subprocess; a
  configuration where it runs out of memory is reported as such, Table 5);
- ``ablation``: acrobat with optimizations switched on one at a time (Fig. 8),
  on the eager backend (each step is another program: compiling its kernels
  would cost more than the whole ablation);
- ``interp``: acrobat's lowered IR run by an interpreter instead of the
  generated skeleton (Table 3), both on the eager backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from acrobat.bench.ablation import ablation_steps
from acrobat.bench.base import AcrobatRunner, FnRunner, Runner, Setup, Unavailable
from acrobat.bench.torchfold_models import TORCHFOLD_CANNOT, TORCHFOLD_MODELS, load_torchfold
from acrobat.program import Options
from acrobat.runtime.backend import BACKENDS
from acrobat.runtime.executor import Backend
from acrobat.runtime.stats import RunStats

GROUPS: tuple[str, ...] = ("acrobat", "pytorch", "hand", "torchfold", "dynet", "ablation", "interp")
"""System groups in report order; ``--systems`` takes a comma-separated subset."""


@dataclass(frozen=True)
class System:
    """A named system of a group; ``prepare`` makes its runner or raises ``Unavailable``."""

    name: str
    group: str
    prepare: Callable[[Setup], Runner]
    options: Options | None = None  # for ablation steps: the acrobat options timed
    grad_only: bool = False  # a training backend: in inference it runs as another system does (not timed then)


TUNE_RUNS = 60
"""Untimed runs of an acrobat backend before its check, at most: until the backend is tuned (``Backend.tuned``:
about 25 runs where no choice is remembered, 1 where the cache folder holds them all)."""

TRAINING_BACKENDS = ("eager-accum", "compiled-train")
"""Backends that differ from ``eager`` only while autograd records (in inference their launches run through
``vmap``, as eager's do): timed with ``--grad`` only."""
INTERP_BACKEND = "eager"
"""The backend of the ablation steps and of the interpreted-vs-generated comparison."""


def _acrobat(backend: str, options: Options | None = None) -> Callable[[Setup], Runner]:
    """acrobat on ``backend``; the main systems (no ``options``) warm up until tuned, ablation steps not."""
    def prepare(s: Setup) -> Runner:
        def run(st: RunStats) -> list:
            return s.spec.program.run(s.instances, s.params, backend=backend, options=options, stats=st)

        if backend.startswith("compiled") and s.grad:
            raise Unavailable("the compiled backend runs inference only")
        runner = AcrobatRunner(run)
        if options is None:
            runner.detail = warm_up(run, s.spec.program.backend(backend)[0])
        return runner
    return prepare


def warm_up(run: Callable[[RunStats], list], be: Backend) -> str:
    """Run until ``be`` is tuned (at least once, at most ``TUNE_RUNS`` times); "" when it is, else what is
    still probing (for the system's detail)."""
    for _ in range(TUNE_RUNS):
        run(RunStats())
        if be.tuned():
            return ""
    probing = be.probing()
    return f"still probing after {TUNE_RUNS} warm-up runs: {'; '.join(probing[:4])}" + (" ..." if len(probing) > 4 else "")


def _pytorch(s: Setup) -> Runner:
    return FnRunner(lambda: [s.spec.reference(x, s.params) for x in s.instances])


def _hand(s: Setup) -> Runner:
    fn = s.spec.hand_batched
    if fn is None:
        raise Unavailable(f"no hand-batched version of {s.spec.name}")
    return FnRunner(lambda: fn(s.instances, s.params))


def _torchfold(s: Setup) -> Runner:
    if s.spec.name in TORCHFOLD_CANNOT:
        raise Unavailable(TORCHFOLD_CANNOT[s.spec.name])
    load_torchfold()
    fn = TORCHFOLD_MODELS.get(s.spec.name)
    if fn is None:
        raise Unavailable(f"no TorchFold version of {s.spec.name}")
    return FnRunner(lambda: fn(s.instances, s.params))


def _dynet(s: Setup) -> Runner:
    if s.device != "cpu":
        raise Unavailable("DyNet runs on the CPU here (its CUDA build is not installed)")
    from acrobat.bench.dynet_models import DynetRunner  # optional: imports nothing of DyNet itself

    return DynetRunner(s)


def _interp(s: Setup) -> Runner:
    from acrobat.bench.interpreter import InterpretedProgram

    prog = InterpretedProgram(s.spec.program)
    return AcrobatRunner(lambda st: prog.run(s.instances, s.params, stats=st))


def default_backend() -> str:
    """The backend that the headline "acrobat" figures (speedups) use: compiled, gather chosen per block."""
    return "compiled"


def all_systems() -> list[System]:
    """Every system, in report order (ablation steps read ``Options``' fields at call time)."""
    systems = [System(f"acrobat ({be})", "acrobat", _acrobat(be), grad_only=be in TRAINING_BACKENDS) for be in BACKENDS]
    systems += [
        System("PyTorch per instance", "pytorch", _pytorch),
        System("hand-batched PyTorch", "hand", _hand),
        System("TorchFold", "torchfold", _torchfold),
        System("DyNet (autobatch)", "dynet", _dynet),
    ]
    systems += [System(f"ablation: {label}", "ablation", _acrobat(INTERP_BACKEND, opts), opts)
                for label, opts in ablation_steps()]
    systems.append(System("acrobat, interpreted control flow", "interp", _interp))
    return systems


def select(groups: list[str] | None) -> list[System]:
    """The systems of ``groups`` (all when None), in report order.

    Raises:
        ValueError: an unknown group name (the message lists the known ones).
    """
    if groups is None:
        return all_systems()
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown system {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    return [s for s in all_systems() if s.group in groups]
