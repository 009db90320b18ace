"""Arena memory and the value table: where batched outputs lie, and that a read never picks the wrong rows."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.runtime.arena import ALIGN, Arena
from acrobat.runtime.dfg import OUTPUT_STEP, ValueTable

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
    pool0 = np.array([[0]], dtype=np.int64)

    rows = table.arena_rows(np.array([[h_a0, h_a1]], dtype=np.int64), pool0)
    assert rows is not None and rows.tolist() == [[13, 23]]
    assert table.arena_rows(np.array([[h_a0, h_b0]], dtype=np.int64), pool0) is None  # b lies in pool 1
    assert table.arena_rows(np.array([[h_a0, unplaced.base]], dtype=np.int64), pool0) is None
    assert table.arena_rows(np.array([[h_b0]], dtype=np.int64), np.array([[1 << 40]], dtype=np.int64)) is not None
