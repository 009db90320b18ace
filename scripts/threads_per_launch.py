"""Measure what OpenMP threads cost tiny batched launches (issue 11, Table 6's kernel row).

Prints, per setting, the median time of one launch at 1 thread and at the
process's thread count, interleaved (a busy machine slows both alike), and
the cost of ``torch.set_num_threads`` per call:

    PYTHONPATH=. python scripts/threads_per_launch.py [--repeats 200]
    PYTHONPATH=. python scripts/threads_per_launch.py --model birnn --batch-size 8
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch


def per_call_us(f: Callable[[], object], n: int) -> float:
    """Median µs of ``f()`` over ``n`` calls (after 5 warm-up calls)."""
    for _ in range(5):
        f()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def at_threads(threads: int, f: Callable[[], object], n: int) -> float:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return per_call_us(f, n)
    finally:
        torch.set_num_threads(before)


def compare(label: str, f: Callable[[], object], n: int, many: int, rounds: int = 5) -> None:
    """Median over ``rounds`` interleaved rounds of (1 thread, ``many`` threads) medians."""
    one, multi = [], []
    for _ in range(rounds):
        one.append(at_threads(1, f, n))
        multi.append(at_threads(many, f, n))
    a, b = statistics.median(one), statistics.median(multi)
    print(f"{label:<44} 1 thread {a:9.1f} µs   {many} threads {b:9.1f} µs   ratio {b / a:5.2f}")


def model_launches(name: str, batch_size: int, rounds: int) -> None:
    """acrobat runs of ``name`` (batch ``batch_size``, hidden 64): µs per launch (gather + kernel) and per
    batch, per backend, with the launch-threads policy at ``all`` (torch's pool), ``1`` and ``auto``, by turns."""
    from acrobat.data import load_dataset
    from acrobat.models import get_model
    from acrobat.runtime.stats import RunStats

    spec = get_model(name)
    ds = load_dataset(limit=batch_size)
    params = spec.make_params(len(ds.vocab), 64, 0)
    batch = spec.instances(ds.trees)[:batch_size]
    for backend in ("eager", "compiled"):
        be = spec.program.backend(backend)[0]
        for _ in range(20):  # compiles, gather probes, thread probes
            spec.program.run(batch, params, backend=backend)
        per: dict[str, list[tuple[float, float]]] = {"all": [], "1": [], "auto": []}
        for _ in range(rounds):
            for mode in per:
                be.threads.mode = mode
                st = RunStats()
                spec.program.run(batch, params, backend=backend, stats=st)
                per[mode].append(((st.kernel_ms + st.gather_ms) * 1e3 / st.kernel_launches, st.run_ms))
        be.threads.mode = "auto"
        cells = [f"{m:>4}: {statistics.median(u for u, _ in v):8.1f} µs/launch {statistics.median(b for _, b in v):8.1f} ms/batch"
                 for m, v in per.items()]
        print(f"{name} batch {batch_size} {backend:<8} " + " | ".join(cells))
        print(be.threads.report())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--model", help="also time acrobat runs of this model (e.g. birnn) under each policy")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    if args.model:
        with torch.inference_mode():
            model_launches(args.model, args.batch_size, args.rounds)
        return
    n = args.repeats
    many = torch.get_num_threads()
    print(f"torch {torch.__version__}, {many} threads by default, {torch.get_num_interop_threads()} interop")
    with torch.inference_mode():
        same = per_call_us(lambda: torch.set_num_threads(many), 2000)
        def toggle() -> None:
            torch.set_num_threads(1)
            torch.set_num_threads(many)
        flip = per_call_us(toggle, 2000) / 2
        print(f"torch.set_num_threads: {same:.2f} µs/call unchanged, {flip:.2f} µs/call changing")
        torch.set_num_threads(many)
        for rows, width in ((8, 32), (8, 256), (64, 256), (256, 256), (1024, 512)):
            x, w, b = torch.randn(rows, width), torch.randn(width, width), torch.randn(width)
            compare(f"eager tanh(x @ W + b), x ({rows}, {width})", lambda: torch.tanh(x @ w + b), n, many)
            fn = torch.compile(lambda x, w, b: torch.tanh(x @ w + b), dynamic=False)
            fn(x, w, b)
            compare(f"inductor tanh(x @ W + b), x ({rows}, {width})", lambda: fn(x, w, b), n, many)
            y = torch.randn(rows, width)
            fp = torch.compile(lambda x, y, b: torch.tanh(x * y + b) * torch.sigmoid(y), dynamic=False)
            fp(x, y, b)
            compare(f"inductor pointwise only, ({rows}, {width})", lambda: fp(x, y, b), n, many)


if __name__ == "__main__":
    main()
