"""The dynamic tier (acrobat.runtime.dynamic): Python the static tier rejects still runs, batched at run time.

Every program here runs batched and is compared with the same program run
as plain Python per instance; the ones the static tier rejects also show
that ``Options(strict=True)`` restores the rejection, and that the report
and ``explain()`` say why the program ran dynamically.
"""

from __future__ import annotations

import random

import pytest
import torch

import acrobat as ab
from acrobat.models import get_model
from acrobat.data.synthetic import synthetic_trees
from tests import dynamic_progs as dp

TOL = {"rtol": 1e-9, "atol": 1e-10}
DYNAMIC = ab.Options(static=False)


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 6))] for _ in range(n)]


def _check(prog, batch, p, options=None, stats=None):
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
        got = prog.run(batch, p, backend="eager", options=options, stats=stats)
    assert type(got[0]) is type(want[0])
    torch.testing.assert_close(got, want, **TOL)
    return got


REJECTED = ["try_except", "lambdas_and_sorting", "accumulate_in_place", "lstm_state", "data_dependent_shape"]


@pytest.mark.parametrize("name", REJECTED)
@pytest.mark.parametrize("n", [1, 7])
def test_rejected_program_runs_dynamically(name, n):
    prog = getattr(dp, name)
    stats = ab.RunStats()
    _check(prog, _tokens(n, n), dp.Params(), stats=stats)
    assert stats.dynamic is not None and stats.dynamic.reason, "the report says why it ran dynamically"
    assert "dynamic tier" in stats.report()


@pytest.mark.parametrize("name", ["try_except", "lambdas_and_sorting"])
def test_strict_restores_the_compile_error(name):
    prog = getattr(dp, name)
    with pytest.raises(ab.CompileError) as info:
        prog.run(_tokens(2), dp.Params(), options=ab.Options(strict=True))
    assert str(info.value).startswith(dp.__file__), "the rejection names file:line"
    explained = prog.explain(dp.Params())
    assert "dynamic tier" in explained and str(info.value).split(": ", 1)[1][:40] in explained


def test_value_reads_and_a_namedtuple_result():
    got = _check(dp.value_reads, _tokens(9, 3), dp.Params(), options=DYNAMIC)
    assert isinstance(got[0], dp.Pair)


def test_a_write_into_a_parameter_is_an_error_not_a_wrong_answer():
    p = dp.Params()
    before = p.b.detach().clone()
    with pytest.raises(ab.AcrobatError, match="writes into a tensor every instance shares"):
        with torch.no_grad():
            dp.inplace_on_a_parameter.run([[1], [2]], p, backend="eager", options=DYNAMIC)
    torch.testing.assert_close(p.b.detach(), before)


@pytest.mark.parametrize("name", ["treelstm", "birnn", "stackrnn", "drnn"])
def test_paper_models_in_the_dynamic_tier_equal_plain(name):
    spec = get_model(name)
    torch.manual_seed(0)
    params = spec.make_params(50, 8, 0).double()
    trees = synthetic_trees(12, vocab_size=50, seed=2)
    batch = spec.instances(trees)[:12]
    stats = ab.RunStats()
    with torch.no_grad():
        want = [spec.program(x, params) for x in batch]
        got = spec.program.run(batch, params, backend="eager", options=DYNAMIC, stats=stats)
    torch.testing.assert_close(got, want, **TOL)
    assert stats.kernel_launches < stats.dfg_nodes, "operators of different instances batch together"


@pytest.mark.parametrize("backend", ["eager", "eager-accum"])
def test_gradients_through_the_dynamic_tier_equal_the_per_instance_loop(backend):
    spec = get_model("treelstm")
    params = spec.make_params(50, 8, 0).double()
    batch = spec.instances(synthetic_trees(6, vocab_size=50, seed=4))

    def loss(outs):
        return sum((o[0] ** 2).sum() for o in outs)

    loss([spec.program(t, params) for t in batch]).backward()
    want = {n: q.grad.clone() for n, q in params.named_parameters() if q.grad is not None}
    params.zero_grad(set_to_none=True)
    loss(spec.program.run(batch, params, backend=backend, options=DYNAMIC)).backward()
    for n, q in params.named_parameters():
        if n in want:
            torch.testing.assert_close(q.grad, want[n], **TOL)
