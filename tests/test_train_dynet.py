"""``acrobat train --system dynet``: DyNet's recipe step against the PyTorch systems' step (skipped without
DyNet), and what the command says where DyNet cannot run."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from acrobat import train_dynet
from acrobat.bench.dynet_models import dynet_installed
from acrobat.cli import main
from acrobat.data.synthetic import synthetic_trees
from acrobat.train import TASKS, StepTimes, TrainConfig, TrainOptimizer, make_params, node_logits_fn
from acrobat.train_dynet import DynetLearner

needs_dynet = pytest.mark.skipif(not dynet_installed(), reason="DyNet is not installed (scripts/install-dynet.sh)")
VOCAB, HIDDEN, LR = 60, 8, 0.05


@pytest.fixture
def small_memory(monkeypatch):
    """Tiny models: DyNet touches its whole initial memory at start."""
    monkeypatch.setattr(train_dynet, "MEMORY_MB", 64)


def _reference_step(task, cfg, params, trees) -> float:
    """One step of ``cfg.system`` (acrobat or pytorch) as ``acrobat.train._step`` takes it; the loss per tree."""
    labels = torch.tensor([y for t in trees for y in task.labels(t)])
    loss = F.cross_entropy(node_logits_fn(task, cfg.system, params, cfg.sparse_grads)(trees), labels,
                           reduction="sum") / len(trees)
    loss.backward()
    return float(loss.detach())


@needs_dynet
@pytest.mark.parametrize("model", list(TASKS))
@pytest.mark.parametrize("optimizer,weight_decay,sparse", [("adagrad", 0.0, True), ("adagrad", 0.1, True),
                                                           ("adagrad", 0.1, False), ("adam", 0.1, False)])
def test_dynet_step_equals_the_pytorch_step(small_memory, model, optimizer, weight_decay, sparse):
    """Dropout 0: DyNet's first loss and gradients are the per-instance PyTorch step's (``--system pytorch``),
    and its weights after two updates are ``TrainOptimizer``'s. Where the table's updates are sparse and
    decay is on, the reference is ``--system acrobat`` (sparse table gradient, not decayed); with dense
    updates (``--dense-grads``) it is ``--system pytorch``, the table decayed and every row updated.
    Adagrad's and Adam's epsilons sit at other places in DyNet: weights agree to 1% of the learning rate."""
    task = TASKS[model]
    trees = synthetic_trees(5, seed=3, vocab_size=VOCAB)
    system = "acrobat" if sparse and weight_decay else "pytorch"
    cfg = TrainConfig(model=model, system=system, hidden=HIDDEN, optimizer=optimizer, lr=LR,
                      weight_decay=weight_decay, dropout=0.0, sparse_grads=sparse)
    params = make_params(task, VOCAB, cfg)
    dynet = DynetLearner(task, cfg, copy.deepcopy(params))
    try:
        loss, grads = dynet.grads(trees)
        losses = [dynet.step(trees, StepTimes()) for _ in range(2)]
        after = dynet.weights()
    finally:
        dynet.close()
    expected = _reference_step(task, cfg, params, trees)
    assert loss == pytest.approx(expected, rel=1e-5)
    for name, p in params.named_parameters():
        g = p.grad.to_dense() + weight_decay * p.detach() * (name not in task.tables or not sparse)
        torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=1e-5, msg=lambda m: f"{model}.{name}: {m}")
    opt = TrainOptimizer(params, optimizer, LR, weight_decay)
    opt.step()
    opt.zero_grad()
    second = _reference_step(task, cfg, params, trees)
    opt.step()
    assert losses == pytest.approx([expected, second], rel=1e-5)
    torch.testing.assert_close(after, {n: p.detach() for n, p in params.named_parameters()}, rtol=0,
                               atol=LR / 100)


@needs_dynet
@pytest.mark.parametrize("model", list(TASKS))
def test_dynet_dropout_is_where_the_program_has_it(small_memory, model):
    """At a rate just below 1 every dropout zeroes its vector (both systems, fixed seeds), so the loss is the
    PyTorch program's only if the classifier's inputs are dropped where ``train_programs`` drops them; at
    rate 0.5 each step draws new masks."""
    task = TASKS[model]
    trees = synthetic_trees(4, seed=3, vocab_size=VOCAB)
    for rate in (1 - 1e-7, 0.5):
        cfg = TrainConfig(model=model, system="pytorch", hidden=HIDDEN, dropout=rate, weight_decay=0.0)
        params = make_params(task, VOCAB, cfg)
        dynet = DynetLearner(task, cfg, params)
        try:
            first, second = dynet.grads(trees)[0], dynet.grads(trees)[0]
        finally:
            dynet.close()
        if rate > 0.5:
            torch.manual_seed(0)
            assert first == second == pytest.approx(_reference_step(task, cfg, params, trees), rel=1e-5)
        else:
            assert first != second


@needs_dynet
def test_dynet_runs_the_recipe_beside_acrobat_on_one_plot(sst, tmp_path, small_memory):
    import json

    out = tmp_path / "out"
    for system in ("acrobat", "dynet"):
        assert main(["train", "treelstm", "--system", system, "--data", str(sst), "--epochs", "2", "--hidden", "8",
                     "--batch-size", "8", "--out", str(out), "--no-progress"]) == 0
    log = json.loads((out / "treelstm-dynet.json").read_text())
    assert [p["epoch"] for p in log["curve"]] == [1, 2] and log["steps"] == 10
    assert 0.0 <= log["test_accuracy"] <= 1.0 and log["step_ms"]["forward_ms"] > 0
    assert log["checkpoint"].endswith("treelstm-dynet.model") and (out / "treelstm-dynet.model").stat().st_size > 0
    assert (out / "treelstm-acrobat.json").exists() and (out / "treelstm-dev-accuracy.png").exists()


def test_dynet_says_why_it_cannot_run(sst, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(train_dynet, "dynet_installed", lambda: False)
    assert main(["train", "treelstm", "--system", "dynet", "--data", str(sst), "--out", str(tmp_path)]) == 3
    assert "DyNet is not installed" in capsys.readouterr().err
