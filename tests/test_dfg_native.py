"""The native DFG node storage (``acrobat._native.Dfg``/``Group``, §4.1) against a plain Python model of it."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat import _native
from acrobat.runtime.dfg import DEPTH_SHIFT, PHASE_SHIFT, STAGE_BITS, STAGE_MASK, Group, group_key


def _dfg(hoisted: bytes = b"") -> tuple[_native.Dfg, list[Group]]:
    made: list[Group] = []
    groups: dict[int, Group] = {}

    def make(phase: int, depth: int, block: int) -> Group:
        g = groups[group_key(phase, depth, block)] = Group(None, phase, depth, len(made), len(made) << 30)
        made.append(g)
        return g

    return _native.Dfg(groups, make, hoisted), made


phases = st.tuples(st.integers(0, 2), st.integers(0, 3)).map(lambda p: p[0] << STAGE_BITS | p[1])
node = st.tuples(phases, st.integers(0, 40), st.integers(0, 3), st.integers(0, 9),
                 st.lists(st.integers(0, 1 << 40), max_size=70), st.booleans())


@settings(max_examples=60, deadline=None)
@given(st.lists(node, max_size=40), st.binary(min_size=0, max_size=4))
def test_nodes_land_in_their_group_in_order(nodes, hoisted):
    """Each node's handles, host tuple and instance go to the group of (phase, depth, block), in order;
    the returned handle is the group's base plus the node's row. A hoisted block's group ignores the
    phase's stage bits."""
    dfg, _ = _dfg(hoisted)
    want: dict[int, list[tuple]] = {}
    for phase, depth, block, inst, handles, with_hosts in nodes:
        dfg.phase, dfg.inst = phase, inst
        key = group_key(phase & ~STAGE_MASK if block < len(hoisted) and hoisted[block] else phase, depth, block)
        hosts = (inst, "x") if with_hosts else None
        h = dfg.node_hosts(depth, block, hosts, *handles) if hosts else dfg.node(depth, block, *handles)
        rows = want.setdefault(key, [])
        assert h == dfg.groups[key].base + len(rows)
        rows.append((handles, hosts, inst))
    assert sorted(dfg.groups) == sorted(want)
    for key, rows in want.items():
        g = dfg.groups[key]
        assert g.size() == len(rows)
        assert list(g.tensors) == [h for handles, _, _ in rows for h in handles]
        assert list(g.insts) == [inst for _, _, inst in rows]
        assert g.hosts == [hosts for _, hosts, _ in rows if hosts is not None]
        assert (g.phase, g.depth) == (key >> PHASE_SHIFT, (key >> DEPTH_SHIFT) & ((1 << PHASE_SHIFT - DEPTH_SHIFT) - 1))


def test_group_keys_sort_in_flush_order():
    """Sorting packed keys sorts by (phase, depth, block)."""
    triples = [(1, 0, 5), (0, 7, 1), (0, 7, 0), (0, 100000, 3), (2, 1, 65535), (0, 0, 9), (1 << STAGE_BITS | 3, 2, 1),
               (1 << STAGE_BITS, (1 << 24) - 1, 0), ((1 << 23) - 1, 0, 0)]
    assert sorted(triples) == [t for _, t in sorted((group_key(*t), t) for t in triples)]


def test_bad_node_arguments_are_refused_and_leave_the_group_unchanged():
    """A non-int handle, a key out of range or a view alive while the group grows: an error, no partial node."""
    dfg, _ = _dfg()
    dfg.node(0, 0, 1, 2)
    g = dfg.groups[group_key(0, 0, 0)]
    with pytest.raises(TypeError, match="argument 1 is a float, not a handle"):
        dfg.node(0, 0, 3, 4.0)
    assert list(g.tensors) == [1, 2] and g.size() == 1
    with pytest.raises(ValueError, match="out of the key's range"):
        dfg.node(-1, 0, 1)
    with pytest.raises(ValueError, match="out of the key's range"):
        dfg.node(0, 1 << 16, 1)
    with pytest.raises(ValueError, match="out of the key's range"):
        dfg.node(1 << 24, 0, 1)
    view = g.tensors
    with pytest.raises(BufferError):
        dfg.node(0, 0, 5, 6)
    del view
    assert dfg.node(0, 0, 5, 6) == g.base + 1


def test_make_must_register_the_group():
    """``make`` that returns a group without putting it in ``groups`` is an error, not a dangling group."""
    dfg = _native.Dfg({}, lambda phase, depth, block: Group(None, phase, depth, 0, 0), b"")
    with pytest.raises(TypeError, match="make\\(\\) must return a Group it put in groups"):
        dfg.node(0, 0, 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1 << 50), max_size=60), st.integers(0, 40))
def test_sources_are_the_distinct_shifted_handles(handles, shift):
    """``_native.sources`` (the groups a group reads) equals the set of ``h >> shift`` computed in Python."""
    buf = bytearray(struct.pack(f"{len(handles)}q", *handles))
    assert _native.sources(buf, shift) == {h >> shift for h in handles}


@pytest.mark.parametrize("fibers", [False, True])
def test_a_run_holds_no_reference_cycle(monkeypatch, fibers):
    """With the cycle collector off, a run's runtime (its DFG, groups and outputs) is freed when the run
    ends: the native DFG's ``make`` does not point back at the runtime."""
    import gc
    import weakref

    import torch

    import acrobat.runtime.executor as executor
    from tests import tdc_progs as tp
    from tests.test_tdc import P

    runs: list[weakref.ref] = []
    init = executor.Runtime.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        runs.append(weakref.ref(self))

    monkeypatch.setattr(executor.Runtime, "__init__", recording_init)
    prog = tp.pondering if fibers else tp.scaled
    insts = [[1, 2, 3], [4, 5]] if fibers else [1, 2, 3]
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.no_grad():
            prog.run(insts, P(), backend="eager")
        assert runs and runs[-1]() is None
    finally:
        if was_enabled:
            gc.enable()


def test_group_is_the_pending_group_nodes_go_to():
    """``Dfg.group`` makes the pending group on a miss and returns the one ``node`` appends to."""
    dfg, made = _dfg()
    dfg.phase = 1
    g = dfg.group(3, 2)
    assert made == [g] and dfg.groups[group_key(1, 3, 2)] is g
    assert dfg.node(3, 2, 7) == g.base and dfg.group(3, 2) is g and list(g.tensors) == [7]
