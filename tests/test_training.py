"""Training through a batched run: gradients equal the per-instance loop's (the eager backends, and
``compiled``, which trains on ``compiled-train``, on a few models).

``eager`` and ``eager-accum`` are both checked on every model and example; ``eager-accum`` runs each block's
traced aten graph (``TracedKernel``) and gathers whose backward accumulates rows
into one buffer per source output (``acrobat.runtime.accumulate``), which it
uses for large sources only: ``eager-accum/sinks`` gives every source a sink
(the models here are small), so the sinks are checked on every model too.

The loss is a fixed weighted sum of every result tensor of every instance
(weights that differ per element, so a transposed or misplaced gradient
row shows), summed over instances: the batched run's ``backward`` must give
every parameter the gradient the per-instance loop gives it, and ``None``
exactly where the loop leaves ``None``.
"""

from __future__ import annotations

import copy
import json
import logging
import random
from dataclasses import dataclass

import pytest
import sympy
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch._dynamo.utils import counters

import acrobat as ab
import examples
from acrobat.data.synthetic import synthetic_trees
from acrobat.models import MODELS, get_model
from acrobat.runtime import accumulate, compiled_train
from acrobat.runtime.backend import AUTO_ENV
from acrobat.runtime.size_guard import SizeGuard

TOL = {
    torch.float32: {"rtol": 1e-4, "atol": 1e-5},
    torch.float64: {"rtol": 1e-9, "atol": 1e-11},
}


def weighted_sum(results) -> torch.Tensor:
    """A loss over all result tensors: each element times ``sin(1 + its index)``."""
    total = 0
    for t in pytree.tree_leaves(results):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            w = torch.sin(torch.arange(1, t.numel() + 1, dtype=t.dtype)).reshape(t.shape)
            total = total + (t * w).sum()
    return total


def assert_same_grads(batched: nn.Module, plain: nn.Module, dtype: torch.dtype) -> None:
    """Every parameter: both gradients None, or both tensors and equal."""
    for (name, a), b in zip(batched.named_parameters(), plain.parameters()):
        assert (a.grad is None) == (b.grad is None), f"{name}: grad {a.grad is None and 'None'} vs {b.grad is None and 'None'}"
        if a.grad is not None:
            torch.testing.assert_close(a.grad.to_dense(), b.grad.to_dense(), **TOL[dtype], msg=name)
    assert any(p.grad is not None for p in plain.parameters())


BACKENDS = ["eager", "eager-accum", "eager-accum/sinks"]


@pytest.fixture(autouse=True)
def _sinks_for_every_source(request, monkeypatch):
    """``eager-accum/sinks``: the ``eager-accum`` backend with a sink for every source that requires grad."""
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("backend") == "eager-accum/sinks":
        monkeypatch.setattr(accumulate, "SINK_MIN_NUMEL", 0)


def check_grads(program, reference, params: nn.Module, batch: list, dtype: torch.dtype,
                backend: str = "eager", stats: ab.RunStats | None = None) -> None:
    """``backward`` of the batched run's loss equals that of the per-instance loop's (sum of instances).

    ``dtype`` is the parameters' and torch's default dtype (models make constants with ``torch.zeros(H)``).
    """
    params = params.to(dtype)
    plain = copy.deepcopy(params)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        out = program.run(batch, params, backend=backend.split("/")[0], stats=stats)
        weighted_sum(out).backward()
        sum(weighted_sum(reference(x, plain)) for x in batch).backward()
    finally:
        torch.set_default_dtype(default)
    assert_same_grads(params, plain, dtype)


DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(MODELS))
def test_paper_model_gradients(dataset, name, dtype, backend):
    spec = get_model("berxit", seq_len=6, layers=2) if name == "berxit" else MODELS[name]
    hidden = spec.hidden("small") if name == "berxit" else 12
    params = spec.make_params(len(dataset.vocab), hidden, 1)
    check_grads(spec.program, spec.reference, params, spec.instances(dataset.trees[:6]), dtype, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(examples.EXAMPLES))
def test_example_gradients(name, dtype, backend):
    ex = examples.load(name)
    check_grads(ex.program, ex.reference, ex.make_params(0), ex.instances(6, 2), dtype, backend)


