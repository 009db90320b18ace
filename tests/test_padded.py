"""Padded functions: attention over a per-instance list in the static tier (issue 18 §2).

Each program of ``tests/padded_progs.py`` hands a stacked list of per-instance length to a function that moves
or contracts the list axis; acrobat runs it as a padded function (one call of the user's function per launch on
``(B, Lmax, ...)`` values). Every batched result is checked against the plain per-instance calls on both
backends, under ``Options(strict=True)`` (a rejection fails the test); gradients of every parameter on eager.
A function with an operator that has no padding rule, or that uses ``x.shape[0]`` as a number, reruns the
batch in the dynamic tier: still exact.
"""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import LimitError
from acrobat.runtime.padding import Lengths, Padded
from tests import padded_progs as pp

STRICT = ab.Options(strict=True)
TOL = {"rtol": 1e-9, "atol": 1e-10}
BACKENDS = ["eager", "compiled"]
STATIC = [pp.single_head_prog, pp.qkv_prog, pp.multi_head_prog, pp.masked_prog, pp.masked_where_prog,
          pp.mean_pooled_prog, pp.max_pooled_prog, pp.cross_prog, pp.host_number_prog]


def _params() -> pp.Params:
    torch.manual_seed(0)
    return pp.Params().double()


def _batch(size: int, seed: int = 0, lo: int = 1, hi: int = 16) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(20) for _ in range(rng.randint(lo, hi))] for _ in range(size)]


def _check(prog: ab.Program, batch: list, backend: str, options: ab.Options = STRICT) -> ab.RunStats:
    params = _params()
    stats = ab.RunStats()
    with torch.inference_mode():
        got = prog.run(batch, params, backend=backend, options=options, stats=stats)
        want = [prog(x, params) for x in batch]
    torch.testing.assert_close(got, want, **TOL)
    return stats


def _padded_launches(stats: ab.RunStats) -> int:
    return sum(b.launches for b in stats.blocks.values() if b.name.startswith("padded "))


@pytest.mark.parametrize("size", [1, 3, 17, 64])
@pytest.mark.parametrize("prog", STATIC, ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_matches_plain_pytorch(backend, prog, size):
    stats = _check(prog, _batch(size, seed=size), backend)
    assert stats.dynamic is None and _padded_launches(stats) == 1  # the whole batch in one call of the function


@pytest.mark.parametrize("prog", STATIC, ids=lambda p: p.__name__)
def test_every_list_of_length_one(prog):
    _check(prog, _batch(5, seed=1, hi=1), "eager")


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 19), min_size=1, max_size=16), min_size=1, max_size=8),
       st.sampled_from(STATIC), st.sampled_from(BACKENDS))
def test_random_lengths(batch, prog, backend):
    _check(prog, batch, backend)


