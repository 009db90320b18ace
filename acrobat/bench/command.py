"""The ``acrobat bench`` subcommand: arguments, run, printed tables, files in ``--out``.

    acrobat bench [MODEL...] [--sizes small,large] [--batch-sizes 8,64] [--systems acrobat,pytorch,...]
                  [--quick] [--repeats N] [--out DIR] [--grad] [--train] [--data PATH] [--threads N]
                  [--seq-len N] [--layers N] [--processes N]
    acrobat bench --serve [MODEL] [--rates 50,100,...] [--step-seconds 5] [--slo-ms 50] [--max-batch-size 32]
                  [--batch-wait-ms 2] [--ingress haproxy|proxy] [--data PATH] [--out DIR]   (acrobat.serve.load)

``--quick`` also scales Berxit down (``QUICK_BERXIT``: shorter sequences, fewer
layers, BERT-base width kept) so that the whole quick run stays under 10
minutes on a 2-core CPU; what was scaled is printed first and written into
bench.md and bench.json (``scaled``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import torch

from acrobat.bench.processes import run_in_processes
from acrobat.bench.report import markdown, read_json
from acrobat.bench.suite import BenchSettings, run_bench, write_outputs
from acrobat.bench.systems import GROUPS, select
from acrobat.bench.train_step import (TRAIN_GROUPS, TRAIN_MODELS, run_train_bench, train_markdown,
                                      write_train_outputs)
from acrobat.models import MODELS
from acrobat.models.berxit import SEQ_LEN as BERXIT_SEQ_LEN, SIZES as BERXIT_SIZES
from acrobat.serve.command import add_load_arguments

QUICK = {"sizes": "small", "batch_sizes": "8,64", "repeats": 3, "budget_ms": 3000.0, "min_repeats": 2}
QUICK_BERXIT = {"seq_len": 32, "layers": 4}
"""Berxit under ``--quick`` (the paper's: 128 tokens, 12 layers small / 18 large)."""
FULL = {"sizes": "small,large", "batch_sizes": "8,64", "repeats": 10, "budget_ms": 8000.0, "min_repeats": 3}


def add_parser(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    """Add the ``bench`` subparser to the ``acrobat`` command's subparsers."""
    bench = sub.add_parser(
        "bench", help="time acrobat against its baselines and its own ablations, side by side",
        description="Time every available system on identical inputs and weights; check outputs first; write "
                    "bench.json, bench.md and PNG plots to --out. The user-style models of examples/ (launches and "
                    "speed against a per-instance loop) run with `acrobat examples`.")
    bench.add_argument("models", nargs="*", choices=[[]] + list(MODELS), metavar="MODEL",
                       help=f"models to run (default: all of {', '.join(MODELS)})")
    bench.add_argument("--sizes", help=f"comma-separated model sizes (default {FULL['sizes']}; --quick: small)")
    bench.add_argument("--batch-sizes", help=f"comma-separated batch sizes (default {FULL['batch_sizes']})")
    bench.add_argument("--systems", help=f"comma-separated system groups (default all: {','.join(GROUPS)}; "
                       f"with --train: {','.join(TRAIN_GROUPS)}, the per-instance loop always runs as the check)")
    bench.add_argument("--repeats", type=int, help=f"timed runs per system after a warm-up "
                       f"(default {FULL['repeats']}; --quick: {QUICK['repeats']})")
    bench.add_argument("--quick", action="store_true", help="small size, batch sizes 8 and 64, up to 3 timed "
                       "runs per system (at least 2; stop past 3 s), Berxit scaled down to "
                       f"{QUICK_BERXIT['seq_len']}-token sequences and {QUICK_BERXIT['layers']} layers")
    bench.add_argument("--seq-len", type=int, help=f"berxit: tokens per sequence (default {BERXIT_SEQ_LEN}; "
                       f"--quick: {QUICK_BERXIT['seq_len']})")
    bench.add_argument("--layers", type=int, help="berxit: maximum layers (default 12 small, 18 large; "
                       f"--quick: {QUICK_BERXIT['layers']})")
    bench.add_argument("--out", default="bench-out", help="folder for bench.json, bench.md, *.png "
                       "(default bench-out)")
    bench.add_argument("--grad", action="store_true", help="time forward passes with autograd recording "
                       "(default: inference mode)")
    bench.add_argument("--train", action="store_true", help="time training steps instead (forward, backward, "
                       "optimizer, peak memory; acrobat eager-accum, compiled and eager vs hand-batched, "
                       "TorchFold, DyNet, per instance), "
                       f"models {', '.join(TRAIN_MODELS)} by default, batch sizes 25,64, small size; writes "
                       "train-bench.json and train-bench.md")
    bench.add_argument("--data", help="SST tree file or folder (default: ../shared/data/sst if present, "
                       "else synthetic trees)")
    bench.add_argument("--split", default="dev", help="split to read from a data folder (default: dev)")
    bench.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    bench.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    bench.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where weights and kernels live; "
                       "on cuda each timed run ends with a device sync, DyNet is not run (default cpu)")
    bench.add_argument("--processes", type=int, default=0, metavar="N", help="then run the acrobat systems "
                       "again in N fresh processes, one after another, and report each one's median ms per "
                       "configuration (how much a user's single run varies; default 0: none)")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.add_argument("--from-json", metavar="FILE", help="run nothing: redraw the tables and plots of a "
                       "bench.json into --out")
    serving = bench.add_argument_group(
        "serving load test (--serve; pip install -e '.[serve]')",
        "Poisson request arrivals at swept rates over HTTP against two servers on one local Ray Serve stack, "
        "per-instance PyTorch and acrobat (one MODEL, default treelstm; --threads: torch threads per replica, "
        "default 1); writes serve.json, serve.md, serve_latency.png to --out")
    serving.add_argument("--serve", action="store_true", help="run the serving load test instead of the batch "
                         "benchmark")
    add_load_arguments(serving)
    bench.set_defaults(func=cmd_bench)
    return bench


def _list(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"--{what}: give at least one value")
    return items


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    """``BenchSettings`` from parsed arguments (``--quick`` fills what was not given).

    Raises:
        ValueError: a bad list value (unknown system group, batch size below 1, ...).
    """
    base = QUICK if args.quick else FULL
    try:
        batch_sizes = [int(b) for b in _list(args.batch_sizes or base["batch_sizes"], "batch-sizes")]
    except ValueError as exc:
        raise ValueError(f"--batch-sizes: {exc}") from exc
    if min(batch_sizes) < 1:
        raise ValueError("--batch-sizes: every batch size must be at least 1")
    repeats = args.repeats if args.repeats is not None else int(base["repeats"])
    if repeats < 1:
        raise ValueError("--repeats must be at least 1")
    groups = _list(args.systems, "systems") if args.systems else None
    sizes = _list(args.sizes or str(base["sizes"]), "sizes")
    berxit = {k: v for k, v in (("seq_len", getattr(args, "seq_len", None)), ("layers", getattr(args, "layers", None)))
              if v is not None}
    if any(v < 1 for v in berxit.values()):
        raise ValueError("--seq-len and --layers must be at least 1")
    if args.quick:
        berxit = {**QUICK_BERXIT, **berxit}
    words = ["acrobat", "bench", *args.models, "--sizes", ",".join(sizes), "--batch-sizes",
             ",".join(map(str, batch_sizes)), "--repeats", str(repeats)]
    words += ["--systems", ",".join(groups)] if groups else []
    words += ["--quick"] if args.quick else []
    words += ["--grad"] if args.grad else []
    words += ["--threads", str(args.threads)] if args.threads else []
    words += ["--data", args.data] if args.data else []
    words += ["--split", args.split] if args.split != "dev" else []
    words += ["--seed", str(args.seed)] if args.seed else []
    words += ["--device", args.device] if args.device != "cpu" else []
    words += [w for k, v in berxit.items() for w in (f"--{k.replace('_', '-')}", str(v))]
    models = args.models or list(MODELS)
    overrides = {"berxit": berxit} if berxit and "berxit" in models else {}
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available to torch here")
    return BenchSettings(models=models, overrides=overrides, scaled=scaled_lines(overrides), sizes=sizes, batch_sizes=batch_sizes,
                         systems=select(groups), repeats=repeats, budget_ms=float(base["budget_ms"]),
                         min_repeats=min(repeats, int(base["min_repeats"])), grad=args.grad, data=args.data,
                         split=args.split, seed=args.seed, device=args.device, command=shlex.join(words))


def scaled_lines(overrides: dict[str, dict[str, int]]) -> list[str]:
    """What runs smaller than the paper's sizes, one line per model (Berxit only has overrides)."""
    b = overrides.get("berxit")
    if not b:
        return []
    parts = []
    if "seq_len" in b:
        parts.append(f"{b['seq_len']}-token sequences (paper: {BERXIT_SEQ_LEN})")
    if "layers" in b:
        paper = ", ".join(f"{v['layers']} {k}" for k, v in BERXIT_SIZES.items())
        parts.append(f"at most {b['layers']} layers (paper: {paper})")
    return ["berxit: " + ", ".join(parts) + " at BERT widths"]


def cmd_train_bench(args: argparse.Namespace) -> int:
    """``acrobat bench --train``: training steps side by side (``acrobat.bench.train_step``)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    batch_sizes = [int(b) for b in _list(args.batch_sizes or "25,64", "batch-sizes")]
    if min(batch_sizes) < 1:
        raise ValueError("--batch-sizes: every batch size must be at least 1")
    size = _list(args.sizes or "small", "sizes")[0]
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 5)
    models = args.models or list(TRAIN_MODELS)
    groups = _list(args.systems, "systems") if args.systems else None
    command = shlex.join(["acrobat", "bench", "--train", *args.models, "--batch-sizes", ",".join(map(str, batch_sizes)),
                          "--sizes", size, "--repeats", str(repeats)] + (["--threads", str(args.threads)]
                                                                         if args.threads else [])
                         + (["--systems", ",".join(groups)] if groups else []))
    cmps = run_train_bench(models, batch_sizes, size, repeats, args.data, args.seed, progress=not args.no_progress,
                           groups=groups)
    print(train_markdown(cmps, command))
    print("wrote " + ", ".join(str(p) for p in write_train_outputs(cmps, command, Path(args.out))))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark (with ``--train`` the training-step benchmark, with ``--serve`` the serving load
    test), print the Markdown report, write it (JSON, Markdown, PNG) to ``--out``."""
    if args.train:
        return cmd_train_bench(args)
    if args.serve:
        from acrobat.serve.load import cmd_load

        return cmd_load(args)
    if args.from_json:
        rep = read_json(Path(args.from_json))
    else:
        if args.threads:
            torch.set_num_threads(args.threads)
        st = settings_from_args(args)
        if st.scaled:
            print("Scaled down from the paper's sizes: " + "; ".join(st.scaled), flush=True)
        if args.processes < 0:
            raise ValueError("--processes must be at least 0")
        rep = run_bench(st, progress=not args.no_progress)
        if args.processes:
            print(f"running the acrobat systems in {args.processes} fresh process(es) ...", file=sys.stderr, flush=True)
            rep.processes = run_in_processes(st.command, args.processes)
    print(markdown(rep))
    paths = write_outputs(rep, Path(args.out))
    print("wrote " + ", ".join(str(p) for p in paths))
    if not any(p.suffix == ".png" for p in paths):
        print("no plots: matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr)
    return 0
