"""The ``acrobat`` command: run a model batched, show its generated code, benchmark it.

    acrobat run treelstm --check          # batched run on SST (or synthetic) trees
    acrobat run treelstm --backend compiled --device cuda
    acrobat show birnn                    # the generated skeleton and blocks
    acrobat show treelstm --kernels       # the compiled kernels of each block
    acrobat profile treelstm              # where a batch's time goes, eager vs compiled
    acrobat bench --quick                 # side by side with the baselines; bench-out/*.json, *.md, *.png
    acrobat examples                      # the user-style models of examples/: ran or rejected, launches, times
    acrobat train treelstm                # SST training, all-node labels; dev curve, test accuracy, plot
    acrobat serve treelstm                # HTTP on 127.0.0.1 with request batching (Ray Serve) until Ctrl-C
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import sys
import time
from typing import Any, Sequence

import torch
from tqdm import tqdm

from acrobat.bench import command as bench_command
from acrobat.bench import examples as examples_command
from acrobat.bench.profile import profile_backends, profile_table
from acrobat import train as train_command
from acrobat.cachedir import inductor_dir
from acrobat.bench.compare import ATOL, RTOL, outputs_equal
from acrobat import __version__
from acrobat.benchmarking import benchmark
from acrobat.bench.machine import describe_machine, machine_line
from acrobat.data import load_dataset
from acrobat.errors import AcrobatError
from acrobat.models import MODELS, get_model
from acrobat.program import Options
from acrobat.runtime.backend import AUTO, BACKEND_NAMES, choose_backend
from acrobat.runtime.stats import RunStats
from acrobat.serve import command as serve_command


def _setup(args: argparse.Namespace, limit: int | None):
    spec = get_model(args.model, seq_len=getattr(args, "seq_len", None), layers=getattr(args, "layers", None))
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available to torch here (use --device cpu)")
    ds = load_dataset(args.data, split=args.split, limit=limit)
    hidden = spec.hidden(args.size)
    params = spec.make_params(len(ds.vocab), hidden, args.seed).to(args.device)
    return spec, ds, hidden, params


def _batches(spec: Any, ds: Any, batch_size: int, num_batches: int) -> list[list]:
    """The first ``num_batches`` mini-batches of ``spec``'s instances over ``ds``."""
    instances = spec.instances(ds.trees)
    return [instances[i:i + batch_size] for i in range(0, len(instances), batch_size)][:num_batches]


