"""``acrobat bench --train``: one training step, side by side (forward + loss, backward, optimizer).

For each (model, batch size) every system trains the same weights (a fresh
seeded copy each) on the same instances: forward, a loss (half the sum of
squares of every output), ``backward``, an Adagrad step (``acrobat.train.
TrainOptimizer``: the embedding table's sparse rows where its gradient is
sparse). The first step of each system is checked: its gradients must
equal the per-instance PyTorch loop's (a system that differs is reported
wrong and not timed). Then the systems' steps are timed interleaved (one
step of each system in turn, ``repeats`` rounds), so load on a shared
machine falls on all of them alike: medians per phase. Peak memory is
measured on one more step per system with the torch profiler's CPU memory
events: the most bytes allocated at once above what was live when the step
began (weights and optimizer state are not counted; the profiler slows
that step, not the timed ones).

Systems: acrobat on the ``eager-accum`` backend (what ``auto`` runs under
grad: gathers whose backward accumulates rows into one buffer per source
output, ``acrobat.runtime.accumulate``) with sparse embedding gradients;
acrobat compiled (``backend="compiled"``, which trains on ``compiled-train``:
the same graphs compiled by TorchInductor with their backward kernels,
``acrobat.runtime.compiled_train``; its compiles happen in the untimed
gradient check) with sparse embedding gradients; on the plain ``eager``
backend (one zero-filled gradient per gather), with sparse and with dense
embedding gradients (the saving of updating only the rows used);
hand-batched PyTorch; TorchFold; DyNet with autobatching
(``acrobat.bench.dynet_train``: the same step in DyNet worker processes,
the faster of its two autobatch strategies; its lookup tables updated in
the rows used; no peak memory); per-instance PyTorch. Systems other than
DyNet train in this process (``_Trainee``); each is a ``Trainee``.
``--systems`` picks groups of them (``TRAIN_GROUPS``); the per-instance
loop always runs (it is the check).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import torch
import torch.utils._pytree as pytree
from torch.profiler import ProfilerActivity, profile
from tqdm import tqdm

from acrobat.bench.base import Unavailable
from acrobat.bench.compare import ATOL, RTOL
from acrobat.bench.dynet_train import DynetTrainee
from acrobat.bench.machine import machine_line
from acrobat.bench.torchfold_models import TORCHFOLD_CANNOT, TORCHFOLD_MODELS, load_torchfold
from acrobat.data import load_dataset
from acrobat.models import ModelSpec, get_model
from acrobat.train import TrainOptimizer

TRAIN_MODELS = ("treelstm", "birnn", "mvrnn", "stackrnn", "drnn")
"""Models ``--train`` runs by default: the issue's targets (tree and sequence models, value reads)."""
ACROBAT = "acrobat (eager-accum)"
COMPILED = "acrobat (compiled)"
REFERENCE = "PyTorch per instance"
LR = 0.05
"""Adagrad's learning rate in every system's step."""

Forward = Callable[[torch.nn.Module], Any]  # params -> per-instance outputs


def _acrobat(backend: str, sparse: bool) -> Callable[[ModelSpec, list], Forward]:
    def make(spec: ModelSpec, instances: list) -> Forward:
        return lambda p: spec.program.run(instances, p, backend=backend, sparse_grads=sparse)
    return make


def _hand(spec: ModelSpec, instances: list) -> Forward:
    fn = spec.hand_batched
    if fn is None:
        raise Unavailable(f"no hand-batched version of {spec.name}")
    return lambda p: fn(instances, p)


def _torchfold(spec: ModelSpec, instances: list) -> Forward:
    if spec.name in TORCHFOLD_CANNOT:
        raise Unavailable(TORCHFOLD_CANNOT[spec.name])
    load_torchfold()
    fn = TORCHFOLD_MODELS.get(spec.name)
    if fn is None:
        raise Unavailable(f"no TorchFold version of {spec.name}")
    return lambda p: fn(instances, p)


