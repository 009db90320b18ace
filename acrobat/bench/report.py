"""Benchmark reports: JSON (every sample) and Markdown tables (paper Fig. 7/8 and Table 3 as tables).

Every table is preceded by a line naming the machine (CPU model, cores,
torch threads, torch version, GPU). Times are ms per batch: the median of
the repeated runs ± half their range. A speedup ``k x`` next to a system
says how many times faster acrobat (default backend) is than that system
(below 1: acrobat is slower).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from acrobat.bench.compare import NOT_AVAILABLE, NOT_INSTALLED, OK, Comparison, SystemResult
from acrobat.bench.machine import describe_machine
from acrobat.bench.systems import INTERP_BACKEND, all_systems, default_backend
from acrobat.bench.timing import Timing
from acrobat.runtime.stats import RunStats

BASELINE_GROUPS = ("acrobat", "pytorch", "hand", "torchfold", "dynet")
"""Groups in the main comparison table (Fig. 7 / Table 5)."""

OTHER_SYSTEMS = ("pytorch", "hand", "torchfold", "dynet")
"""Groups of the systems acrobat is compared with (the geometric means' baselines)."""


@dataclass
class BenchReport:
    """One ``acrobat bench`` run: settings, machine and every configuration's results."""

    command: str
    date: str
    mode: str  # "inference" or "forward with autograd recording"
    repeats: int
    data: str
    comparisons: list[Comparison] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=describe_machine)
    notes: list[str] = field(default_factory=list)
    scaled: list[str] = field(default_factory=list)  # what runs smaller than the paper's sizes (--quick)
    # --processes N: per configuration (model/size/batch), per acrobat system, its median ms in each fresh process
    processes: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)


@dataclass
class GeoMean:
    """acrobat's (default backend) speedup over one baseline, aggregated over the configurations both ran.

    ``speedups`` maps ``model/size/batch`` to baseline ms / acrobat ms; empty when
    the baseline has no timing anywhere (``reason`` then says why: its
    statuses, or "not selected").
    """

    baseline: str
    reference: str
    speedups: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    @property
    def count(self) -> int:
        return len(self.speedups)

    @property
    def geomean(self) -> float | None:
        if not self.speedups:
            return None
        return math.exp(sum(math.log(v) for v in self.speedups.values()) / len(self.speedups))

    @property
    def lowest(self) -> tuple[str, float] | None:
        return min(self.speedups.items(), key=lambda kv: kv[1]) if self.speedups else None

    @property
    def highest(self) -> tuple[str, float] | None:
        return max(self.speedups.items(), key=lambda kv: kv[1]) if self.speedups else None

    def line(self) -> str:
        """One sentence, e.g. "acrobat (compiled) vs TorchFold: 2.3x geometric mean over 4 configurations
        (min 0.9x treelstm/small/8, max 8.5x birnn/small/64)", or "... not run (not installed)"."""
        head = f"{self.reference} vs {self.baseline}: "
        if not self.speedups:
            if self.reason.startswith(self.reference):  # the baseline ran; acrobat did not
                return head + f"no speedup ({self.reason})"
            return head + f"not run ({self.reason or 'no timing'})"
        (lo_at, lo), (hi_at, hi) = self.lowest, self.highest
        plural = "s" if self.count != 1 else ""
        return (head + f"{self.geomean:.2f}x geometric mean over {self.count} configuration{plural} "
                f"(min {lo:.2f}x {lo_at}, max {hi:.2f}x {hi_at})")

    def as_dict(self) -> dict[str, Any]:
        lo, hi = self.lowest, self.highest
        return {"baseline": self.baseline, "reference": self.reference, "geomean": self.geomean,
                "configs": self.count, "min": lo[1] if lo else None, "min_config": lo[0] if lo else None,
                "max": hi[1] if hi else None, "max_config": hi[0] if hi else None,
                "not_run": None if self.speedups else (self.reason or "not run"), "speedups": self.speedups}


def config_key(c: Comparison) -> str:
    """``model/size/batch`` naming one configuration."""
    return f"{c.model}/{c.size}/{c.batch_size}"


def baseline_names(rep: BenchReport) -> list[str]:
    """Every baseline system (groups ``OTHER_SYSTEMS``), those of the report first, then the ones not selected."""
    seen = [r.system for c in rep.comparisons for r in c.results if r.group in OTHER_SYSTEMS]
    known = [s.name for s in all_systems() if s.group in OTHER_SYSTEMS]
    return list(dict.fromkeys(seen + known))


