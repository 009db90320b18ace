"""The dynamic tier's recording of an operator call (acrobat.runtime.dynamic ``Recorder.call``, and its common
case in C, ``acrobat._native.Recording``): the native path signs a call exactly as the Python path does.

Programs mix, at one depth, calls whose signatures differ only in a constant's value or type, in which
shared tensor of one shape they read (two parameters, a value computed once from one), in the instance's
own tensors, keyword arguments and list arguments (the Python path): a key that merged two of them would
give a wrong answer, which the comparison with plain per-instance PyTorch catches.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import acrobat as ab
from acrobat.runtime import dynamic
from tests import dynamic_progs as dp

DYNAMIC = ab.Options(static=False)
STEPS = 10


class Params(nn.Module):
    """Two weights of one shape (``W``, ``V``): keys must tell shared tensors apart by identity."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g, dtype=torch.float64) * 0.5)
        self.W = nn.Parameter(torch.randn(4, 4, generator=g, dtype=torch.float64) * 0.5)
        self.V = nn.Parameter(torch.randn(4, 4, generator=g, dtype=torch.float64) * 0.5)
        self.b = nn.Parameter(torch.randn(4, generator=g, dtype=torch.float64) * 0.1)


@ab.program
def scripted(inst, p):
    """(4,): the steps ``script`` names, one per token, in one instance's order."""
    tokens, script = inst
    h = p.emb[tokens[0]]
    for t, s in zip(tokens, script):
        x = p.emb[t]
        if s == 0:
            h = h @ p.W + x
        elif s == 1:
            h = h @ p.V + x
        elif s == 2:
            h = torch.tanh(h) * 2.0
        elif s == 3:
            h = torch.tanh(h) * 3
        elif s == 4:
            h = 0.5 - h
        elif s == 5:
            a, b = torch.chunk(torch.cat([h, x]), 2)
            h = a * torch.sigmoid(b)
        elif s == 6:
            h = h + torch.full((4,), float(t), dtype=h.dtype)
        elif s == 7:
            h = h @ p.W.t() + p.b
        elif s == 8:
            h = torch.sub(h, x, alpha=2.0)
        else:  # a write through a view: b is half of h, the write changes h, and a, made before, sees h's memory
            h = torch.tanh(h)
            a, b = torch.chunk(h, 2)
            b.mul_(0.5)
            h = h + torch.cat([a.flip(0), b])
    return h


def _python_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call through the Python path: the native one declines all."""

    class Declines:
        def __init__(self, *args: object) -> None:
            pass

        def record(self, func: object, args: tuple, kwargs: dict | None = None) -> object:
            return NotImplemented

    monkeypatch.setattr(dynamic, "Recording", Declines)


def _run(batch: list, p: Params) -> tuple[list[torch.Tensor], list[tuple[str, int, int]], Counter[str]]:
    """The batched results, per block (name, launches, nodes), and per operator how many nodes the Python path
    added."""
    added: Counter[str] = Counter()
    add = dynamic.Recorder.add

    def counting(self, key, *args):
        added[dynamic._name(key[0])] += 1
        return add(self, key, *args)

    dynamic.Recorder.add = counting
    try:
        stats = ab.RunStats()
        with torch.no_grad():
            got = scripted.run(batch, p, backend="eager", options=DYNAMIC, stats=stats)
    finally:
        dynamic.Recorder.add = add
    blocks = sorted((b.name, b.launches, b.nodes) for b in stats.blocks.values())
    return got, blocks, added


batches = st.lists(
    st.integers(1, 6).flatmap(lambda n: st.tuples(st.lists(st.integers(0, 9), min_size=n, max_size=n),
                                                   st.lists(st.integers(0, STEPS - 1), min_size=n, max_size=n))),
    min_size=1, max_size=5)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(batches)
def test_the_native_path_records_what_the_python_path_records(batch):
    p = Params()
    with torch.no_grad():
        want = [scripted(x, p) for x in batch]
    got, blocks, added = _run(batch, p)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    with pytest.MonkeyPatch.context() as mp:
        _python_only(mp)
        got_py, blocks_py, added_py = _run(batch, p)
    torch.testing.assert_close(got_py, want, rtol=1e-9, atol=1e-10)
    assert blocks == blocks_py, "the same nodes in the same launches on both paths"
    nodes = sum(n for _, _, n in blocks)
    assert sum(added_py.values()) == nodes and sum(added.values()) <= nodes


def test_a_signature_of_one_instance_is_not_found_for_another():
    """One depth, one operator, signatures that differ only in a constant (2.0 / 3 / 2), in the shared
    weight of one shape (W / V) or in an instance's own tensor: five launches, each right."""
    p = Params()
    batch = [([1, 2], [2, 0]), ([3, 4], [3, 1]), ([5, 6], [0, 6]), ([7, 8], [1, 2]), ([2, 2], [6, 3])]
    with torch.no_grad():
        want = [scripted(x, p) for x in batch]
    got, blocks, added = _run(batch, p)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    assert sum(added.values()) < sum(n for _, _, n in blocks), "repeated signatures are recorded by the native path"