COMPILED_CASES = [("model", "treelstm"), ("model", "birnn"), ("example", "node_classifier_rnn")]
"""What ``compiled`` trains in the suite (float32): each block's compile takes seconds on a 2-core machine;
every paper model and example was checked by hand (the module docstring of ``acrobat.runtime.compiled_train``)."""


@pytest.mark.parametrize("kind,name", COMPILED_CASES)
def test_compiled_training_gradients(dataset, kind, name):
    """``backend="compiled"`` under grad trains on ``compiled-train``: every block's traced graph compiled by
    TorchInductor with its backward kernel; gradients equal the per-instance loop's."""
    if kind == "model":
        spec = MODELS[name]
        program = spec.program
        check_grads(program, spec.reference, spec.make_params(len(dataset.vocab), 12, 1),
                    spec.instances(dataset.trees[:6]), torch.float32, "compiled")
    else:
        ex = examples.load(name)
        program = ex.program
        check_grads(program, ex.reference, ex.make_params(0), ex.instances(6, 2), torch.float32, "compiled")
    be, _ = program.backend("compiled-train")  # its kernels of every compile of the program (facts differ by run)
    assert all(k.eager_graphs == 0 and not k.untraceable for k in be.kernels)
    assert sum(k.compiled for k in be.kernels) >= 1, be.report()


def test_compiled_training_serves_a_new_batch_size_without_compiling(dataset):
    """One compiled forward/backward pair per block serves every batch size: a second size compiles nothing
    (acrobat's count and AOTAutograd's), and its gradients are right too."""
    spec = MODELS["treelstm"]
    p = spec.make_params(len(dataset.vocab), 12, 1)
    weighted_sum(spec.program.run(spec.instances(dataset.trees[:6]), p, backend="compiled")).backward()
    before = dict(counters["aot_autograd"])
    stats = ab.RunStats()
    check_grads(spec.program, spec.reference, spec.make_params(len(dataset.vocab), 12, 1),
                spec.instances(dataset.trees[6:17]), torch.float32, "compiled", stats)
    assert stats.backend == "compiled-train" and stats.compiles == 0
    assert dict(counters["aot_autograd"]) == before


def test_compiled_training_runs_the_eager_graph_of_a_block_inductor_cannot_compile(monkeypatch, caplog):
    """A block whose training graph Inductor fails on trains through its eager traced graph: a warning, and
    the report says why."""
    def refuse(*args, **kwargs):
        raise RuntimeError("no kernel today")

    monkeypatch.setattr(compiled_train, "compile_graph", refuse)
    biased.reset_backends()
    W, b = torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    xs = [torch.randn(4) for _ in range(5)]
    with caplog.at_level(logging.WARNING, logger="acrobat.compile"):
        weighted_sum(biased.run([Point(x) for x in xs], W, b, backend="compiled")).backward()
    W0, b0 = W.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    sum(weighted_sum(torch.tanh(x @ W0 + b0)) for x in xs).backward()
    torch.testing.assert_close(W.grad, W0.grad)
    torch.testing.assert_close(b.grad, b0.grad)
    be, _ = biased.backend("compiled-train", 2)
    assert "eager traced graph: RuntimeError: no kernel today" in be.report()
    assert "could not compile its training graph" in caplog.text


