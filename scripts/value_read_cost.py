"""Cost of a fiber value read (§4.2; issue 11's target: at most 1.5 µs).

Prints the µs of ``Runtime.value`` of a computed handle (locating its
group output and taking the row view), of a read of a number
(``value(x).item()`` against ``Runtime.item``), of a greenlet switch pair (what a
read that waits adds: fiber -> scheduler -> fiber), and of a whole run of
a loop with one ``.item()`` per step at batch 64 (construction time per
read, node insertion and switches included).

    PYTHONPATH=. python scripts/value_read_cost.py
"""
import statistics, time, timeit
import torch
from greenlet import greenlet
import acrobat

@acrobat.function
def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ w)

@acrobat.program
def loop(n: int, w: torch.Tensor) -> torch.Tensor:
    h = torch.zeros(4)
    k = 0
    while k < n:
        h = step(h, w)
        if h.sum().item() > 100.0:
            break
        k += 1
    return h

w = torch.randn(4, 4) * 0.1
with torch.inference_mode():
    rt = loop.runtime(w, backend="eager")
    # A computed value: the cost of the lookup + the row view
    g = rt.table.group(None, 0, 0); g.outs = (torch.randn(8, 4),)
    h = g.base + 3
    n = 100000
    t = min(timeit.repeat(lambda: rt.value(h), number=n, repeat=5)) / n * 1e6
    print(f"Runtime.value of a computed handle: {t:.2f} µs")
    t = min(timeit.repeat(lambda: rt.value(h).sum(), number=n, repeat=5)) / n * 1e6
    print(f"  ... with .sum(): {t:.2f} µs")
    # a number for host code: `x.item()` through the row view, and Runtime.item (one tolist() per group output)
    g1 = rt.table.group(None, 0, 0); g1.outs = (torch.randn(64),)
    h1 = g1.base + 3
    t = min(timeit.repeat(lambda: rt.value(h1).item(), number=n, repeat=5)) / n * 1e6
    print(f"Runtime.value(x).item(): {t:.2f} µs")
    t = min(timeit.repeat(lambda: rt.item(h1), number=n, repeat=5)) / n * 1e6
    print(f"Runtime.item(x) (what the skeleton calls for x.item(), int(x), float(x), bool(x)): {t:.2f} µs")
    # greenlet switch pair (what a waiting read adds: fiber -> scheduler -> fiber)
    main = greenlet.getcurrent()
    def body():
        while True:
            main.switch()
    gl = greenlet(body)
    gl.switch()
    t = min(timeit.repeat(lambda: gl.switch(), number=n, repeat=5)) / n * 1e6
    print(f"greenlet switch pair: {t:.2f} µs")
    # whole run: per value read, batch 64, many steps
    from acrobat.runtime.stats import RunStats
    for _ in range(3):
        loop.run([30] * 64, w, backend="eager")
    st = RunStats()
    t0 = time.perf_counter(); loop.run([30] * 64, w, backend="eager", stats=st); t1 = time.perf_counter()
    print(f"run: {(t1-t0)*1e3:.1f} ms, construction {st.construct_ms:.2f} ms for {64*30} value reads + {st.dfg_nodes} nodes"
          f" = {st.construct_ms*1e3/(64*30):.2f} µs per read (node insertion and switches included)")
