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
from acrobat.runtime.backend import AUTO_ENV
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
    assert stats.dynamic is not None and (stats.dynamic.reason or stats.dynamic.regions), \
        "the report says why it ran dynamically (wholly, or a statement of it: acrobat.analysis.outline)"
    assert "dynamic tier" in stats.report() or "dynamic regions" in stats.report()


@pytest.mark.parametrize("name", ["try_except", "lambdas_and_sorting"])
def test_strict_restores_the_compile_error(name):
    prog = getattr(dp, name)
    with pytest.raises(ab.CompileError) as info:
        prog.run(_tokens(2), dp.Params(), options=ab.Options(strict=True))
    assert str(info.value).startswith(dp.__file__), "the rejection names file:line"
    explained = prog.explain(dp.Params())
    assert "dynamic tier" in explained or "dynamic region" in explained  # a statement region: analysis.outline
    assert str(info.value).split(": ", 1)[1][:40] in explained


def test_value_reads_and_a_namedtuple_result():
    got = _check(dp.value_reads, _tokens(9, 3), dp.Params(), options=DYNAMIC)
    assert isinstance(got[0], dp.Pair)


def test_a_write_into_a_parameter_is_an_error_not_a_wrong_answer():
    p = dp.Params()
    before = p.b.detach().clone()
    with pytest.raises(ab.AcrobatError, match=r"writes into a tensor every instance shares(.|\n)*"
                                              r"dynamic_progs.py:\d+: .*_\("):  # the line of the write
        with torch.no_grad():
            dp.inplace_on_a_parameter.run([[1], [2]], p, backend="eager", options=DYNAMIC)
    torch.testing.assert_close(p.b.detach(), before)


@ab.program
def _write_into_a_row_of_a_parameter(t, p):
    h = p.emb[t]  # a view of the parameter in PyTorch: the plain call's write changes p.emb
    h.mul_(2.0)
    return h + p.emb[0]


@ab.program
def _write_into_a_copy_of_a_row(t, p):
    h = p.emb[t].clone()  # the fix the error names
    h[:1].mul_(2.0)
    return h + p.emb[0]


class _Rows:
    """A plain holder of one (4, 2) parameter-like tensor."""

    def __init__(self) -> None:
        self.emb = torch.arange(1.0, 9.0).view(4, 2)


def test_a_write_through_a_lookup_into_a_parameter_is_an_error_not_a_wrong_answer():
    """`h = p.emb[t]; h.mul_(2)` (a view of the parameter) changed the instance's copy of the row, where the plain
    call changes p.emb (and the next instance reads it): a silent wrong answer, with default options too. Now
    an InstanceError that names the fix, which runs (writing into `.clone()`)."""
    for options in (DYNAMIC, None):
        p = _Rows()
        with torch.no_grad(), pytest.raises(ab.InstanceError, match=r"view of a tensor every instance shares.*clone"
                                            r"(.|\n)*test_dynamic.py:\d+: h.mul_\(2.0\)"):
            _write_into_a_row_of_a_parameter.run([1, 2], p, backend="eager", options=options)
        torch.testing.assert_close(p.emb, _Rows().emb)
    with torch.no_grad():
        want = [_write_into_a_copy_of_a_row(t, _Rows()) for t in (1, 2, 1)]
        got = _write_into_a_copy_of_a_row.run([1, 2, 1], _Rows(), backend="eager", options=DYNAMIC)
    torch.testing.assert_close(got, want)


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


def test_auto_under_grad_in_the_dynamic_tier_trains_like_the_per_instance_loop(monkeypatch):
    """The dynamic tier's run sees the parameters as its shared values (their device, whether they require
    grad): ``auto`` picks an eager backend under grad and the gradients equal the per-instance loop's."""
    monkeypatch.setenv(AUTO_ENV, "compiled")  # what "auto" picks where nothing requires grad (conftest: eager)
    spec = get_model("treelstm")
    params = spec.make_params(50, 8, 0).double()
    batch = spec.instances(synthetic_trees(5, vocab_size=50, seed=5))
    loss = sum((spec.program(t, params)[0] ** 2).sum() for t in batch)
    loss.backward()
    want = {n: q.grad.clone() for n, q in params.named_parameters() if q.grad is not None}
    params.zero_grad(set_to_none=True)
    rt = spec.program.runtime(params, backend="auto", options=DYNAMIC)
    assert rt.device == next(params.parameters()).device and rt.stats.backend.startswith("eager")
    outs = spec.program.run(batch, params, options=DYNAMIC)
    sum((o[0] ** 2).sum() for o in outs).backward()
    assert {n for n, q in params.named_parameters() if q.grad is not None} == set(want)
    for n, q in params.named_parameters():
        if n in want:
            torch.testing.assert_close(q.grad, want[n], **TOL)


def test_state_stored_on_instance_objects_is_left_as_tensors():
    """`node.state = ...` on the instance's objects: equal to plain, and left there as tensors (not lazy values)."""
    p = dp.Params()
    batch = [dp.chain(t) for t in _tokens(6, 11)]
    got = _check(dp.state_on_nodes, batch, p, options=DYNAMIC)
    for last, out in zip(batch, got):
        node = last
        while node is not None:
            assert type(node.state) is torch.Tensor
            node = node.prev
        torch.testing.assert_close(last.state, out, **TOL)