def test_compiled_training_beyond_a_bound_inductor_put_on_the_batch_runs_the_eager_graph():
    """A float32 backward kernel sums its bias gradient over the batch rows, which Inductor compiles for at
    most 4096 rows (a cascade sum above): a launch of more rows runs the eager traced graph, right too."""
    biased.reset_backends()
    for n in (6, 4200):
        W, b = torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)
        xs = [torch.randn(4) for _ in range(n)]
        stats = ab.RunStats()
        weighted_sum(biased.run([Point(x) for x in xs], W, b, backend="compiled", stats=stats)).backward()
        W0, b0 = W.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        sum(weighted_sum(torch.tanh(x @ W0 + b0)) for x in xs).backward()
        torch.testing.assert_close(W.grad, W0.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(b.grad, b0.grad, rtol=1e-4, atol=1e-4)
    assert stats.compiles == 0


def test_a_bound_on_the_batch_is_kept_with_the_cached_kernel():
    """The bound a training kernel holds under is written beside Inductor's cache and read back the same
    (``kernel_facts``): a kernel loaded from the cache runs its eager graph past the bound too."""
    s = sympy.Symbol("s26", integer=True, positive=True)
    guard = SizeGuard(sympy.Le(s, 4096), [s], [0])
    back = SizeGuard.of_fact(json.loads(json.dumps(guard.fact())))
    assert not back.specializes
    assert [back.holds([torch.empty(n, 2)]) for n in (2, 4096, 4097)] == [True, True, False]


@pytest.mark.parametrize("backend", ["eager", "auto", "eager-accum/sinks", "compiled"])
def test_a_weight_read_only_by_item_keeps_grad_none(dataset, backend):
    """DRNN reads its child/sibling probabilities with ``.item()`` only: their weights get no gradient,
    as in plain PyTorch (horizontal fusion computes them in one matmul with the label weights)."""
    spec = MODELS["drnn"]
    params = spec.make_params(0, 12, 0)
    weighted_sum(spec.program.run(spec.instances([None] * 5), params, backend=backend.split("/")[0])).backward()
    assert params.w_c.grad is None and params.w_s.grad is None and params.b_c.grad is None
    assert params.W_out.grad is not None and params.W_out.grad.abs().sum() > 0


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), batch_size=st.integers(1, 8))
def test_treelstm_gradients_random_trees(backend, seed, batch_size):
    spec = MODELS["treelstm"]
    trees = synthetic_trees(batch_size, seed=seed, vocab_size=30)
    check_grads(spec.program, spec.reference, spec.make_params(30, 8, seed % 5), trees, torch.float64, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=12, deadline=None)
@given(lengths=st.lists(st.integers(1, 20), min_size=1, max_size=8), seed=st.integers(0, 1000))
def test_birnn_gradients_random_lengths(backend, lengths, seed):
    rng = random.Random(seed)
    spec = MODELS["birnn"]
    batch = [[rng.randrange(30) for _ in range(n)] for n in lengths]
    check_grads(spec.program, spec.reference, spec.make_params(30, 8, seed % 5), batch, torch.float64, backend)


def test_accumulated_gathers_give_the_same_gradient_on_every_backward(dataset, monkeypatch):
    """``eager-accum``: a second ``backward`` through the same run (``retain_graph``) adds the same
    gradient again (each sink hands its buffer over and starts empty), and a result's direct gradient
    and its gathered rows' gradients both reach the weights."""
    monkeypatch.setattr(accumulate, "SINK_MIN_NUMEL", 0)
    spec = MODELS["treelstm"]
    trees = dataset.trees[:5]
    p, plain = spec.make_params(len(dataset.vocab), 8, 0), spec.make_params(len(dataset.vocab), 8, 0)
    loss = weighted_sum(spec.program.run(trees, p, backend="eager-accum"))
    loss.backward(retain_graph=True)
    loss.backward()
    (2 * sum(weighted_sum(spec.reference(t, plain)) for t in trees)).backward()
    assert_same_grads(p, plain, torch.float32)


def test_partial_and_second_order_gradients_through_sinks_equal_eager(monkeypatch):
    """``torch.autograd.grad`` for one weight runs gathers' backwards but not every source's alias: the
    rows it leaves in a sink must not reach the next pass (a sink's buffer belongs to one backward pass).
    With ``create_graph=True`` the sinks' additions are recorded: second-order gradients equal eager's."""
    monkeypatch.setattr(accumulate, "SINK_MIN_NUMEL", 0)
    spec = MODELS["treelstm"]
    trees = synthetic_trees(3, seed=1, vocab_size=40)
    got = {}
    for backend in ("eager", "eager-accum"):
        p = spec.make_params(40, 8, 0).double()
        loss = weighted_sum(spec.program.run(trees, p, backend=backend))
        (g,) = torch.autograd.grad(loss, [p.U_iou], create_graph=True)
        (h,) = torch.autograd.grad((g * g).sum(), [p.W_iou], retain_graph=True)
        loss.backward()
        got[backend] = (g.detach(), h, {n: q.grad for n, q in p.named_parameters()})
    (g0, h0, grads0), (g1, h1, grads1) = got["eager"], got["eager-accum"]
    torch.testing.assert_close(g1, g0, **TOL[torch.float64])
    torch.testing.assert_close(h1, h0, **TOL[torch.float64])
    for n, q in grads0.items():
        assert (q is None) == (grads1[n] is None), n
        if q is not None:
            torch.testing.assert_close(grads1[n], q, **TOL[torch.float64], msg=n)