@pytest.mark.parametrize("prog", [pp.multi_head_prog, pp.masked_where_prog, pp.max_pooled_prog],
                         ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", ["eager", "auto"])  # auto: eager-accum, the training backend
def test_gradients_match_plain_pytorch(backend, prog):
    batch = _batch(9, seed=3)
    batched, plain = _params(), _params()
    outs = prog.run(batch, batched, backend=backend, options=STRICT)
    sum(torch.stack([t.sum() for t in torch.utils._pytree.tree_leaves(o)]).sum() for o in outs).backward()
    want = [prog(x, plain) for x in batch]
    sum(torch.stack([t.sum() for t in torch.utils._pytree.tree_leaves(o)]).sum() for o in want).backward()
    for (name, a), (_, b) in zip(batched.named_parameters(), plain.named_parameters()):
        if b.grad is None:
            assert a.grad is None or not a.grad.any(), name
        else:
            torch.testing.assert_close(a.grad, b.grad, **TOL, msg=name)


@pytest.mark.parametrize("prog", [pp.length_arithmetic_prog, pp.unsupported_prog, pp.value_read_prog],
                         ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_rule_reruns_in_the_dynamic_tier(backend, prog):
    """``x.sum(0) / x.shape[0]`` never divides by Lmax; ``cumsum`` has no rule; ``if v:`` of a one-element value
    is each instance's own truth: all rerun exact (in the dynamic tier, or as plain calls once the tier choice
    has measured them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ab.DynamicFallbackWarning)
        stats = _check(prog, _batch(6, seed=2), backend, ab.Options())
    function = prog.__name__.removesuffix("_prog")  # the helper holding the construct never ran padded
    assert not any(b.launches for b in stats.blocks.values() if b.name.startswith(f"padded {function} ("))


def test_strict_raises_where_a_rule_is_missing():
    with pytest.raises(ab.AcrobatError, match="cumsum"):
        _check(pp.unsupported_prog, _batch(3), "eager")


def test_explain_and_report_name_the_padded_function():
    """The call of ``multi_head`` and the statements around it run as one padded function, outlined from the
    program's body (``acrobat.analysis.padded_runs``)."""
    text = pp.multi_head_prog.explain(_params(), options=STRICT)
    assert "padded function `multi_head_prog_region0`" in text and "padded_progs.py:" in text and "static tier" in text
    stats = _check(pp.multi_head_prog, _batch(4), "eager")
    assert "padded multi_head_prog_region0 (padded_progs.py:" in stats.report()


def test_length_is_a_size_not_a_number():
    x = Padded(torch.zeros(2, 3, 4), (Lengths(torch.tensor([3, 1]), 3), None))
    assert x.view(x.shape[0], 2, 2).shape[1:] == (2, 2)
    assert x.new_zeros(x.shape[0], 5).shape[1] == 5 and x.size(0).lengths is x.shape[0].lengths
    for use in (lambda n: n + 1, lambda n: float(n), lambda n: n > 2, lambda n: bool(n), lambda n: x.sum(0) / n):
        with pytest.raises(LimitError):
            use(x.shape[0])
    with pytest.raises(LimitError):
        len(x)
    with pytest.raises(LimitError):
        x.view(-1)  # the padded axis merged with another


def test_rules_refuse_what_would_mix_instances():
    """Each refusal is a LimitError (the batch reruns in the dynamic tier), never a padded value read as data."""
    x = Padded(torch.randn(2, 3, 2, 4), (Lengths(torch.tensor([3, 1]), 3), None, None))
    for use in (lambda: x.reshape(2, x.shape[0], 4),  # the padded axis moved among the others
                lambda: x.data, lambda: x.cumsum(0), lambda: x.sum(0, dtype=torch.float64),
                lambda: x.transpose(0, 2) @ torch.randn(3, 5),  # a padded axis contracted with a fixed one
                lambda: x.transpose(dim0=1, dim1=2), lambda: torch.log(x), lambda: 1 / x):
        with pytest.raises(LimitError):
            use()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_transformer_example_runs_static_in_one_padded_launch(backend):
    """The embedding, attention, both layer norms, the FFN and the masked pool: one padded launch; the only
    other nodes are the token rows of ``torch.tensor(tokens)`` and the output layer's, one per instance."""
    from examples import transformer_encoder as te
    params, batch = te.make_params(0), te.instances(17, seed=5)  # float32: the reference builds a float32 mask
    assert "padded function `transformer_encoder_region0`" in te.program.explain(params, options=STRICT)
    stats = ab.RunStats()
    with torch.inference_mode():
        got = te.program.run(batch, params, backend=backend, options=STRICT, stats=stats)
    torch.testing.assert_close(got, [te.reference(x, params) for x in batch], rtol=1e-4, atol=1e-5)
    assert _padded_launches(stats) == 1 and stats.kernel_launches == 3
    assert stats.dfg_nodes == sum(map(len, batch)) + 2 * len(batch)

def _grads(prog: ab.Program, batch: list, params: torch.nn.Module, backend: str | None,
           stats: ab.RunStats | None = None) -> dict[str, torch.Tensor]:
    """Each parameter's gradient of the sum of every result over ``batch``: batched (on ``backend``, its
    ``stats`` kept) or plain per-instance calls (None)."""
    params.zero_grad(set_to_none=True)
    outs = prog.run(batch, params, backend=backend, options=STRICT, stats=stats) if backend else \
        [prog(x, params) for x in batch]
    sum(torch.stack([t.sum() for t in torch.utils._pytree.tree_leaves(o)]).sum() for o in outs).backward()
    return {n: a.grad for n, a in params.named_parameters()}


@pytest.mark.parametrize("backend", ["eager", "auto"])
def test_no_nan_from_the_padding_reaches_a_gradient(backend):
    """``exp`` of the padding's values overflows (the padding rows of ``p.q(x)`` hold its bias, far above the
    instances' rows), and the padding's gradient is 0: 0 * inf must not reach the parameters."""
    params = _params()
    with torch.no_grad():
        params.emb.weight.copy_(1.0 + 0.01 * torch.randn(20, pp.H, dtype=torch.float64))
        params.q.weight.fill_(-1100.0 / pp.H)
        params.q.bias.fill_(1000.0)  # rows: about -100; padding: 1000, exp(1100) is inf in float64
    batch = _batch(9, seed=4)
    plain = _grads(pp.exp_weights_prog, batch, params, None)
    batched = _grads(pp.exp_weights_prog, batch, params, backend)
    for name, want in plain.items():
        if want is None:
            assert batched[name] is None or not batched[name].any(), name
        else:
            torch.testing.assert_close(batched[name], want, **TOL, msg=name)


#: Programs whose padded call grows into a run of statements (acrobat.analysis.padded_runs): the padded function
#: that runs, and its launches a batch.
RUNS = {pp.encoder_prog: ("encoder_prog_region0", 1), pp.encoder_modules_prog: ("encoder_modules_prog_region0", 1),
        pp.two_layer_prog: ("encoder_layer_region0", 2), pp.value_read_prog: ("value_read_prog_region0", 1),
        pp.row_loop_prog: ("row_loop_prog_region0", 1), pp.no_rule_prog: ("no_rule_prog_region0", 1)}


def _check_run(prog: ab.Program, batch: list, backend: str) -> ab.RunStats:
    """``_check``, and the batch ran its padded run (not the attention alone) in the launches ``RUNS`` says."""
    stats = _check(prog, batch, backend)
    name, launches = RUNS[prog]
    padded = [b for b in stats.blocks.values() if b.name.startswith("padded ")]
    assert stats.dynamic is None and {b.name.split(" ")[1] for b in padded} == {name}
    assert _padded_launches(stats) == launches
    return stats


@pytest.mark.parametrize("size", [1, 3, 17, 64])
@pytest.mark.parametrize("prog", RUNS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_runs_match_plain_pytorch(backend, prog, size):
    _check_run(prog, _batch(size, seed=size), backend)


@pytest.mark.parametrize("prog", [pp.encoder_prog, pp.encoder_modules_prog], ids=lambda p: p.__name__)
def test_the_whole_encoder_is_one_padded_launch(prog):
    """Embedding, attention, norms, FFN and pool in the run: besides it, only the token rows of
    ``torch.tensor(tokens)`` and the output layer's node, one per instance."""
    batch = _batch(17, seed=6)
    stats = _check_run(prog, batch, "eager")
    assert stats.dfg_nodes == sum(map(len, batch)) + 2 * len(batch) and stats.kernel_launches == 3


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 19), min_size=1, max_size=16), min_size=1, max_size=8),
       st.sampled_from(list(RUNS)), st.sampled_from(BACKENDS))
def test_runs_random_lengths(batch, prog, backend):
    _check_run(prog, batch, backend)


@pytest.mark.parametrize("prog", list(RUNS), ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", ["eager", "auto"])
def test_runs_gradients_match_plain_pytorch(backend, prog):
    batch = _batch(9, seed=7)
    stats = ab.RunStats()
    plain = _grads(prog, batch, _params(), None)
    batched = _grads(prog, batch, _params(), backend, stats)
    assert _padded_launches(stats) == RUNS[prog][1] and f"padded {RUNS[prog][0]} (" in stats.report()
    for name, want in plain.items():
        if want is None:
            assert batched[name] is None or not batched[name].any(), name
        else:
            torch.testing.assert_close(batched[name], want, **TOL, msg=name)
