"""Host Python over containers of tensors (issue 18, section 2), in the static tier.

Each construct used to send its program to the dynamic tier (or, for a
module chosen by a per-instance value, fail inside a static block); each
now compiles statically (checked with ``Options(strict=True)``) and equals
the program run as plain Python per instance, on both backends.
"""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from tests import container_progs as cp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 6))] for _ in range(n)]


STATIC = ["chained_assignment", "reversed_in_place", "list_truth", "tuple_of_chunks", "values_and_indices",
          "comprehension_rebound", "returned_list_changed", "ranked_by_key", "sorted_by_value"]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", STATIC)
def test_construct_runs_statically_and_equals_plain(name, backend):
    prog = getattr(cp, name)
    p = cp.Params()
    batch = _tokens(9, len(name))
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = prog.run(batch, p, backend=backend, options=STRICT, stats=stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_two_calls_in_one_expression_run_concurrently(backend):
    """`f(encode(node.left), encode(node.right))` without `ab.concurrent`: the analysis proves the calls
    independent and runs them as concurrent calls (§4.1), so they batch as with the annotation."""
    from acrobat.data.synthetic import synthetic_trees
    p = cp.Params()
    trees = synthetic_trees(12, 1, vocab_size=10)
    launches = {}
    nodes = {}
    for prog in (cp.two_calls_in_one_expression, cp.two_calls_annotated, cp.two_calls_as_arguments_of_a_call):
        with torch.no_grad():
            want = [prog(t, p) for t in trees]
        stats = ab.RunStats()
        with torch.inference_mode() if backend == "compiled" else torch.no_grad():
            got = prog.run(trees, p, backend=backend, options=STRICT, stats=stats)
        torch.testing.assert_close(got, want, **TOL)
        launches[prog.__name__] = stats.kernel_launches
        nodes[prog.__name__] = stats.dfg_nodes
    assert launches["two_calls_in_one_expression"] == launches["two_calls_annotated"]
    # `compose(encode(l), encode(r))`: each call made once (the inferred concurrent call once ran the two
    # calls and the statement then made them again, 2**depth times the work; session 10)
    assert nodes["two_calls_as_arguments_of_a_call"] == nodes["two_calls_annotated"]


def test_a_list_returned_from_an_argument_and_changed_is_rejected():
    """A callee that returns its argument list: the caller's change is a change of its own list under another
    name; only a list the callee made (``returned_list_changed``) is followed."""
    with pytest.raises(ab.CompileError, match="the list `ys` is changed in place here"):
        cp.returned_argument_changed.run(_tokens(3), cp.Params(), options=STRICT)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=7), min_size=1, max_size=6), st.booleans())
def test_keyed_ranking_equals_python(batch, reverse):
    """`sorted`/`max`/`min` with `key=lambda` (``acrobat.frontend.keyed``) pick and order exactly as Python does,
    ties included (keys `t % 3` tie often), with and without `reverse`."""
    prog = _KEYED_REVERSED if reverse else _KEYED
    p = cp.Params()
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
        got = prog.run(batch, p, backend="eager", options=STRICT)
    torch.testing.assert_close(got, want, **TOL)


@ab.program
def _KEYED(tokens, p):
    hs = [(t % 3, torch.tanh(p.emb[t])) for t in tokens]
    ranked = sorted(hs, key=lambda c: c[0])
    return [t for t, _ in ranked], max(hs, key=lambda c: c[0])[1], min(range(len(tokens)), key=lambda k: tokens[k] % 3)


@ab.program
def _KEYED_REVERSED(tokens, p):
    hs = [(t % 3, torch.tanh(p.emb[t])) for t in tokens]
    ranked = sorted(hs, key=lambda c: c[0], reverse=True)
    return [t for t, _ in ranked], torch.stack([h for _, h in ranked])