def test_eager_accum_runs_traced_graphs_and_vmap_where_it_must(dataset):
    """``eager-accum`` traces every paper-model block into an aten graph once per signature (reused
    across batch sizes); a launch of one row, and a run without grad, go through ``vmap`` (same results)."""
    spec = MODELS["treelstm"]
    p = spec.make_params(len(dataset.vocab), 8, 0)
    counts = []
    for n in (3, 6):
        weighted_sum(spec.program.run(dataset.trees[:n], p, backend="eager-accum")).backward()
        _, kernels = spec.program.backend("eager-accum")
        counts.append([len(k.graphs) for k in kernels.values()])
    assert counts[0] == counts[1] and all(c >= 1 for c in counts[0])  # one graph serves both batch sizes
    assert not any(k.untraceable for k in kernels.values())
    with torch.no_grad():
        want = spec.program.run(dataset.trees[:1], p, backend="eager")
    got = spec.program.run(dataset.trees[:1], p, backend="eager-accum")
    torch.testing.assert_close(got, want)


# ------------------------------------------------------- tensors inside instances, frozen parameters


@dataclass
class Point:
    x: torch.Tensor


@ab.program
def project(inst, W):
    return torch.tanh(inst.x @ W)


@ab.program
def biased(inst, W, b):
    return torch.tanh(inst.x @ W + b)


def test_auto_trains_instance_tensors_with_frozen_parameters(monkeypatch):
    """Frozen weights, instance tensors that require grad: ``auto`` runs eager-accum (not its inference
    backend, compiled), gradients reach the instances as in the per-instance loop."""
    monkeypatch.delenv(AUTO_ENV, raising=False)
    W = torch.randn(4, 3)
    xs = [torch.randn(4, requires_grad=True) for _ in range(5)]
    stats = ab.RunStats()
    out = project.run([Point(x) for x in xs], W, stats=stats)
    assert stats.backend == "eager-accum"
    weighted_sum(out).backward()
    plain = [x.detach().clone().requires_grad_() for x in xs]
    sum(weighted_sum(torch.tanh(x @ W)) for x in plain).backward()
    for x, y in zip(xs, plain):
        torch.testing.assert_close(x.grad, y.grad)


@pytest.mark.parametrize("backend", ["compiled-explicit", "compiled-fused"])
@pytest.mark.parametrize("requires", ["instance", "weight"])
def test_a_forced_gather_under_autograd_is_refused_with_the_fix(requires, backend):
    W = torch.randn(4, 3, requires_grad=requires == "weight")
    batch = [Point(torch.randn(4, requires_grad=requires == "instance")) for _ in range(3)]
    what = "a tensor inside an instance" if requires == "instance" else "a shared parameter"
    with pytest.raises(ab.AcrobatError, match=f"inference only.*{what} requires grad.*backend='eager-accum'"
                                              ".*'compiled' \\(which trains on 'compiled-train'\\)"):
        project.run(batch, W, backend=backend)


@pytest.mark.parametrize("requires", ["instance", "weight"])
def test_compiled_under_autograd_trains_on_compiled_train(requires):
    """``backend="compiled"`` while autograd records (through a weight or an instance's tensor) runs
    ``compiled-train``; gradients reach what requires grad as in the per-instance loop."""
    W = torch.randn(4, 3, requires_grad=requires == "weight")
    xs = [torch.randn(4, requires_grad=requires == "instance") for _ in range(3)]
    stats = ab.RunStats()
    weighted_sum(project.run([Point(x) for x in xs], W, backend="compiled", stats=stats)).backward()
    assert stats.backend == "compiled-train"
    W0 = W.detach().clone().requires_grad_(W.requires_grad)
    plain = [x.detach().clone().requires_grad_(x.requires_grad) for x in xs]
    sum(weighted_sum(torch.tanh(x @ W0)) for x in plain).backward()
    for got, want in [(W, W0), *zip(xs, plain)]:
        assert (got.grad is None) == (want.grad is None)
        if want.grad is not None:
            torch.testing.assert_close(got.grad, want.grad)


