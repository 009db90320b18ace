"""The load test's outputs: the Markdown table with its headline, the JSON, and the latency-vs-rate plot.

- ``serve.md``: the headline (each server's highest rate held at p99 <= SLO, and their ratio), Ray's idle
  CPU, and per step: p50/p99 latency, throughput, queue wait / compute / the rest (HTTP, ingress, Ray's
  routing), the batch-size histogram, CPU per process group, errors and inexact answers;
- ``serve.json``: the same figures, every step;
- ``serve_latency.png``: p50 and p99 latency against the offered rate per server, the SLO marked
  (matplotlib, optional).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from acrobat.serve.load import GROUPS, SERVERS, LoadReport, Step


def headline(rep: LoadReport) -> str:
    """Each server's highest held rate, and acrobat's over the per-instance server's."""
    held = {s: rep.held(s) for s in SERVERS}
    parts = [f"{s}: {'none held' if r is None else f'{r:g} req/s'}" for s, r in held.items()]
    line = f"Highest request rate held with p99 <= {rep.settings.slo_ms:g} ms and every answer exact: " + "; ".join(parts)
    if held["acrobat"] and held["per-instance"]:
        line += f" -> acrobat holds {held['acrobat'] / held['per-instance']:.1f}x the per-instance server's rate"
    cap = {s: rep.capacity(s) for s in SERVERS}
    if all(c is not None and c.throughput for c in cap.values()):
        a, p = cap["acrobat"], cap["per-instance"]
        line += (f". Capacity ({rep.settings.in_flight} requests in flight): per-instance answers "
                 f"{p.throughput:.0f}/s, acrobat {a.throughput:.0f}/s ({a.throughput / p.throughput:.1f}x; mean batch {_mean_batch(a.batch_sizes):.1f}; "
                 f"replica CPU {_per_answer(p)} vs {_per_answer(a)} ms per answer)")
    return line


def _per_answer(s: Step) -> str:
    return f"{s.cpu[f'replica:{s.server}'] / s.throughput * 1e3:.2f}" if s.throughput else "-"


def _histogram(sizes: dict[int, int]) -> str:
    """Batches by size in power-of-two buckets: ``1:12 2-3:40 4-7:80``."""
    buckets: dict[int, int] = {}
    for size, n in sizes.items():
        low = 1 << (size.bit_length() - 1)
        buckets[low] = buckets.get(low, 0) + n
    return " ".join(f"{lo if lo == 1 else f'{lo}-{2 * lo - 1}'}:{n}" for lo, n in sorted(buckets.items()))


def _mean_batch(sizes: dict[int, int]) -> float:
    batches = sum(sizes.values())
    return sum(k * v for k, v in sizes.items()) / batches if batches else 0.0


def _row(s: Step, in_flight: int) -> str:
    cpu = s.cpu
    other = s.mean("latency_ms") - s.mean("queue_ms") - s.mean("compute_ms")
    others = max(0.0, s.machine_cpu - sum(cpu.values()))
    replica = cpu[f"replica:{s.server}"]
    per_request = f"{_per_answer(s)} ({s.run_cpu / s.throughput * 1e3:.2f})" if s.throughput else "-"
    rate = f"capacity ({in_flight} in flight)" if s.closed_loop else f"{s.rate:g}"
    return (f"| {s.server} | {rate} | {s.throughput:.0f} | {s.pct(0.5):.1f} | {s.pct(0.99):.1f} | "
            f"{s.mean('queue_ms'):.1f} / {s.mean('compute_ms'):.1f} / {other:.1f} | {_mean_batch(s.batch_sizes):.1f} | "
            f"{_histogram(s.batch_sizes)} | {replica:.2f} ({s.run_cpu:.2f}) | {per_request} | {cpu['ingress']:.2f} | "
            f"{cpu['ray']:.2f} | {cpu['client']:.2f} | {others:.2f} | {s.errors} | {s.inexact} | {'yes' if s.held else 'no'} |")


