"""Serving an acrobat program on Ray Serve, with request batching (``pip install -e '.[serve]'``).

    from acrobat.serve import LocalServe, PaperModel, ServeOptions

    with LocalServe() as s:                                  # Ray's local cluster, HTTP on 127.0.0.1
        handle = s.deploy({"treelstm": (PaperModel("treelstm"), ServeOptions(max_batch_size=32))})["treelstm"]
        print(s.url("treelstm"))                             # POST {"tree": "(3 (2 It) (4 (2 's) (2 good)))"}
        logits, h = handle.infer.remote(tree).result()       # the Python handle: tensors

- ``servable``: a program with its parameters and request format; request decoding and its errors;
- ``server``: the Ray Serve deployment (``@serve.batch`` -> ``program.run``), warm-up, per-request errors;
- ``cluster``: Ray's local cluster on loopback with Ray Serve's HTTP ingress;
- ``command``: ``acrobat serve MODEL`` and the load test's arguments; ``load``, ``load_report``: the
  load test (``acrobat bench --serve``, ``scripts/serve_load.py``).

``servable`` and ``command`` import no Ray; the names below that need it import it on first use and
say how to install it when it is missing. Importing this package keeps Ray on this machine (see
``acrobat.serve.cluster``): it must come before the process's first ``import ray`` for that to hold.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray's single-node cluster on loopback addresses
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

_EXPORTS = {"LocalServe": "cluster", "free_port": "cluster", "ProgramServer": "server", "ServeOptions": "server",
            "application": "server", "PaperModel": "servable", "RequestError": "servable", "Servable": "servable",
            "to_json": "servable"}
__all__ = list(_EXPORTS)


def require_ray() -> None:
    """Import Ray Serve, or raise ``ImportError`` saying how to install it."""
    try:
        importlib.import_module("ray.serve")
    except ImportError as exc:
        raise ImportError(f"acrobat.serve needs Ray Serve ({exc}): pip install -e '.[serve]'") from exc


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'acrobat.serve' has no attribute {name!r}")
    if _EXPORTS[name] != "servable":
        require_ray()
    return getattr(importlib.import_module(f"acrobat.serve.{_EXPORTS[name]}"), name)
