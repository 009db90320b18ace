"""acrobat's own host cost per launch and per DFG node, compiled backend (issue 11).

For each model, after warm-up (compiles, gather and thread probes), runs the
same batch ``--runs`` times at one thread and reports medians over runs of

- ``host µs/launch``: the time of executing the DFG (``Runtime.flush``) less
  the kernel calls' time, per launch: everything acrobat does around a
  kernel (handles, arena lookup, pool checks, index vectors, output rows,
  placing outputs, stats, the thread policy);
- ``kernel µs/launch``: the kernel calls themselves (Inductor's ``call``);
- ``µs/node``: DFG construction (running the skeleton) per DFG node.

With ``--profile`` it also prints cProfile's top functions of the flushes.

    PYTHONPATH=. ACROBAT_CACHE_DIR=/tmp/lo python scripts/launch_overhead.py [--models treelstm:64 birnn:8]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import time
from typing import Any

import torch


def measure(name: str, batch_size: int, runs: int, size: str, profile: bool) -> dict[str, float]:
    """Medians over ``runs`` runs of one batch of ``name``: host µs/launch, kernel µs/launch, µs/node."""
    import acrobat.runtime.executor as executor
    from acrobat.data import load_dataset
    from acrobat.models import get_model
    from acrobat.runtime.stats import RunStats

    spec = get_model(name)
    ds = load_dataset(limit=batch_size)
    params = spec.make_params(len(ds.vocab), spec.hidden(size), 0)
    batch = spec.instances(ds.trees)[:batch_size]
    flush_s = [0.0]
    real_flush = executor.Runtime.flush

    def timed_flush(self: Any, upto: Any = None) -> None:
        t0 = time.perf_counter()
        real_flush(self, upto)
        flush_s[0] += time.perf_counter() - t0

    rows: dict[str, list[float]] = {"host": [], "kernel": [], "node": [], "ms": []}
    prof = cProfile.Profile() if profile else None
    executor.Runtime.flush = timed_flush  # type: ignore[method-assign]
    try:
        with torch.inference_mode():
            for _ in range(20):
                spec.program.run(batch, params, backend="compiled")
            for _ in range(runs):
                st = RunStats()
                flush_s[0] = 0.0
                if prof is not None:
                    prof.enable()
                spec.program.run(batch, params, backend="compiled", stats=st)
                if prof is not None:
                    prof.disable()
                n = st.kernel_launches
                rows["host"].append((flush_s[0] * 1e3 - st.kernel_ms) * 1e3 / n)
                rows["kernel"].append(st.kernel_ms * 1e3 / n)
                rows["node"].append(st.construct_ms * 1e3 / st.dfg_nodes)
                rows["ms"].append(st.run_ms)
    finally:
        executor.Runtime.flush = real_flush  # type: ignore[method-assign]
    out = {k: statistics.median(v) for k, v in rows.items()}
    out["launches"] = n
    out["nodes"] = st.dfg_nodes
    print(f"{name} b{batch_size} ({size}): host {out['host']:6.1f} µs/launch, kernel {out['kernel']:7.1f} µs/launch, "
          f"construction {out['node']:5.3f} µs/node, {out['ms']:6.2f} ms/batch "
          f"({n} launches, {st.dfg_nodes} nodes; medians of {runs} runs)", flush=True)
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=["treelstm:64", "birnn:8"], help="MODEL:BATCH ...")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--size", default="small")
    ap.add_argument("--profile", action="store_true", help="also print cProfile's top functions")
    a = ap.parse_args()
    os.environ.setdefault("ACROBAT_LAUNCH_THREADS", "1")
    torch.set_num_threads(1)
    for m in a.models:
        name, _, b = m.partition(":")
        measure(name, int(b or 8), a.runs, a.size, a.profile)


if __name__ == "__main__":
    main()
