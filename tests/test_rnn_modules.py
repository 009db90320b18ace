"""nn.LSTM / nn.GRU / nn.RNN over per-instance sequences in the static tier (issue 18 §2).

Every program runs with ``Options(strict=True)`` (a fall back to the dynamic tier fails the test) and is checked
against plain per-instance PyTorch on both backends, in float64: the batched run makes one call over a packed
sequence, which differs from the per-instance calls by float rounding only. Training (eager under autograd) is
checked on the gradients of every parameter.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from tests import rnn_module_progs as rp

STRICT = ab.Options(strict=True)
TOL = {"rtol": 1e-9, "atol": 1e-10}
BACKENDS = ["eager", "compiled"]
PROGRAMS = [rp.bilstm_last, rp.gru_with_state, rp.rnn_rows, rp.lstm_with_state, rp.batch_first_gru,
            rp.batch_first_bilstm_view, rp.batch_first_none_index, rp.batch_first_reshape]


def _params() -> rp.Params:
    torch.manual_seed(0)
    return rp.Params().double()


def _tagger() -> rp.LSTMTagger:
    torch.manual_seed(1)
    return rp.LSTMTagger().double()


def _batch(size: int, seed: int = 0, max_len: int = 7) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(20) for _ in range(rng.randint(1, max_len))] for _ in range(size)]


def _check(prog: ab.Program, batch: list, params: torch.nn.Module, backend: str) -> ab.RunStats:
    stats = ab.RunStats()
    with torch.inference_mode():
        got = prog.run(batch, params, backend=backend, options=STRICT, stats=stats)
        want = [prog(x, params) for x in batch]
    torch.testing.assert_close(got, want, **TOL)
    return stats


def _line(marker: str) -> int:
    lines = Path(rp.__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# M:{marker}"))


@pytest.mark.parametrize("size", [1, 3, 17])
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_tutorial_tagger_matches_plain_pytorch(backend, size):
    stats = _check(rp.tagger, [torch.tensor(x) for x in _batch(size, seed=size)], _tagger(), backend)
    lstm = [b for b in stats.blocks.values() if "nn.LSTM over a list" in b.name]
    assert len(lstm) == 1 and lstm[0].launches == 1 and lstm[0].nodes == size  # one packed call for the batch


@pytest.mark.parametrize("size", [1, 3, 17])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_modules_match_plain_pytorch(backend, prog, size):
    _check(prog, _batch(size, seed=size), _params(), backend)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(0, 19), min_size=1, max_size=9), min_size=1, max_size=6),
       st.sampled_from(PROGRAMS), st.sampled_from(BACKENDS))
def test_random_lengths(batch, prog, backend):
    """Any lengths, length 1 included, in any order (the packed call sorts them and puts them back)."""
    _check(prog, batch, _params(), backend)


@pytest.mark.parametrize("prog", [rp.tagger, *PROGRAMS], ids=lambda p: p.__name__)
def test_training_gradients_match_plain_pytorch(prog):
    """Eager under autograd: the gradients of every parameter (the recurrent module's included) equal those of
    the per-instance calls."""
    params = _tagger() if prog is rp.tagger else _params()
    batch = _batch(5, seed=3)
    if prog is rp.tagger:
        batch = [torch.tensor(x) for x in batch]

    def loss(outs: list) -> torch.Tensor:
        leaves = [t for out in outs for t in torch.utils._pytree.tree_leaves(out)]
        return sum((t * torch.linspace(0.5, 1.5, t.numel(), dtype=t.dtype).view(t.shape)).sum() for t in leaves)

    loss(prog.run(batch, params, backend="eager", options=STRICT)).backward()
    got = {n: q.grad.clone() for n, q in params.named_parameters() if q.grad is not None}
    params.zero_grad(set_to_none=True)
    loss([prog(x, params) for x in batch]).backward()
    want = {n: q.grad for n, q in params.named_parameters() if q.grad is not None}
    assert got.keys() == want.keys() and any("lstm" in n or "gru" in n or "rnn" in n for n in got)
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("prog, marker, phrase", [
    (rp.fixed_shape_input, "fixed", "`p.lstm` is nn.LSTM, which acrobat batches over a sequence whose length "
                                    "differs per instance, but its input is not a stacked list"),
    (rp.lead_misused, "lead", "`.sum()` of a stacked list with a unit axis in front"),
])
def test_other_inputs_are_rejected_clearly(prog, marker, phrase):
    """A CompileError at the model's line, saying what to write (the default run takes the dynamic tier)."""
    with pytest.raises(ab.CompileError) as info, torch.inference_mode():
        prog.run(_batch(3), _params(), options=STRICT)
    assert str(info.value).startswith(f"{rp.__file__}:{_line(marker)}:") and phrase in str(info.value)
    with torch.inference_mode():
        got = prog.run(_batch(3), _params())
        torch.testing.assert_close(got, [prog(x, _params()) for x in _batch(3)], **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_whose_first_size_is_not_the_length_fails_like_plain_pytorch(backend):
    batch = _batch(3)
    with pytest.raises(RuntimeError):
        rp.view_wrong_length(batch[0], _params())
    with pytest.raises(ab.AcrobatError, match=r"instance 0: .*first size"), torch.inference_mode():
        rp.view_wrong_length.run(batch, _params(), backend=backend, options=STRICT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_unit_axis_in_front_for_a_module_without_batch_first_is_a_limit(backend):
    """``(1, T, E)`` reads the list axis as the batch of a module without batch_first: the static tier stops at
    run time (strict), and the default run equals plain PyTorch."""
    with pytest.raises(ab.AcrobatError, match="without batch_first"), torch.inference_mode():
        rp.not_batch_first_unsqueezed.run(_batch(3), _params(), backend=backend, options=STRICT)
    with torch.inference_mode():
        got = rp.not_batch_first_unsqueezed.run(_batch(3), _params(), backend=backend)
        torch.testing.assert_close(got, [rp.not_batch_first_unsqueezed(x, _params()) for x in _batch(3)], **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_first_gru_is_one_packed_call(backend):
    stats = _check(rp.batch_first_gru, _batch(6, seed=2), _params(), backend)
    gru = [b for b in stats.blocks.values() if "nn.GRU over a list" in b.name]
    assert len(gru) == 1 and gru[0].launches == 1 and gru[0].nodes == 6
