"""The serving load test as a script: the same run as ``acrobat bench --serve`` (acrobat.serve.load).

    python scripts/serve_load.py [--model treelstm] [--rates 50,100,200,...] [--step-seconds 5] [--slo-ms 50]
                                 [--max-batch-size 32] [--batch-wait-ms 2] [--ingress haproxy|proxy]
                                 [--data PATH] [--out serve-out]

Starts Ray's local cluster (pip install -e '.[serve]'), serves the model twice on one Ray Serve stack
(per-instance PyTorch on each request, and acrobat on each collected batch), sends SST trees over
loopback with Poisson arrivals at each rate in turn (bounded in count and time, it stops by itself),
checks every answer, and writes serve.json, serve.md and serve_latency.png.
"""

from __future__ import annotations

import argparse
import sys

from acrobat.serve.command import add_load_arguments, add_threads_argument
from acrobat.serve.servable import SERVABLE_MODELS


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="treelstm", choices=list(SERVABLE_MODELS), help="model to serve (default treelstm)")
    p.add_argument("--size", default="small", choices=["small", "large"], help="model size (default small)")
    p.add_argument("--data", help="SST folder or tree file (default: ../shared/data/sst if present, else synthetic trees)")
    p.add_argument("--split", default="dev", help="split to read from a data folder (default dev)")
    p.add_argument("--seed", type=int, default=0, help="weight and arrival seed (default 0)")
    p.add_argument("--out", default="serve-out", help="folder for serve.json, serve.md, serve_latency.png")
    add_threads_argument(p)
    add_load_arguments(p)
    from acrobat.serve.load import cmd_load

    return cmd_load(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
