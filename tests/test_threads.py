"""Threads per launch (acrobat.runtime.threads): the per-block choice, from fed samples (no timings asserted)."""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import acrobat as ab
from acrobat.runtime import threads
from acrobat.runtime.threads import (GIVE_UP, MARGIN, MIN_POOL_ROWS, PROBE_RUNS, STALL_RUNS, STALL_US, ThreadPolicy,
                                     size_class)
from tests import tdc_progs as tp
from tests.test_tdc import P

Speed = Callable[[int], float]  # rows -> the pool's time as a share of 1 thread's


@pytest.fixture(autouse=True)
def every_launch_size_is_timed(request, monkeypatch):
    """The choice logic below is fed launches of a few rows: let those be timed too (``MIN_POOL_ROWS``)."""
    if "floor" not in request.node.name:
        monkeypatch.setattr(threads, "MIN_POOL_ROWS", 1)


def test_launches_below_the_floor_run_on_one_thread_untimed():
    p = ThreadPolicy("auto")
    for serial in range(1, 4 * PROBE_RUNS):
        assert p.threads_for(0, "b", 2, serial, MIN_POOL_ROWS - 1) == 1
        p.record(0, 1, 10.0, MIN_POOL_ROWS - 1, serial)
    assert p.settled(0, MIN_POOL_ROWS - 1) and not p.blocks and p.tuned()
    assert p.threads_for(0, "b", 2, 1, MIN_POOL_ROWS) == 1 and p.threads_for(0, "b", 2, 2, MIN_POOL_ROWS) == 2


def _run(policy: ThreadPolicy, serial: int, launches: list[tuple[int, float]], speed: Speed = lambda rows: 1.0
         ) -> list[int]:
    """One run of block 0: per launch (rows, µs per row at 1 thread), the pool taking ``speed(rows)`` of that.
    The thread counts the launches ran at."""
    got = []
    for rows, us_per_row in launches:
        n = policy.threads_for(0, "b", 2, serial, rows)
        got.append(n)
        policy.record(0, n, rows * us_per_row * (1.0 if n == 1 else speed(rows)), rows, serial)
    return got


def _probe(speed: Speed, launches: list[tuple[int, float]]) -> ThreadPolicy:
    """A policy after enough runs of ``launches`` for every size class to choose."""
    p = ThreadPolicy("auto")
    for serial in range(1, 4 * PROBE_RUNS + 2):
        _run(p, serial, launches, speed)
    return p


def _choice(p: ThreadPolicy, rows: int) -> int | None:
    """The thread count chosen for block 0's launches of ``rows`` rows, with a pool of 2 (None: probing)."""
    c = p.blocks[(0, size_class(rows))].choice
    return None if c is None else 1 if c == 1 else 2


def test_runs_take_turns_then_the_pool_is_kept_only_when_clearly_faster():
    p = ThreadPolicy("auto")
    assert [_run(p, serial, [(4, 10.0)] * 3) for serial in range(1, 6)] == \
        [[1, 1, 1], [2, 2, 2], [1, 1, 1], [2, 2, 2], [1, 1, 1]]  # every launch of a run alike
    tiny = [(4, 10.0)]
    assert _choice(_probe(lambda rows: 40.0, tiny), 4) == 1  # a tiny launch on a busy pool
    assert _choice(_probe(lambda rows: MARGIN + 0.1, tiny), 4) == 1  # near-equal: the pool buys nothing
    chosen = _probe(lambda rows: 0.5, tiny)
    assert _choice(chosen, 4) == 2  # a launch that gains from the pool
    assert chosen.threads_for(0, "b", 2, 99, 4) == 2 and f"{chosen.pool} (measured" in chosen.report()  # the pool: torch's threads


def test_each_launch_size_gets_its_own_choice():
    """A block's launches differ in size (tree levels of 600 nodes and of 3): the pool pays at one and not
    at the other, and a choice made on small launches does not hold for large ones."""
    speed: Speed = lambda rows: 0.6 if rows > 100 else 3.0
    levels = [(600, 10.0), (3, 200.0)] * 4
    p = _probe(speed, levels)
    assert (_choice(p, 600), _choice(p, 3)) == (2, 1)
    assert p.threads_for(0, "b", 2, 99, 700) == 2 and p.threads_for(0, "b", 2, 99, 2) == 1
    small_first = _probe(speed, [(3, 200.0)])
    assert _choice(small_first, 3) == 1
    assert small_first.threads_for(0, "b", 2, 99, 600) == 1 and _choice(small_first, 600) is None  # probing anew
    assert "512+" in p.report() and "2-3" in p.report()


def test_pooled_launches_that_stall_in_several_runs_end_the_probing_at_one_thread():
    """One stalled pooled launch is no proof (the process's first pooled launch starts OpenMP's workers);
    stalls in ``STALL_RUNS`` runs are."""
    stall = max(STALL_US, 4 * 10.0 * GIVE_UP) + 1.0
    p = ThreadPolicy("auto")
    serial = 0
    for _ in range(STALL_RUNS):
        _run(p, serial := serial + 1, [(4, 10.0)])
        assert p.threads_for(0, "b", 2, serial := serial + 1, 4) == 2
        assert _choice(p, 4) is None  # not after one stalled run
        p.record(0, 2, stall, 4, serial)
    assert _choice(p, 4) == 1
    q = ThreadPolicy("auto")
    for serial in (1, 3, 5):
        _run(q, serial, [(4, 10.0)])
        q.threads_for(0, "b", 2, serial + 1, 4)
        q.record(0, 2, 4 * 10.0 * GIVE_UP, 4, serial + 1)  # slower, but not a stall (under STALL_US): keep probing
    assert _choice(q, 4) is None


def test_a_run_that_compiled_is_no_sample():
    p = ThreadPolicy("auto")
    p.threads_for(0, "b", 2, 1, 4)
    p.record(0, 1, 50.0, 4, 1)
    p.discard(0, 1, 4)
    p.record(0, 1, 50.0, 4, 1)  # a later launch of the same run
    assert p.blocks[(0, size_class(4))].samples[1] == {}
    assert p.probing() == ["b (4-7 rows)"] and not p.tuned()


def test_size_classes():
    assert [size_class(r) for r in (1, 2, 3, 4, 7, 8, 511, 512, 10_000)] == [0, 1, 1, 2, 2, 3, 8, 9, 9]


def test_forced_modes_and_unknown_mode():
    assert ThreadPolicy("1").threads_for(0, "b", 2, 1, 8) == 1
    assert ThreadPolicy("all").threads_for(0, "b", 2, 1, 8) == 2
    assert ThreadPolicy("auto").threads_for(0, "b", 1, 1, 8) == 1  # one thread in the pool: nothing to choose
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
