"""Threads per launch (acrobat.runtime.threads): the per-block choice, from fed samples (no timings asserted)."""

from __future__ import annotations

import pytest
import torch

import acrobat as ab
from acrobat.runtime.threads import EARLY_LAUNCHES, GIVE_UP, MARGIN, PROBE_LAUNCHES, ThreadPolicy
from tests import tdc_progs as tp
from tests.test_tdc import P


def _probe(policy: ThreadPolicy, one_us: float, many_us: float) -> int | None:
    for _ in range(PROBE_LAUNCHES):
        for _ in range(2):
            n = policy.threads_for(0, "b", 2)
            policy.record(0, n, one_us if n == 1 else many_us, 4)
    return policy.blocks[0].choice


def test_probing_alternates_then_keeps_one_thread_unless_the_pool_is_clearly_faster():
    p = ThreadPolicy("auto")
    assert [p.threads_for(0, "b", 2) for _ in range(4)] == [1, 2, 1, 2]
    assert _probe(ThreadPolicy("auto"), 10.0, 400.0) == 1  # a tiny launch on a busy pool
    assert _probe(ThreadPolicy("auto"), 10.0, 10.0 * (MARGIN + 0.1)) == 1  # near-equal: the pool buys nothing
    assert _probe(ThreadPolicy("auto"), 10.0, 5.0) == 2  # a large launch gains from the pool
    chosen = ThreadPolicy("auto")
    _probe(chosen, 10.0, 5.0)
    assert chosen.threads_for(0, "b", 2) == 2 and "2 (measured" in chosen.report()


def test_probing_stops_early_when_the_pool_is_clearly_slower():
    p = ThreadPolicy("auto")
    for _ in range(EARLY_LAUNCHES):
        for _ in range(2):
            n = p.threads_for(0, "b", 2)
            p.record(0, n, 10.0 if n == 1 else 10.0 * GIVE_UP * 2, 4)
    assert p.blocks[0].choice == 1  # after 2 launches each, not PROBE_LAUNCHES
    q = ThreadPolicy("auto")
    for _ in range(EARLY_LAUNCHES):
        for _ in range(2):
            n = q.threads_for(0, "b", 2)
            q.record(0, n, 10.0 if n == 1 else 10.0 * (GIVE_UP - 1), 4)
    assert q.blocks[0].choice is None  # slower, but not clearly: keep probing


def test_forced_modes_and_unknown_mode():
    assert ThreadPolicy("1").threads_for(0, "b", 2) == 1
    assert ThreadPolicy("all").threads_for(0, "b", 2) == 2
    assert ThreadPolicy("auto").threads_for(0, "b", 1) == 1  # one thread in the pool: nothing to choose
    with pytest.raises(ValueError, match="launch-threads mode"):
        ThreadPolicy("many")


def test_runs_restore_torch_threads_and_report_the_choice_per_block():
    before = torch.get_num_threads()
    insts = [[(i * 7 + j) % 10 for j in range(3 + i % 5)] for i in range(8)]
    with torch.no_grad():
        for _ in range(3):
            tp.gated_steps.run(insts, P(), backend="eager")
    assert torch.get_num_threads() == before
    report = tp.gated_steps.backend("eager")[0].report()
    if before > 1:
        assert "threads per launch" in report and "gated_steps_0:" in report
