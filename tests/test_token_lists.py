"""``torch.tensor(tokens)`` of a host list whose length differs per instance: a stacked list (issue 18 §2).

Every program runs with ``Options(strict=True)`` (a fall back to the dynamic tier fails the test) and is checked
against plain per-instance PyTorch on both backends, with gradients; list lengths come from hypothesis, 1 and 0
included (an empty list is the static tier's limit: strict raises it, the default run reruns the batch in the
dynamic tier with the plain calls' results).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import DynamicFallbackWarning, InstanceError, ShapeError
from tests import token_list_progs as tp

STRICT = ab.Options(strict=True)
TOL = {"rtol": 1e-5, "atol": 1e-6}
PROGRAMS = [tp.emb_sum, tp.legacy_and_dtype, tp.masked_mean, tp.arithmetic_and_indexing, tp.built_lists, tp.long_sum]
BATCH = [[1, 2, 3], [4], [0, 5, 6, 0], [7, 8, 9, 10, 11]]


def _check(prog, batch: list[list[int]], backend: str, options: ab.Options = STRICT,
           stats: ab.RunStats | None = None) -> None:
    p = tp.Params()
    with torch.inference_mode():
        got = prog.run(batch, p, backend=backend, options=options, stats=stats)
        want = [prog(x, p) for x in batch]
    torch.testing.assert_close(got, want, **TOL)


def _in_the_dynamic_tier(prog, batch: list, backend: str) -> None:
    """The default run of ``batch`` equals plain calls and ran in the dynamic tier (after the static tier met its
    limit on it, with a ``DynamicFallbackWarning``; or from the start, once a limit made the program the dynamic
    tier's)."""
    stats = ab.RunStats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DynamicFallbackWarning)
        _check(prog, batch, backend, ab.Options(), stats)
    assert stats.dynamic is not None


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_matches_plain_pytorch(prog, backend):
    _check(prog, BATCH, backend)
    _check(prog, BATCH[1:2], backend)  # a batch of one instance of one token


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(0, tp.V - 1), min_size=1, max_size=7, unique=True), min_size=1, max_size=6),
       st.sampled_from(PROGRAMS), st.sampled_from(["eager", "compiled"]))
def test_random_lengths(batch, prog, backend):
    """Tokens differ within a list, so that max's index never picks among ties."""
    _check(prog, batch, backend)


def test_gradients_equal_plain_pytorch():
    for prog in PROGRAMS:
        want_p, got_p = tp.Params(), tp.Params()
        sum(sum(o.float().sum() for o in _tensors(prog(x, want_p))) for x in BATCH).backward()
        outs = prog.run(BATCH, got_p, backend="eager", options=STRICT)
        sum(sum(o.float().sum() for o in _tensors(out)) for out in outs).backward()
        for (n, want), (_, got) in zip(want_p.named_parameters(), got_p.named_parameters()):
            if want.grad is not None:
                torch.testing.assert_close(got.grad, want.grad, **TOL, msg=lambda m: f"{prog.__name__} {n}: {m}")


def _tensors(out) -> list[torch.Tensor]:
    return [out] if isinstance(out, torch.Tensor) else list(out)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_an_empty_list_is_the_static_tiers_limit(backend):
    """``torch.tensor([])`` has no rows to stack: strict names the limit and the line; the default run equals plain
    calls (the dynamic tier), and where plain PyTorch fails on the empty list, fails as it does."""
    batch = [[1, 2], [], [3]]
    with pytest.raises(ShapeError, match=r"token_list_progs.py:\d+ is of an empty list"):
        _check(tp.long_sum, batch, backend)
    _in_the_dynamic_tier(tp.long_sum, batch, backend)
    with pytest.raises(InstanceError, match="instance 1: IndexError: max"):
        _check(tp.legacy_and_dtype, batch, backend, ab.Options())


def test_a_number_taken_for_a_list_runs_in_the_dynamic_tier():
    """The instance is a number where the text gives no sign of it: strict says so, the default run is right."""
    with pytest.raises(ShapeError, match="is of a int"):
        _check(tp.of_a_number, [3, 4], "eager")
    _in_the_dynamic_tier(tp.of_a_number, [3, 4], "eager")


def test_a_token_is_no_list():
    """``torch.tensor(t)`` of a loop's token stays a 0-d tensor in one static block (no host check, no rows)."""
    @ab.program
    def per_token(toks, p):
        return sum(p.emb(torch.tensor(t)) for t in toks)

    _check(per_token, BATCH, "eager")
    assert "host_rows" not in per_token.compile(1).skeleton_source


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_a_list_item_of_the_instance_is_a_token_list(backend):
    """``label, toks = example`` then ``torch.tensor(toks)``: where every instance's item is a list (a fact of the
    batch), a stacked list in the static tier; the same program on a batch whose item is a number compiles again,
    a tensor of one shape."""
    stats = ab.RunStats()
    _check(tp.item_of_the_instance, [(2.0, t) for t in BATCH], backend, stats=stats)
    assert stats.dynamic is None
    p = tp.Params()
    with torch.inference_mode():
        got = tp.item_of_the_instance.run([(1.5, 3), (2.0, 4)], p, backend=backend)
        want = [tp.item_of_the_instance(x, p) for x in [(1.5, 3), (2.0, 4)]]
    torch.testing.assert_close(got, want, **TOL)
