"""Threads per launch (acrobat.runtime.threads): the per-block choice, from fed samples (no timings asserted)."""

from __future__ import annotations

import pytest
import torch

import acrobat as ab
from acrobat.runtime.threads import GIVE_UP, MARGIN, PROBE_RUNS, STALL_US, ThreadPolicy
from tests import tdc_progs as tp
from tests.test_tdc import P


def _run(policy: ThreadPolicy, serial: int, launches: list[tuple[int, float]], speed: float = 1.0) -> list[int]:
    """One run of block 0: per launch (rows, µs per row at 1 thread); the pool takes ``speed`` times that.
    The thread counts the launches ran at."""
    got = []
    for rows, us_per_row in launches:
        n = policy.threads_for(0, "b", 2, serial)
        got.append(n)
        policy.record(0, n, rows * us_per_row * (1.0 if n == 1 else speed), rows, serial)
    return got


def _probe(speed: float, launches: list[tuple[int, float]] | None = None) -> ThreadPolicy:
    """A policy after enough runs of ``launches`` (default: one 4-row launch) to choose, with the pool at
    ``speed`` times the 1-thread time."""
    p = ThreadPolicy("auto")
    for serial in range(1, 4 * PROBE_RUNS + 2):
        _run(p, serial, launches or [(4, 10.0)], speed)
    return p


def test_runs_take_turns_by_pairs_then_the_pool_is_kept_only_when_clearly_faster():
    p = ThreadPolicy("auto")
    assert [_run(p, serial, [(4, 10.0)] * 3) for serial in range(1, 6)] == \
        [[1, 1, 1], [1, 1, 1], [2, 2, 2], [2, 2, 2], [1, 1, 1]]  # every launch of a run alike
    assert _probe(40.0).blocks[0].choice == 1  # a tiny launch on a busy pool
    assert _probe(MARGIN + 0.1).blocks[0].choice == 1  # near-equal: the pool buys nothing
    chosen = _probe(0.5)
    assert chosen.blocks[0].choice == 2  # a large launch gains from the pool
    assert chosen.threads_for(0, "b", 2, 99) == 2 and "2 (measured" in chosen.report()


def test_launches_of_different_sizes_are_compared_run_against_run():
    """A run's launches differ in size (tree levels): per-row costs of big and small launches differ, so
    turns by launch compared different levels; by run, the pool wins when it is faster on every launch."""
    levels = [(600, 10.0), (3, 200.0)] * 4  # a big level, a tiny one, ...: an even number of launches per run
    assert _probe(0.7, levels).blocks[0].choice == 2


def test_a_stalled_pooled_launch_ends_the_probing_at_one_thread():
    p = ThreadPolicy("auto")
    _run(p, 1, [(4, 10.0)])
    _run(p, 2, [(4, 10.0)])
    assert p.threads_for(0, "b", 2, 3) == 2
    p.record(0, 2, max(STALL_US, 4 * 10.0 * GIVE_UP) + 1.0, 4, 3)
    assert p.blocks[0].choice == 1
    q = ThreadPolicy("auto")
    _run(q, 1, [(4, 10.0)])
    _run(q, 2, [(4, 10.0)])
    q.threads_for(0, "b", 2, 3)
    q.record(0, 2, 4 * 10.0 * GIVE_UP, 4, 3)  # slower, but not a stall (under STALL_US): keep probing
    assert q.blocks[0].choice is None


def test_a_run_that_compiled_is_no_sample():
    p = ThreadPolicy("auto")
    p.threads_for(0, "b", 2, 1)
    p.record(0, 1, 50.0, 4, 1)
    p.discard(0, 1, 1)
    p.record(0, 1, 50.0, 4, 1)  # a later launch of the same run
    assert p.blocks[0].samples[1] == {}


def test_forced_modes_and_unknown_mode():
    assert ThreadPolicy("1").threads_for(0, "b", 2, 1) == 1
    assert ThreadPolicy("all").threads_for(0, "b", 2, 1) == 2
    assert ThreadPolicy("auto").threads_for(0, "b", 1, 1) == 1  # one thread in the pool: nothing to choose
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
