"""A list a shared module holds for the run (issue 18 §2): ``m.outputs = []`` in the entry, ``self.outputs.append``
in the module's methods, in the static tier (``acrobat.analysis.run_lists``).

Each program compiles statically (``Options(strict=True)``) and equals plain per-instance calls on both
backends: the results, and what ``m.outputs`` holds after the run (the last instance's list, as plain calls,
instance after instance, leave it); gradients (eager) too. Forms that are not this pattern keep today's error.
"""

from __future__ import annotations

import pytest
import torch

import acrobat as ab
from tests import state_progs as sp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 7])
@pytest.mark.parametrize("name", ["collects_per_node", "collects_in_the_entry"])
def test_run_list_runs_statically_and_leaves_the_last_instances_list(name, n, backend):
    prog = getattr(sp, name)
    m = sp.Collector()
    batch = sp.trees(n, n + len(name), binary=True)
    with torch.no_grad():
        want = [prog(t, m) for t in batch]
    want_outputs = list(m.outputs)
    m.outputs = ["left from before the run"]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = prog.run(batch, m, backend=backend, options=STRICT, stats=stats)
    assert stats.dynamic is None and stats.fallback is None
    torch.testing.assert_close(got, want, **TOL)
    assert isinstance(m.outputs, list) and all(isinstance(x, torch.Tensor) for x in m.outputs)
    torch.testing.assert_close(m.outputs, want_outputs, **TOL)


def test_gradients_through_the_run_list_equal_plain():
    m = sp.Collector()
    batch = sp.trees(7, 3, binary=True)
    grads = []
    for run in (lambda: [sp.collects_per_node(t, m) for t in batch],
                lambda: sp.collects_per_node.run(batch, m, backend="eager", options=STRICT)):
        m.zero_grad(set_to_none=True)
        outs = run()
        loss = sum(x.square().sum() for x in torch.utils._pytree.tree_leaves(outs))
        (loss + sum(x.sum() for x in m.outputs)).backward()  # the last instance's list holds the graph too
        grads.append({k: q.grad.clone() for k, q in m.named_parameters()})
    for k in grads[0]:
        torch.testing.assert_close(grads[1][k], grads[0][k], **TOL)


def test_the_example_runs_statically():
    from examples import recursive_module as rm
    m = rm.make_params(0)
    batch = rm.instances(5, 2)
    with torch.no_grad():
        want = [rm.reference(t, m) for t in batch]
        got = rm.program.run(batch, m, backend="eager", options=STRICT)
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(torch.stack(m.outputs), want[-1][1], **TOL)


@pytest.mark.parametrize("name", ["reads_outputs_first", "sets_outputs_on_one_path", "appends_without_setting"])
def test_other_forms_keep_the_shared_module_error(name):
    with pytest.raises(ab.CompileError, match="changes a model parameter, which every instance shares"):
        getattr(sp, name).run(sp.trees(2, 1, binary=True), sp.Collector(), options=STRICT)


class _Peeker:
    """A host object the module holds, which holds the module itself."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def count(self) -> int:
        return len(self.module.outputs)


@ab.program
def _run_list_read_by_plain_python(tokens, p):
    p.outputs = []
    h = p.emb[tokens[0]]
    for t in tokens:
        h = torch.tanh(h + p.emb[t])
        p.outputs.append(h)
    return h * p.peeker.count()


def test_a_plain_python_helper_reading_the_run_list_fails_loudly_not_stale():
    """The static tier keeps `p.outputs` as a variable of each instance's run, so a plain Python method of an
    object the module holds (computed once per run, a shared value) read what the attribute held before the run
    (3 stale items: a silent wrong answer). During the run the attribute refuses any use, naming the line; the
    attribute is put back after the failure."""
    p = sp.Collector()
    p.outputs = [torch.zeros(4)] * 3
    p.peeker = _Peeker(p)
    before = p.outputs
    with torch.no_grad(), pytest.raises(ab.AcrobatError, match=r"run's list(.|\n)*test_run_lists.py:\d+: return len"):
        _run_list_read_by_plain_python.run([[1, 2], [3]], p, backend="eager", options=ab.Options(strict=True))
    assert p.outputs is before
