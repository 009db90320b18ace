"""Operators within the rows of a stacked list, by rules (``acrobat.analysis.rowops``, issue 18 §2 and §3).

Every program runs with ``Options(strict=True)``, so a fall back to the
dynamic tier fails the test, and is checked against plain per-instance
PyTorch on both backends at batch 1, 3 and 17, list lengths 0, 1 and 5 and
lengths from hypothesis (plain PyTorch raises on an empty stack, and so must
the batched run); gradients of the float operators on the eager backend.
"""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import CompileError, DynamicFallbackWarning, ShapeError
from tests import rowops_progs as rp
from tests.test_tdc import P

STRICT = ab.Options(strict=True)
TOL = {"rtol": 1e-5, "atol": 1e-6}
PROGRAMS = [rp.pointwise, rp.kept_dtypes, rp.scalar_rows, rp.matrix_rows, rp.contractions, rp.joins, rp.parts,
            rp.token_states]
FLOAT_PROGRAMS = [rp.pointwise, rp.scalar_rows, rp.matrix_rows, rp.contractions, rp.joins, rp.parts,
                  rp.token_states]


def _line(key: str) -> int:
    with open(rp.__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# M:{key}"))


def _params() -> P:
    p = P(hidden=4, vocab=16)
    p.heads = 2  # a module's int attribute, as a view's size
    return p


def _batch(n: int, length: int, seed: int = 0) -> list[list[int]]:
    """``n`` token lists of ``length`` tokens, distinct within a list (ties would make max's index differ)."""
    rng = random.Random(seed)
    return [rng.sample(range(16), length) for _ in range(n)]


def _check(prog, batch: list[list[int]], backend: str) -> None:
    p = _params()
    with torch.inference_mode():
        got = prog.run(batch, p, backend=backend, options=STRICT)
        want = [prog(x, p) for x in batch]
    torch.testing.assert_close(got, want, **TOL)


def _check_or_both_raise(prog, batch: list[list[int]], backend: str) -> None:
    """``_check``, or, where a list is empty (plain PyTorch raises on its stack), the batched run raises too."""
    empty = [i for i, toks in enumerate(batch) if not toks]
    if not empty:
        _check(prog, batch, backend)
        return
    with pytest.raises((RuntimeError, ValueError)):
        prog([], _params())
    with pytest.raises(Exception) as err:
        _check(prog, batch, backend)
    assert any(f"instance {i}" in str(err.value) for i in empty) or "stack expects a non-empty" in str(err.value), \
        str(err.value)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_row_operators_match_plain_pytorch(prog, backend):
    _check(prog, [[1, 2, 3], [4], [5, 6, 0, 7, 8]], backend)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n, length", [(1, 5), (3, 1), (17, 5), (3, 0)])
def test_batch_sizes_and_lengths(n, length, backend):
    for prog in PROGRAMS:
        _check_or_both_raise(prog, _batch(n, length, seed=n + length), backend)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(0, 15), max_size=7, unique=True), min_size=1, max_size=6),
       st.sampled_from(PROGRAMS), st.sampled_from(["eager", "compiled"]))
def test_row_operators_on_random_lengths(batch, prog, backend):
    _check_or_both_raise(prog, batch, backend)


@pytest.mark.parametrize("prog", FLOAT_PROGRAMS, ids=lambda p: p.__name__)
def test_gradients_equal_plain_pytorch(prog):
    batch = [[1, 2, 3], [4], [5, 6, 0, 7, 8]]
    want_p, got_p = _params(), _params()
    sum(sum(o.float().sum() for o in prog(x, want_p)) for x in batch).backward()
    outs = prog.run(batch, got_p, backend="eager", options=STRICT)
    sum(sum(o.float().sum() for o in out) for out in outs).backward()
    for (n, want), (_, got) in zip(want_p.named_parameters(), got_p.named_parameters()):
        assert (want.grad is None) == (got.grad is None), n
        if want.grad is not None:
            torch.testing.assert_close(got.grad, want.grad, **TOL, msg=lambda m: f"{prog.__name__} {n}: {m}")


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_random_operators_draw_per_row(backend):
    """rand_like and dropout within the rows: the plain program's shapes and dtypes, values in range, dropout's
    survivors scaled by 1 / (1 - p), and rows that draw different numbers."""
    batch = _batch(3, 5)
    with torch.inference_mode():
        got = rp.random_rows.run(batch, _params(), backend=backend, options=STRICT)
    for (u, d, s), toks in zip(got, batch):
        plain = rp.random_rows(toks, _params())
        assert [t.shape for t in (u, d, s)] == [t.shape for t in plain]
        assert ((u >= 0) & (u < 1)).all() and len({tuple(r.tolist()) for r in u}) == len(toks)
        assert ((d == 0) | torch.isclose(d, 2 * s)).all()


@pytest.mark.parametrize("prog, key, words", [
    (rp.chunk_list_axis, "chunk0", "`.chunk()` with dim 0 (its default) acts on the list axis"),
    (rp.transpose_list_axis, "transpose0", "`.transpose()` with dim 0 acts on the list axis"),
    (rp.flatten_list_axis, "flatten0", "`.flatten()` with dim 0 (its default) acts on the list axis"),
    (rp.permute_list_axis, "permute0", "moves its list axis"),
    (rp.expand_list_axis, "expand0", "write -1 as its first size"),
    (rp.split_by_size, "split_size", "a constant number of parts"),
    (rp.einsum_across_rows, "einsum_rows", "start with the list axis' letter, which no other subscript uses"),
    (rp.cat_with_a_dense_item, "cat_dense", "every item must be a stacked list of the same length"),
], ids=["chunk", "transpose", "flatten", "permute", "expand", "split", "einsum", "cat-dense"])
def test_the_list_axis_stays_rejected_naming_the_line(prog, key, words):
    with pytest.raises(CompileError) as err:
        prog.run([[1, 2]], _params(), options=STRICT)
    assert f"rowops_progs.py:{_line(key)}" in str(err.value) and words in str(err.value), str(err.value)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog, key", [(rp.normalize_into_the_list_axis, "normalize_list"),
                                       (rp.expand_before_the_list_axis, "expand_front"),
                                       (rp.stack_before_the_list_axis, "stack_front"),
                                       (rp.normalize_default_dim_of_scalars, "normalize_default")])
def test_a_dim_that_reaches_the_list_axis_is_the_static_tiers_limit(prog, key, backend):
    """A negative dim (or sizes) that the 0-D rows do not have would reach the list axis: strict names the line,
    and the default run reruns in the dynamic tier with the plain calls' results (or PyTorch's error)."""
    batch = [[1, 2], [3]]
    with pytest.raises(ShapeError, match=rf"list axis(.|\n)*rowops_progs.py:{_line(key)}"):
        _check(prog, batch, backend)
    p = _params()
    try:
        want = [prog(x, p) for x in batch]
    except (RuntimeError, IndexError):
        with pytest.raises(Exception):
            prog.run(batch, p, backend=backend)
        return
    stats = ab.RunStats()
    with warnings.catch_warnings(), torch.inference_mode():  # a DynamicFallbackWarning, or dynamic from the start
        warnings.simplefilter("ignore", DynamicFallbackWarning)  # (the limit of an earlier run sticks)
        got = prog.run(batch, p, backend=backend, stats=stats)
    torch.testing.assert_close(got, want)
    assert stats.dynamic is not None