def geomeans(rep: BenchReport) -> list[GeoMean]:
    """acrobat's (default backend) speedup over each baseline: geometric mean, min, max over the
    configurations where both were timed; a baseline with no timing says why (its statuses)."""
    ref = f"acrobat ({default_backend()})"
    out = []
    for name in baseline_names(rep):
        g = GeoMean(name, ref)
        statuses: list[str] = []
        for c in rep.comparisons:
            base, other, r = c.acrobat_ms(), c.ms(name), c.result(name)
            if base and other:
                g.speedups[config_key(c)] = other / base
            elif r is not None and r.status not in statuses and r.status != OK:
                statuses.append(r.status)
        if not g.speedups:
            if not any(c.result(name) for c in rep.comparisons):
                g.reason = "not selected"
            elif not any(c.acrobat_ms() for c in rep.comparisons):
                g.reason = f"{ref} not timed"
            else:
                g.reason = ", ".join(statuses) or "no configuration with both timed"
        out.append(g)
    return out


# ------------------------------------------------------------------ JSON


def _stats_dict(st: RunStats | None) -> dict[str, Any] | None:
    if st is None:
        return None
    return {"total_ms": st.total_ms, "construct_ms": st.construct_ms, "schedule_ms": st.schedule_ms,
            "gather_ms": st.gather_ms, "kernel_ms": st.kernel_ms, "compile_ms": st.compile_ms,
            "overhead_ms": st.overhead_ms, "dfg_nodes": st.dfg_nodes,
            "kernel_launches": st.kernel_launches, "phases": st.phases}


def _result_dict(r: SystemResult) -> dict[str, Any]:
    t = r.timing
    return {"system": r.system, "group": r.group, "status": r.status, "detail": r.detail,
            "median_ms": t.median if t else None, "spread_ms": t.spread if t else None,
            "quartiles_ms": list(t.quartiles) if t else None,
            "samples_ms": list(t.samples) if t else None, "stats": _stats_dict(r.stats)}


def report_dict(rep: BenchReport) -> dict[str, Any]:
    """The report as JSON-ready data (times in ms)."""
    out = {k: v for k, v in asdict(rep).items() if k != "comparisons"}
    out["machine_line"] = machine_line_of(rep.machine)
    out["geomeans"] = [g.as_dict() for g in geomeans(rep)]
    out["configs"] = [{"model": c.model, "size": c.size, "hidden": c.hidden, "batch_size": c.batch_size,
                       "acrobat_ms": c.acrobat_ms(), "results": [_result_dict(r) for r in c.results]}
                      for c in rep.comparisons]
    return out


def write_json(rep: BenchReport, path: Path) -> None:
    path.write_text(json.dumps(report_dict(rep), indent=2) + "\n", encoding="utf-8")


def _stats_from(d: dict[str, Any] | None) -> RunStats | None:
    if d is None:
        return None
    return RunStats(dfg_nodes=d["dfg_nodes"], kernel_launches=d["kernel_launches"], phases=d["phases"],
                    construct_ms=d["construct_ms"], schedule_ms=d["schedule_ms"], kernel_ms=d["kernel_ms"],
                    gather_ms=d.get("gather_ms", 0.0), compile_ms=d.get("compile_ms", 0.0), total_ms=d["total_ms"])


def read_json(path: Path) -> BenchReport:
    """A report written by ``write_json`` (to redraw tables and plots without running again)."""
    d = json.loads(path.read_text(encoding="utf-8"))
    rep = BenchReport(d["command"], d["date"], d["mode"], d["repeats"], d["data"], machine=d["machine"],
                      notes=d.get("notes", []), scaled=d.get("scaled", []), processes=d.get("processes", {}))
    for c in d["configs"]:
        cmp = Comparison(c["model"], c["size"], c["hidden"], c["batch_size"])
        for r in c["results"]:
            timing = Timing(tuple(r["samples_ms"])) if r["samples_ms"] else None
            cmp.results.append(SystemResult(r["system"], r["group"], r["status"], r["detail"], timing,
                                            _stats_from(r["stats"])))
        rep.comparisons.append(cmp)
    return rep


# ------------------------------------------------------------------ Markdown


def machine_line_of(m: dict[str, Any]) -> str:
    """One readable line for recorded machine facts (as ``acrobat.bench.machine.machine_line``)."""
    gpu = "no GPU" if m.get("gpu", "none") == "none" else f"GPU {m['gpu']}"
    return f"{m['cpu']}, {m['cores']} cores, {m['torch_threads']} torch threads, torch {m['torch']}, {gpu}"


def _ms(r: SystemResult | None) -> str:
    if r is None:
        return "-"
    if r.timing is None:
        return r.status
    t = r.timing
    return f"{t.median:.1f} ± {t.spread:.1f}"


