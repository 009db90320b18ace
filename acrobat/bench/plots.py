"""PNG plots of a benchmark report (matplotlib, optional: ``pip install -e '.[bench]'``).

- ``speedup.png`` (like the paper's Fig. 7): per model, acrobat's speedup
  over each baseline for every (size, batch size), log scale, 1x marked;
- ``geomean.png`` (Fig. 7 in one panel): per model, acrobat's speedup over each
  baseline (geometric mean over the model's configurations), log scale, a
  dashed line per baseline at its geometric mean over every configuration;
- ``ablation.png`` (like Fig. 8): per model, ms per batch at the largest
  batch size as the optimizations are switched on one at a time;
- ``interpreted.png`` (Table 3 as bars): interpreted vs generated control flow.
"""

from __future__ import annotations

import math
from pathlib import Path

from acrobat.bench.compare import Comparison
from acrobat.bench.report import BASELINE_GROUPS, BenchReport, geomeans, machine_line_of
from acrobat.bench.systems import default_backend


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _models(rep: BenchReport) -> list[str]:
    return list(dict.fromkeys(c.model for c in rep.comparisons))


def _label(c: Comparison) -> str:
    return f"{c.size}\nb{c.batch_size}"


def _grid(plt, n: int):
    """A figure with ``n`` subplots, at most 4 per row; the unused ones hidden."""
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 0.6, 3.2 * rows + 1.2), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _plain_log(ax) -> None:
    """Log y axis with plain-number tick labels (0.5, 1, 2, ...)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=()))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))


def _legend(fig, axes) -> None:
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=7, frameon=False)


def _finish(plt, fig, rep: BenchReport, title: str, path: Path) -> Path:
    """Title (with the machine), layout, save, close."""
    fig.suptitle(f"{title}\n{machine_line_of(rep.machine)}; {rep.mode}", fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def speedup_plot(rep: BenchReport, path: Path) -> Path | None:
    """acrobat's speedup over each timed baseline, per model (Fig. 7 style); None if nothing to plot."""
    plt = _pyplot()
    ref = f"acrobat ({default_backend()})"
    baselines = [n for n in dict.fromkeys(r.system for c in rep.comparisons for r in c.results
                                          if r.group in BASELINE_GROUPS and r.system != ref)]
    models = _models(rep)
    if plt is None or not baselines or not models:
        return None
    fig, axes = _grid(plt, len(models))
    width = 0.8 / len(baselines)
    for ax, model in zip(axes, models):
        cs = [c for c in rep.comparisons if c.model == model]
        lo, hi = 1.0, 1.0
        for j, name in enumerate(baselines):
            xs, ys = [], []
            for i, c in enumerate(cs):
                base, other = c.acrobat_ms(), c.ms(name)
                if base and other:
                    xs.append(i + (j - (len(baselines) - 1) / 2) * width)
                    ys.append(other / base)
            ax.bar(xs, ys, width, label=name, color=f"C{j + 1}")
            lo, hi = min([lo, *ys]), max([hi, *ys])
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.1f}", (x, y), ha="center", va="bottom", fontsize=6)
        ax.axhline(1.0, color="black", linewidth=0.8)
        _style_axis(ax, cs, model, "acrobat's speedup (x)")
        ax.set_ylim(lo / 1.4, hi * 1.4)
    _legend(fig, axes)
    return _finish(plt, fig, rep, "acrobat's speedup over each system (above 1: acrobat faster)", path)


def _style_axis(ax, cs: list, model: str, ylabel: str) -> None:
    """Log y axis with plain numbers, one tick per configuration, the model as title."""
    _plain_log(ax)
    ax.set_xlim(-0.5, len(cs) - 0.5)
    ax.set_xticks(range(len(cs)), [_label(c) for c in cs], fontsize=8)
    ax.set_title(model, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=8)