def _per_instance(spec: ModelSpec, instances: list) -> Forward:
    return lambda p: [spec.reference(x, p) for x in instances]


def _in_process(make: Callable[[ModelSpec, list], Forward]) -> MakeTrainee:
    """A system that is a PyTorch forward: it trains in this process (``_Trainee``)."""
    return lambda spec, instances, params: _Trainee(make(spec, instances), params)


def _dynet(spec: ModelSpec, instances: list, params: torch.nn.Module) -> Trainee:
    return DynetTrainee(spec, instances, params, LR)


def loss_of(outputs: Any) -> torch.Tensor:
    """Half the sum of squares of every floating-point tensor in ``outputs``."""
    return sum(t.pow(2).sum() for t in pytree.tree_leaves(outputs)
               if isinstance(t, torch.Tensor) and t.is_floating_point()) / 2


@dataclass
class StepResult:
    """One system on one configuration: per-phase medians (ms), peak memory (bytes), or why not timed."""

    system: str
    status: str = "ok"
    detail: str = ""
    forward_ms: list[float] = field(default_factory=list)  # forward and loss, per timed step
    backward_ms: list[float] = field(default_factory=list)
    optimizer_ms: list[float] = field(default_factory=list)
    peak_bytes: int | None = None  # None: not measured (DyNet)

    def median(self, phase: str) -> float:
        return statistics.median(getattr(self, f"{phase}_ms"))

    @property
    def step_ms(self) -> float | None:
        if not self.forward_ms:
            return None
        return statistics.median(f + b + o for f, b, o in zip(self.forward_ms, self.backward_ms, self.optimizer_ms))


@dataclass
class TrainComparison:
    """Every system's training step on one (model, batch size) configuration."""

    model: str
    batch_size: int
    hidden: int
    results: list[StepResult] = field(default_factory=list)

    def step_ms(self, system: str) -> float | None:
        r = next((r for r in self.results if r.system == system), None)
        return r.step_ms if r is not None else None


class Trainee(Protocol):
    """One system's training step on one configuration (its own copy of the weights and optimizer state)."""

    def grads(self) -> dict[str, torch.Tensor | None]:
        """The gradients of one forward and backward (no optimizer step), dense, by parameter name."""
        ...

    def step(self, res: StepResult | None = None) -> None:
        """One training step, timed for ``res`` when given."""
        ...

    def finish(self, res: StepResult) -> None:
        """After the timed steps: what is left to fill in ``res`` (peak memory)."""
        ...

    def close(self) -> None:
        """Free what the trainee holds outside this process."""
        ...


MakeTrainee = Callable[[ModelSpec, list, torch.nn.Module], Trainee]
"""``make(spec, instances, params)``: a system's trainee (raises ``Unavailable`` where it cannot train)."""


class _Trainee:
    """A system that trains in this process: its forward, weights and ``TrainOptimizer`` (Adagrad)."""

    def __init__(self, forward: Forward, params: torch.nn.Module):
        self.forward = forward
        self.params = params
        self.opt = TrainOptimizer(self.params, "adagrad", LR, 0.0)

    def step(self, res: StepResult | None = None) -> None:
        t0 = time.perf_counter()
        loss = loss_of(self.forward(self.params))
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad()
        t3 = time.perf_counter()
        if res is not None:
            res.forward_ms.append((t1 - t0) * 1e3)
            res.backward_ms.append((t2 - t1) * 1e3)
            res.optimizer_ms.append((t3 - t2) * 1e3)

    def grads(self) -> dict[str, torch.Tensor | None]:
        """The gradients of one forward and backward (no optimizer step), densified; then cleared."""
        loss_of(self.forward(self.params)).backward()
        out = {n: None if p.grad is None else p.grad.to_dense().clone() for n, p in self.params.named_parameters()}
        self.params.zero_grad(set_to_none=True)
        return out

    def finish(self, res: StepResult) -> None:
        """Peak memory: most bytes allocated at once during one more step, above what was live when it began."""
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            self.step()
        cur = peak = 0
        for e in sorted(prof.events(), key=lambda e: e.time_range.start):
            cur += e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage
            peak = max(peak, cur)
        res.peak_bytes = peak

    def close(self) -> None:
        """Nothing to free outside this process."""


