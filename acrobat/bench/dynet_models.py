"""DyNet with autobatching (PyPI ``dyNET==2.1.2``; install: ``scripts/install-dynet.sh``), a baseline.

DyNet builds one computation graph for the whole mini-batch (every
instance's expressions) and batches operators at ``forward`` time; its
autobatch strategy is fixed when the library is initialised, so each
strategy runs in its own subprocess (``dynet_worker.py``):
1 = agenda-based, 2 = depth-based (Neubig et al. 2017). Both run; the
faster is reported (paper Table 5, footnote: best of the two schemes).

All seven paper models have a DyNet version (``DYNET_MODELS``): TreeLSTM,
MV-RNN, BiRNN, NestedRNN, DRNN, Berxit, StackRNN. The weights are copied
from the same parameter objects acrobat and the PyTorch references use
(DyNet computes ``W x``, so matrices used as ``x @ W`` go in transposed),
the instances are the same (made plain data by ``ENCODERS``; seeded draws
that decide DRNN's growth and Berxit's exits are drawn here by the
instances' own methods and passed along), and the outputs come back to the
parent process to be checked against the per-instance reference. Each
timed run is graph construction + forward + reading the values back; for
the models with tensor-dependent control flow that includes the forwards
that compute the values their decisions read (``dynet_worker.run_fibers``).

A strategy that runs out of memory (DyNet starts with ``MEMORY_MB`` and
grows; the worker may take at most ``memory_limit_mb()``) is left out;
when both do, the configuration is reported as out of memory
(``OutOfMemory``), as the paper's Table 5 reports DyNet's Berxit.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from acrobat.bench.base import OutOfMemory, Setup, Unavailable
from acrobat.bench.dynet_worker import is_memory_message
from acrobat.bench.timing import Timing, TimingPolicy
from acrobat.models.drnn import MAX_DEPTH, MAX_WIDTH, DRNNInstance
from acrobat.models.mvrnn import MAT_BUCKETS

STRATEGIES: dict[int, str] = {1: "agenda-based", 2: "depth-based"}
"""DyNet's autobatch strategies (``autobatch=`` of ``dynet_config.set``)."""

MEMORY_MB = 1024
"""DyNet's memory at start (``dynet_config.set(mem=...)``, MB; split among its forward, backward, parameter
and scratch pools, each touched at start). Its pools grow on demand in forward-only runs."""

MEMORY_LIMIT_MB = 8192
"""The most memory (address space, MB) a DyNet worker may take: the paper's GPU had 8 GB (RTX 3070),
and a worker past the machine's memory would otherwise be stopped by the system's out-of-memory killer,
which may pick another process. Never more than half the machine's memory (``memory_limit_mb``)."""

LN_EPS = 1e-5
"""Berxit's layer-norm epsilon: ``F.layer_norm``'s default, which ``acrobat.models.berxit`` uses."""

WORKER = Path(__file__).with_name("dynet_worker.py")
"""The subprocess script (run by path: it imports only numpy and DyNet, not torch or acrobat)."""

WORKER_TIMEOUT_S = 600


def dynet_installed() -> bool:
    """True when ``import dynet`` would find the module (it is not imported here)."""
    return importlib.util.find_spec("dynet") is not None


