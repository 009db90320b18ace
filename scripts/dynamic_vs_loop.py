"""The dynamic tier against the per-instance loop on one paper model (issue 18: "Run wholly dynamic, the TreeLSTM
at batch 64 is at least 2x per-instance PyTorch").

Runs, by turns for ``--rounds`` rounds after two warm-up batches, in inference: the model's program in the dynamic
tier (``Options(static=False)``, eager backend), the same program called once per instance as plain Python, and
the model's hand-written per-instance reference; prints the medians (ms per batch) and each one's ratio to the
dynamic tier's. Timings are never asserted anywhere.

    PYTHONPATH=. python scripts/dynamic_vs_loop.py [--model treelstm] [--batch 64] [--threads 1] [--rounds 9]
        [--data ../shared/data/sst]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

from acrobat.data import load_dataset
from acrobat.models import get_model
from acrobat.program import Options


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="treelstm")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--data", default=None, help="SST folder (default: $ACROBAT_SST_DIR or ../shared/data/sst)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(args.threads)
    spec = get_model(args.model)
    ds = load_dataset(args.data, split="dev", limit=args.batch)
    params = spec.make_params(len(ds.vocab), spec.hidden("small"), 0)
    batch = spec.instances(ds.trees)[:args.batch]
    dynamic = Options(static=False)
    with torch.inference_mode():
        systems = {"dynamic tier": lambda: spec.program.run(batch, params, backend="eager", options=dynamic),
                   "program per instance": lambda: [spec.program(x, params) for x in batch],
                   "reference per instance": lambda: [spec.reference(x, params) for x in batch]}
        for _ in range(2):
            systems["dynamic tier"]()
        times: dict[str, list[float]] = {k: [] for k in systems}
        for _ in range(args.rounds):
            for name, run in systems.items():
                t0 = time.perf_counter()
                run()
                times[name].append((time.perf_counter() - t0) * 1e3)
    base = statistics.median(times["dynamic tier"])
    print(f"{args.model}, batch {args.batch}, {args.threads} torch thread(s), medians of {args.rounds} rounds")
    for name, ms in times.items():
        med = statistics.median(ms)
        print(f"  {name:24s} {med:8.1f} ms   {med / base:.2f}x the dynamic tier's time")


if __name__ == "__main__":
    main()
