"""DyNet 2.1.2's cost per operator, the figures ``dispatch_floor.py`` prints beside the dynamic tier's: agenda
autobatching, ``(hidden,)`` vectors; µs per call of building the expression (``recorded``) and of building it and
running it in one ``dy.forward`` with its like, less an empty graph's (``recorded + run``). Prints one JSON line.

    python scripts/dynet_op_cost.py CALLS REPEATS HIDDEN
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any, Callable


def _per_call(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    """Median µs per call of ``fn``, which makes ``calls`` calls."""
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def dynet(calls: int, repeats: int, hidden: int) -> dict[str, dict[str, float]]:
    import dynet_config

    dynet_config.set(mem="512", random_seed=1, autobatch=1)
    import dynet as dy

    model = dy.ParameterCollection()
    w = model.add_parameters((hidden,))  # a parameter: dy.inputVector under autobatching crashes DyNet 2.1.2
    out: dict[str, dict[str, float]] = {}
    for op, make in (("torch.sigmoid(x)", lambda x: dy.logistic(x)), ("x * x", lambda x: dy.cmult(x, x))):
        def build(n: int, forward: bool) -> None:
            dy.renew_cg()
            x = dy.tanh(w)
            ys = [make(x) for _ in range(n)]
            if forward:
                dy.forward(ys + [x])
        row = out[op] = {}
        row["recorded"] = _per_call(lambda: build(calls, False), calls, repeats)
        whole = _per_call(lambda: build(calls, True), 1, repeats)
        empty = _per_call(lambda: build(0, True), 1, repeats)
        row["recorded + run"] = (whole - empty) / calls
    return out


if __name__ == "__main__":
    print(json.dumps(dynet(*(int(a) for a in sys.argv[1:4]))))
