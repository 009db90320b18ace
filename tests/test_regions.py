"""Dynamic regions (acrobat.analysis.regions, Runtime.region): a helper the static tier rejects runs as the user's
own Python inside the static program; outputs and gradients equal plain calls, the rest stays static."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from hypothesis import given, settings, strategies as st

import acrobat as ab
from acrobat.errors import CompileError, DynamicFallbackWarning
from acrobat.runtime.stats import RunStats
from tests import region_progs as rp

BATCHES = (1, 3, 17)


def _trees(n: int, seed: int = 0) -> list[rp.Node]:
    rng = random.Random(seed)
    return [rp.random_tree(rng, rng.randint(1, 9)) for _ in range(n)]


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 7))] for _ in range(n)]


def _check(prog, insts, p, backend: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicFallbackWarning)  # the batch ran where it was compiled to
        out = prog.run(insts, p, backend=backend)
    torch.testing.assert_close(torch.stack(out), torch.stack([prog(x, p) for x in insts]))


@pytest.mark.parametrize("name", sorted(rp.HELPERS))
def test_rejected_helper_is_a_region(name: str) -> None:
    prog, p = rp.TREES[name], rp.Params()
    with pytest.raises(CompileError):
        prog.compile(1, ab.Options(strict=True), (p,))
    c = prog.compile(1, None, (p,))
    assert c.plan.dynamic is None
    assert [r.name for r in c.plan.regions] == [rp.HELPERS[name].__name__]
    text = prog.explain(p)
    assert "runs in the static tier" in text
    assert f"dynamic region `{rp.HELPERS[name].__name__}` ({rp.__file__}:" in text
    assert str(c.plan.regions[0].reason).splitlines()[0] in text  # the CompileError it would have raised


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("name", sorted(rp.HELPERS))
def test_tree_outputs_equal_plain_calls(name: str, batch: int, backend: str) -> None:
    _check(rp.TREES[name], _trees(batch, seed=batch), rp.Params(), backend)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("batch", BATCHES)
def test_tuple_result_in_a_sequence(batch: int, backend: str) -> None:
    p = rp.Params()
    assert [r.name for r in rp.sequence.compile(1, None, (p,)).plan.regions] == ["two_results"]
    _check(rp.sequence, _tokens(batch, seed=batch), p, backend)


@pytest.mark.parametrize("name", ["dict", "generator", "sequence"])
def test_gradients_equal_plain_calls(name: str) -> None:
    prog = rp.sequence if name == "sequence" else rp.TREES[name]
    insts = _tokens(5) if name == "sequence" else _trees(5)
    p = rp.Params()
    out = prog.run(insts, p, backend="eager")
    torch.stack(out).pow(2).sum().backward()
    got = [x.grad for x in p.parameters()]
    p.zero_grad(set_to_none=True)
    torch.stack([prog(x, p) for x in insts]).pow(2).sum().backward()
    assert any(a is not None for a in got)
    for a, x in zip(got, p.parameters()):
        torch.testing.assert_close(a, x.grad)


def test_static_part_stays_static() -> None:
    """The tree's static blocks run batched (one launch per depth over all trees), not as recorded operators."""
    p, st_ = rp.Params(), RunStats()
    trees = [rp.tree_of(3, k) for k in range(8)]  # 8 complete trees of depth 3: 8 leaves, 7 inner nodes each
    rp.TREES["dict"].reset_backends()  # the tier trial starts afresh: its first batch runs batched, not as plain calls
    rp.TREES["dict"].run(trees, p, backend="eager", stats=st_)
    static = {b.name: b for b in st_.blocks.values() if not b.name.endswith("(dynamic)")}
    dynamic = [b for b in st_.blocks.values() if b.name.endswith("(dynamic)")]
    inner = next(b for name, b in static.items() if name.startswith("encode") and not b.hoisted)
    assert inner.nodes == 8 * 7 and inner.launches == 3  # one launch per tree level, all trees together
    gate = next(b for b in dynamic if b.name.startswith("sigmoid"))
    assert gate.nodes == 8 * 7 and gate.launches == 3  # the region's operators batch across trees too
    assert "dynamic regions" in st_.report() and "with_dict" in st_.report()


def test_region_programs_are_on_the_tier_trial() -> None:
    """As a program the static tier rejects wholly, one with a region runs batched or as plain calls by measurement
    (acrobat.runtime.tier), in inference."""
    prog, p = rp.TREES["try"], rp.Params()
    prog.reset_backends()
    with torch.no_grad():
        prog.run(_trees(4), p, backend="eager")
    assert prog.backend("eager", 1)[0].tiers.trials


def test_result_the_static_code_cannot_take_reruns_dynamic() -> None:
    """A region returning host data where its `return` shows a tensor: the batch reruns in the dynamic tier."""
    @ab.program
    def prog(tokens, p):
        h = torch.tanh(p.emb[tokens[0]])
        return h + _maybe_number(h, len(tokens))

    p = rp.Params()
    insts = [[1], [2, 3], [4, 5, 6]]
    with pytest.warns(DynamicFallbackWarning, match="dynamic region `_maybe_number`"):
        out = prog.run(insts, p, backend="eager")
    torch.testing.assert_close(torch.stack(out), torch.stack([prog(x, p) for x in insts]))


def _maybe_number(h, n):
    try:
        return h * n if n > 1 else 0
    except ValueError:
        return h


@pytest.mark.parametrize("prog", [rp.impure_store, rp.impure_append], ids=["attribute store", "append"])
def test_helper_changing_host_state_keeps_whole_program_fallback(prog) -> None:
    p = rp.Params()
    c = prog.compile(1, None, (p,))
    assert c.plan.dynamic is not None and not c.plan.regions
    insts = [rp.Node(1), rp.Node(2)]
    torch.testing.assert_close(torch.stack(prog.run(insts, p, backend="eager")),
                               torch.stack([prog(x, p) for x in insts]))


def test_region_failure_names_instance_and_line() -> None:
    @ab.program
    def prog(tokens, p):
        return _fails_on_five(torch.tanh(p.emb[tokens[0]]), tokens[0])

    with pytest.raises(ab.errors.InstanceError, match=r"instance 1: .*ValueError.*five"):
        prog.run([[1], [5]], rp.Params(), backend="eager")


def _fails_on_five(h, t):
    try:
        if t == 5:
            raise ValueError("five")
    except KeyError:
        pass
    return h


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=6), st.sampled_from(sorted(rp.HELPERS)))
def test_tree_sizes(sizes: list[int], name: str) -> None:
    rng = random.Random(sum(sizes))
    _check(rp.TREES[name], [rp.random_tree(rng, n) for n in sizes], rp.Params(), "eager")
