"""DFG construction per node against the floor of any Python skeleton (issue 11's 0.15 µs/node target).

On one TreeLSTM batch (SST dev, small size), prints medians over ``--runs``
runs of µs per DFG node for

- ``skeleton``: acrobat's generated skeleton (``acrobat show treelstm``)
  adding every node (one native call per node, ``acrobat._native.Dfg``);
- ``walk``: a plain Python recursion over the same trees with the same
  shape (a call per tree node, the depth arithmetic, the result tuples)
  that adds no node: what walking the user's data in Python costs at least;
- ``walk + native call``: ``walk`` plus one call of a C builtin per node
  (``max`` over the node's arguments), the least a node can cost on top.

    PYTHONPATH=. python scripts/node_floor.py [--batch-size 64] [--runs 200]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any, Callable

from acrobat.data import load_dataset
from acrobat.models import get_model


def walk(node: Any, d: int) -> tuple[tuple[int, int], int]:
    """The skeleton's shape without nodes: recurse, combine depths, pass tuples up."""
    if node.is_leaf:
        w = node.word_id
        return (w, d), d
    r0, d0 = walk(node.left, d)
    r1, d1 = walk(node.right, d)
    d = d0 if d0 > d1 else d1
    ((lh, lc), (rh, rc)) = (r0, r1)
    return (lh, rh), d + 1


def walk_call(node: Any, d: int) -> tuple[tuple[int, int], int]:
    """``walk`` with one C call per node, as many arguments as the skeleton's node call."""
    if node.is_leaf:
        h = max(0, 1, node.word_id)
        return (h, h + 1), d
    r0, d0 = walk_call(node.left, d)
    r1, d1 = walk_call(node.right, d)
    d = d0 if d0 > d1 else d1
    ((lh, lc), (rh, rc)) = (r0, r1)
    h = max(d, 2, lh, rh, lc, rc)
    return (h, h + 1), d + 1


def timed(f: Callable[[], Any]) -> float:
    """Seconds ``f()`` takes with the cycle collector paused (as during a run)."""
    gc.disable()
    try:
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--runs", type=int, default=200)
    a = ap.parse_args()
    spec = get_model("treelstm")
    ds = load_dataset(limit=a.batch_size)
    params = spec.make_params(len(ds.vocab), spec.hidden("small"), 0)
    batch = spec.instances(ds.trees)[:a.batch_size]
    plan = spec.program.compile(1, spec.program.options).plan

    def skeleton() -> float:
        """Seconds to run the skeleton of every instance into a fresh runtime (made before the clock starts)."""
        rt = spec.program.runtime(params, backend="eager")

        def build() -> None:
            for i, inst in enumerate(batch):
                rt.dfg.inst, rt.dfg.phase = i, 0
                plan.entry(rt, plan.base, inst, params)
        return timed(build)

    rt = spec.program.runtime(params, backend="eager")
    for i, inst in enumerate(batch):
        rt.dfg.inst, rt.dfg.phase = i, 0
        plan.entry(rt, plan.base, inst, params)
    nodes = sum(g.size() for g in rt.groups.values())
    rows: dict[str, Callable[[], float]] = {
        "skeleton": skeleton,
        "walk": lambda: timed(lambda: [walk(inst, 0) for inst in batch]),
        "walk + native call": lambda: timed(lambda: [walk_call(inst, 0) for inst in batch])}
    print(f"treelstm, batch {a.batch_size}: {nodes} DFG nodes; µs per node, median of {a.runs} runs")
    for name, f in rows.items():
        t = statistics.median(f() for _ in range(a.runs))
        print(f"  {name:<20} {t / nodes * 1e6:6.3f}")


if __name__ == "__main__":
    main()
