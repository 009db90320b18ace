"""DyNet worker: run one model with one autobatch strategy, write outputs and times (ms).

Run as a script by ``acrobat.bench.dynet_models.DynetRunner`` (one process
per strategy: DyNet fixes its strategy at initialisation):

    python dynet_worker.py JOB.pkl RESULT.pkl

The job holds the model name, the strategy, the repeats, the weights as
numpy arrays (named as in the PyTorch parameter module) and the instances
as plain data (a tree: a word id, or ``(left, right)``; a sentence: word
ids). Imports only numpy and DyNet, so it starts fast.
"""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


def _treelstm(dy: Any, P: dict[str, Any], H: int) -> Callable[[Any], tuple[Any, Any]]:
    def node(t: Any) -> tuple[Any, Any]:
        if isinstance(t, int):
            iou = dy.affine_transform([P["b_iou"], P["W_iou"], dy.lookup(P["emb"], t)])
            i, o, u = (dy.pick_range(iou, k * H, (k + 1) * H) for k in range(3))
            c = dy.cmult(dy.logistic(i), dy.tanh(u))
        else:
            (lh, lc), (rh, rc) = node(t[0]), node(t[1])
            hc = dy.concatenate([lh, rh])
            iou = dy.affine_transform([P["b_iou"], P["U_iou"], hc])
            i, o, u = (dy.pick_range(iou, k * H, (k + 1) * H) for k in range(3))
            f = dy.logistic(dy.affine_transform([P["b_f"], P["U_f"], hc]))
            fl, fr = dy.pick_range(f, 0, H), dy.pick_range(f, H, 2 * H)
            c = dy.cmult(dy.logistic(i), dy.tanh(u)) + dy.cmult(fl, lc) + dy.cmult(fr, rc)
        return dy.cmult(dy.logistic(o), dy.tanh(c)), c

    def run(tree: Any) -> tuple[Any, Any]:
        h, _ = node(tree)
        return dy.affine_transform([P["b_out"], P["W_out"], h]), h

    return run


def _birnn(dy: Any, P: dict[str, Any], H: int) -> Callable[[Any], list[Any]]:
    def direction(tokens: list[int], d: str) -> list[Any]:
        h, states = P[f"{d}.h0"], []
        for tok in tokens:
            h = dy.tanh(dy.affine_transform([P[f"{d}.b"], P[f"{d}.W"], dy.lookup(P["emb"], tok), P[f"{d}.U"], h]))
            states.append(h)
        return states

    def run(tokens: list[int]) -> list[Any]:
        fw, bw = direction(tokens, "fwd"), direction(tokens[::-1], "bwd")
        n = len(tokens)
        return [dy.affine_transform([P["b_out"], P["W_out"], dy.concatenate([fw[t], bw[n - 1 - t]])])
                for t in range(n)]

    return run


def _worker(src: str, dst: str) -> None:
    job = pickle.loads(Path(src).read_bytes())
    import dynet_config

    dynet_config.set(mem="1024", random_seed=1, autobatch=job["strategy"])
    import dynet as dy

    model = dy.ParameterCollection()
    P: dict[str, Any] = {}
    for name, arr in job["params"].items():
        if name == "emb":
            P[name] = model.lookup_parameters_from_numpy(arr)
        elif arr.ndim == 2:  # x @ W in PyTorch is W^T x in DyNet
            P[name] = model.parameters_from_numpy(np.ascontiguousarray(arr.T))
        else:
            P[name] = model.parameters_from_numpy(arr)
    make = _treelstm if job["model"] == "treelstm" else _birnn

    def once() -> list:
        dy.renew_cg()
        E = {k: v if k == "emb" else dy.parameter(v) for k, v in P.items()}  # parameters in this graph
        build = make(dy, E, job["hidden"])
        outs = [build(x) for x in job["instances"]]
        flat = [e for o in outs for e in (o if isinstance(o, (list, tuple)) else [o])]
        dy.forward(flat)
        if job["model"] == "treelstm":
            return [(lo.npvalue(), h.npvalue()) for lo, h in outs]
        return [[e.npvalue() for e in o] for o in outs]

    result = once()  # warm-up
    samples = []
    for _ in range(job["repeats"]):
        t0 = time.perf_counter()
        result = once()
        samples.append((time.perf_counter() - t0) * 1e3)
    Path(dst).write_bytes(pickle.dumps({"outputs": result, "samples_ms": samples}))


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
