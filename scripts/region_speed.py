"""A model whose one helper the static tier rejects, three ways (issue 18 §1, dynamic regions): the static program
with that helper as a dynamic region (``acrobat.analysis.regions``, the default), the whole program in the dynamic
tier (``Options(static=False)``, what the default was before regions), and the per-instance loop.

The model is ``tests/region_progs.py``'s tree encoder whose combining helper fills a dict by item assignment
(``with_dict``: the region), on random trees of 1-20 leaves, batch ``--batch``, inference, 1 torch thread, each
way timed by turns (``--repeats`` rounds of one run of each, after a warm-up run), medians in ms. Every batched
result is checked against the loop's.

    PYTHONPATH=. python scripts/region_speed.py [--batch 64] [--repeats 9] [--backend eager]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import random

import torch

import acrobat as ab
from acrobat.runtime.tier import TierChoice
from tests import region_progs as rp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--backend", default="eager", help="backend of the two batched ways (eager, compiled)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(1)
    p, insts = rp.Params(dtype=torch.float32), [rp.random_tree(rng, rng.randint(1, 20)) for _ in range(a.batch)]
    prog = rp.TREES["dict"]
    regions = [r.name for r in prog.compile(1, None, (p,)).plan.regions]
    ways: dict[str, Callable[[], Any]] = {
        f"static + region {regions}": lambda: prog.run(insts, p, backend=a.backend),
        "whole program dynamic": lambda: prog.run(insts, p, backend=a.backend, options=ab.Options(static=False)),
        "per-instance loop": lambda: [prog(x, p) for x in insts],
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    with torch.no_grad():
        want = ways["per-instance loop"]()
        for name, run in ways.items():
            got = run()
            torch.testing.assert_close(torch.stack(got), torch.stack(want))
        for _ in range(a.repeats):
            for name, run in ways.items():
                t0 = time.perf_counter()
                run()
                times[name].append((time.perf_counter() - t0) * 1e3)
    loop = statistics.median(times["per-instance loop"])
    print(f"tree encoder with a dict-filling helper, batch {a.batch}, backend {a.backend}, 1 thread, median of {a.repeats} by turns:")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"  {name:40s} {m:8.1f} ms  ({loop / m:.2f}x the loop)")
    trial = next(iter(prog.backend(a.backend, 1)[0].tiers.trials.values()))
    print(f"  the default's tier trial: {TierChoice.why(trial)} (chose {trial.choice or 'nothing yet'})")


if __name__ == "__main__":
    main()
