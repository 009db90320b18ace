"""topk, sort and argsort of a stacked list whose length differs per instance, in the static tier (issue 18 §2).

Every program runs with ``Options(strict=True)``, so a fall back to the
dynamic tier fails the test, and is checked against plain per-instance
PyTorch on both backends. Ranked values are distinct (distinct tokens) except
in the programs about ties: PyTorch leaves the order of tied indices of
``topk`` and of an unstable ``sort`` unspecified (``acrobat.analysis.rankings``).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import AcrobatError, CompileError
from tests import ranking_progs as rp
from tests.test_ragged_dims import _check, _params

STRICT = ab.Options(strict=True)
TOL = {"rtol": 1e-5, "atol": 1e-6}
PROGRAMS = [rp.ranked_scalars, rp.ranked_vectors, rp.stable_ties]
BATCH = [([1, 2, 3], 2), ([4], 1), ([5, 6, 7, 8, 9], 3), ([10, 11], 0), ([12, 13, 14, 15], 4)]


def _line(key: str) -> int:
    with open(rp.__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# M:{key}"))


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_rankings_match_plain_pytorch(prog, backend):
    _check(prog, BATCH, backend)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 15), min_size=1, max_size=7, unique=True), st.floats(0, 1)),
                min_size=1, max_size=6),
       st.sampled_from(PROGRAMS), st.sampled_from(["eager", "compiled"]))
def test_rankings_on_random_lengths_and_k(drawn, prog, backend):
    """Any list length from 1 and any k from 0 to the length, per instance."""
    _check(prog, [(toks, round(f * len(toks))) for toks, f in drawn], backend)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 15), min_size=1, max_size=7), st.floats(0, 1)), min_size=1,
                max_size=5), st.sampled_from(["eager", "compiled"]))
def test_topk_ties_are_ordered_by_list_position(drawn, backend):
    """Of tied values, the batched topk gives the earlier list item first (a stable sort's order) and PyTorch's
    values; PyTorch's own order of tied indices is unspecified (on CPU it changes with the list's length)."""
    p = _params()
    batch = [(toks, round(f * len(toks))) for toks, f in drawn]
    with torch.inference_mode():
        got = rp.topk_ties.run(batch, p, backend=backend, options=STRICT)
        for (toks, k), out in zip(batch, got):
            want = rp.topk_ties((toks, k), p)
            S = torch.stack([p.h0[t % 2] * 1.0 for t in toks])
            for j, largest in ((0, True), (2, False)):
                torch.testing.assert_close(out[j], want[j])
                torch.testing.assert_close(out[j + 1], torch.sort(S, descending=largest, stable=True).indices[:k])


def test_gradients_through_ranked_values_equal_plain_pytorch():
    """Gradients flow through topk's and sort's values to the items that were picked (eager backend)."""
    for prog in (rp.ranked_scalars, rp.ranked_vectors):
        want_p, got_p = _params(), _params()
        sum(sum(o.float().sum() for o in out if isinstance(o, torch.Tensor)) for out in
            (prog(x, want_p) for x in BATCH)).backward()
        outs = prog.run(BATCH, got_p, backend="eager", options=STRICT)
        sum(sum(o.float().sum() for o in out if isinstance(o, torch.Tensor)) for out in outs).backward()
        for (n, want), (_, got) in zip(want_p.named_parameters(), got_p.named_parameters()):
            if want.grad is not None:
                torch.testing.assert_close(got.grad, want.grad, **TOL, msg=lambda m: f"{prog.__name__} {n}: {m}")


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_k_larger_than_the_list_names_the_instance(backend):
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        rp.topk_too_many(([1, 2], 2), _params())  # plain PyTorch
    with pytest.raises(AcrobatError) as err:
        rp.topk_too_many.run([([1, 2, 3], 1), ([4, 5], 2)], _params(), backend=backend, options=STRICT)
    msg = str(err.value)
    assert "instance 1" in msg and "selected index k out of range" in msg and f":{_line('too_many')}" in msg, msg


def test_topk_within_rows_is_refused_at_run_time():
    """dim=-1 of rows the text does not fix the rank of: read at run time; 1-D rows make it an item axis."""
    with pytest.raises(AcrobatError) as err:
        rp.topk_within_rows.run([([1, 2], 1), ([3], 1)], _params(), options=STRICT)
    msg = str(err.value)
    assert "instance 0" in msg and "picks within each row" in msg and f":{_line('within_rows')}" in msg, msg


@pytest.mark.parametrize("prog, key, words", [
    (rp.topk_within_known_rows, "within_known", "picks within each item"),
    (rp.topk_unsorted, "unsorted", "sorted=True"),
    (rp.topk_tensor_k, "tensor_k", "host int"),
    (rp.sort_positive_dim, "positive_dim", "list axis"),
], ids=["within-rows", "unsorted", "tensor-k", "positive-dim"])
def test_rejected_rankings_name_the_line(prog, key, words):
    with pytest.raises(CompileError) as err:
        prog.run([([1, 2], 1)], _params(), options=STRICT)
    assert f":{_line(key)}:" in str(err.value) and words in str(err.value), str(err.value)