# --------------------------------------------------------------------- dropout while training


class DropParams(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = nn.Parameter(torch.randn(5, 16, generator=g))
        self.W = nn.Parameter(torch.randn(16, 4, generator=g))


@ab.program
def drop_then_project(tok, p):
    d = F.dropout(p.emb[tok], 0.5, training=True)
    return d, torch.tanh(d @ p.W)


def test_dropout_in_training_draws_per_instance_and_backpropagates_through_its_mask():
    """Identical instances draw their own masks under grad mode; the gradient is the per-instance
    loop's with each instance's mask (read back from its dropped vector)."""
    p = DropParams()
    plain = copy.deepcopy(p)
    torch.manual_seed(0)
    out = drop_then_project.run([2] * 6, p)
    masks = [(d != 0).to(d.dtype) for d, _ in out]
    assert len({tuple(m.tolist()) for m in masks}) == 6  # 16 entries each: a repeat is a 1 in 2**16 event
    weighted_sum([h for _, h in out]).backward()
    sum(weighted_sum(torch.tanh((plain.emb[2] * m / 0.5) @ plain.W)) for m in masks).backward()
    assert_same_grads(p, plain, torch.float32)


# ------------------------------------------------------------------ sparse embedding gradients


def test_sparse_grads_hold_only_the_rows_looked_up(dataset):
    """``sparse_grads=True``: the table's gradient is sparse COO with one row per leaf looked up, equal
    (densified) to the dense gradient; every other gradient is unchanged."""
    spec = MODELS["treelstm"]
    trees = dataset.trees[:5]
    sparse, dense = spec.make_params(len(dataset.vocab), 8, 0), spec.make_params(len(dataset.vocab), 8, 0)
    weighted_sum(spec.program.run(trees, sparse, sparse_grads=True)).backward()
    weighted_sum(spec.program.run(trees, dense)).backward()
    assert sparse.emb.grad.is_sparse and not dense.emb.grad.is_sparse
    assert sparse.emb.grad._nnz() == sum(len(t.leaves()) for t in trees)
    assert_same_grads(sparse, dense, torch.float32)


class EmbParams(nn.Module):
    def __init__(self, sparse: bool) -> None:
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(0)
            self.emb = nn.Embedding(9, 6, sparse=sparse)
            self.W = nn.Parameter(torch.randn(6, 6))


@ab.program
def embed_sum(tokens, p):
    h = torch.zeros(6)
    for t in tokens:
        h = torch.tanh(p.emb(torch.tensor(t)) + h @ p.W)
    return h


@ab.program
def last_row(tok, p):
    return torch.tanh(p.W[tok - 10])  # a negative index for tok < 10: rows counted from the end


@pytest.mark.parametrize("sparse", [False, True])
def test_nn_embedding_keeps_its_gradient_layout(sparse):
    """``nn.Embedding(sparse=...)`` in a model: the batched run's gradient has the layout and values
    plain PyTorch gives."""
    p, plain = EmbParams(sparse), EmbParams(sparse)
    batch = [[1, 2, 3], [4], [1, 1, 8, 0]]
    weighted_sum(embed_sum.run(batch, p, backend="eager")).backward()
    sum(weighted_sum(embed_sum(x, plain)) for x in batch).backward()
    assert p.emb.weight.grad.is_sparse == plain.emb.weight.grad.is_sparse == sparse
    assert_same_grads(p, plain, torch.float32)


def test_sparse_lookup_counts_negative_indices_from_the_end():
    p, plain = EmbParams(False), EmbParams(False)
    batch = [5, 12, 15, 7]
    out = last_row.run(batch, p, backend="eager", sparse_grads=True)
    weighted_sum(out).backward()
    sum(weighted_sum(last_row(x, plain)) for x in batch).backward()
    assert p.W.grad.is_sparse
    assert_same_grads(p, plain, torch.float32)
