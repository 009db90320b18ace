"""Training code's idioms in the static tier (issue 18 §2): ``x += y`` of a tensor that alone holds a fresh value.

Every program runs with ``Options(strict=True)`` (a fall back to the dynamic
tier fails the test) and is checked against plain per-instance PyTorch on
both backends, values and dtypes; the forms that stay rejected name their line.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import CompileError, ShapeError
from tests import idiom_progs as ip
from tests.test_tdc import P

STRICT = ab.Options(strict=True)
TOL = {"rtol": 1e-5, "atol": 1e-6}
AUGMENTED = [ip.loss_aug, ip.all_four, ip.cast_like_in_place]


def _params() -> P:
    return P(hidden=4, vocab=16)


def _line(key: str) -> int:
    with open(ip.__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# M:{key}"))


def _check(prog, batch: list, backend: str = "eager") -> list:
    p, stats = _params(), ab.RunStats()
    with torch.inference_mode():
        got = prog.run(batch, p, backend=backend, options=STRICT, stats=stats)
        want = [prog(x, p) for x in batch]
    torch.testing.assert_close(got, want, **TOL)  # dtypes too
    assert stats.dynamic is None
    return got


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", AUGMENTED, ids=lambda p: p.__name__)
def test_augmented_assignment_of_a_fresh_tensor_matches_plain_pytorch(prog, backend):
    _check(prog, [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10, 11]], backend)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_augmented_assignment_of_a_single_value(backend):
    _check(ip.local_after_op, [1, 2, 3, 9], backend)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=7), min_size=1, max_size=6),
       st.sampled_from(AUGMENTED))
def test_augmented_assignment_on_random_lengths(batch, prog):
    _check(prog, batch)


def test_the_cast_keeps_the_left_operands_dtype():
    acc, wide = _check(ip.cast_like_in_place, [[1, 2], [3]])[0]
    assert acc.dtype == torch.float32 and wide.dtype == torch.float64


def test_gradients_through_augmented_losses_equal_plain_pytorch():
    batch = [[1, 2, 3], [4], [5, 6]]
    want_p, got_p = _params(), _params()
    sum(ip.loss_aug(x, want_p) for x in batch).backward()
    sum(ip.loss_aug.run(batch, got_p, options=STRICT)).backward()
    for (n, want), (_, got) in zip(want_p.named_parameters(), got_p.named_parameters()):
        if want.grad is not None:
            torch.testing.assert_close(got.grad, want.grad, **TOL, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog, key, words", [
    (ip.int_divided, "int_divided", "can't be cast to the desired output type Long"),
    (ip.broadcast_into_scalar, "broadcast", "doesn't match the broadcast shape"),
], ids=["int-divided", "broadcast"])
def test_what_pytorch_refuses_in_place_is_an_error_naming_the_instance(prog, key, words, backend):
    with pytest.raises(RuntimeError, match=words.replace("(", r"\(")):
        prog([1, 2], _params())
    with pytest.raises(ShapeError) as err, torch.inference_mode():
        prog.run([[1, 2], [3]], _params(), backend=backend, options=STRICT)
    assert "instance 0" in str(err.value) and words in str(err.value), str(err.value)
    assert f"idiom_progs.py:{_line(key)}" in str(err.value)


@pytest.mark.parametrize("prog, key", [(ip.aug_stored, "stored"), (ip.aug_view, "view")], ids=["stored", "view"])
def test_an_update_another_holder_would_see_is_rejected_with_the_fix(prog, key):
    with pytest.raises(CompileError) as err:
        prog.compile(1, STRICT)
    assert f"idiom_progs.py:{_line(key)}" in str(err.value) and "write `x = x + y`" in str(err.value)


ITEM_WRITES = [ip.crf_start, ip.item_writes, ip.rows_by_host_index, ip.item_cast]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", ITEM_WRITES, ids=lambda p: p.__name__)
def test_item_assignment_into_a_fresh_tensor_matches_plain_pytorch(prog, backend):
    _check(prog, [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10, 11]], backend)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=8), min_size=1, max_size=6),
       st.sampled_from(ITEM_WRITES))
def test_item_assignment_on_random_lengths(batch, prog):
    _check(prog, batch)


def test_item_assignment_casts_as_pytorch_writes():
    n, w = _check(ip.item_cast, [[1, 2], [3]])[0]
    assert n.dtype == torch.int64 and w.dtype == torch.float64 and w[0].item() == 0.1


def test_gradients_through_item_assignments_equal_plain_pytorch():
    batch = [[1, 2, 3], [4], [5, 6]]
    want_p, got_p = _params(), _params()
    sum(x.sum() + s for x, s in (ip.item_writes(b, want_p) for b in batch)).backward()
    sum(x.sum() + s for x, s in ip.item_writes.run(batch, got_p, options=STRICT)).backward()
    for (n, want), (_, got) in zip(want_p.named_parameters(), got_p.named_parameters()):
        assert (got.grad is None) == (want.grad is None), n
        if want.grad is not None:
            torch.testing.assert_close(got.grad, want.grad, **TOL, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_an_item_index_out_of_range_is_an_error(backend):
    with pytest.raises(IndexError):
        ip.item_out_of_range([1, 2, 3], _params())
    with pytest.raises(ShapeError, match="IndexError") as err, torch.inference_mode():
        ip.item_out_of_range.run([[1], [1, 2, 3]], _params(), backend=backend, options=STRICT)
    assert "instance 1" in str(err.value) and f"idiom_progs.py:{_line('out_of_range')}" in str(err.value)


@pytest.mark.parametrize("prog, key, words", [
    (ip.item_view, "item_view", "item assignment on a tensor writes into it in place"),
    (ip.item_tensor_index, "tensor_index", "batched with int and slice indices"),
    (ip.list_slice_write, "list_slice", "slice assignment of a list is not supported"),
], ids=["view", "tensor-index", "list-slice"])
def test_an_item_assignment_not_taken_is_rejected_with_the_fix(prog, key, words):
    with pytest.raises(CompileError) as err:
        prog.compile(1, STRICT)
    assert f"idiom_progs.py:{_line(key)}" in str(err.value) and words in str(err.value), str(err.value)
