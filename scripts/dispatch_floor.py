"""The dynamic tier's cost per recorded operator against its floors and DyNet's (issue 18 §1: "measure DyNet's
per-operator cost beside yours and say what bounds the dynamic tier").

Prints medians over ``--repeats`` of µs per call, ``--calls`` calls each, 1 torch thread, vectors of ``--hidden``
float32 (TreeLSTM's small size):

- ``eager``: the operator run by PyTorch on a real tensor (what the per-instance loop pays a call);
- ``floor``: the same call on a ``Lazy`` where the recorder returns a result it already has (a
  ``TorchFunctionMode`` whose ``__torch_function__`` returns it, for ``torch.sigmoid``; a ``Lazy`` dunder that
  returns it, for ``*``): what any recorder reached through torch's dispatch pays before it records anything;
- ``recorded``: the dynamic tier recording the call as a DFG node (``Options(static=False)``), timed inside the
  program's own Python (the instance's fiber), launches excluded;
- ``recorded + run``: the dynamic tier's whole run of a program making ``--calls`` such nodes at one depth,
  less the run of the same program making none, per node (recording, the launch, its gather, the kernel);
- DyNet 2.1.2 (``--dynet``, agenda autobatching): ``recorded``, building the expression (DyNet records
  lazily too), and ``recorded + run``, the build and ``dy.forward`` of the graph, less an empty one's, per node.

    PYTHONPATH=. python scripts/dispatch_floor.py [--calls 20000] [--repeats 7] [--hidden 256] [--no-dynet]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

import acrobat as ab
from acrobat.runtime.lazy import Lazy, meta_of

DYNAMIC = ab.Options(static=False)
TIMES: list[float] = []  # seconds, written by the programs below from inside the instance's Python


def _per_call(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    """Median µs per call of ``fn``, which makes ``calls`` calls."""
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


@ab.program
def sigmoids(inst, p):
    """``inst`` = (calls, op): that many nodes of one operator on one lazy value, timed from inside."""
    n, op = inst
    x = torch.tanh(p.x)
    t0 = time.perf_counter()
    if op == "sigmoid":
        for _ in range(n):
            torch.sigmoid(x)
    else:
        for _ in range(n):
            x * x
    TIMES.append(time.perf_counter() - t0)
    return x


class _Cached(TorchFunctionMode):
    """The dispatch floor: every torch function returns ``out``, nothing recorded."""

    def __init__(self, out: Any):
        super().__init__()
        self.out = out

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return self.out


class _Stub:
    """A recorder that records nothing: ``Lazy``'s dunders call ``record``, which returns the value it holds."""

    def __init__(self) -> None:
        self.out: Any = None

    def record(self, func: Any, args: tuple) -> Any:
        return self.out


def torch_side(calls: int, repeats: int, hidden: int) -> dict[str, dict[str, float]]:
    t = torch.randn(hidden)
    stub = _Stub()
    lazy = Lazy(0, meta_of(torch.Size([hidden]), torch.float32), 1, False, stub)
    stub.out = lazy
    p = type("P", (), {"x": t})()
    out: dict[str, dict[str, float]] = {}
    for op, eager, on_lazy in (("torch.sigmoid(x)", lambda: torch.sigmoid(t), lambda: torch.sigmoid(lazy)),
                               ("x * x", lambda: t * t, lambda: lazy * lazy)):
        row = out[op] = {}
        row["eager"] = _per_call(lambda: [eager() for _ in range(calls)], calls, repeats)
        with _Cached(lazy):
            row["floor"] = _per_call(lambda: [on_lazy() for _ in range(calls)], calls, repeats)
        name = "sigmoid" if "sigmoid" in op else "mul"
        with torch.inference_mode():
            sigmoids.run([(calls, name)], p, backend="eager", options=DYNAMIC)  # the signatures made
            TIMES.clear()
            whole = _per_call(lambda: sigmoids.run([(calls, name)], p, backend="eager", options=DYNAMIC), 1, repeats)
            row["recorded"] = statistics.median(TIMES) / calls * 1e6
            empty = _per_call(lambda: sigmoids.run([(0, name)], p, backend="eager", options=DYNAMIC), 1, repeats)
        row["recorded + run"] = (whole - empty) / calls
    return out


def dynet_side(calls: int, repeats: int, hidden: int) -> dict[str, dict[str, float]]:
    """DyNet's figures (``dynet_op_cost.py``), in a process of its own: DyNet is initialised once per process."""
    script = Path(__file__).with_name("dynet_op_cost.py")
    done = subprocess.run([sys.executable, str(script), str(calls), str(repeats), str(hidden)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--no-dynet", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = torch_side(args.calls, args.repeats, args.hidden)
    dyn = {} if args.no_dynet else dynet_side(args.calls, args.repeats, args.hidden)
    cols = ["eager", "floor", "recorded", "recorded + run"]
    print(f"µs per call, medians of {args.repeats} x {args.calls} calls, (,{args.hidden}) float32, 1 thread")
    print(f"{'':18s}" + "".join(f"{c:>16s}" for c in cols) + ("" if args.no_dynet else
                                                              f"{'DyNet recorded':>16s}{'DyNet rec.+run':>16s}"))
    for op, row in rows.items():
        line = f"{op:18s}" + "".join(f"{row[c]:16.2f}" for c in cols)
        if op in dyn:
            line += f"{dyn[op]['recorded']:16.2f}{dyn[op]['recorded + run']:16.2f}"
        print(line)


if __name__ == "__main__":
    main()
