"""DyNet with autobatching (PyPI ``dyNET==2.1.2``; install: ``scripts/install-dynet.sh``), a baseline.

DyNet builds one computation graph for the whole mini-batch (every
instance's expressions) and batches operators at ``forward`` time; its
autobatch strategy is fixed when the library is initialised, so each
strategy runs in its own subprocess (``dynet_worker.py``):
1 = agenda-based, 2 = depth-based (Neubig et al. 2017). Both run; the
faster is reported (paper Table 5, footnote: best of the two schemes).

The weights are copied from the same parameter objects acrobat and the
PyTorch references use (DyNet computes ``W x``, so matrices go in
transposed), the instances are the same, and the outputs come back to the
parent process to be checked against the per-instance reference. Each
timed run is graph construction + forward + reading the values back.
"""

from __future__ import annotations

import importlib.util
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from acrobat.bench.base import Setup, Unavailable
from acrobat.bench.timing import Timing, TimingPolicy

STRATEGIES: dict[int, str] = {1: "agenda-based", 2: "depth-based"}
"""DyNet's autobatch strategies (``autobatch=`` of ``dynet_config.set``)."""

DYNET_MODELS = ("treelstm", "birnn")
"""Models with a DyNet version here; others report DyNet as not available."""

WORKER = Path(__file__).with_name("dynet_worker.py")
"""The subprocess script (run by path: it imports only numpy and DyNet, not torch or acrobat)."""

WORKER_TIMEOUT_S = 600


def dynet_installed() -> bool:
    """True when ``import dynet`` would find the module (it is not imported here)."""
    return importlib.util.find_spec("dynet") is not None


def _tree_data(t: Any) -> Any:
    """A tree as plain data: a leaf is its word id, an internal node ``(left, right)``."""
    if t.is_leaf:
        return int(t.word_id)
    return (_tree_data(t.left), _tree_data(t.right))


def _arrays(params: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: p.detach().cpu().numpy().copy() for name, p in params.named_parameters()}


class DynetRunner:
    """Runs both autobatch strategies in subprocesses; reports the faster one's times.

    Raises:
        Unavailable: DyNet not installed, or no DyNet version of the model.
    """

    def __init__(self, s: Setup) -> None:
        if not dynet_installed():
            raise Unavailable("not installed (scripts/install-dynet.sh)")
        if s.spec.name not in DYNET_MODELS:
            raise Unavailable(f"no DyNet version of {s.spec.name}")
        self.setup = s
        self.repeats = s.repeats
        self.detail = ""
        self._timing: Timing | None = None

    def _job(self, strategy: int, repeats: int) -> dict[str, Any]:
        s = self.setup
        instances = [_tree_data(t) for t in s.instances] if s.spec.name == "treelstm" else [
            [int(x) for x in sent] for sent in s.instances]
        job = {"model": s.spec.name, "strategy": strategy, "repeats": repeats, "params": _arrays(s.params),
               "hidden": int(getattr(s.params, "hidden")), "instances": instances,
               "threads": torch.get_num_threads()}
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "job.pkl", Path(tmp) / "result.pkl"
            src.write_bytes(pickle.dumps(job))
            proc = subprocess.run([sys.executable, str(WORKER), str(src), str(dst)],
                                  capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
            if proc.returncode != 0 or not dst.exists():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"DyNet worker (strategy {strategy}) failed: {tail[0]}")
            return pickle.loads(dst.read_bytes())

    def outputs(self) -> list:
        """Run both strategies (timed there too); the best one's outputs as torch tensors."""
        runs = {k: self._job(k, self.repeats) for k in STRATEGIES}
        best = min(runs, key=lambda k: statistics.median(runs[k]["samples_ms"]))
        first = next(iter(runs))
        for k, r in runs.items():  # the strategies must agree with each other too
            for a, b in zip(_flat(r["outputs"]), _flat(runs[first]["outputs"])):
                if not np.allclose(a, b, rtol=1e-4, atol=1e-5):
                    raise RuntimeError(f"DyNet strategies {first} and {k} give different outputs")
        self._timing = Timing(tuple(runs[best]["samples_ms"]))
        others = ", ".join(f"{STRATEGIES[k]} {statistics.median(r['samples_ms']):.1f} ms"
                           for k, r in runs.items() if k != best)
        self.detail = f"best: {STRATEGIES[best]}" + (f" (other: {others})" if others else "")
        return _to_torch(runs[best]["outputs"])

    def time(self, policy: TimingPolicy, warmup: int) -> Timing:
        """The faster strategy's times, measured in ``outputs`` (its subprocess warms up once itself)."""
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
    if isinstance(x, list):
        return [_to_torch(i) for i in x]
    if isinstance(x, tuple):
        return tuple(_to_torch(i) for i in x)
    return torch.from_numpy(np.asarray(x, dtype=np.float32))
