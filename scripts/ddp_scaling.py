"""DDP scaling of ``acrobat train treelstm`` on this machine: 1 process x 1 thread, 2 processes x 1 thread
(``torchrun --nproc_per_node=2 ... --ddp``, gloo) and 1 process x 2 threads, run interleaved (``--rounds``
rounds of the three, so load from other users falls on all alike); prints steps/s (medians), efficiency
against 1 x 1 (speedup / workers), and the DDP run's straggler wait and all-reduce span per step.

    python scripts/ddp_scaling.py [--limit 1280] [--batch-size 64] [--rounds 2] [--out ddp-scaling]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CONFIGS = {"1 process x 1 thread": (1, 1), "2 processes x 1 thread (DDP)": (2, 1), "1 process x 2 threads": (1, 2)}


def run(name: str, procs: int, threads: int, args: argparse.Namespace, out: Path) -> dict:
    recipe = ["train", "treelstm", "--limit", str(args.limit), "--batch-size", str(args.batch_size), "--epochs", "1",
              "--threads", str(threads), "--out", str(out), "--no-progress"]
    if procs > 1:
        cmd = ["torchrun", "--standalone", f"--nproc_per_node={procs}", "-m", "acrobat", *recipe, "--ddp"]
    else:
        cmd = [sys.executable, "-m", "acrobat", *recipe]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = next(out.glob("treelstm-*.json"))
    return json.loads(log.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=1280)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="ddp-scaling")
    args = ap.parse_args()
    logs: dict[str, list[dict]] = {k: [] for k in CONFIGS}
    for r in range(args.rounds):
        for name, (procs, threads) in CONFIGS.items():
            out = Path(args.out) / f"round{r}-{procs}p{threads}t"
            logs[name].append(run(name, procs, threads, args, out))
            print(f"round {r + 1}: {name}: {logs[name][-1]['steps_per_s']:.2f} steps/s", flush=True)
    base = statistics.median(x["steps_per_s"] for x in logs["1 process x 1 thread"])
    print(f"\nglobal batch {args.batch_size} trees, {args.limit} SST train trees (1 epoch), median of {args.rounds} "
          "interleaved rounds\n")
    print("| configuration | steps/s | speedup | efficiency | forward ms | backward ms | optimizer ms | straggler ms | all-reduce ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, (procs, threads) in CONFIGS.items():
        sps = statistics.median(x["steps_per_s"] for x in logs[name])
        ms = {k: statistics.median(x["step_ms"].get(k, 0.0) for x in logs[name])
              for k in ("forward_ms", "backward_ms", "optimizer_ms", "straggler_ms", "allreduce_ms")}
        extra = (f"{ms['straggler_ms']:.1f} | {ms['allreduce_ms']:.1f}" if procs > 1 else "- | -")
        print(f"| {name} | {sps:.2f} | {sps / base:.2f}x | {sps / base / (procs * threads):.0%} | "
              f"{ms['forward_ms']:.1f} | {ms['backward_ms']:.1f} | {ms['optimizer_ms']:.1f} | {extra} |")


if __name__ == "__main__":
    main()