def memory_limit_mb() -> int:
    """``MEMORY_LIMIT_MB``, or half the machine's physical memory where that is less."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    except (ValueError, OSError, AttributeError):  # no sysconf names here: keep the fixed limit
        return MEMORY_LIMIT_MB
    return min(MEMORY_LIMIT_MB, physical // 2)


def _tree_data(t: Any) -> Any:
    """A tree as plain data: a leaf is its word id, an internal node ``(left, right)``."""
    if t.is_leaf:
        return int(t.word_id)
    return (_tree_data(t.left), _tree_data(t.right))


def _sentence(tokens: Any) -> list[int]:
    return [int(x) for x in tokens]


def _drnn_data(inst: DRNNInstance) -> tuple[int, dict[int, tuple[float | None, float | None]]]:
    """``(token, draws)``: ``draws[position] = (u_child, u_sibling)`` at every position the generation can
    reach, from ``inst.uniform`` (``None`` where depth or width is at its bound and no draw is made)."""
    draws: dict[int, tuple[float | None, float | None]] = {}
    todo = [(0, 0, 1)]  # (depth, width, position); a child is at 2 * position, a next sibling at 2 * position + 1
    while todo:
        depth, width, position = todo.pop()
        child = inst.uniform(position, 0) if depth < MAX_DEPTH else None
        sibling = inst.uniform(position, 1) if width < MAX_WIDTH else None
        draws[position] = (child, sibling)
        if child is not None:
            todo.append((depth + 1, 0, 2 * position))
        if sibling is not None:
            todo.append((depth, width + 1, 2 * position + 1))
    return int(inst.token), draws


ENCODERS: dict[str, Callable[[Any, torch.nn.Module], Any]] = {
    "treelstm": lambda t, p: _tree_data(t),
    "mvrnn": lambda t, p: _tree_data(t),
    "birnn": lambda s, p: _sentence(s),
    "nestedrnn": lambda x, p: (_sentence(x.tokens), _sentence(x.inner)),
    "drnn": lambda x, p: _drnn_data(x),
    "berxit": lambda x, p: (_sentence(x.tokens), [x.threshold(k) for k in range(1, int(p.layers) + 1)]),
    "stackrnn": lambda s, p: _sentence(s),
}
"""Per model: one instance as the worker's plain data (ints, lists, tuples, floats, dicts)."""

DYNET_MODELS = tuple(ENCODERS)
"""Models with a DyNet version (``dynet_worker.MODELS``); others report DyNet as not available."""


def _config(name: str, params: torch.nn.Module) -> dict[str, Any]:
    """The worker's per-model settings: the hidden size, plus the constants its math needs."""
    cfg: dict[str, Any] = {"hidden": int(getattr(params, "hidden"))}
    if name == "mvrnn":
        cfg["mat_buckets"] = MAT_BUCKETS
    if name == "berxit":
        cfg.update(heads=int(params.heads), head_dim=int(params.head_dim), ln_eps=LN_EPS)
    return cfg


def _arrays(params: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: p.detach().cpu().numpy().copy() for name, p in params.named_parameters()}


def worker_job(name: str, params: torch.nn.Module, instances: list, strategy: int, mem_mb: int,
               limit_mb: int) -> dict[str, Any]:
    """A DyNet worker's job as plain data: the model, autobatch strategy, DyNet's initial memory and the
    worker's memory limit (MB), settings (``_config``), weights (numpy, named as in ``params``) and
    instances (``ENCODERS``)."""
    encode = ENCODERS[name]
    return {"model": name, "strategy": strategy, "mem_mb": mem_mb, "limit_mb": limit_mb, "params": _arrays(params),
            "config": _config(name, params), "instances": [encode(x, params) for x in instances]}


def worker_failed(stderr: str, returncode: int, what: str) -> dict[str, str]:
    """A worker that died without a result: ``{"out_of_memory": why}`` when its ``stderr`` says memory ran
    out (DyNet aborts when its initial memory cannot be had) or it was killed (``SIGKILL``: what the
    system's out-of-memory killer sends).

    Raises:
        RuntimeError: it died otherwise (the message names ``what`` and ends with its stderr's last line).
    """
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    said = [line.strip() for line in stderr.splitlines() if is_memory_message(line)]
    if said:
        return {"out_of_memory": said[-1]}
    if returncode == -9:
        return {"out_of_memory": f"killed by SIGKILL (the system's out-of-memory killer?): {tail[0]}"}
    raise RuntimeError(f"DyNet worker ({what}) failed: {tail[0]}")


