"""DyNet baseline (paper Table 5): the worker's seven models against the per-instance references, and
the harness around it (jobs as plain data, out-of-memory reporting, TorchFold's "cannot express").

The model checks run where DyNet is importable and are skipped otherwise;
everything else runs without DyNet.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
import torch

from acrobat.bench import dynet_models, dynet_train
from acrobat.bench.base import OutOfMemory, Setup, Unavailable
from acrobat.bench.compare import NOT_AVAILABLE, OK, OUT_OF_MEMORY, Comparison, SystemResult, run_system
from acrobat.bench.dynet_models import DYNET_MODELS, DynetRunner, dynet_installed
from acrobat.bench.dynet_train import DynetTrainee
from acrobat.bench.dynet_worker import MODELS as WORKER_MODELS
from acrobat.bench.dynet_worker import is_memory_error
from acrobat.bench.report import BenchReport, geomeans, markdown
from acrobat.bench.systems import System, select
from acrobat.bench.timing import Timing, TimingPolicy
from acrobat.bench import train_step
from acrobat.bench.train_step import LR, StepResult, TrainComparison, loss_of, train_markdown
from acrobat.models import GENERATED_VOCAB, MODELS, ModelSpec
from acrobat.models.berxit import BerxitParams, berxit_instances
from acrobat.train import TrainOptimizer

ONE = TimingPolicy(repeats=1, min_repeats=1)
HIDDEN = 8
"""Tiny hidden size for the model checks (Berxit: 2 heads of 4)."""
BATCH = 4
TRAIN_BATCH = 3


def _tiny_berxit(spec: ModelSpec) -> Setup:
    """Berxit at hidden 8: 6-token sequences, up to 4 layers; seeded so that exits happen at several depths."""
    params = BerxitParams(GENERATED_VOCAB, HIDDEN, heads=2, ffn=16, layers=4, seq_len=6, seed=3)
    instances = berxit_instances(BATCH, GENERATED_VOCAB, seed=1, seq_len=6)
    return Setup(spec, instances, params, "tiny", repeats=1)


@pytest.fixture(scope="module")
def tiny(dataset) -> dict[str, Setup]:
    """Per model: ``BATCH`` instances at hidden ``HIDDEN`` (SST trees/sentences, or generated)."""
    out = {}
    for name, spec in MODELS.items():
        if name == "berxit":
            out[name] = _tiny_berxit(spec)
            continue
        params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
        out[name] = Setup(spec, spec.instances(dataset.trees[:BATCH])[:BATCH], params, "tiny", repeats=1)
    return out


def _plain(x) -> bool:
    """Only ints, floats, None, strings, lists, tuples and dicts of those (no acrobat or torch objects)."""
    if isinstance(x, (list, tuple)):
        return all(_plain(i) for i in x)
    if isinstance(x, dict):
        return all(_plain(k) and _plain(v) for k, v in x.items())
    return x is None or type(x) in (int, float, str, bool)


# ------------------------------------------------------------------ without DyNet


def test_every_model_has_a_dynet_version():
    assert set(DYNET_MODELS) == set(MODELS) == set(WORKER_MODELS)


@pytest.mark.parametrize("name", list(MODELS))
def test_jobs_are_plain_data(tiny, monkeypatch, name):
    monkeypatch.setattr(dynet_models, "dynet_installed", lambda: True)
    job = DynetRunner(tiny[name]).make_job(1, 1)
    assert _plain(job["instances"]) and _plain(job["config"]), name
    assert all(a.dtype.kind == "f" for a in job["params"].values())
    pickle.loads(pickle.dumps(job))


def test_drnn_job_carries_the_instances_own_draws(tiny):
    from acrobat.models.drnn import MAX_DEPTH, MAX_WIDTH

    inst = tiny["drnn"].instances[0]
    token, draws = dynet_models.ENCODERS["drnn"](inst, tiny["drnn"].params)
    assert token == inst.token and draws[1] == (inst.uniform(1, 0), inst.uniform(1, 1))
    assert draws[2 ** MAX_DEPTH][0] is None  # MAX_DEPTH children down: no child draw
    assert draws[2 ** (MAX_WIDTH + 1) - 1][1] is None  # MAX_WIDTH siblings along: no sibling draw
    assert all(draws[p][0] == inst.uniform(p, 0) for p in draws if draws[p][0] is not None)


def test_berxit_job_carries_thresholds(tiny):
    s = tiny["berxit"]
    tokens, thresholds = dynet_models.ENCODERS["berxit"](s.instances[0], s.params)
    assert tokens == list(s.instances[0].tokens)
    assert thresholds == [s.instances[0].threshold(k) for k in range(1, s.params.layers + 1)]


def test_memory_errors_are_recognised():
    assert is_memory_error(MemoryError())
    assert is_memory_error(RuntimeError("CPU memory allocation failed"))
    assert is_memory_error(RuntimeError("CPU forward memory failed to allocate 1073741824"))
    assert not is_memory_error(RuntimeError("Bad dimensions for AffineTransform"))


def _oom_runner(monkeypatch, s: Setup, results: dict[int, dict]) -> DynetRunner:
    monkeypatch.setattr(dynet_models, "dynet_installed", lambda: True)
    runner = DynetRunner(s)
    monkeypatch.setattr(runner, "_run_worker", lambda strategy, repeats: results[strategy])
    return runner


def test_out_of_memory_is_reported_not_an_error(tiny, monkeypatch):
    s = tiny["berxit"]
    expected = [s.spec.reference(x, s.params) for x in s.instances]
    oom = {k: {"out_of_memory": "RuntimeError: CPU memory allocation failed"} for k in dynet_models.STRATEGIES}
    res = run_system(System("DyNet (autobatch)", "dynet", lambda _: _oom_runner(monkeypatch, s, oom)), s, expected, ONE)
    assert res.status == OUT_OF_MEMORY and res.timing is None
    assert "CPU memory allocation failed" in res.detail

    cmp = Comparison("berxit", "small", 768, 64, [SystemResult("acrobat (compiled)", "acrobat", timing=Timing((10.0,))),
                                                   res])
    rep = BenchReport("acrobat bench --test", "2026-01-01", "inference", 1, "test data", comparisons=[cmp])
    text = markdown(rep)
    row = next(line for line in text.splitlines() if line.startswith("| berxit"))
    assert row.rstrip(" |").endswith("out of memory")
    assert "OUT OF MEMORY" in text
    g = next(g for g in geomeans(rep) if g.baseline == "DyNet (autobatch)")
    assert g.reason == "out of memory"


def test_one_strategy_out_of_memory_uses_the_other(tiny, monkeypatch):
    s = tiny["mvrnn"]
    with torch.inference_mode():
        outs = [s.spec.reference(x, s.params).numpy() for x in s.instances]
    runner = _oom_runner(monkeypatch, s, {1: {"out_of_memory": "MemoryError"},
                                          2: {"outputs": outs, "samples_ms": [3.0, 4.0]}})
    got = runner.outputs()
    torch.testing.assert_close(got, [torch.from_numpy(o) for o in outs])
    assert runner.detail == "best: depth-based (other: agenda-based out of memory)"
    with pytest.raises(OutOfMemory):
        _oom_runner(monkeypatch, s, {k: {"out_of_memory": "MemoryError"} for k in (1, 2)}).outputs()


@pytest.mark.parametrize("name", ["drnn", "berxit", "stackrnn"])
def test_torchfold_says_it_cannot_express_tensor_dependent_control_flow(tiny, name):
    (fold,) = select(["torchfold"])
    res = run_system(fold, tiny[name], [], ONE)
    assert res.status == NOT_AVAILABLE and "tensor-dependent control flow" in res.detail


def test_unavailable_is_still_not_available(tiny):
    def missing(_):
        raise Unavailable("no X version of drnn")

    res = run_system(System("x", "dynet", missing), tiny["drnn"], [], ONE)
    assert res.status == NOT_AVAILABLE


def test_a_training_worker_that_fails_is_an_error_with_its_reason():
    worker = dynet_train.DynetWorker({"model": "nope", "strategy": 1})
    try:
        with pytest.raises(RuntimeError, match="training, agenda-based.*no DyNet version of 'nope'"):
            worker.ask("grads")
    finally:
        worker.close()


def test_the_train_report_shows_dynet_without_peak_memory_and_with_its_strategy():
    dynet = StepResult("DyNet (autobatch)", detail="best: agenda-based (other: depth-based 9.0 ms)",
                       forward_ms=[2.0], backward_ms=[3.0], optimizer_ms=[1.0])
    acrobat = StepResult("acrobat (eager-accum)", forward_ms=[1.0], backward_ms=[1.0], optimizer_ms=[1.0],
                         peak_bytes=2**20)
    text = train_markdown([TrainComparison("treelstm", 3, 8, [acrobat, dynet])], "acrobat bench --train")
    assert "| DyNet (autobatch) | 6.0 | 2.0 | 3.0 | 1.0 | n/a | 2.00x |" in text
    assert "- DyNet (autobatch): best: agenda-based (other: depth-based 9.0 ms)" in text


# ------------------------------------------------------------------ with DyNet

needs_dynet = pytest.mark.skipif(not dynet_installed(), reason="DyNet is not installed (scripts/install-dynet.sh)")


@needs_dynet
@pytest.mark.parametrize("name", list(MODELS))
def test_dynet_models_match_references(tiny, monkeypatch, name):
    s = tiny[name]
    monkeypatch.setattr(dynet_models, "STRATEGIES", {1: "agenda-based"})  # one subprocess per model: fast
    with torch.inference_mode():
        expected = [s.spec.reference(x, s.params) for x in s.instances]
    runner = DynetRunner(s)
    runner.mem_mb = 64  # tiny models; DyNet touches its whole initial memory at start
    got = runner.outputs()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5, check_dtype=False)


@needs_dynet
def test_dynet_strategies_agree_and_run_through_the_harness(tiny, monkeypatch):
    """Both strategies (the runner checks they agree) on a model with forks and decisions."""
    s = dataclasses.replace(tiny["drnn"], instances=tiny["drnn"].instances[:2])
    with torch.inference_mode():
        expected = [s.spec.reference(x, s.params) for x in s.instances]
    monkeypatch.setattr(dynet_models, "MEMORY_MB", 64)
    res = run_system(System("DyNet (autobatch)", "dynet", DynetRunner), s, expected, ONE)
    assert res.status == OK, res.detail
    assert res.detail.startswith("best:") and res.timing is not None


def test_decisions_vary_in_the_tiny_setups(tiny):
    """The tiny setups exercise the tensor-dependent decisions (else the DyNet checks would prove little)."""
    with torch.inference_mode():
        layers = [tiny["berxit"].spec.reference(x, tiny["berxit"].params)[1] for x in tiny["berxit"].instances]
        sizes = [len(tiny["drnn"].spec.reference(x, tiny["drnn"].params)) for x in tiny["drnn"].instances]
    assert len(set(layers)) > 1 and min(layers) < tiny["berxit"].params.layers, layers
    assert len(set(sizes)) > 1, sizes


@needs_dynet
@pytest.mark.parametrize("name", ["treelstm", "birnn", "mvrnn", "stackrnn", "drnn"])
def test_dynet_training_step_matches_per_instance_pytorch(tiny, monkeypatch, name):
    """DyNet's first-step gradients of ``loss_of`` (summed over the instances) are the per-instance PyTorch
    loop's, and two of its Adagrad steps leave the weights two of ``TrainOptimizer``'s steps leave (lookup
    tables included). Adagrad's first step moves each weight by about the learning rate whatever the
    gradient's size, so where a gradient is below about 1e-6 the epsilon's place (inside DyNet's square root,
    outside PyTorch's) shows: the weights agree to 1% of the learning rate."""
    monkeypatch.setattr(dynet_train, "STRATEGIES", {1: "agenda-based"})  # one worker: fast
    monkeypatch.setattr(dynet_train, "MEMORY_MB", 64)
    s = tiny[name]
    instances, params = s.instances[:TRAIN_BATCH], copy.deepcopy(s.params)
    trainee = DynetTrainee(s.spec, instances, params, LR)
    try:
        got = trainee.grads()
        trainee.step()
        trainee.step()
        (after,) = trainee.weights().values()
    finally:
        trainee.close()
    loss_of([s.spec.reference(x, params) for x in instances]).backward()
    expected = {n: p.grad for n, p in params.named_parameters()}
    assert got.keys() == expected.keys()
    for n, g in expected.items():
        if g is None:  # e.g. StackRNN's action scores and DRNN's decision weights: read only by decisions
            assert got[n] is None, n
        else:
            torch.testing.assert_close(got[n], g, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}.{n}: {m}")
    opt = TrainOptimizer(params, "adagrad", LR, 0.0)
    opt.step()
    opt.zero_grad()
    loss_of([s.spec.reference(x, params) for x in instances]).backward()
    opt.step()
    torch.testing.assert_close(after, {n: p.detach() for n, p in params.named_parameters()}, rtol=0, atol=LR / 100)


@needs_dynet
def test_dynet_gradients_that_differ_are_reported_wrong_not_timed(dataset, monkeypatch):
    monkeypatch.setattr(dynet_train, "MEMORY_MB", 64)
    monkeypatch.setattr(train_step, "SYSTEMS", [s for s in train_step.SYSTEMS
                                                if s[0] in ("DyNet (autobatch)", train_step.REFERENCE)])
    torch_grad = DynetTrainee._torch
    def off_by_one_percent(self: DynetTrainee, name: str, g: object) -> torch.Tensor | None:
        t = torch_grad(self, name, g)
        return None if t is None else t * 1.01

    monkeypatch.setattr(DynetTrainee, "_torch", off_by_one_percent)
    spec = MODELS["treelstm"]
    cmp = train_step.compare_steps(spec, spec.instances(dataset.trees[:TRAIN_BATCH]), len(dataset.vocab), HIDDEN, 0,
                                   repeats=1)
    dynet, ref = cmp.results
    assert dynet.status == "wrong" and not dynet.forward_ms
    assert ref.status == "ok"
