"""Where a batch of the dynamic tier goes, per example (issue 18 §1): recording, launches, settling.

For each named example of ``examples/`` (default: node_classifier_rnn tree_gru childsum_treelstm
transformer_encoder), one seeded batch in inference, ``Options(static=False)`` on the eager backend, after three
warm-up batches:

- by turns for ``--rounds`` rounds, the dynamic tier and the per-instance loop, each timed in CPU time of this
  process (``time.process_time``; the minimum of the rounds): less sensitive than wall time to other processes
  on a shared machine, the ratio the one to read;
- one more batch's ``RunStats`` split (wall ms): recording (the fibers running the model, new signatures
  included), the launches' gathers, kernels and bookkeeping (``schedule_ms``), settling the lazy values left
  on the instances' objects (``Runtime.settle``) and the new operator signatures' blocks made
  (``Recorder.new_op``; ``acrobat.runtime.dynamic.Signatures`` keeps them across runs).

Timings are never asserted anywhere.

    PYTHONPATH=. python scripts/dynamic_breakdown.py [NAME...] [--batch 64] [--rounds 9]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import torch

from acrobat.bench.examples import load_examples
from acrobat.program import Options
from acrobat.runtime import dynamic, executor
from acrobat.runtime.stats import RunStats

DEFAULT = ["node_classifier_rnn", "tree_gru", "childsum_treelstm", "transformer_encoder"]


def timed_method(cls: type, name: str, totals: dict[str, float]) -> None:
    """Wrap method ``name`` of ``cls`` to add its wall seconds to ``totals[name]`` and its calls to
    ``totals[name + "#"]``."""
    method: Callable[..., Any] = getattr(cls, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - t0
            totals[name + "#"] = totals.get(name + "#", 0) + 1

    setattr(cls, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", default=DEFAULT)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(1)
    totals: dict[str, float] = {}
    timed_method(executor.Runtime, "settle", totals)
    timed_method(dynamic.Recorder, "new_op", totals)
    examples = load_examples()
    for name in args.names:
        ex = examples.load(name)
        params, batch = ex.make_params(0), ex.instances(args.batch, 0)
        with torch.inference_mode():
            def run(stats: RunStats) -> list:
                return ex.program.run(batch, params, backend="eager", options=Options(static=False), stats=stats)

            def loop() -> list:
                return [ex.program(x, params) for x in batch]

            for _ in range(3):
                run(RunStats())
                loop()
            cpu: dict[str, list[float]] = {"dynamic": [], "loop": []}
            for _ in range(args.rounds):
                for system, fn in (("dynamic", lambda: run(RunStats())), ("loop", loop)):
                    t0 = time.process_time()
                    fn()
                    cpu[system].append(time.process_time() - t0)
            totals.clear()
            st = RunStats()
            run(st)
        dyn, per = min(cpu["dynamic"]) * 1e3, min(cpu["loop"]) * 1e3
        settle = totals.get("settle", 0.0) * 1e3
        print(f"{name}: CPU ms per batch: dynamic {dyn:.1f}, loop {per:.1f} ({per / dyn:.2f}x the loop's speed)\n"
              f"  one batch, wall ms: {st.total_ms:.1f} = recording {st.construct_ms:.1f} + gathers "
              f"{st.gather_ms - settle:.1f} + kernels {st.kernel_ms:.1f} + bookkeeping {st.schedule_ms:.1f} + "
              f"settling {settle:.1f}; {st.kernel_launches} launches of {st.dfg_nodes} nodes; "
              f"{totals.get('new_op#', 0):.0f} new signatures, {totals.get('new_op', 0.0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
