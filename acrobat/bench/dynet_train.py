"""DyNet's autobatched training step, a baseline of ``acrobat bench --train`` (``dynet_worker.py --train``).

Each autobatch strategy (``dynet_models.STRATEGIES``: DyNet fixes it at
initialisation) trains in a worker process of its own that stays up for
the whole configuration: it gets the job once (the same weights, as numpy
arrays, and instances as the inference baseline's, ``worker_job``) and then
one command at a time, so the benchmark can interleave DyNet's steps with
the other systems' (``train_step.compare_steps``). Per step the worker
builds a fresh graph with every instance's expressions (autobatched),
the loss of ``train_step.loss_of`` summed over the instances, its value
(forward), ``backward`` and ``dy.AdagradTrainer``'s update, and times the
three phases itself (no pipe time counted). The first step's gradients
come back (no update) to be checked against the per-instance PyTorch
loop's. Both strategies are timed; the faster one's times are reported
(as the paper's Table 5 reports DyNet's best scheme). Peak memory is not
measured (DyNet allocates from its own pools, not the torch allocator).
"""

from __future__ import annotations

import pickle
import select
import statistics
import subprocess
import sys
import tempfile
from typing import IO, TYPE_CHECKING, Any, NoReturn

import numpy as np
import torch

from acrobat.bench.base import OutOfMemory, Unavailable
from acrobat.bench.dynet_models import (DYNET_MODELS, MEMORY_MB, STRATEGIES, WORKER, WORKER_TIMEOUT_S,
                                        dynet_installed, memory_limit_mb, worker_failed, worker_job)
from acrobat.models import ModelSpec

if TYPE_CHECKING:
    from acrobat.bench.train_step import StepResult

Grads = dict[str, "torch.Tensor | None"]


def dense_tensor(a: Any, shape: tuple[int, ...]) -> torch.Tensor:
    """A worker's array, or a lookup table's ``(rows, values)`` (``dynet_worker.read_grads``: the rows
    scattered into zeros), as a float32 tensor of ``shape``."""
    if isinstance(a, tuple):
        rows, values = a
        a = np.zeros(shape, dtype=np.float32)
        a[rows] = values
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).reshape(shape)


