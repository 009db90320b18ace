"""TreeLSTM's arithmetic floor against hand-batched PyTorch and acrobat (issue 11's "1.2x hand-batched" target).

On one batch (the first ``--batch-size`` trees of SST dev, or synthetic trees
without ``../shared``), at ``--threads`` torch threads, prints medians over
``--runs`` runs (ms per batch) of

- ``GEMMs alone``: just the matrix products a level-by-level schedule must
  run (all leaves: (n0, H) @ (H, 3H); each height level k: (nk, 2H) @
  (2H, 5H)), on ready inputs: no gathers, no elementwise cell, no Python
  per node. Any system that batches by level, acrobat and the hand-batched
  version alike, does at least this arithmetic;
- ``hand-batched``: ``treelstm_hand_batched`` (the expert floor of §6);
- ``acrobat kernels``: acrobat's kernel calls alone (``RunStats.kernel_ms``,
  compiled backend, after the per-block gather and thread choices settled);
- ``acrobat``: acrobat's whole run.

The best acrobat could reach against hand-batched with no overhead and
kernels at the GEMM floor is ``hand / GEMMs alone``.

    PYTHONPATH=. python scripts/treelstm_floor.py [--batch-size 64] [--size small] [--threads 2] [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Callable

import torch

from acrobat.bench.timing import time_call
from acrobat.data import load_dataset
from acrobat.models import get_model
from acrobat.models.levels import tree_levels
from acrobat.models.treelstm import treelstm_hand_batched
from acrobat.runtime.stats import RunStats


def median_ms(fn: Callable[[], object], runs: int) -> float:
    """Median wall ms of ``fn()`` over ``runs`` calls after 3 untimed ones (the bench's ``time_call``)."""
    return time_call(fn, runs, warmup=3, budget_ms=float("inf")).median


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", choices=("small", "large"), default="small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = get_model("treelstm")
    ds = load_dataset(limit=args.batch_size)
    hidden = spec.hidden(args.size)
    params = spec.make_params(len(ds.vocab), hidden, 0)
    trees = spec.instances(ds.trees)[: args.batch_size]
    levels, _ = tree_levels(trees)
    H = hidden
    leaf_x, W_leaf = torch.randn(len(levels[0]), H), torch.randn(H, 3 * H)
    level_x = [torch.randn(len(level), 2 * H) for level in levels[1:]]
    W_node = torch.randn(2 * H, 5 * H)

    def gemms() -> None:
        torch.mm(leaf_x, W_leaf)
        for x in level_x:
            torch.mm(x, W_node)

    with torch.inference_mode():
        for _ in range(20):  # compiles, then the per-block gather and thread probes
            spec.program.run(trees, params, backend="compiled")
        kernel_ms: list[float] = []

        def acrobat_run() -> None:
            stats = RunStats()
            spec.program.run(trees, params, backend="compiled", stats=stats)
            kernel_ms.append(stats.kernel_ms)

        rows = {
            "GEMMs alone": median_ms(gemms, args.runs),
            "hand-batched": median_ms(lambda: treelstm_hand_batched(trees, params), args.runs),
            "acrobat": median_ms(acrobat_run, args.runs),
        }
        rows["acrobat kernels"] = statistics.median(kernel_ms[3:])
    nodes = sum(len(level) for level in levels)
    print(f"treelstm {args.size}, batch {args.batch_size}: {nodes} tree nodes in {len(levels)} height levels, "
          f"{args.threads} torch threads; ms per batch, median of {args.runs} runs")
    for name in ("GEMMs alone", "hand-batched", "acrobat kernels", "acrobat"):
        print(f"  {name:<16} {rows[name]:8.2f}")
    print(f"  best acrobat/hand speedup with no overhead and kernels at the GEMM floor: "
          f"{rows['hand-batched'] / rows['GEMMs alone']:.2f}x (now {rows['hand-batched'] / rows['acrobat']:.2f}x)")


if __name__ == "__main__":
    main()
