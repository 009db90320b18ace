"""The benchmark harness on tiny configurations: output checks, statuses, ablation steps, the
interpreter, TorchFold versions, reports (JSON, Markdown, PNG) and the ``bench`` command.

Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest
import torch

from acrobat.bench import command
from acrobat.bench.ablation import ablation_steps, switches
from acrobat.bench.base import FnRunner, Setup, Unavailable
from acrobat.bench.compare import ERROR, NOT_AVAILABLE, NOT_INSTALLED, OK, WRONG, compare, outputs_equal, run_system
from acrobat.bench.interpreter import InterpretedProgram
from acrobat.bench.report import BenchReport, markdown, read_json, report_dict
from acrobat.bench.suite import write_outputs
from acrobat.bench.systems import GROUPS, System, select
from acrobat.bench.timing import Timing, TimingPolicy

ONE = TimingPolicy(repeats=1, min_repeats=1)
from acrobat.cli import main
from acrobat.models import MODELS, get_model
from acrobat.program import Options
from acrobat.runtime.stats import RunStats

HARNESS_MODELS = [m for m in ("treelstm", "birnn") if m in MODELS] or list(MODELS)[:2]
"""Models the harness tests run every system on (the ones with hand-batched/TorchFold/DyNet versions)."""


@pytest.fixture(scope="module")
def setups(dataset):
    """Per registered model: 3 instances, the smallest registered size (Berxit scaled down as in test_models)."""
    out = {}
    for name in MODELS:
        spec = get_model("berxit", seq_len=8, layers=2) if name == "berxit" else MODELS[name]
        size, hidden = min(spec.sizes, key=lambda kv: kv[1])
        params = spec.make_params(len(dataset.vocab), hidden, 0)
        out[name] = Setup(spec, spec.instances(dataset.trees[:3])[:3], params, size, repeats=1)
    return out


def test_outputs_equal_nested_and_tolerant():
    a = [(torch.ones(3), torch.zeros(2)), (torch.ones(3), torch.zeros(2))]
    b = [[torch.ones(3) + 1e-7, torch.zeros(2)], (torch.ones(3), torch.zeros(2))]
    assert outputs_equal(a, b)
    assert not outputs_equal(a, [(torch.ones(3) * 1.01, torch.zeros(2))] * 2)
    assert not outputs_equal(a, a[:1])
    assert not outputs_equal([torch.ones(3)], [torch.ones(4)])


class _Counting(FnRunner):
    def __init__(self, fn):
        super().__init__(fn)
        self.timed = 0

    def time(self, policy: TimingPolicy, warmup: int) -> Timing:
        self.timed += 1
        return Timing((1.0,) * policy.repeats)


def _scaled(x):
    if isinstance(x, (list, tuple)):
        return type(x)(_scaled(i) for i in x)
    return x * 2 + 1


def test_wrong_outputs_are_reported_not_timed(setups):
    s = setups[HARNESS_MODELS[0]]
    expected = [s.spec.reference(x, s.params) for x in s.instances]
    runner = _Counting(lambda: _scaled(expected))
    res = run_system(System("broken", "pytorch", lambda _: runner), s, expected, TimingPolicy(repeats=2))
    assert res.status == WRONG and res.timing is None and runner.timed == 0
    good = _Counting(lambda: expected)
    res = run_system(System("fine", "pytorch", lambda _: good), s, expected, TimingPolicy(repeats=2))
    assert res.status == OK and good.timed == 1 and res.timing.samples == (1.0, 1.0)


def test_unavailable_and_failing_systems(setups):
    s = setups[HARNESS_MODELS[-1]]

    def missing(_):
        raise Unavailable("not installed (pip install x)")

    def no_version(_):
        raise Unavailable("no X version of birnn")

    def crash(_):
        return FnRunner(lambda: 1 / 0)

    statuses = [run_system(System(n, "pytorch", f), s, [], ONE) for n, f in
                [("a", missing), ("b", no_version), ("c", crash)]]
    assert [r.status for r in statuses] == [NOT_INSTALLED, NOT_AVAILABLE, ERROR]
    assert "ZeroDivisionError" in statuses[2].detail
    assert all(r.timing is None for r in statuses)


def test_ablation_steps_follow_options_fields():
    names = switches()
    assert names[:4] == ["coarsening", "hoisting", "concurrency", "phases"]
    assert names == [f.name for f in dataclasses.fields(Options) if f.type in (bool, "bool")
                     and f.name not in ("static", "strict")]  # the tier's switches are not optimizations
    steps = ablation_steps()
    assert len(steps) == len(names) + 1
    assert steps[0][0] == "all off" and not any(getattr(steps[0][1], n) for n in names)
    assert all(getattr(steps[-1][1], n) for n in names)
    for k, (label, opts) in enumerate(steps[1:], start=1):  # cumulative, in order
        assert label == f"+{names[k - 1]}"
        assert [getattr(opts, n) for n in names] == [i < k for i in range(len(names))]


def test_select_systems():
    assert {s.group for s in select(None)} == set(GROUPS)
    assert [s.name for s in select(["pytorch"])] == ["PyTorch per instance"]
    with pytest.raises(ValueError, match="unknown system"):
        select(["nope"])


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("opts", [Options(), Options(**{n: False for n in switches()})], ids=["all-on", "all-off"])
def test_interpreter_builds_the_same_dfg(setups, model, opts):
    s = setups[model]
    ip = InterpretedProgram(s.spec.program, opts)
    with torch.inference_mode():
        st_i, st_g = RunStats(), RunStats()
        out_i = ip.run(s.instances, s.params, stats=st_i)
        out_g = s.spec.program.run(s.instances, s.params, options=opts, stats=st_g)
        assert outputs_equal(out_i, out_g)
        assert outputs_equal(out_i, [s.spec.reference(x, s.params) for x in s.instances])
    assert (st_i.dfg_nodes, st_i.kernel_launches, st_i.phases) == (st_g.dfg_nodes, st_g.kernel_launches, st_g.phases)
    for bid, b in st_g.blocks.items():
        assert (st_i.blocks[bid].launches, st_i.blocks[bid].nodes) == (b.launches, b.nodes)


def test_torchfold_versions_match_references(setups):
    pytest.importorskip("torchfold")
    from acrobat.bench.torchfold_models import TORCHFOLD_MODELS

    for name, fn in TORCHFOLD_MODELS.items():
        if name in setups:
            s = setups[name]
            with torch.inference_mode():
                assert outputs_equal(fn(s.instances, s.params), [s.spec.reference(x, s.params) for x in s.instances])


def test_dynet_not_installed_or_correct(setups, monkeypatch):
    from acrobat.bench import dynet_models
    from acrobat.bench.dynet_models import DynetRunner, dynet_installed

    s = setups["birnn"]
    if not dynet_installed():
        with pytest.raises(Unavailable, match="not installed"):
            DynetRunner(s)
        return
    s = dataclasses.replace(s, instances=s.instances[:2])
    monkeypatch.setattr(dynet_models, "STRATEGIES", {1: "agenda-based"})  # one subprocess: fast
    res = run_system(System("DyNet", "dynet", DynetRunner), s,
                     [s.spec.reference(x, s.params) for x in s.instances], ONE)
    assert res.status == OK, res.detail
    assert "best:" in res.detail


@pytest.fixture(scope="module")
def tiny_report(setups):
    systems = select(["acrobat", "pytorch", "hand", "torchfold", "interp"])
    ablation = select(["ablation"])
    systems += [ablation[0], ablation[-1]]  # all off, all on: enough for the table logic
    rep = BenchReport("acrobat bench --test", "2026-01-01", "inference", 1, "test data")
    for name in HARNESS_MODELS:
        rep.comparisons.append(compare(setups[name], systems, ONE))
    rep.comparisons[0].results.append(dataclasses.replace(rep.comparisons[0].results[1], system="fake wrong",
                                                          group="pytorch", status=WRONG, timing=None))
    return rep


def test_compare_checks_and_times_every_system(tiny_report):
    for c in tiny_report.comparisons:
        by_group = {r.group: r for r in c.results}
        assert by_group["acrobat"].status == OK and by_group["acrobat"].stats.dfg_nodes > 0
        assert by_group["pytorch"].status in (OK, WRONG)
        assert by_group["interp"].status == OK and by_group["interp"].stats is not None
        for r in c.results:
            assert (r.timing is not None) == (r.status == OK), (r.system, r.status, r.detail)
            assert r.status in (OK, WRONG, NOT_INSTALLED, NOT_AVAILABLE), (r.system, r.detail)


def test_markdown_names_the_machine_above_every_table(tiny_report):
    text = markdown(tiny_report)
    lines = text.splitlines()
    table_starts = [i for i, line in enumerate(lines) if line.startswith("| model")]
    assert len(table_starts) == 5  # baselines, acrobat's spread, ablation, interpreted, acrobat's time
    for i in table_starts:
        assert lines[i - 2].startswith("Machine: ") and "torch" in lines[i - 2]
    assert "acrobat bench --test" in text and "fake wrong: WRONG" in text
    assert "x)" in text  # speedups


def test_json_and_files(tiny_report, tmp_path):
    data = report_dict(tiny_report)
    json.dumps(data)  # serializable
    assert {"command", "date", "machine", "machine_line", "configs", "repeats"} <= set(data)
    cfg = data["configs"][0]
    assert {"model", "size", "hidden", "batch_size", "acrobat_ms", "results"} <= set(cfg)
    wrong = next(r for r in cfg["results"] if r["system"] == "fake wrong")
    assert wrong["status"] == WRONG and wrong["median_ms"] is None
    ok = next(r for r in cfg["results"] if r["group"] == "acrobat")
    assert len(ok["samples_ms"]) == 1 and ok["stats"]["dfg_nodes"] > 0
    paths = write_outputs(tiny_report, tmp_path / "out")
    names = {p.name for p in paths}
    assert {"bench.json", "bench.md"} <= names
    assert json.loads((tmp_path / "out" / "bench.json").read_text())["command"] == "acrobat bench --test"
    assert markdown(read_json(tmp_path / "out" / "bench.json")) == markdown(tiny_report)  # round trip
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert {"speedup.png", "ablation.png", "interpreted.png"} <= names
    assert (tmp_path / "out" / "speedup.png").read_bytes()[:4] == b"\x89PNG"


def _args(**kw) -> argparse.Namespace:
    base = dict(models=[], sizes=None, batch_sizes=None, systems=None, repeats=None, quick=False, grad=False,
                data=None, split="dev", seed=0, threads=0, device="cpu")
    base.update(kw)
    return argparse.Namespace(**base)


def test_settings_quick_and_full():
    q = command.settings_from_args(_args(quick=True))
    assert (q.sizes, q.batch_sizes, q.repeats, q.min_repeats) == (["small"], [8, 64], 3, 2)
    assert q.models == list(MODELS) and "--batch-sizes 8,64" in q.command
    f = command.settings_from_args(_args(sizes="large", batch_sizes="2", repeats=4, systems="acrobat,pytorch"))
    assert (f.sizes, f.batch_sizes, f.repeats) == (["large"], [2], 4)
    assert {s.group for s in f.systems} == {"acrobat", "pytorch"}
    for bad in (dict(batch_sizes="0"), dict(batch_sizes="x"), dict(systems="nope"), dict(repeats=0)):
        with pytest.raises(ValueError):
            command.settings_from_args(_args(**bad))


def test_bench_command_bad_arguments(tmp_path, capsys):
    assert main(["bench", "--batch-sizes", "0", "--out", str(tmp_path)]) == 2
    assert main(["bench", "--systems", "nope", "--out", str(tmp_path)]) == 2
    assert "nope" in capsys.readouterr().err


def test_time_call_stops_at_the_budget_after_min_repeats():
    from acrobat.bench.timing import time_call

    calls = []
    t = time_call(lambda: calls.append(1), repeats=10, warmup=1, budget_ms=-1.0, min_repeats=2)
    assert len(t.samples) == 2 and len(calls) == 3
    assert len(time_call(lambda: None, repeats=4, warmup=0, budget_ms=1e9).samples) == 4


def test_systems_are_timed_by_turns_and_a_failing_one_does_not_stop_the_others():
    from acrobat.bench.timing import TimingPolicy, time_by_turns

    order: list[str] = []

    def system(name: str):
        return lambda: order.append(name)

    def broken():
        order.append("x")
        if order.count("x") == 3:  # its second timed run fails
            raise RuntimeError("boom")

    out = time_by_turns([system("a"), system("b"), broken], TimingPolicy(repeats=4), [1, 0, 1])
    assert order[:2] == ["a", "x"]  # warm-ups first
    timed = order[2:]
    # every round runs each system still timed once, the round's first system rotating
    assert timed[:3] == ["a", "b", "x"] and timed[3:6] == ["b", "x", "a"]
    assert len(out[0].samples) == len(out[1].samples) == 4
    assert isinstance(out[2], RuntimeError) and timed.count("x") == 2


def test_compare_times_in_process_systems_by_turns(setups, monkeypatch):
    """A slow-down between two systems timed one after the other made their ratio wrong; by turns, it is
    shared: on a clock that runs 4x slower after the first 10 calls, two equal systems get equal medians
    (one after the other, the second would be timed entirely on the slow machine)."""
    from acrobat.bench import compare as cmp_mod
    from acrobat.bench import timing as timing_mod
    from acrobat.bench.base import FnRunner
    from acrobat.bench.systems import System

    s = setups[HARNESS_MODELS[0]]
    expected = [s.spec.reference(x, s.params) for x in s.instances]
    clock, calls = [0.0], [0]
    monkeypatch.setattr(timing_mod.time, "perf_counter", lambda: clock[0])

    def slows_down():  # 4 calls check and warm up the two systems, then 12 are timed
        calls[0] += 1
        clock[0] += 0.002 if calls[0] > 10 else 0.0005
        return expected

    systems = [System(f"same {k}", "pytorch", lambda _: FnRunner(slows_down)) for k in "ab"]
    res = cmp_mod.compare(s, systems, TimingPolicy(repeats=6), None, None)
    a, b = (r.timing.median for r in res.results)
    assert a == pytest.approx(1.25) and b == pytest.approx(1.25)  # each: three runs of 0.5 ms, three of 2 ms


def test_run_bench_ablation_only_at_the_largest_batch():
    from acrobat.bench.suite import BenchSettings, run_bench

    name = HARNESS_MODELS[0]
    size = min(MODELS[name].sizes, key=lambda kv: kv[1])[0]
    systems = select(["pytorch"]) + select(["ablation"])[-1:]
    rep = run_bench(BenchSettings(models=[name], sizes=[size, "no-such-size"], batch_sizes=[3, 2], systems=systems,
                                  repeats=1, min_repeats=1), progress=False)
    assert [(c.batch_size, [r.group for r in c.results]) for c in rep.comparisons] == [
        (3, ["pytorch", "ablation"]), (2, ["pytorch"])]
    assert any("no-such-size" in n for n in rep.notes)
    assert rep.machine["load_average"] is None or rep.machine["load_average"] >= 0


def _hand_report() -> BenchReport:
    """Made-up times (no run): acrobat 10 ms everywhere; PyTorch 20, 40, 5 ms; TorchFold 30 ms on one
    configuration, wrong on another; DyNet not installed; hand-batched not selected."""
    from acrobat.bench.compare import Comparison, SystemResult

    rep = BenchReport("acrobat bench --made-up", "2026-01-01", "inference", 1, "none", scaled=["berxit: 8 tokens"])
    for (model, bs), torch_ms, fold in zip([("treelstm", 8), ("treelstm", 64), ("birnn", 8)], [20.0, 40.0, 5.0],
                                           [30.0, None, "wrong"]):
        c = Comparison(model, "small", 4, bs)
        c.results.append(SystemResult("acrobat (compiled)", "acrobat", timing=Timing((9.0, 10.0, 11.0))))
        c.results.append(SystemResult("PyTorch per instance", "pytorch", timing=Timing((torch_ms,))))
        if fold == "wrong":
            c.results.append(SystemResult("TorchFold", "torchfold", WRONG))
        elif fold is not None:
            c.results.append(SystemResult("TorchFold", "torchfold", timing=Timing((fold,))))
        c.results.append(SystemResult("DyNet (autobatch)", "dynet", NOT_INSTALLED, "not installed: no dynet"))
        rep.comparisons.append(c)
    return rep


def test_geomeans_of_a_hand_made_report(tmp_path):
    from acrobat.bench.report import geomeans

    by = {g.baseline: g for g in geomeans(_hand_report())}
    torch_ = by["PyTorch per instance"]
    assert torch_.reference == "acrobat (compiled)" and torch_.count == 3
    assert torch_.geomean == pytest.approx((2.0 * 4.0 * 0.5) ** (1 / 3))
    assert torch_.lowest == ("birnn/small/8", pytest.approx(0.5))
    assert torch_.highest == ("treelstm/small/64", pytest.approx(4.0))
    assert torch_.line() == ("acrobat (compiled) vs PyTorch per instance: 1.59x geometric mean over 3 "
                             "configurations (min 0.50x birnn/small/8, max 4.00x treelstm/small/64)")
    fold = by["TorchFold"]
    assert fold.count == 1 and fold.geomean == pytest.approx(3.0) and "over 1 configuration " in fold.line()
    assert by["DyNet (autobatch)"].line() == "acrobat (compiled) vs DyNet (autobatch): not run (not installed)"
    assert by["hand-batched PyTorch"].line().endswith("not run (not selected)")

    rep = _hand_report()
    data = report_dict(rep)
    g = next(d for d in data["geomeans"] if d["baseline"] == "PyTorch per instance")
    assert (g["configs"], g["min_config"], g["max_config"], g["not_run"]) == (
        3, "birnn/small/8", "treelstm/small/64", None)
    assert g["geomean"] == pytest.approx(torch_.geomean)
    assert next(d for d in data["geomeans"] if d["baseline"] == "DyNet (autobatch)")["not_run"] == "not installed"
    text = markdown(rep)
    assert "- acrobat (compiled) vs PyTorch per instance: 1.59x geometric mean over 3" in text
    assert "Scaled down from the paper's sizes" in text and "berxit: 8 tokens" in text
    paths = write_outputs(rep, tmp_path)
    assert read_json(tmp_path / "bench.json").scaled == ["berxit: 8 tokens"]
    assert markdown(read_json(tmp_path / "bench.json")) == text
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "geomean.png") in paths and (tmp_path / "geomean.png").read_bytes()[:4] == b"\x89PNG"


def test_geomeans_without_acrobat_timed():
    from acrobat.bench.report import geomeans

    rep = _hand_report()
    for c in rep.comparisons:
        c.results = c.results[1:]
    by = {g.baseline: g for g in geomeans(rep)}
    assert by["PyTorch per instance"].line().endswith("no speedup (acrobat (compiled) not timed)")


def test_quick_scales_berxit_and_says_so():
    q = command.settings_from_args(_args(quick=True))
    assert q.overrides == {"berxit": command.QUICK_BERXIT}
    assert q.scaled and "berxit" in q.scaled[0] and f"{command.QUICK_BERXIT['seq_len']}-token" in q.scaled[0]
    assert f"--seq-len {command.QUICK_BERXIT['seq_len']}" in q.command
    mine = command.settings_from_args(_args(quick=True, seq_len=16, models=["berxit"]))
    assert mine.overrides["berxit"] == {**command.QUICK_BERXIT, "seq_len": 16}
    assert command.settings_from_args(_args(quick=True, models=["treelstm"])).overrides == {}
    full = command.settings_from_args(_args())
    assert full.overrides == {} and full.scaled == []
    assert command.settings_from_args(_args(layers=2)).overrides == {"berxit": {"layers": 2}}
    with pytest.raises(ValueError):
        command.settings_from_args(_args(seq_len=0))


def test_run_bench_applies_model_overrides():
    from acrobat.bench.suite import BenchSettings, run_bench

    rep = run_bench(BenchSettings(models=["berxit"], overrides={"berxit": {"seq_len": 4, "layers": 1}},
                                  scaled=["berxit: tiny"], sizes=["small"], batch_sizes=[2],
                                  systems=select(["pytorch"]), repeats=1, min_repeats=1), progress=False)
    assert rep.scaled == ["berxit: tiny"] and [r.status for r in rep.comparisons[0].results] == [OK]


def test_spread_and_quartiles():
    t = Timing((4.0, 1.0, 3.0, 2.0, 100.0))
    assert t.median == 3.0 and t.quartiles == (2.0, 4.0)
    assert Timing((5.0,)).quartiles == (5.0, 5.0)
    text = markdown(_hand_report())
    assert "### acrobat across its timed runs: spread" in text
    assert "| treelstm | small | 8 | acrobat (compiled) | 10.00 | 9.50-10.50 | 9.00-11.00 | 3 |" in text


def test_processes_run_the_acrobat_systems_in_fresh_children(tmp_path, monkeypatch):
    """``--processes N``: N children with ``--systems acrobat``; each one's medians in a table (children faked:
    each writes a made-up bench.json)."""
    from acrobat.bench import processes
    from acrobat.bench.report import write_json

    argv = processes.child_command("acrobat bench treelstm --quick --systems acrobat,pytorch --threads 2",
                                   tmp_path / "p1")
    assert argv[1:] == ["-m", "acrobat", "bench", "treelstm", "--quick", "--threads", "2", "--systems", "acrobat",
                        "--no-progress", "--out", str(tmp_path / "p1")]
    calls = []

    def fake_run(args, **kw):
        calls.append(args)
        rep = _hand_report()
        for c in rep.comparisons:
            c.results[0].timing = Timing((10.0 * len(calls),))
        out = args[args.index("--out") + 1]
        Path(out).mkdir(parents=True)
        write_json(rep, Path(out) / "bench.json")
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(processes.subprocess, "run", fake_run)
    per = processes.run_in_processes("acrobat bench treelstm --quick", 3)
    assert len(calls) == 3 and per["treelstm/small/8"]["acrobat (compiled)"] == [10.0, 20.0, 30.0]
    assert per["treelstm/small/8"]["TorchFold"] == [30.0, 30.0, 30.0]
    rep = _hand_report()
    rep.processes = per
    text = markdown(rep)
    assert "### acrobat in 3 fresh processes" in text
    assert "| treelstm | small | 8 | acrobat (compiled) | 10.00 | 20.00 | 30.00 | 3.00 |" in text
    write_json(rep, tmp_path / "bench.json")
    assert markdown(read_json(tmp_path / "bench.json")) == text
