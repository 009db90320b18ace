"""A sum started at a Python number (``loss = 0`` then ``loss += t`` in a loop) in the static tier (issue 18 §2,
``acrobat.analysis.accumulators``).

Every program runs with ``Options(strict=True)`` (a fall back to the dynamic tier fails the test) and is checked
against plain per-instance PyTorch on both backends: values, dtypes and types (an instance whose loop never ran
gets the Python number back). Gradients are checked on the eager backend under autograd.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import CompileError, InstanceError
from tests import accumulator_progs as ap
from tests.test_tdc import P

STRICT = ab.Options(strict=True)
BACKENDS = ["eager", "compiled"]
BATCH = [[1, 2, 3], [], [4], [5, 6, 0, 7], []]


def _same(got, want) -> None:
    """``got`` equals ``want``: tensors by value and dtype, host values by value and type, tuples item by item."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert type(got) is type(want), (got, want)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def _check(prog, batch: list, backend: str = "eager", p: P | None = None) -> list:
    p, stats = p or P(hidden=4, vocab=16), ab.RunStats()
    with torch.no_grad():
        got = prog.run(batch, p, backend=backend, options=STRICT, stats=stats)
        want = [prog(x, p) for x in batch]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)
    assert stats.dynamic is None
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_loss_from_int_zero_per_token(backend):
    got = _check(ap.loss_from_zero, BATCH, backend)
    assert got[1] == 0 and type(got[1]) is int  # the loop never ran: the int itself
    assert isinstance(got[0], torch.Tensor) and got[0].dim() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_running_mean_from_float_zero(backend):
    _check(ap.running_mean, [b for b in BATCH if b], backend)


def test_running_mean_of_an_empty_list_raises_as_plain_python():
    with pytest.raises(ZeroDivisionError):
        ap.running_mean([], P(hidden=4, vocab=16))
    with pytest.raises(InstanceError, match=r"instance 1: ZeroDivisionError"):
        ap.running_mean.run([[1], [], [2]], P(hidden=4, vocab=16), options=STRICT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog", [ap.nested_in_branches, ap.product, ap.returned_early],
                         ids=lambda p: p.__name__)
def test_updates_in_branches_nested_loops_and_returns(prog, backend):
    batch = [[[1, 2], [3]], [], [[]], [[4, 0, 5]]] if prog is ap.nested_in_branches else BATCH
    _check(prog, batch, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float64_model(backend):
    p = P(hidden=4, vocab=16).double()
    for prog in (ap.loss_from_zero, ap.running_mean, ap.nested_in_branches):
        batch = [[[1, 2], [3]], [], [[6]]] if prog is ap.nested_in_branches else [[1, 2], [3], [4, 5, 6]]
        got = _check(prog, batch, backend, p)
        first = got[0][0] if isinstance(got[0], tuple) else got[0]
        assert first.dtype == torch.float64


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog, dtype", [(ap.int32_counts, torch.int32), (ap.half_sum, torch.float16)],
                         ids=["int32", "float16"])
def test_the_number_promotes_as_a_python_number(prog, dtype, backend):
    got = _check(prog, [[1, 2], [], [3]], backend)
    assert got[0].dtype == dtype and got[1] in (0, 0.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_helpers_accumulator_returned_by_the_entry(backend):
    _check(ap.through_a_helper, [[1, 2], [], [3, 4, 5]], backend)


@pytest.mark.parametrize("prog, words", [
    (ap.used_in_a_helper, "its result can only be returned as it is"),
    (ap.read_in_the_loop, "holds host data in one place and a tensor in another"),
], ids=lambda x: getattr(x, "__name__", ""))
def test_what_stays_rejected_names_its_line_and_runs_in_the_dynamic_tier(prog, words):
    p = P(hidden=4, vocab=16)
    with pytest.raises(CompileError, match=words):
        prog.run([[1, 2]], p, options=STRICT)
    with torch.no_grad():
        got = prog.run([[1, 2], [3]], p)
        torch.testing.assert_close(got, [prog(x, p) for x in [[1, 2], [3]]])


def test_gradients_equal_plain_autograd():
    p = P(hidden=4, vocab=16).double()
    batch = [[1, 2, 3], [4], [5, 6]]
    for prog in (ap.loss_from_zero, ap.running_mean):
        want = torch.autograd.grad(sum(prog(x, p).sum() for x in batch), [p.emb, p.W, p.V], allow_unused=True)
        got_out = prog.run(batch, p, backend="eager", options=STRICT)
        got = torch.autograd.grad(sum(y.sum() for y in got_out), [p.emb, p.W, p.V], allow_unused=True)
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if w is not None:
                torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)


def test_backward_through_the_accumulated_loss():
    """`.backward()` on the sum of the instances' losses, as a training step does."""
    p, batch = P(hidden=4, vocab=16).double(), [[1, 2], [3, 4, 5]]
    sum(ap.loss_from_zero(x, p) for x in batch).backward()
    want = p.emb.grad.clone()
    p.emb.grad = None
    sum(ap.loss_from_zero.run(batch, p, backend="eager", options=STRICT)).backward()
    torch.testing.assert_close(p.emb.grad, want, rtol=1e-9, atol=1e-9)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 15), min_size=0, max_size=5), min_size=1, max_size=6),
       st.sampled_from([ap.loss_from_zero, ap.product, ap.returned_early, ap.int32_counts]))
def test_accumulators_on_random_lengths_including_zero(batch, prog):
    _check(prog, batch)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_comprehension_after_the_read_is_its_own_in_each_path(backend):
    """The two copies of the rest of the function (``accumulators.both``) shared the comprehension's list name
    `_comp0`, and the rules find a comprehension's appends by that name: the cat of one copy became a stack and
    the appends of both lost their unit axis, so the other copy's cat (the path every instance took) became a fold
    of rows, and `.max(dim=0)` of it a number (fuzz: a silent wrong answer, found by the regions helper's seed 4)."""
    _check(ap.cat_after_the_read, [[1, 2], [3], [4, 5, 6]], backend)
