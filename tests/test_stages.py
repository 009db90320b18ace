"""Staged loops (``acrobat.analysis.phases``, §4.1): stage s of iteration t of every instance runs together, so
the fixed work after a varying inner loop batches across instances; results equal plain Python."""

from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
import acrobat.runtime.executor as executor
from acrobat.frontend import ir
from tests import stage_progs as sp
from tests.progs import Small

TOL = dict(rtol=1e-5, atol=1e-5)
P = Small()

steps = st.tuples(st.integers(0, 9), st.integers(0, 5))
batches = st.lists(st.lists(steps, min_size=0, max_size=6).map(tuple), min_size=1, max_size=6)


def run(prog, insts, options=None, backend="eager"):
    """The batched run, checked against plain per-instance Python; its stats."""
    stats = ab.RunStats()
    with torch.no_grad():
        got = prog.run(insts, P, options=options, stats=stats, backend=backend)
        torch.testing.assert_close(got, [prog(x, P) for x in insts], **TOL)
    return stats


def fixed_cell(prog) -> str:
    """The name of the block on the line marked ``# marker: fixed_cell``."""
    lines = inspect.getsource(sp).splitlines()
    line = next(i for i, text in enumerate(lines, start=1) if "# marker: fixed_cell" in text)
    [name] = [b.name for b in prog.compile(1).blocks.values() if b.loc.line == line]
    return name


@pytest.mark.parametrize("prog", [sp.nested, sp.nested_exits, sp.nested_while, sp.nested_reads, sp.recursive_call])
@settings(max_examples=12, deadline=None)
@given(insts=batches)
def test_staged_loops_match_plain_python(prog, insts):
    run(prog, insts)
    run(prog, insts, options=ab.Options(stages=False))


@settings(max_examples=10, deadline=None)
@given(insts=batches)
def test_each_iterations_fixed_cell_is_one_launch(insts):
    """With stages, iteration t's fixed cell of every instance is one launch (one per iteration of the longest
    instance); without, the cells of instances whose inner loops differ run at different depths."""
    name = fixed_cell(sp.nested)
    on = run(sp.nested, insts)
    launches = next(b.launches for b in on.blocks.values() if b.name == name) if any(insts) else 0
    assert launches == max(map(len, insts))
    rows = sp.nested.trace(insts, P)
    cells = [r for r in rows if r[1] == name]
    for t in range(max(map(len, insts))):  # iteration t: stage 2t + 2, at the base depth, every instance
        assert {(inst, stage) for inst, _, _, stage, _ in cells if stage == 2 * t + 2} \
            == {(i, 2 * t + 2) for i, x in enumerate(insts) if len(x) > t}
    assert len({(ph, stage, d) for _, _, ph, stage, d in cells}) == launches


def test_without_stages_the_fixed_cells_scatter():
    insts = [((1, 5), (2, 0), (3, 1)), ((4, 0), (5, 5), (6, 1)), ((7, 2), (8, 2), (1, 2))]
    name = fixed_cell(sp.nested)
    on, off = run(sp.nested, insts), run(sp.nested, insts, options=ab.Options(stages=False))
    cell = {s: next(b.launches for b in st_.blocks.values() if b.name == name) for s, st_ in (("on", on), ("off", off))}
    assert cell == {"on": 3, "off": 5}  # off: depths 5, 6, 8 | 0, 6, 8 | 2, 5, 8
    assert on.stages == 6 and off.stages == 0


def test_hoisted_nodes_of_a_staged_loop_are_one_launch():
    """The input projection (hoisted) of every iteration of every instance: one group, whatever the stage."""
    insts = [((1, 2), (2, 3)), ((3, 1),), ((4, 4), (5, 0), (6, 2))]
    stats = run(sp.nested, insts)
    hoisted = [b for b in stats.blocks.values() if b.hoisted]
    assert [(b.launches, b.nodes) for b in hoisted] == [(1, 6)]


def test_which_loops_are_staged():
    def marks(prog):
        body = prog.compile(1).lowered
        return [s.stages for f in body for s in ir.walk_stmts(f.body) if isinstance(s, ir.StageMark) and s.index == 0]
    assert marks(sp.nested) == [2]
    assert marks(sp.nested_exits) == [2]
    assert marks(sp.nested_while) == [1]
    assert marks(sp.inner_only) == []
    assert marks(sp.nested_reads) == [2]
    assert marks(sp.recursive_call) == [2]
    assert marks(sp.fixed_call) == []  # a straight-line callee and a map loop advance every instance alike
    assert "enter_stage" not in sp.nested.source(1, ab.Options(stages=False))
    assert run(sp.inner_only, [((1, 2), (3, 4))]).stages == 0
    assert run(sp.fixed_call, [((1, 2), (3, 0)), ((4, 1),)]).stages == 0


@settings(max_examples=10, deadline=None)
@given(insts=batches, limit=st.integers(1, 6))
def test_past_the_last_stage_depth_scheduling_takes_over(insts, limit):
    """An instance past ``STAGE_LIMIT`` stages stays in the last one with its own depth counter: still exact."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(executor, "STAGE_LIMIT", limit)
        stats = run(sp.nested_exits, insts)
        assert stats.stages <= limit
        run(sp.nested_reads, insts)


def test_staged_loop_compiled_backend():
    insts = [((1, 3), (2, 0), (3, 2)), ((4, 1),), ((5, 4), (6, 2))]
    run(sp.nested, insts, backend="compiled")
    run(sp.nested_reads, insts, backend="compiled")
