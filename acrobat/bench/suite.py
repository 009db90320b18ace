"""The whole benchmark: every (model, size, batch size) configuration, every selected system.

``run_bench`` loads the data once, makes each model's weights once per size
(seeded, so every system sees the same weights), takes the first
``batch_size`` instances, and runs ``compare`` with a progress bar on
stderr naming the model, configuration and system running. The ablation
runs at the largest batch size only (as the paper's Fig. 8, batch 64).
``write_outputs`` writes ``bench.json``, ``bench.md`` and the PNG plots.
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from acrobat.bench.base import Setup
from acrobat.bench.compare import compare
from acrobat.bench.machine import load_average
from acrobat.bench.plots import have_matplotlib, write_plots
from acrobat.bench.report import BenchReport, markdown, write_json
from acrobat.bench.systems import System
from acrobat.bench.timing import BUDGET_MS, MIN_REPEATS, TimingPolicy
from acrobat.data import load_dataset
from acrobat.models import MODELS, get_model


@dataclass
class BenchSettings:
    """What to run. Times in ms; sizes are ``ModelSpec.sizes`` names."""

    models: list[str] = field(default_factory=lambda: list(MODELS))
    overrides: dict[str, dict[str, int]] = field(default_factory=dict)  # per model: get_model's overrides
    scaled: list[str] = field(default_factory=list)  # what the overrides scale down, for the report
    sizes: list[str] = field(default_factory=lambda: ["small", "large"])
    batch_sizes: list[int] = field(default_factory=lambda: [8, 64])
    systems: list[System] = field(default_factory=list)
    repeats: int = 10
    budget_ms: float = BUDGET_MS  # timed runs of one system stop past this (after min_repeats)
    min_repeats: int = MIN_REPEATS
    grad: bool = False
    data: str | None = None
    split: str = "dev"
    seed: int = 0
    device: str = "cpu"
    command: str = "acrobat bench"


def run_bench(st: BenchSettings, progress: bool = True) -> BenchReport:
    """Run every configuration; configurations a model has no size for are skipped with a note."""
    ds = load_dataset(st.data, split=st.split, limit=max(st.batch_sizes))
    mode = "forward with autograd recording" if st.grad else "inference (torch.inference_mode)"
    rep = BenchReport(st.command, datetime.date.today().isoformat(), mode, st.repeats,
                      f"{ds.description}; the first N instances for batch size N", scaled=list(st.scaled))
    rep.machine["load_average"] = load_average()
    configs = []
    for name in st.models:
        spec = get_model(name, **st.overrides.get(name, {}))
        for size in st.sizes:
            if size not in dict(spec.sizes):
                rep.notes.append(f"- {name}: no size {size!r} (has {', '.join(dict(spec.sizes))}); skipped")
                continue
            for bs in st.batch_sizes:
                configs.append((spec, size, bs))
    top = max(st.batch_sizes)
    policy = TimingPolicy(st.repeats, st.budget_ms, st.min_repeats, sync=st.device == "cuda")

    def systems_for(bs: int) -> list[System]:
        """The ablation (Fig. 8) runs at the largest batch size only, as in the paper; training backends run with
        ``--grad`` only."""
        return [s for s in st.systems if (s.group != "ablation" or bs == top) and (st.grad or not s.grad_only)]

    bar = tqdm(total=sum(len(systems_for(bs)) for _, _, bs in configs), unit="system", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    params_cache: dict[tuple[str, str], torch.nn.Module] = {}
    try:
        for spec, size, bs in configs:
            key = (spec.name, size)
            if key not in params_cache:
                params_cache.clear()
                params_cache[key] = spec.make_params(len(ds.vocab), spec.hidden(size), st.seed).to(st.device)
            instances = spec.instances(ds.trees)[:bs]
            setup = Setup(spec, instances, params_cache[key], size, st.grad, st.repeats, st.device)

            def on_system(system: System, where: str = f"{spec.name} {size} b{bs}") -> None:
                bar.set_description(f"{where}: {system.name}")
                bar.refresh()

            rep.comparisons.append(compare(setup, systems_for(bs), policy, on_system, lambda _: bar.update(1)))
    finally:
        bar.close()
    return rep


def write_outputs(rep: BenchReport, out: Path) -> list[Path]:
    """Write ``bench.json``, ``bench.md`` and the plots into ``out`` (created); the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(rep, out / "bench.json")
    (out / "bench.md").write_text(markdown(rep), encoding="utf-8")
    paths = [out / "bench.json", out / "bench.md"]
    if have_matplotlib():
        paths += write_plots(rep, out)
    return paths
