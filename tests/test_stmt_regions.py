"""Statement regions (acrobat.analysis.outline): one construct the static tier rejects in a statement or loop of
the entry makes that statement a dynamic region; outputs and gradients equal plain calls, the rest stays static,
and a statement that cannot be outlined exactly keeps the whole-program fallback."""

from __future__ import annotations

import inspect
import random
import warnings

import pytest
import torch
from hypothesis import given, settings, strategies as st

import acrobat as ab
from acrobat.errors import CompileError, DynamicFallbackWarning
from acrobat.runtime.stats import RunStats
from tests import stmt_region_progs as sp

BATCHES = (1, 3, 17)
PROGRAMS = {**{f"tree {k}": v for k, v in sp.TREES.items()}, **{f"seq {k}": v for k, v in sp.SEQUENCES.items()}}


def _trees(n: int, seed: int = 0) -> list[sp.Node]:
    rng = random.Random(seed)
    return [sp.random_tree(rng, rng.randint(1, 9)) for _ in range(n)]


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 7))] for _ in range(n)]


def _instances(name: str, n: int, seed: int = 0) -> list:
    return _trees(n, seed) if name.startswith("tree") else _tokens(n, seed)


def _line_of(prog, text: str) -> int:
    lines, first = inspect.getsourcelines(prog.fn)
    return first + next(i for i, line in enumerate(lines) if line.strip().startswith(text))


def _check(prog, insts, p, backend: str) -> None:
    assert prog.compile(1, None, (p,)).plan.dynamic is None  # the static tier, with the statement as a region
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicFallbackWarning)  # the batch ran where it was compiled to
        out = prog.run(insts, p, backend=backend)
    torch.testing.assert_close(torch.stack(out), torch.stack([prog(x, p) for x in insts]))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rejected_statement_is_a_region(name: str) -> None:
    prog, p = PROGRAMS[name], sp.Params()
    c = prog.compile(1, None, (p,))
    assert c.plan.dynamic is None and len(c.plan.regions) == 1
    region = c.plan.regions[0]
    line = _line_of(prog, sp.OUTLINED[prog])
    assert region.where == f"{sp.__file__}:{line}"
    assert region.name.startswith(f"{prog.__name__}_region")
    text = prog.explain(p)
    assert "runs in the static tier" in text
    assert f"the statement at {sp.__file__}:{line} of `{prog.__name__}`" in text
    assert region.reason.splitlines()[0] in text  # the CompileError it would have raised
    with pytest.raises(CompileError) as info:  # Options(strict=True) still rejects, with that same error
        prog.compile(1, ab.Options(strict=True), (p,))
    assert str(info.value) == region.reason


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_outputs_equal_plain_calls(name: str, batch: int, backend: str) -> None:
    _check(PROGRAMS[name], _instances(name, batch, seed=batch), sp.Params(), backend)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_equal_plain_calls(name: str) -> None:
    prog, p = PROGRAMS[name], sp.Params()
    insts = _instances(name, 5)
    assert prog.compile(1, None, (p,)).plan.dynamic is None
    out = prog.run(insts, p, backend="eager")
    torch.stack(out).pow(2).sum().backward()
    got = [x.grad for x in p.parameters()]
    p.zero_grad(set_to_none=True)
    torch.stack([prog(x, p) for x in insts]).pow(2).sum().backward()
    assert any(a is not None for a in got)
    for a, x in zip(got, p.parameters()):
        torch.testing.assert_close(a, x.grad)


def test_static_part_stays_static() -> None:
    """The tree encoder before the `with` region runs batched (one launch per tree level over all trees), and the
    region's own operators batch across trees too."""
    p, stats = sp.Params(), RunStats()
    trees = [sp.tree_of(3, k) for k in range(8)]  # 8 complete trees of depth 3: 8 leaves, 7 inner nodes each
    sp.tree_with.reset_backends()  # the tier trial starts afresh: its first batch runs batched, not as plain calls
    sp.tree_with.run(trees, p, backend="eager", stats=stats)
    static = {b.name: b for b in stats.blocks.values() if not b.name.endswith("(dynamic)")}
    dynamic = [b for b in stats.blocks.values() if b.name.endswith("(dynamic)")]
    inner = next(b for name, b in static.items() if name.startswith("encode") and not b.hoisted)
    assert inner.nodes == 8 * 7 and inner.launches == 3  # one launch per tree level, all trees together
    gate = next(b for b in dynamic if b.name.startswith("sigmoid"))
    assert gate.nodes == 8 and gate.launches == 1  # the region's operator: one launch for the 8 trees
    assert "dynamic regions" in stats.report() and "tree_with_region0" in stats.report()


def test_sequence_loop_body_stays_static() -> None:
    """In `seq_try` only the `try` is a region: the loop body's cell runs as a static block, one node per token."""
    p, stats = sp.Params(), RunStats()
    insts = _tokens(6, seed=1)
    sp.seq_try.reset_backends()
    sp.seq_try.run(insts, p, backend="eager", stats=stats)
    static = [b for b in stats.blocks.values() if not b.name.endswith("(dynamic)")]
    assert any(b.nodes == sum(map(len, insts)) for b in static)


@pytest.mark.parametrize("name", sorted(sp.REFUSED))
def test_statement_that_cannot_be_outlined_keeps_whole_program_fallback(name: str) -> None:
    prog, p = sp.REFUSED[name], sp.Params()
    c = prog.compile(1, None, (p,))
    assert c.plan.dynamic is not None and not c.plan.regions
    insts = _tokens(4)
    torch.testing.assert_close(torch.stack(prog.run(insts, p, backend="eager")),
                               torch.stack([prog(x, p) for x in insts]))


@pytest.mark.parametrize("name, why", [("return", "holds a `return`"), ("lambda", "binds `act` to host data")])
def test_why_a_statement_cannot_be_outlined(name: str, why: str) -> None:
    from acrobat.analysis.outline import outline_region
    prog = sp.REFUSED[name]
    with pytest.raises(CompileError) as info:
        prog.compile(1, ab.Options(strict=True), (sp.Params(),))
    found = outline_region(info.value, prog, {}, ab.function)
    assert isinstance(found, str) and why in found


def test_region_failure_names_instance_and_user_line() -> None:
    line = _line_of(sp.seq_with_raises, 'raise ValueError("token nine")')
    with pytest.raises(ab.errors.InstanceError,
                       match=rf"instance 1: ValueError: token nine .*\n  at {sp.__file__}:{line}: raise ValueError"):
        sp.seq_with_raises.run([[1, 2], [3, 9]], sp.Params(), backend="eager")
    assert sp.seq_with_raises.compile(1, None, (sp.Params(),)).plan.dynamic is None


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=6), st.sampled_from(sorted(PROGRAMS)))
def test_sizes(sizes: list[int], name: str) -> None:
    rng = random.Random(sum(sizes))
    insts = ([sp.random_tree(rng, n) for n in sizes] if name.startswith("tree")
             else [[rng.randrange(10) for _ in range(n)] for n in sizes])
    _check(PROGRAMS[name], insts, sp.Params(), "eager")
