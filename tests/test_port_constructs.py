"""Constructs the public models of ``ports/`` use, static (issue 18, section 2): a module-level dict, list or
tuple of host data read in the model (``acrobat.frontend.globals``), a variable rebound from host data to a
tensor at a function's top level, or twice in one branch, or a list's name reused by a later loop
(``acrobat.analysis.versions``), ``torch.cat`` of a list variable (``acrobat.analysis.folds``), and a submodule whose ``forward`` is an
``@acrobat.function`` called by its attribute (``self.encoder(tree, xs)``, ``kinds._Analyzer.method_call``).

Each compiles statically (``Options(strict=True)``) and equals the program run as plain Python per instance,
on both backends; a rebinding the static tier cannot split is rejected with file:line and a fix that compiles.
"""

from __future__ import annotations

import os
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from ports.treelstm.model import SimilarityTreeLSTM, sim
from ports.treelstm.tree import Tree
from tests import port_progs as pp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)
FORMS = ["global_vocab", "global_sizes", "greedy_until_end", "rebound_parameter", "rebound_twice",
         "rebound_in_branch_fixed", "rebound_in_else", "list_name_reused", "cat_of_list"]


def _tokens(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 7))] for _ in range(n)]


def _check(prog, batch: list, p, backend: str) -> ab.RunStats:
    """Assert ``prog`` batched (strict, on ``backend``) equals it run as plain Python per instance; its stats."""
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = prog.run(batch, p, backend=backend, options=STRICT, stats=stats)
    torch.testing.assert_close(got, want, **TOL)
    return stats


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", FORMS)
def test_construct_runs_statically_and_equals_plain(name, backend):
    stats = _check(getattr(pp, name), _tokens(9, len(name)), pp.Params(), backend)
    assert stats.dynamic is None


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=7), min_size=1, max_size=6),
       st.sampled_from(["global_vocab", "greedy_until_end", "rebound_parameter", "rebound_twice", "rebound_in_else",
                        "list_name_reused", "cat_of_list"]))
def test_any_batch_equals_plain(batch, name):
    _check(getattr(pp, name), batch, pp.Params(), "eager")


def test_a_global_is_read_at_each_run(monkeypatch):
    # a module that rebinds its global between runs: the compiled program reads the value of that run
    batch, p = _tokens(5, 3), pp.Params()
    _check(pp.global_sizes, batch, p, "eager")
    monkeypatch.setattr(pp, "SCALES", [3.0, -1.0])
    monkeypatch.setattr(pp, "SIZES", (1, 4))
    _check(pp.global_sizes, batch, p, "eager")


def _marked(key: str) -> str:
    """``file:line:`` of the line of ``port_progs.py`` marked ``# M:<key>``."""
    with open(pp.__file__, encoding="utf-8") as f:
        line = next(i + 1 for i, s in enumerate(f.read().splitlines()) if s.rstrip().endswith(f"# M:{key}"))
    return f"{os.path.abspath(pp.__file__)}:{line}:"


def test_a_global_list_of_tensors_is_still_rejected_with_its_line():
    with pytest.raises(ab.CompileError) as info:
        pp.global_tensors.run(_tokens(2, 0), pp.Params(), options=STRICT)
    assert _marked("tensors") in str(info.value)
    assert "global `TABLE` of type list used as a value: pass tensors and modules in as model parameters" in str(
        info.value)


def _trees(n: int, seed: int) -> list:
    """``n`` pairs ``(ltree, linputs, rtree, rinputs)``: binary trees of nested pairs over 5 leaf positions, of
    shapes that differ per instance (sentences of one length: an embedding of a per-instance length is the dense
    code over variable-length data that issue 18 lists apart)."""
    rng = random.Random(seed)

    def tree(lo: int, hi: int):
        if hi - lo == 1:
            return lo
        mid = rng.randint(lo + 1, hi - 1)
        return (tree(lo, mid), tree(mid, hi))

    out = []
    for _ in range(n):
        a = b = 5
        out.append((tree(0, a), torch.randint(10, (a,)), tree(0, b), torch.randint(10, (b,))))
    return out


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_submodule_forward_called_by_its_attribute_is_analysed(backend):
    torch.manual_seed(0)
    stats = _check(pp.similarity, _trees(8, 1), pp.Similarity(), backend)
    assert stats.dynamic is None


