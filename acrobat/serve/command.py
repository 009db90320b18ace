"""``acrobat serve MODEL``: serve a bundled SST model over HTTP on Ray's local cluster until Ctrl-C.

    acrobat serve treelstm [--port 8000] [--max-batch-size 32] [--batch-wait-ms 2] [--num-replicas 1]
                           [--data PATH] [--size small|large] [--seed 0] [--threads 1] [--ingress haproxy|proxy]

Also the arguments of the load test, which ``acrobat bench --serve`` and ``scripts/serve_load.py`` share
(:func:`add_load_arguments`). Importing this module imports neither Ray nor the load test's client.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from typing import Any

from acrobat.serve.servable import MAX_WORDS, SERVABLE_MODELS

RATES = (40, 50, 65, 80, 100, 130, 160, 200, 250, 320, 400, 500, 630, 800, 1000, 1250, 1600)
"""The load test's default offered rates, requests/s (steps of about 1.25x)."""


def add_batching_arguments(p: argparse.ArgumentParser | Any, max_batch_size: int = 32, wait_ms: float = 2.0) -> None:
    """The options of a deployment's batching and ingress, for ``acrobat serve`` and the load test."""
    p.add_argument("--max-batch-size", type=int, default=max_batch_size,
                   help=f"most requests one program.run call batches (Ray Serve's @serve.batch; default {max_batch_size})")
    p.add_argument("--batch-wait-ms", type=float, default=wait_ms,
                   help=f"how long the first request of a batch waits for more, ms (default {wait_ms:g})")
    p.add_argument("--ingress", default="haproxy", choices=["haproxy", "proxy"],
                   help="Ray Serve's HTTP ingress: haproxy (its HAProxy ingress, throughput-optimized mode; "
                        "default) or proxy (its Python proxy actor)")


def add_threads_argument(p: argparse.ArgumentParser) -> None:
    """``--threads``: torch threads per replica."""
    p.add_argument("--threads", type=int, default=1, help="torch threads per replica (default 1: on a small "
                   "machine the ingress and clients need the other cores)")


def add_load_arguments(p: argparse.ArgumentParser | Any) -> None:
    """The load test's own options (``acrobat bench --serve`` and ``scripts/serve_load.py``)."""
    p.add_argument("--rates", help="comma-separated offered request rates, req/s (default "
                   f"{','.join(map(str, RATES))}; a server stops after two it does not hold)")
    p.add_argument("--step-seconds", type=float, default=5.0, help="seconds of arrivals per rate (default 5)")
    p.add_argument("--max-requests", type=int, default=4000, help="most requests per step (default 4000)")
    p.add_argument("--timeout-s", type=float, default=5.0, help="a request unanswered after this many seconds "
                   "fails (default 5)")
    p.add_argument("--slo-ms", type=float, default=50.0, help="p99 latency a held rate keeps, ms (default 50)")
    p.add_argument("--refine", type=int, default=2, help="bisections between each server's highest held rate "
                   "and the next missed one (default 2)")
    p.add_argument("--tries", type=int, default=1, help="steps at a rate before it counts as missed: one that "
                   "holds is enough (default 1; on a shared machine 2 keeps one burst of other work from deciding)")
    p.add_argument("--in-flight", type=int, default=64, help="requests always outstanding in the closing "
                   "capacity step per server, whose answers/s are its capacity (default 64; 0: none)")
    p.add_argument("--idle-seconds", type=float, default=5.0, help="seconds of idle CPU measured first (default 5)")
    add_batching_arguments(p)


def add_parser(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    """Add the ``serve`` subparser to the ``acrobat`` command's subparsers."""
    p = sub.add_parser(
        "serve", help="serve a model over HTTP with request batching (Ray Serve; pip install -e '.[serve]')",
        description="Start Ray's local cluster and serve MODEL over HTTP on 127.0.0.1: POST one instance as JSON "
                    "({\"tree\": \"(3 (2 It) (4 (2 's) (2 good)))\"}, or {\"tokens\": [...]} for birnn/stackrnn) and get "
                    "the model's result; requests arriving together run as one batch. Kernels compile before the "
                    "URL is printed. Ctrl-C stops the server and Ray.")
    p.add_argument("model", choices=list(SERVABLE_MODELS), help="the model to serve (the bundled models that read "
                   "SST text)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port on 127.0.0.1 (default 8000; 0: a free one)")
    p.add_argument("--num-replicas", type=int, default=1, help="Ray Serve replicas, each a process with its own "
                   "kernels (default 1)")
    p.add_argument("--data", help="SST folder or file whose vocabulary the model reads (default: ../shared/data/sst "
                   "if present, else the synthetic vocabulary)")
    p.add_argument("--size", default="small", choices=["small", "large"], help="model size (hidden 256/512)")
    p.add_argument("--seed", type=int, default=0, help="weight seed (default 0, as acrobat run)")
    p.add_argument("--max-words", type=int, default=MAX_WORDS, help=f"longest request accepted, words (default {MAX_WORDS})")
    add_threads_argument(p)
    add_batching_arguments(p)
    p.set_defaults(func=cmd_serve)
    return p


def _stop_on_signals() -> None:
    """SIGINT (Ctrl-C) and SIGTERM raise KeyboardInterrupt in the main thread, so the server stops cleanly
    (also where the shell started it in the background, with SIGINT ignored)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; stop Ray Serve and Ray cleanly; 0 on a clean stop."""
    from acrobat.serve import require_ray

    require_ray()
    from acrobat.serve.cluster import LocalServe
    from acrobat.serve.servable import PaperModel
    from acrobat.serve.server import ServeOptions

    factory = PaperModel(args.model, args.data, args.size, args.seed, max_words=args.max_words)
    options = ServeOptions(max_batch_size=args.max_batch_size, batch_wait_timeout_s=args.batch_wait_ms / 1e3,
                           num_replicas=args.num_replicas, threads=args.threads)
    servable = factory()  # fails here, before Ray starts, on a bad --data or model
    print(f"model    {servable.name}: {servable.description}", flush=True)
    server = LocalServe(args.port or None, args.ingress, num_cpus=max(2, os.cpu_count() or 1, args.num_replicas))
    try:
        _stop_on_signals()
        server.start()
        _stop_on_signals()  # again: ray.init installs its own SIGTERM handler
        print(f"starting Ray Serve ({args.ingress} ingress); compiling and tuning kernels in "
              f"{args.num_replicas} replica(s) ...", flush=True)
        server.deploy({args.model: (factory, options)})
        url = server.url(args.model)
        print(f"serving {args.model} at {url}  (max batch {options.max_batch_size}, wait "
              f"{args.batch_wait_ms:g} ms, {args.num_replicas} replica(s)); Ctrl-C stops", flush=True)
        print(f"try:  curl -s {url} -H 'content-type: application/json' -d '{servable.usage().split(' or ')[0]}'",
              flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping ...", flush=True)
    finally:
        server.stop()
    print("stopped", flush=True)
    return 0