def test_a_write_through_a_view_made_on_the_native_path():
    """``torch.chunk`` of a lazy value makes views of it; a repeated signature is recorded in C
    (``acrobat._native.Recording`` logs the call in ``Recorder.view_log``), and a write through one of its
    views (``b.mul_(0.5)``) still reaches the value it views and the other view, as in the plain call."""
    p = Params()
    batch = [([1, 2, 3], [9, 0, 9]), ([4, 5], [9, 9]), ([6, 7, 8], [2, 9, 5])]
    with torch.no_grad():
        want = [scripted(x, p) for x in batch]
    got, blocks, added = _run(batch, p)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    chunks = sum(n for name, _, n in blocks if name == "chunk (dynamic)")
    assert chunks == 6 and added["chunk"] < chunks, "views made on the native path"


def test_an_instance_tensor_operand_reads_no_value():
    """``lazy + t`` with ``t`` the instance's own tensor records one operator: reading ``t.requires_grad``
    is not itself recorded (it was, as an eager call per instance, through the recorder's mode)."""
    p = Params()
    stats = ab.RunStats()
    with torch.no_grad():
        scripted.run([([1, 2], [6, 6]), ([3], [6])], p, backend="eager", options=DYNAMIC, stats=stats)
    assert set(stats.dynamic.ops) == {"__getitem__", "full", "__add__"}, stats.dynamic.ops


@ab.program
def _signed_zeros(tokens, p):
    h = p.b
    for t in tokens:
        x = p.emb[t] @ p.W
        h = h + torch.clamp(x / 0.0, -5.0, 5.0) + torch.clamp(x / -0.0, -3.0, 3.0)
    return h


def test_constants_that_compare_equal_but_compute_differently_have_their_own_signatures():
    """``0.0 == -0.0`` as keys: ``x / 0.0`` and ``x / -0.0`` at one depth shared a launch, which computed both
    with the first constant (the wrong sign of infinity for the second)."""
    p = dp.Params()
    batch = [[1, 2], [3], [4, 5, 6]]
    with torch.no_grad():
        want = [_signed_zeros(x, p) for x in batch]
        got = _signed_zeros.run(batch, p, backend="eager", options=ab.Options(static=False))
    torch.testing.assert_close(got, want)


@ab.program
def keywords_and_lists(inst, p):
    """(4,): steps with keyword arguments and list arguments whose signatures differ only in a keyword's value,
    in a list's length or order, or in a keyword's name."""
    tokens, script = inst
    h = p.emb[tokens[0]]
    for t, s in zip(tokens, script):
        x = p.emb[t]
        if s == 0:
            h = torch.sub(h, x, alpha=2.0)
        elif s == 1:
            h = torch.sub(h, x, alpha=3.0)
        elif s == 2:
            h = torch.softmax(torch.stack([h, x]), dim=0)[0]
        elif s == 3:
            h = torch.softmax(torch.stack([h, x]), dim=1)[0]
        elif s == 4:
            h = torch.cat([h, x], dim=0)[1:5]
        elif s == 5:
            h = torch.cat([x, h, x], dim=-1)[3:7]
        elif s == 6:
            h = torch.stack((h, x, h)).sum(dim=0)
        else:
            h = torch.tanh(torch.stack([h, x], dim=1) @ p.W[:2, :1]).reshape(4)
    return h


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 9), min_size=n, max_size=n), st.lists(st.integers(0, 7), min_size=n, max_size=n))),
    min_size=1, max_size=5))