def _systems(comparisons: list[Comparison], groups: tuple[str, ...]) -> list[str]:
    names: list[str] = []
    for c in comparisons:
        for r in c.results:
            if r.group in groups and r.system not in names:
                names.append(r.system)
    return names


def _table(header: list[str], rows: list[list[str]], right_from: int) -> list[str]:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"] + ["| " + " | ".join(r) + " |" for r in rows]


def comparison_table(rep: BenchReport) -> list[str]:
    """acrobat against the baselines: ms per batch, and acrobat's speedup over each system."""
    names = _systems(rep.comparisons, BASELINE_GROUPS)
    if not names:
        return []
    ref = f"acrobat ({default_backend()})"
    rows = []
    for c in rep.comparisons:
        base = c.acrobat_ms()
        row = [c.model, c.size, str(c.batch_size)]
        for n in names:
            r = c.result(n)
            cell = _ms(r)
            if r is not None and r.timing is not None and base and n != ref:
                cell += f" ({r.timing.median / base:.2f}x)"
            row.append(cell)
        rows.append(row)
    return ["### acrobat vs baselines: ms per batch (acrobat's speedup over each)", "",
            f"Machine: {machine_line_of(rep.machine)}", ""] + _table(["model", "size", "batch"] + names, rows, 2)


def geomean_lines(rep: BenchReport) -> list[str]:
    """The geometric-mean speedups as a Markdown section (one bullet per baseline); [] with no baselines."""
    gs = geomeans(rep)
    if not rep.comparisons or not any(r.group in BASELINE_GROUPS for c in rep.comparisons for r in c.results):
        return []
    return ["### acrobat's speedup over each baseline: geometric mean over the configurations both ran", "",
            f"Machine: {machine_line_of(rep.machine)}", ""] + [f"- {g.line()}" for g in gs]


def ablation_table(rep: BenchReport) -> list[str]:
    """The ablation (Fig. 8): ms per batch as optimizations are switched on one at a time."""
    names = _systems(rep.comparisons, ("ablation",))
    if not names:
        return []
    rows = []
    for c in rep.comparisons:
        if not any(c.result(n) for n in names):  # the ablation runs at the largest batch size only
            continue
        off = c.ms(names[0])
        row = [c.model, c.size, str(c.batch_size)]
        for n in names:
            r = c.result(n)
            cell = _ms(r)
            if r is not None and r.timing is not None and off and n != names[0]:
                cell += f" ({off / r.timing.median:.2f}x)"
            row.append(cell)
        rows.append(row)
    labels = [n.removeprefix("ablation: ") for n in names]
    return ["### Ablation: ms per batch, optimizations switched on one at a time (speedup over all off)", "",
            f"Machine: {machine_line_of(rep.machine)}", ""] + _table(["model", "size", "batch"] + labels, rows, 2)


def interp_table(rep: BenchReport) -> list[str]:
    """Interpreted vs generated control flow (Table 3): total ms and DFG construction ms."""
    names = _systems(rep.comparisons, ("interp",))
    if not names:
        return []
    ref = f"acrobat ({INTERP_BACKEND})"
    rows = []
    for c in rep.comparisons:
        it, gen = c.result(names[0]), c.result(ref)
        if it is None:
            continue
        slow = f"{it.timing.median / gen.timing.median:.2f}x" if it.timing and gen and gen.timing else "-"
        ci = f"{it.stats.construct_ms:.1f}" if it.stats else "-"
        cg = f"{gen.stats.construct_ms:.1f}" if gen and gen.stats else "-"
        rows.append([c.model, c.size, str(c.batch_size), _ms(it), _ms(gen), slow, ci, cg])
    return ["### Interpreted vs generated control flow: ms per batch", "",
            f"Machine: {machine_line_of(rep.machine)}", ""] + _table(
        ["model", "size", "batch", "interpreted", "generated (AOT)", "interpreted / generated",
         "DFG construction, interpreted", "DFG construction, generated"], rows, 2)


def overhead_table(rep: BenchReport) -> list[str]:
    """acrobat's time split in one run (the paper's Table 6 rows): construction, scheduling, gathers, kernels."""
    rows = []
    for c in rep.comparisons:
        for r in c.results:
            if r.group != "acrobat" or r.stats is None or not r.stats.total_ms:
                continue
            s = r.stats
            rows.append([c.model, c.size, str(c.batch_size), r.system, f"{s.total_ms:.1f}", f"{s.construct_ms:.1f}",
                         f"{s.schedule_ms:.1f}", f"{s.gather_ms:.1f}", f"{s.kernel_ms:.1f}",
                         f"{100 * s.overhead_ms / s.total_ms:.0f}%",
                         f"{s.dfg_nodes:,}", f"{s.kernel_launches:,}"])
    if not rows:
        return []
    return ["### acrobat's time in one run (ms)", "", f"Machine: {machine_line_of(rep.machine)}", ""] + _table(
        ["model", "size", "batch", "system", "total", "DFG construction", "scheduling", "gathers + copies",
         "kernels", "overhead", "DFG nodes", "launches"], rows, 4)