def markdown(rep: LoadReport) -> str:
    """The report as Markdown: settings, headline, idle CPU, the per-step table."""
    st = rep.settings
    m = rep.machine
    lines = [
        f"Model {st.model} ({st.size}); data: {rep.data}. Machine: {m['cpu']}, {m['cores']} cores. "
        f"Ray Serve {rep.ingress} ingress on 127.0.0.1; one replica per server, {st.threads} torch thread(s) each.",
        f"Servers: per-instance runs `program(tree, params)` on each request as it comes; acrobat runs the batches "
        f"`@serve.batch` collects (at most {st.max_batch_size}, waiting at most {st.batch_wait_ms:g} ms) through "
        f"`program.run` on the compiled backend (warm-up before ready: {rep.warmup['runs']} runs, "
        f"{rep.warmup['seconds']} s, tuned: {rep.warmup['tuned']}; then {rep.served['runs']} runs while serving, "
        f"with {rep.served['compiles']} kernel compiles).",
        f"Load: Poisson arrivals for {st.step_s:g} s per rate (at most {st.max_requests} requests), the servers "
        f"taking turns at each rate, up to {st.tries} step(s) per server and rate (held if one holds); latency from "
        f"the scheduled arrival to the answer; every answer checked against the per-instance result.",
        "",
        f"**{headline(rep)}**",
        "",
        "Ray idle (no traffic, cores): " + ", ".join(f"{g} {rep.idle_cpu[g]:.3f}" for g in GROUPS)
        + f"; whole machine {rep.idle_machine_cpu:.2f} (other users' work included).",
        "",
        "| server | offered req/s | ok/s | p50 ms | p99 ms | queue / compute / rest ms (mean) | mean batch | "
        "batches by size | CPU replica (runs) | replica CPU ms/request (runs) | CPU ingress | CPU Ray | CPU client | "
        "CPU others | errors | inexact | held |",
        "|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for server in SERVERS:
        lines += [_row(s, st.in_flight) for s in sorted(rep.steps, key=lambda s: (s.closed_loop, s.rate))
                  if s.server == server]
    lines += ["", "CPU columns are cores used over the step (2 = both cores): the server's replica (in brackets: "
              "its runs of the model; the rest is taking and answering requests; also per answered request, ms), "
              "the HTTP "
              "ingress, the rest of Ray (raylet, GCS, Serve controller, agents, the idle server's replica), "
              "the load client, and every other process on the machine. 'rest' is latency not spent in the "
              "replica's queue or batch: HTTP, the ingress, Ray's routing, the client."]
    return "\n".join(lines)


def to_json(rep: LoadReport) -> dict:
    return {"settings": asdict(rep.settings), "data": rep.data, "ingress": rep.ingress, "machine": rep.machine,
            "warmup": rep.warmup, "served": rep.served, "idle_cpu": rep.idle_cpu, "idle_machine_cpu": rep.idle_machine_cpu,
            "held": {s: rep.held(s) for s in SERVERS}, "headline": headline(rep),
            "steps": [s.to_json() for s in rep.steps]}


def plot(data: dict, path: Path) -> Path | None:
    """From a report's JSON (``to_json``): p99 (solid) and p50 (dashed) latency against the offered rate per
    server, log scales, the SLO and each server's highest held rate marked; where a rate ran more than once
    the lines follow its best p99 and the other tries are faint dots. None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for server, color in zip(SERVERS, ("tab:gray", "tab:blue")):
        steps = [s for s in data["steps"] if s["server"] == server and not s["closed_loop"]]
        best: dict[float, dict] = {}
        for s in steps:
            if s["rate"] not in best or s["p99_ms"] < best[s["rate"]]["p99_ms"]:
                best[s["rate"]] = s
        rates = sorted(best)
        ax.plot(rates, [best[r]["p99_ms"] for r in rates], "o-", color=color, label=f"{server} p99")
        ax.plot(rates, [best[r]["p50_ms"] for r in rates], "s--", color=color, alpha=0.6, label=f"{server} p50")
        spare = [s for s in steps if s is not best[s["rate"]]]
        ax.plot([s["rate"] for s in spare], [s["p99_ms"] for s in spare], "o", color=color, alpha=0.25)
        if data["held"][server] is not None:
            ax.axvline(data["held"][server], color=color, linestyle=":", linewidth=1)
    slo = data["settings"]["slo_ms"]
    ax.axhline(slo, color="tab:red", linewidth=1, label=f"SLO p99 {slo:g} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered request rate (req/s, Poisson)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"{data['settings']['model']} on Ray Serve ({data['ingress']} ingress), 2-core CPU: "
                 "dotted = highest rate held", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(rep: LoadReport, out: Path) -> list[Path]:
    """serve.json, serve.md and serve_latency.png (if matplotlib is installed) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    data = to_json(rep)
    (out / "serve.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    (out / "serve.md").write_text(markdown(rep) + "\n", encoding="utf-8")
    paths = [out / "serve.json", out / "serve.md"]
    png = plot(data, out / "serve_latency.png")
    return paths + ([png] if png else [])
