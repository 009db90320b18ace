"""``acrobat train``, its optimizer, ``acrobat bench --train`` and the training example, on tiny SST files."""

from __future__ import annotations

import json

import pytest
import torch

from acrobat.bench import dynet_train
from acrobat.bench.dynet_models import dynet_installed
from acrobat.bench.train_step import compare_steps, run_train_bench
from acrobat.cli import main
from acrobat.data.synthetic import synthetic_trees
from acrobat.models import MODELS
from acrobat.models.train_programs import sentence_node_labels, tree_node_labels
from acrobat.train import TASKS, TrainOptimizer, node_logits_fn


@pytest.mark.parametrize("model,system", [("treelstm", "acrobat"), ("treelstm", "hand"), ("mvrnn", "acrobat"),
                                          ("birnn", "pytorch")])
def test_train_runs_the_recipe(sst, tmp_path, model, system):
    out = tmp_path / "out"
    assert main(["train", model, "--system", system, "--data", str(sst), "--epochs", "2", "--hidden", "8",
                 "--batch-size", "8", "--out", str(out), "--no-progress"]) == 0
    log = json.loads((out / f"{model}-{system}.json").read_text())
    assert [p["epoch"] for p in log["curve"]] == [1, 2]
    assert 0.0 <= log["test_accuracy"] <= 1.0 and log["steps"] == 10
    assert "test.txt" in log["data"]
    assert (out / f"{model}-{system}.pt").exists() and (out / f"{model}-dev-accuracy.png").exists()


def test_train_says_why_a_system_cannot_run(sst, tmp_path, capsys):
    assert main(["train", "mvrnn", "--system", "hand", "--data", str(sst), "--out", str(tmp_path)]) == 3
    assert "no hand-batched all-node version of mvrnn" in capsys.readouterr().err


def test_node_logits_match_labels_and_the_root(sst):
    """Every system gives one logits row per node label, the same rows (no dropout)."""
    trees = [t for t in synthetic_trees(30, seed=1, vocab_size=60)][:6]
    for name, task in TASKS.items():
        params = MODELS[name].make_params(60, 8, 0)
        params.dropout = 0.0
        rows = sum(len(task.labels(t)) for t in trees)
        got = node_logits_fn(task, "acrobat", params, True)(trees)
        assert got.shape == (rows, 5)
        torch.testing.assert_close(got, node_logits_fn(task, "pytorch", params, True)(trees), rtol=1e-4, atol=1e-5)
        if task.hand is not None:
            torch.testing.assert_close(got, node_logits_fn(task, "hand", params, True)(trees), rtol=1e-4, atol=1e-5)
    assert tree_node_labels(trees[0])[-1] == sentence_node_labels(trees[0])[-1] == trees[0].label


def test_sparse_adagrad_updates_only_the_rows_used_and_equals_dense(dataset):
    spec = MODELS["treelstm"]
    trees = dataset.trees[:4]
    sparse, dense = spec.make_params(len(dataset.vocab), 8, 0), spec.make_params(len(dataset.vocab), 8, 0)
    before = sparse.emb.detach().clone()
    for params, flag in ((sparse, True), (dense, False)):
        opt = TrainOptimizer(params, "adagrad", 0.1, 0.0)
        for _ in range(2):
            sum(o[0].pow(2).sum() for o in spec.program.run(trees, params, sparse_grads=flag)).backward()
            opt.step()
            opt.zero_grad()
    assert isinstance(TrainOptimizer(sparse, "adagrad", 0.1, 0.0), TrainOptimizer)
    used = sorted({leaf.word_id for t in trees for leaf in t.leaves()})
    changed = (sparse.emb.detach() != before).any(1).nonzero().flatten().tolist()
    assert changed == used
    for a, b in zip(sparse.parameters(), dense.parameters()):
        torch.testing.assert_close(a, b)


def test_adam_takes_sparse_adam_for_the_table(dataset):
    spec = MODELS["treelstm"]
    params = spec.make_params(len(dataset.vocab), 8, 0)
    opt = TrainOptimizer(params, "adam", 0.01, 0.0)
    sum(o[0].sum() for o in spec.program.run(dataset.trees[:3], params, sparse_grads=True)).backward()
    opt.step()
    assert [type(o).__name__ for o in opt.parts] == ["Adam", "SparseAdam"]
    with pytest.raises(ValueError, match="unknown optimizer"):
        TrainOptimizer(params, "lbfgs", 0.1, 0.0)


def test_bench_train_checks_and_times_every_system(dataset, monkeypatch):
    monkeypatch.setattr(dynet_train, "MEMORY_MB", 64)  # tiny model; DyNet touches its whole initial memory at start
    spec = MODELS["treelstm"]
    cmp = compare_steps(spec, spec.instances(dataset.trees[:3]), len(dataset.vocab), 8, 0, repeats=1)
    by = {r.system: r for r in cmp.results}
    for name in ("acrobat (eager-accum)", "acrobat (compiled)", "acrobat (eager)",
                 "acrobat (eager, dense embedding updates)", "hand-batched PyTorch", "PyTorch per instance"):
        assert by[name].status == "ok" and len(by[name].forward_ms) == 1 and by[name].peak_bytes > 0
    dynet = by["DyNet (autobatch)"]
    if dynet_installed():  # both autobatch strategies checked and timed, the faster one's times kept
        assert dynet.status == "ok" and len(dynet.forward_ms) == 1 and dynet.peak_bytes is None
        assert dynet.detail.startswith("best: ") and "ms)" in dynet.detail, dynet.detail
    else:
        assert dynet.status == "not installed"


def test_bench_train_runs_the_system_groups_asked_for_and_the_check(dataset):
    spec = MODELS["treelstm"]
    cmp = compare_steps(spec, spec.instances(dataset.trees[:3]), len(dataset.vocab), 8, 0, repeats=1, groups=["hand"])
    assert [r.system for r in cmp.results] == ["hand-batched PyTorch", "PyTorch per instance"]
    with pytest.raises(ValueError, match="unknown system ablation"):
        run_train_bench(["treelstm"], [2], groups=["ablation"])


def test_training_example_runs():
    import examples.train_treelstm as ex

    assert 0.0 <= ex.main(epochs=1, limit=30, hidden=8, batch_size=10) <= 1.0
