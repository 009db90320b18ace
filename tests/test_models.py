"""Batched acrobat results equal the per-instance PyTorch references (TreeLSTM, BiRNN)."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.data.synthetic import synthetic_trees
from acrobat.data.tree import Tree
from acrobat.models import MODELS, get_model

TOL = {"rtol": 1e-4, "atol": 1e-5}


SST_MODELS = [n for n, m in MODELS.items() if m.data == "sst"]
GENERATED_MODELS = [n for n, m in MODELS.items() if m.data == "generated"]


def _spec(name: str):
    """The registered model; Berxit scaled down (8 tokens, 3 layers) so tests stay fast."""
    return get_model("berxit", seq_len=8, layers=3) if name == "berxit" else MODELS[name]


def _check(name: str, trees: list[Tree], vocab_size: int, hidden: int, options: ab.Options | None = None) -> ab.RunStats:
    spec = _spec(name)
    params = spec.make_params(vocab_size, hidden, 0)
    batch = spec.instances(trees)
    stats = ab.RunStats()
    with torch.no_grad():
        out = spec.program.run(batch, params, options=options, stats=stats)
        expected = [spec.reference(x, params) for x in batch]
    assert len(out) == len(batch)
    torch.testing.assert_close(out, expected, **TOL)
    return stats


@pytest.mark.parametrize("name", SST_MODELS)
@pytest.mark.parametrize("batch_size", [1, 8, 64])
def test_batched_equals_reference_small(dataset, name, batch_size):
    stats = _check(name, dataset.trees[:batch_size], len(dataset.vocab), MODELS[name].hidden("small"))
    assert stats.kernel_launches < stats.dfg_nodes or batch_size == 1  # it really batched


@pytest.mark.parametrize("name", SST_MODELS)
def test_batched_equals_reference_large(dataset, name):
    _check(name, dataset.trees[:8], len(dataset.vocab), MODELS[name].hidden("large"))


@pytest.mark.parametrize("name", GENERATED_MODELS)
@pytest.mark.parametrize("batch_size", [1, 8])
def test_generated_models_equal_reference(dataset, name, batch_size):
    hidden = _spec(name).hidden("small") if name == "berxit" else 32
    stats = _check(name, dataset.trees[:batch_size], len(dataset.vocab), hidden)
    assert stats.kernel_launches < stats.dfg_nodes or batch_size == 1


@pytest.mark.parametrize("options", [ab.Options(hoisting=False), ab.Options(concurrency=False),
                                     ab.Options(phases=False), ab.Options(coarsening=False),
                                     ab.Options(ghosts=False), ab.Options(fibers=False),
                                     ab.Options(horizontal_fusion=False)])
@pytest.mark.parametrize("name", ["treelstm", "mvrnn", "birnn", "drnn", "stackrnn"])
def test_every_ablation_stays_correct(dataset, name, options):
    _check(name, dataset.trees[:8], len(dataset.vocab), 16, options)


def test_treelstm_batches_leaves_and_levels(dataset):
    """All leaves of a batch run in one launch (hoisting); internal nodes per level."""
    trees = dataset.trees[:64]
    stats = _check("treelstm", trees, len(dataset.vocab), 32)
    leaves = sum(len(t.leaves()) for t in trees)
    by_nodes = {b.nodes: b for b in stats.blocks.values()}
    assert by_nodes[leaves].launches == 1
    assert stats.kernel_launches <= 2 + max(t.height() for t in trees)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), batch_size=st.integers(1, 12))
def test_treelstm_random_trees(seed, batch_size):
    trees = synthetic_trees(batch_size, seed=seed, vocab_size=50)
    _check("treelstm", trees, 50, 8)


@pytest.mark.parametrize("name", ["birnn", "stackrnn"])
@settings(max_examples=15, deadline=None)
@given(lengths=st.lists(st.integers(1, 30), min_size=1, max_size=12), seed=st.integers(0, 1000))
def test_sentence_models_random_lengths(name, lengths, seed):
    """Random sentence lengths and batch sizes; StackRNN's argmax actions run on fibers with ghost operators."""
    rng = random.Random(seed)
    spec = MODELS[name]
    params = spec.make_params(40, 8, seed)
    batch = [[rng.randrange(40) for _ in range(n)] for n in lengths]
    with torch.no_grad():
        out = spec.program.run(batch, params)
        torch.testing.assert_close(out, [spec.reference(x, params) for x in batch], **TOL)


def test_program_called_plainly_is_the_unbatched_model(dataset):
    """Calling the program as Python runs one instance unbatched: same as the reference."""
    spec = MODELS["treelstm"]
    params = spec.make_params(len(dataset.vocab), 16, 0)
    tree = dataset.trees[0]
    with torch.no_grad():
        torch.testing.assert_close(spec.program(tree, params), spec.reference(tree, params), **TOL)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), batch_size=st.integers(1, 10))
def test_drnn_random_seeds(seed, batch_size):
    """Tensor-dependent recursion on fibers: equal to the reference, no deadlock, for any seed."""
    from acrobat.models.drnn import DRNNParams, drnn_instances, drnn_reference
    from acrobat.models.drnn_program import drnn
    params = DRNNParams(50, 8, seed=seed)
    batch = drnn_instances(batch_size, 50, seed)
    with torch.no_grad():
        torch.testing.assert_close(drnn.run(batch, params), [drnn_reference(x, params) for x in batch], **TOL)