class DynetRunner:
    """Runs both autobatch strategies in subprocesses; reports the faster one's times.

    Raises:
        Unavailable: DyNet not installed, or no DyNet version of the model.
        OutOfMemory: (from ``outputs``) every strategy ran out of DyNet memory.
    """

    def __init__(self, s: Setup) -> None:
        if not dynet_installed():
            raise Unavailable("not installed (scripts/install-dynet.sh)")
        if s.spec.name not in DYNET_MODELS:
            raise Unavailable(f"no DyNet version of {s.spec.name}")
        self.setup = s
        self.repeats = s.repeats
        self.mem_mb = MEMORY_MB
        self.limit_mb = memory_limit_mb()
        self.detail = ""
        self._timing: Timing | None = None

    def make_job(self, strategy: int, repeats: int) -> dict[str, Any]:
        """The worker's job (``worker_job``) and the timed runs' count."""
        s = self.setup
        return worker_job(s.spec.name, s.params, s.instances, strategy, self.mem_mb, self.limit_mb) | {
            "repeats": repeats}

    def _run_worker(self, strategy: int, repeats: int) -> dict[str, Any]:
        """Run one strategy's worker; its result (``outputs`` and ``samples_ms``, or ``out_of_memory``)."""
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "job.pkl", Path(tmp) / "result.pkl"
            src.write_bytes(pickle.dumps(self.make_job(strategy, repeats)))
            proc = subprocess.run([sys.executable, str(WORKER), str(src), str(dst)],
                                  capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
            if proc.returncode != 0 or not dst.exists():
                return worker_failed(proc.stderr or proc.stdout, proc.returncode, f"strategy {strategy}")
            return pickle.loads(dst.read_bytes())

    def outputs(self) -> list:
        """Run both strategies (timed there too); the best one's outputs as torch tensors.

        Raises:
            OutOfMemory: every strategy ran out of memory.
            RuntimeError: a worker failed, or the strategies' outputs disagree.
        """
        results = {k: self._run_worker(k, self.repeats) for k in STRATEGIES}
        oom = {k: r["out_of_memory"] for k, r in results.items() if "out_of_memory" in r}
        runs = {k: r for k, r in results.items() if k not in oom}
        if not runs:
            raise OutOfMemory(f"the worker's memory limit ({self.limit_mb} MB) was reached ("
                              + "; ".join(f"{STRATEGIES[k]}: {m}" for k, m in oom.items()) + ")")
        best = min(runs, key=lambda k: statistics.median(runs[k]["samples_ms"]))
        first = next(iter(runs))
        for k, r in runs.items():  # the strategies must agree with each other too
            for a, b in zip(_flat(r["outputs"]), _flat(runs[first]["outputs"])):
                if not np.allclose(a, b, rtol=1e-4, atol=1e-5):
                    raise RuntimeError(f"DyNet strategies {first} and {k} give different outputs")
        self._timing = Timing(tuple(runs[best]["samples_ms"]))
        others = [f"{STRATEGIES[k]} {statistics.median(r['samples_ms']):.1f} ms" for k, r in runs.items() if k != best]
        others += [f"{STRATEGIES[k]} out of memory" for k in oom]
        self.detail = f"best: {STRATEGIES[best]}" + (f" (other: {', '.join(others)})" if others else "")
        return _to_torch(runs[best]["outputs"])

    def time(self, policy: TimingPolicy, warmup: int) -> Timing:
        """The faster strategy's times, measured in ``outputs`` (its subprocess warms up itself,
        ``dynet_worker.WARMUP`` runs)."""
        if self._timing is None:
            self.repeats = policy.repeats
            self.outputs()
        assert self._timing is not None
        return self._timing


def _flat(x: Any) -> list[np.ndarray]:
    if isinstance(x, (list, tuple)):
        return [a for item in x for a in _flat(item)]
    return [x]


def _to_torch(x: Any) -> Any:
    """Numpy arrays as float32 tensors; lists, tuples and ints (Berxit's layer count) kept."""
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, list):
        return [_to_torch(i) for i in x]
    if isinstance(x, tuple):
        return tuple(_to_torch(i) for i in x)
    return torch.from_numpy(np.asarray(x, dtype=np.float32))
