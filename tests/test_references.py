"""The hand-batched TreeLSTM / BiRNN equal their per-instance references."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.data.synthetic import synthetic_trees
from acrobat.data.tree import Tree
from acrobat.models import MODELS
from acrobat.models.birnn import BiRNNParams, birnn_hand_batched, birnn_reference
from acrobat.models.params import SIZES, seeded_parameter
from acrobat.models.treelstm import TreeLSTMParams, treelstm_hand_batched, treelstm_reference

VOCAB = 50
TOL = {"rtol": 1e-4, "atol": 1e-5}


def random_tree(rng: random.Random, n_words: int, vocab: int = VOCAB) -> Tree:
    """A binary tree over ``n_words`` random word ids, split at random points."""
    if n_words == 1:
        wid = rng.randrange(vocab)
        return Tree(label=rng.randrange(5), word=f"w{wid}", word_id=wid)
    k = rng.randint(1, n_words - 1)
    return Tree(
        label=rng.randrange(5),
        left=random_tree(rng, k, vocab),
        right=random_tree(rng, n_words - k, vocab),
    )


def random_trees(seed: int, count: int, max_words: int = 40) -> list[Tree]:
    rng = random.Random(seed)
    return [random_tree(rng, rng.randint(1, max_words)) for _ in range(count)]


def random_sentences(seed: int, count: int, max_words: int = 40) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(VOCAB) for _ in range(rng.randint(1, max_words))] for _ in range(count)]


def check_treelstm(trees: list[Tree], p: TreeLSTMParams) -> None:
    got = treelstm_hand_batched(trees, p)
    assert len(got) == len(trees)
    for tree, (logits, h) in zip(trees, got):
        ref_logits, ref_h = treelstm_reference(tree, p)
        torch.testing.assert_close(logits, ref_logits, **TOL)
        torch.testing.assert_close(h, ref_h, **TOL)


def check_birnn(sentences: list[list[int]], p: BiRNNParams) -> None:
    got = birnn_hand_batched(sentences, p)
    assert len(got) == len(sentences)
    for tokens, outs in zip(sentences, got):
        ref = birnn_reference(tokens, p)
        assert len(outs) == len(ref) == len(tokens)
        for out, r in zip(outs, ref):
            torch.testing.assert_close(out, r, **TOL)


def test_sizes_and_seeded_parameter() -> None:
    assert SIZES == {"small": 256, "large": 512}
    a = seeded_parameter(torch.Generator().manual_seed(3), 4, 5, scale=0.5)
    b = seeded_parameter(torch.Generator().manual_seed(3), 4, 5, scale=0.5)
    assert isinstance(a, torch.nn.Parameter) and a.dtype == torch.float32 and a.shape == (4, 5)
    assert torch.equal(a, b)


@pytest.mark.parametrize("hidden", [16, 256])
@pytest.mark.parametrize("batch", [1, 3, 17])
def test_treelstm_hand_batched_matches_reference(hidden: int, batch: int) -> None:
    p = TreeLSTMParams(VOCAB, hidden, seed=hidden + batch)
    with torch.no_grad():
        check_treelstm(random_trees(batch, batch), p)


@pytest.mark.parametrize("hidden", [16, 256])
@pytest.mark.parametrize("batch", [1, 3, 17])
def test_birnn_hand_batched_matches_reference(hidden: int, batch: int) -> None:
    p = BiRNNParams(VOCAB, hidden, seed=hidden + batch)
    with torch.no_grad():
        check_birnn(random_sentences(batch, batch), p)


def test_treelstm_params_layout_and_determinism() -> None:
    p = TreeLSTMParams(VOCAB, 8, num_classes=3, seed=1)
    shapes = {name: tuple(t.shape) for name, t in p.named_parameters()}
    assert list(shapes) == ["emb", "W_iou", "b_iou", "U_iou", "U_f", "b_f", "W_out", "b_out"]
    assert shapes == {
        "emb": (VOCAB, 8),
        "W_iou": (8, 24),
        "b_iou": (24,),
        "U_iou": (16, 24),
        "U_f": (16, 16),
        "b_f": (16,),
        "W_out": (8, 3),
        "b_out": (3,),
    }
    assert p.hidden == 8
    assert all(t.dtype == torch.float32 for t in p.parameters())
    _assert_seeded(TreeLSTMParams, p)


def _assert_seeded(cls, p) -> None:
    """``p`` (seed 1) equals a fresh seed-1 instance and differs from seed 2 in every parameter."""
    same = cls(VOCAB, 8, num_classes=3, seed=1)
    other = cls(VOCAB, 8, num_classes=3, seed=2)
    for a, b, c in zip(p.parameters(), same.parameters(), other.parameters()):
        assert torch.equal(a, b)
        assert not torch.equal(a, c)


def test_birnn_params_layout_and_determinism() -> None:
    p = BiRNNParams(VOCAB, 8, num_classes=3, seed=1)
    shapes = {name: tuple(t.shape) for name, t in p.named_parameters()}
    assert shapes == {
        "emb": (VOCAB, 8),
        "fwd.W": (8, 8),
        "fwd.U": (8, 8),
        "fwd.b": (8,),
        "fwd.h0": (8,),
        "bwd.W": (8, 8),
        "bwd.U": (8, 8),
        "bwd.b": (8,),
        "bwd.h0": (8,),
        "W_out": (16, 3),
        "b_out": (3,),
    }
    assert p.hidden == 8
    assert not torch.equal(p.fwd.W, p.bwd.W)
    _assert_seeded(BiRNNParams, p)


def test_output_shapes() -> None:
    tp = TreeLSTMParams(VOCAB, 16, num_classes=5)
    tree = random_trees(0, 1)[0]
    logits, h = treelstm_reference(tree, tp)
    assert logits.shape == (5,) and h.shape == (16,)
    (logits_b, h_b), = treelstm_hand_batched([tree], tp)
    assert logits_b.shape == (5,) and h_b.shape == (16,)

    bp = BiRNNParams(VOCAB, 16, num_classes=5)
    sentence = [1, 2, 3, 4]
    ref = birnn_reference(sentence, bp)
    (batched,) = birnn_hand_batched([sentence], bp)
    assert len(ref) == len(batched) == 4
    assert all(t.shape == (5,) for t in ref + batched)
    assert treelstm_hand_batched([], tp) == [] and birnn_hand_batched([], bp) == []


def test_single_leaf_tree_and_repeated_tree() -> None:
    p = TreeLSTMParams(VOCAB, 16)
    leaf = Tree(label=0, word="w", word_id=7)
    big = random_trees(5, 1)[0]
    with torch.no_grad():
        check_treelstm([leaf, big, big, leaf], p)


def test_birnn_rejects_empty_sentence() -> None:
    with pytest.raises(ValueError, match="sentence 1 is empty"):
        birnn_hand_batched([[1], []], BiRNNParams(VOCAB, 8))


def test_gradients_match_reference() -> None:
    """The hand-batched versions are differentiable and give the reference's gradients."""
    tp = TreeLSTMParams(VOCAB, 8)
    trees = random_trees(11, 4, max_words=12)
    ref = torch.autograd.grad(
        sum(treelstm_reference(t, tp)[0].sum() for t in trees), list(tp.parameters())
    )
    got = torch.autograd.grad(
        sum(logits.sum() for logits, _ in treelstm_hand_batched(trees, tp)), list(tp.parameters())
    )
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, **TOL)

    bp = BiRNNParams(VOCAB, 8)
    sentences = random_sentences(11, 4, max_words=12)
    ref = torch.autograd.grad(
        sum(o.sum() for s in sentences for o in birnn_reference(s, bp)), list(bp.parameters())
    )
    got = torch.autograd.grad(
        sum(o.sum() for outs in birnn_hand_batched(sentences, bp) for o in outs),
        list(bp.parameters()),
    )
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, **TOL)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), batch=st.integers(1, 10), max_words=st.integers(1, 30))
def test_treelstm_property(seed: int, batch: int, max_words: int) -> None:
    p = TreeLSTMParams(VOCAB, 8, seed=seed % 7)
    with torch.no_grad():
        check_treelstm(random_trees(seed, batch, max_words), p)


@settings(max_examples=25, deadline=None)
@given(
    sentences=st.lists(
        st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=30), min_size=1, max_size=10
    )
)
def test_birnn_property(sentences: list[list[int]]) -> None:
    with torch.no_grad():
        check_birnn(sentences, BiRNNParams(VOCAB, 8))


@pytest.mark.parametrize("name", [n for n, m in MODELS.items() if m.hand_batched is not None])
def test_every_hand_batched_model_equals_its_reference(name) -> None:
    """The expert baselines compute exactly what the per-instance references do."""
    spec = MODELS[name]
    trees = synthetic_trees(6, seed=3, vocab_size=VOCAB)
    params = spec.make_params(VOCAB, 16, 0)
    batch = spec.instances(trees)
    with torch.no_grad():
        torch.testing.assert_close(spec.hand_batched(batch, params), [spec.reference(x, params) for x in batch],
                                   rtol=1e-4, atol=1e-5)