def test_submodule_gradients_equal_plain():
    torch.manual_seed(0)
    batch, model = _trees(6, 2), pp.Similarity().double()
    want = torch.autograd.grad(sum(pp.similarity(x, model).sum() for x in batch), list(model.parameters()))
    got = torch.autograd.grad(sum(y.sum() for y in pp.similarity.run(batch, model, options=STRICT)),
                              list(model.parameters()))
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_rebinding_in_a_branch_names_its_line_and_the_fix_compiles():
    with pytest.raises(ab.CompileError) as info:
        pp.rebound_in_branch.run(_tokens(3, 0), pp.Params(), options=STRICT)
    assert _marked("branch") in str(info.value)
    assert "`x` holds host data in one place and a tensor in another" in str(info.value)
    assert "use separate variables" in str(info.value)
    _check(pp.rebound_in_branch_fixed, _tokens(7, 0), pp.Params(), "eager")


@pytest.mark.parametrize("name", ["rebound_in_else", "list_name_reused", "cat_of_list"])
def test_survey_constructs_train_and_take_one_instance(name):
    """Gradients of the batched run equal the plain calls' (strict), and a batch of one instance runs."""
    prog, p, batch = getattr(pp, name), pp.Params(), _tokens(5, 7)
    sum(prog(x, p).sum() for x in batch).backward()
    want = {n: q.grad.clone() for n, q in p.named_parameters() if q.grad is not None}
    p.zero_grad()
    sum(r.sum() for r in prog.run(batch, p, options=STRICT)).backward()
    for n, g in want.items():
        torch.testing.assert_close(dict(p.named_parameters())[n].grad, g, **TOL, msg=n)
    _check(prog, batch[:1], p, "eager")


# -- the child-sum TreeLSTM as treelstm.pytorch writes it (issue 18 §2: stacked lists) -----------------------------


def _childsum_trees(n: int, seed: int) -> list:
    """``n`` trees of word ids whose nodes have 0 to 3 children, of shapes that differ per instance."""
    rng = random.Random(seed)

    def tree(depth: int) -> pp.Tree:
        kids = 0 if depth > 2 or rng.random() < 0.3 else rng.randint(1, 3)
        return pp.Tree(rng.randrange(10), [tree(depth + 1) for _ in range(kids)])
    return [tree(0) for _ in range(n)]


_TREES = st.recursive(st.integers(0, 9).map(lambda w: pp.Tree(w, [])),
                      lambda kids: st.builds(pp.Tree, st.integers(0, 9), st.lists(kids, min_size=1, max_size=3)),
                      max_leaves=8)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n,seed", [(1, 5), (7, 7)])  # seed 5: a tree whose nodes at depth 1 have 3, 2 and 1 children
def test_childsum_treelstm_runs_statically_and_equals_plain(n, seed, backend):
    """``torch.cat`` of unzipped ``(1, H)`` children's states, a leaf's ``torch.zeros(1, H)`` and
    ``.repeat(len(child_h), 1)``: stacked lists, batched in the static tier."""
    torch.manual_seed(0)
    stats = _check(pp.childsum, _childsum_trees(n, seed), pp.ChildSum(), backend)
    assert stats.dynamic is None


def test_childsum_treelstm_gradients_equal_plain():
    torch.manual_seed(0)
    batch, model = _childsum_trees(7, 3), pp.ChildSum()  # float32: the model's own torch.zeros(1, H) is
    want = torch.autograd.grad(sum(pp.childsum(x, model).sum() for x in batch), list(model.parameters()))
    got = torch.autograd.grad(sum(y.sum() for y in pp.childsum.run(batch, model, options=STRICT)),
                              list(model.parameters()))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(st.lists(_TREES, min_size=1, max_size=5))
def test_childsum_any_trees_equal_plain(batch):
    torch.manual_seed(0)
    _check(pp.childsum, batch, pp.ChildSum(), "eager")


@pytest.mark.parametrize("name,shape", [("unzipped_wide_items", "(2, 2)"), ("repeat_of_two_rows", "(2, 4)")])
def test_two_rows_where_a_stacked_list_takes_one_are_the_static_limit(name, shape):
    """Unzipped items, or a repeated tensor, of two rows: the run-time check refuses them under strict
    (file:line); by default the dynamic tier runs the batch and equals plain calls."""
    prog, batch, p = getattr(pp, name), _tokens(4, 5), pp.Params()
    with pytest.raises(ab.ShapeError) as info:
        with torch.no_grad():
            prog.run(batch, p, options=STRICT)
    assert f"shape {shape}" in str(info.value) and "which needs a shape (1, ...)" in str(info.value)
    assert "port_progs.py" in str(info.value)
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
        stats = ab.RunStats()
        got = prog.run(batch, p, stats=stats)
    torch.testing.assert_close(got, want, **TOL)
    assert stats.dynamic is not None