def spread_table(rep: BenchReport) -> list[str]:
    """acrobat's systems across their timed runs: median, interquartile range, min-max (ms per batch)."""
    rows = []
    for c in rep.comparisons:
        for r in c.results:
            if r.group != "acrobat" or r.timing is None:
                continue
            t = r.timing
            q1, q3 = t.quartiles
            rows.append([c.model, c.size, str(c.batch_size), r.system, f"{t.median:.2f}", f"{q1:.2f}-{q3:.2f}",
                         f"{min(t.samples):.2f}-{max(t.samples):.2f}", str(len(t.samples))])
    if not rows:
        return []
    return ["### acrobat across its timed runs: spread (ms per batch)", "",
            f"Machine: {machine_line_of(rep.machine)}", ""] + _table(
        ["model", "size", "batch", "system", "median", "IQR", "min-max", "runs"], rows, 4)


def processes_table(rep: BenchReport) -> list[str]:
    """``--processes N``: each acrobat system's median ms per batch in each of N fresh processes, and the
    slowest over the fastest of them."""
    if not rep.processes:
        return []
    n = max(len(v) for per in rep.processes.values() for v in per.values())
    rows = []
    for key, per in rep.processes.items():
        model, size, batch = key.split("/")
        for system, medians in per.items():
            got = [m for m in medians if m is not None]
            ratio = f"{max(got) / min(got):.2f}" if got and min(got) > 0 else "-"
            rows.append([model, size, batch, system] + ["-" if m is None else f"{m:.2f}" for m in medians] + [ratio])
    return [f"### acrobat in {n} fresh processes: median ms per batch in each", "",
            "Each process ran the acrobat systems alone (`--systems acrobat`), one after the other, sharing the "
            "cache folder: the first compiles and tunes, the later ones start with the kernels and choices "
            "it kept.", "", f"Machine: {machine_line_of(rep.machine)}", ""] + _table(
        ["model", "size", "batch", "system"] + [f"process {i + 1}" for i in range(n)] + ["slowest / fastest"],
        rows, 4)


def problems(rep: BenchReport) -> list[str]:
    """Systems not timed (wrong outputs, errors, not available/installed) and notes (DyNet's strategies).

    Wrong outputs, errors and notes get a line per configuration; "not
    available"/"not installed" one line per model and system.
    """
    lines: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for c in rep.comparisons:
        for r in c.results:
            if r.status == OK and not r.detail:
                continue
            detail = r.detail if r.detail != r.status else ""
            if detail.startswith(r.status):
                detail = detail[len(r.status):].strip(" ;")
            if r.status in (NOT_AVAILABLE, NOT_INSTALLED):
                if (c.model, r.system, r.status) in seen:
                    continue
                seen.add((c.model, r.system, r.status))
                lines.append(f"- {c.model}, {r.system}: {r.status}" + (f" ({detail})" if detail else ""))
                continue
            what = "timed" if r.status == OK else r.status.upper()
            lines.append(f"- {c.model} {c.size} batch {c.batch_size}, {r.system}: {what}"
                         + (f"; {detail}" if detail else ""))
    return ["Systems not timed, and notes:", ""] + lines if lines else []


def markdown(rep: BenchReport) -> str:
    """The whole report as Markdown: settings, then every table."""
    load = rep.machine.get("load_average")
    head = [f"Command: `{rep.command}`  ", f"Date: {rep.date}  ",
            f"Machine: {machine_line_of(rep.machine)}"
            + (f"; 1-minute load average before the run: {load:.2f}  " if load is not None else "  "),
            f"Mode: {rep.mode}; data: {rep.data}  ",
            f"Times: ms per batch, median ± half the range of up to {rep.repeats} timed runs (fewer for slow "
            "systems, see the JSON's samples) after the output-check run and, unless that took over 1 s, one "
            "more warm-up run; "
            "every system's outputs checked equal to the per-instance PyTorch reference first."]
    if rep.scaled:
        head.insert(4, "Scaled down from the paper's sizes (times not comparable with full-size runs): "
                    + "; ".join(rep.scaled) + "  ")
    parts = [head]
    for section in (geomean_lines(rep), comparison_table(rep), spread_table(rep), processes_table(rep),
                    ablation_table(rep), interp_table(rep), overhead_table(rep), problems(rep), rep.notes):
        if section:
            parts.append(section)
    return "\n\n".join("\n".join(p) for p in parts) + "\n"
