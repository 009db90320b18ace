"""Negative dims of a stacked list, reductions kept (keepdim) and broadcast back against it, indexing within its
rows (``S[:, j]``), and torch.cat of unit-axis items in the static tier (issue 18 §2).

Every program runs with ``Options(strict=True)``, so a fall back to the
dynamic tier fails the test, and is checked against plain per-instance
PyTorch on both backends; list lengths come from hypothesis, 0 included
(plain PyTorch raises on an empty stack or cat, and so must the batched run).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import CompileError, DynamicFallbackWarning, ShapeError
from tests import ragged_progs as rp
from tests.test_ragged import _line
from tests.test_tdc import P

STRICT = ab.Options(strict=True)
TOL = {"rtol": 1e-5, "atol": 1e-6}
PROGRAMS = [rp.scalar_rows, rp.vector_rows, rp.cat_unsqueezed, rp.cat_returned, rp.full_reductions,
            rp.cat_of_a_list_variable, rp.kept_reductions, rp.columns]


def _params() -> P:
    return P(hidden=4, vocab=16)


def _check(prog, batch: list[list[int]], backend: str) -> None:
    p = _params()
    with torch.inference_mode():
        got = prog.run(batch, p, backend=backend, options=STRICT)
        want = [prog(x, p) for x in batch]
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_new_forms_match_plain_pytorch(prog, backend):
    _check(prog, [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10, 11]], backend)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(0, 15), max_size=7, unique=True), min_size=1, max_size=6),
       st.sampled_from(PROGRAMS), st.sampled_from(["eager", "compiled"]))
def test_new_forms_on_random_lengths(batch, prog, backend):
    """Tokens differ within a list: of two equal items, a batched launch may compute one an ulp apart from the
    other (dim=0 alike), which would make max's index of a tie differ from plain PyTorch's."""
    empty = [i for i, toks in enumerate(batch) if not toks]
    if not empty:
        _check(prog, batch, backend)
        return
    with pytest.raises((RuntimeError, ValueError)) as plain:  # plain PyTorch: torch.stack / torch.cat of an empty list
        prog([], _params())
    with pytest.raises(Exception) as err:  # the batched run fails too: PyTorch's error, or one naming the instance
        _check(prog, batch, backend)
    assert str(err.value) == str(plain.value) or any(f"instance {i}" in str(err.value) for i in empty), str(err.value)


def test_gradients_through_negative_dims_equal_plain_pytorch():
    """softmax over a row axis runs over all rows at once; its gradients are those of the per-instance program."""
    batch = [[1, 2, 3], [4], [5, 6]]
    for prog in (rp.scalar_rows, rp.vector_rows, rp.cat_unsqueezed, rp.full_reductions, rp.kept_reductions,
                 rp.columns):
        want_p, got_p = _params(), _params()
        sum(sum(o.float().sum() for o in prog(x, want_p)) for x in batch).backward()
        outs = prog.run(batch, got_p, backend="eager", options=STRICT)
        sum(sum(o.float().sum() for o in out) for out in outs).backward()
        for (n, want), (_, got) in zip(want_p.named_parameters(), got_p.named_parameters()):
            if want.grad is not None:
                torch.testing.assert_close(got.grad, want.grad, **TOL, msg=lambda m: f"{prog.__name__} {n}: {m}")


@pytest.mark.parametrize("prog, key, words", [
    (rp.neg_dim_unknown_rank, "unknown_rank", "rank of the list's items is not known"),
    (rp.neg_dim_of_each_item, "each_item", "reduces each item"),
    (rp.neg_dim_out_of_range, "out_of_range", "out of range"),
    (rp.column_by_tensor, "column_by_tensor", "by host ints and slices"),
], ids=["unknown-rank", "each-item", "out-of-range", "column-by-tensor"])
def test_forms_still_rejected_name_the_line_and_why(prog, key, words):
    with pytest.raises(CompileError) as err:
        prog.compile(1, STRICT)
    assert f"ragged_progs.py:{_line(key)}" in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_cat_of_a_list_not_rewritten_to_a_stack_is_a_fold(backend):
    """torch.cat of a list read elsewhere too, or along dim 1: no stack, but a left fold of two-item cats
    (acrobat.analysis.folds; they were rejected before): the plain calls' results, in the static tier where the
    instances' lists agree in length, and by default also where they do not (the static tier meets its limit,
    tensors of per-instance shapes in one block, and the dynamic tier reruns the batch)."""
    p = _params()
    same, mixed = [[1, 2], [3, 4], [5, 6]], [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]]
    for prog in (rp.cat_of_a_list_read_twice, rp.cat_along_rows):
        with torch.inference_mode():
            got = prog.run(same, p, backend=backend, options=STRICT)
            torch.testing.assert_close(got, [prog(x, p) for x in same], **TOL)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DynamicFallbackWarning)
                got = prog.run(mixed, p, backend=backend)
            torch.testing.assert_close(got, [prog(x, p) for x in mixed], **TOL)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_an_index_reaching_the_list_axis_is_the_static_tiers_limit(backend):
    """``S[..., 0]`` of 0-D rows would index the list: strict names it and the line, the default run reruns the
    batch in the dynamic tier with the plain calls' results."""
    where = rf"would reach its list axis(.|\n)*ragged_progs.py:{_line('ellipsis_list_axis')}"
    with pytest.raises(ShapeError, match=where):
        _check(rp.ellipsis_into_the_list_axis, [[1, 2], [3]], backend)
    p, stats = _params(), ab.RunStats()
    with warnings.catch_warnings(), torch.inference_mode():  # a DynamicFallbackWarning, or dynamic from the start
        warnings.simplefilter("ignore", DynamicFallbackWarning)  # (the limit of an earlier run sticks)
        got = rp.ellipsis_into_the_list_axis.run([[1, 2], [3]], p, backend=backend, stats=stats)
    torch.testing.assert_close(got, [rp.ellipsis_into_the_list_axis(x, p) for x in [[1, 2], [3]]])
    assert stats.dynamic is not None


@pytest.mark.parametrize("name", ["relational_gnn"])
def test_example_readout_runs_in_the_static_tier(name):
    """relational_gnn's readout, torch.cat of unsqueezed node states then max over dim 0, is static now."""
    from examples import load
    ex = load(name)
    assert "runs in the static tier" in ex.program.explain(ex.make_params(0))
