"""Tensor-dependent control flow on fibers (§4.2), fork-join concurrency and ghost operators."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import acrobat as ab
from acrobat.models.stackrnn import StackRNNParams
from acrobat.models.stackrnn_program import stackrnn
from tests import tdc_progs as tp

TOL = {"rtol": 1e-5, "atol": 1e-6}


class P(nn.Module):
    def __init__(self, hidden: int = 4, vocab: int = 10, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        def r(*shape, s=0.6):
            return nn.Parameter(torch.randn(*shape, generator=g) * s)
        self.emb, self.W, self.U, self.b = r(vocab, hidden), r(hidden, hidden), r(hidden, hidden), r(hidden)
        self.V, self.w_gate, self.A, self.h0 = r(hidden, 3), r(hidden, s=2.0), r(hidden, 2), r(hidden)


def check(prog, instances, p, options=None):
    stats = ab.RunStats()
    with torch.no_grad():
        got = prog.run(instances, p, options=options, stats=stats)
        torch.testing.assert_close(got, [prog(x, p) for x in instances], **TOL)
    return stats


def test_programs_with_value_reads_run_on_fibers():
    for prog in (tp.scaled, tp.early_exit, tp.countdown, tp.drnn, stackrnn):
        assert prog.compile(1).plan.needs_fibers, prog.__name__


def test_item_value_in_an_operator():
    check(tp.scaled, list(range(10)), P())


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=12), st.integers(0, 5))
def test_numbers_read_by_host_code_equal_plain(tokens, seed):
    """``x.item()``, ``int(x)``, ``float(x)``, ``bool(x)`` (``Runtime.item``: one ``tolist()`` per group output)."""
    check(tp.numbers, tokens, P(seed=seed))
    src = tp.numbers.source(1)
    assert src.count("_rt.item(") == 4 and "_rt.value(" not in src  # `h[0] > 0` is computed in the block


def test_item_of_a_vector_names_the_instance():
    with torch.no_grad(), pytest.raises(ab.InstanceError, match=r"(?s)instance 0.*tdc_progs.py:\d+.*\.item\(\)"):
        tp.vector_item.run([1, 2], P())


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=12), st.integers(0, 5))
def test_early_exit_and_tensor_while(tokens, seed):
    p = P(seed=seed)
    check(tp.early_exit, tokens, p)
    check(tp.countdown, tokens, p)


def test_early_exit_batches_layers_across_instances():
    stats = check(tp.early_exit, list(range(10)), P())
    assert stats.kernel_launches <= 1 + 2 * 6  # embeddings, then per layer its cell and its exit test: not per instance


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 10_000)), min_size=1, max_size=10),
       st.integers(0, 3))
def test_drnn_like_generation_equals_plain(insts, seed):
    check(tp.drnn, insts, P(seed=seed))


def test_child_fibers_batch_across_subtrees():
    insts = [(i % 10, 17 * i + 3) for i in range(12)]
    p = P()
    on = check(tp.drnn, insts, p)
    off = check(tp.drnn, insts, p, ab.Options(fibers=False))
    assert on.dfg_nodes == off.dfg_nodes
    assert on.kernel_launches < off.kernel_launches  # subtrees batch together only on child fibers


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=9), min_size=1, max_size=8), st.integers(0, 3))
def test_stackrnn_equals_plain(batch, seed):
    check(stackrnn, batch, StackRNNParams(10, 4, seed=seed))


def test_ghost_operators_raise_mean_batch_size():
    rng = random.Random(0)
    batch = [[rng.randrange(10) for _ in range(rng.randint(3, 12))] for _ in range(16)]
    p = StackRNNParams(10, 4)
    on = check(stackrnn, batch, p)
    off = check(stackrnn, batch, p, ab.Options(ghosts=False))
    assert on.dfg_nodes == off.dfg_nodes
    assert on.kernel_launches < off.kernel_launches
    src = stackrnn.source(1)
    assert "ghost operator" in src


def test_operator_error_names_instance_and_line():
    with pytest.raises(ab.ShapeError) as info:
        stackrnn.run([[1, 2], [3, 99]], StackRNNParams(10, 4))  # token 99 is outside the embedding's 10 rows
    msg = str(info.value)
    assert "instance 1" in msg and "stackrnn_program.py" in msg and "p.emb[tokens[i]]" in msg


def test_host_error_names_instance_and_line():
    with pytest.raises(ab.InstanceError) as info:
        stackrnn.run([[1, 2], None], StackRNNParams(10, 4))  # instance 1 is not a token list
    msg = str(info.value)
    assert info.value.instance == 1
    assert msg.startswith("instance 1: TypeError") and "stackrnn_program.py:" in msg and "len(tokens)" in msg


class _NoOpRuntime:
    """Just enough of a runtime for the scheduler: no pending groups ever."""

    def __init__(self) -> None:
        self.groups: dict = {}
        self.dfg = SimpleNamespace(inst=0, phase=0)

    def flush(self, upto=None) -> None:
        raise AssertionError("nothing to flush")


def test_a_fiber_that_can_never_resume_is_an_error_not_a_hang():
    from acrobat.runtime.fibers import FiberScheduler
    sched = FiberScheduler(_NoOpRuntime())

    def entry(rt, base, inst):
        sched.wait((0, 5, 0))  # waits for a group that nobody will ever create
        return None, base

    with pytest.raises(ab.AcrobatError, match=r"instances \[0, 1\] wait .* can never resume"):
        sched.run(entry, 0, ["a", "b"], ())


def test_hoisted_block_runs_once_per_run_on_fibers():
    """A hoisted block (static depth) whose values no value read needs waits for every fiber's
    nodes: one launch per run, not one per flush (§4.2, App. A.1)."""
    insts = [[(i * 7 + j) % 10 for j in range(3 + i % 5)] for i in range(8)]
    stats = check(tp.gated_steps, insts, P())
    hoisted = [b for b in stats.blocks.values() if b.hoisted]
    assert len(hoisted) == 1
    assert hoisted[0].launches == 1 and hoisted[0].nodes == sum(map(len, insts))
    twice = ab.RunStats()
    with torch.no_grad():
        tp.gated_steps.run(insts, P(), stats=twice)
        tp.gated_steps.run(insts[:3], P(), stats=twice)
    assert [b.launches for b in twice.blocks.values() if b.hoisted] == [2]  # once per run


token_lists = st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=8), min_size=1, max_size=6)


@settings(max_examples=15, deadline=None)
@given(token_lists, st.integers(0, 5))
def test_hoisted_nodes_of_a_loop_are_added_ahead_on_fibers(insts, seed):
    """The hoisted input projection a step reads at once runs as one launch a run (its nodes for every
    token added before the loop), and results equal plain Python, also when the loop changes its list
    or leaves early (where nothing is added ahead)."""
    p = P(seed=seed)
    stats = check(tp.pondering, insts, p)
    hoisted = [b for b in stats.blocks.values() if b.hoisted]
    assert [b.launches for b in hoisted] == [1]
    assert hoisted[0].nodes == sum(len(x) for x in insts)
    check(tp.pondering_grows, insts, p)
    check(tp.pondering_stops, insts, p)


def test_nothing_is_added_ahead_of_a_loop_that_may_leave_early():
    assert "_pf" in tp.pondering.source(1) and "_pf" in tp.pondering_grows.source(1)
    assert "_pf" not in tp.pondering_stops.source(1)