def test_a_list_the_module_holds_is_not_shared_between_instances():
    """`p.outputs = []` / `p.outputs.append(h)` with value reads between: each instance runs alone from its first
    change of the shared state, so none sees another's appends (before: the lists mixed, a wrong answer)."""
    p = dp.Collecting()
    batch = _tokens(7, 12)
    _check(dp.outputs_on_the_module, batch, p, options=DYNAMIC)
    assert all(type(x) is torch.Tensor for x in p.outputs), "the module's list holds tensors after the run"
    torch.testing.assert_close(torch.stack(p.outputs), dp.outputs_on_the_module(batch[-1], p), **TOL)


def test_a_late_change_of_shared_state_is_an_error_not_a_wrong_answer():
    p = dp.Collecting()
    with pytest.raises(ab.InstanceError, match="changed host state every instance shares .*`outputs`"):
        with torch.no_grad():
            dp.appends_to_the_module_late.run(_tokens(4, 13), p, backend="eager", options=DYNAMIC)


def test_every_instance_is_recorded_after_a_value_read():
    """A fiber that waits inside the torch-function mode's handler left the others running unrecorded (one
    instance at a time, eagerly): now the batch records the sum of what each instance records alone."""
    p = dp.Params()
    batch = _tokens(5, 14)
    alone = 0
    for x in batch:
        s = ab.RunStats()
        _check(dp.reads_between_ops, [x], p, options=DYNAMIC, stats=s)
        alone += s.dfg_nodes
    s = ab.RunStats()
    _check(dp.reads_between_ops, batch, p, options=DYNAMIC, stats=s)
    assert s.dfg_nodes == alone
    assert s.kernel_launches < s.dfg_nodes


def test_recurrent_cells_batch_by_their_rule(recwarn):
    s = ab.RunStats()
    _check(dp.gru_cell_steps, _tokens(6, 15), dp.Params(), options=DYNAMIC, stats=s)
    assert not [w for w in recwarn if "gru_cell" in str(w.message)], "vmap's per-row fallback was not used"
    cells = [b for b in s.blocks.values() if b.name == "gru_cell (dynamic)"]
    assert cells and sum(b.launches for b in cells) < s.dynamic.op("gru_cell").nodes


def _failing_static_tier(monkeypatch):
    """The static tier's runtime fails as acrobat's own bug would (a raw KeyError), the dynamic tier's does not."""
    from acrobat.runtime.executor import Runtime
    real = Runtime.run

    def run(self, instances, shared):
        if self.plan.dynamic is None:
            raise KeyError(117111)
        return real(self, instances, shared)

    monkeypatch.setattr(Runtime, "run", run)


def test_an_internal_error_of_the_static_tier_reruns_the_batch_dynamically(monkeypatch):
    """acrobat's own failure in the static tier (plain Python runs every instance) is not the user's problem:
    the batch runs again in the dynamic tier, with a DynamicFallbackWarning and a line in the report."""
    spec = get_model("treelstm")
    params = spec.make_params(50, 8, 0).double()
    batch = spec.instances(synthetic_trees(6, vocab_size=50, seed=6))
    _failing_static_tier(monkeypatch)
    stats = ab.RunStats()
    with pytest.warns(ab.DynamicFallbackWarning, match="KeyError: 117111"):
        with torch.no_grad():
            got = spec.program.run(batch, params, backend="eager", stats=stats)
            want = [spec.program(t, params) for t in batch]
    torch.testing.assert_close(got, want, **TOL)
    assert "KeyError: 117111" in stats.fallback and "ran in the dynamic tier" in stats.report()
    with pytest.raises(ab.InternalError, match="KeyError: 117111"):
        with torch.no_grad():
            spec.program.run(batch, params, backend="eager", options=ab.Options(strict=True))


def test_no_rerun_for_a_program_whose_calls_change_host_state(monkeypatch):
    """A second run would repeat changes that outlive the first (appends to a list the instance holds):
    the InternalError is raised instead."""
    from tests import effects_progs as ep
    from tests.test_effects import _params
    assert ep.numbered.compile(1).effects, "its calls append to a list that outlives them"
    _failing_static_tier(monkeypatch)
    with pytest.raises(ab.InternalError, match="KeyError: 117111"):
        with torch.no_grad():
            ep.numbered.run(synthetic_trees(3, seed=1, vocab_size=16), _params(), backend="eager")


def test_a_program_in_the_dynamic_tier_is_compiled_once_for_its_runs():
    """The dynamic tier's compile is kept for later runs (each run re-ran the static analysis and made a new
    one), and apart from a compile without shared arguments (``source()``, ``explain()``)."""
    prog = dp.lambdas_and_sorting
    p = dp.Params()

    def compiles() -> int:
        return sum(len(v) for v in prog._compiled.values())

    _check(prog, _tokens(4, 0), p)
    before = compiles()
    for seed in range(1, 4):
        _check(prog, _tokens(4, seed), p)
    assert compiles() == before
    blind = prog.compile(1)
    assert blind.facts is None and prog.compile(1, shared=(p,)).facts == {} and compiles() <= before + 1


def test_the_host_state_fingerprint_sees_attributes_added_replaced_and_appended():
    """The fingerprint keeps each owner's watched names until its names change: a new attribute, one removed
    and another added (the same count), a list appended to, and a value rebound all change it."""
    from acrobat.runtime.dynamic import shared_host_state

    p = dp.Params()
    fp = shared_host_state((p,))
    assert fp is not None
    base = fp()
    assert fp() == base
    p.outputs = []
    with_list = fp()
    assert with_list != base
    p.outputs.append(1)
    assert fp() != with_list
    del p.outputs
    p.other = []  # one removed, one added: as many names as before
    renamed = fp()
    assert renamed != with_list and renamed != base
    p.cell.hidden_size = 5  # a submodule's attribute rebound
    assert fp() != renamed