def _options(disable: str) -> Options:
    """``Options`` with the comma-separated optimizations in ``disable`` switched off.

    Raises:
        ValueError: an unknown optimization name (the message lists them).
    """
    names = [n.strip().replace("-", "_") for n in disable.split(",") if n.strip()]
    known = [f.name for f in dataclasses.fields(Options)]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown optimization(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return Options(**{n: False for n in names})


def _backend_line(name: str) -> str:
    """``name``, and for ``auto`` what it picks in the command's inference-only runs."""
    return name if name != AUTO else f"{choose_backend(name, ())} (auto: inference, no autograd)"


def cmd_run(args: argparse.Namespace) -> int:
    """Run MODEL batched over the data, print a short summary (per-batch figures and the full tables with
    --verbose) and, with --check or --compare, the line of ``acrobat.benchmark`` against the per-instance
    reference."""
    spec, ds, hidden, params = _setup(args, args.batch_size * args.num_batches)
    options = _options(args.disable)
    batches = _batches(spec, ds, args.batch_size, args.num_batches)
    instances = [x for b in batches for x in b]
    print(f"model    {spec.name}: {spec.description}")
    if spec.data == "generated":
        print(f"data     {len(instances)} generated instances (seeded; {spec.name} does not read SST)")
    else:
        print(f"data     {ds.description}")
    print(f"size     {args.size} (hidden {hidden}), batch size {args.batch_size}, {len(batches)} batches, "
          f"backend {_backend_line(args.backend)}, device {args.device}, seed {args.seed}")
    off = [f.name for f in dataclasses.fields(Options) if not getattr(options, f.name)]
    print(f"options  {'all optimizations on' if not off else 'off: ' + ', '.join(off)}")
    print(f"machine  {machine_line()}")
    t0 = time.perf_counter()
    spec.program.compile(1, options)
    print(f"program compiled (frontend, analyses, skeleton) in {(time.perf_counter() - t0) * 1e3:.0f} ms")
    total, measured = RunStats(), RunStats()
    per_batch: list[dict[str, Any]] = []
    mismatches = 0
    tuned = False  # the backend had made every run-time choice before the batch (so the batch measures)
    with torch.inference_mode():
        for i, batch in enumerate(tqdm(batches, desc=f"{spec.name} batches", unit="batch", file=sys.stderr)):
            st = RunStats()
            out = spec.program.run(batch, params, backend=args.backend, options=options, stats=st)
            total.add(st)
            warmup = not tuned or st.compiles > 0
            if not warmup:
                measured.add(st)
            tuned = spec.program.backend(st.backend, 1, options)[0].tuned()
            ok = None
            if args.check:
                ok = outputs_equal(out, [spec.reference(x, params) for x in batch])
                mismatches += not ok
            per_batch.append({"ms": st.total_ms, "overhead_ms": st.overhead_ms, "dfg_nodes": st.dfg_nodes,
                              "kernel_launches": st.kernel_launches, "warmup": warmup, "check": ok})
            if args.verbose:
                tqdm.write(_batch_line(i, len(batches), st, warmup, ok), file=sys.stdout)
    timed = [b for b in per_batch if not b["warmup"]]
    median_ms = statistics.median(b["ms"] for b in timed) if timed else None
    overhead_ms = statistics.median(b["overhead_ms"] for b in timed) if timed else None
    n_warm = len(per_batch) - len(timed)
    print()
    if median_ms is not None:
        print(f"median batch {median_ms:.1f} ms (overhead {overhead_ms:.1f} ms) over {len(timed)} batch(es) after "
              f"{n_warm} warm-up batch(es) that compiled kernels or tuned them")
    else:
        after = ("the speed line below is timed after a warm-up" if args.check or args.compare
                 else "run more --num-batches, or --compare to warm up and time")
        print(f"no median: all {n_warm} batch(es) compiled kernels or tuned them (warm-up); {after}")
    print(f"batching {measured.summary() if measured.runs else total.summary()}")
    ran = total.backend.split("+")
    be = spec.program.backend(ran[-1], 1, options)[0]
    for name, reason in _fallbacks(be):
        print(f"fallback block {name} runs eagerly: TorchInductor could not compile it ({reason})")
    if total.compiles:
        print(f"compiles {total.compiles} kernel(s) compiled or loaded in {total.compile_ms / 1e3:.1f} s "
              f"(cache: {inductor_dir()})")
    if args.verbose:
        print("\nbatching report (all batches):")
        print(total.report())
        backend_report = be.report()
        if backend_report:
            print(f"\n{total.backend} backend:")
            print(backend_report)
    check = "off" if not args.check else ("passed" if mismatches == 0 else "failed")
    if args.check:
        print(f"check    every batch vs the per-instance PyTorch reference (rtol={RTOL}, atol={ATOL}): {check}"
              + (f" ({mismatches} of {len(batches)} batches differ)" if mismatches else ""))
    speed = None
    if args.check or args.compare:
        speed = benchmark(spec.program, batches[0], params, backend=args.backend, options=options,
                          reference=spec.reference, rtol=RTOL, atol=ATOL)
        print(f"speed    {speed}")
    if args.json:
        report = {
            "model": spec.name, "backend": total.backend, "size": args.size, "hidden": hidden,
            "batch_size": args.batch_size, "num_batches": len(batches), "data": ds.description,
            "median_batch_ms": median_ms, "warmup_batches": n_warm,
            "overhead_ms": overhead_ms,
            "dfg_nodes": round(statistics.mean(b["dfg_nodes"] for b in per_batch)),
            "kernel_launches": round(statistics.mean(b["kernel_launches"] for b in per_batch)),
            "phases": total.phases,
            "check": check, "rtol": RTOL, "atol": ATOL, "batches": per_batch, "disabled": off,
            "blocks": [{"block": b.name, "launches": b.launches, "nodes": b.nodes, "mean_batch": b.mean_batch,
                        "hoisted": b.hoisted} for b in total.blocks.values()],
            "machine": describe_machine(),
        }
        if speed is not None:
            report["compare"] = {"batched_ms": speed.batched_median_ms, "per_instance_ms": speed.per_instance_median_ms,
                                 "speedup": speed.speedup, "equal": speed.equal, "warmup_batches": speed.warmup_batches}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
        print(f"wrote {args.json}")
    return 1 if check == "failed" or (speed is not None and not speed.equal) else 0


def _batch_line(i: int, n: int, st: RunStats, warmup: bool, ok: bool | None) -> str:
    """One batch's figures (``--verbose``)."""
    return (f"batch {i + 1:>3}/{n}: {st.total_ms:7.1f} ms  (overhead {st.overhead_ms:5.1f} ms)  {st.dfg_nodes:>6} "
            f"DFG nodes  {st.kernel_launches:>4} launches"
            + ("" if ok is None else f"  check {'ok' if ok else 'MISMATCH'}")
            + (f"  ({st.compiles} kernel compiles, {st.compile_ms / 1e3:.1f} s)" if st.compiles else "")
            + ("  warm-up" if warmup else ""))


def _fallbacks(be: Any) -> list[tuple[str, str]]:
    """(block, reason) of each block the backend runs eagerly because TorchInductor could not compile it."""
    return [(k.block.name, k.eager_reason) for k in getattr(be, "kernels", []) if getattr(k, "eager", None)]


def cmd_show(args: argparse.Namespace) -> int:
    """Print MODEL's generated code: skeleton, prologue and blocks; with --kernels the compiled kernels."""
    if not args.kernels:
        print(get_model(args.model).program.source(1))
        return 0
    from acrobat.runtime.compiled import kernel_listing

    spec, ds, _, params = _setup(args, args.batch_size)
    batch = _batches(spec, ds, args.batch_size, 1)[0]
    print(f"# compiled kernels of {spec.name}, from one batch of {len(batch)} on {args.device} "
          f"(TorchInductor; cache {inductor_dir()})", flush=True)
    with torch.inference_mode():
        spec.program.run(batch, params, backend="compiled")
    print(kernel_listing(spec.program.backend("compiled")[0]))  # type: ignore[arg-type]
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """Print where a batch's time goes (the paper's Table 6 rows) for each backend."""
    spec, ds, hidden, params = _setup(args, args.batch_size * args.num_batches)
    batches = _batches(spec, ds, args.batch_size, args.num_batches)
    warmup = [batches[i % len(batches)] for i in range(args.warmup)]  # the same batches again: compiles, probes
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    for b in backends:
        if b not in BACKEND_NAMES:
            raise ValueError(f"unknown backend {b!r}; available: {', '.join(BACKEND_NAMES)}")
    print(f"model    {spec.name} ({args.size}, hidden {hidden}), batch size {args.batch_size}, "
          f"{len(batches)} measured batches after {args.warmup} warm-up, device {args.device}")
    print(f"data     {ds.description if spec.data == 'sst' else 'generated instances (seeded)'}")
    print(f"machine  {machine_line()}\n", flush=True)
    profiles = profile_backends(spec, params, warmup, batches, backends,
                                sync=args.device == "cuda")
    print(profile_table(profiles))
    for p in profiles:
        name = p.backend if p.backend == p.total.backend else f"{p.backend} ({p.total.backend})"
        print(f"\n{name} backend, measured batches:\n{p.total.report()}")
        if p.report:
            print(p.report)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``acrobat`` command."""
    p = argparse.ArgumentParser(prog="acrobat", description="Auto-batching of dynamic deep-learning models "
                                "(ACRoBat, MLSys 2024): run, inspect and benchmark the bundled models.")
    p.add_argument("--version", action="version", version=f"acrobat {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--data", help="SST tree file or folder with {train,dev}.txt (default: ../shared/data/sst "
                        "if present, else synthetic SST-like trees)")
        sp.add_argument("--split", default="dev", help="split to read from a data folder (default: dev)")
        sp.add_argument("--size", default="small", choices=["small", "large"], help="model size (hidden 256/512)")
        sp.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
        sp.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
        sp.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="where parameters, arena and kernels live (default cpu)")

    run = sub.add_parser("run", help="run a model batched and print a summary (--verbose: per-batch figures and "
                                     "tables; --compare/--check: timed against the per-instance reference)")
    models_help = "; ".join(f"{m.name}: {m.description}" for m in MODELS.values())
    run.add_argument("model", choices=list(MODELS), help=models_help)
    common(run)
    run.add_argument("--batch-size", type=int, default=64, help="instances per batch (default 64)")
    run.add_argument("--num-batches", type=int, default=8, help="number of batches (default 8)")
    run.add_argument("--backend", default="auto", choices=list(BACKEND_NAMES),
                     help="kernel backend: auto (compiled: runs are inference only here), eager "
                          "(torch.func.vmap, op by op), compiled (one TorchInductor kernel per block, gather "
                          "fusion chosen per block by profiling; compiled on first use or loaded from the disk "
                          "cache), "
                          "compiled-explicit / compiled-fused (one gather mode forced); default auto")
    run.add_argument("--check", action="store_true", help="compare every result with the per-instance "
                     "PyTorch reference, then time as --compare does; exit 1 on a mismatch")
    run.add_argument("--compare", action="store_true", help="after the batches, acrobat.benchmark on the first "
                     "batch: warm up until compiling and tuning are done, time batched vs the per-instance "
                     "reference by turns, print one line (medians, speedup, whether the results are equal)")
    run.add_argument("--verbose", "-v", action="store_true", help="per-batch figures and the full tables (every "
                     "block's launches, gathers, threads per launch)")
    run.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    run.add_argument("--disable", default="", metavar="OPT[,OPT]",
                     help="switch optimizations off, e.g. ghosts,fibers (of: "
                          f"{', '.join(f.name for f in dataclasses.fields(Options))})")
    run.add_argument("--seq-len", type=int, help="berxit only: tokens per sequence (default 128)")
    run.add_argument("--layers", type=int, help="berxit only: maximum layers (default 12 small, 18 large)")
    run.set_defaults(func=cmd_run)

    show = sub.add_parser("show", help="print a model's generated code (or, with --kernels, its compiled kernels)")
    show.add_argument("model", choices=list(MODELS), help=models_help)
    common(show)
    show.add_argument("--kernels", action="store_true",
                      help="run one batch with the compiled backend and print, per block, the generated fused "
                           "kernels and library calls (Inductor's schedule)")
    show.add_argument("--batch-size", type=int, default=64, help="with --kernels: instances in the batch (default 64)")
    show.set_defaults(func=cmd_show, seq_len=None, layers=None)

    prof = sub.add_parser("profile", help="where a batch's time goes (DFG construction, scheduling, gathers, "
                                          "kernels, launches), per backend")
    prof.add_argument("model", choices=list(MODELS), help=models_help)
    common(prof)
    prof.add_argument("--batch-size", type=int, default=64, help="instances per batch (default 64)")
    prof.add_argument("--num-batches", type=int, default=10, help="measured batches (default 10)")
    prof.add_argument("--warmup", type=int, default=15, help="warm-up batches before measuring, for compiles and "
                      "the per-block gather choice (default 15: enough for blocks launched once per batch)")
    prof.add_argument("--backend", default="eager,compiled", metavar="B[,B]",
                      help=f"backends to compare (of: {', '.join(BACKEND_NAMES)}; auto is compiled here, as "
                           "profiling runs inference only; default eager,compiled: the fast path beside eager)")
    prof.set_defaults(func=cmd_profile, seq_len=None, layers=None)

    bench_command.add_parser(sub)
    examples_command.add_parser(sub)
    train_command.add_parser(sub)
    serve_command.add_parser(sub)
    return p


class _TqdmHandler(logging.Handler):
    """Log records printed above any progress bar (compile progress of the compiled backend)."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm.write(self.format(record), file=sys.stderr)


def _log_to_terminal() -> None:
    log = logging.getLogger("acrobat")
    if not log.handlers:
        handler = _TqdmHandler()
        handler.setFormatter(logging.Formatter("[acrobat] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acrobat`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    _log_to_terminal()
    if args.command == "run":  # the tuner's choices as they are made (acrobat.compile): --verbose's
        logging.getLogger("acrobat.compile").setLevel(logging.INFO if args.verbose else logging.WARNING)
    if getattr(args, "batch_size", 1) < 1:
        print("error: --batch-size must be at least 1", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (AcrobatError, ValueError, FileNotFoundError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
