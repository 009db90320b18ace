"""Lists of per-instance tensors as operands: stack, segment reductions, softmax, row-wise ops (issue 10 §4).

Each model is checked against plain PyTorch on both backends; a reduction
over a list takes the same number of launches whatever the lists' lengths.
"""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import CompileError, DynamicFallbackWarning, InstanceError, ShapeError
from tests import ragged_progs as rp
from tests.test_tdc import P

STRICT = ab.Options(strict=True)  # the static tier's rejection, not the dynamic tier's run

TOL = {"rtol": 1e-5, "atol": 1e-6}
PROGRAMS = [rp.summed, rp.pooled, rp.attention, rp.rowwise, rp.pointer, rp.reduce_along_rows_fixed]


def _params() -> P:
    return P(hidden=4, vocab=16)


def _batch(n: int, seed: int, longest: int = 9) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(16) for _ in range(rng.randint(1, longest))] for _ in range(n)]


def _line(key: str) -> int:
    with open(rp.__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# M:{key}"))


def _check(prog, batch, backend="eager", stats=None):
    p = _params()
    with torch.inference_mode():
        got = prog.run(batch, p, backend=backend, stats=stats)
        want = [prog(x, p) for x in batch]
    torch.testing.assert_close(got, want, **TOL)
    return got


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("size", [1, 8, 64])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_list_operands_match_plain_pytorch(prog, size, backend):
    _check(prog, _batch(size, seed=size), backend)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 12), st.integers(0, 10_000), st.sampled_from(PROGRAMS))
def test_list_operands_on_random_lengths(n, seed, prog):
    _check(prog, _batch(n, seed))


@pytest.mark.parametrize("prog", [rp.summed, rp.pooled], ids=lambda p: p.__name__)
def test_launches_do_not_grow_with_list_length(prog):
    """One launch per segment operator for the whole batch: lists of 3 or of 40 items, the same launches."""
    launches = []
    for longest in (3, 40):
        stats = ab.RunStats()
        _check(prog, [[1] * longest, [2] * (longest // 2 + 1), [3]], stats=stats)
        launches.append(stats.kernel_launches)
    assert launches[0] == launches[1]


def test_an_operand_as_wide_as_the_list_is_an_error_not_a_guess():
    with pytest.raises(ShapeError) as err:
        _check(rp.broadcast_into_list_axis, _batch(3, 0))
    assert f"ragged_progs.py:{_line('broadcast')}" in str(err.value) and "list axis" in str(err.value)


def test_a_reduction_not_over_the_list_axis_is_rejected_and_the_fix_runs():
    with pytest.raises(CompileError) as err:
        rp.reduce_along_rows.compile(1, STRICT)
    assert f"ragged_progs.py:{_line('along_rows')}" in str(err.value) and "loop over the list" in str(err.value)
    _check(rp.reduce_along_rows_fixed, _batch(5, 1))


def test_sum_of_an_empty_list_names_the_instance():
    with pytest.raises(InstanceError) as err:
        _check(rp.empty_list, [[1, 2], []])
    assert "instance 1" in str(err.value) and f"ragged_progs.py:{_line('empty')}" in str(err.value)


def test_argmax_without_dim_of_wide_rows_is_an_error():
    with pytest.raises(ShapeError) as err:
        _check(rp.flat_argmax, _batch(3, 0))
    assert "write dim=0" in str(err.value) and f"ragged_progs.py:{_line('flat')}" in str(err.value)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_cat_of_a_list_is_a_fold_of_cats(backend):
    """``torch.cat(xs)`` of a per-instance list (``acrobat.analysis.folds``; rejected before, pointing at stack)."""
    _check_strict(rp.concatenated, [[1, 2, 3], [4], [5, 6, 7, 8, 9]], backend)


def test_stacks_with_rows_of_different_rank_are_an_error_not_a_guess():
    # k == H: PyTorch runs it, meaning other math than row by row: the static tier raises its limit (strict), and
    # by default the batch reruns in the dynamic tier, which computes what the plain calls compute
    batch = [[1, 2, 3, 4], [5, 6, 7, 8]]
    with pytest.raises(ShapeError) as err, torch.inference_mode():
        rp.mismatched_ranks.run(batch, _params(), options=ab.Options(strict=True))
    assert f"ragged_progs.py:{_line('ranks')}" in str(err.value) and "one rank" in str(err.value)
    with pytest.warns(DynamicFallbackWarning, match="a limit of the static tier(.|\n)*one rank"):
        _check(rp.mismatched_ranks, batch)


class _Modules(P):
    def __init__(self) -> None:
        super().__init__(hidden=4, vocab=16)
        self.head = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
        self.norm = torch.nn.LayerNorm(4)
        self.mix = torch.nn.Softmax(dim=0)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_modules_act_on_a_stacked_list_row_by_row(backend):
    p = _Modules()
    batch = _batch(8, 3)
    with torch.inference_mode():
        got = rp.module_rows.run(batch, p, backend=backend)
        want = [rp.module_rows(x, p) for x in batch]
    torch.testing.assert_close(got, want, **TOL)


def test_a_module_that_mixes_rows_is_rejected():
    with pytest.raises(CompileError) as err, torch.no_grad():
        rp.module_not_rowwise.run(_batch(3, 0), _Modules(), options=STRICT)
    assert f"ragged_progs.py:{_line('mix')}" in str(err.value) and "loop over the list" in str(err.value)


CUTS = [rp.cut_by_length, rp.cut_with_bounds_and_step, rp.cut_of_an_instance_tensor]


def _check_strict(prog, batch, backend="eager"):
    """``prog`` in the static tier (strict: no dynamic tier) against its plain calls."""
    p, stats = _params(), ab.RunStats()
    with torch.inference_mode():
        got = prog.run(batch, p, backend=backend, options=STRICT, stats=stats)
        want = [prog(x, p) for x in batch]
    torch.testing.assert_close(got, want, **TOL)
    assert stats.dynamic is None


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("size", [1, 8, 64])
@pytest.mark.parametrize("prog", CUTS, ids=lambda p: p.__name__)
def test_a_cut_by_instance_bounds_is_a_stacked_list(prog, size, backend):
    """``W[:len(toks)]``, ``W[a:b:s]``, ``x[:n]`` with per-instance bounds run statically (issue 18 §2)."""
    _check_strict(prog, _batch(size, seed=size), backend)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 12), st.integers(0, 10_000), st.sampled_from(CUTS))
def test_a_cut_on_random_lengths(n, seed, prog):
    _check_strict(prog, _batch(n, seed, longest=12))


def test_a_cut_that_keeps_no_rows_names_the_instance():
    with pytest.raises(InstanceError) as err:
        _check_strict(rp.empty_cut, [[1, 2], [3]])
    assert "instance 1" in str(err.value) and f"ragged_progs.py:{_line('empty_cut')}" in str(err.value)
