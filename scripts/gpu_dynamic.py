"""The dynamic tier on a device: each paper model run with ``Options(static=False)`` (its own Python per
instance, torch operators recorded and batched at run time) must equal the plain per-instance calls there.

    python3 scripts/gpu_dynamic.py [cuda|cpu] [BATCH]

Prints per model: exact or the mismatch, ms per batch batched (median of 3 after one warm-up run) and
plain (one pass), launches and DFG nodes. Exits 1 if any model is inexact or fails.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import acrobat as ab
from acrobat.data.synthetic import synthetic_trees
from acrobat.models import MODELS


def _ms(fn, sync: bool) -> float:
    start = time.perf_counter()
    fn()
    if sync:
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


def main() -> int:
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    batch_size = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    sync = device == "cuda"
    failed = 0
    for name, spec in MODELS.items():
        if name == "berxit":
            continue  # BERT-sized: the static tier's check covers it; in the dynamic tier it takes minutes
        params = spec.make_params(200, spec.hidden("small"), 0).to(device).eval()
        batch = spec.instances(synthetic_trees(batch_size, vocab_size=200, seed=1))
        options = ab.Options(static=False)
        try:
            with torch.no_grad():
                want = [spec.program(x, params) for x in batch]
                plain = _ms(lambda: [spec.program(x, params) for x in batch], sync)
                spec.program.run(batch, params, backend="eager", options=options)
                times = [_ms(lambda: spec.program.run(batch, params, backend="eager", options=options), sync)
                         for _ in range(3)]
                stats = ab.RunStats()
                got = spec.program.run(batch, params, backend="eager", options=options, stats=stats)
            torch.testing.assert_close(got, want)
            verdict = "exact"
        except Exception as exc:  # noqa: BLE001 - report every model, then fail
            failed += 1
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:300]}")
            continue
        print(f"{name}: {verdict}, batch {batch_size} on {device}: dynamic tier {statistics.median(times):.1f} ms, "
              f"per instance {plain:.1f} ms ({plain / statistics.median(times):.2f}x), "
              f"{stats.kernel_launches} launches for {stats.dfg_nodes} DFG nodes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