# -- treelstm.pytorch as its authors wrote it (ports/treelstm): `model(*pair)`, `map(lambda ...)`, ------------------
# -- `x.new(1, d).fill_(0.)`, an embedding of the instance's sentence of per-instance length ------------------------


def _dep_tree(rng: random.Random, n: int) -> Tree:
    """A dependency tree (the port's own ``Tree``) over ``n`` words: word 0 the root, every other word under a
    random earlier one; ``idx`` the word's position."""
    nodes = [Tree() for _ in range(n)]
    for i, t in enumerate(nodes):
        t.idx = i
    for i in range(1, n):
        nodes[rng.randrange(i)].add_child(nodes[i])
    return nodes[0]


def _dep_model() -> SimilarityTreeLSTM:
    """treelstm.pytorch's model (``ports/treelstm/model.py``, as its authors wrote it), small."""
    return SimilarityTreeLSTM(10, 4, 4, 8, 3, False, False)


def _dep_pairs(n: int, seed: int) -> list:
    """``n`` instances ``(ltree, linputs, rtree, rinputs)`` of sentences of 1 to 7 words each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(1, 7), rng.randint(1, 7)
        out.append((_dep_tree(rng, a), torch.tensor([rng.randrange(10) for _ in range(a)]),
                    _dep_tree(rng, b), torch.tensor([rng.randrange(10) for _ in range(b)])))
    return out


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 3, 17])
def test_treelstm_as_written_runs_statically_and_equals_plain(n, backend):
    torch.manual_seed(0)
    stats = _check(sim, _dep_pairs(n, n), _dep_model(), backend)
    assert stats.dynamic is None


def test_treelstm_as_written_gradients_equal_plain():
    torch.manual_seed(0)
    batch, model = _dep_pairs(6, 4), _dep_model().double()
    with ab_default_double():
        want = torch.autograd.grad(sum(sim(x, model).sum() for x in batch), list(model.parameters()))
        got = torch.autograd.grad(sum(y.sum() for y in sim.run(batch, model, options=STRICT)),
                                  list(model.parameters()))
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def ab_default_double():
    """float64 as torch's default dtype (the model's own ``x.new(1, d)`` takes its input's dtype, but a check
    in float64 must not meet a float32 tensor made elsewhere)."""
    from ports.check import default_dtype
    return default_dtype(torch.float64)


def _star_pairs(n: int, seed: int) -> list:
    rng = random.Random(seed)
    return [([rng.randrange(10) for _ in range(rng.randint(1, 4))], rng.uniform(-1, 1),
             [rng.randrange(10) for _ in range(rng.randint(1, 4))]) for _ in range(n)]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 3, 17])
def test_star_of_the_instance_unpacks_the_batchs_arity(n, backend):
    stats = _check(pp.star_instance, _star_pairs(n, n), pp.Params(), backend)
    assert stats.dynamic is None


def test_star_of_the_instance_is_checked_per_batch():
    """The arity is a fact of each batch: batches of tuples (or lists) of two and of three items each compile
    statically; a batch mixing them is the static tier's limit (strict names the line; by default the dynamic tier
    runs it and equals plain calls)."""
    p = pp.Params()
    for batch in ([(1, 2), (3, 4), (5, 6)], [[1, 2, 3], (4, 5, 6)], [(7, 8)]):
        assert _check(pp.star_any, batch, p, "eager").dynamic is None
    mixed = [(1, 2), (3, 4, 5)]
    with pytest.raises(ab.CompileError) as info:
        pp.star_any.run(mixed, p, options=STRICT)
    assert _marked("star") in str(info.value) and "`*` unpacks a host" in str(info.value)
    stats = ab.RunStats()
    with torch.no_grad():
        torch.testing.assert_close(pp.star_any.run(mixed, p, stats=stats), [pp.star_any(x, p) for x in mixed])
    assert stats.dynamic is not None or stats.plain is not None


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", ["mapped_lambda", "new_filled", "repeat_of_a_vector"])
@pytest.mark.parametrize("n", [1, 3, 17])
def test_treelstm_constructs_run_statically_and_equal_plain(name, n, backend):
    stats = _check(getattr(pp, name), _tokens(n, n + len(name)), pp.Params(), backend)
    assert stats.dynamic is None


def _sentences(n: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 7)
        out.append((torch.tensor([rng.randrange(10) for _ in range(k)]), rng.randrange(k)))
    return out


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [3, 17])
def test_embedding_of_the_instances_ragged_sentence_is_a_stacked_list(n, backend):
    stats = _check(pp.embedded_sentence, _sentences(n, n), pp.Params(), backend)
    assert stats.dynamic is None


@pytest.mark.parametrize("name,batch", [
    ("mapped_lambda", lambda: _tokens(5, 2)), ("new_filled", lambda: _tokens(5, 3)),
    ("repeat_of_a_vector", lambda: _tokens(5, 4)), ("star_instance", lambda: _star_pairs(5, 5)),
    ("embedded_sentence", lambda: _sentences(5, 6))])
def test_treelstm_constructs_gradients_equal_plain(name, batch):
    prog, p, xs = getattr(pp, name), pp.Params(), batch()
    sum(prog(x, p).sum() for x in xs).backward()
    want = {n: q.grad.clone() for n, q in p.named_parameters() if q.grad is not None}
    p.zero_grad()
    sum(r.sum() for r in prog.run(xs, p, options=STRICT)).backward()
    for n, g in want.items():
        torch.testing.assert_close(dict(p.named_parameters())[n].grad, g, **TOL, msg=n)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 6), st.integers(0, 10**6))
def test_treelstm_as_written_any_batch_equals_plain(n, seed):
    torch.manual_seed(0)
    _check(sim, _dep_pairs(n, seed), _dep_model(), "eager")


def test_a_compile_without_the_batch_does_not_hold_for_a_batch():
    """``explain`` without a batch cannot know the instance's arity (the dynamic tier, it says); a run with a batch,
    after it, compiles statically, and ``explain(instances=...)`` says so."""
    model, batch = _dep_model(), _dep_pairs(3, 9)
    prog = ab.program(sim.fn)
    assert "runs in the dynamic tier" in prog.explain(model)
    stats = ab.RunStats()
    with torch.no_grad():
        torch.testing.assert_close(prog.run(batch, model, stats=stats), [prog(x, model) for x in batch], **TOL)
    assert stats.dynamic is None and stats.plain is None
    assert "runs in the static tier" in prog.explain(model, instances=batch)


# -- `.data` read as `.detach()` (nmt_attention's `decoded.data.tolist()`) ------------------------------------------


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 3, 17])
def test_data_of_a_tensor_is_read_as_detach(n, backend):
    stats = _check(pp.data_read, _tokens(n, 40 + n), pp.Params(), backend)
    assert stats.dynamic is None


def test_data_of_a_tensor_cuts_the_gradient_as_plain():
    p, batch = pp.Params(), _tokens(6, 41)
    sum(sum(o.sum() for o in pp.data_read(x, p)) for x in batch).backward()
    want = {n: q.grad.clone() for n, q in p.named_parameters() if q.grad is not None}
    p.zero_grad()
    sum(sum(o.sum() for o in r) for r in pp.data_read.run(batch, p, options=STRICT)).backward()
    for n, g in want.items():
        torch.testing.assert_close(dict(p.named_parameters())[n].grad, g, **TOL, msg=n)


def test_data_of_a_tensor_written_in_place_is_rejected_with_its_line():
    with pytest.raises(ab.CompileError) as info:
        pp.data_then_written.run(_tokens(2, 0), pp.Params(), options=STRICT)
    assert _marked("data") in str(info.value) and "`.data`" in str(info.value)
    batch = _tokens(3, 1)
    with torch.no_grad():
        torch.testing.assert_close(pp.data_then_written.run(batch, pp.Params()),
                                   [pp.data_then_written(x, pp.Params()) for x in batch])


# -- host data joined with a list of host data (the RNTN's `Trees = [Trees]`) ---------------------------------------


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 3, 17])
def test_host_data_or_a_list_of_it_is_host_data(n, backend):
    rng = random.Random(n)
    batch = [rng.randrange(10) if rng.random() < 0.5 else [rng.randrange(10) for _ in range(rng.randint(1, 4))]
             for _ in range(n)]
    stats = _check(pp.wrapped_in_a_list, batch, pp.Params(), backend)
    assert stats.dynamic is None
