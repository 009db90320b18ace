"""Arena memory and the value table: where batched outputs lie, and that a read never picks the wrong rows."""

from __future__ import annotations

import array

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.runtime.arena import ALIGN, Arena
from acrobat import _native
from acrobat.runtime.dfg import OUTPUT_STEP, POOL_SHIFT, ROW_BITS, ValueTable

CPU = torch.device("cpu")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([(5,), (256,), (3, 7)]), st.integers(1, 300)), min_size=1, max_size=30))
def test_rows_start_aligned_and_survive_growth(allocs):
    """Every allocation starts on a 16-byte boundary; a pool that grows keeps every row written before."""
    arena = Arena()
    written = []
    for shape, n in allocs:
        pool, start = arena.alloc(shape, torch.float32, CPU, n)
        assert (start * pool.storage[0].numel() * 4) % ALIGN == 0
        rows = torch.randn(n, *shape)
        pool.storage[start:start + n] = rows
        written.append((shape, start, rows))
    for shape, start, rows in written:  # read back through each shape's current storage
        torch.testing.assert_close(arena.pool(shape, torch.float32, CPU).storage[start:start + len(rows)], rows)


def test_arena_rows_refuse_values_of_another_pool_or_not_placed():
    """A column is located only when all its values lie in the pool asked for; else None, never wrong rows."""
    table = ValueTable(max_outputs=2)
    a = table.group(None, 0, 0)
    b = table.group(None, 0, 1)
    unplaced = table.group(None, 0, 2)
    table.place(a, 0, pool=0, start=10, spec=None)
    table.place(a, 1, pool=0, start=20, spec=None)
    table.place(b, 0, pool=1, start=0, spec=None)
    h_a0, h_a1 = a.base + 3, a.base + OUTPUT_STEP + 3  # row 3 of outputs 0 and 1 of group a
    h_b0 = b.base + 5
    pool0 = np.array([0], dtype=np.int64)
    q = lambda *hs: array.array("q", hs)  # noqa: E731 - handles node after node

    rows = table.arena_rows(q(h_a0, h_a1), pool0)  # two nodes, one column
    assert rows is not None and rows.tolist() == [[13, 23]]
    assert table.arena_rows(q(h_a0, h_b0), pool0) is None  # b lies in pool 1
    assert table.arena_rows(q(h_a0, unplaced.base), pool0) is None
    assert table.arena_rows(q(h_b0), np.array([1 << 40], dtype=np.int64)) is not None
    two = table.arena_rows(q(h_a0, h_b0, h_a1, h_b0), np.array([0, 1 << 40], dtype=np.int64))  # columns a, b
    assert two is not None and two.tolist() == [[13, 23], [5, 5]]
    assert table.arena_rows(q(h_a0, h_b0, h_b0, h_a1), np.array([0, 1 << 40], dtype=np.int64)) is None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_native_arena_rows_match_a_plain_reference(data):
    """``acrobat._native.arena_rows`` against its definition computed value by value in Python: rows
    ``arena_offset[h >> ROW_BITS] + h - pool_base[j]`` per column, True iff all lie in [0, 2**POOL_SHIFT)."""
    kbits = data.draw(st.integers(1, 3))
    n_groups = data.draw(st.integers(1, 6))
    table = ValueTable(max_outputs=1 << kbits)
    groups = [table.group(None, 0, i) for i in range(n_groups)]
    for g in groups:  # place some outputs, in pools 0-2; leave the others unplaced
        for k in range(1 << kbits):
            if data.draw(st.booleans()):
                table.place(g, k, pool=data.draw(st.integers(0, 2)), start=data.draw(st.integers(0, 1000)), spec=None)
    columns = data.draw(st.integers(1, 4))
    nodes = data.draw(st.integers(1, 12))
    handle = st.builds(lambda g, k, r: groups[g].base + k * OUTPUT_STEP + r,
                       st.integers(0, n_groups - 1), st.integers(0, (1 << kbits) - 1), st.integers(0, 50))
    hs = array.array("q", data.draw(st.lists(handle, min_size=columns * nodes, max_size=columns * nodes)))
    base = np.array([p << POOL_SHIFT for p in data.draw(st.lists(st.integers(0, 2), min_size=columns,
                                                                  max_size=columns))], dtype=np.int64)

    want = [[0] * nodes for _ in range(columns)]
    ok = True
    for i in range(nodes):
        for j in range(columns):
            h = hs[i * columns + j]
            row = int(table.arena_offset[h >> ROW_BITS]) + h - int(base[j])
            ok &= 0 <= row < 1 << POOL_SHIFT
            want[j][i] = row
    out = np.empty((columns, nodes), dtype=np.int64)
    assert _native.arena_rows(hs, table.arena_offset, base, out) is ok
    if ok:
        assert out.tolist() == want
    got = table.arena_rows(hs, base)
    assert (got is not None) is ok and (got is None or got.tolist() == want)


def test_native_arena_rows_rejects_wrong_buffers():
    """Buffers of another item type, a read-only output or mismatched sizes raise; nothing is read out of bounds."""
    offset = ValueTable(max_outputs=1).arena_offset
    hs = array.array("q", [0, 1])
    one = np.zeros(1, np.int64)
    with pytest.raises(TypeError):
        _native.arena_rows(array.array("i", [0, 1]), offset, one, np.empty(2, np.int64))
    with pytest.raises(BufferError):
        _native.arena_rows(hs, offset, one, bytes(16))  # not writable
    with pytest.raises(ValueError):
        _native.arena_rows(hs, offset, one, np.empty(3, np.int64))
    with pytest.raises(ValueError):
        _native.arena_rows(hs, offset, np.zeros(0, np.int64), np.empty(2, np.int64))
    with pytest.raises(ValueError):
        _native.arena_rows(array.array("q", [0, 1, 2]), offset, np.zeros(2, np.int64), np.empty(3, np.int64))
    far = array.array("q", [len(offset) << 24])  # a source past the table: not located, not read
    assert _native.arena_rows(far, offset, one, np.empty(1, np.int64)) is False