def test_keyword_and_list_arguments_on_the_native_path(batch):
    """Calls with keyword arguments or list arguments are signed in C as the Python path signs them
    (``acrobat._native.Recording``: the items of a list are leaves, the keywords' names part of the structure,
    their values leaves): a key that merged two of these steps' signatures gives a wrong answer here. The
    same batch through the Python path alone makes the same launches."""
    p = Params()
    with torch.no_grad():
        want = [keywords_and_lists(x, p) for x in batch]
    added: Counter[str] = Counter()
    add = dynamic.Recorder.add

    def counting(self, key, *args):
        added[dynamic._name(key[0])] += 1
        return add(self, key, *args)

    results = []
    for python_only in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            if python_only:
                _python_only(mp)
            mp.setattr(dynamic.Recorder, "add", counting)
            stats = ab.RunStats()
            added.clear()
            with torch.no_grad():
                got = keywords_and_lists.run(batch, p, backend="eager", options=DYNAMIC, stats=stats)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
        results.append((sorted((b.name, b.launches, b.nodes) for b in stats.blocks.values()), dict(added)))
    (blocks, native_added), (blocks_py, _) = results
    assert blocks == blocks_py, "the same nodes in the same launches on both paths"
    repeated = [name for name, launches, nodes in blocks if name.startswith(("sub", "cat", "stack")) and nodes > launches]
    for name in repeated:  # a signature met again is recorded in C: the Python path added fewer nodes than launched
        op = name.split(" ")[0]
        assert native_added.get(op, 0) < sum(n for b, _, n in blocks if b == name), name


@ab.program
def lookups(tokens, p):
    """(4,): rows of two tables of one shape (``W``, ``V``) and single entries of ``W``, by per-instance ints."""
    h = p.emb[tokens[0]]
    for t in tokens:
        if t % 3 == 0:
            h = h + p.W[t % 4]
        elif t % 3 == 1:
            h = h * p.V[t % 4]
        else:
            h = h - p.W[t % 4, 3 - t % 4] * p.emb[t]
    return h


def test_lookups_on_the_native_path():
    """A shared table indexed by the instance's ints (``p.emb[t]``, ``p.W[i, j]``) is signed in C as
    ``Recorder.lookup`` signs it (the ints are the node's host values, its key holds ``int``): after the first
    call of a signature the Python path adds none, and each table and index keeps its own rows."""
    p = Params()
    batch = [[t, (t * 7) % 10, (t * 3) % 10, 9 - t] for t in range(10)]
    with torch.no_grad():
        want = [lookups(x, p) for x in batch]
    added: Counter[str] = Counter()
    add = dynamic.Recorder.add

    def counting(self, key, *args):
        added[dynamic._name(key[0])] += 1
        return add(self, key, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dynamic.Recorder, "add", counting)
        stats = ab.RunStats()
        with torch.no_grad():
            got = lookups.run(batch, p, backend="eager", options=DYNAMIC, stats=stats)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    nodes = sum(b.nodes for b in stats.blocks.values() if b.name == "__getitem__ (dynamic)")
    expected = sum(1 + len(x) + sum(t % 3 == 2 for t in x) for x in batch)  # emb[tokens[0]], a row a step, emb[t]
    assert (nodes, added["__getitem__"]) == (expected, 4), "one Python-path call per signature (emb, W, V, W[i, j])"


@ab.program
def _write_into_a_row_looked_up_in_c(t, p):
    first = p.emb[0]  # the signature's first call (the Python path); `p.emb[t]` below is recorded in C
    h = p.emb[t]  # a view of the parameter in PyTorch: the plain call's write changes p.emb
    h.mul_(2.0)
    return h + first


def test_a_write_into_a_lookup_recorded_in_c_is_an_error_not_a_wrong_answer():
    """A lookup recorded on the native path is logged as a view of its shared table as the Python path logs it
    (``Recorder.view_log``), so a write through it is the error the Python path's lookup gives, never a write
    into the instance's own copy."""
    p = Params()
    before = p.emb.detach().clone()
    with torch.no_grad(), pytest.raises(ab.InstanceError, match="view of a tensor every instance shares"):
        _write_into_a_row_looked_up_in_c.run([1, 2, 3], p, backend="eager", options=DYNAMIC)
    torch.testing.assert_close(p.emb.detach(), before)