SYSTEMS: list[tuple[str, str, MakeTrainee]] = [
    (ACROBAT, "acrobat", _in_process(_acrobat("eager-accum", True))),
    (COMPILED, "acrobat", _in_process(_acrobat("compiled", True))),
    ("acrobat (eager)", "acrobat", _in_process(_acrobat("eager", True))),
    ("acrobat (eager, dense embedding updates)", "acrobat", _in_process(_acrobat("eager", False))),
    ("hand-batched PyTorch", "hand", _in_process(_hand)),
    ("TorchFold", "torchfold", _in_process(_torchfold)),
    ("DyNet (autobatch)", "dynet", _dynet),
    (REFERENCE, "pytorch", _in_process(_per_instance)),
]
"""Every system ``--train`` times, in report order: (name, its ``--systems`` group, its trainee's maker)."""
TRAIN_GROUPS = tuple(dict.fromkeys(group for _, group, _ in SYSTEMS))
"""The groups ``--train --systems`` takes."""


def _same_grads(a: dict, b: dict) -> bool:
    for name, g in b.items():
        if (a[name] is None) != (g is None):
            return False
        if g is not None and not torch.allclose(a[name], g, rtol=RTOL * 10, atol=ATOL * 10):
            return False
    return True


def compare_steps(spec: ModelSpec, instances: list, vocab: int, hidden: int, seed: int, repeats: int,
                  on_progress: Callable[[str], None] = lambda _: None,
                  groups: Sequence[str] | None = None) -> TrainComparison:
    """Check every system's gradients against the per-instance loop's, then time their steps interleaved
    (the systems of ``groups`` only, default all; the per-instance loop always runs, as the check)."""
    cmp = TrainComparison(spec.name, len(instances), hidden)
    trainees: dict[str, Trainee] = {}
    made: list[Trainee] = []
    expected = None
    chosen = [(name, make) for name, group, make in SYSTEMS
              if groups is None or group in groups or name == REFERENCE]
    try:
        for name, make in reversed(chosen):  # the per-instance reference first: its gradients are the check
            res = StepResult(name)
            cmp.results.insert(0, res)
            on_progress(f"{spec.name} b{len(instances)}: check {name}")
            try:
                t = make(spec, instances, spec.make_params(vocab, hidden, seed))
                made.append(t)
                grads = t.grads()
            except Unavailable as exc:
                res.status, res.detail = ("not installed" if str(exc).startswith("not installed")
                                          else "not available", str(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - one broken system must not stop the benchmark
                res.status, res.detail = "error", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
                continue
            if expected is None:
                expected = grads
            elif not _same_grads(grads, expected):
                res.status, res.detail = "wrong", "gradients differ from the per-instance PyTorch loop's"
                continue
            trainees[name] = t
        for name, t in trainees.items():
            t.step()  # warm-up (the first optimizer step makes its state)
        for r in range(repeats):
            for res in cmp.results:
                if res.system in trainees:
                    on_progress(f"{spec.name} b{len(instances)}: round {r + 1}/{repeats} {res.system}")
                    trainees[res.system].step(res)
        for res in cmp.results:
            if res.system in trainees:
                trainees[res.system].finish(res)
    finally:
        for t in made:
            t.close()
    return cmp


def run_train_bench(models: list[str], batch_sizes: list[int], size: str = "small", repeats: int = 5,
                    data: str | None = None, seed: int = 0, progress: bool = True,
                    groups: Sequence[str] | None = None) -> list[TrainComparison]:
    """Every (model, batch size) configuration on SST train trees (or synthetic ones), with the systems of
    ``groups`` (``TRAIN_GROUPS``; default all).

    Raises:
        ValueError: an unknown group in ``groups``.
    """
    unknown = [g for g in groups or () if g not in TRAIN_GROUPS]
    if unknown:
        raise ValueError(f"--train: unknown system {', '.join(unknown)}; choose from {', '.join(TRAIN_GROUPS)}")
    ds = load_dataset(data, split="train", limit=max(batch_sizes))
    out = []
    bar = tqdm(total=len(models) * len(batch_sizes), file=sys.stderr, disable=not progress, dynamic_ncols=True,
               unit="config")
    try:
        for name in models:
            spec = get_model(name)
            for bs in batch_sizes:
                instances = spec.instances(ds.trees)[:bs]
                out.append(compare_steps(spec, instances, len(ds.vocab), spec.hidden(size), seed, repeats,
                                         lambda what: bar.set_description(what), groups))
                bar.update(1)
    finally:
        bar.close()
    return out


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def train_markdown(cmps: list[TrainComparison], command: str) -> str:
    """The report: per configuration a table of step time (forward/backward/optimizer), peak memory and
    acrobat's speedup; then acrobat's geometric-mean speedup over each baseline."""
    lines = [f"## Training step: `{command}`", "", f"machine: {machine_line()}", "",
             "One step = forward + loss + backward + Adagrad step; medians of interleaved rounds, ms. Peak memory: "
             "torch profiler CPU memory events, most bytes allocated at once during one step above what was live "
             "at its start (n/a: DyNet, which allocates from its own memory pools).", ""]
    for c in cmps:
        ref = c.step_ms(ACROBAT)
        lines += [f"### {c.model}, hidden {c.hidden}, batch {c.batch_size}", "",
                  "| system | step ms | forward | backward | optimizer | peak MB | acrobat speedup |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in c.results:
            if r.step_ms is None:
                why = r.detail if r.detail.startswith(r.status) else f"{r.status}: {r.detail}"
                lines.append(f"| {r.system} | {why} | | | | | |")
                continue
            speed = f"{r.step_ms / ref:.2f}x" if ref else ""
            mb = f"{r.peak_bytes / 2**20:.1f}" if r.peak_bytes is not None else "n/a"
            lines.append(f"| {r.system} | {r.step_ms:.1f} | {r.median('forward'):.1f} | {r.median('backward'):.1f} "
                         f"| {r.median('optimizer'):.1f} | {mb} | {speed} |")
        notes = [f"- {r.system}: {r.detail}" for r in c.results if r.step_ms is not None and r.detail]
        lines += [""] + (notes + [""] if notes else [])
    lines += [f"### {ACROBAT}'s speedup over each system: geometric mean over the configurations both ran", ""]
    ran = {r.system for c in cmps for r in c.results}
    for name, _, _ in SYSTEMS:
        if name == ACROBAT or name not in ran:  # a system --systems left out
            continue
        ratios = [c.step_ms(name) / c.step_ms(ACROBAT) for c in cmps  # type: ignore[operator]
                  if c.step_ms(name) is not None and c.step_ms(ACROBAT) is not None]
        if ratios:
            lines.append(f"- vs {name}: {_geomean(ratios):.2f}x over {len(ratios)} configuration(s) "
                         f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")
        else:
            lines.append(f"- vs {name}: no configuration ran")
    return "\n".join(lines) + "\n"


def write_train_outputs(cmps: list[TrainComparison], command: str, out: Path) -> list[Path]:
    """``train-bench.json`` and ``train-bench.md`` in ``out`` (created)."""
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "train-bench.json", out / "train-bench.md"
    js.write_text(json.dumps({"command": command, "machine": machine_line(),
                              "comparisons": [asdict(c) for c in cmps]}, indent=1))
    md.write_text(train_markdown(cmps, command), encoding="utf-8")
    return [js, md]