class DynetWorker:
    """A DyNet worker process with one autobatch strategy (the job's ``strategy``): the job at start, then
    commands (``dynet_worker.serve``). ``argv`` is the worker script and its arguments (default:
    ``dynet_worker.py --train``, the benchmark's training step; ``acrobat.train_dynet`` runs the
    ``acrobat train`` recipe's); ``purpose`` names it in errors.

    Raises (``ask``):
        OutOfMemory: DyNet ran out of memory (the worker then ends).
        RuntimeError: the worker failed otherwise or gave no reply within ``WORKER_TIMEOUT_S`` seconds.
    """

    def __init__(self, job: dict[str, Any], argv: tuple[str, ...] = (str(WORKER), "--train"),
                 purpose: str = "training") -> None:
        self.what = f"{purpose}, {STRATEGIES[job['strategy']]}"
        self.stderr: IO[str] = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, *argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr)
        self._send(job)

    def _send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        try:
            pickle.dump(message, self.proc.stdin)
            self.proc.stdin.flush()
        except BrokenPipeError:  # it died: ask reads why from its stderr
            pass

    def _died(self) -> NoReturn:
        """Raise why the worker ended without a reply (``worker_failed`` reads its stderr)."""
        self.proc.wait(timeout=WORKER_TIMEOUT_S)
        self.stderr.seek(0)
        why = worker_failed(self.stderr.read(), self.proc.returncode, self.what)  # RuntimeError unless out of memory
        raise OutOfMemory(f"out of memory: {why['out_of_memory']}")

    def ask(self, command: str | tuple) -> Any:
        """Send ``command`` (a name, or ``(name, *arguments)``; ``dynet_worker.TRAIN_COMMANDS`` for the
        benchmark's worker); its result."""
        self._send(command)
        assert self.proc.stdout is not None
        if not select.select([self.proc.stdout], [], [], WORKER_TIMEOUT_S)[0]:
            name = command[0] if isinstance(command, tuple) else command
            raise RuntimeError(f"DyNet worker ({self.what}) gave no reply to {name!r} in {WORKER_TIMEOUT_S} s")
        try:
            reply = pickle.load(self.proc.stdout)
        except EOFError:
            self._died()
        if "out_of_memory" in reply:
            raise OutOfMemory(f"out of memory: {reply['out_of_memory']}")
        if "error" in reply:
            raise RuntimeError(f"DyNet worker ({self.what}) failed: {reply['error'].strip().splitlines()[-1]}")
        return reply["ok"]

    def close(self) -> None:
        """End the worker (end of its input; killed if it does not end within 10 s)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.stderr.close()


class DynetTrainee:
    """DyNet's training step on one configuration, every autobatch strategy in its own worker
    (``train_step.Trainee``); ``finish`` reports the fastest strategy's times.

    ``params`` are the weights (copied to the workers; not changed here), ``lr`` Adagrad's learning rate.
    A strategy that runs out of memory is dropped (named in the result's detail).

    Raises:
        Unavailable: DyNet not installed, or no DyNet version of ``spec``.
        OutOfMemory: (from ``grads``) every strategy ran out of memory.
        RuntimeError: a worker failed, or the strategies' gradients disagree.
    """

    def __init__(self, spec: ModelSpec, instances: list, params: torch.nn.Module, lr: float) -> None:
        if not dynet_installed():
            raise Unavailable("not installed (scripts/install-dynet.sh)")
        if spec.name not in DYNET_MODELS:
            raise Unavailable(f"no DyNet version of {spec.name}")
        self.shapes = {name: tuple(p.shape) for name, p in params.named_parameters()}
        limit = memory_limit_mb()
        self.workers: dict[int, DynetWorker] = {}
        try:
            for k in STRATEGIES:
                self.workers[k] = DynetWorker(worker_job(spec.name, params, instances, k, MEMORY_MB, limit) | {"lr": lr})
        except BaseException:
            self.close()
            raise
        self.times: dict[int, list[tuple[float, float, float]]] = {k: [] for k in self.workers}
        self.dropped: dict[int, str] = {}

    def _ask_each(self, command: str) -> dict[int, Any]:
        """Every live strategy's answer; strategies out of memory are dropped (every one: ``OutOfMemory``)."""
        out = {}
        for k, w in list(self.workers.items()):
            try:
                out[k] = w.ask(command)
            except OutOfMemory as exc:
                self.dropped[k] = str(exc)
                w.close()
                del self.workers[k]
        if not self.workers:
            raise OutOfMemory("; ".join(f"{STRATEGIES[k]}: {why}" for k, why in self.dropped.items()))
        return out

    def _torch(self, name: str, g: Any) -> torch.Tensor | None:
        """A worker's gradient as a dense tensor (a lookup table's rows scattered into zeros); ``None`` where
        it is all zero: DyNet keeps a gradient for every parameter, PyTorch none for those the loss does not
        reach (e.g. weights read only by a decision's ``argmax``)."""
        t = dense_tensor(g, self.shapes[name])
        return t if bool(t.any()) else None

    def grads(self) -> Grads:
        """The gradients of one forward and backward (no update), as ``train_step._Trainee.grads`` gives them.

        Raises:
            RuntimeError: two strategies' gradients differ.
        """
        per = {k: {n: self._torch(n, g) for n, g in grads.items()} for k, grads in self._ask_each("grads").items()}
        first, *others = per.values()
        for other in others:
            for name, g in first.items():
                h = other[name]
                if not (g is None and h is None or g is not None and h is not None
                        and torch.allclose(g, h, rtol=1e-4, atol=1e-5)):
                    raise RuntimeError(f"DyNet's autobatch strategies give different gradients of {name}")
        return first

    def step(self, res: StepResult | None = None) -> None:
        """One training step of each strategy; timed (kept for ``finish``) when ``res`` is given."""
        for k, t in self._ask_each("step").items():
            if res is not None:
                self.times[k].append(t)

    def finish(self, res: StepResult) -> None:
        """Fill ``res`` with the fastest strategy's phase times (ms); its detail names the strategies."""
        timed = {k: ts for k, ts in self.times.items() if ts and k in self.workers}
        if not timed:
            res.status, res.detail = "not available", "; ".join(self.dropped.values()) or "no timed step"
            return
        step = {k: statistics.median(sum(t) for t in ts) for k, ts in timed.items()}
        best = min(step, key=step.__getitem__)
        for f, b, o in timed[best]:
            res.forward_ms.append(f)
            res.backward_ms.append(b)
            res.optimizer_ms.append(o)
        others = [f"{STRATEGIES[k]} {ms:.1f} ms" for k, ms in step.items() if k != best]
        others += [f"{STRATEGIES[k]} {why}" for k, why in self.dropped.items()]
        res.detail = f"best: {STRATEGIES[best]}" + (f" (other: {', '.join(others)})" if others else "")

    def weights(self) -> dict[int, dict[str, torch.Tensor]]:
        """Every strategy's weights now, as tensors named and shaped as ``params``."""
        return {k: {n: dense_tensor(a, self.shapes[n]) for n, a in ws.items()}
                for k, ws in self._ask_each("weights").items()}

    def close(self) -> None:
        """End every worker."""
        for w in self.workers.values():
            w.close()
        self.workers = {}
