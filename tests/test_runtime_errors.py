"""Run-time errors: an empty batch, and operator failures that name the instance, line and block."""

from __future__ import annotations

import os

import pytest
import torch

from tests import progs

import acrobat

PROGS_FILE = os.path.abspath(progs.__file__)


def marker(key: str) -> int:
    with open(PROGS_FILE, encoding="utf-8") as f:
        hits = [i + 1 for i, line in enumerate(f.read().splitlines()) if line.rstrip().endswith(f"# M:{key}")]
    assert len(hits) == 1
    return hits[0]


def block_of_line(prog, line: int):
    """The static block of ``prog`` holding a statement from model line ``line``."""
    c = prog.compile(1)
    found = [b for b in c.blocks.values() if any(s.loc.line == line for s in b.stmts)]
    assert len(found) == 1, [b.name for b in found]
    return found[0]


@pytest.mark.parametrize("empty", [[], ()], ids=["list", "tuple"])
def test_empty_batch(empty):
    with pytest.raises(acrobat.BatchError, match="empty batch"):
        progs.zeros_prog.run(empty, progs.Small())


def test_empty_batch_is_an_acrobat_error():
    with pytest.raises(acrobat.AcrobatError):
        progs.map_prog.run([], progs.Small())


def test_shape_mismatch_every_instance():
    """``vecs[i] @ W`` with vecs (K, 4) and W (3, 2): every instance fails; instance 0 is reported."""
    p = progs.Mismatch()
    with pytest.raises(RuntimeError):
        progs.mismatch_all(0, p)  # plain Python fails too
    with pytest.raises(acrobat.ShapeError) as info:
        progs.mismatch_all.run([0, 1, 2], p)
    msg = str(info.value)
    line = marker("mismatch_all")
    assert "instance 0" in msg
    assert info.value.instance == 0
    assert f"{PROGS_FILE}:{line}" in msg
    assert "y = x @ p.W" in msg  # the source text of the failing line
    assert "shapes cannot be multiplied" in msg
    assert f"static block {block_of_line(progs.mismatch_all, line).name}" in msg
    assert isinstance(info.value.__cause__, Exception)


def test_shape_mismatch_only_one_instance():
    """Instance data picks a 5-vector for instance 1 only; ``x @ W2`` (W2 is (4, 2)) fails for it alone."""
    p = progs.Mismatch()
    insts = [(False, 0), (True, 1), (False, 2)]
    progs.mismatch_some(insts[0], p)  # plain Python: instances 0 and 2 are fine
    progs.mismatch_some(insts[2], p)
    with pytest.raises(RuntimeError):
        progs.mismatch_some(insts[1], p)
    with pytest.raises(acrobat.ShapeError) as info:
        progs.mismatch_some.run(insts, p)
    msg = str(info.value)
    line = marker("mismatch_some")
    assert info.value.instance == 1
    assert "instance 1" in msg and "instance 0" not in msg
    assert "shapes cannot be multiplied" in msg
    assert f"{PROGS_FILE}:{line}" in msg
    assert f"static block {block_of_line(progs.mismatch_some, line).name}" in msg
    # without the bad instance the batch runs and matches plain Python
    good = [insts[0], insts[2]]
    for inst, out in zip(good, progs.mismatch_some.run(good, p)):
        torch.testing.assert_close(out, progs.mismatch_some(inst, p))


def test_out_of_range_token_names_its_instance():
    """Instance 1 of 3 holds a token id past the vocabulary: its embedding lookup fails."""
    p = progs.Small(vocab=10)
    insts = [[1, 2], [3, 99, 1], [4]]
    with pytest.raises(acrobat.ShapeError) as info:
        progs.index_prog.run(insts, p)
    msg = str(info.value)
    line = marker("bad_index")
    assert info.value.instance == 1
    assert "instance 1" in msg and "IndexError" in msg
    assert f"{PROGS_FILE}:{line}" in msg
    assert f"static block {block_of_line(progs.index_prog, line).name}" in msg
    good = [insts[0], insts[2]]
    for inst, out in zip(good, progs.index_prog.run(good, p)):
        torch.testing.assert_close(out, progs.index_prog(inst, p))


@pytest.mark.parametrize("backend", ["compiled-explicit", "compiled-fused"])
def test_shape_mismatch_with_the_compiled_backend(backend):
    """The compiled backend reports an instance's shape error as the eager one does: instance and line."""
    p = progs.Mismatch()
    insts = [(False, 0), (True, 1), (False, 2)]
    with torch.inference_mode(), pytest.raises(acrobat.ShapeError) as info:
        progs.mismatch_some.run(insts, p, backend=backend)
    assert info.value.instance == 1
    assert f"{PROGS_FILE}:{marker('mismatch_some')}" in str(info.value)
