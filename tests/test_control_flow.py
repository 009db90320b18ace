"""Batched == plain per-instance for the control flow users write (while, elif, zip, tensor inputs)."""

from __future__ import annotations

import random

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import control_progs as cp
from tests.progs import Small

TOL = {"rtol": 1e-5, "atol": 1e-6}


def check(prog, instances, p):
    with torch.no_grad():
        torch.testing.assert_close(prog.run(instances, p), [prog(x, p) for x in instances], **TOL)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 6)), min_size=1, max_size=10))
def test_while_loop(insts):
    check(cp.countdown, insts, Small())


def test_while_loop_steps_batch_across_instances():
    stats_trace = cp.countdown.trace([(1, 3), (2, 3), (3, 1)], Small())
    steps = [r for r in stats_trace if r[4] >= cp.countdown.compile(1).plan.base]
    assert len({r[4] for r in steps}) == 3  # 3 depths: the step-1 nodes of all instances share one


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=8), min_size=1, max_size=6))
def test_if_elif_else_and_enumerate(batch):
    check(cp.branches, batch, Small())


def test_tensor_instances_and_lists_between_functions():
    rng = random.Random(0)
    xs = [torch.tensor([rng.uniform(-1, 1) for _ in range(4)]) for _ in range(5)]
    check(cp.from_tensors, xs, Small())