def _gmean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_plot(rep: BenchReport, path: Path) -> Path | None:
    """Per model, acrobat's speedup over each baseline (geometric mean over the model's configurations),
    log scale, with each baseline's geometric mean over all configurations as a dashed line; None if
    no baseline was timed."""
    plt = _pyplot()
    gs = [g for g in geomeans(rep) if g.speedups]
    if plt is None or not gs:
        return None
    models = [m for m in _models(rep) if any(k.split("/")[0] == m for g in gs for k in g.speedups)]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(models) + 3), 4.4))
    width = 0.8 / len(gs)
    lo, hi = 1.0, 1.0
    for j, g in enumerate(gs):
        xs, ys = [], []
        for i, model in enumerate(models):
            vals = [v for k, v in g.speedups.items() if k.split("/")[0] == model]
            if vals:
                xs.append(i + (j - (len(gs) - 1) / 2) * width)
                ys.append(_gmean(vals))
        color = f"C{j + 1}"
        ax.bar(xs, ys, width, label=f"{g.baseline} (geomean {g.geomean:.2f}x, {g.count} configs)", color=color)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.1f}", (x, y), ha="center", va="bottom", fontsize=6)
        ax.axhline(g.geomean, color=color, linewidth=1.0, linestyle="--")
        lo, hi = min([lo, *ys, g.geomean]), max([hi, *ys, g.geomean])
    ax.axhline(1.0, color="black", linewidth=0.8)
    _plain_log(ax)
    ax.set_xlim(-0.5, len(models) - 0.5)
    ax.set_xticks(range(len(models)), models, fontsize=8)
    ax.set_ylim(lo / 1.4, hi * 1.4)
    ax.set_ylabel(f"{gs[0].reference}'s speedup (x)", fontsize=8)
    ax.legend(fontsize=7, loc="best")
    return _finish(plt, fig, rep, "acrobat's speedup per model (geometric mean over its configurations; "
                   "dashed: over all configurations)", path)


def ablation_plot(rep: BenchReport, path: Path) -> Path | None:
    """ms per batch of each ablation step, per model and size, at the largest batch size (Fig. 8 style)."""
    plt = _pyplot()
    steps = list(dict.fromkeys(r.system for c in rep.comparisons for r in c.results if r.group == "ablation"))
    models = _models(rep)
    if plt is None or not steps or not models:
        return None
    fig, axes = _grid(plt, len(models))
    width = 0.8 / len(steps)
    for ax, model in zip(axes, models):
        cs = [c for c in rep.comparisons if c.model == model]
        top = max((c.batch_size for c in cs), default=0)
        cs = [c for c in cs if c.batch_size == top]
        for j, name in enumerate(steps):
            xs = [i + (j - (len(steps) - 1) / 2) * width for i, c in enumerate(cs) if c.ms(name)]
            ys = [c.ms(name) for c in cs if c.ms(name)]
            ax.bar(xs, ys, width, label=name.removeprefix("ablation: "), color=f"C{j}")
        _style_axis(ax, cs, model, "ms per batch")
    _legend(fig, axes)
    return _finish(plt, fig, rep, "Ablation: optimizations switched on one at a time", path)


def interp_plot(rep: BenchReport, path: Path) -> Path | None:
    """Interpreted vs generated control flow, ms per batch, per configuration (Table 3 as bars)."""
    plt = _pyplot()
    ref = f"acrobat ({default_backend()})"
    interp = next((r.system for c in rep.comparisons for r in c.results if r.group == "interp"), None)
    cs = [c for c in rep.comparisons if interp and c.ms(interp) and c.ms(ref)]
    if plt is None or not cs:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(cs) + 2), 4.0))
    xs = range(len(cs))
    ax.bar([x - 0.2 for x in xs], [c.ms(interp) for c in cs], 0.4, label="interpreted")
    ax.bar([x + 0.2 for x in xs], [c.ms(ref) for c in cs], 0.4, label="generated (AOT)")
    ax.set_xticks(list(xs), [f"{c.model}\n{c.size} b{c.batch_size}" for c in cs], fontsize=7)
    _plain_log(ax)
    ax.set_ylabel("ms per batch")
    ax.legend(fontsize=7)
    return _finish(plt, fig, rep, "Interpreted vs generated control flow", path)


def write_plots(rep: BenchReport, out: Path) -> list[Path]:
    """Write every plot that has data into ``out``; [] when matplotlib is not installed."""
    made = [speedup_plot(rep, out / "speedup.png"), geomean_plot(rep, out / "geomean.png"), ablation_plot(rep, out / "ablation.png"),
            interp_plot(rep, out / "interpreted.png")]
    return [p for p in made if p is not None]


def have_matplotlib() -> bool:
    return _pyplot() is not None
